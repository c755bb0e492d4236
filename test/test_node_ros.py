"""The embodied_r node over real DDS (an isolated domain) with the tiny models.

One node (namespace /robot: raw images, odometry) and a second one (/robot2: compressed images) share one
loaded pipeline; a client node talks to them through topics, the service, the action and the parameter
services, and `embodied-r ask` runs as a separate process. The VLM is wrapped in a gate so that a test can
hold a question inside the model (busy queue, timeout, cancel) without timing assumptions.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from embodied_r_ros.action import AnswerSpatial
from embodied_r_ros.msg import SpatialAnswer, SpatialQuestion
from embodied_r_ros.srv import AskSpatial
from nav_msgs.msg import Odometry
from node_helpers import WAIT_S, Spinning, gated_node, gated_parameters, result_of, wait_for
from rclpy.action import ActionClient
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import CompressedImage, Image
from std_srvs.srv import Trigger

from embodied_r_ros.cli.parts import perceivers
from embodied_r_ros.config import ConfigError
from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.ros.messages import (
    keyframe_stamps_ns,
    ns_to_time,
    odometry_message,
    rgb_image_message,
    stamp_to_ns,
)
from embodied_r_ros.ros.node import EmbodiedRNode
from embodied_r_ros.ros.questions import QueryRequest
from embodied_r_ros.testing.synthetic_clip import synthetic_clip


class System:
    """The nodes under test, a client node, and helpers to feed frames and ask questions."""

    def __init__(self, context, pipeline, config):
        self.node = EmbodiedRNode(
            pipeline=pipeline,
            context=context,
            namespace="robot",
            parameter_overrides=gated_parameters(
                config, **{"camera.qos": "reliable", "camera.qos_depth": 100}
            ),
        )
        self.compressed_node = EmbodiedRNode(
            pipeline=pipeline,
            context=context,
            namespace="robot2",
            parameter_overrides=gated_parameters(
                config,
                **{"camera.compressed": True, "pose.topic": "", "query.pre_encode_keyframes": False},
            ),
        )
        self.client = rclpy.create_node("test_client", context=context)
        c = self.client
        depth = QoSProfile(depth=200)
        self.image_pub = c.create_publisher(Image, "/robot/camera/image_raw", depth)
        self.odom_pub = c.create_publisher(Odometry, "/robot/odom", depth)
        self.compressed_pub = c.create_publisher(
            CompressedImage, "/robot2/camera/image_raw/compressed", depth
        )
        self.question_pub = c.create_publisher(SpatialQuestion, "/robot/embodied_r/question", 10)
        self.ask_client = c.create_client(AskSpatial, "/robot/embodied_r/ask")
        self.ask_client2 = c.create_client(AskSpatial, "/robot2/embodied_r/ask")
        self.reset_client = c.create_client(Trigger, "/robot/embodied_r/reset")
        self.action = ActionClient(c, AnswerSpatial, "/robot/embodied_r/answer")
        self.params = AsyncParameterClient(c, "/robot/embodied_r")
        self.answers: list = []
        self.keyframes: dict[int, Image] = {}
        self.diagnostics: list = []
        c.create_subscription(SpatialAnswer, "/robot/embodied_r/answers", self.answers.append, 50)
        latched = QoSProfile(depth=64, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        c.create_subscription(
            Image,
            "/robot/embodied_r/keyframes",
            lambda m: self.keyframes.update({stamp_to_ns(m.header.stamp): m}),
            latched,
        )
        c.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 50)
        self.spinning = Spinning(context, self.node, self.compressed_node, self.client, threads=16)
        self.next_ns = 1_700_000_000 * NS_PER_S
        for client in (self.ask_client, self.ask_client2, self.reset_client):
            assert client.wait_for_service(timeout_sec=WAIT_S)
        assert self.action.wait_for_server(timeout_sec=WAIT_S) and self.params.wait_for_services(WAIT_S)
        assert wait_for(
            lambda: self.image_pub.get_subscription_count() and self.odom_pub.get_subscription_count()
        )
        assert wait_for(lambda: self.compressed_pub.get_subscription_count() > 0)
        assert wait_for(lambda: self.node.count_subscribers("/robot/embodied_r/answer/_action/feedback") > 0)

    def close(self):
        self.spinning.close()
        for node in (self.node, self.compressed_node, self.client):
            node.destroy_node()

    # ---- feeding

    def _clip(self, seconds: float, start_ns: int | None, yaw_rate_deg: float = 15.0):
        start = self.next_ns if start_ns is None else start_ns
        clip = synthetic_clip(
            seconds=seconds, fps=5.0, size=(160, 120), start_ns=start, yaw_rate_deg=yaw_rate_deg
        )
        self.next_ns = clip.frames[-1].stamp_ns + NS_PER_S
        return clip

    def feed(
        self,
        seconds: float = 3.0,
        *,
        odometry: bool = True,
        start_ns: int | None = None,
        yaw_rate_deg: float = 15.0,
    ) -> list[int]:
        """Publish a clip (and its odometry) to /robot and wait until the node has taken every frame."""
        clip = self._clip(seconds, start_ns, yaw_rate_deg)
        received = self.node.stats.frames_received
        odometry_received = self.node.history.poses.received
        for frame in clip.frames:
            if odometry:
                self.odom_pub.publish(odometry_message(frame.stamp_ns, frame.pose))
            self.image_pub.publish(rgb_image_message(frame.image, frame.stamp_ns, "camera"))
            time.sleep(0.003)
        assert wait_for(lambda: self.node.stats.frames_received >= received + len(clip.frames))
        if odometry:
            assert wait_for(lambda: self.node.history.poses.received >= odometry_received + len(clip.frames))
        return [f.stamp_ns for f in clip.frames]

    def feed_compressed(self, seconds: float = 3.0) -> list[int]:
        clip = self._clip(seconds, None)
        for frame in clip.frames:
            jpeg = cv2.imencode(".jpg", cv2.cvtColor(frame.image, cv2.COLOR_RGB2BGR))[1].tobytes()
            message = CompressedImage(format="jpeg", data=jpeg)
            message.header.stamp = ns_to_time(frame.stamp_ns)
            self.compressed_pub.publish(message)
            time.sleep(0.01)
        assert wait_for(lambda: self.compressed_node.newest_ns == clip.frames[-1].stamp_ns)
        return [f.stamp_ns for f in clip.frames]

    # ---- asking

    def ask_async(self, question: str, options=(), window_s: float = 0.0, client=None):
        request = AskSpatial.Request(question=question, options=list(options), window_seconds=window_s)
        return (client or self.ask_client).call_async(request)

    def ask(self, question: str, options=(), window_s: float = 0.0, client=None, timeout: float = WAIT_S):
        return result_of(self.ask_async(question, options, window_s, client), timeout)

    def set_params(self, *parameters: Parameter):
        return result_of(self.params.set_parameters(list(parameters))).results


@pytest.fixture(scope="module")
def system(ros_context, gated_pipeline):
    pipeline, gate, config = gated_pipeline
    system = System(ros_context, pipeline, config)
    yield system
    gate.open()
    system.close()


@pytest.fixture
def gate(gated_pipeline):
    gate = gated_pipeline[1]
    yield gate
    gate.open()


# ------------------------------------------------------------------------------------------ tests


def test_service_answer_with_odometry_actions_and_evidence_topics(system):
    stamps = system.feed(6.0)
    response = system.ask("Which way did I turn?", ["left", "right"], window_s=5.0)
    assert response.success, response.message
    answer = response.answer
    assert answer.question == "Which way did I turn?" and list(answer.options) == ["left", "right"]
    keyframes = keyframe_stamps_ns(answer)
    assert 4 <= len(keyframes) <= 32 and keyframes == sorted(keyframes)
    assert set(keyframes) <= set(stamps) and keyframes[-1] == stamps[-1]
    assert keyframes[0] >= stamps[-1] - 5 * NS_PER_S  # the 5 s window
    assert len(answer.keyframe_descriptions) == len(keyframes)
    # Odometry accompanied every frame, so every action between key frames comes from it.
    assert all(d.startswith("After I ") for d in answer.keyframe_descriptions[1:])
    assert answer.choice in ("", "A", "B") and math.isnan(answer.value)
    assert answer.perception_seconds > 0 and answer.reasoning_seconds > 0
    # The answer and its key frames are published too.
    assert wait_for(lambda: any(a.query_id == answer.query_id for a in system.answers))
    assert wait_for(lambda: set(keyframes) <= set(system.keyframes))
    image = system.keyframes[keyframes[0]]
    assert (image.encoding, image.width, image.height, image.header.frame_id) == ("rgb8", 160, 120, "camera")


def test_new_key_frames_are_encoded_while_idle(system, gated_pipeline):
    cache = gated_pipeline[0].perceiver.backend.inner.image_cache
    size, hits = len(cache), cache.hits
    system.feed(4.0, yaw_rate_deg=45.0)  # a fast turn: every candidate becomes a key frame
    assert wait_for(lambda: len(cache) >= size + 3)
    response = system.ask("What did I pass?", window_s=3.8)
    assert response.success, response.message
    # The question found the stored key frames already encoded (only the newest frame was new).
    assert cache.hits >= hits + 3


def test_without_odometry_the_vlm_names_the_actions(system):
    assert result_of(system.reset_client.call_async(Trigger.Request())).success
    system.feed(5.0, odometry=False)
    response = system.ask("Where is the door?")
    assert response.success, response.message
    assert not any(d.startswith("After I ") for d in response.answer.keyframe_descriptions)


def test_action_reports_every_stage_then_the_result(system):
    system.feed(3.0)
    feedback = []
    sent = result_of(
        system.action.send_goal_async(
            AnswerSpatial.Goal(question="How far did I walk?"),
            feedback_callback=lambda m: feedback.append((m.feedback.stage, m.feedback.progress)),
        )
    )
    assert sent.accepted
    outcome = result_of(sent.get_result_async())
    assert outcome.status == GoalStatus.STATUS_SUCCEEDED and outcome.result.success, outcome.result.message
    assert outcome.result.answer.question == "How far did I walk?"
    assert wait_for(lambda: len(feedback) >= 5, timeout=5), feedback
    assert [stage for stage, _ in feedback] == ["queued", "keyframes", "perception", "reasoning", "done"]
    assert [p for _, p in feedback] == sorted(p for _, p in feedback) and feedback[-1][1] == 1.0


def test_action_cancel_while_the_model_works_and_the_node_answers_after(system, gate):
    system.feed(3.0)
    gate.close()
    sent = result_of(system.action.send_goal_async(AnswerSpatial.Goal(question="Where did I start?")))
    assert sent.accepted and gate.entered.wait(WAIT_S)
    result_of(sent.cancel_goal_async())
    outcome = result_of(sent.get_result_async())
    assert outcome.status == GoalStatus.STATUS_CANCELED
    assert not outcome.result.success and "cancelled" in outcome.result.message
    gate.open()
    assert system.ask("And now?").success


def test_busy_queue_answers_at_once_over_its_bound(system, gate):
    system.feed(3.0)
    gate.close()
    first = system.ask_async("first?")
    assert gate.entered.wait(WAIT_S)
    second = system.ask_async("second?")
    assert wait_for(lambda: system.node.worker.waiting == 1)
    third = system.ask("third?")  # answered while the first still sits in the model
    assert not gate._open.is_set()
    assert not third.success and "busy" in third.message
    gate.open()
    assert result_of(first).success and result_of(second).success


def test_timeout_fails_the_question_and_the_node_stays_usable(system, gate):
    system.feed(3.0)
    assert all(r.successful for r in system.set_params(Parameter("query.timeout_s", value=1.0)))
    gate.close()
    response = system.ask("Slow question?")
    assert not response.success and "timed out after 1 s" in response.message
    gate.open()
    assert all(r.successful for r in system.set_params(Parameter("query.timeout_s", value=60.0)))
    later = system.ask("Fast question?")
    assert later.success, later.message


def test_reset_clears_history_and_an_empty_window_says_so(system):
    system.feed(2.0)
    reset = result_of(system.reset_client.call_async(Trigger.Request()))
    assert reset.success and "history cleared" in reset.message
    assert len(system.node.history.buffer) == 0 and len(system.node.history.selector) == 0
    response = system.ask("What is ahead?")
    assert not response.success and "no camera frames" in response.message


def test_stamps_jumping_back_clear_the_old_history(system):
    system.feed(3.0)
    earlier = system.node.history.buffer.oldest_ns - 100 * NS_PER_S  # a bag that loops
    stamps = system.feed(3.0, start_ns=earlier)
    assert system.node.history.buffer.oldest_ns >= stamps[0] and system.node.newest_ns == stamps[-1]
    response = system.ask("Where am I?", window_s=600.0)
    assert response.success and set(keyframe_stamps_ns(response.answer)) <= set(stamps)


def test_malformed_images_are_dropped_counted_and_the_node_keeps_answering(system):
    node = system.node
    before, received = dict(node.stats.dropped), node.stats.frames_received
    good = rgb_image_message(np.zeros((8, 8, 3), np.uint8), system.next_ns, "camera")
    bad = []
    for change in (
        dict(step=5),  # wrong step
        dict(data=bytes(10)),  # size mismatch
        dict(encoding="32FC1"),  # unknown encoding
        dict(height=0, width=0, step=0, data=b""),  # zero size
    ):
        message = Image(
            **{k: getattr(good, k) for k in ("height", "width", "encoding", "step")}, data=good.data
        )
        message.header = good.header
        for key, value in change.items():
            setattr(message, key, value)
        bad.append(message)
    for message in bad:
        system.image_pub.publish(message)
    stamps = system.feed(2.0)
    assert wait_for(lambda: node.stats.frames_received >= received + len(bad) + len(stamps))
    for reason in ("wrong_step", "size_mismatch", "unknown_encoding", "zero_size"):
        assert node.stats.dropped.get(reason, 0) == before.get(reason, 0) + 1, reason
    assert system.ask("Still there?").success
    answered = len(system.diagnostics)
    # /diagnostics counts them (in an array published after the answer, which then has its latency).
    mine = "/robot/embodied_r: embodied spatial reasoner"

    def dropped_in_diagnostics():
        for array in list(system.diagnostics)[answered:]:
            for status in array.status:
                values = {kv.key: kv.value for kv in status.values}
                if status.name == mine and int(values["frames_dropped"]) >= 4:
                    return values
        return None

    assert wait_for(lambda: dropped_in_diagnostics() is not None)
    values = dropped_in_diagnostics()
    for key in (
        "frames_received",
        "keyframes_held",
        "process_memory_mb",
        "last_query_latency_s",
        "last_query.perception_s",
        "vlm",
        "lm",
    ):
        assert key in values, key
    assert float(values["process_memory_mb"]) > 0 and int(values["frames_dropped.unknown_encoding"]) >= 1


def test_compressed_camera(system):
    stamps = system.feed_compressed(4.0)
    response = system.ask("What did I see?", client=system.ask_client2)
    assert response.success, response.message
    keyframes = keyframe_stamps_ns(response.answer)
    assert len(keyframes) >= 4 and set(keyframes) <= set(stamps)
    assert system.compressed_node.stats.dropped == {}


def test_frames_the_middleware_drops_are_counted_as_lost(system, monkeypatch):
    node = system.compressed_node  # sensor-data QoS: a best-effort reader keeping the newest 5
    push, entered, hold = node.history.selector.push, threading.Event(), threading.Event()

    def slow_push(frame):  # a camera callback starved for CPU: the reader's queue overflows meanwhile
        entered.set()
        assert hold.wait(30)
        return push(frame)

    monkeypatch.setattr(node.history.selector, "push", slow_push)
    received, lost = node.stats.frames_received, node.stats.frames_lost
    clip = system._clip(6.0, None)  # 30 frames
    for i, frame in enumerate(clip.frames):
        jpeg = cv2.imencode(".jpg", cv2.cvtColor(frame.image, cv2.COLOR_RGB2BGR))[1].tobytes()
        message = CompressedImage(format="jpeg", data=jpeg)
        message.header.stamp = ns_to_time(frame.stamp_ns)
        system.compressed_pub.publish(message)
        if i == 0:
            assert entered.wait(WAIT_S)
        time.sleep(0.01)
    time.sleep(0.5)
    hold.set()
    assert wait_for(lambda: node.newest_ns == clip.frames[-1].stamp_ns)
    got, missed = node.stats.frames_received - received, node.stats.frames_lost - lost
    assert got < len(clip.frames) and missed > 0
    assert got + missed == len(clip.frames)  # every frame is either received or counted lost
    status = {kv.key: kv.value for s in system.diagnostics[-1].status for kv in s.values}
    assert "frames_lost" in status


def test_frames_sent_before_the_subscription_matched_are_counted_apart(system):
    """A camera that starts publishing at once (a bag player, a driver): what it sent before the node's
    subscription matched never arrives and is no gap; received + lost + before-first is what it published."""
    node = system.compressed_node
    received, lost, before = (
        node.stats.frames_received, node.stats.frames_lost, node.stats.frames_before_first
    )
    publisher = system.client.create_publisher(
        CompressedImage, "/robot2/camera/image_raw/compressed", QoSProfile(depth=200)
    )  # a new writer: its numbers start at 1 (left to the client: destroying it under the spin is noisy)
    clip = system._clip(4.0, None)  # 20 frames
    for i, frame in enumerate(clip.frames):
        jpeg = cv2.imencode(".jpg", cv2.cvtColor(frame.image, cv2.COLOR_RGB2BGR))[1].tobytes()
        message = CompressedImage(format="jpeg", data=jpeg)
        message.header.stamp = ns_to_time(frame.stamp_ns)
        publisher.publish(message)  # the first ones go out before discovery has matched the two
        if i == 4:
            assert wait_for(lambda: publisher.get_subscription_count() > 0)
        time.sleep(0.02)
    assert wait_for(lambda: node.newest_ns == clip.frames[-1].stamp_ns)
    got = node.stats.frames_received - received
    missed = node.stats.frames_lost - lost
    early = node.stats.frames_before_first - before
    assert got + missed + early == len(clip.frames) and got > 0
    assert wait_for(
        lambda: {kv.key: kv.value for s in system.diagnostics[-1].status for kv in s.values}.get(
            "frames_published_before_first_received"
        )
        == str(node.stats.frames_before_first)
    )


def test_question_topic_is_answered_on_the_answers_topic_under_the_askers_id(system):
    system.feed(2.0)
    system.question_pub.publish(SpatialQuestion(query_id="mine-1", question="What did I see last?"))
    assert wait_for(lambda: any(a.query_id == "mine-1" for a in system.answers))
    (answer,) = [a for a in system.answers if a.query_id == "mine-1"]
    assert answer.success and answer.question == "What did I see last?" and len(answer.keyframe_stamps) >= 1
    assert answer.completion and answer.message.startswith("answered from")  # the LM's raw output is there
    system.question_pub.publish(SpatialQuestion(question="And without an id?"))  # the node makes one
    assert wait_for(lambda: any(a.question == "And without an id?" for a in system.answers))
    (made,) = [a for a in system.answers if a.question == "And without an id?"]
    assert made.query_id.startswith("q") and made.query_id != "mine-1"


def test_topic_questions_refused_at_once_are_counted_and_never_queued(system, gate):
    system.feed(2.0)
    gate.close()  # a question that reached the models would wait here; a refused one never does
    failed, busy = (system.node.stats.outcomes.get(status, 0) for status in ("failed", "busy"))
    system.question_pub.publish(  # over query.max_question_chars: the asker hears why on ~/answers
        SpatialQuestion(query_id="long", question="Which way did I turn? " * 200)
    )
    assert wait_for(lambda: system.node.stats.outcomes.get("failed", 0) == failed + 1)
    assert wait_for(lambda: any(a.query_id == "long" for a in system.answers))
    (long,) = [a for a in system.answers if a.query_id == "long"]
    assert not long.success and "query.max_question_chars" in long.message
    assert system.node.worker.running is None and system.node.worker.waiting == 0
    system.question_pub.publish(SpatialQuestion(question="First on the topic?"))
    assert gate.entered.wait(WAIT_S)
    system.question_pub.publish(SpatialQuestion(question="Second on the topic?"))  # waits (queue_length 1)
    assert wait_for(lambda: system.node.worker.waiting == 1)
    system.question_pub.publish(SpatialQuestion(query_id="third", question="Third on the topic?"))
    assert wait_for(lambda: system.node.stats.outcomes.get("busy", 0) == busy + 1)
    gate.open()
    answered = {"First on the topic?", "Second on the topic?"}
    assert wait_for(lambda: answered <= {a.question for a in system.answers if a.success})
    (third,) = [a for a in system.answers if a.query_id == "third"]
    assert not third.success and third.message.startswith("busy")


def test_oversized_questions_are_refused_at_once_and_the_node_keeps_answering(system, gate):
    system.feed(2.0)
    gate.close()  # a request that reached the models would wait here; a refused one never does
    huge = system.ask("Which way did I turn? " * 5000, ["left", "right"], timeout=10.0)  # 110 kB
    assert not huge.success and "query.max_question_chars" in huge.message and "110000" in huge.message
    many = system.ask("Which one?", [f"object {i}" for i in range(27)], timeout=10.0)
    assert not many.success and "too many options: 27" in many.message
    wordy = system.ask("Which one?", ["left", "x" * 201], timeout=10.0)
    assert not wordy.success and "option 2 too long" in wordy.message
    assert system.node.worker.running is None and system.node.worker.waiting == 0
    (bound,) = system.set_params(Parameter("query.max_question_chars", value=10))
    assert bound.successful
    refused = system.ask("Which way did I turn?", timeout=10.0)
    assert not refused.success and "at most 10 (query.max_question_chars)" in refused.message
    system.set_params(Parameter("query.max_question_chars", value=2000))
    gate.open()
    assert system.ask("Which way did I turn?", ["left", "right"]).success


def test_parameters_are_validated_with_reasons(system):
    (negative,) = system.set_params(Parameter("query.timeout_s", value=-1.0))
    assert not negative.successful and "out of range" in negative.reason
    (too_long,) = system.set_params(Parameter("query.queue_length", value=100))
    assert not too_long.successful and "queue_length" in too_long.reason
    (read_only,) = system.set_params(Parameter("vlm.model", value="other-model"))
    assert not read_only.successful and "read-only" in read_only.reason
    (wrong_type,) = system.set_params(Parameter("query.window_s", value="long"))
    assert not wrong_type.successful
    (ok,) = system.set_params(Parameter("query.queue_length", value=3))
    assert ok.successful and system.node.worker.queue_length == 3
    assert system.node.params.config.query.queue_length == 3
    system.set_params(Parameter("query.queue_length", value=1))


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("keyframes.min_keyframes", 40, "max_keyframes must be >= keyframes.min_keyframes"),
        ("camera.qos", "fast", "camera.qos must be one of"),
        ("buffer.memory_mb", -1.0, "out of range"),
        ("buffer.memory_mb", 256, "must be a float"),
        # A parameter that moved into a section is not silently ignored (ROS would drop it).
        ("lm.device", "cpu", r"unknown parameter\(s\) lm.device \(did you mean lm.transformers.device\?\)"),
        ("vlm.backend", "ground_truth", "set perception.perceiver: ground_truth and perception.scene"),
    ],
)
def test_bad_start_parameters_stop_the_node_with_a_reason(ros_context, gated_pipeline, name, value, words):
    pipeline, _, config = gated_pipeline
    with pytest.raises(ConfigError, match=words) as info:
        EmbodiedRNode(
            pipeline=pipeline,
            context=ros_context,
            node_name="embodied_r_bad",
            parameter_overrides=[Parameter(name, value=value)],
        )
    assert name in str(info.value) or name.split(".")[0] in str(info.value)


def test_a_client_in_another_process(system, tmp_path: Path):
    stamps = system.feed(4.0)
    command = shutil.which("embodied-r")
    assert command, "embodied-r is not on PATH: build with `make build` and source install/setup.bash"
    common = ["--node", "/robot/embodied_r", "--wait", "30", "--window", "3.8"]  # this clip only
    result = subprocess.run(
        [command, "ask", "Which way did I turn?", "--options", "left", "right", "--json", *common],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["success"] and record["options"] == ["left", "right"]
    assert set(record["keyframe_stamps_ns"]) <= set(stamps) and len(record["keyframe_descriptions"]) >= 4
    report = tmp_path / "report.html"
    result = subprocess.run(
        [command, "ask", "How far did I walk?", "--action", "--report", str(report), *common],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    assert "perception" in result.stdout and "reasoning:" in result.stdout and "key frames" in result.stdout
    html = report.read_text()
    assert "How far did I walk?" in html and html.count("data:image/jpeg;base64,") >= 4


def test_stamp_helpers():
    assert stamp_to_ns(Time(sec=3, nanosec=7)) == 3 * NS_PER_S + 7
    assert stamp_to_ns(ns_to_time(5 * NS_PER_S + 9)) == 5 * NS_PER_S + 9


def test_ground_truth_perception_for_a_simulator_scene(ros_context, tiny_models_dir, tmp_path: Path):
    import ground_truth_scene as scene

    values = {
        "perception.perceiver": "ground_truth",
        "perception.scene": str(scene.write_scene(tmp_path)),
        "lm.model": str(tiny_models_dir / "lm"),
        "lm.transformers.device": "cpu",
        "lm.transformers.dtype": "float32",
        "lm.max_new_tokens": 8,
        "pose.topic": "",
        "query.window_s": 600.0,
    }
    node = EmbodiedRNode(
        perceivers=perceivers(),
        context=ros_context,
        node_name="embodied_r_ground_truth",
        parameter_overrides=[Parameter(name, value=value) for name, value in values.items()],
    )
    try:
        assert node.served.cameras[""].encode is None  # no vision tower: no key frames to pre-encode
        diagnostics = {kv.key: kv.value for kv in node.diagnostics().values}
        assert diagnostics["vlm"].startswith("ground-truth perception (simulator geometry, not a VLM)")
        image = np.zeros((120, 160, 3), np.uint8)  # ground truth reads the stamps, not the pixels
        for step in range(17):  # 0 .. 4 s of the scene at 4 Hz
            node.inputs.on_image(
                rgb_image_message(image, scene.START_NS + step * NS_PER_S // 4, "camera"), None
            )
        outcome = node.questions.ask(
            QueryRequest("Is the red chair nearer than the yellow lamp?", ("yes", "no"))
        )
        assert outcome.success, outcome.message
        descriptions = list(outcome.answer.keyframe_descriptions)
        assert descriptions[0] == (
            "I see red chair ahead, near, 2 m, longest side 0.60 m, at (2.00, 0.00, 1.25); yellow lamp "
            "left, far, 3.5 m, longest side 1.60 m, at (3.00, 1.40, 1.25). Positions are metres from where I "
            "stand: x ahead, y left, z above the floor."
        )
        assert descriptions[1].startswith("After move forward: ")  # no odometry: the instrument's label
    finally:
        node.destroy_node()


def test_node_and_prepare_choose_the_same_key_frames_for_a_replayed_bag(
    ros_context, gated_pipeline, tmp_path
):
    """One rule (issue 11): a bag played over DDS into a running node and the same bag through `prepare`'s
    key-frame pass give the same key frames for the same windows, mid-stream ones included."""
    from embodied_r_training.data.bag_reader import BagReader, BagTopics
    from embodied_r_training.data.prepare import bag_keyframes
    from test_node_cli import image, write_bag

    from embodied_r_ros.cli.play import play_bag
    from embodied_r_ros.config import KeyFrameConfig
    from embodied_r_ros.keyframes import select_keyframes

    gate = gated_pipeline[1]
    gate.open()
    clip = synthetic_clip(seconds=14.0, fps=8.0, size=(160, 120), yaw_rate_deg=25.0)
    bag = tmp_path / "bag"
    write_bag(bag, [("/camera/image_raw", f.stamp_ns, image(f.stamp_ns, f.image)) for f in clip.frames])
    overrides = {"camera.qos": "reliable", "camera.qos_depth": 200, "pose.topic": ""}
    node = gated_node(ros_context, gated_pipeline, "parity", **overrides)
    client = rclpy.create_node("parity_client", context=ros_context)
    spinning = Spinning(ros_context, node, client, threads=4)
    try:
        remap = ["--ros-args", "-r", "/camera/image_raw:=/parity/camera/image_raw"]
        stats = play_bag(bag, rate=2.0, wait_subscribers_s=WAIT_S, args=remap)
        assert stats.published["/camera/image_raw"] == len(clip.frames)
        assert wait_for(lambda: node.stats.frames_received == len(clip.frames))  # reliable: none lost
        end = clip.frames[-1].stamp_ns
        assert node.newest_ns == end
        ask = client.create_client(AskSpatial, "/parity/embodied_r/ask")
        assert ask.wait_for_service(timeout_sec=WAIT_S)
        seconds = [600.0, 11.3, 8.0, 5.6, 2.9]  # the whole bag, then the last seconds from mid-stream
        windows = [(end - round(s * NS_PER_S), end) for s in seconds]
        stamps = [f.stamp_ns for f in clip.frames]
        intervals = [(stamps[20], stamps[70]), (stamps[33] + 1, stamps[90]), (stamps[0], stamps[45])]
        answered = []
        for (start, stop), window_s in zip(windows + intervals, seconds + [0.0] * 3, strict=True):
            absolute = window_s == 0.0  # the intervals: asked by their stamps, after the bag ended
            start, stop = (start, stop) if absolute else (0, 0)
            request = AskSpatial.Request(
                question="Which way did I turn?", options=["left", "right"], window_seconds=window_s,
                start_stamp=ns_to_time(start), end_stamp=ns_to_time(stop),
            )  # fmt: skip
            response = result_of(ask.call_async(request), 60.0)
            assert response.success, response.message
            answered.append(keyframe_stamps_ns(response.answer))
        future = [(end + 5 * NS_PER_S, end + 9 * NS_PER_S)]
        request = AskSpatial.Request(question="q", start_stamp=ns_to_time(future[0][0]))
        response = result_of(ask.call_async(request), 60.0)
        assert not response.success and "reaches into the future" in response.message
    finally:
        spinning.close()
        node.destroy_node()
        client.destroy_node()
    with BagReader(bag, BagTopics(odometry="")) as reader:
        prepared = bag_keyframes(reader, windows + intervals, KeyFrameConfig())
    assert [[k.frame.stamp_ns for k in found] for found in prepared] == answered
    assert all(len(stamps) >= 2 for stamps in answered)
    restarted = [
        [k.frame.stamp_ns for k in select_keyframes([f for f in clip.frames if lo <= f.stamp_ns <= hi])]
        for lo, hi in windows + intervals
    ]
    assert restarted[0] == answered[0] and restarted != answered  # the old per-window rule differed


def test_one_stale_or_future_stamp_and_bad_odometry_lose_nothing(system):
    """A single frame 30 s back or a day ahead is dropped and counted, the history stays; odometry with a
    zero or NaN quaternion is dropped and counted and no question fails for it (issue 11, item 7)."""
    node = system.node
    stamps = system.feed(3.0)
    before, before_poses = dict(node.stats.dropped), dict(node.stats.poses_dropped)
    image = np.zeros((120, 160, 3), np.uint8)
    received = node.stats.frames_received
    for glitch in (stamps[-1] - 30 * NS_PER_S, stamps[-1] + 86_400 * NS_PER_S):
        system.image_pub.publish(rgb_image_message(image, glitch, "camera"))
    bad = [odometry_message(stamps[5], Pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)))]
    bad.append(odometry_message(stamps[6], Pose((math.nan, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))))
    for message in bad:
        system.odom_pub.publish(message)
    assert wait_for(lambda: node.stats.frames_received == received + 2)
    bad_odometry = before_poses.get("bad_odometry", 0) + 2  # pose messages dropped: not frames
    assert wait_for(lambda: node.stats.poses_dropped.get("bad_odometry", 0) == bad_odometry)
    assert "bad_odometry" not in node.stats.dropped
    assert node.stats.dropped.get("stamp_jump", 0) == before.get("stamp_jump", 0) + 2
    assert node.newest_ns == stamps[-1] and node.history.buffer.oldest_ns <= stamps[0]
    later = system.feed(2.0)  # the stream goes on as if nothing happened
    response = system.ask("Which way did I turn?", ["left", "right"], window_s=600.0)
    assert response.success, response.message
    assert set(stamps) & set(keyframe_stamps_ns(response.answer)) and node.newest_ns == later[-1]


def test_stamp_guard_believes_a_jump_only_when_it_persists():
    from embodied_r_ros.stamp_guard import OK, RESTART, SUSPECT, StampGuard

    guard = StampGuard(back_s=1.0)
    newest = 1000 * NS_PER_S
    assert guard.check(newest - NS_PER_S // 2, newest) == OK  # within the tolerance
    assert guard.check(newest - 30 * NS_PER_S, newest) == SUSPECT
    assert guard.check(newest + NS_PER_S, newest) == OK  # back on the old time base: forgotten
    loop = [newest - 500 * NS_PER_S + i * NS_PER_S // 10 for i in range(3)]  # a bag that loops
    assert [guard.check(s, newest) for s in loop] == [SUSPECT, SUSPECT, RESTART]
    assert guard.check(newest + 10 * NS_PER_S, newest) == OK  # a camera paused for 10 s: a gap, not a jump
    day = newest + 86_400 * NS_PER_S
    assert guard.check(day, newest) == SUSPECT and guard.check(day - NS_PER_S, newest) == SUSPECT  # not later
    assert StampGuard(back_s=0.0).check(newest - 500 * NS_PER_S, newest) == OK  # 0: never doubted


def test_the_camera_is_taken_even_while_the_node_executor_is_stuck(ros_context, gated_pipeline):
    """The camera subscription has a thread of its own: frames arrive while nothing spins the node, as when
    every executor thread waits on a question; the subscription is the node's own (ros2 node info)."""
    node = gated_node(ros_context, gated_pipeline, "robot3", **{"camera.qos": "reliable", "pose.topic": ""})
    camera = rclpy.create_node("camera_driver", context=ros_context)
    try:
        publisher = camera.create_publisher(Image, "/robot3/camera/image_raw", QoSProfile(depth=50))
        assert wait_for(lambda: publisher.get_subscription_count() > 0)
        clip = synthetic_clip(seconds=2.0, fps=5.0, size=(160, 120), start_ns=1_700_000_000 * NS_PER_S)
        for frame in clip.frames:
            publisher.publish(rgb_image_message(frame.image, frame.stamp_ns, "camera"))
            time.sleep(0.01)
        assert wait_for(lambda: node.stats.frames_received == len(clip.frames))
        assert node.newest_ns == clip.frames[-1].stamp_ns
        subscribed = dict(camera.get_subscriber_names_and_types_by_node("embodied_r", "/robot3"))
        assert subscribed["/robot3/camera/image_raw"] == ["sensor_msgs/msg/Image"]
        assert [name for name, _ in camera.get_node_names_and_namespaces() if "camera" in name] == [
            "camera_driver"
        ]  # no hidden helper node
        camera_thread = node.inputs.camera
    finally:
        node.destroy_node()
        camera.destroy_node()
    assert not camera_thread.alive  # destroying the node stops its camera thread
