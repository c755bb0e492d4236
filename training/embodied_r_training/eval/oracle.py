"""The oracle reasoner: answers a reasoning prompt from its text alone, or says that the text does not
determine the answer.

A pure function of the LM's user turn (:func:`embodied_r_ros.reasoning.prompts.reasoning_prompt`: the key
frames'
descriptions, the question, the lettered options): it never reads a scene, a questions file or anything
else. On prompts whose descriptions come from ground-truth perception
(:mod:`embodied_r_training.synth.ground_truth`) it answers every task of ``embodied-r synth``
(:mod:`embodied_r_training.synth.questions`) by reading the evidence the descriptions give:

================== ===========================================================================
task               what it reads
================== ===========================================================================
appearance_order   the key frame that first shows each object (frame 0 or "First seen:")
relative_direction the objects' map positions: the target's angle seen from A looking at B
relative_distance  the map positions: the candidate whose centre is nearest to the target's
object_count       the distinct objects of the category listed as seen
abs_distance       the distance between the two map positions (3D, between centres)
object_size        the object's "longest side"
room_size          "The room is X m by Y m": X * Y
route              the "Path:" accounts: the net turn between consecutive legs (walks, flights)
ego_distance       the "Path:" accounts: the distances walked, flown, climbed and descended
ego_turn           the "Path:" accounts: the sum of the turns
ego_altitude       the "Path:" accounts: the sum of the ups and downs
================== ===========================================================================

:func:`oracle_trace` also writes the reasoning as a short text that cites the frames, objects, sizes and
motions step by step (for supervised traces); :func:`oracle_answer` gives the answer alone. Both give None
when the prompt lacks the evidence (an object never described, two objects first seen at the same key
frame, a turn too near a label's limit, no option that fits), so the synthetic generator can drop the
questions that no reader of their prompt could answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from embodied_r_ros.reasoning.options import OPTION_LETTERS

from ..synth.ground_truth import PathPiece
from ..synth.questions import plural, quadrant, turn_label
from ..synth.trajectory import CLIMB, FLY, TURN, WALK

Answer = str | float | int
Position = tuple[float, float, float]

_NUMBER = r"-?\d+(?:\.\d+)?"
_FRAME = re.compile(r"^Frame (\d+): (?:After (.*?), Observe: |Observe: )(.*)$")
_OPTION = re.compile(r"^([A-Z])\. (.*)$")
_LIST = re.compile(r"(?:I see|First seen:) (.*?)\.(?= [A-Z]|$)")  # up to the next sentence
_OBJECT = re.compile(
    rf"^(?P<name>[a-z][a-z ]*?) (?:ahead-left|ahead-right|ahead|left|right)(?: below| above)?, (?:near|far), "
    rf"{_NUMBER} m(?:, longest side (?P<size>{_NUMBER}) m, at \((?P<x>{_NUMBER}), (?P<y>{_NUMBER}), "
    rf"(?P<z>{_NUMBER})\))?$"
)
_ROOM = re.compile(rf"The room is ({_NUMBER}) m by ({_NUMBER}) m\.")
_PATH = re.compile(r"^Path: (.*?)\. (?:First seen:|Nothing new\.)")
_PIECE = re.compile(
    rf"^(?:(?P<verb>walked|flew) (?P<metres>{_NUMBER}) m(?: \((?P<updown>up|down) (?P<up>{_NUMBER}) m\))?"
    rf"|(?P<climb>climbed|descended) (?P<climbed>{_NUMBER}) m"
    rf"|turned (?P<side>left|right) (?P<deg>{_NUMBER}) deg|stood still)$"
)

# The question templates of embodied-r synth (synth/questions.py), one per task.
_TEMPLATES: dict[str, re.Pattern[str]] = {
    "appearance_order": re.compile(r"^In what order do these objects first appear in the video: (.+)\?$"),
    "relative_direction": re.compile(
        r"^If I am standing by the (.+?) and facing the (.+?), is the (.+?) to my front-left, front-right, "
        r"back-left, or back-right\?$"
    ),
    "relative_distance": re.compile(
        r"^Which of these objects is closest to the (.+?) \(measured between their centres\): (.+)\?$"
    ),
    "object_count": re.compile(r"^How many (.+?) appear in this video\?$"),
    "abs_distance": re.compile(
        r"^What is the distance between the centres of the (.+?) and the (.+?), in metres\?$"
    ),
    "object_size": re.compile(
        r"^What is the longest dimension \(length, width or height\) of the (.+?), in metres\?$"
    ),
    "room_size": re.compile(r"^What is the floor area of this room, in square metres\?$"),
    "route": re.compile(
        r"^In this clip I (?:walked|flew) from near the (.+?) to near the (.+?)\. "
        r"Which turns did I make on the way, in order\?$"
    ),
    "ego_distance": re.compile(
        r"^How far did I travel during this clip, measured along my path, in metres\?$"
    ),
    "ego_turn": re.compile(r"^Which way did I turn in total during this clip, and by about how much\?$"),
    "ego_altitude": re.compile(
        r"^(?:Did I fly up or down during this clip, and by about how much"
        r"|By how many metres did my altitude change during this clip \(up or down\))\?$"
    ),
}


@dataclass(frozen=True)
class Sighting:
    """An object as first described: the key frame, and its measurements when the text gives them."""

    name: str
    frame: int
    size: float | None = None
    position: Position | None = None


@dataclass
class Reading:
    """What a prompt says: per object its first sighting, per step its path pieces (None: no account),
    the room's sides, the question and its options."""

    question: str
    options: list[str]
    frames: int = 0
    sightings: dict[str, Sighting] = field(default_factory=dict)
    paths: list[list[PathPiece] | None] = field(default_factory=list)
    room: tuple[float, float] | None = None


