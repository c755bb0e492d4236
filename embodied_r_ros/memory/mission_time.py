"""When and where in the mission each key frame of a memory search was taken, for the reasoner.

A memory search answers from intervals that may lie an hour apart. The paper's prompt numbers the key
frames and gives the motion between them: that says neither how far into the mission a frame was ("when
did I last see the chair?") nor, across a gap of many minutes, where the robot stood. :func:`place_in_mission`
starts each observation with both, e.g. "At 12:34 into the mission, at (3.1, -2.0) m, facing 90 deg: ...":
the time since the memory's timeline began (:meth:`MemoryReader.timeline_start_ns
<embodied_r_ros.memory.reader.MemoryReader.timeline_start_ns>`), the key frame's odometry position and the
camera's heading there (degrees counter-clockwise from the odometry frame's x axis, in (-180, 180]): with it,
"the chair ahead-left, 3 m" is a place on the odometry map ("where was the chair when I last saw it?").

Only answers from a memory search get this line; a question about one window keeps the paper's prompt.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Sequence

from ..frames import NS_PER_S, Pose
from ..keyframes import KeyFrame
from ..perception import Description
from ..poses.ego_motion import heading

# The line's form; :func:`without_place` and the mission oracle read it back.
PLACE_PATTERN = re.compile(
    r"^At (?P<clock>\d+:\d\d) into the mission"
    r"(?:, at \((?P<x>-?\d+\.\d), (?P<y>-?\d+\.\d)\) m(?:, facing (?P<heading>-?\d+) deg)?)?: "
)


def mission_clock(seconds: float) -> str:
    """Seconds into the mission as "m:ss" (minutes keep counting past the hour: "75:03")."""
    total = max(0, int(round(seconds)))
    return f"{total // 60}:{total % 60:02d}"


def clock_seconds(clock: str) -> int | None:
    """The seconds of a "m:ss" mission clock (:func:`mission_clock`'s inverse); None when not in that form."""
    match = re.fullmatch(r"(\d+):([0-5]\d)", clock.strip())
    return int(match.group(1)) * 60 + int(match.group(2)) if match else None


def heading_deg(pose: Pose) -> int:
    """The camera's heading in the odometry frame, whole degrees counter-clockwise from its x axis, in
    (-180, 180]: its forward (x) axis projected on the ground plane."""
    degrees = round(math.degrees(heading(pose)))
    return 180 if degrees == -180 else degrees


def place_line(keyframe: KeyFrame, origin_ns: int) -> str:
    """The start of ``keyframe``'s observation: its time since ``origin_ns`` and, with a pose, its position
    (metres in the odometry frame, to 0.1 m) and the camera's heading (whole degrees, :func:`heading_deg`)."""
    line = f"At {mission_clock((keyframe.frame.stamp_ns - origin_ns) / NS_PER_S)} into the mission"
    pose = keyframe.frame.pose
    if pose is not None:
        x, y = (0.0 if abs(v) < 0.05 else v for v in pose.position[:2])  # no "-0.0"
        line += f", at ({x:.1f}, {y:.1f}) m, facing {heading_deg(pose)} deg"
    return line + ": "


def place_in_mission(
    descriptions: Sequence[Description], keyframes: Sequence[KeyFrame], origin_ns: int
) -> list[Description]:
    """``descriptions`` (one per key frame, matched by stamp) with each observation started by its
    :func:`place_line`; a description without its key frame is kept as it is."""
    by_stamp = {k.frame.stamp_ns: k for k in keyframes}
    placed = []
    for description in descriptions:
        keyframe = by_stamp.get(description.stamp_ns)
        if keyframe is None:
            placed.append(description)
            continue
        observation = place_line(keyframe, origin_ns) + description.observation
        placed.append(dataclasses.replace(description, observation=observation))
    return placed


def without_place(observation: str) -> str:
    """``observation`` without the line :func:`place_line` started it with (unchanged without one)."""
    return PLACE_PATTERN.sub("", observation, count=1)
