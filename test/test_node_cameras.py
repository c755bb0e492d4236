"""Two cameras on one node, over real DDS: one VLM and LM for both, a question names a camera or asks over
all, its evidence says which camera each key frame came from, each camera keeps its own memory file, and
/diagnostics counts each camera beside the sum."""

from __future__ import annotations

import sqlite3
import time

import rclpy
from embodied_r_ros.msg import SpatialAnswer
from embodied_r_ros.srv import AskSpatial
from node_helpers import Spinning, gated_node, result_of, wait_for
from rclpy.qos import QoSProfile
from sensor_msgs.msg import Image

from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.ros.messages import keyframe_stamps_ns, ns_to_time, rgb_image_message, stamp_to_ns
from embodied_r_ros.testing.synthetic_clip import synthetic_clip

NAMESPACE = "twin"
CAMERAS = "front=front/image_raw down=down/image_raw:reliable"


def test_one_node_answers_from_either_camera_or_both_and_keeps_them_apart(
    ros_context, gated_pipeline, tmp_path
):
    node = gated_node(
        ros_context,
        gated_pipeline,
        NAMESPACE,
        **{"cameras": CAMERAS, "camera.qos": "reliable", "pose.topic": ""},
        **{"memory.path": str(tmp_path / "m")},
    )
    client = rclpy.create_node("twin_client", context=ros_context)
    publishers = {
        name: client.create_publisher(Image, f"/{NAMESPACE}/{name}/image_raw", QoSProfile(depth=50))
        for name in ("front", "down")
    }
    ask = client.create_client(AskSpatial, f"/{NAMESPACE}/embodied_r/ask")
    answers: list = []
    client.create_subscription(SpatialAnswer, f"/{NAMESPACE}/embodied_r/answers", answers.append, 10)
    images: dict[int, str] = {}  # ~/keyframes: stamp -> frame_id

    def on_image(message: Image) -> None:
        images[stamp_to_ns(message.header.stamp)] = message.header.frame_id

    client.create_subscription(Image, f"/{NAMESPACE}/embodied_r/keyframes", on_image, 50)
    spinning = Spinning(ros_context, node, client, threads=8)
    try:
        assert set(node.cameras) == {"front", "down"}
        assert node.pipeline is not None  # one pipeline: both cameras' questions go to the same models
        # Both cameras see the same 3 s, the down camera 0.1 s later, and in its own images.
        start = 1_700_000_000 * NS_PER_S
        # Published before discovery matched them, frames are lost even on reliable topics (volatile).
        assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in publishers.values()))
        front = synthetic_clip(seconds=3.0, fps=5.0, size=(160, 120), start_ns=start, seed=1)
        down = synthetic_clip(seconds=3.0, fps=5.0, size=(160, 120), start_ns=start + NS_PER_S // 10, seed=2)
        for a, b in zip(front.frames, down.frames, strict=True):
            publishers["front"].publish(rgb_image_message(a.image, a.stamp_ns, "front_link"))
            publishers["down"].publish(rgb_image_message(b.image, b.stamp_ns, "down_link"))
            time.sleep(0.005)
        received = {name: node.cameras[name].stats for name in ("front", "down")}
        assert wait_for(lambda: all(s.frames_received == len(front.frames) for s in received.values()))
        assert ask.wait_for_service(timeout_sec=20.0)

        def asked(camera: str, interval: tuple[int, int] = (0, 0)):
            request = AskSpatial.Request(question="What did I see last?", window_seconds=600.0, camera=camera)
            request.start_stamp, request.end_stamp = ns_to_time(interval[0]), ns_to_time(interval[1])
            return result_of(ask.call_async(request), timeout=120.0)

        front_stamps = {f.stamp_ns for f in front.frames}
        down_stamps = {f.stamp_ns for f in down.frames}

        # A question that names a camera: key frames of that camera only, unlabelled cameras in the evidence.
        only_down = asked("down")
        assert only_down.success, only_down.message
        stamps = keyframe_stamps_ns(only_down.answer)
        assert stamps and set(stamps) <= down_stamps
        assert list(only_down.answer.keyframe_cameras) == ["down"] * len(stamps)
        assert only_down.answer.header.frame_id == "down_link"

        # Over all cameras: both, in time order, each key frame's camera named beside it and in its text.
        both = asked("")
        assert both.success, both.message
        stamps, cameras = keyframe_stamps_ns(both.answer), list(both.answer.keyframe_cameras)
        assert stamps == sorted(stamps) and len(cameras) == len(stamps)
        assert {"front", "down"} <= set(cameras)
        for stamp, camera, text in zip(stamps, cameras, both.answer.keyframe_descriptions, strict=True):
            assert stamp in (front_stamps if camera == "front" else down_stamps)
            assert f"Seen by the {camera} camera: " in text
        # ~/keyframes: each key frame image in its own camera's frame
        assert wait_for(lambda: all(s in images for s in stamps))
        assert [images[s] for s in stamps] == [f"{camera}_link" for camera in cameras]

        # Cameras triggered together (the same stamps): every key frame is reported with its own camera's
        # stamp (no 1-ns shift leaks out), both cameras' frames are reasoned over, and each camera's
        # memory keeps the descriptions of its own key frames.
        later = start + 4 * NS_PER_S
        together = synthetic_clip(seconds=2.0, fps=5.0, size=(160, 120), start_ns=later, seed=3)
        for frame in together.frames:
            for name in ("front", "down"):
                publishers[name].publish(rgb_image_message(frame.image, frame.stamp_ns, f"{name}_link"))
            time.sleep(0.005)
        total = len(front.frames) + len(together.frames)
        assert wait_for(lambda: all(s.frames_received == total for s in received.values()))
        same = asked("", (together.frames[0].stamp_ns, together.frames[-1].stamp_ns))
        assert same.success, same.message
        stamps, cameras = keyframe_stamps_ns(same.answer), list(same.answer.keyframe_cameras)
        clip_stamps = {f.stamp_ns for f in together.frames}
        assert set(stamps) <= clip_stamps and {"front", "down"} == set(cameras)
        assert len(stamps) > len(set(stamps))  # a stamp both cameras share is there once for each
        for name in ("front", "down"):
            store = node.served.cameras[name].memory.store
            store.flush(10.0)
            remembered = {d.stamp_ns for d in store.descriptions(min(clip_stamps), max(clip_stamps))}
            mine = {s for s, c in zip(stamps, cameras, strict=True) if c == name}
            assert mine <= remembered, name

        # A camera the node does not have: refused at once, naming the cameras it has.
        rear = asked("rear")
        assert not rear.success and "its cameras: front, down" in rear.message

        # Each camera's frames went to its own memory file, none to the other's.
        node.served.cameras["front"].memory.store.flush(10.0)
        node.served.cameras["down"].memory.store.flush(10.0)
        for name, own in (("front", front_stamps | clip_stamps), ("down", down_stamps | clip_stamps)):
            path = tmp_path / f"m.{name}.sqlite"
            with sqlite3.connect(path) as db:
                kept = {row[0] for row in db.execute("SELECT stamp_ns FROM frames")}
            assert kept and kept <= own, name

        # /diagnostics: each camera's own counts, their sum at the top.
        status = node.diagnostics()
        values = {kv.key: kv.value for kv in status.values}
        assert values["cameras.front.frames_received"] == values["cameras.down.frames_received"] == str(total)
        assert values["frames_received"] == str(2 * total)
        held = [node.served.cameras[name].history.size().keyframes for name in ("front", "down")]
        assert values["keyframes_held"] == str(sum(held)) and all(held)
        assert values["inputs.camera.front"] == "ok" and values["inputs.camera.down"] == "ok"
        assert values["cameras.down.memory_path"].endswith("m.down.sqlite")
    finally:
        spinning.close()
        node.destroy_node()
        client.destroy_node()
