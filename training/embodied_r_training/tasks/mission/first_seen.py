"""mission_first_seen (mc, 2 options): "Which did I see first: the X or the Y?".

X and Y are first seen in different rooms, the later one's first (even faint) sighting at least ``far``
seconds after the earlier one's first sighting ends. The prompt must show the frames in time order (or with
their mission time): the oracle reads the key frame that first lists each name ("I see" / "First seen:"),
and abstains when one is never listed or both first show at one frame.
"""

from __future__ import annotations

import re

from ..reading import option_lookup
from ..task import Answer, QuestionTask, Template, Unanswerable
from .context import Evidence, MissionContext, MissionDraft
from .reading import MissionReading, first_frames

NAME = "mission_first_seen"
TEMPLATE = Template("Which did I see first: the {} or the {}?")


def generate(m: MissionContext) -> list[MissionDraft]:
    """Every far pair of names (:meth:`~.context.MissionContext.far_pairs`), named in random order."""
    drafts = []
    for x, y in m.far_pairs(m.counts[NAME]):
        first_x, first_y = m.by_name[x][0], m.by_name[y][0]
        named = [x, y] if m.rng.random() < 0.5 else [y, x]  # the text's order says nothing
        text = TEMPLATE.format(named[0], named[1])
        evidence = Evidence((m.stamps(first_x), m.stamps(first_y)), (first_x.object_id, first_y.object_id))
        drafts.append(MissionDraft(NAME, text, x, evidence.objects, evidence, distractors=(y,)))
    return drafts


def solve(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    """The name whose first listing comes at the earlier key frame; the option lookup."""
    names = [match.group(1), match.group(2)]
    frames = first_frames(reading, names)
    if frames[0] == frames[1]:
        raise Unanswerable("both are first described in one key frame")
    first = names[frames.index(min(frames))]
    lookup, letter = option_lookup(reading.options, first)
    text = (
        f"The {names[0]} is first described in frame {frames[0]}, the {names[1]} in frame {frames[1]}; the "
        f"frames run from the past to the present, so I saw the {first} first.\n{lookup}"
    )
    return text, letter


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
