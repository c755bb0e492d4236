"""mission_last_seen (mc, 4 options): "How far into the mission did I last see the X?".

Options are mission times "m:ss" (to :data:`~.context.TIME_STEP_S` seconds), the truth the end of the
name's last sighting: the last-sighting times of four names drawn at random, no one within ``gap`` of
another's last sighting, and each last sighting shorter than ``gap``, so any frame of it lies nearest its
option; the asked name is one of the four drawn together. Each key frame's mission time (since the
mission's first frame) must be in the prompt: the oracle reads the place line of the last key frame that
lists the name (:mod:`embodied_r_ros.memory.mission_time`) and picks the option nearest to it; it abstains
when the name is never listed or that frame has no time.
"""

from __future__ import annotations

import itertools
import re

from embodied_r_ros.memory.mission_time import clock_seconds, mission_clock
from embodied_r_ros.reasoning.options import OPTION_LETTERS

from ..task import Answer, QuestionTask, Template, Unanswerable
from .context import Evidence, MissionContext, MissionDraft, format_mission_time
from .reading import MissionReading, last_listed

NAME = "mission_last_seen"
TEMPLATE = Template("How far into the mission (minutes:seconds) did I last see the {}?")


def generate(m: MissionContext) -> list[MissionDraft]:
    """Random sets of four names whose last sightings are short and far apart; any name of a set may be
    asked (its options in chronological order, the correct one at ``rank``)."""
    count = m.counts[NAME]
    last = {name: max(s, key=lambda v: (v.t1, v.object_id)) for name, s in m.by_name.items()}
    sets: list[tuple[str, ...]] = []
    tried: set[tuple[str, ...]] = set()
    for _ in range(m.config.draws if len(m.names) >= 4 else 0):
        four = tuple(sorted(m.names[i] for i in m.rng.choice(len(m.names), size=4, replace=False)))
        if four in tried:
            continue
        tried.add(four)
        count.candidates += 1
        if any(last[n].t1 - last[n].t0 >= m.gap_s for n in four):
            count.drop("last_sighting_too_long")
        elif not all(
            last[j].t1 > last[i].t1 + m.gap_s or last[j].t1 < last[i].t0 - m.gap_s
            for i, j in itertools.permutations(four, 2)
        ):
            count.drop("options_too_close")
        else:
            sets.append(tuple(sorted(four, key=lambda n: last[n].t1)))
    count.usable = len(sets)
    drafts = []
    for four in sets:
        options = tuple(format_mission_time(last[n].t1) for n in four)
        for rank, name in enumerate(four):  # any name of the set may be asked: the letter balancer picks
            sighting = last[name]
            rooms = {s.room for s in m.by_name[name]}
            evidence = Evidence((m.stamps(sighting),), (sighting.object_id,), {"recurring": len(rooms) > 1})
            text = TEMPLATE.format(name)
            correct, objects = options[rank], evidence.objects
            drafts.append(MissionDraft(NAME, text, correct, objects, evidence, options=options, rank=rank))
    return drafts


def solve(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    """The mission time of the last key frame listing the name; the option nearest to it."""
    name = match.group(1)
    frame, place = last_listed(reading, name)
    if place is None:
        raise Unanswerable(f"frame {frame}, the last to describe the {name}, has no mission time")
    times = [clock_seconds(option) for option in reading.options]
    if not reading.options or None in times:
        raise Unanswerable("the options are not mission times (m:ss)")
    nearest = min(range(len(times)), key=lambda i: abs((times[i] or 0) - place.seconds))
    clock = mission_clock(place.seconds)
    letter = OPTION_LETTERS[nearest]
    text = (
        f"The {name} is last described in frame {frame}, {clock} into the mission; the nearest option is "
        f"{reading.options[nearest]}, option {letter}."
    )
    return text, letter


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
