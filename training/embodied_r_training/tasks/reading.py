"""What a reasoning prompt says, as the oracle reads it, and the steps the scene tasks' solvers share.

A prompt is the LM's user turn (:func:`embodied_r_ros.reasoning.prompts.reasoning_prompt`: the key frames'
descriptions, the question, the lettered options). :func:`read_prompt` reads the grammar of ground-truth
descriptions (:mod:`embodied_r_training.synth.ground_truth`): each object's first sighting with its
measurements, each step's "Path:" account, the room's sides. The helpers below find an object, cite a
number and choose the option, raising :class:`~.task.Unanswerable` where the prompt falls short.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from embodied_r_ros.reasoning.calculator import number  # the traces write numbers as the calculator does
from embodied_r_ros.reasoning.options import LETTER, OPTION_LETTERS

from ..synth.ground_truth import PathPiece
from ..synth.trajectory import CLIMB, FLY, TURN, WALK
from .task import Answer, Unanswerable

Position = tuple[float, float, float]

_NUMBER = r"-?\d+(?:\.\d+)?"
FRAME = re.compile(r"^Frame (\d+): (?:After (.*?), Observe: |Observe: )(.*)$")
_OPTION = re.compile(rf"^({LETTER})\. (.*)$")
LIST = re.compile(r"(?:I see|First seen:) (.*?)\.(?= [A-Z]|$)")  # up to the next sentence
OBJECT = re.compile(
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


def read_prompt(prompt: str) -> Reading | None:
    """Parse a reasoning prompt's user turn; None when it is not in the form reasoning_prompt writes."""
    lines = prompt.splitlines()
    question_at = next((i for i, line in enumerate(lines) if line.startswith("Question: ")), None)
    if question_at is None:
        return None
    options = [m.group(2) for line in lines[question_at + 1 :] if (m := _OPTION.match(line))]
    reading = Reading(question=lines[question_at].removeprefix("Question: ").strip(), options=options)
    for line in lines[:question_at]:
        match = FRAME.match(line)
        if match is None:
            continue
        frame, observation = int(match.group(1)), match.group(3)
        if frame != reading.frames:
            return None  # frames out of order: not a prompt of reasoning_prompt
        reading.frames += 1
        _read_observation(reading, frame, observation)
    return reading


def listed_objects(observation: str) -> Iterator[tuple[str, float | None, Position | None]]:
    """The objects an observation lists ("I see ..." / "First seen: ..."), in order: name, longest side
    and position where the text gives them."""
    for listed in LIST.finditer(observation):
        for item in listed.group(1).split("; "):
            match = OBJECT.match(item.strip())
            if match is None:
                continue
            size = float(match.group("size")) if match.group("size") else None
            position = (
                (float(match.group("x")), float(match.group("y")), float(match.group("z")))
                if match.group("x")
                else None
            )
            yield match.group("name"), size, position


def _read_observation(reading: Reading, frame: int, observation: str) -> None:
    if frame > 0:
        path = _PATH.match(observation)
        reading.paths.append(_pieces(path.group(1)) if path else None)
    for name, size, position in listed_objects(observation):
        if name not in reading.sightings:
            reading.sightings[name] = Sighting(name, frame, size, position)
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


# ------------------------------------------------------------------------------------- solvers' steps


def metres(value: float) -> str:
    """A distance as the reasoning cites it (two decimals, no unit)."""
    return f"{value:.2f}"


def names(listing: str) -> list[str]:
    """ "the red chair, the blue box and the lamp" -> ["red chair", "blue box", "lamp"]."""
    return [part.strip().removeprefix("the ") for part in re.split(r", | and | or ", listing)]


def sighting(reading: Reading, name: str) -> Sighting:
    """The first sighting of ``name``; raises when it is never described."""
    found = reading.sightings.get(name)
    if found is None:
        raise Unanswerable(f"the {name} is never described")
    return found


def position(reading: Reading, name: str) -> Position:
    """Where ``name`` is on the scene's map; raises when the prompt does not say."""
    found = sighting(reading, name).position
    if found is None:
        raise Unanswerable(f"the {name} has no position")
    return found


def point(where: tuple[float, ...]) -> str:
    """A position as the reasoning cites it: "(1.2, -3, 0.4)"."""
    return "(" + ", ".join(f"{v:g}" for v in where) + ")"


def minus(p: float, q: float) -> str:
    """The subtraction ``p - q`` as a step writes it, a negative ``q`` as an addition ("2.23 + 0.7")."""
    return f"{p:g} - {q:g}" if q >= 0 else f"{p:g} + {-q:g}"


