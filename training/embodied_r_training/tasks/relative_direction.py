"""relative_direction (mc): standing at A facing B, the quadrant (front/back x left/right) C is in.

Horizontal geometry; a question is skipped when C lies within 15 deg of a quadrant's boundary. The oracle
reads the three objects' map positions and computes C's angle seen from A looking at B.
"""

from __future__ import annotations

import math
import re

from embodied_r_ros.question_file import MC

from .geometry import QUADRANTS, direction_angle, object_distance, quadrant
from .reading import Reading, minus, number, option_equal, point, position
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
    """The target seen from A facing B, from the map positions: the heading and the target's offset as
    vectors, then the sign of their dot product (front or back) and of their cross product (left or right),
    one multiplication or sum a line; the option lookup."""
    at, facing, target = match.group(1), match.group(2), match.group(3)
    a, b, c = (position(reading, name) for name in (at, facing, target))
    heading = math.atan2(b[1] - a[1], b[0] - a[0])
    bearing = math.atan2(c[1] - a[1], c[0] - a[0])
    angle = (math.degrees(bearing - heading) + 180.0) % 360.0 - 180.0
    if _off_boundary(angle) < 1.0:
        raise Unanswerable("the target lies on a quadrant boundary")
    correct = quadrant(angle)
    heading_xy, target_xy = (b[0] - a[0], b[1] - a[1]), (c[0] - a[0], c[1] - a[1])
    lines = [
        f"The {at} is at {point(a[:2])}, the {facing} at {point(b[:2])}, the {target} at {point(c[:2])}.",
        f"Facing: ({minus(b[0], a[0])}, {minus(b[1], a[1])}) = {point(_rounded(heading_xy))}",
        f"Target: ({minus(c[0], a[0])}, {minus(c[1], a[1])}) = {point(_rounded(target_xy))}",
        *_signs(heading_xy, target_xy, correct),
        f"So the {target} is {correct}.",
    ]
    sentence, letter = option_equal(reading, correct)
    return "\n".join([*lines, sentence]), letter


def _rounded(vector: tuple[float, float], digits: int = 1) -> tuple[float, float]:
    return (round(vector[0], digits) + 0.0, round(vector[1], digits) + 0.0)  # + 0.0: no "-0"


def _signs(heading: tuple[float, float], target: tuple[float, float], correct: str) -> list[str]:
    """The dot product (front or back) and the cross product (left or right) of the heading and the
    target's offset, a line each, on the vectors as the lines above write them (one decimal; two where
    one would flip a sign the exact vectors give, so the lines always reach ``correct``)."""
    for digits in (1, 2, 6):
        (hx, hy), (tx, ty) = _rounded(heading, digits), _rounded(target, digits)
        ahead, left = hx * tx + hy * ty, hx * ty - hy * tx
        found = f"{'front' if ahead > 0 else 'back'}-{'left' if left > 0 else 'right'}"
        if found == correct:
            break

    def times(p: float, q: float) -> str:
        return f"{p:g} x {q:g}" if q >= 0 else f"{p:g} x ({q:g})"

    def product(p: float, q: float) -> str:  # the sign always written: the next line adds two of them
        return f"{times(p, q)} = {'+' if p * q >= 0 else '-'}{number(abs(p * q))}"

    # One multiplication a line, then their sum: the products' signs are where the 135M reasoner slipped
    # when a line held two products and their sum (issue 42).
    return [
        f"Ahead: {product(hx, tx)}",
        product(hy, ty),
        f"{_plus(hx * tx, hy * ty)} = {number(ahead)}, so {'front' if ahead > 0 else 'back'}.",
        f"Left: {product(hx, ty)}",
        product(hy, tx),
        f"{_minus(hx * ty, hy * tx)} = {number(left)}, so {'left' if left > 0 else 'right'}.",
    ]


def _minus(p: float, q: float) -> str:
    """``p - q`` as a step writes it, a negative ``q`` as an addition."""
    return f"{number(p)} - {number(q)}" if q >= 0 else f"{number(p)} + {number(-q)}"


def _plus(p: float, q: float) -> str:
    """``p + q`` as a step writes it, a negative ``q`` as a subtraction."""
    return f"{number(p)} + {number(q)}" if q >= 0 else f"{number(p)} - {number(-q)}"


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
