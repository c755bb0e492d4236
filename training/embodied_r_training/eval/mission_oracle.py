"""The mission oracle: answers a long mission's memory questions from the reasoning prompt's text alone, or
says that the text does not determine the answer.

Like the yardstick's oracle (:mod:`.oracle`, whose grammar of ground-truth descriptions it reads), it is a
pure function of the LM's user turn (:func:`embodied_r_ros.reasoning.prompts.reasoning_prompt`): key-frame
descriptions, question, lettered options. It never reads mission.json. It answers the four kinds of
:mod:`embodied_r_training.synth.mission_questions` as far as a prompt of ground-truth descriptions
(:mod:`embodied_r_training.synth.mission_ground_truth`, a measuring instrument) allows:

================== ===========================================================================================
kind               what it reads
================== ===========================================================================================
mission_first_seen the key frame that first lists each of the two names ("I see" / "First seen:"); the
                   frames are in time order. None when one is never listed or both first show at one frame.
mission_count      every listing of the category's names with its position ("at (x, y, z)", metres from the
                   frame where the position sentence's run began: ``Positions are metres from where I
                   stand``), put on one map by dead reckoning (below); listings of one name less than
                   :data:`SAME_OBJECT_M` apart are one object. None when a listing has no position, or
                   listings of several runs need a motion the prompt does not give in metres.
mission_last_seen  the mission time of the last key frame listing the name (the place line a memory
                   search's answer starts each observation with, :mod:`embodied_r_ros.memory.mission_time`);
                   the
                   option nearest to it. None when the name is never listed or that frame has no time.
mission_route      the robot's positions at the frames that first list the two names: their place lines'
                   odometry positions when both have one, else by dead reckoning; their horizontal distance.
                   None when a name is never listed or (without positions) a motion between the two frames
                   is not given in metres.
================== ===========================================================================================

**Dead reckoning** (:func:`dead_reckon`) chains the odometry's account of each step ("After I moved forward
1.8 m, moved up 0.3 m and turned right 35 deg", :meth:`embodied_r_ros.poses.ego_motion.EgoMotion.describe`:
the displacement in the earlier frame's camera axes, the yaw and pitch of the relative rotation). Two facts of
a ground robot are assumed, as a reader of the prompt would: its camera never rolls, and it drives on a level
floor, so each step's displacement is horizontal and its vertical part in camera axes gives the camera's pitch
(``tan pitch = up / forward``, read from steps of at least :data:`PITCH_STEP_M`). The prompt rounds distances
to 0.1 m and angles to 1 deg and leaves out turns and tilts under 5 deg, so positions drift with the number
and length of the steps: a limit of what the prompt carries, not of this reader.

:func:`mission_oracle` gives the answer with a short reasoning that cites the frames, or the reason it
abstains; :func:`mission_oracle_trace` the pair (reasoning, answer) like :func:`.oracle.oracle_trace`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from embodied_r_ros.memory.mission_time import PLACE_PATTERN, clock_seconds, mission_clock
from embodied_r_ros.reasoning.options import OPTION_LETTERS

from ..synth.questions import plural

# The yardstick oracle's grammar of prompt lines and ground-truth listings, read the same way here.
from .oracle import _FRAME, _LIST, _OBJECT, read_prompt

Answer = str | float | int

SAME_OBJECT_M = 4.0  # listings of one name closer than this on the dead-reckoned map are one object
PITCH_STEP_M = 1.0  # steps at least this long give the camera's pitch from the level floor
NEW_RUN = ("I see ", "No objects in view.")  # a description that starts anew (its positions from this frame)

_STEP_PART = re.compile(
    r"^(moved|turned|tilted) (forward|backward|left|right|up|down) (\d+(?:\.\d+)?) (m|deg)$"
)
_STILL = "stayed in place"

# The question templates of synth/mission_questions.py, one per kind.
TEMPLATES: dict[str, re.Pattern[str]] = {
    "mission_first_seen": re.compile(r"^Which did I see first: the (.+?) or the (.+?)\?$"),
    "mission_count": re.compile(r"^How many different (.+?) did I see over the whole mission\?$"),
    "mission_last_seen": re.compile(
        r"^How far into the mission \(minutes:seconds\) did I last see the (.+?)\?$"
    ),
    "mission_route": re.compile(
        r"^How far apart in a straight line were the place where I first saw the (.+?) and the place where "
        r"I first saw the (.+?)\?$"
    ),
}


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
    """A key frame's place line: seconds into the mission and the odometry position (None: not given)."""

    seconds: int
    position: tuple[float, float] | None


