"""The place line a memory search's key frames get in the reasoner prompt
(embodied_r_ros.memory.mission_time)."""

from __future__ import annotations

import numpy as np

from embodied_r_ros.frames import NS_PER_S, Frame, Pose
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.memory.mission_time import (
    PLACE_PATTERN,
    clock_seconds,
    mission_clock,
    place_in_mission,
    place_line,
    without_place,
)
from embodied_r_ros.perception import Description

T0 = 1_700_000_000 * NS_PER_S
IMAGE = np.zeros((4, 4, 3), dtype=np.uint8)


def keyframe(seconds: float, position: tuple[float, float, float] | None = None) -> KeyFrame:
    pose = Pose(position=position) if position is not None else None
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
        place_line(keyframe(754.0, (3.14, -2.04, 0.3)), T0) == "At 12:34 into the mission, at (3.1, -2.0) m: "
    )
    assert place_line(keyframe(5.0, (-0.02, 0.01, 0.0)), T0) == "At 0:05 into the mission, at (0.0, 0.0) m: "
    assert place_line(keyframe(65.0), T0) == "At 1:05 into the mission: "


def test_each_description_gets_the_line_of_its_own_key_frame() -> None:
    keyframes = [keyframe(10.0, (1.0, 0.0, 0.0)), keyframe(70.0, (5.0, 2.0, 0.0))]
    descriptions = [
        Description(0, keyframes[0].frame.stamp_ns, None, "I see a red chair.", "raw"),
        Description(1, keyframes[1].frame.stamp_ns, "I moved forward 4.0 m", "Nothing new.", "raw"),
        Description(2, T0 + 99 * NS_PER_S, "I stayed in place", "No key frame of mine.", "raw"),
    ]
    placed = place_in_mission(descriptions, list(reversed(keyframes)), T0)
    assert [d.observation for d in placed] == [
        "At 0:10 into the mission, at (1.0, 0.0) m: I see a red chair.",
        "At 1:10 into the mission, at (5.0, 2.0) m: Nothing new.",
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
    assert without_place("I see a lamp. At 1:00 into the mission: later") == (
        "I see a lamp. At 1:00 into the mission: later"
    )