def running_sum(values: list[float], shown: Callable[[float], str]) -> tuple[list[str], float]:
    """The steps that add ``values`` up, one addition a line ("0.87 + 0.77 = 1.64", a negative value as
    "1.64 - 0.40 = 1.24"), each sum written by ``shown``; and the sum."""
    lines: list[str] = []
    total = values[0] if values else 0.0
    for value in values[1:]:
        sign = "-" if value < 0 else "+"
        lines.append(f"{shown(total)} {sign} {shown(abs(value))} = {shown(total + value)}")
        total += value
    return lines, total


def distance_steps(a: tuple[float, ...], b: tuple[float, ...]) -> list[str]:
    """The straight-line distance between ``a`` and ``b`` as steps: a line per axis with its difference
    (larger minus smaller) and that squared, then the sum of the squares, then its square root."""
    gaps = [abs(p - q) for p, q in zip(a, b, strict=True)]
    squares = [g * g for g in gaps]
    lines = [
        f"{axis}: {minus(max(p, q), min(p, q))} = {number(g)}, squared {number(s)}"
        for axis, p, q, g, s in zip("xyz", a, b, gaps, squares, strict=False)
    ]
    total = sum(squares)
    lines.append(" + ".join(number(s) for s in squares) + f" = {number(total)}")
    lines.append(f"The square root of {number(total)} is {number(math.sqrt(total))}.")
    return lines


def option_lookup(options: Sequence[str], text: str) -> tuple[str, str]:
    """The option lookup after a conclusion ``text``: the options copied one a line, each checked against
    ``text``, up to the one that reads it ("A. red bed: no.", "B. green bed: yes."), and its letter.

    A line per option keeps each step a copy and a comparison, and puts the letter beside its "yes": a
    one-line lookup ("green bed is option C.") asks a small model to find the letter that precedes a text
    in the prompt, and it copied the letter of another line in a quarter of its answers (issue 42).
    The lines match :data:`~embodied_r_ros.reasoning.conclusion.OPTION_LOOKUP`, so the goals and the
    consistency judge can tell them apart from the conclusion."""
    lines = []
    for i, option in enumerate(options):
        letter = OPTION_LETTERS[i]
        if option == text:
            lines.append(f"{letter}. {option}: yes.")
            return "\n".join(lines), letter
        lines.append(f"{letter}. {option}: no.")
    raise Unanswerable(f"no option reads {text!r}")


def option_equal(reading: Reading, text: str) -> tuple[str, str]:
    """:func:`option_lookup` over the prompt's options."""
    return option_lookup(reading.options, text)


def _first_number(text: str) -> str | None:
    match = re.search(r"\d+(?:\.\d+)?", text)
    return match.group() if match else None


def option_nearest(
    reading: Reading, value: float, prefix: str = "", shown: str | None = None
) -> tuple[str, str]:
    """The closing lines naming the option (starting with ``prefix``) whose number is nearest ``value`` in
    ratio, and its letter: the options' numbers copied ("Options: A 3.2, B 0.9, C 1.3, D 1.8."), then the
    nearest with its letter ("Nearest to 0.94: 0.9 m, option B."). ``shown`` writes ``value`` (default
    :func:`number`)."""
    if value <= 0:
        raise Unanswerable("a non-positive value cannot be matched to an option")
    best: tuple[float, int] | None = None
    listed = []
    for i, option in enumerate(reading.options):
        written = _first_number(option)
        if not option.startswith(prefix) or written is None or float(written) <= 0:
            continue
        listed.append(f"{OPTION_LETTERS[i]} {written}")
        gap = abs(math.log(float(written) / value))
        if best is None or gap < best[0]:
            best = (gap, i)
    if best is None:
        raise Unanswerable("no option has a number")
    letter = OPTION_LETTERS[best[1]]
    side = f" {prefix.rstrip(',')}" if prefix else ""
    return (
        f"Options{side}: {', '.join(listed)}.\n"
        f"Nearest to {shown or number(value)}: {reading.options[best[1]]}, option {letter}."
    ), letter


def answer(
    reading: Reading, value: float, unit: str = "m", prefix: str = "", shown: str | None = None
) -> tuple[str, Answer]:
    """The closing line(s) and the answer: the nearest option's letter (``shown`` as for
    :func:`option_nearest`), or the number itself."""
    if reading.options:
        return option_nearest(reading, value, prefix, shown)
    found: Answer = int(round(value)) if unit == "count" else round(value, 2)
    return f"The answer is {found} {unit}." if unit != "count" else f"The answer is {found}.", found


def steps(reading: Reading) -> list[tuple[int, list[PathPiece]]]:
    """(key frame, pieces) of every step; raises when a step has no path account."""
    if reading.frames < 2:
        raise Unanswerable("one key frame shows no motion")
    found = []
    for j, pieces in enumerate(reading.paths, start=1):
        if pieces is None:
            raise Unanswerable(f"frame {j} gives no path")
        found.append((j, pieces))
    return found