@dataclass
class MissionReading:
    """What a prompt says: the question, options, each step's motion (None: not in metres), the key frame
    that begins each frame's run, every object listing in frame order, and each frame's place line (None:
    the frame has none)."""

    question: str
    options: list[str]
    frames: int
    steps: list[Step | None]
    runs: list[int]
    listings: list[Listing]
    places: list[Place | None]

    def first_frame(self, name: str) -> int | None:
        """The key frame that first lists ``name`` (None: never listed)."""
        return next((item.frame for item in self.listings if item.name == name), None)

    def last_frame(self, name: str) -> int | None:
        """The key frame that last lists ``name`` (None: never listed)."""
        return next((item.frame for item in reversed(self.listings) if item.name == name), None)


@dataclass(frozen=True)
class OracleResult:
    """The oracle's answer with its reasoning, or None and why it abstains."""

    answer: Answer | None
    reasoning: str = ""
    abstained: str = ""  # why the prompt does not determine the answer ("" when answered)


class _Unanswerable(Exception):
    """The prompt does not determine the answer (the message says why)."""


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
    for line in prompt.splitlines():
        match = _FRAME.match(line)
        if match is None:
            continue
        frame, action, observation = int(match.group(1)), match.group(2), match.group(3)
        places.append(_place(observation))
        observation = PLACE_PATTERN.sub("", observation, count=1)
        if frame > 0:
            steps.append(parse_step(action or ""))
        runs.append(frame if frame == 0 or observation.startswith(NEW_RUN) else runs[-1])
        for listed in _LIST.finditer(observation):
            for item in listed.group(1).split("; "):
                found = _OBJECT.match(item.strip())
                if found is None:
                    continue
                position = (
                    (float(found.group("x")), float(found.group("y")), float(found.group("z")))
                    if found.group("x")
                    else None
                )
                listings.append(Listing(found.group("name"), frame, runs[-1], position))
    return MissionReading(reading.question, reading.options, reading.frames, steps, runs, listings, places)


def _place(observation: str) -> Place | None:
    """The place line an observation starts with (None: it has none)."""
    match = PLACE_PATTERN.match(observation)
    if match is None:
        return None
    position = (float(match.group("x")), float(match.group("y"))) if match.group("x") else None
    return Place(clock_seconds(match.group("clock")), position)


# ------------------------------------------------------------------------------------------------ kinds


def _letter(reading: MissionReading, text: str) -> str:
    for i, option in enumerate(reading.options):
        if option == text:
            return OPTION_LETTERS[i]
    raise _Unanswerable(f"no option reads {text!r}")


def _first_frames(reading: MissionReading, names: Sequence[str]) -> list[int]:
    frames = []
    for name in names:
        frame = reading.first_frame(name)
        if frame is None:
            raise _Unanswerable(f"the {name} is never described")
        frames.append(frame)
    return frames


def _poses(reading: MissionReading, frames: Sequence[int]) -> list[MapPose]:
    """The dead-reckoned poses of ``frames``; raises when the chain to one of them is broken."""
    poses = dead_reckon(reading.steps)
    found = []
    for frame in frames:
        pose = poses[frame]
        if pose is None:
            broken = next(j + 1 for j, step in enumerate(reading.steps) if step is None)
            raise _Unanswerable(f"the motion into frame {broken} is not given in metres")
        found.append(pose)
    return found


