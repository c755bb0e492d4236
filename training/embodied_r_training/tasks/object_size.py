"""object_size (mc, numeric): an object's longest dimension (length, width or height), in metres.

The oracle reads the object's "longest side" from its first description.
"""

from __future__ import annotations

import re

from .amounts import Distractors, numeric_drafts, shown_as
from .reading import Reading, answer, sighting
from .scene import Draft, SceneContext
from .task import Answer, QuestionTask, Template, Unanswerable

NAME = "object_size"
TEMPLATE = Template("What is the longest dimension (length, width or height) of the {}, in metres?")


def generate(ctx: SceneContext) -> list[Draft]:
    """Every seen object."""
    drafts: list[Draft] = []
    distractors = Distractors([o.longest_dimension for o in ctx.seen], ctx.rng, shown_as("m"))
    for obj in ctx.seen:
        text = TEMPLATE.format(obj.name)
        size = obj.longest_dimension
        drafts += numeric_drafts(ctx, NAME, text, size, "m", (0.0, ctx.end_s), (obj.id,), distractors)
    return drafts


def solve(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The longest side the object's first description gives (a read-off: nothing to combine)."""
    name = match.group(1)
    seen = sighting(reading, name)
    if seen.size is None:
        raise Unanswerable(f"the size of the {name} is not given")
    text = f"In frame {seen.frame} the {name}'s longest side is {seen.size:g} m."
    sentence, found = answer(reading, seen.size, shown=f"{seen.size:g}")
    return f"{text}\n{sentence}", found


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
