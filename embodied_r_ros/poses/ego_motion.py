"""The robot's own motion between two poses, in words and as one of the paper's ten action labels.

Robots know how they moved (odometry), so the action between two key frames need not be guessed from
pixels. Poses follow REP-103 body axes: x forward, y left, z up; quaternions are (x, y, z, w). The motion
from pose ``a`` to pose ``b`` is expressed in ``a``'s body frame:

- ``forward_m``, ``left_m``, ``up_m``: the displacement along a's x, y, z axes (negative: backward, right,
  down);
- ``yaw_deg``: rotation about a's z axis, positive = turned left (counter-clockwise seen from above);
- ``pitch_deg``: rotation about a's y axis, REP-103 sign, so positive = nose (camera) tilted DOWN: a
  positive rotation about +y (left) carries the x axis (forward) towards -z (down).

Yaw and pitch are the first two angles of the z-y'-x'' (yaw, pitch, roll) decomposition of the relative
rotation; roll is not reported (the paper's actions have none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..frames import Pose

Quaternion = tuple[float, float, float, float]  # (x, y, z, w)

# The paper's ten actions (perception asks the VLM for one of these between consecutive key frames).
ACTION_LABELS = (
    "move forward",
    "move backward",
    "move left",
    "move right",
    "move upward",
    "move downward",
    "rotate left",
    "rotate right",
    "tilt downward",
    "tilt upward",
)
STILL_LABEL = "stay still"  # returned by EgoMotion.label() when no component passes its threshold

MIN_DISTANCE_M = 0.1  # translations below this are not reported
MIN_ANGLE_DEG = 5.0  # rotations below this are not reported
DEGREES_PER_METRE = 30.0  # for the dominant action: 1 m of travel weighs as much as 30 deg of rotation


@dataclass(frozen=True)
class EgoMotion:
    """Motion from one pose to another, in the first pose's body frame (see the module docstring)."""

    forward_m: float = 0.0
    left_m: float = 0.0
    up_m: float = 0.0
    yaw_deg: float = 0.0
    pitch_deg: float = 0.0

    def _components(self, min_distance_m: float, min_angle_deg: float) -> list[tuple[str, str, str, float]]:
        """(verb phrase, action label, amount text, weight) of each component over its threshold, in order."""
        parts = []
        for value, positive, negative in (
            (self.forward_m, ("moved forward", "move forward"), ("moved backward", "move backward")),
            (self.left_m, ("moved left", "move left"), ("moved right", "move right")),
            (self.up_m, ("moved up", "move upward"), ("moved down", "move downward")),
        ):
            if abs(value) >= min_distance_m:
                phrase, label = positive if value > 0 else negative
                parts.append((phrase, label, f"{abs(value):.1f} m", abs(value) * DEGREES_PER_METRE))
        for value, positive, negative in (
            (self.yaw_deg, ("turned left", "rotate left"), ("turned right", "rotate right")),
            (self.pitch_deg, ("tilted down", "tilt downward"), ("tilted up", "tilt upward")),
        ):
            if abs(value) >= min_angle_deg:
                phrase, label = positive if value > 0 else negative
                parts.append((phrase, label, f"{abs(value):.0f} deg", abs(value)))
        return parts

    def describe(self, min_distance_m: float = MIN_DISTANCE_M, min_angle_deg: float = MIN_ANGLE_DEG) -> str:
        """The motion in words, e.g. "moved forward 1.8 m and turned left 35 deg".

        Components below the thresholds are skipped ("stayed in place" when all are); the order is fixed:
        forward/backward, left/right, up/down, turn, tilt.
        """
        components = self._components(min_distance_m, min_angle_deg)
        parts = [f"{phrase} {amount}" for phrase, _, amount, _ in components]
        if not parts:
            return "stayed in place"
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

    def label(self, min_distance_m: float = MIN_DISTANCE_M, min_angle_deg: float = MIN_ANGLE_DEG) -> str:
        """The dominant component as one of :data:`ACTION_LABELS`, or :data:`STILL_LABEL` when none passes.

        Translations and rotations compete with 1 m worth :data:`DEGREES_PER_METRE` degrees; ties go to
        the earlier component in the fixed order of :meth:`describe`.
        """
        parts = self._components(min_distance_m, min_angle_deg)
        if not parts:
            return STILL_LABEL
        best = max(range(len(parts)), key=lambda i: (parts[i][3], -i))
        return parts[best][1]


