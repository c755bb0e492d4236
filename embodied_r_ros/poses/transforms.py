"""Rigid transforms as :class:`~embodied_r_ros.frames.Pose`: composing and inverting them.

A pose ``a_T_b`` (position, orientation (x, y, z, w)) is frame b expressed in frame a, as ROS's
geometry_msgs/Transform ``parent -> child`` is the child in the parent. Chains multiply left to right:
``compose(odom_T_base, base_T_camera)`` is the camera in the odometry frame. Results are normalised with
w >= 0 (q and -q are the same rotation). Plain Python and numpy.
"""

from __future__ import annotations

import math

import numpy as np

from ..frames import Pose
from .ego_motion import quaternion_to_matrix

IDENTITY = Pose()


def pose_problem(pose: Pose) -> str:
    """Why a pose cannot be used ("" when it can): non-finite numbers, or a zero-length quaternion."""
    if not all(math.isfinite(v) for v in (*pose.position, *pose.orientation)):
        return f"non-finite pose {pose.position} {pose.orientation}"
    if math.fsum(v * v for v in pose.orientation) < 1e-12:
        return "its orientation quaternion has zero length"
    return ""


def quaternion_multiply(a: tuple[float, ...] | np.ndarray, b: tuple[float, ...] | np.ndarray) -> np.ndarray:
    """The Hamilton product ``a * b`` of two (x, y, z, w) quaternions: rotation ``b`` first, then ``a``."""
    ax, ay, az, aw = (float(v) for v in a)
    bx, by, bz, bw = (float(v) for v in b)
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def compose(a: Pose, b: Pose) -> Pose:
    """``a * b``: pose ``b`` (given in the frame ``a`` describes) expressed in ``a``'s parent frame.

    Raises ``ValueError`` for a zero or non-finite quaternion.
    """
    rotation_a, rotation_b = _unit(a.orientation), _unit(b.orientation)
    position = quaternion_to_matrix(rotation_a) @ np.asarray(b.position, dtype=np.float64) + a.position
    return _pose(position, quaternion_multiply(rotation_a, rotation_b))


def invert(a: Pose) -> Pose:
    """The inverse transform: for ``a = parent_T_child``, ``child_T_parent``."""
    x, y, z, w = _unit(a.orientation)
    rotation = quaternion_to_matrix((x, y, z, w))
    return _pose(-rotation.T @ np.asarray(a.position, dtype=np.float64), np.array([-x, -y, -z, w]))


def _unit(q: tuple[float, ...]) -> np.ndarray:
    """``q`` normalised; ``ValueError`` for a zero or non-finite one (as :func:`quaternion_to_matrix`)."""
    quaternion_to_matrix(q)  # the check, with its message
    array = np.asarray(q, dtype=np.float64)
    return array / np.linalg.norm(array)


def _pose(position: np.ndarray, orientation: np.ndarray) -> Pose:
    orientation = orientation / np.linalg.norm(orientation)
    if orientation[3] < 0:  # so that equal rotations compare equal
        orientation = -orientation
    x, y, z = (float(v) for v in position)
    qx, qy, qz, qw = (float(v) for v in orientation)
    return Pose(position=(x, y, z), orientation=(qx, qy, qz, qw))
