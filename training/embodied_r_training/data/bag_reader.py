"""Frames of time windows of a recorded rosbag2 (mcap or sqlite3), with poses from odometry.

The data-set builder asks for the frames of all question windows of a bag at once (:meth:`BagReader.scan`).
Only the frames key-frame selection can use are read and decoded: the 1 fps candidate grid and the window's
last frame (:func:`embodied_r_ros.keyframes.candidate_indices`), so ``select_keyframes`` on them gives the
same key frames as on every frame of the window. The image stamps come from the bag's index (mcap message
indexes, the sqlite3 stamps column: :mod:`.rosbag_index`), so a raw-image bag is not read in full; in mcap
files with uncompressed chunks each wanted message (and each odometry message) is read as one record, not as
its whole chunk. Bags without a usable index are read once, in order. Windows are in bag time (the time each
message was recorded; the synthetic bags stamp headers with the same time). Images go through
:mod:`embodied_r_ros.image_conversion` and poses through
:class:`embodied_r_ros.poses.pose_history.PoseHistory`,
the code the node uses, so a bag gives the frames the robot would have seen.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterator, Sequence

from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from embodied_r_ros.config import param
from embodied_r_ros.frames import Frame, Pose
from embodied_r_ros.image_conversion import ImageConversionError, message_to_rgb
from embodied_r_ros.keyframes import candidate_indices, candidate_period_ns
from embodied_r_ros.poses.pose_history import PoseHistory

from .rosbag_index import channel_id, mcap_index, sqlite_stamps

logger = logging.getLogger(__name__)

IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
ODOMETRY_TYPE = "nav_msgs/msg/Odometry"


class BagReadError(RuntimeError):
    """A bag that cannot give the frames asked for; the message names the bag and the reason."""


@dataclass(frozen=True)
class BagTopics:
    """Topic names: ``image`` "" = the bag's only image topic; ``odometry`` "" = no poses."""

    image: str = param("", "camera topic (default: the bag's only image topic)", flag="--image-topic")
    odometry: str = param("/odom", "odometry topic ('' = no poses)", flag="--odom-topic")