class _Unanswerable(Exception):
    """The prompt does not determine the answer (the message says why, for debugging)."""


def read_prompt(prompt: str) -> Reading | None:
    """Parse a reasoning prompt's user turn; None when it is not in the form reasoning_prompt writes."""
    lines = prompt.splitlines()
    question_at = next((i for i, line in enumerate(lines) if line.startswith("Question: ")), None)
    if question_at is None:
        return None
    options = [m.group(2) for line in lines[question_at + 1 :] if (m := _OPTION.match(line))]
    reading = Reading(question=lines[question_at].removeprefix("Question: ").strip(), options=options)
    for line in lines[:question_at]:
        match = _FRAME.match(line)
        if match is None:
            continue
        frame, observation = int(match.group(1)), match.group(3)
        if frame != reading.frames:
            return None  # frames out of order: not a prompt of reasoning_prompt
        reading.frames += 1
        _read_observation(reading, frame, observation)
    return reading


def _read_observation(reading: Reading, frame: int, observation: str) -> None:
    if frame > 0:
        path = _PATH.match(observation)
        reading.paths.append(_pieces(path.group(1)) if path else None)
    for listed in _LIST.finditer(observation):
        for item in listed.group(1).split("; "):
            match = _OBJECT.match(item.strip())
            if match is None or match.group("name") in reading.sightings:
                continue
            size = float(match.group("size")) if match.group("size") else None
            position = (
                (float(match.group("x")), float(match.group("y")), float(match.group("z")))
                if match.group("x")
                else None
            )
            reading.sightings[match.group("name")] = Sighting(match.group("name"), frame, size, position)
    room = _ROOM.search(observation)
    if room:
        reading.room = (float(room.group(1)), float(room.group(2)))


def _pieces(text: str) -> list[PathPiece] | None:
    pieces = []
    for part in text.split(", "):
        match = _PIECE.match(part)
        if match is None:
            return None
        if match.group("verb"):
            up = float(match.group("up") or 0.0) * (-1 if match.group("updown") == "down" else 1)
            kind = WALK if match.group("verb") == "walked" else FLY
            pieces.append(PathPiece(kind, float(match.group("metres")), up))
        elif match.group("climb"):
            up = float(match.group("climbed")) * (1 if match.group("climb") == "climbed" else -1)
            pieces.append(PathPiece(CLIMB, up_m=up))
        elif match.group("side"):
            sign = 1 if match.group("side") == "left" else -1
            pieces.append(PathPiece(TURN, turn_deg=sign * float(match.group("deg"))))
    return pieces


