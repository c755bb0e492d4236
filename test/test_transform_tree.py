"""The ROS-free transform tree (embodied_r_ros/poses/transform_tree.py): static and sampled edges, lookups
between
frames at a stamp, and camera stamps that wait for the transforms around them."""

from __future__ import annotations

import math

import pytest

from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.poses.transform_tree import PendingLookups, TransformTree

S = NS_PER_S
S45 = math.sqrt(0.5)
S225, C225 = math.sin(math.radians(22.5)), math.cos(math.radians(22.5))
YAW_90 = (0.0, 0.0, S45, S45)
CAMERA_ON_BASE = Pose((0.3, 0.0, 0.2))  # 30 cm ahead, 20 cm up, no rotation


def assert_pose(actual: Pose | None, position, orientation, tol: float = 1e-9) -> None:
    assert actual is not None
    assert actual.position == pytest.approx(position, abs=tol)
    assert actual.orientation == pytest.approx(orientation, abs=tol)


def robot_tree(max_gap_s: float = 0.5) -> TransformTree:
    """odom -> base_link sampled at 10 s (origin) and 11 s (1 m forward, 1 m left, turned 90 deg left);
    base_link -> camera_link static."""
    tree = TransformTree(max_gap_s)
    assert tree.add("odom", "base_link", 10 * S, Pose()) == ""
    assert tree.add("odom", "base_link", 11 * S, Pose((1.0, 1.0, 0.0), YAW_90)) == ""
    assert tree.add("base_link", "camera_link", 0, CAMERA_ON_BASE, static=True) == ""
    return tree