@dataclass
class _WindowScan:
    """A window being read by :meth:`BagReader.scan`: its candidate grid and its newest unsent frame."""

    t0: int | None = None
    next_ns: int = 0
    last: tuple[int, bytes] | None = None


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
        self._offsets: dict[int, int] = {}  # image stamp -> record offset (mcap, uncompressed chunks)
        try:
            self._image = self._image_connection()
            self._direct = mcap_index(self._reader, self.storage, self.path)
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
    def image_messages(self) -> int:
        """Number of messages on the image topic."""
        return int(self._image.msgcount)

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
        for connection, _, raw in self._odometry_messages(found):
            message = self._store.deserialize_cdr(raw, connection.msgtype)
            stamp = int(message.header.stamp.sec) * 1_000_000_000 + int(message.header.stamp.nanosec)
            p, q = message.pose.pose.position, message.pose.pose.orientation
            history.add(stamp, Pose((p.x, p.y, p.z), (q.x, q.y, q.z, q.w)))
        return history

    def _odometry_messages(self, found: list[Any]) -> Iterator[tuple[Any, int, bytes]]:
        """The odometry messages in time order: record by record where the index allows (see
        :class:`.rosbag_index.McapIndex`)."""
        channel = channel_id(self._reader, self.topics.odometry) if len(found) == 1 else None
        entries = None
        if self._direct is not None and self._direct.readable and channel is not None:
            entries = self._direct.entries(channel)
        if entries is None or len(entries) != found[0].msgcount:
            yield from self._reader.messages(connections=found)
            return
        for stamp, offset in entries:
            yield found[0], stamp, self._direct.read(offset)

    def window(self, start_ns: int, end_ns: int) -> list[Frame]:
        """The candidate frames (1 fps grid and the last frame) recorded in [start_ns, end_ns], with poses.

        Raises :class:`BagReadError` when the window lies outside the bag, holds no frames, or a message
        in it cannot be read or decoded. For several windows of one bag use :meth:`scan` (one pass).
        """
        frames: list[Frame] = []
        error = self.scan([(start_ns, end_ns)], lambda _, frame: frames.append(frame))[0]
        if error is not None:
            raise error
        return frames

    def scan(
        self,
        windows: Sequence[tuple[int, int]],
        on_frame: Callable[[int, Frame], None],
        on_progress: Callable[[int, int], None] | None = None,
    ) -> list[BagReadError | None]:
        """Hand each window its candidate frames, in stamp order, as they are read (one pass over the bag).

        ``on_frame(i, frame)`` gets the candidates of ``windows[i]`` (``(start_ns, end_ns)``, inclusive):
        the 1 fps grid from the window's first frame and the window's last frame
        (:func:`~embodied_r_ros.keyframes.candidate_indices`). A frame shared by windows is read and decoded
        once. When the bag's index gives the image stamps (mcap with chunk indexes, sqlite3), only the
        candidates are read at all; otherwise the image messages are read once, in order, up to the last
        window's end. ``on_progress(done, total)`` follows the image messages read. Returns per window
        None, or the :class:`BagReadError` that ended it (outside the bag, no frames, a message that cannot
        be decoded, a corrupt bag); the other windows go on.
        """
        errors: list[BagReadError | None] = [None] * len(windows)
        for i, (start, end) in enumerate(windows):
            if end < self.start_ns or start > self.end_ns or end < start:
                errors[i] = BagReadError(
                    f"window [{start}, {end}] ns lies outside bag {self.path} "
                    f"([{self.start_ns}, {self.end_ns}] ns)"
                )
        try:
            stamps = self._indexed_stamps()
        except Exception as exc:  # a damaged index: fall back to reading the messages
            logger.debug("bag %s: no usable index (%s); reading every image message", self.path, exc)
            stamps = None
        if stamps is None:
            return self._scan_all(windows, errors, on_frame, on_progress)
        return self._scan_indexed(windows, errors, stamps, on_frame, on_progress)

    def _indexed_stamps(self) -> list[int] | None:
        """The image messages' recorded stamps from the bag's index (sorted), or None when it has none."""
        self._offsets = {}
        channel = channel_id(self._reader, self._image.topic)
        if channel is None:
            return None
        if self._direct is not None:
            entries = self._direct.entries(channel)
            stamps = None if entries is None else [t for t, _ in entries]
            if entries is not None and self._direct.readable:
                for stamp, offset in reversed(entries):  # the first message of a stamp wins
                    self._offsets[stamp] = offset
        elif self.storage == "sqlite3":
            stamps = sqlite_stamps(self._reader, self._image.topic)
        else:
            return None
        if stamps is None or len(stamps) != self.image_messages:
            self._offsets = {}
            return None  # an index that does not account for every message is not trusted
        return sorted(stamps)

    def _scan_indexed(
        self,
        windows: Sequence[tuple[int, int]],
        errors: list[BagReadError | None],
        stamps: list[int],
        on_frame: Callable[[int, Frame], None],
        on_progress: Callable[[int, int], None] | None,
    ) -> list[BagReadError | None]:
        wanted: dict[int, list[int]] = {}  # stamp -> windows it is a candidate of
        for w, (start, end) in enumerate(windows):
            if errors[w] is not None:
                continue
            inside = stamps[bisect.bisect_left(stamps, start) : bisect.bisect_right(stamps, end)]
            if not inside:
                errors[w] = BagReadError(f"window [{start}, {end}] ns of bag {self.path} holds no frames")
                continue
            for i in candidate_indices(inside, self.candidate_fps):
                wanted.setdefault(inside[i], []).append(w)
        for done, stamp in enumerate(sorted(wanted)):
            if on_progress is not None:
                on_progress(done, len(wanted))
            users = [w for w in wanted[stamp] if errors[w] is None]
            if not users:
                continue
            try:
                frame = self._frame(stamp, self._raw_at(stamp))
            except BagReadError as exc:
                for w in users:
                    errors[w] = exc
                continue
            for w in users:
                on_frame(w, frame)
        if on_progress is not None:
            on_progress(len(wanted), len(wanted))
        return errors

    def _raw_at(self, stamp: int) -> bytes:
        """The raw image message recorded at ``stamp`` (reads only that record, chunk or row)."""
        try:
            offset = self._offsets.get(stamp)
            if offset is not None and self._direct is not None:
                return self._direct.read(offset)
            for _, _, raw in self._reader.messages(connections=[self._image], start=stamp, stop=stamp + 1):
                return raw
        except BagReadError as exc:
            raise BagReadError(f"bag {self.path} is corrupt or truncated: {exc}") from exc
        except Exception as exc:  # rosbags raises several types for broken files
            raise BagReadError(f"bag {self.path} is corrupt or truncated: {exc}") from exc
        raise BagReadError(f"bag {self.path} has no image at {stamp} ns although its index lists one")

    def _scan_all(
        self,
        windows: Sequence[tuple[int, int]],
        errors: list[BagReadError | None],
        on_frame: Callable[[int, Frame], None],
        on_progress: Callable[[int, int], None] | None,
    ) -> list[BagReadError | None]:
        """:meth:`scan` by reading the image messages in order (the last frame is known one frame late)."""
        period = candidate_period_ns(self.candidate_fps)
        total = self.image_messages
        read = 0
        pending = sorted((w for w in range(len(windows)) if errors[w] is None), key=lambda w: windows[w][0])
        pending.reverse()  # pop() gives the window that starts next
        active: dict[int, _WindowScan] = {}
        decoded: dict[int, Frame] = {}  # frames handed out in this pass, by stamp (shared by windows)

        def frame_at(stamp: int, raw: bytes) -> Frame:
            frame = decoded.get(stamp)
            if frame is None:
                frame = decoded[stamp] = self._frame(stamp, raw)
            return frame

        def deliver(w: int, stamp: int, raw: bytes) -> None:
            try:
                on_frame(w, frame_at(stamp, raw))
            except BagReadError as exc:
                errors[w] = exc
                active.pop(w, None)

        def finish(w: int) -> None:
            state = active.pop(w)
            if state.last is not None:
                deliver(w, *state.last)
            if errors[w] is None and state.t0 is None:
                start, end = windows[w]
                errors[w] = BagReadError(f"window [{start}, {end}] ns of bag {self.path} holds no frames")

        try:
            for _, stamp, raw in self._reader.messages(connections=[self._image]):
                if on_progress is not None:
                    on_progress(read, total)
                read += 1
                for w in [w for w, state in active.items() if stamp > windows[w][1]]:
                    finish(w)
                while pending and windows[pending[-1]][0] <= stamp:
                    w = pending.pop()
                    if stamp <= windows[w][1]:
                        active[w] = _WindowScan()
                    else:  # the window fell between two frames
                        active[w] = _WindowScan()
                        finish(w)
                if not active and not pending:
                    break
                for w in list(active):
                    state = active[w]
                    if state.t0 is None:
                        state.t0, state.next_ns = stamp, stamp + period
                    elif stamp >= state.next_ns:
                        state.next_ns = state.t0 + ((stamp - state.t0) // period + 1) * period
                    else:
                        state.last = (stamp, raw)  # handed out only if it turns out to be the last
                        continue
                    state.last = None
                    deliver(w, stamp, raw)
            for w in list(active):
                finish(w)
            for w in pending:
                start, end = windows[w]
                errors[w] = BagReadError(f"window [{start}, {end}] ns of bag {self.path} holds no frames")
        except Exception as exc:  # rosbags raises several types for broken files
            error = BagReadError(f"bag {self.path} is corrupt or truncated: {exc}")
            for w in [*active, *pending]:
                errors[w] = error
        return errors

    def _frame(self, stamp: int, raw: bytes) -> Frame:
        try:
            message = self._store.deserialize_cdr(raw, self._image.msgtype)
            image = message_to_rgb(message)
        except ImageConversionError as exc:
            raise BagReadError(f"image at {stamp} ns in bag {self.path} cannot be decoded: {exc}") from exc
        except Exception as exc:
            raise BagReadError(f"message at {stamp} ns in bag {self.path} is corrupt: {exc}") from exc
        pose = self._poses.pose_at(stamp) if self._poses is not None else None
        return Frame(image, stamp, pose)

    def close(self) -> None:
        """Close the bag's files."""
        try:
            self._reader.close()
        except Exception:  # closing a half-opened reader must not hide the original error
            pass