def quaternion_to_matrix(q: Quaternion | np.ndarray) -> np.ndarray:
    """3x3 rotation matrix of quaternion (x, y, z, w); normalises it, raises ``ValueError`` on a zero one."""
    x, y, z, w = _unit(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def heading(pose: Pose) -> float:
    """The camera's heading in the odometry frame (radians, from +x towards +y): its forward (x) axis
    projected on the ground plane."""
    forward = quaternion_to_matrix(pose.orientation)[:, 0]
    return math.atan2(float(forward[1]), float(forward[0]))


def _unit(q: Quaternion | np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    if q.shape != (4,) or not np.all(np.isfinite(q)):
        raise ValueError(f"orientation must be 4 finite numbers (x, y, z, w), got {q.tolist()}")
    norm = float(np.linalg.norm(q))
    if norm < 1e-9:
        raise ValueError("orientation quaternion has zero length; use (0, 0, 0, 1) for no rotation")
    return q / norm


def ego_motion(a: Pose, b: Pose) -> EgoMotion:
    """The motion from pose ``a`` to pose ``b``, expressed in ``a``'s body frame."""
    rot_a = quaternion_to_matrix(a.orientation)
    delta = rot_a.T @ (np.asarray(b.position, dtype=np.float64) - np.asarray(a.position, dtype=np.float64))
    relative = rot_a.T @ quaternion_to_matrix(b.orientation)
    yaw = math.atan2(relative[1, 0], relative[0, 0])
    pitch = math.asin(float(np.clip(-relative[2, 0], -1.0, 1.0)))
    return EgoMotion(
        forward_m=float(delta[0]),
        left_m=float(delta[1]),
        up_m=float(delta[2]),
        yaw_deg=math.degrees(yaw),
        pitch_deg=math.degrees(pitch),
    )


def slerp(q0: Quaternion, q1: Quaternion, alpha: float) -> np.ndarray:
    """Spherical linear interpolation of unit quaternions (x, y, z, w) along the shorter arc."""
    a, b = _unit(q0), _unit(q1)
    dot = float(np.dot(a, b))
    if dot < 0.0:  # q and -q are the same rotation; take the short way round
        b, dot = -b, -dot
    if dot > 0.9995:  # nearly equal: lerp is exact enough and avoids dividing by sin(~0)
        q = a + alpha * (b - a)
        return q / np.linalg.norm(q)
    theta = math.acos(dot)
    return (math.sin((1 - alpha) * theta) * a + math.sin(alpha * theta) * b) / math.sin(theta)


def interpolate_pose(p0: Pose, t0_ns: int, p1: Pose, t1_ns: int, t_ns: int) -> Pose:
    """The pose at ``t_ns`` between ``p0`` (at ``t0_ns``) and ``p1`` (at ``t1_ns``).

    Position is interpolated linearly, orientation by slerp. Times outside [t0, t1] are clamped to the
    nearer pose (odometry is not extrapolated); equal times give ``p0``.
    """
    span = t1_ns - t0_ns
    alpha = 0.0 if span == 0 else min(1.0, max(0.0, (t_ns - t0_ns) / span))
    position = (1 - alpha) * np.asarray(p0.position, dtype=np.float64) + alpha * np.asarray(p1.position)
    orientation = slerp(p0.orientation, p1.orientation, alpha)
    x, y, z = (float(v) for v in position)
    qx, qy, qz, qw = (float(v) for v in orientation)
    return Pose(position=(x, y, z), orientation=(qx, qy, qz, qw))