def _first_seen(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    names = [match.group(1), match.group(2)]
    frames = _first_frames(reading, names)
    if frames[0] == frames[1]:
        raise _Unanswerable("both are first described in one key frame")
    first = names[frames.index(min(frames))]
    letter = _letter(reading, first)
    text = (
        f"The {names[0]} is first described in frame {frames[0]}, the {names[1]} in frame {frames[1]}; the "
        f"frames run from the past to the present, so I saw the {first} first. That is option {letter}."
    )
    return text, letter


def _named(category_plural: str, name: str) -> bool:
    """Whether ``name`` ("grey trash can") is of the category whose plural is ``category_plural``."""
    words = name.split(" ")
    return any(plural(" ".join(words[i:])) == category_plural for i in range(len(words)))


@dataclass
class _Object:
    """One object of a count: its name, where its first listing puts it on the map, the frames listing it."""

    name: str
    x: float
    y: float
    frames: list[int]

    def near(self, x: float, y: float) -> bool:
        return math.dist((self.x, self.y), (x, y)) < SAME_OBJECT_M


def _count(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    category = match.group(1)
    listed = [item for item in reading.listings if _named(category, item.name)]
    if not listed:
        return f"No {category} are described. The answer is 0.", 0
    if any(item.position is None for item in listed):
        missing = next(item for item in listed if item.position is None)
        raise _Unanswerable(f"the {missing.name} of frame {missing.frame} has no position")
    runs = sorted({item.run for item in listed})
    origins = dict(zip(runs, _poses(reading, runs), strict=True)) if len(runs) > 1 else {}
    objects: list[_Object] = []
    for item in listed:
        ahead, left = item.position[:2] if item.position else (0.0, 0.0)
        origin = origins.get(item.run)
        x, y = origin.place(ahead, left) if origin is not None else (ahead, left)
        same = next((o for o in objects if o.name == item.name and o.near(x, y)), None)
        if same is None:
            objects.append(_Object(item.name, x, y, [item.frame]))
        else:
            same.frames.append(item.frame)
    cited = "; ".join(
        f"the {o.name} at ({o.x:.1f}, {o.y:.1f}) in frame{'s' * (len(o.frames) > 1)} "
        f"{', '.join(map(str, o.frames))}"
        for o in objects
    )
    text = (
        f"On the map of frame 0 (positions carried by my motions), the {category} described are: {cited}. "
        f"Listings of one name less than {SAME_OBJECT_M:g} m apart are one object, so I saw {len(objects)}. "
        f"The answer is {len(objects)}."
    )
    return text, len(objects)


def _last_seen(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    name = match.group(1)
    frame = reading.last_frame(name)
    if frame is None:
        raise _Unanswerable(f"the {name} is never described")
    place = reading.places[frame]
    if place is None:
        raise _Unanswerable(f"frame {frame}, the last to describe the {name}, has no mission time")
    times = [clock_seconds(option) for option in reading.options]
    if not reading.options or None in times:
        raise _Unanswerable("the options are not mission times (m:ss)")
    nearest = min(range(len(times)), key=lambda i: abs((times[i] or 0) - place.seconds))
    clock = mission_clock(place.seconds)
    letter = OPTION_LETTERS[nearest]
    text = (
        f"The {name} is last described in frame {frame}, {clock} into the mission; the nearest option is "
        f"{reading.options[nearest]}, option {letter}."
    )
    return text, letter


def _route(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    names = [match.group(1), match.group(2)]
    frames = _first_frames(reading, names)
    positions = [reading.places[f].position if reading.places[f] else None for f in frames]
    if positions[0] is not None and positions[1] is not None:
        a, b = positions
        where = "by my odometry"
    else:
        poses = _poses(reading, frames)
        a, b = (poses[0].x, poses[0].y), (poses[1].x, poses[1].y)
        where = "on the map of frame 0 (chaining my motions)"
    metres = math.dist(a, b)
    text = (
        f"I first saw the {names[0]} at frame {frames[0]}, where I stood at ({a[0]:.1f}, {a[1]:.1f}) "
        f"{where}, and the {names[1]} at frame {frames[1]}, at ({b[0]:.1f}, {b[1]:.1f}). The straight line "
        f"between them is {metres:.2f} m."
    )
    return text, round(metres, 2)


_SOLVERS: dict[str, Callable[[MissionReading, re.Match[str]], tuple[str, Answer]]] = {
    "mission_first_seen": _first_seen,
    "mission_count": _count,
    "mission_last_seen": _last_seen,
    "mission_route": _route,
}


def mission_question_kind(question: str) -> str | None:
    """The mission kind whose template ``question`` follows, or None."""
    return next((kind for kind, pattern in TEMPLATES.items() if pattern.match(question.strip())), None)


def mission_oracle(prompt: str) -> OracleResult:
    """The oracle's answer to the user turn ``prompt`` with its reasoning, or why it abstains."""
    reading = read_mission_prompt(prompt)
    if reading is None:
        return OracleResult(None, abstained="not a reasoning prompt")
    kind = mission_question_kind(reading.question)
    if kind is None:
        return OracleResult(None, abstained="not a mission question")
    try:
        text, answer = _SOLVERS[kind](reading, TEMPLATES[kind].match(reading.question.strip()))
    except _Unanswerable as exc:
        return OracleResult(None, abstained=str(exc))
    return OracleResult(answer, text)


def mission_oracle_trace(prompt: str) -> tuple[str, Answer] | None:
    """(reasoning, answer) for the user turn ``prompt``, or None when the prompt does not determine it."""
    result = mission_oracle(prompt)
    return None if result.answer is None else (result.reasoning, result.answer)
