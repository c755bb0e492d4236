"""Ego motion from odometry poses (REP-103 body axes) to words and the paper's action labels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_r_ros.frames import Pose
from embodied_r_ros.poses.ego_motion import (
    ACTION_LABELS,
    STILL_LABEL,
    EgoMotion,
    ego_motion,
    interpolate_pose,
    quaternion_to_matrix,
)


def yaw_q(deg: float) -> tuple[float, float, float, float]:
    half = math.radians(deg) / 2
    return (0.0, 0.0, math.sin(half), math.cos(half))


def pitch_q(deg: float) -> tuple[float, float, float, float]:
    half = math.radians(deg) / 2
    return (0.0, math.sin(half), 0.0, math.cos(half))


ORIGIN = Pose()


def test_pure_forward() -> None:
    motion = ego_motion(ORIGIN, Pose((2.0, 0.0, 0.0)))
    assert (motion.forward_m, motion.left_m, motion.up_m) == pytest.approx((2.0, 0.0, 0.0))
    assert motion.label() == "move forward"
    assert motion.describe() == "moved forward 2.0 m"


def test_motion_is_expressed_in_the_first_pose_frame() -> None:
    # Facing +y (yawed 90 deg left), moving +1.5 m along world y is moving forward; world -x is right.
    start = Pose((1.0, 1.0, 0.0), yaw_q(90))
    assert ego_motion(start, Pose((1.0, 2.5, 0.0), yaw_q(90))).forward_m == pytest.approx(1.5)
    side = ego_motion(start, Pose((2.0, 1.0, 0.0), yaw_q(90)))
    assert side.left_m == pytest.approx(-1.0) and side.label() == "move right"


def test_pure_left_backward_and_vertical() -> None:
    assert ego_motion(ORIGIN, Pose((0.0, 1.0, 0.0))).label() == "move left"
    back = ego_motion(ORIGIN, Pose((-0.7, 0.0, 0.0)))
    assert back.forward_m == pytest.approx(-0.7) and back.label() == "move backward"
    assert back.describe() == "moved backward 0.7 m"
    assert ego_motion(ORIGIN, Pose((0.0, 0.0, 0.5))).label() == "move upward"
    assert ego_motion(ORIGIN, Pose((0.0, 0.0, -0.5))).label() == "move downward"


def test_turn_left_90_and_right() -> None:
    left = ego_motion(ORIGIN, Pose(orientation=yaw_q(90)))
    assert left.yaw_deg == pytest.approx(90.0) and left.pitch_deg == pytest.approx(0.0, abs=1e-9)
    assert left.label() == "rotate left" and left.describe() == "turned left 90 deg"
    right = ego_motion(Pose(orientation=yaw_q(170)), Pose(orientation=yaw_q(-170)))  # across +-180
    assert right.yaw_deg == pytest.approx(20.0)
    assert ego_motion(ORIGIN, Pose(orientation=yaw_q(-30))).label() == "rotate right"


def test_positive_pitch_is_nose_down_in_rep103() -> None:
    rotation = quaternion_to_matrix(pitch_q(20))
    forward_after = rotation @ np.array([1.0, 0.0, 0.0])
    assert forward_after[2] < 0  # the body's x axis now points below the horizon
    down = ego_motion(ORIGIN, Pose(orientation=pitch_q(20)))
    assert down.pitch_deg == pytest.approx(20.0)
    assert down.label() == "tilt downward" and down.describe() == "tilted down 20 deg"
    up = ego_motion(ORIGIN, Pose(orientation=pitch_q(-15)))
    assert up.label() == "tilt upward" and up.describe() == "tilted up 15 deg"


def test_combined_motion_description_and_dominant_label() -> None:
    motion = ego_motion(ORIGIN, Pose((1.8, 0.05, 0.0), yaw_q(35)))
    assert motion.describe() == "moved forward 1.8 m and turned left 35 deg"
    assert motion.label() == "move forward"  # 1.8 m weighs 54 deg-equivalents > 35 deg
    turn = ego_motion(ORIGIN, Pose((0.5, 0.0, 0.0), yaw_q(40)))
    assert turn.label() == "rotate left"  # 0.5 m = 15 < 40
    # Yaw then pitch: a turn left 30 deg followed by a 10 deg nose-down tilt in the turned frame.
    quat = _multiply(yaw_q(30), pitch_q(10))
    tilted = ego_motion(ORIGIN, Pose((0.0, -0.4, 0.2), quat))
    assert tilted.yaw_deg == pytest.approx(30.0) and tilted.pitch_deg == pytest.approx(10.0)
    assert tilted.describe() == "moved right 0.4 m, moved up 0.2 m, turned left 30 deg and tilted down 10 deg"


def test_small_motion_is_stillness() -> None:
    motion = ego_motion(ORIGIN, Pose((0.05, -0.03, 0.0), yaw_q(2)))
    assert motion.describe() == "stayed in place"
    assert motion.label() == STILL_LABEL
    assert EgoMotion(forward_m=0.05).label(min_distance_m=0.01) == "move forward"


def test_labels_are_the_paper_actions() -> None:
    cases = [EgoMotion(forward_m=1), EgoMotion(forward_m=-1), EgoMotion(left_m=1), EgoMotion(left_m=-1),
             EgoMotion(up_m=1), EgoMotion(up_m=-1), EgoMotion(yaw_deg=20), EgoMotion(yaw_deg=-20),
             EgoMotion(pitch_deg=20), EgoMotion(pitch_deg=-20)]
    assert [c.label() for c in cases] == list(ACTION_LABELS)


def test_identity_and_unnormalised_quaternions() -> None:
    pose = Pose((3.0, -2.0, 1.0), (0.0, 0.0, 2 * math.sin(0.4), 2 * math.cos(0.4)))  # length 2
    motion = ego_motion(pose, pose)
    assert all(v == pytest.approx(0.0, abs=1e-9) for v in vars(motion).values())
    with pytest.raises(ValueError, match="zero length"):
        ego_motion(Pose(orientation=(0.0, 0.0, 0.0, 0.0)), ORIGIN)


def test_interpolate_pose() -> None:
    p0, p1 = Pose((0.0, 0.0, 0.0), yaw_q(0)), Pose((2.0, 4.0, -2.0), yaw_q(90))
    mid = interpolate_pose(p0, 100, p1, 300, 200)
    assert mid.position == pytest.approx((1.0, 2.0, -1.0))
    assert ego_motion(p0, mid).yaw_deg == pytest.approx(45.0)
    quarter = interpolate_pose(p0, 100, p1, 300, 150)
    assert ego_motion(p0, quarter).yaw_deg == pytest.approx(22.5)
    assert interpolate_pose(p0, 100, p1, 300, 0) == p0  # clamped, not extrapolated
    assert interpolate_pose(p0, 100, p1, 300, 900).position == pytest.approx(p1.position)
    assert interpolate_pose(p0, 100, p1, 100, 100) == p0


def test_interpolation_takes_the_short_way_round() -> None:
    # q and -q are the same rotation: interpolating between them must not spin through 360 deg.
    q = yaw_q(170)
    negated = tuple(-v for v in yaw_q(-170))
    mid = interpolate_pose(Pose(orientation=q), 0, Pose(orientation=negated), 10, 5)
    assert abs(ego_motion(Pose(orientation=q), mid).yaw_deg) == pytest.approx(10.0)
    assert np.linalg.norm(mid.orientation) == pytest.approx(1.0)


def _multiply(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, float, float, float]:
    """Hamilton product a * b of (x, y, z, w) quaternions: rotate by a, then by b in a's frame."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )
