"""room_size (mc, numeric; indoor only): the room's floor area, in square metres.

Distractors are the areas of random rooms. The oracle reads "The room is X m by Y m" and multiplies.
"""

from __future__ import annotations

import re

from ..synth.world import random_room
from .amounts import Distractors, numeric_drafts, shown_as
from .reading import Reading, answer
from .scene import Draft, SceneContext
from .task import Answer, QuestionTask, Template, Unanswerable

NAME = "room_size"
TEMPLATE = Template("What is the floor area of this room, in square metres?")
ROOM_DRAWS = 40  # random rooms drawn to stand beside the true one in the options


def generate(ctx: SceneContext) -> list[Draft]:
    """The one question of a scene with a room (none outdoors)."""
    if ctx.world.room is None:
        return []
    text = TEMPLATE.format()
    rooms = [random_room(ctx.rng).floor_area for _ in range(ROOM_DRAWS)]
    distractors = Distractors(rooms, ctx.rng, shown_as("m^2"))
    area = ctx.world.room.floor_area
    return numeric_drafts(ctx, NAME, text, area, "m^2", (0.0, ctx.end_s), (), distractors)


def solve(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The product of the room's sides: the sides copied, then the one multiplication."""
    if reading.room is None:
        raise Unanswerable("the room's size is not given")
    x, y = reading.room
    lines = [f"The room is {x:g} m by {y:g} m.", f"{x:g} x {y:g} = {x * y:.2f}",
             f"So the floor area is {x * y:.2f} square metres."]  # fmt: skip
    sentence, found = answer(reading, x * y, "square metres")
    return "\n".join([*lines, sentence]), found


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
