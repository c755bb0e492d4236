"""The node's durable memory over real DDS (an isolated domain, ROS_HOME a temporary directory): a restarted
node answers about frames only the first one saw, ~/reset clears the memory unless memory.keep_on_reset,
kill -9 loses at most what was not committed, and an unwritable, full or corrupt store is reported and never
stops the node from answering from RAM."""

from __future__ import annotations

import functools
import re
import signal
import sqlite3
import time

import ground_truth_scene
import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from embodied_r_ros.srv import AskSpatial
from embodied_r_training.data.prepare import store_keyframes
from node_helpers import WAIT_S, Harness, Spinning, killed, node_parameters, node_process, result_of, wait_for
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from sensor_msgs.msg import Image
from std_srvs.srv import Trigger
from test_memory_search import TURN_S, turning_scene

from embodied_r_ros.cli.parts import perceivers
from embodied_r_ros.config import KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.memory.files import default_memory_path
from embodied_r_ros.memory.mission_time import mission_clock
from embodied_r_ros.memory.read_only import ReadOnlyMemory
from embodied_r_ros.memory.records import MemoryStoreError
from embodied_r_ros.memory.store import MemoryStore
from embodied_r_ros.question_file import Question
from embodied_r_ros.ros import node_memory
from embodied_r_ros.ros.messages import keyframe_stamps_ns, ns_to_time, rgb_image_message, stamp_to_ns
from embodied_r_ros.ros.node import EmbodiedRNode
from embodied_r_ros.testing.synthetic_clip import synthetic_clip

START_NS = 1_700_000_000 * NS_PER_S


def memory_node(context, pipeline, config, namespace: str, **extra) -> EmbodiedRNode:
    overrides = {
        "pose.topic": "",
        "camera.qos": "reliable",
        "camera.qos_depth": 100,  # every frame the test publishes arrives
        "query.pre_encode_keyframes": False,
        **extra,
    }
    return EmbodiedRNode(
        pipeline=pipeline,
        context=context,
        namespace=namespace,
        parameter_overrides=node_parameters(config, **overrides),
    )


def harness_for(context, node: EmbodiedRNode, namespace: str, next_ns: int = START_NS) -> Harness:
    harness = Harness(context, node, namespace)
    harness.next_ns = next_ns
    assert wait_for(lambda: harness.camera.get_subscription_count() == 1)
    return harness


def ask_interval(harness: Harness, start_ns: int, end_ns: int):
    request = AskSpatial.Request(
        question="What did I see?", start_stamp=ns_to_time(start_ns), end_stamp=ns_to_time(end_ns)
    )
    assert harness.ask_client.wait_for_service(timeout_sec=WAIT_S)
    return result_of(harness.ask_client.call_async(request), timeout=120.0)


def reset(harness: Harness) -> str:
    client = harness.client.create_client(Trigger, f"/{harness.namespace}/embodied_r/reset")
    assert client.wait_for_service(timeout_sec=WAIT_S)
    reply = result_of(client.call_async(Trigger.Request()))
    assert reply.success
    return reply.message


def memory_values(harness: Harness, **expected: str) -> tuple[int, str, dict[str, str]]:
    """The newest /diagnostics status once its memory values say ``expected`` (a prefix each)."""

    def matches() -> bool:
        values = harness.last_status()[2]
        return all(values.get(key, "").startswith(value) for key, value in expected.items())

    assert wait_for(matches, timeout=60.0), harness.last_status()
    return harness.last_status()


