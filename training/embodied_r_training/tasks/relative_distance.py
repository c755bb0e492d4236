"""relative_distance (mc): which of 3-4 objects has its centre closest to a target's centre.

One candidate per category (names that share a word would tell a blind reader which is which); a question
is skipped when the runner-up is within 15 % (and 0.3 m indoors) of the closest. The oracle reads the map
positions, writes each candidate's gaps and squared distance, and picks the smallest.
"""

from __future__ import annotations

import re

from embodied_r_ros.question_file import MC

from .geometry import closest_object, object_distance
from .reading import Reading, names, number, option_equal, point, position
from .scene import DRAFT_TRIES, Draft, SceneContext
from .task import Answer, QuestionTask, Template, Unanswerable

NAME = "relative_distance"
TEMPLATE = Template("Which of these objects is closest to the {} (measured between their centres): {}?")


def generate(ctx: SceneContext) -> list[Draft]:
    """Random targets, each with one candidate from each of up to four other categories seen."""
    drafts: list[Draft] = []
    if len(ctx.seen) < 4:
        return drafts
    for _ in range(DRAFT_TRIES):
        target = ctx.seen[int(ctx.rng.integers(0, len(ctx.seen)))]
        # One object per category: names that share a word would tell a blind reader which is which (the
        # nearest object is more often of a category the others do not share, e.g. furniture by a wall).
        categories = sorted({o.category for o in ctx.seen if o.id != target.id})
        if len(categories) < 3:
            continue
        candidates = []
        for category in ctx.sample(categories, 4):
            members = [o for o in ctx.seen if o.category == category and o.id != target.id]
            candidates.append(members[int(ctx.rng.integers(0, len(members)))])
        distances = sorted(object_distance(target, c) for c in candidates)
        if distances[1] - distances[0] < max(0.3 * ctx.scale, 0.15 * distances[1]):
            continue
        best = closest_object(target, candidates)
        listed = ", ".join(ctx.the(o) for o in candidates[:-1]) + f" or {ctx.the(candidates[-1])}"
        text = TEMPLATE.format(target.name, listed)
        distractors = [c.name for c in candidates if c.id != best.id]
        objects = (target.id, *(c.id for c in candidates))
        drafts.append(Draft(NAME, MC, text, (0.0, ctx.end_s), best.name, distractors, objects=objects))
    return drafts


def solve(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """Each candidate's squared distance from the target's map position, a line each: its position copied,
    the gap along each axis, their squares and the sum (the square root ranks alike and is left out);
    the smallest; the option lookup. Compact (a line per axis, as abs_distance writes, runs past the
    completion limit over four candidates: ~565 tokens), but each value is written before it is used."""
    target, candidates = match.group(1), names(match.group(2))
    centre = position(reading, target)
    where = {name: position(reading, name) for name in candidates}
    gaps = {name: [abs(p - q) for p, q in zip(centre, where[name], strict=True)] for name in candidates}
    squared = {name: sum(g * g for g in gaps[name]) for name in candidates}
    ranked = sorted(squared, key=squared.__getitem__)
    if squared[ranked[1]] - squared[ranked[0]] < 0.02 * squared[ranked[1]]:
        raise Unanswerable("two candidates are equally near")
    lines = [f"The {target} is at {point(centre)}."]
    for name in candidates:
        squares = " + ".join(number(g * g) for g in gaps[name])
        lines.append(
            f"The {name} at {point(where[name])}: gaps {', '.join(number(g) for g in gaps[name])};"
            f" squared {squares} = {number(squared[name])}."
        )
    lines.append(f"The smallest sum is {number(squared[ranked[0]])}: the {ranked[0]}.")
    sentence, letter = option_equal(reading, ranked[0])
    return "\n".join([*lines, sentence]), letter


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
