"""Synthetic scenes written as rosbag2 and read back with rosbags: topics, types, counts, stamps, odometry
against the rendered camera, and byte-for-byte determinism."""

from __future__ import annotations

import filecmp
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from embodied_r_training.synth.bag_writer import (
    COMPRESSED_TOPIC,
    IMAGE_TOPIC,
    INFO_TOPIC,
    JPEG_FORMAT,
    ODOM_TOPIC,
    BagOptions,
    SceneBagWriter,
)
from embodied_r_training.synth.generate import SynthConfig, synthesize
from embodied_r_training.synth.render import CameraModel, Renderer
from embodied_r_training.synth.trajectory import Trajectory
from embodied_r_training.synth.world import World
from synth_helpers import decode_image, odom_pose, read_bag, stamp_ns

from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.question_file import bag_path, read_questions

W, H = 128, 96
RATE = 5.0
SECONDS = 4.0
N_FRAMES = int(SECONDS * RATE)


def small_config(out: Path, **changes) -> SynthConfig:
    base = SynthConfig(out=out, scenes=1, seed=3, width=W, height=H, rate_hz=RATE, duration_s=SECONDS)
    return replace(base, **changes)


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small scene per storage / image kind, plus an outdoor one."""
    root = tmp_path_factory.mktemp("synth_bags")
    variants = {
        "mcap": {},
        "sqlite3": {"storage": "sqlite3"},
        "mcap_jpeg": {"compressed": True},
        "sqlite3_jpeg": {"storage": "sqlite3", "compressed": True},
        "outdoor": {"outdoor": True},
    }
    for name, changes in variants.items():
        synthesize(small_config(root / name, **changes))
    return {name: root / name / "scene_0000" for name in variants}


@pytest.mark.parametrize("variant", ["mcap", "sqlite3", "mcap_jpeg", "sqlite3_jpeg", "outdoor"])
def test_bag_reads_back_with_the_right_types_counts_and_stamps(scenes: dict[str, Path], variant: str) -> None:
    scene = scenes[variant]
    bag = read_bag(scene / "bag")
    compressed = variant.endswith("jpeg")
    image_topic = COMPRESSED_TOPIC if compressed else IMAGE_TOPIC
    assert bag.storage == ("sqlite3" if variant.startswith("sqlite3") else "mcap")
    assert bag.topics == {
        image_topic: "sensor_msgs/msg/CompressedImage" if compressed else "sensor_msgs/msg/Image",
        INFO_TOPIC: "sensor_msgs/msg/CameraInfo",
        ODOM_TOPIC: "nav_msgs/msg/Odometry",
    }
    start = SynthConfig.start_s * NS_PER_S
    expected = [start + round(i / RATE * NS_PER_S) for i in range(N_FRAMES)]
    assert bag.metadata_start_ns == start
    for topic in (image_topic, INFO_TOPIC, ODOM_TOPIC):
        messages = bag.messages[topic]
        assert len(messages) == N_FRAMES, topic
        assert [t for t, _ in messages] == expected  # bag time
        assert [stamp_ns(m) for _, m in messages] == expected  # header stamp
    info = bag.messages[INFO_TOPIC][0][1]
    cam = CameraModel.from_fov(W, H, 70.0)
    assert (info.width, info.height, info.distortion_model) == (W, H, "plumb_bob")
    assert np.allclose(info.k, cam.k) and np.allclose(info.d, 0.0)
    image = bag.messages[image_topic][0][1]
    if compressed:
        assert image.format == JPEG_FORMAT
    else:
        assert (image.encoding, image.step, image.height, image.width) == ("rgb8", 3 * W, H, W)
    assert decode_image(image).shape == (H, W, 3)
    odom = bag.messages[ODOM_TOPIC][0][1]
    assert (odom.header.frame_id, odom.child_frame_id) == ("odom", "base_link")


@pytest.mark.parametrize("variant", ["mcap", "sqlite3_jpeg", "outdoor"])
def test_odometry_matches_the_rendered_camera(scenes: dict[str, Path], variant: str) -> None:
    """Re-render each frame from the bag's own odometry and camera info: the same image comes out, and each
    visible object's projected centre lands on that object's pixels."""
    scene = scenes[variant]
    bag = read_bag(scene / "bag")
    description = json.loads((scene / "scene.json").read_text())
    world = World.from_dict(description["world"])
    info = bag.messages[INFO_TOPIC][0][1]
    cam = CameraModel(int(info.width), int(info.height), info.k[0], info.k[4], info.k[2], info.k[5])
    renderer = Renderer(world, cam)
    image_topic = COMPRESSED_TOPIC if variant.endswith("jpeg") else IMAGE_TOPIC
    trajectory = Trajectory.from_dict(description["trajectory"])
    hits = 0
    for (_, image_msg), (_, odom) in zip(bag.messages[image_topic], bag.messages[ODOM_TOPIC], strict=True):
        pose = odom_pose(odom)
        t = (stamp_ns(odom) - bag.metadata_start_ns) / NS_PER_S
        assert pose.position == pytest.approx(tuple(trajectory.position(t)), abs=1e-9)
        frame = renderer.render(pose)
        image = decode_image(image_msg)
        difference = np.abs(frame.image.astype(int) - image.astype(int))
        if variant.endswith("jpeg"):
            assert difference.mean() < 6.0
        else:
            assert np.array_equal(frame.image, image)
        uv, depth = cam.project(np.array([o.position for o in world.objects]), pose)
        for obj, (u, v), d in zip(world.objects, uv, depth, strict=True):
            ui, vi = int(round(u)), int(round(v))
            if d > 0.1 and 0 <= ui < W and 0 <= vi < H:
                assert frame.ids[vi, ui] == obj.id or frame.depth[vi, ui] < d
                hits += frame.ids[vi, ui] == obj.id
        # The twist is the body-frame velocity.
        linear, angular = trajectory.twist(t)
        assert (odom.twist.twist.linear.x, odom.twist.twist.angular.z) == pytest.approx(
            (linear[0], angular[2])
        )
    assert hits > 0


def test_questions_point_at_their_bag_and_only_at_seen_objects(scenes: dict[str, Path]) -> None:
    scene = scenes["mcap"]
    questions = read_questions(scene / "questions.jsonl")
    assert questions and all(bag_path(scene / "questions.jsonl", q) == scene / "bag" for q in questions)
    combined = read_questions(scene.parent / "questions.jsonl")
    assert [q.id for q in combined] == [q.id for q in questions]
    assert all(bag_path(scene.parent / "questions.jsonl", q) == scene / "bag" for q in combined)
    for q in questions:
        assert 0.0 <= q.start_s <= q.end_s <= SECONDS
        assert q.end_ns - q.start_ns == pytest.approx((q.end_s - q.start_s) * NS_PER_S, abs=1e6)


def test_whole_clip_windows_end_on_the_last_frame_stamp(tmp_path: Path) -> None:
    # 3 Hz: frame times are not whole milliseconds, the window's stamps must still hit the frames exactly.
    synthesize(small_config(tmp_path, rate_hz=3.0, duration_s=3.0))
    scene = tmp_path / "scene_0000"
    stamps = [t for t, _ in read_bag(scene / "bag").messages[IMAGE_TOPIC]]
    whole = [q for q in read_questions(scene / "questions.jsonl") if q.start_s == 0.0 and q.task != "route"]
    assert whole
    for q in whole:
        assert (q.start_ns, q.end_ns) == (stamps[0], stamps[-1])
        assert q.end_s == pytest.approx(8 / 3, abs=1e-3)  # 9 frames at 3 Hz


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    for storage in ("mcap", "sqlite3"):
        a, b, c = (tmp_path / f"{storage}_{name}" for name in "abc")
        synthesize(small_config(a, storage=storage, scenes=2, preview=True, duration_s=2.0))
        synthesize(small_config(b, storage=storage, scenes=2, preview=True, duration_s=2.0))
        synthesize(small_config(c, storage=storage, scenes=2, preview=True, duration_s=2.0, seed=4))
        files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
        # 2 x (bag file, metadata.yaml, questions, scene.json, preview) + questions + generation.json
        assert len(files) == 12
        assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
        _, mismatch, errors = filecmp.cmpfiles(a, b, [str(f) for f in files], shallow=False)
        assert not mismatch and not errors, mismatch
        bag_file = next(f for f in files if f.suffix in (".mcap", ".db3"))
        assert (a / bag_file).read_bytes() != (c / bag_file).read_bytes()
    # A scene depends only on (seed, index): scene 1 of a 2-scene run equals scene 1 of a 3-scene run.
    d = tmp_path / "three"
    synthesize(small_config(d, storage="sqlite3", scenes=3, preview=True, duration_s=2.0))
    assert (d / "scene_0001/questions.jsonl").read_bytes() == (a / "scene_0001/questions.jsonl").read_bytes()
    assert filecmp.cmp(d / "scene_0001/bag/bag.db3", a / "scene_0001/bag/bag.db3", shallow=False)


def test_writer_refuses_an_existing_bag_and_a_wrong_image(tmp_path: Path) -> None:
    cam = CameraModel.from_fov(W, H)
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="exists already"):
        SceneBagWriter(tmp_path / "taken", cam)
    with SceneBagWriter(tmp_path / "fresh", cam, BagOptions()) as writer:
        with pytest.raises(ValueError, match=f"{H}x{W}x3 uint8"):
            writer.write_frame(0, np.zeros((H, W, 4), np.uint8))
        writer.write_frame(5, np.zeros((H, W, 3), np.uint8))
    assert read_bag(tmp_path / "fresh").messages[IMAGE_TOPIC][0][0] == 5
    with pytest.raises(ValueError, match="storage"):
        BagOptions(storage="rosbag1")


def test_ros2_deserialises_the_messages(scenes: dict[str, Path]) -> None:
    """rclpy (the real ROS 2 Kilted type support) reads the raw bytes rosbags wrote."""
    from nav_msgs.msg import Odometry
    from rclpy.serialization import deserialize_message
    from rosbags.rosbag2 import Reader
    from sensor_msgs.msg import CameraInfo, CompressedImage, Image

    types = {"sensor_msgs/msg/Image": Image, "sensor_msgs/msg/CompressedImage": CompressedImage,
             "sensor_msgs/msg/CameraInfo": CameraInfo, "nav_msgs/msg/Odometry": Odometry}  # fmt: skip
    for variant in ("mcap", "sqlite3_jpeg"):
        seen = set()
        with Reader(scenes[variant] / "bag") as reader:
            for connection, stamp, raw in reader.messages():
                message = deserialize_message(bytes(raw), types[connection.msgtype])
                assert message.header.stamp.sec * NS_PER_S + message.header.stamp.nanosec == stamp
                if isinstance(message, Image):
                    assert (message.width, message.height, message.encoding) == (W, H, "rgb8")
                if isinstance(message, Odometry):
                    q = message.pose.pose.orientation
                    assert abs(q.x**2 + q.y**2 + q.z**2 + q.w**2 - 1.0) < 1e-9
                seen.add(connection.msgtype)
        assert len(seen) == 3
