"""Reading synthetic bags back in tests: real rosbags readers, messages decoded by hand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import yaml
from embodied_r_training.synth.bag_writer import typestore
from embodied_r_training.synth.mission import MissionConfig
from rosbags.rosbag2 import Reader

from embodied_r_ros.frames import NS_PER_S, Pose

# The memory tests' mission (conftest's ``short_mission``): two minutes, four room visits, small images,
# a few seconds to write.
SHORT_MISSION = MissionConfig(minutes=2, seed=3, rooms_per_minute=2, width=160, height=120)


@dataclass
class BagContents:
    """Messages of one bag, grouped by topic: (bag time ns, deserialised message), in bag order."""

    topics: dict[str, str]  # topic -> message type
    messages: dict[str, list[tuple[int, object]]]
    metadata_start_ns: int
    storage: str


def read_bag(path: Path) -> BagContents:
    store = typestore()
    messages: dict[str, list[tuple[int, object]]] = {}
    with Reader(path) as reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        for connection, stamp, raw in reader.messages():
            message = store.deserialize_cdr(raw, connection.msgtype)
            messages.setdefault(connection.topic, []).append((stamp, message))
    info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return BagContents(
        topics, messages, info["starting_time"]["nanoseconds_since_epoch"], info["storage_identifier"]
    )


def stamp_ns(message: object) -> int:
    return message.header.stamp.sec * NS_PER_S + message.header.stamp.nanosec


def decode_image(message: object) -> np.ndarray:
    """RGB uint8 image of a sensor_msgs Image (rgb8) or CompressedImage (JPEG)."""
    if hasattr(message, "encoding"):
        assert message.encoding == "rgb8"
        return np.frombuffer(bytes(message.data), np.uint8).reshape(message.height, message.width, 3)
    bgr = cv2.imdecode(np.frombuffer(bytes(message.data), np.uint8), cv2.IMREAD_COLOR)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def odom_pose(message: object) -> Pose:
    p, q = message.pose.pose.position, message.pose.pose.orientation
    return Pose((p.x, p.y, p.z), (q.x, q.y, q.z, q.w))
