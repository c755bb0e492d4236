"""Recent odometry poses, to give key frames the robot's pose at their stamp.

The node looks poses up when a question is answered, not when a frame arrives: by then the odometry
around every key frame has arrived, so the pose is interpolated between the samples before and after the
frame (:func:`~embodied_r_ros.poses.ego_motion.interpolate_pose`) instead of extrapolated from the last one.

Samples live in two preallocated numpy arrays (stamps, and x y z qx qy qz qw), so memory is fixed:
``capacity * 64`` bytes. When the arrays are full, the older half is dropped. Samples older than the
newest are ignored (odometry is in stamp order; a clock that jumps back is handled by :meth:`clear`).
Thread-safe: the odometry callback appends while the query thread looks up.
"""

from __future__ import annotations

import threading

import numpy as np

from ..frames import NS_PER_S, Pose
from .ego_motion import interpolate_pose


class PoseHistory:
    """The last ``capacity`` odometry poses, looked up by stamp with interpolation."""

    def __init__(self, capacity: int = 65536, max_gap_s: float = 0.5) -> None:
        if capacity < 2:
            raise ValueError(f"pose history capacity must be >= 2, got {capacity}")
        if not max_gap_s > 0:
            raise ValueError(f"max_gap_s must be > 0 seconds, got {max_gap_s}")
        self.capacity = capacity
        self.max_gap_ns = int(max_gap_s * NS_PER_S)
        self._stamps = np.zeros(capacity, dtype=np.int64)
        self._poses = np.zeros((capacity, 7), dtype=np.float64)
        self._count = 0
        self._lock = threading.Lock()
        self.received = 0
        self.ignored = 0

    def __len__(self) -> int:
        with self._lock:
            return self._count

    def add(self, stamp_ns: int, pose: Pose) -> bool:
        """Append one sample; False (and counted in ``ignored``) when it is not newer than the newest."""
        row = (*pose.position, *pose.orientation)
        with self._lock:
            self.received += 1
            if self._count and stamp_ns <= self._stamps[self._count - 1]:
                self.ignored += 1
                return False
            if self._count == self.capacity:
                keep = self.capacity // 2
                self._stamps[:keep] = self._stamps[self._count - keep : self._count]
                self._poses[:keep] = self._poses[self._count - keep : self._count]
                self._count = keep
            self._stamps[self._count] = stamp_ns
            self._poses[self._count] = row
            self._count += 1
            return True

    def clear(self) -> None:
        """Forget every sample (the counters are kept)."""
        with self._lock:
            self._count = 0

    def pose_at(self, stamp_ns: int) -> Pose | None:
        """The pose at ``stamp_ns``: interpolated between the samples around it, or the nearest sample
        when the stamp lies outside them; None when the nearest sample is more than ``max_gap_s`` away."""
        with self._lock:
            count = self._count
            if not count:
                return None
            stamps = self._stamps[:count]
            after = int(np.searchsorted(stamps, stamp_ns, side="left"))
            before = max(0, min(after - 1, count - 1))
            after = min(after, count - 1)
            t0, t1 = int(stamps[before]), int(stamps[after])
            p0, p1 = self._poses[before].copy(), self._poses[after].copy()
        if min(abs(stamp_ns - t0), abs(stamp_ns - t1)) > self.max_gap_ns:
            return None
        # Interpolating across a gap in the odometry would invent a path; take the nearer sample then.
        if t1 - t0 > 2 * self.max_gap_ns:
            nearest = p0 if abs(stamp_ns - t0) <= abs(stamp_ns - t1) else p1
            return _pose(nearest)
        return interpolate_pose(_pose(p0), t0, _pose(p1), t1, stamp_ns)


def _pose(row: np.ndarray) -> Pose:
    x, y, z, qx, qy, qz, qw = (float(v) for v in row)
    return Pose(position=(x, y, z), orientation=(qx, qy, qz, qw))
