"""abs_distance (mc, numeric): the distance between two objects' centres, in metres.

The oracle reads the two map positions and takes the 3D distance between them.
"""

from __future__ import annotations

import itertools
import math
import re

from .amounts import Distractors, numeric_drafts, shown_as
from .geometry import object_distance
from .reading import Reading, answer, distance_steps, point, position
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
    """The distance between the two map positions: both copied, then one step a line (each axis's
    difference, its square, their sum, the root)."""
    first, second = match.group(1), match.group(2)
    a, b = position(reading, first), position(reading, second)
    lines = [f"The {first} is at {point(a)}.", f"The {second} is at {point(b)}."]
    lines += distance_steps(a, b)
    d = math.dist(a, b)
    sentence, found = answer(reading, d)
    return "\n".join([*lines, sentence]), found


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