# ---------------------------------------------------------------------------------------------- helpers


def _metres(value: float) -> str:
    return f"{value:.2f}"


def _names(listing: str) -> list[str]:
    """ "the red chair, the blue box and the lamp" -> ["red chair", "blue box", "lamp"]."""
    return [part.strip().removeprefix("the ") for part in re.split(r", | and | or ", listing)]


def _sighting(reading: Reading, name: str) -> Sighting:
    sighting = reading.sightings.get(name)
    if sighting is None:
        raise _Unanswerable(f"the {name} is never described")
    return sighting


def _position(reading: Reading, name: str) -> Position:
    position = _sighting(reading, name).position
    if position is None:
        raise _Unanswerable(f"the {name} has no position")
    return position


def _distance(a: Position, b: Position) -> float:
    return math.dist(a, b)


def _point(position: Position) -> str:
    return "(" + ", ".join(f"{v:g}" for v in position) + ")"


def _option_equal(reading: Reading, text: str) -> tuple[str, str]:
    """A sentence naming the option whose text is ``text``, and its letter."""
    for i, option in enumerate(reading.options):
        if option == text:
            letter = OPTION_LETTERS[i]
            return f"That is option {letter}.", letter
    raise _Unanswerable(f"no option reads {text!r}")


def _first_number(text: str) -> float | None:
    match = re.search(r"\d+(?:\.\d+)?", text)
    return float(match.group()) if match else None


def _option_nearest(reading: Reading, value: float, prefix: str = "") -> tuple[str, str]:
    """A sentence naming the option (starting with ``prefix``) whose number is nearest ``value`` in ratio,
    and its letter."""
    if value <= 0:
        raise _Unanswerable("a non-positive value cannot be matched to an option")
    best: tuple[float, int] | None = None
    for i, option in enumerate(reading.options):
        number = _first_number(option)
        if not option.startswith(prefix) or number is None or number <= 0:
            continue
        gap = abs(math.log(number / value))
        if best is None or gap < best[0]:
            best = (gap, i)
    if best is None:
        raise _Unanswerable("no option has a number")
    letter = OPTION_LETTERS[best[1]]
    return f"The nearest option is {letter} ({reading.options[best[1]]}).", letter


def _answer(reading: Reading, value: float, unit: str = "m", prefix: str = "") -> tuple[str, Answer]:
    """The closing sentence and the answer: the nearest option's letter, or the number itself."""
    if reading.options:
        return _option_nearest(reading, value, prefix)
    number: Answer = int(round(value)) if unit == "count" else round(value, 2)
    return f"The answer is {number} {unit}." if unit != "count" else f"The answer is {number}.", number


def _steps(reading: Reading) -> list[tuple[int, list[PathPiece]]]:
    """(key frame, pieces) of every step; raises when a step has no path account."""
    if reading.frames < 2:
        raise _Unanswerable("one key frame shows no motion")
    steps = []
    for j, pieces in enumerate(reading.paths, start=1):
        if pieces is None:
            raise _Unanswerable(f"frame {j} gives no path")
        steps.append((j, pieces))
    return steps


# ------------------------------------------------------------------------------------------------ tasks