def test_a_restarted_node_answers_about_frames_only_the_first_one_saw(ros_context, gated_pipeline, ros_home):
    pipeline, gate, config = gated_pipeline
    gate.open()
    first = harness_for(ros_context, memory_node(ros_context, pipeline, config, "remember"), "remember")
    try:
        seen = first.feed(4.0)
        level, _, values = memory_values(first, memory="on", memory_frames="4")  # candidates at 1 fps
        assert level == DiagnosticStatus.OK
        assert values["memory_path"] == str(ros_home / "embodied_r" / "remember.embodied_r.sqlite")
        assert (
            values["memory_oldest_stamp"] == f"{seen[0] / NS_PER_S:.3f} s"
            and "(3 s)" in values["memory_span"]
        )
        assert float(values["memory_size_mb"]) > 0 and values["memory_backlog"] == "0"
        assert values["memory_disk_budget_mb"] == "2048"
        answered = ask_interval(first, seen[0], seen[-1])
        assert answered.success, answered.message
        assert wait_for(lambda: int(first.last_status()[2]["memory_descriptions"]) >= 4)  # the VLM's words
    finally:
        first.close()  # cleanup closes the memory, committing what was queued

    # The node restarts (same name, so the same file); keep_on_reset: a reset keeps what the first one saw.
    node = memory_node(ros_context, pipeline, config, "remember", **{"memory.keep_on_reset": True})
    later = seen[-1] + 1000 * NS_PER_S  # the robot drove on for a quarter of an hour
    second = harness_for(ros_context, node, "remember", next_ns=later)
    try:
        before_any_frame = ask_interval(second, seen[0], seen[-1])
        assert before_any_frame.success, before_any_frame.message
        stamps = keyframe_stamps_ns(before_any_frame.answer)
        assert len(stamps) >= 4 and set(stamps) <= set(seen)  # only the first node saw these
        now = second.feed(3.0)
        assert now[0] > seen[-1]
        assert set(keyframe_stamps_ns(ask_interval(second, seen[1], seen[-1]).answer)) <= set(seen)
        assert "memory kept (memory.keep_on_reset)" in reset(second)
        kept = ask_interval(second, seen[0], seen[-1])
        assert kept.success and set(keyframe_stamps_ns(kept.answer)) <= set(seen)
    finally:
        second.close()

    # memory.keep_on_reset false (the default): ~/reset clears RAM and the memory.
    third = harness_for(
        ros_context, memory_node(ros_context, pipeline, config, "remember"), "remember", later
    )
    try:
        assert ask_interval(third, seen[0], seen[-1]).success
        assert "memory cleared" in reset(third)
        memory_values(third, memory="on", memory_frames="0", memory_span="empty")
        third.next_ns = later + 100 * NS_PER_S
        third.feed(2.0)
        gone = ask_interval(third, seen[0], seen[-1])
        assert not gone.success and "starts before the oldest frame" in gone.message
    finally:
        third.close()


def test_prepare_from_a_nodes_memory_gives_the_key_frames_the_node_answered_with(
    ros_context, gated_pipeline, ros_home
):
    """Ask the node about an interval only its memory holds (its RAM keeps 4 s) and one its RAM holds, stop
    it, prepare from its memory file: the same key frames. While the node runs, the file is refused."""
    pipeline, gate, config = gated_pipeline
    gate.open()
    node = memory_node(ros_context, pipeline, config, "trainer", **{"buffer.history_s": 4.0})
    harness = harness_for(ros_context, node, "trainer")
    path = ros_home / "embodied_r" / "trainer.embodied_r.sqlite"
    try:
        seen = harness.feed(10.0)  # 5 fps: a candidate every second
        intervals = [(seen[0], seen[-6]), (seen[-20], seen[-2])]  # 0-9 s (the memory), 6.2-9.8 s (RAM)
        answered = []
        for start, end in intervals:
            reply = ask_interval(harness, start, end)
            assert reply.success, reply.message
            answered.append(keyframe_stamps_ns(reply.answer))
        assert len(answered[0]) >= 4 and answered[1]
        with pytest.raises(MemoryStoreError, match="in use by a running node.*stop the node"):
            ReadOnlyMemory(path)
    finally:
        harness.close()  # closes the memory
    questions = [
        Question("What did I see?", id=f"q{i}", bag=path.name, start_ns=start, end_ns=end)
        for i, (start, end) in enumerate(intervals)
    ]
    prepared = store_keyframes(path, questions, KeyFrameConfig())
    assert [[k.frame.stamp_ns for k in found] for found in prepared] == answered


def test_cleanup_closes_the_memory_and_configure_opens_it_again(ros_context, gated_pipeline):
    """The lifecycle: cleanup commits and closes the file (its lock goes with it), configure reopens it."""
    pipeline, gate, config = gated_pipeline
    gate.open()
    harness = harness_for(ros_context, memory_node(ros_context, pipeline, config, "cycled"), "cycled")
    try:
        seen = harness.feed(3.0)
        memory_values(harness, memory="on", memory_frames="3")
        assert harness.transition("deactivate") and harness.transition("cleanup")
        memory_values(harness, memory="closed (configure opens it)")
        assert harness.transition("configure") and harness.transition("activate")
        memory_values(harness, memory="on", memory_frames="3")
        answered = ask_interval(harness, seen[0], seen[-1])  # RAM went with cleanup: from the memory
        assert answered.success and set(keyframe_stamps_ns(answered.answer)) <= set(seen)
    finally:
        harness.close()


def test_an_unwritable_memory_is_reported_and_the_node_answers_from_ram(
    ros_context, gated_pipeline, tmp_path, capfd
):
    pipeline, gate, config = gated_pipeline
    gate.open()
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("a file where the memory's directory should be")
    path = blocker / "memory.sqlite"
    node = memory_node(ros_context, pipeline, config, "unwritable", **{"memory.path": str(path)})
    harness = harness_for(ros_context, node, "unwritable")
    try:
        assert node.lifecycle_state == "active"  # never fatal
        harness.feed(3.0)
        level, message, values = memory_values(harness, memory="off: ")
        assert level == DiagnosticStatus.WARN and "memory off" in message and str(path) in message
        assert str(path) in values["memory"] and "memory.path" in values["memory"]
        answered = harness.ask()
        assert answered.success, answered.message
        logged = capfd.readouterr().err
        assert f"memory off: memory store {path} cannot be written" in logged and "memory.path" in logged
    finally:
        harness.close()


def test_a_full_disk_is_reported_once_and_the_node_keeps_answering(
    ros_context, gated_pipeline, monkeypatch, capfd
):
    pipeline, gate, config = gated_pipeline
    gate.open()
    # SQLite's page cap stands in for a full disk: the same SQLITE_FULL on the write that does not fit.
    monkeypatch.setattr(node_memory, "MemoryStore", functools.partial(MemoryStore, max_page_count=30))
    harness = harness_for(ros_context, memory_node(ros_context, pipeline, config, "full"), "full")
    try:
        harness.feed(2.0)
        memory_values(harness, memory="on", memory_frames="2")  # committed while there was room
        harness.feed(12.0)
        level, message, values = memory_values(harness, memory="off: ")
        assert level == DiagnosticStatus.WARN and "full" in values["memory"]
        assert "memory.disk_budget_mb" in values["memory"] and values["memory_path"] in values["memory"]
        committed = int(values["memory_frames"])
        assert 2 <= committed < 14
        harness.feed(2.0)  # frames keep coming: the node is fine, the memory stays off
        answered = harness.ask()
        assert answered.success, answered.message
        assert harness.last_status()[2]["memory_frames"] == str(committed)
        assert capfd.readouterr().err.count("memory off: memory store") == 1  # said once
    finally:
        harness.close()


def test_a_corrupt_memory_is_named_and_set_aside_and_the_node_starts_fresh(
    ros_context, gated_pipeline, ros_home, capfd
):
    pipeline, gate, config = gated_pipeline
    gate.open()
    path = default_memory_path("/corrupt/embodied_r")
    assert path.parent == ros_home / "embodied_r"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00garbage, not SQLite\x00" * 4096)
    harness = harness_for(ros_context, memory_node(ros_context, pipeline, config, "corrupt"), "corrupt")
    try:
        (aside,) = path.parent.glob(path.name + ".corrupt-*")
        logged = capfd.readouterr().err
        assert f"memory store {path} was set aside as {aside}" in logged
        harness.feed(3.0)
        memory_values(harness, memory="on", memory_frames="3")
        answered = harness.ask()
        assert answered.success, answered.message
    finally:
        harness.close()


