"""relative_direction (mc): standing at A facing B, the quadrant (front/back x left/right) C is in.

Horizontal geometry; a question is skipped when C lies within 15 deg of a quadrant's boundary. The oracle
reads the three objects' map positions and computes C's angle seen from A looking at B.
"""

from __future__ import annotations

import math
import re

from embodied_r_ros.question_file import MC

from .geometry import QUADRANTS, direction_angle, object_distance, quadrant
from .reading import Reading, option_equal, point, position
from .scene import DRAFT_TRIES, Draft, SceneContext
from .task import Answer, QuestionTask, Template, Unanswerable

NAME = "relative_direction"
TEMPLATE = Template(
    "If I am standing by the {} and facing the {}, is the {} to my front-left, front-right, back-left, or "
    "back-right?"
)


def _off_boundary(angle: float) -> float:
    """How far (degrees) ``angle`` lies from the nearest quadrant boundary (0, 90 or 180 deg)."""
    return min(abs(angle), abs(abs(angle) - 90.0), abs(abs(angle) - 180.0))


def generate(ctx: SceneContext) -> list[Draft]:
    """Random trios of seen objects, A and B apart, C clear of A and of the quadrants' boundaries."""
    drafts: list[Draft] = []
    if len(ctx.seen) < 3:
        return drafts
    for _ in range(DRAFT_TRIES):
        a, b, c = ctx.sample(ctx.seen, 3)
        order = ctx.rng.permutation(3)
        a, b, c = ([a, b, c][i] for i in order)
        if object_distance(a, b) < 1.0 * ctx.scale or object_distance(a, c) < 0.8 * ctx.scale:
            continue
        angle = direction_angle(a, b, c)
        if _off_boundary(angle) < 15.0:
            continue
        correct = quadrant(angle)
        text = TEMPLATE.format(a.name, b.name, c.name)
        distractors = [q for q in QUADRANTS if q != correct]
        objects = (a.id, b.id, c.id)
        drafts.append(Draft(NAME, MC, text, (0.0, ctx.end_s), correct, distractors, objects=objects))
    return drafts


def solve(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The target's angle from A's heading to B, from the map positions, named as a quadrant."""
    at, facing, target = match.group(1), match.group(2), match.group(3)
    a, b, c = (position(reading, name) for name in (at, facing, target))
    heading = math.atan2(b[1] - a[1], b[0] - a[0])
    bearing = math.atan2(c[1] - a[1], c[0] - a[0])
    angle = (math.degrees(bearing - heading) + 180.0) % 360.0 - 180.0
    if _off_boundary(angle) < 1.0:
        raise Unanswerable("the target lies on a quadrant boundary")
    correct = quadrant(angle)
    side = "left" if angle > 0 else "right"
    text = (
        f"The {at} is at {point(a[:2])}, the {facing} at {point(b[:2])}, the {target} at {point(c[:2])}. "
        f"Facing from the {at} to the {facing}, the {target} is {abs(angle):.0f} deg to the {side}, so "
        f"{correct}."
    )
    sentence, letter = option_equal(reading, correct)
    return f"{text} {sentence}", letter


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