def _appearance_order(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    names = _names(match.group(1))
    frames = {name: _sighting(reading, name).frame for name in names}
    if len(set(frames.values())) < len(names):
        raise _Unanswerable("two of the objects are first seen at the same key frame")
    order = sorted(names, key=frames.__getitem__)
    cited = ", ".join(f"the {name} in {f'frame {frames[name]}'}" for name in order)
    sentence, letter = _option_equal(reading, ", ".join(order))
    return f"First seen: {cited}. So the order is {', '.join(order)}. {sentence}", letter


def _relative_direction(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    at, facing, target = match.group(1), match.group(2), match.group(3)
    a, b, c = (_position(reading, name) for name in (at, facing, target))
    heading = math.atan2(b[1] - a[1], b[0] - a[0])
    bearing = math.atan2(c[1] - a[1], c[0] - a[0])
    angle = (math.degrees(bearing - heading) + 180.0) % 360.0 - 180.0
    if min(abs(angle), abs(abs(angle) - 90.0), abs(abs(angle) - 180.0)) < 1.0:
        raise _Unanswerable("the target lies on a quadrant boundary")
    answer = quadrant(angle)
    side = "left" if angle > 0 else "right"
    text = (
        f"The {at} is at {_point(a[:2])}, the {facing} at {_point(b[:2])}, the {target} at {_point(c[:2])}. "
        f"Facing from the {at} to the {facing}, the {target} is {abs(angle):.0f} deg to the {side}, so "
        f"{answer}."
    )
    sentence, letter = _option_equal(reading, answer)
    return f"{text} {sentence}", letter


def _relative_distance(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    target, candidates = match.group(1), _names(match.group(2))
    centre = _position(reading, target)
    distances = {name: _distance(centre, _position(reading, name)) for name in candidates}
    ranked = sorted(distances, key=distances.__getitem__)
    if distances[ranked[1]] - distances[ranked[0]] < 0.01 * distances[ranked[1]]:
        raise _Unanswerable("two candidates are equally near")
    cited = "; ".join(f"the {name} {_metres(distances[name])} m" for name in candidates)
    sentence, letter = _option_equal(reading, ranked[0])
    return f"Distances from the {target}: {cited}. The nearest is the {ranked[0]}. {sentence}", letter


def _singular(plural_name: str) -> str:
    words = plural_name.split(" ")
    last = words[-1]
    for singular in (last[:-3] + "f", last[:-2], last[:-1]):
        if plural(singular) == last:
            return " ".join([*words[:-1], singular])
    raise _Unanswerable(f"{plural_name!r} is no plural")


def _object_count(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    category = _singular(match.group(1))
    found = [s for name, s in reading.sightings.items() if name.endswith(" " + category)]
    if not found:
        raise _Unanswerable(f"no {category} is described")
    cited = ", ".join(f"the {s.name} ({f'frame {s.frame}'})" for s in found)
    text = f"Distinct {match.group(1)} seen: {cited}. That makes {len(found)}."
    if reading.options:
        sentence, letter = _option_equal(reading, str(len(found)))
        return f"{text} {sentence}", letter
    return f"{text} The answer is {len(found)}.", len(found)


def _abs_distance(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    first, second = match.group(1), match.group(2)
    a, b = _position(reading, first), _position(reading, second)
    d = _distance(a, b)
    deltas = ", ".join(f"{abs(p - q):.2f}" for p, q in zip(a, b, strict=True))
    text = (
        f"The {first} is at {_point(a)}, the {second} at {_point(b)}. The differences are {deltas}, so "
        f"the distance is {_metres(d)} m."
    )
    sentence, answer = _answer(reading, d)
    return f"{text} {sentence}", answer


def _object_size(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    name = match.group(1)
    sighting = _sighting(reading, name)
    if sighting.size is None:
        raise _Unanswerable(f"the size of the {name} is not given")
    text = f"In {f'frame {sighting.frame}'} the {name}'s longest side is {sighting.size:g} m."
    sentence, answer = _answer(reading, sighting.size)
    return f"{text} {sentence}", answer


def _room_size(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    if reading.room is None:
        raise _Unanswerable("the room's size is not given")
    x, y = reading.room
    text = f"The room is {x:g} m by {y:g} m, so its floor area is {x:g} x {y:g} = {x * y:.1f} square metres."
    sentence, answer = _answer(reading, x * y, "square metres")
    return f"{text} {sentence}", answer


def _route(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    turns: list[str] = []
    cited: list[str] = []
    legs = 0
    heading_change = 0.0
    moving = False  # whether the previous piece was a leg (walk or flight)
    for j, pieces in _steps(reading):
        for piece in pieces:
            if piece.kind in (WALK, FLY):
                if legs and not moving:
                    label = turn_label(heading_change)
                    if label is None:
                        raise _Unanswerable(f"a turn of {heading_change:g} deg is too near a label's limit")
                    if label:
                        turns.append(label)
                        cited.append(f"{label} ({heading_change:+g} deg, by frame {j})")
                legs += 0 if moving else 1
                moving, heading_change = True, 0.0
            elif piece.kind == TURN:
                heading_change += piece.turn_deg
                moving = False
    if not turns:
        raise _Unanswerable("no turn between legs")
    answer = ", then ".join(turns)
    text = f"Between my {legs} legs I turned: {'; '.join(cited)}. So: {answer}."
    sentence, letter = _option_equal(reading, answer)
    return f"{text} {sentence}", letter


def _ego_distance(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    parts: list[str] = []
    total = 0.0
    for j, pieces in _steps(reading):
        metres = sum(p.metres if p.kind in (WALK, FLY) else abs(p.up_m) if p.kind == CLIMB else 0.0
                     for p in pieces)  # fmt: skip
        if metres:
            parts.append(f"{metres:g} m by frame {j}")
        total += metres
    text = f"Along my path: {', '.join(parts) or 'nothing'}. In total {_metres(total)} m."
    sentence, answer = _answer(reading, total)
    return f"{text} {sentence}", answer


def _ego_turn(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    parts: list[str] = []
    total = 0.0
    for j, pieces in _steps(reading):
        for piece in pieces:
            if piece.kind == TURN:
                parts.append(f"{piece.turn_deg:+g} by frame {j}")
                total += piece.turn_deg
    if not reading.options or abs(total) < 1.0:
        raise _Unanswerable("no net turn to name")
    side = "left" if total > 0 else "right"
    text = (
        f"My turns (left positive): {', '.join(parts)}. In total {total:+g} deg: {side} {abs(total):g} deg."
    )
    sentence, letter = _option_nearest(reading, abs(total), prefix=f"{side},")
    return f"{text} {sentence}", letter


def _ego_altitude(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    parts: list[str] = []
    total = 0.0
    for j, pieces in _steps(reading):
        for piece in pieces:
            if piece.up_m:
                parts.append(f"{piece.up_m:+g} m by frame {j}")
                total += piece.up_m
    if abs(total) < 0.05:
        raise _Unanswerable("no altitude change to name")
    side = "up" if total > 0 else "down"
    text = f"My altitude changes: {', '.join(parts)}. In total {total:+.1f} m: {side} {abs(total):.1f} m."
    if reading.options:
        sentence, letter = _option_nearest(reading, abs(total), prefix=f"{side},")
        return f"{text} {sentence}", letter
    sentence, answer = _answer(reading, abs(total))
    return f"{text} {sentence}", answer


_SOLVERS: dict[str, Callable[[Reading, re.Match[str]], tuple[str, Answer]]] = {
    "appearance_order": _appearance_order,
    "relative_direction": _relative_direction,
    "relative_distance": _relative_distance,
    "object_count": _object_count,
    "abs_distance": _abs_distance,
    "object_size": _object_size,
    "room_size": _room_size,
    "route": _route,
    "ego_distance": _ego_distance,
    "ego_turn": _ego_turn,
    "ego_altitude": _ego_altitude,
}


def question_task(question: str) -> str | None:
    """The synth task whose template ``question`` follows, or None."""
    return next((task for task, pattern in _TEMPLATES.items() if pattern.match(question)), None)


def oracle_trace(prompt: str) -> tuple[str, Answer] | None:
    """The oracle's reasoning (a think text citing frames, objects, sizes and motions) and its answer (a
    letter for a multiple-choice question, a number otherwise) for the user turn ``prompt``; None when
    the prompt does not determine the answer."""
    reading = read_prompt(prompt)
    if reading is None:
        return None
    for task, pattern in _TEMPLATES.items():
        match = pattern.match(reading.question)
        if match is None:
            continue
        try:
            return _SOLVERS[task](reading, match)
        except _Unanswerable:
            return None
    return None


def oracle_answer(prompt: str) -> Answer | None:
    """The oracle's answer to the user turn ``prompt`` (see :func:`oracle_trace`), or None."""
    trace = oracle_trace(prompt)
    return None if trace is None else trace[1]