def test_kill_9_loses_at_most_the_frames_not_yet_committed(ros_context, tiny_models_dir, ros_home):
    """The node executable (`embodied-r run`): frames in, wait until /diagnostics says they are committed,
    more frames, SIGKILL; a reopened store has every committed frame, in order, and passes its check."""
    node = node_process(
        tiny_models_dir,
        "killed",
        "/killed/camera/image_raw",
        **{"query.pre_encode_keyframes": "false", "camera.qos_depth": "100"},
    )
    client = rclpy.create_node("kill_client", context=ros_context)
    spinning = Spinning(ros_context, client)
    statuses: list[dict[str, str]] = []

    def on_diagnostics(array: DiagnosticArray) -> None:
        for status in array.status:
            if status.hardware_id == "/killed/embodied_r":
                statuses.append({kv.key: kv.value for kv in status.values})

    try:
        images = client.create_publisher(Image, "/killed/camera/image_raw", QoSProfile(depth=100))
        client.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 20)
        assert wait_for(lambda: images.get_subscription_count() > 0, timeout=180.0), (
            "the node did not come up"
        )
        clip = synthetic_clip(seconds=12.0, fps=5.0, size=(160, 120), start_ns=START_NS)
        first, second = clip.frames[:30], clip.frames[30:]  # 6 s each
        for frame in first:
            images.publish(rgb_image_message(frame.image, frame.stamp_ns, "camera"))
            time.sleep(0.01)

        # Committed, as /diagnostics says once the writer has written them: the burst's candidates.
        def newest_committed(values: dict[str, str]) -> int:
            value = values.get("memory_newest_stamp", "")
            return round(float(value.split()[0]) * 1000) * 1_000_000 if value else 0

        target = first[-5].stamp_ns
        assert wait_for(lambda: bool(statuses) and newest_committed(statuses[-1]) >= target, timeout=60.0)
        last = statuses[-1]
        committed, newest_ns = int(last["memory_frames"]), newest_committed(last)
        assert committed >= 4
        for frame in second:
            images.publish(rgb_image_message(frame.image, frame.stamp_ns, "camera"))
        node.send_signal(signal.SIGKILL)
        node.communicate(timeout=30)
        assert node.returncode == -signal.SIGKILL
    finally:
        killed(node)
        spinning.close()
        client.destroy_node()
    path = ros_home / "embodied_r" / "killed.embodied_r.sqlite"
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        stored = [row[0] for row in db.execute("SELECT stamp_ns FROM frames ORDER BY id")]
    finally:
        db.close()
    # Everything committed before the kill is there (and what came after it, in order, at most).
    assert len([s for s in stored if s <= newest_ns]) == committed and stored[0] == first[0].stamp_ns
    assert stored == sorted(stored) and len(stored) >= committed
    reopened = MemoryStore(path, 64)  # and the next start opens it as it is
    try:
        assert (
            reopened.enabled
            and reopened.status().moved_aside == ""
            and reopened.status().frames == len(stored)
        )
    finally:
        reopened.close()


def ground_truth_memory_node(context, tiny_models_dir, scene_json, namespace: str, **extra) -> EmbodiedRNode:
    """A node whose perceiver is ground truth of ``scene_json`` (an instrument, not a VLM), memory on."""
    values = {
        "perception.perceiver": "ground_truth",
        "perception.scene": str(scene_json),
        "lm.model": str(tiny_models_dir / "lm"),
        "lm.transformers.device": "cpu",
        "lm.transformers.dtype": "float32",
        "lm.max_new_tokens": 8,
        "pose.topic": "",
        "camera.qos": "reliable",
        "camera.qos_depth": 100,
        "diagnostics_period_s": 0.2,
        **extra,
    }
    return EmbodiedRNode(
        perceivers=perceivers(),
        context=context,
        namespace=namespace,
        parameter_overrides=[Parameter(name, value=value) for name, value in values.items()],
    )


