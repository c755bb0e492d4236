"""Composing and inverting rigid transforms (embodied_r_ros/poses/transforms.py), checked against numbers
worked out
by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_r_ros.frames import Pose
from embodied_r_ros.poses.ego_motion import ego_motion, quaternion_to_matrix
from embodied_r_ros.poses.transforms import IDENTITY, compose, invert, pose_problem, quaternion_multiply

S45 = math.sqrt(0.5)  # sin 45 deg = cos 45 deg
S15, C15 = math.sin(math.radians(15)), math.cos(math.radians(15))
YAW_90 = (0.0, 0.0, S45, S45)  # turned left 90 deg about z
PITCH_DOWN_30 = (0.0, S15, 0.0, C15)  # +30 deg about y (left): the nose tilts down (REP-103)


def assert_pose(actual: Pose, position, orientation, tol: float = 1e-9) -> None:
    assert actual.position == pytest.approx(position, abs=tol)
    assert actual.orientation == pytest.approx(orientation, abs=tol)


def test_quaternion_product_applies_the_right_rotation_first():
    # yaw 90 * pitch 30, expanded by hand: (-s45 s15, c45 s15, s45 c15, c45 c15).
    q = quaternion_multiply(YAW_90, PITCH_DOWN_30)
    assert q == pytest.approx([-S45 * S15, S45 * S15, S45 * C15, S45 * C15])
    assert q == pytest.approx([-0.1830127, 0.1830127, 0.6830127, 0.6830127], abs=1e-7)
    # The camera's forward axis: yawed to +y, then tilted 30 deg down: (0, cos 30, -sin 30).
    assert quaternion_to_matrix(q)[:, 0] == pytest.approx([0.0, math.sqrt(3) / 2, -0.5])


def test_compose_puts_the_child_in_the_parents_frame():
    body = Pose((1.0, 2.0, 0.0), YAW_90)  # facing +y
    camera_on_body = Pose((0.2, 0.0, 0.1), PITCH_DOWN_30)  # 20 cm ahead, 10 cm up, tilted down
    camera = compose(body, camera_on_body)
    # 0.2 m ahead of a body facing +y is +0.2 in y; the heights add.
    assert_pose(camera, (1.0, 2.2, 0.1), (-0.1830127, 0.1830127, 0.6830127, 0.6830127), tol=1e-7)
    # Two quarter turns make a half turn, (0, 0, 1, 0); positions rotate with the first.
    assert_pose(compose(body, Pose((1.0, 0.0, 0.0), YAW_90)), (1.0, 3.0, 0.0), (0.0, 0.0, 1.0, 0.0))
    assert_pose(compose(IDENTITY, camera_on_body), camera_on_body.position, camera_on_body.orientation)
    assert_pose(compose(camera_on_body, IDENTITY), camera_on_body.position, camera_on_body.orientation)


def test_invert_undoes_a_transform():
    body = Pose((1.0, 2.0, 0.0), YAW_90)
    # R^T p = (2, -1, 0), negated; the rotation turns back.
    assert_pose(invert(body), (-2.0, 1.0, 0.0), (0.0, 0.0, -S45, S45))
    for pose in (body, Pose((0.3, -0.2, 1.5), quaternion_multiply(YAW_90, PITCH_DOWN_30))):
        assert_pose(compose(pose, invert(pose)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
        assert_pose(compose(invert(pose), pose), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))


def test_results_are_unit_quaternions_with_w_not_negative():
    # Unnormalised inputs (hand-typed numbers) are normalised; -q is returned as q.
    pose = compose(Pose((0.0, 0.0, 0.0), (0.0, 0.0, 2.0, 2.0)), Pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, -1.0)))
    assert_pose(pose, (0.0, 0.0, 0.0), (0.0, 0.0, S45, S45))
    assert np.linalg.norm(pose.orientation) == pytest.approx(1.0)


def test_the_camera_offset_turns_body_motion_into_camera_motion():
    # A body driving 1 m forward while its camera looks left (yaw 90 on the body): the camera moves to its
    # right. The core's ego motion works on whatever poses it is given, so the offset must be applied.
    look_left = Pose((0.0, 0.0, 0.0), YAW_90)
    start = compose(Pose((0.0, 0.0, 0.0)), look_left)
    end = compose(Pose((1.0, 0.0, 0.0)), look_left)
    motion = ego_motion(start, end)
    assert (motion.forward_m, motion.left_m) == pytest.approx((0.0, -1.0))


def test_bad_quaternions_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="zero length; use \\(0, 0, 0, 1\\)"):
        compose(IDENTITY, Pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)))
    with pytest.raises(ValueError, match="4 finite numbers"):
        invert(Pose((0.0, 0.0, 0.0), (math.nan, 0.0, 0.0, 1.0)))
    assert pose_problem(Pose((math.inf, 0.0, 0.0))).startswith("non-finite pose")
    zero = Pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))
    assert pose_problem(zero) == "its orientation quaternion has zero length"
    assert pose_problem(IDENTITY) == ""
