"""Frames of a time window of a recorded rosbag2 (mcap or sqlite3), with poses from odometry.

The data-set builder asks for the frames of each question's window. Only the frames key-frame selection
can use are decoded: the 1 fps candidate grid and the window's last frame
(:func:`embodied_r_ros.keyframes.candidate_indices`), so ``select_keyframes`` on them gives the same key
frames as on every frame of the window, at a fraction of the decoding cost. Windows are in bag time (the
time each message was recorded; the synthetic bags stamp headers with the same time). Images go through
:mod:`embodied_r_ros.image_conversion` and poses through :class:`embodied_r_ros.pose_history.PoseHistory`,
the code the node uses, so a bag gives the frames the robot would have seen.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from embodied_r_ros.frames import Frame, Pose
from embodied_r_ros.image_conversion import ImageConversionError, message_to_rgb
from embodied_r_ros.keyframes import candidate_indices
from embodied_r_ros.pose_history import PoseHistory

logger = logging.getLogger(__name__)

IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
ODOMETRY_TYPE = "nav_msgs/msg/Odometry"


class BagReadError(RuntimeError):
    """A bag that cannot give the frames asked for; the message names the bag and the reason."""


@dataclass(frozen=True)
class BagTopics:
    """Topic names: ``image`` "" = the bag's only image topic; ``odometry`` "" = no poses."""

    image: str = ""
    odometry: str = "/odom"


class BagReader:
    """One open bag; :meth:`window` gives the candidate frames of a time window (use as a context)."""

    def __init__(self, path: str | Path, topics: BagTopics | None = None, candidate_fps: float = 1.0) -> None:
        self.path = Path(path)
        self.topics = topics or BagTopics()
        self.candidate_fps = candidate_fps
        if not self.path.exists():
            raise BagReadError(f"bag {self.path} does not exist; check the question's bag path")
        self._store = get_typestore(Stores.ROS2_KILTED)
        try:
            self._reader = Reader(self.path)
            self._reader.open()
        except Exception as exc:  # rosbags raises several types for broken files
            raise BagReadError(f"bag {self.path} cannot be opened: {exc}") from exc
        self._decoded: dict[int, Frame] = {}
        self._stamps: list[int] | None = None
        try:
            self._image = self._image_connection()
            self._poses = self._read_poses()
        except BagReadError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise BagReadError(f"bag {self.path} is corrupt or truncated: {exc}") from exc

    def __enter__(self) -> BagReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def topic_list(self) -> list[str]:
        """``topic (type)`` of every topic in the bag, for error messages."""
        return sorted(f"{c.topic} ({c.msgtype})" for c in self._reader.connections)

    @property
    def storage(self) -> str:
        """ "mcap" or "sqlite3"."""
        return "mcap" if any(self.path.glob("*.mcap")) else "sqlite3"

    @property
    def start_ns(self) -> int:
        return int(self._reader.start_time)

    @property
    def end_ns(self) -> int:
        return int(self._reader.end_time)

    def _image_connection(self) -> object:
        connections = self._reader.connections
        if self.topics.image:
            found = [c for c in connections if c.topic == self.topics.image]
            if not found:
                raise BagReadError(
                    f"bag {self.path} has no topic {self.topics.image!r}; it has: "
                    f"{', '.join(self.topic_list) or 'no topics'}; pass the camera topic with --image-topic"
                )
            if found[0].msgtype not in IMAGE_TYPES:
                raise BagReadError(
                    f"topic {self.topics.image!r} of bag {self.path} carries {found[0].msgtype}, "
                    f"not an image type ({', '.join(IMAGE_TYPES)})"
                )
            return found[0]
        images = [c for c in connections if c.msgtype in IMAGE_TYPES]
        if len({c.topic for c in images}) != 1:
            raise BagReadError(
                f"bag {self.path} has {len(images)} image topics, cannot choose one; it has: "
                f"{', '.join(self.topic_list) or 'no topics'}; pass the camera topic with --image-topic"
            )
        return images[0]

    def _read_poses(self) -> PoseHistory | None:
        if not self.topics.odometry:
            return None
        found = [c for c in self._reader.connections if c.topic == self.topics.odometry]
        if not found:
            logger.warning(
                "bag %s has no odometry topic %r (it has: %s); frames get no poses",
                self.path,
                self.topics.odometry,
                ", ".join(self.topic_list),
            )
            return None
        history = PoseHistory(capacity=max(2, sum(c.msgcount for c in found) + 1))
        for connection, _, raw in self._reader.messages(connections=found):
            message = self._store.deserialize_cdr(raw, connection.msgtype)
            stamp = int(message.header.stamp.sec) * 1_000_000_000 + int(message.header.stamp.nanosec)
            p, q = message.pose.pose.position, message.pose.pose.orientation
            history.add(stamp, Pose((p.x, p.y, p.z), (q.x, q.y, q.z, q.w)))
        return history

    def window(self, start_ns: int, end_ns: int) -> list[Frame]:
        """The candidate frames (1 fps grid and the last frame) recorded in [start_ns, end_ns], with poses.

        Raises :class:`BagReadError` when the window lies outside the bag, holds no frames, or a message
        in it cannot be read or decoded.
        """
        if end_ns < self.start_ns or start_ns > self.end_ns:
            raise BagReadError(
                f"window [{start_ns}, {end_ns}] ns lies outside bag {self.path} "
                f"([{self.start_ns}, {self.end_ns}] ns)"
            )
        try:
            # rosbags' start/stop reads are several times slower than a plain pass, and holding every raw
            # image of a window costs more than reading twice: the stamps are read once per bag, then
            # one pass per window keeps just the candidates not decoded yet.
            if self._stamps is None:
                self._stamps = sorted(s for _, s, _ in self._reader.messages(connections=[self._image]))
            lo = bisect.bisect_left(self._stamps, start_ns)
            stamps = self._stamps[lo : bisect.bisect_right(self._stamps, end_ns)]
            if not stamps:
                raise BagReadError(f"window [{start_ns}, {end_ns}] ns of bag {self.path} holds no frames")
            wanted = [stamps[i] for i in candidate_indices(stamps, self.candidate_fps)]
            missing = set(wanted) - self._decoded.keys()
            if missing:
                for _, stamp, raw in self._reader.messages(connections=[self._image]):
                    if stamp in missing:
                        self._frame(stamp, raw)
        except BagReadError:
            raise
        except Exception as exc:
            raise BagReadError(f"bag {self.path} is corrupt or truncated: {exc}") from exc
        return [self._decoded[stamp] for stamp in wanted]

    def _frame(self, stamp: int, raw: bytes) -> Frame:
        cached = self._decoded.get(stamp)
        if cached is not None:
            return cached
        try:
            message = self._store.deserialize_cdr(raw, self._image.msgtype)
            image = message_to_rgb(message)
        except ImageConversionError as exc:
            raise BagReadError(f"image at {stamp} ns in bag {self.path} cannot be decoded: {exc}") from exc
        except Exception as exc:
            raise BagReadError(f"message at {stamp} ns in bag {self.path} is corrupt: {exc}") from exc
        pose = self._poses.pose_at(stamp) if self._poses is not None else None
        frame = Frame(image, stamp, pose)
        self._decoded[stamp] = frame
        return frame

    def close(self) -> None:
        """Close the bag's files."""
        try:
            self._reader.close()
        except Exception:  # closing a half-opened reader must not hide the original error
            pass