def publish_turn(harness: Harness, seconds: float, fps: float = 2.0) -> list[int]:
    """Blank images stamped along the turning scene (ground truth reads the stamps); waits until taken."""
    image = np.zeros((120, 160, 3), np.uint8)
    stamps = [ground_truth_scene.START_NS + round(i * NS_PER_S / fps) for i in range(int(seconds * fps) + 1)]
    received = harness.node.stats.frames_received
    for stamp in stamps:
        harness.camera.publish(rgb_image_message(image, stamp, "camera"))
        time.sleep(0.003)
    assert wait_for(lambda: harness.node.stats.frames_received >= received + len(stamps))
    return stamps


def ask_search(harness: Harness, question: str):
    request = AskSpatial.Request(question=question, search_memory=True)
    assert harness.ask_client.wait_for_service(timeout_sec=WAIT_S)
    return result_of(harness.ask_client.call_async(request), timeout=120.0)


def test_a_question_that_names_a_thing_is_answered_from_the_intervals_where_it_was(
    ros_context, tiny_models_dir, tmp_path
):
    scene_json = turning_scene(tmp_path)
    node = ground_truth_memory_node(ros_context, tiny_models_dir, scene_json, "searcher")
    harness = harness_for(ros_context, node, "searcher")
    try:
        published = publish_turn(harness, TURN_S)

        # The background describer catches up while no question waits.
        def caught_up() -> bool:
            values = harness.last_status()[2]
            keyframes = int(values.get("memory_keyframes", "0"))
            described = int(values.get("memory_described", "0"))
            return keyframes >= 4 and described >= keyframes and values["memory_describer_backlog"] == "0"

        assert wait_for(caught_up, timeout=120.0), harness.last_status()
        assert harness.last_status()[2]["memory_describer_failures"] == "0"
        reply = ask_search(harness, "Where did I last see the blue box?")
        assert reply.success, reply.message
        answer = reply.answer
        starts = [stamp_to_ns(t) for t in answer.interval_starts]
        ends = [stamp_to_ns(t) for t in answer.interval_ends]
        assert starts and len(starts) == len(ends)
        assert all(published[0] <= a <= b <= published[-1] for a, b in zip(starts, ends, strict=True))
        stamps = keyframe_stamps_ns(answer)
        assert stamps and all(any(a <= s <= b for a, b in zip(starts, ends, strict=True)) for s in stamps)
        assert any("blue box" in d for d in answer.keyframe_descriptions)
        assert any(n.startswith("searched the memory: answered from") for n in answer.notes)
        # Each key frame's observation starts with its time since the memory's first frame (poses are off).
        for stamp, text in zip(stamps, answer.keyframe_descriptions, strict=True):
            clock = mission_clock((stamp - published[0]) / 1e9)
            place = rf"(^|: )At {clock} into the mission(, at \(-?[\d.]+, -?[\d.]+\) m)?: "
            assert re.search(place, text), text
        # The memory keeps the question's descriptions as the VLM wrote them, without that line.
        memory = harness.node.served.memory.store
        assert memory is not None and memory.flush()
        kept = memory.descriptions(published[0], published[-1])
        asked = [d.text for d in kept if d.question == "Where did I last see the blue box?"]
        assert asked and not any("into the mission" in text for text in asked)
        # A question about a window still names the window as its one interval, in the paper's prompt.
        plain = harness.ask("What did I see last?")
        assert plain.success and len(plain.answer.interval_starts) == 1
        assert not any("into the mission" in d for d in plain.answer.keyframe_descriptions)
    finally:
        harness.close()


def test_search_memory_with_the_describer_off_says_which_parameter(ros_context, tiny_models_dir, tmp_path):
    scene_json = turning_scene(tmp_path)
    node = ground_truth_memory_node(
        ros_context, tiny_models_dir, scene_json, "nodescribe", **{"memory.describe": False}
    )
    harness = harness_for(ros_context, node, "nodescribe")
    try:
        publish_turn(harness, 4.0)
        memory_values(harness, memory_describer="off: memory.describe is false")
        reply = ask_search(harness, "Where did I last see the blue box?")
        assert not reply.success and "memory.describe is false" in reply.message
        assert harness.ask("What did I see last?").success  # questions about windows go on
    finally:
        harness.close()
