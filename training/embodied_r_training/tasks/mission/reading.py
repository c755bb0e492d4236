"""What a long mission's reasoning prompt says, as the mission oracle reads it, and the steps its solvers
share.

The prompt is read with the scene oracle's grammar of ground-truth listings (:mod:`..reading`), plus what a
mission's prompt adds: each key frame's place line (mission time, odometry position:
:mod:`embodied_r_ros.memory.mission_time`) and each step's odometry account.

**Dead reckoning** (:func:`dead_reckon`) chains the odometry's account of each step ("After I moved forward
1.8 m, moved up 0.3 m and turned right 35 deg", :meth:`embodied_r_ros.poses.ego_motion.EgoMotion.describe`:
the displacement in the earlier frame's camera axes, the yaw and pitch of the relative rotation). Two facts of
a ground robot are assumed, as a reader of the prompt would: its camera never rolls, and it drives on a level
floor, so each step's displacement is horizontal and its vertical part in camera axes gives the camera's pitch
(``tan pitch = up / forward``, read from steps of at least :data:`PITCH_STEP_M`). The prompt rounds distances
to 0.1 m and angles to 1 deg and leaves out turns and tilts under 5 deg, so positions drift with the number
and length of the steps: a limit of what the prompt carries, not of this reader.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from embodied_r_ros.memory.mission_time import PLACE_PATTERN, clock_seconds

from ..reading import FRAME, listed_objects, read_prompt
from ..task import Unanswerable

PITCH_STEP_M = 1.0  # steps at least this long give the camera's pitch from the level floor
# The memory's tally a count question's prompt carries (embodied_r_ros.memory.sightings.tally).
MEMORY_TALLY = re.compile(r"From every sighting in my memory: [^.]*?(\d+) in all\.")
NEW_RUN = ("I see ", "No objects in view.")  # a description that starts anew (its positions from this frame)

_STEP_PART = re.compile(
    r"^(moved|turned|tilted) (forward|backward|left|right|up|down) (\d+(?:\.\d+)?) (m|deg)$"
)
_STILL = "stayed in place"


@dataclass(frozen=True)
class Step:
    """One step's motion as the prompt gives it: metres along the earlier frame's camera axes (x forward,
    y left, z up) and the relative rotation's yaw (left positive) and pitch (down positive), degrees."""

    forward_m: float = 0.0
    left_m: float = 0.0
    up_m: float = 0.0
    yaw_deg: float = 0.0
    pitch_deg: float = 0.0


@dataclass(frozen=True)
class MapPose:
    """A key frame's camera on the map of frame 0: metres ahead of and left of where frame 0 stood (along
    its heading), and the heading, degrees counter-clockwise from frame 0's."""

    x: float
    y: float
    heading_deg: float

    def place(self, ahead: float, left: float) -> tuple[float, float]:
        """A point given ``ahead`` and ``left`` of this camera (horizontally) on the map."""
        h = math.radians(self.heading_deg)
        dx = math.cos(h) * ahead - math.sin(h) * left
        dy = math.sin(h) * ahead + math.cos(h) * left
        return self.x + dx, self.y + dy


@dataclass(frozen=True)
class Listing:
    """An object as one key frame lists it, with its position when given (metres from the key frame that
    began its run: ahead, left, height)."""

    name: str
    frame: int
    run: int  # the key frame whose description began the run the position refers to
    position: tuple[float, float, float] | None


@dataclass(frozen=True)
class Place:
    """A key frame's place line: seconds into the mission, the odometry position and the camera's heading
    (degrees counter-clockwise from the odometry x axis; None: not given)."""

    seconds: int
    position: tuple[float, float] | None
    heading_deg: float | None = None


@dataclass
class MissionReading:
    """What a prompt says: the question, options, each step's motion (None: not in metres), the key frame
    that begins each frame's run, every object listing in frame order, each frame's place line (None:
    the frame has none) and observation."""

    question: str
    options: list[str]
    frames: int
    steps: list[Step | None]
    runs: list[int]
    listings: list[Listing]
    places: list[Place | None]
    memory_count: int | None = None  # the memory's tally of every sighting ("..., 21 in all."), if given
    observations: list[str] = field(default_factory=list)  # each frame's observation after its place line

    def first_frame(self, name: str) -> int | None:
        """The key frame that first lists ``name`` (None: never listed)."""
        return next((item.frame for item in self.listings if item.name == name), None)

    def last_frame(self, name: str) -> int | None:
        """The key frame that last lists ``name`` (None: never listed)."""
        return next((item.frame for item in reversed(self.listings) if item.name == name), None)


