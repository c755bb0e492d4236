"""The robot's recent video history: a time-indexed frame store with a hard memory budget.

Frames are stored as downscaled copies (``max(h, w) <= max_side``), JPEG-compressed at ``jpeg_quality``
or raw when the quality is 0, never as the camera's full frames. Frames come back as RGB uint8 with
their poses; raw-stored frames come back without a copy, as read-only arrays. ``memory_bytes`` counts
the stored image bytes plus a fixed per-frame overhead (:data:`ENTRY_OVERHEAD_BYTES`) and never exceeds
the budget: after each push the oldest frames are evicted while the budget is exceeded or while they are
more than ``history_s`` older than the newest stamp (stamps, not the wall clock, so bags and sim time
work).

Out-of-order stamps: a late frame is inserted in stamp order (counted in :attr:`ClipBuffer.late_frames`)
as long as it is within ``history_s`` of the newest; older ones and exact duplicate stamps are dropped
(counted in :attr:`ClipBuffer.dropped_frames`). A clock that jumps far ahead evicts everything before it;
after a jump backwards (a bag loops, a simulation restarts) call :meth:`ClipBuffer.clear`.

Thread-safe: the camera callback pushes while an inference thread reads. Resizing and encoding happen
before the lock is taken and decoding after it is released; the lock only guards the index.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

import cv2
import numpy as np

from .config import BufferConfig
from .frames import NS_PER_S, Clip, Frame, Pose
from .image_conversion import decode_rgb

ENTRY_OVERHEAD_BYTES = 256  # bookkeeping per stored frame (entry object, stamp, pose), counted in the budget

class ClipBufferError(ValueError):
    """A frame or query the buffer cannot serve; the message names the problem and the fix."""


@dataclass(frozen=True)
class _Entry:
    stamp_ns: int
    pose: Pose | None
    payload: np.ndarray  # 1-D JPEG bytes, or the read-only HxWx3 RGB pixels when stored raw
    nbytes: int


class ClipBuffer:
    """Time-indexed frame history under a memory budget (see the module docstring)."""

    def __init__(self, config: BufferConfig | None = None) -> None:
        self.config = config or BufferConfig()
        self.budget_bytes = int(self.config.memory_mb * 1024 * 1024)
        self.history_ns = int(self.config.history_s * NS_PER_S)
        self._lock = threading.Lock()
        self._stamps: list[int] = []
        self._entries: list[_Entry] = []
        self._bytes = 0
        self.late_frames = 0
        self.dropped_frames = 0

    # ---------------------------------------------------------------- writing

    def push(self, frame: Frame) -> bool:
        """Store a downscaled (and compressed) copy of ``frame``; False when it was dropped (stale/duplicate).

        Raises :class:`ClipBufferError` when one frame alone exceeds the memory budget.
        """
        entry = self._encode(frame)
        if entry.nbytes > self.budget_bytes:
            raise ClipBufferError(
                f"one frame needs {entry.nbytes} bytes but buffer.memory_mb={self.config.memory_mb} allows "
                f"{self.budget_bytes}; raise buffer.memory_mb or lower buffer.max_side / buffer.jpeg_quality"
            )
        with self._lock:
            stamp = entry.stamp_ns
            newest = self._stamps[-1] if self._stamps else None
            if newest is not None and stamp < newest - self.history_ns:
                self.dropped_frames += 1
                return False
            at = bisect.bisect_left(self._stamps, stamp)
            if at < len(self._stamps) and self._stamps[at] == stamp:
                self.dropped_frames += 1
                return False
            if at < len(self._stamps):
                self.late_frames += 1
            self._stamps.insert(at, stamp)
            self._entries.insert(at, entry)
            self._bytes += entry.nbytes
            self._evict()
            return True

    def clear(self) -> None:
        """Drop every stored frame (the counters are kept)."""
        with self._lock:
            self._stamps.clear()
            self._entries.clear()
            self._bytes = 0

    def _evict(self) -> None:
        """Drop the oldest entries while over budget or too old (caller holds the lock)."""
        horizon = self._stamps[-1] - self.history_ns
        total, count = self._bytes, 0
        for entry in self._entries:
            if total <= self.budget_bytes and entry.stamp_ns >= horizon:
                break
            total -= entry.nbytes
            count += 1
        if count:
            del self._stamps[:count]
            del self._entries[:count]
            self._bytes = total

    def _encode(self, frame: Frame) -> _Entry:
        image = frame.image
        h, w = image.shape[:2]
        side = self.config.max_side
        if max(h, w) > side:
            scale = side / max(h, w)
            size = (max(1, round(w * scale)), max(1, round(h * scale)))
            image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        if self.config.jpeg_quality == 0:
            # Own the pixels (the caller may reuse its array) and keep readers from changing them.
            payload = np.array(image, dtype=np.uint8, order="C", copy=True)
            payload.setflags(write=False)
        else:
            bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
            ok, payload = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, self.config.jpeg_quality])
            if not ok:
                raise ClipBufferError(f"JPEG encoding of the frame at {frame.stamp_ns} ns failed")
        return _Entry(int(frame.stamp_ns), frame.pose, payload, int(payload.nbytes) + ENTRY_OVERHEAD_BYTES)

    # ---------------------------------------------------------------- reading

    def __len__(self) -> int:
        with self._lock:
            return len(self._stamps)

    @property
    def memory_bytes(self) -> int:
        """Bytes held: stored images plus the per-frame overhead; always <= ``budget_bytes``."""
        with self._lock:
            return self._bytes

    @property
    def oldest_ns(self) -> int | None:
        """Stamp of the oldest stored frame (None when empty)."""
        with self._lock:
            return self._stamps[0] if self._stamps else None

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest stored frame (None when empty)."""
        with self._lock:
            return self._stamps[-1] if self._stamps else None

    def stamps(self) -> list[int]:
        """Stamps of all stored frames, oldest first."""
        with self._lock:
            return list(self._stamps)

    def between(self, start_ns: int, end_ns: int) -> Clip:
        """The stored frames with ``start_ns <= stamp <= end_ns``, decoded, oldest first."""
        with self._lock:
            lo = bisect.bisect_left(self._stamps, int(start_ns))
            hi = bisect.bisect_right(self._stamps, int(end_ns))
            entries = self._entries[lo:hi]
        return Clip(tuple(self._decode(e) for e in entries))

    def window(self, seconds: float, end_ns: int | None = None) -> Clip:
        """The frames of the last ``seconds`` up to ``end_ns`` (default: the newest stamp), inclusive."""
        if not seconds >= 0:
            raise ClipBufferError(f"window length must be >= 0 seconds, got {seconds}")
        if end_ns is None:
            end_ns = self.newest_ns
            if end_ns is None:
                return Clip()
        return self.between(int(end_ns) - round(seconds * NS_PER_S), int(end_ns))

    def get(self, stamp_ns: int, tolerance_ns: int | None = None) -> Frame | None:
        """The frame with this stamp, else the nearest one (the earlier on a tie).

        None when the buffer is empty or, with ``tolerance_ns``, when the nearest is farther than that.
        """
        stamp_ns = int(stamp_ns)
        with self._lock:
            if not self._stamps:
                return None
            at = bisect.bisect_left(self._stamps, stamp_ns)
            candidates = [i for i in (at - 1, at) if 0 <= i < len(self._stamps)]
            best = min(candidates, key=lambda i: (abs(self._stamps[i] - stamp_ns), self._stamps[i]))
            entry = self._entries[best]
        if tolerance_ns is not None and abs(entry.stamp_ns - stamp_ns) > tolerance_ns:
            return None
        return self._decode(entry)

    def latest(self) -> Frame | None:
        """The newest stored frame (None when empty)."""
        with self._lock:
            entry = self._entries[-1] if self._entries else None
        return None if entry is None else self._decode(entry)

    def payload(self, stamp_ns: int) -> np.ndarray | None:
        """The stored bytes of the frame stamped exactly ``stamp_ns`` (None when not held): the 1-D JPEG
        bytes, or the read-only HxWx3 RGB pixels when stored raw; never changed once stored, so it may be
        kept (the durable memory writes it as it is)."""
        stamp_ns = int(stamp_ns)
        with self._lock:
            at = bisect.bisect_left(self._stamps, stamp_ns)
            if at < len(self._stamps) and self._stamps[at] == stamp_ns:
                return self._entries[at].payload
        return None

    @staticmethod
    def _decode(entry: _Entry) -> Frame:
        return Frame(decode_payload(entry.payload, entry.stamp_ns), entry.stamp_ns, entry.pose)


def decode_payload(payload: np.ndarray, stamp_ns: int) -> np.ndarray:
    """The RGB pixels of a stored payload (:meth:`ClipBuffer.payload`): raw pixels as they are (read-only,
    no copy), JPEG bytes decoded. Raises :class:`ClipBufferError` for bytes that are not a JPEG."""
    if payload.ndim == 3:
        return payload
    image = decode_rgb(payload)
    if image is None:
        raise ClipBufferError(f"stored JPEG of the frame at {stamp_ns} ns could not be decoded")
    return image
