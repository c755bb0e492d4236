"""The node's command line as a user runs it, in real processes over DDS (an isolated domain): `embodied-r
play` (a bag written with rosbags), the installed `embodied_r_node` executable with the shipped parameters
file, `embodied-r ask --questions --report`, and `embodied-r run` failing on a missing model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from node_helpers import Spinning, embodied_r, killed, node_process, stopped
from rclpy.qos import QoSProfile
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.testing.synthetic_clip import synthetic_clip

TYPES = get_typestore(Stores.ROS2_KILTED)


pytestmark = pytest.mark.usefixtures("ros_domain")


def header(stamp_ns: int, frame_id: str = ""):
    t = TYPES.types
    return t["std_msgs/msg/Header"](
        stamp=t["builtin_interfaces/msg/Time"](sec=stamp_ns // NS_PER_S, nanosec=stamp_ns % NS_PER_S),
        frame_id=frame_id,
    )


def image(stamp_ns: int, pixels: np.ndarray):
    h, w = pixels.shape[:2]
    return TYPES.types["sensor_msgs/msg/Image"](
        header=header(stamp_ns, "camera"), height=h, width=w, encoding="rgb8", is_bigendian=0, step=w * 3,
        data=np.ascontiguousarray(pixels).reshape(-1),
    )  # fmt: skip


def odometry(stamp_ns: int, position, orientation):
    t = TYPES.types
    pose = t["geometry_msgs/msg/Pose"](
        position=t["geometry_msgs/msg/Point"](x=position[0], y=position[1], z=position[2]),
        orientation=t["geometry_msgs/msg/Quaternion"](
            x=orientation[0], y=orientation[1], z=orientation[2], w=orientation[3]
        ),
    )
    zero = t["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0)
    return t["nav_msgs/msg/Odometry"](
        header=header(stamp_ns, "odom"),
        child_frame_id="base_link",
        pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
        twist=t["geometry_msgs/msg/TwistWithCovariance"](
            twist=t["geometry_msgs/msg/Twist"](linear=zero, angular=zero), covariance=np.zeros(36)
        ),
    )


def write_bag(path: Path, messages: list[tuple[str, int, object]]) -> None:
    """A rosbag2 (MCAP) of (topic, log time ns, rosbags message) in the given order."""
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = {}
        for topic, stamp, message in messages:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, message.__msgtype__, typestore=TYPES)
            writer.write(connections[topic], stamp, TYPES.serialize_cdr(message, message.__msgtype__))


def clip_bag(path: Path, seconds: float) -> list[int]:
    """A bag of the synthetic clip (camera and odometry, 10 Hz, 320x240); returns the frame stamps."""
    clip = synthetic_clip(seconds=seconds, fps=10.0, size=(320, 240))
    messages = []
    for frame in clip.frames:
        messages.append(
            ("/odom", frame.stamp_ns, odometry(frame.stamp_ns, frame.pose.position, frame.pose.orientation))
        )
        messages.append(("/camera/image_raw", frame.stamp_ns, image(frame.stamp_ns, frame.image)))
    write_bag(path, messages)
    return [f.stamp_ns for f in clip.frames]


class Recorder:
    """A subscriber process-side: records (topic, key) of everything it receives, in arrival order."""

    def __init__(self, topics: dict[str, type]):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("recorder", context=self.context)
        self.received: dict[str, list] = {topic: [] for topic in topics}
        for topic, kind in topics.items():
            self.node.create_subscription(kind, topic, self._callback(topic), QoSProfile(depth=1000))
        self.spinning = Spinning(self.context, self.node)

    def _callback(self, topic: str):
        def record(message):
            key = message.data if hasattr(message, "data") and isinstance(message.data, str) else None
            if key is None:
                key = message.header.stamp.sec * NS_PER_S + message.header.stamp.nanosec
            self.received[topic].append(key)

        return record

    def close(self):
        self.spinning.close()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def test_play_publishes_a_bags_messages_in_order(tmp_path):
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    string = TYPES.types["std_msgs/msg/String"]
    start = 1_700_000_000 * NS_PER_S
    messages, expected = [], {"/chatter": [], "/camera/image_raw": [], "/odom": []}
    for i in range(60):
        stamp = start + i * 20_000_000
        pixels = np.full((6, 8, 3), i, np.uint8)
        for topic, message, key in (
            ("/chatter", string(data=f"message {i}"), f"message {i}"),
            ("/camera/image_raw", image(stamp, pixels), stamp),
            ("/odom", odometry(stamp, (i * 0.1, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), stamp),
        ):
            if topic == "/chatter" or i % 2 == 0:
                messages.append((topic, stamp, message))
                expected[topic].append(key)
    bag = tmp_path / "ordered"
    write_bag(bag, messages)

    recorder = Recorder({"/chatter": String, "/camera/image_raw": Image, "/odom": Odometry})
    try:
        result = subprocess.run(
            [embodied_r(), "play", str(bag), "--rate", "2", "--wait-subscribers", "30"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "120 messages" in result.stdout
        total = sum(len(v) for v in expected.values())
        deadline = time.monotonic() + 10
        while sum(len(v) for v in recorder.received.values()) < total and time.monotonic() < deadline:
            time.sleep(0.05)
        for topic, keys in expected.items():
            got = recorder.received[topic]
            missing = [k for k in keys if k not in got]
            assert got == keys, f"{topic}: {len(got)} of {len(keys)} received, missing {missing[:5]}"
        # --topics plays only those.
        result = subprocess.run(
            [embodied_r(), "play", str(bag), "--rate=4", "--topics", "/chatter", "--wait-subscribers", "9"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0 and "60 messages" in result.stdout and "/odom" not in result.stdout
    finally:
        recorder.close()


def test_play_in_two_parts_publishes_the_bag_once_in_order(tmp_path):
    """--start-offset / --playback-duration: the first 0.5 s of bag time, then the rest, reach a subscriber
    as the whole bag in order (a mission replayed with a pause in between)."""
    from std_msgs.msg import String

    string = TYPES.types["std_msgs/msg/String"]
    start = 1_700_000_000 * NS_PER_S
    bag = tmp_path / "two_parts"
    write_bag(bag, [("/chatter", start + i * 20_000_000, string(data=f"message {i}")) for i in range(60)])
    recorder = Recorder({"/chatter": String})
    try:
        reports = []
        for part in (["--playback-duration", "0.5"], ["--start-offset", "0.5"]):
            result = subprocess.run(
                [embodied_r(), "play", str(bag), "--rate", "2", "--wait-subscribers", "30", *part],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            reports.append(result.stdout)
        # Bag times 0, 0.02, ... 1.18 s: [0, 0.5) holds messages 0-24, the rest 25-59.
        assert "25 messages" in reports[0] and "35 messages" in reports[1], reports
        deadline = time.monotonic() + 10
        while len(recorder.received["/chatter"]) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert recorder.received["/chatter"] == [f"message {i}" for i in range(60)]
    finally:
        recorder.close()
    bad = subprocess.run([embodied_r(), "play", str(bag), "--playback-duration", "0"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "--playback-duration" in bad.stderr and "Traceback" not in bad.stderr


def test_play_names_a_missing_bag(tmp_path):
    result = subprocess.run(
        [embodied_r(), "play", str(tmp_path / "no-such-bag")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "no-such-bag" in result.stderr and "Traceback" not in result.stderr


def test_run_with_a_missing_model_stops_with_one_line(tmp_path):
    result = subprocess.run(
        [embodied_r(), "run", "--vlm", str(tmp_path / "no-such-vlm"), "--lm", "example-org/no-such-lm"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    (line,) = [line for line in output.splitlines() if "FATAL" in line]
    assert "cannot load the VLM" in line and "vlm.model" in line and "no-such-vlm" in line
    assert "tiny-models" in line  # how to fix it


def test_node_executable_bag_and_questions_end_to_end(tmp_path, tiny_models_dir):
    """What `make demo` does: the installed node with the shipped parameters, a bag, questions, a report."""
    from ament_index_python.packages import get_package_prefix, get_package_share_directory

    executable = Path(get_package_prefix("embodied_r_ros")) / "lib" / "embodied_r_ros" / "embodied_r_node"
    params = Path(get_package_share_directory("embodied_r_ros")) / "config" / "embodied_r.yaml"
    assert executable.is_file() and params.is_file()
    stamps = clip_bag(tmp_path / "scene", seconds=8.0)
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        json.dumps(
            {"id": "q1", "question": "Which way did I turn?", "options": ["left", "right"], "answer": "B"}
        )
        + "\n"
        + json.dumps({"id": "q2", "question": "How far did I walk, in metres?", "answer": 2.4})
        + "\n"
    )
    overrides = {
        "vlm.model": str(tiny_models_dir / "vlm"),
        "lm.model": str(tiny_models_dir / "lm"),
        "vlm.max_new_tokens": "8",
        "lm.max_new_tokens": "8",
        "vlm.transformers.device": "cpu",
        "lm.transformers.device": "cpu",
        "query.window_s": "30.0",
        "camera.qos": "reliable",  # as `make demo` runs it: a best-effort camera may lose frames under load
    }
    arguments = ["--ros-args", "--params-file", str(params)]
    for name, value in overrides.items():
        arguments += ["-p", f"{name}:={value}"]
    node = subprocess.Popen(
        [str(executable), *arguments], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        play = subprocess.run(
            [embodied_r(), "play", str(tmp_path / "scene"), "--rate", "4", "--wait-subscribers", "120"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert play.returncode == 0, play.stderr
        assert f"/camera/image_raw {len(stamps)}" in play.stdout
        report = tmp_path / "report.html"
        ask = subprocess.run(
            [embodied_r(), "ask", "--questions", str(questions), "--report", str(report), "--wait", "60"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert ask.returncode == 0, ask.stdout + ask.stderr
        assert ask.stdout.count("ground truth:") == 2 and ask.stdout.count("reasoning:") == 2
        html = report.read_text()
        assert "Which way did I turn?" in html and "How far did I walk, in metres?" in html
        # Every key frame of every answer is in the report, and with no frame lost there are >= 4 each.
        keyframes = [int(n) for n in re.findall(r"^key frames \((\d+)\)", ask.stdout, re.MULTILINE)]
        assert len(keyframes) == 2 and min(keyframes) >= 4, ask.stdout
        assert html.count("data:image/jpeg;base64,") == sum(keyframes)
    finally:
        node.send_signal(signal.SIGINT)
        try:
            output, _ = node.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            node.kill()
            output, _ = node.communicate()
    assert node.returncode == 0, output
    assert "Traceback" not in output and "active: camera /camera/image_raw" in output


def test_sigint_with_a_question_in_flight_answers_shutting_down_and_exits_0(tmp_path, tiny_models_dir):
    """A launch system's SIGINT while the models work: the caller gets success=false "shutting down", the
    node exits 0 within seconds and prints no traceback (issue 11, item 7)."""
    from embodied_r_ros.action import AnswerSpatial
    from rclpy.action import ActionClient
    from sensor_msgs.msg import Image

    from embodied_r_ros.ros.messages import rgb_image_message

    node = node_process(
        tiny_models_dir, "inflight", "/inflight/camera/image_raw",
        **{"lm.max_new_tokens": "4000", "query.timeout_s": "300"},
    )  # fmt: skip
    context = rclpy.Context()
    rclpy.init(context=context)
    client = rclpy.create_node("shutdown_client", context=context)
    spinning = Spinning(context, client)
    try:
        images = client.create_publisher(Image, "/inflight/camera/image_raw", QoSProfile(depth=50))
        action = ActionClient(client, AnswerSpatial, "/inflight/embodied_r/answer")
        assert action.wait_for_server(timeout_sec=120), "the node did not come up"
        deadline = time.monotonic() + 60
        while images.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        for frame in synthetic_clip(seconds=3.0, fps=5.0, size=(160, 120)).frames:
            images.publish(rgb_image_message(frame.image, frame.stamp_ns, "camera"))
            time.sleep(0.01)
        stages: list[str] = []
        reasoning = threading.Event()

        def feedback(message) -> None:
            stages.append(message.feedback.stage)
            if message.feedback.stage == "reasoning":
                reasoning.set()

        time.sleep(1.0)  # the frames are in
        sent = action.send_goal_async(AnswerSpatial.Goal(question="Which way?"), feedback_callback=feedback)
        assert reasoning.wait(120), f"the question never reached the reasoning stage: {stages}"
        assert sent.done() and sent.result().accepted
        result_future = sent.result().get_result_async()  # asked for before the node goes
        code, output, seconds = stopped(node, signal.SIGINT, within_s=20)
        deadline = time.monotonic() + 10
        while not result_future.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert result_future.done(), f"the caller got no reply before the node went away:\n{output[-3000:]}"
        result = result_future.result().result
        assert not result.success and "shutting down" in result.message
    finally:
        killed(node)
        spinning.close()
        action.destroy()
        client.destroy_node()
        rclpy.try_shutdown(context=context)
    assert code == 0, output[-3000:]
    assert "Traceback" not in output and "Failed to publish" not in output, output[-3000:]


def test_sigterm_on_an_idle_streaming_node_exits_0(tmp_path, tiny_models_dir):
    """SIGTERM while frames stream in and nothing is asked: exit 0, no traceback, in every one of 3 runs."""
    bag = tmp_path / "bag"
    clip_bag(bag, seconds=30.0)
    for run in range(3):
        node = node_process(tiny_models_dir, f"idle{run}", "/camera/image_raw")
        play = subprocess.Popen(
            [embodied_r(), "play", str(bag), "--loop", "--wait-subscribers", "120",
             "--topics", "/camera/image_raw"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            lines: list[str] = []
            while time.monotonic() < deadline and node.poll() is None:
                line = node.stdout.readline()
                lines.append(line)
                if "active: camera" in line:
                    break
            time.sleep(2.0)  # frames are streaming in
            code, output, seconds = stopped(node, signal.SIGTERM, within_s=15)
        finally:
            play.terminate()
            play.communicate(timeout=30)
            killed(node)
        output = "".join(lines) + output
        assert code == 0, output[-3000:]
        assert "Traceback" not in output and "RCLError" not in output, output[-3000:]
