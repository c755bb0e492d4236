"""The place line a memory search's key frames get in the reasoner prompt
(embodied_r_ros.memory.mission_time)."""

from __future__ import annotations

import math

import numpy as np

from embodied_r_ros.frames import NS_PER_S, Frame, Pose
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.memory.mission_time import (
    PLACE_PATTERN,
    clock_seconds,
    heading_deg,
    mission_clock,
    place_in_mission,
    place_line,
    without_place,
)
from embodied_r_ros.perception import Description

T0 = 1_700_000_000 * NS_PER_S
IMAGE = np.zeros((4, 4, 3), dtype=np.uint8)


def keyframe(
    seconds: float, position: tuple[float, float, float] | None = None, yaw_deg: float = 0.0
) -> KeyFrame:
    half = math.radians(yaw_deg) / 2
    pose = Pose(position, (0.0, 0.0, math.sin(half), math.cos(half))) if position is not None else None
    return KeyFrame(Frame(IMAGE, T0 + round(seconds * NS_PER_S), pose=pose), 0, None, "first")


def test_the_clock_counts_minutes_past_the_hour_and_rounds_to_the_second() -> None:
    assert mission_clock(0.0) == "0:00"
    assert mission_clock(59.6) == "1:00"
    assert mission_clock(754.2) == "12:34"
    assert mission_clock(4503.0) == "75:03"
    for seconds in (0, 59, 60, 754, 4503):
        assert clock_seconds(mission_clock(seconds)) == seconds
    assert clock_seconds(" 12:34 ") == 754
    assert [clock_seconds(t) for t in ("12:60", "1:2", "12.34", "")] == [None] * 4
    assert mission_clock(-0.4) == "0:00"


def test_the_line_gives_the_time_since_the_origin_and_the_position_when_known() -> None:
    assert (
        place_line(keyframe(754.0, (3.14, -2.04, 0.3)), T0)
        == "At 12:34 into the mission, at (3.1, -2.0) m, facing 0 deg: "
    )
    assert (
        place_line(keyframe(5.0, (-0.02, 0.01, 0.0), yaw_deg=90.4), T0)
        == "At 0:05 into the mission, at (0.0, 0.0) m, facing 90 deg: "
    )
    assert place_line(keyframe(65.0), T0) == "At 1:05 into the mission: "


def test_the_heading_is_the_cameras_forward_axis_on_the_ground_in_minus_180_to_180() -> None:
    assert [heading_deg(keyframe(0.0, (0, 0, 0), yaw).frame.pose) for yaw in (0, 45, 179.6, -135, 270)] == [
        0, 45, 180, -135, -90,
    ]  # fmt: skip
    # A camera pitched down 30 deg still faces where its forward axis points on the ground.
    half_yaw, half_pitch = math.radians(60) / 2, math.radians(30) / 2
    qz = (0.0, 0.0, math.sin(half_yaw), math.cos(half_yaw))
    qy = (0.0, math.sin(half_pitch), 0.0, math.cos(half_pitch))
    x1, y1, z1, w1 = qz
    x2, y2, z2, w2 = qy
    pitched = (  # yaw then pitch: qz * qy
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
    )
    assert heading_deg(Pose((0.0, 0.0, 0.0), pitched)) == 60


def test_each_description_gets_the_line_of_its_own_key_frame() -> None:
    keyframes = [keyframe(10.0, (1.0, 0.0, 0.0)), keyframe(70.0, (5.0, 2.0, 0.0))]
    descriptions = [
        Description(0, keyframes[0].frame.stamp_ns, None, "I see a red chair.", "raw"),
        Description(1, keyframes[1].frame.stamp_ns, "I moved forward 4.0 m", "Nothing new.", "raw"),
        Description(2, T0 + 99 * NS_PER_S, "I stayed in place", "No key frame of mine.", "raw"),
    ]
    placed = place_in_mission(descriptions, list(reversed(keyframes)), T0)
    assert [d.observation for d in placed] == [
        "At 0:10 into the mission, at (1.0, 0.0) m, facing 0 deg: I see a red chair.",
        "At 1:10 into the mission, at (5.0, 2.0) m, facing 0 deg: Nothing new.",
        "No key frame of mine.",
    ]
    assert [(d.index, d.stamp_ns, d.action) for d in placed] == [
        (d.index, d.stamp_ns, d.action) for d in descriptions
    ]
    assert [without_place(d.observation) for d in placed] == [d.observation for d in descriptions]


def test_the_pattern_reads_the_line_back() -> None:
    match = PLACE_PATTERN.match("At 75:03 into the mission, at (-12.5, 0.3) m: I see a lamp.")
    assert match is not None
    assert (match.group("clock"), match.group("x"), match.group("y")) == ("75:03", "-12.5", "0.3")
    match = PLACE_PATTERN.match("At 75:03 into the mission, at (-12.5, 0.3) m, facing -135 deg: I see a bin.")
    assert match is not None and match.group("heading") == "-135" and match.group("y") == "0.3"
    assert without_place("I see a lamp. At 1:00 into the mission: later") == (
        "I see a lamp. At 1:00 into the mission: later"
    )