def test_lookup_interpolates_the_sampled_edge_and_composes_the_static_one():
    tree = robot_tree()
    assert tree.frames() == ["base_link", "camera_link", "odom"]
    # At 10.5 s the base is halfway: (0.5, 0.5, 0), turned 45 deg; the camera 0.3 m ahead of it.
    lookup = tree.lookup("odom", "camera_link", 10 * S + S // 2)
    assert lookup.problem == "" and not lookup.wait
    assert_pose(lookup.pose, (0.5 + 0.3 * S45, 0.5 + 0.3 * S45, 0.2), (0.0, 0.0, S225, C225))
    # At a sample: exactly it; frame ids as tf2 compares them (a leading slash does not count).
    assert_pose(tree.lookup("/odom", "camera_link", 11 * S).pose, (1.0, 1.3, 0.2), YAW_90)
    # The other way round: the inverse (odom's origin seen from the camera at 11 s).
    assert_pose(tree.lookup("camera_link", "odom", 11 * S).pose, (-1.3, 1.0, -0.2), (0.0, 0.0, -S45, S45))
    # Between two children of one parent: through their common ancestor.
    tree.add("base_link", "imu", 0, Pose((0.0, 0.1, 0.0)), static=True)
    assert_pose(tree.lookup("imu", "camera_link", 10 * S).pose, (0.3, -0.1, 0.2), (0.0, 0.0, 0.0, 1.0))


def test_a_stamp_past_the_newest_sample_waits_then_takes_the_nearest_within_the_gap():
    tree = robot_tree(max_gap_s=0.5)
    assert tree.lookup("odom", "camera_link", 11 * S + S // 10, final=False).wait
    # Settled: the nearest sample, 0.1 s away (no extrapolation).
    assert_pose(tree.lookup("odom", "camera_link", 11 * S + S // 10).pose, (1.0, 1.3, 0.2), YAW_90)
    far = tree.lookup("odom", "camera_link", 12 * S)
    assert far.pose is None and "odom -> base_link has no sample within 0.5 s of stamp 12.000" in far.problem
    # A static-only chain never waits.
    assert not tree.lookup("base_link", "camera_link", 99 * S, final=False).wait


def test_frames_it_cannot_connect_are_named():
    tree = robot_tree()
    assert tree.lookup("odom", "camera_optical_frame", 10 * S, final=False).wait  # may come later
    missing = tree.lookup("odom", "camera_optical_frame", 10 * S)
    assert missing.pose is None
    assert missing.problem == (
        "no transform names frame(s) camera_optical_frame (frames known: base_link, camera_link, odom)"
    )
    tree.add("map", "gps", 10 * S, Pose())
    apart = tree.lookup("odom", "gps", 10 * S).problem
    assert apart == (
        "frames odom and gps are in different trees (roots odom and map): a transform between them is missing"
    )


def test_bad_transforms_are_refused_with_a_reason():
    tree = TransformTree()
    assert tree.add("odom", "", 0, Pose()).startswith("a transform needs both frame ids")
    assert tree.add("odom", "odom", 0, Pose()) == "a transform from frame 'odom' to itself"
    zero = Pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))
    assert (
        tree.add("odom", "base_link", 0, zero)
        == "transform odom -> base_link: its orientation quaternion has zero length"
    )
    assert tree.frames() == []


def test_an_edge_starts_anew_when_its_stamps_jump_back_or_its_parent_changes():
    tree = robot_tree()
    # A bag loops: a sample 10 s back clears the edge's samples, so the new run is not ignored.
    tree.add("odom", "base_link", 1 * S, Pose((5.0, 0.0, 0.0)))
    assert_pose(tree.lookup("odom", "base_link", 1 * S).pose, (5.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
    assert tree.lookup("odom", "base_link", 11 * S).pose is None
    # A slightly older sample (two publishers, reordering) is ignored instead.
    tree.add("odom", "base_link", 1 * S - S // 10, Pose((9.0, 0.0, 0.0)))
    assert_pose(tree.lookup("odom", "base_link", 1 * S).pose, (5.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
    # A new parent replaces the edge (TF is a tree).
    tree.add("map", "base_link", 0, Pose((0.0, 7.0, 0.0)), static=True)
    assert tree.lookup("odom", "camera_link", 1 * S).pose is None
    assert_pose(tree.lookup("map", "camera_link", 1 * S).pose, (0.3, 7.0, 0.2), (0.0, 0.0, 0.0, 1.0))


def test_pending_camera_stamps_settle_in_order_once_the_transforms_cover_them():
    tree = TransformTree(max_gap_s=0.5)
    tree.add("base_link", "camera_link", 0, CAMERA_ON_BASE, static=True)
    pending = PendingLookups(tree, "odom", wait_s=0.5)
    # Camera frames arrive before their transforms: they wait.
    assert pending.add(10 * S + S // 4, "camera_link") == []
    assert pending.add(10 * S + S // 2, "camera_link") == []
    tree.add("odom", "base_link", 10 * S, Pose())
    assert pending.settle() == [] and len(pending) == 2
    tree.add("odom", "base_link", 11 * S, Pose((1.0, 1.0, 0.0), YAW_90))
    settled = pending.settle()
    assert [item.stamp_ns for item in settled] == [10 * S + S // 4, 10 * S + S // 2]
    assert_pose(settled[1].lookup.pose, (0.5 + 0.3 * S45, 0.5 + 0.3 * S45, 0.2), (0.0, 0.0, S225, C225))
    assert len(pending) == 0
    # A frame past the last transform waits until the camera is wait_s further, then takes what there is.
    assert pending.add(11 * S + S // 10, "camera_link") == []
    assert pending.add(11 * S + S // 2, "camera_link") == []
    settled = pending.add(11 * S + 7 * S // 10, "camera_link")
    assert [item.stamp_ns for item in settled] == [11 * S + S // 10]
    assert_pose(settled[0].lookup.pose, (1.0, 1.3, 0.2), YAW_90)  # the 11 s sample, 0.1 s away
    # 11.5 s settles when the camera reaches 12.1 s: the 11 s sample is just within the 0.5 s gap.
    settled = pending.add(12 * S + S // 10, "camera_link")
    assert [item.stamp_ns for item in settled] == [11 * S + S // 2]
    assert_pose(settled[0].lookup.pose, (1.0, 1.3, 0.2), YAW_90)
    # 11.7 s is 0.7 s from any sample: settled without a pose, and why.
    settled = pending.add(12 * S + 3 * S // 10, "camera_link")
    assert [item.stamp_ns for item in settled] == [11 * S + 7 * S // 10]
    assert settled[0].lookup.pose is None
    assert (
        settled[0].lookup.problem == "transform odom -> base_link has no sample within 0.5 s of stamp 11.700"
    )
    assert len(pending) == 2  # 12.1 s and 12.3 s still wait


def test_pending_stamps_that_go_back_are_skipped_or_restart_the_queue():
    tree = TransformTree()
    pending = PendingLookups(tree, "odom", wait_s=0.5)
    pending.add(20 * S, "camera_link")
    assert pending.add(20 * S, "camera_link") == [] and len(pending) == 1  # not newer: skipped
    assert pending.add(20 * S - S // 2, "camera_link") == [] and len(pending) == 1
    pending.add(5 * S, "camera_link")  # 15 s back: a bag looped
    assert len(pending) == 1
    pending.clear()
    assert len(pending) == 0
