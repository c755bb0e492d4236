"""object_count (numeric): how many objects of one category are seen in the window.

Numeric only, as in VSI-Bench: most categories are seen once, and no set of count options hides that from
a blind reader. A category with a barely visible member is not asked about. The oracle counts the distinct
objects of the category that the descriptions list.
"""

from __future__ import annotations

import re

from embodied_r_ros.question_file import NUMERIC

from ..synth.world import plural
from .reading import Reading, option_equal
from .scene import Draft, SceneContext
from .task import Answer, QuestionTask, Template, Unanswerable

NAME = "object_count"
TEMPLATE = Template("How many {} appear in this video?")


def generate(ctx: SceneContext) -> list[Draft]:
    """One question per category seen, unless a member is only barely visible (would a viewer count it?)."""
    drafts: list[Draft] = []
    vis, cfg, end = ctx.visibility, ctx.config, ctx.end_s
    for category in sorted({o.category for o in ctx.seen}):
        members = [o for o in ctx.world.objects if o.category == category]
        fractions = [vis.max_fraction(o.id, 0.0, end) for o in members]
        if any(cfg.min_fraction / 10 <= f < cfg.min_fraction for f in fractions):
            continue  # a barely visible member: would a viewer count it?
        count = sum(f >= cfg.min_fraction for f in fractions)
        text = TEMPLATE.format(plural(category))
        seen_ids = tuple(o.id for o, f in zip(members, fractions, strict=True) if f >= cfg.min_fraction)
        if NUMERIC in cfg.forms:  # numeric only, as in VSI-Bench (see the module docstring)
            drafts.append(Draft(NAME, NUMERIC, text, (0.0, end), count, [], "count", seen_ids))
    return drafts


def _singular(plural_name: str) -> str:
    words = plural_name.split(" ")
    last = words[-1]
    for singular in (last[:-3] + "f", last[:-2], last[:-1]):
        if plural(singular) == last:
            return " ".join([*words[:-1], singular])
    raise Unanswerable(f"{plural_name!r} is no plural")


def solve(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The distinct objects whose name ends in the category, numbered one a line."""
    category = _singular(match.group(1))
    found = [s for name, s in reading.sightings.items() if name.endswith(" " + category)]
    if not found:
        raise Unanswerable(f"no {category} is described")
    lines = [f"Distinct {match.group(1)} seen:"]
    lines += [f"{i}. the {s.name} (frame {s.frame})" for i, s in enumerate(found, start=1)]
    lines.append(f"That makes {len(found)}.")
    if reading.options:
        sentence, letter = option_equal(reading, str(len(found)))
        return "\n".join([*lines, sentence]), letter
    return "\n".join([*lines, f"The answer is {len(found)}."]), len(found)


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
