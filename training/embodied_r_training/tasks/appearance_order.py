"""appearance_order (mc): the order in which three objects are first seen (>= the visibility threshold).

The oracle reads the key frame that first shows each object (frame 0's "I see", or "First seen:").
"""

from __future__ import annotations

import itertools
import re

from embodied_r_ros.question_file import MC

from .reading import Reading, names, option_equal, sighting
from .scene import DRAFT_TRIES, Draft, SceneContext
from .task import Answer, QuestionTask, Template, Unanswerable

NAME = "appearance_order"
TEMPLATE = Template("In what order do these objects first appear in the video: {}?")


def generate(ctx: SceneContext) -> list[Draft]:
    """Trios of seen objects, each first seen (even faintly) only after the previous one was clearly seen."""
    vis, cfg, end = ctx.visibility, ctx.config, ctx.end_s
    first = {o.id: vis.first_seen(o.id, 0.0, end, cfg.min_fraction) for o in ctx.seen}
    faint = {o.id: vis.first_seen(o.id, 0.0, end, cfg.min_fraction / 10) for o in ctx.seen}
    drafts: list[Draft] = []
    if len(ctx.seen) < 3:
        return drafts
    for _ in range(DRAFT_TRIES):
        trio = ctx.sample(ctx.seen, 3)
        ordered = sorted(trio, key=lambda o: first[o.id])
        # Each must have become (even faintly) visible only after the previous was clearly seen.
        if any(faint[b.id] < first[a.id] + 0.5 for a, b in itertools.pairwise(ordered)):
            continue
        order = [o.name for o in ordered]
        listed = ", ".join(ctx.the(o) for o in trio[:-1]) + f" and {ctx.the(trio[-1])}"
        perms = [", ".join(p) for p in itertools.permutations(order) if list(p) != order]
        distractors = [perms[i] for i in ctx.rng.permutation(len(perms))[:3]]
        objects = tuple(o.id for o in trio)
        text = TEMPLATE.format(listed)
        drafts.append(Draft(NAME, MC, text, (0.0, end), ", ".join(order), distractors, objects=objects))
    return drafts


def solve(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The objects sorted by the key frame that first shows them: each one's frame copied, then the
    order, then the option lookup."""
    listed = names(match.group(1))
    frames = {name: sighting(reading, name).frame for name in listed}
    if len(set(frames.values())) < len(listed):
        raise Unanswerable("two of the objects are first seen at the same key frame")
    order = sorted(listed, key=frames.__getitem__)
    lines = [f"The {name} is first seen in frame {frames[name]}." for name in listed]
    lines.append("By frame: " + ", ".join(f"{name} ({frames[name]})" for name in order) + ".")
    lines.append(f"So the order is {', '.join(order)}.")
    sentence, letter = option_equal(reading, ", ".join(order))
    return "\n".join([*lines, sentence]), letter


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