def parse_step(action: str) -> Step | None:
    """The motion of an odometry account ("I moved forward 1.8 m and turned left 35 deg"); None for an
    action not given in metres and degrees (a VLM's label such as "move forward")."""
    text = action.strip()
    if not text.startswith("I "):
        return None
    text = text[2:]
    if text == _STILL:
        return Step()
    values = {"forward": 0.0, "left": 0.0, "up": 0.0, "yaw": 0.0, "pitch": 0.0}
    for part in re.split(r", | and ", text):
        match = _STEP_PART.match(part)
        if match is None:
            return None
        verb, direction, number = match.group(1), match.group(2), float(match.group(3))
        axis, sign = {
            ("moved", "forward"): ("forward", 1), ("moved", "backward"): ("forward", -1),
            ("moved", "left"): ("left", 1), ("moved", "right"): ("left", -1),
            ("moved", "up"): ("up", 1), ("moved", "down"): ("up", -1),
            ("turned", "left"): ("yaw", 1), ("turned", "right"): ("yaw", -1),
            ("tilted", "down"): ("pitch", 1), ("tilted", "up"): ("pitch", -1),
        }.get((verb, direction), ("", 0))  # fmt: skip
        if not axis:
            return None
        values[axis] = sign * number
    return Step(values["forward"], values["left"], values["up"], values["yaw"], values["pitch"])


def dead_reckon(steps: Sequence[Step | None]) -> list[MapPose | None]:
    """Each key frame's camera on the map of frame 0 (see the module docstring); None from the first step
    that is not given in metres on (the chain is broken there)."""
    poses: list[MapPose | None] = [MapPose(0.0, 0.0, 0.0)]
    x = y = heading = pitch = 0.0  # pitch of the current frame, radians, nose down positive
    for step in steps:
        if step is None or poses[-1] is None:
            poses.append(None)
            continue
        f, u = step.forward_m, step.up_m
        if math.hypot(f, u) >= PITCH_STEP_M:  # a level floor: the step is horizontal in the world
            pitch = math.atan2(u, f) if f > 0 else math.atan2(-u, -f)
        ahead = f * math.cos(pitch) + u * math.sin(pitch)
        x += math.cos(heading) * ahead - math.sin(heading) * step.left_m
        y += math.sin(heading) * ahead + math.cos(heading) * step.left_m
        # The new forward axis in the old frame's level axes (no roll): its heading and its pitch.
        yaw, tilt = math.radians(step.yaw_deg), math.radians(step.pitch_deg)
        level = math.cos(pitch) * math.cos(yaw) * math.cos(tilt) - math.sin(pitch) * math.sin(tilt)
        heading += math.atan2(math.sin(yaw) * math.cos(tilt), level)
        drop = math.sin(pitch) * math.cos(yaw) * math.cos(tilt) + math.cos(pitch) * math.sin(tilt)
        pitch = math.asin(max(-1.0, min(1.0, drop)))
        poses.append(MapPose(x, y, math.degrees(heading)))
    return poses


def read_mission_prompt(prompt: str) -> MissionReading | None:
    """Parse a reasoning prompt's user turn; None when it is not in the form reasoning_prompt writes."""
    reading = read_prompt(prompt)
    if reading is None:
        return None
    steps: list[Step | None] = []
    runs: list[int] = []
    listings: list[Listing] = []
    places: list[Place | None] = []
    observations: list[str] = []
    for line in prompt.splitlines():
        match = FRAME.match(line)
        if match is None:
            continue
        frame, action, observation = int(match.group(1)), match.group(2), match.group(3)
        places.append(_place(observation))
        observation = PLACE_PATTERN.sub("", observation, count=1)
        observations.append(observation)
        if frame > 0:
            steps.append(parse_step(action or ""))
        runs.append(frame if frame == 0 or observation.startswith(NEW_RUN) else runs[-1])
        for name, _, position in listed_objects(observation):
            listings.append(Listing(name, frame, runs[-1], position))
    tally = MEMORY_TALLY.search(prompt)
    memory_count = int(tally.group(1)) if tally else None
    return MissionReading(
        reading.question, reading.options, reading.frames, steps, runs, listings, places, memory_count,
        observations,
    )  # fmt: skip


def _place(observation: str) -> Place | None:
    """The place line an observation starts with (None: it has none)."""
    match = PLACE_PATTERN.match(observation)
    if match is None:
        return None
    position = (float(match.group("x")), float(match.group("y"))) if match.group("x") else None
    heading = float(match.group("heading")) if match.group("heading") else None
    return Place(clock_seconds(match.group("clock")), position, heading)


# ------------------------------------------------------------------------------------- solvers' steps


def first_frames(reading: MissionReading, names: Sequence[str]) -> list[int]:
    """The key frame that first lists each of ``names``; raises when one is never listed."""
    frames = []
    for name in names:
        frame = reading.first_frame(name)
        if frame is None:
            raise Unanswerable(f"the {name} is never described")
        frames.append(frame)
    return frames


def last_listed(reading: MissionReading, name: str) -> tuple[int, Place | None]:
    """The key frame that last lists ``name`` and its place line (None: it has none); raises when the name
    is never listed."""
    frame = reading.last_frame(name)
    if frame is None:
        raise Unanswerable(f"the {name} is never described")
    return frame, reading.places[frame]


def poses(reading: MissionReading, frames: Sequence[int]) -> list[MapPose]:
    """The dead-reckoned poses of ``frames``; raises when the chain to one of them is broken."""
    chained = dead_reckon(reading.steps)
    found = []
    for frame in frames:
        pose = chained[frame]
        if pose is None:
            broken = next(j + 1 for j, step in enumerate(reading.steps) if step is None)
            raise Unanswerable(f"the motion into frame {broken} is not given in metres")
        found.append(pose)
    return found
