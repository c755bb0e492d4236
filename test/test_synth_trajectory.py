"""Camera trajectories: segment arithmetic, smoothness, twist, REP-103 orientation, planners' safety."""

from __future__ import annotations

import math

import numpy as np
import pytest
from embodied_r_training.synth.trajectory import (
    CLIMB,
    PAUSE,
    TILT,
    TURN,
    WALK,
    Segment,
    StartState,
    Trajectory,
    plan_flight,
    plan_walk,
)
from embodied_r_training.synth.world import OBJECT_CLEARANCE_M, generate_world

from embodied_r_ros.poses.ego_motion import ego_motion, quaternion_to_matrix


def square_walk() -> Trajectory:
    """Walk 2 m east, turn left 90, walk 1 m north, pause, turn right 90, walk 1 m east."""
    return Trajectory(
        StartState(0.0, 0.0, 1.2, 0.0, 0.0),
        [
            Segment(WALK, 4.0, forward_m=2.0),
            Segment(TURN, 2.0, yaw_deg=90.0),
            Segment(WALK, 2.0, forward_m=1.0),
            Segment(PAUSE, 1.0),
            Segment(TURN, 1.0, yaw_deg=-90.0),
            Segment(WALK, 2.0, forward_m=1.0),
        ],
    )


def test_segments_add_up() -> None:
    traj = square_walk()
    assert traj.duration_s == pytest.approx(12.0)
    assert traj.position(4.0) == pytest.approx([2.0, 0.0, 1.2], abs=1e-9)
    assert traj.yaw_deg(6.0) == pytest.approx(90.0)
    assert traj.position(8.0) == pytest.approx([2.0, 1.0, 1.2], abs=1e-6)
    assert traj.position(12.0) == pytest.approx([3.0, 1.0, 1.2], abs=1e-6)
    assert traj.path_length(0.0, 12.0) == pytest.approx(4.0, abs=1e-3)
    assert traj.path_length(4.0, 6.0) == pytest.approx(0.0, abs=1e-9)  # turning in place
    assert [b - a for a, b in traj.segment_bounds] == pytest.approx([4, 2, 2, 1, 1, 2])
    # Clamped outside the trajectory.
    assert traj.position(-1.0) == pytest.approx(traj.position(0.0))
    assert traj.position(99.0) == pytest.approx(traj.position(12.0))
    assert Trajectory.from_dict(traj.to_dict()).to_dict() == traj.to_dict()


def test_motion_is_smooth_and_twist_matches_the_poses() -> None:
    traj = Trajectory(
        StartState(1.0, 2.0, 10.0, 30.0, 10.0),
        [Segment("fly", 5.0, forward_m=10.0, yaw_deg=45.0, up_m=3.0), Segment(TILT, 2.0, pitch_deg=20.0)],
    )
    # Speed is zero where segments meet (no jumps in velocity).
    for t in (0.0, 5.0, 7.0):
        linear, angular = traj.twist(t)
        assert np.linalg.norm(linear) == pytest.approx(0.0, abs=1e-9)
        assert np.linalg.norm(angular) == pytest.approx(0.0, abs=1e-9)
    # The body-frame twist agrees with finite differences of the poses.
    for t in (1.3, 2.5, 4.1, 6.0):
        dt = 1e-3
        a, b = traj.pose(t - dt), traj.pose(t + dt)
        rot = quaternion_to_matrix(traj.pose(t).orientation)
        velocity = rot.T @ (np.subtract(b.position, a.position) / (2 * dt))
        linear, angular = traj.twist(t)
        assert linear == pytest.approx(velocity, abs=2e-3)
        # Angular velocity: from the relative rotation over 2 dt (small-angle axis-angle).
        relative = quaternion_to_matrix(a.orientation).T @ quaternion_to_matrix(b.orientation)
        omega = (
            np.array(
                [
                    relative[2, 1] - relative[1, 2],
                    relative[0, 2] - relative[2, 0],
                    relative[1, 0] - relative[0, 1],
                ]
            )
            / 2
            / (2 * dt)
        )
        assert angular == pytest.approx(omega, abs=2e-3)


def test_orientation_follows_rep103() -> None:
    traj = Trajectory(StartState(0, 0, 1, 90.0, 20.0), [Segment(PAUSE, 1.0)])
    rot = quaternion_to_matrix(traj.pose(0.5).orientation)
    forward = rot @ np.array([1.0, 0.0, 0.0])
    # Heading 90 deg: forward points to +y (left of the world x axis); positive pitch looks down.
    assert forward == pytest.approx([0.0, math.cos(math.radians(20)), -math.sin(math.radians(20))], abs=1e-9)
    assert np.linalg.norm(traj.pose(0.5).orientation) == pytest.approx(1.0)
    # The core's ego-motion reads a left turn and a forward walk from these poses.
    walk = square_walk()
    motion = ego_motion(walk.pose(3.9), walk.pose(8.0))
    assert motion.yaw_deg > 80 and motion.left_m > 0.9


def test_bad_segments_are_refused() -> None:
    with pytest.raises(ValueError, match="duration"):
        Segment(WALK, 0.0, forward_m=1.0)
    with pytest.raises(ValueError, match="segment"):
        Trajectory(StartState(), [])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_walks_stay_in_the_room_and_clear_of_objects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    world = generate_world(rng)
    traj = plan_walk(world, 40.0, rng)
    assert traj.duration_s >= 40.0
    x0, x1, y0, y1 = world.bounds
    kinds = {s.kind for s in traj.segments}
    assert {WALK, TURN} <= kinds
    for t in np.arange(0.0, traj.duration_s, 0.1):
        x, y, z = traj.position(float(t))
        assert x0 - 1e-6 <= x <= x1 + 1e-6 and y0 - 1e-6 <= y <= y1 + 1e-6
        assert z == pytest.approx(1.25)
        for obj in world.objects:
            assert obj.footprint_distance(x, y) >= OBJECT_CLEARANCE_M - 0.1 - 1e-6, (obj.name, t)
    # Same seed, same walk.
    again = np.random.default_rng(seed)
    assert plan_walk(generate_world(again), 40.0, again).to_dict() == traj.to_dict()


def test_flights_climb_descend_and_tilt_within_limits() -> None:
    kinds: set[str] = set()
    for seed in range(4):
        rng = np.random.default_rng(seed)
        world = generate_world(rng, outdoor=True)
        traj = plan_flight(world, 90.0, rng)
        kinds |= {s.kind for s in traj.segments}
        x0, x1, y0, y1 = world.bounds
        for t in np.arange(0.0, traj.duration_s, 0.5):
            x, y, z = traj.position(float(t))
            assert x0 - 1e-6 <= x <= x1 + 1e-6 and y0 - 1e-6 <= y <= y1 + 1e-6
            assert 10.0 - 1e-6 <= z <= 35.0 + 1e-6
            assert 0.0 <= traj.pitch_deg(float(t)) <= 50.0 + 1e-6
    assert {CLIMB, TILT, TURN, "fly"} <= kinds
