"""abs_distance (mc, numeric): the distance between two objects' centres, in metres.

The oracle reads the two map positions and takes the 3D distance between them.
"""

from __future__ import annotations

import itertools
import math
import re

from .amounts import Distractors, numeric_drafts, shown_as
from .geometry import object_distance
from .reading import Reading, answer, metres, point, position
from .scene import Draft, SceneContext
from .task import Answer, QuestionTask, Template

NAME = "abs_distance"
TEMPLATE = Template("What is the distance between the centres of the {} and the {}, in metres?")


def generate(ctx: SceneContext) -> list[Draft]:
    """Every pair of seen objects at least 0.5 m apart (4 m outdoors)."""
    drafts: list[Draft] = []
    pairs = [
        (a, b) for a, b in itertools.combinations(ctx.seen, 2) if object_distance(a, b) >= 0.5 * ctx.scale
    ]
    distractors = Distractors([object_distance(a, b) for a, b in pairs], ctx.rng, shown_as("m"))
    for a, b in pairs:
        text = TEMPLATE.format(a.name, b.name)
        distance = object_distance(a, b)
        drafts += numeric_drafts(ctx, NAME, text, distance, "m", (0.0, ctx.end_s), (a.id, b.id), distractors)
    return drafts


def solve(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The distance between the two map positions."""
    first, second = match.group(1), match.group(2)
    a, b = position(reading, first), position(reading, second)
    d = math.dist(a, b)
    deltas = ", ".join(f"{abs(p - q):.2f}" for p, q in zip(a, b, strict=True))
    text = (
        f"The {first} is at {point(a)}, the {second} at {point(b)}. The differences are {deltas}, so "
        f"the distance is {metres(d)} m."
    )
    sentence, found = answer(reading, d)
    return f"{text} {sentence}", found


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
