"""mission_count (numeric): "How many different <category> did I see ...?".

The truth: the objects of that category in view at least once over the mission (revisits count once, two
objects with one name twice). Only categories seen in two or more rooms and with no barely visible member
are asked about. The prompt must carry each frame's position in one mission frame (odometry x, y) and where
the objects are from it, so a revisit's chair can be told from a second chair of one name: the oracle puts
every listing of the category's names on one map by dead reckoning (:func:`.reading.dead_reckon`; listing
positions are metres from the frame where their run began, "Positions are metres from where I stand");
listings of one name less than :data:`SAME_OBJECT_M` apart are one object. It abstains when a listing has
no position, or listings of several runs need a motion the prompt does not give in metres. A prompt the
node's memory search made carries the memory's own tally of every sighting ("From every sighting in my
memory: ..., 49 in all.": more objects than its key frames can show); the oracle reads that instead.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ...synth.world import plural
from ..task import Answer, QuestionTask, Template, Unanswerable
from .context import Evidence, MissionContext, MissionDraft, NameSighting
from .reading import MissionReading, poses

NAME = "mission_count"
TEMPLATE = Template("How many different {} did I see over the whole mission?")
SAME_OBJECT_M = 4.0  # listings of one name closer than this on the dead-reckoned map are one object


def generate(m: MissionContext) -> list[MissionDraft]:
    """One question per category seen in two or more rooms, none of its members barely visible."""
    count = m.counts[NAME]
    drafts = []
    categories = sorted({obj.category for _, obj in m.objects.values()})
    for category in categories:
        members = [oid for oid, (_, obj) in m.objects.items() if obj.category == category]
        seen = [oid for oid in members if m.sightings.seen(oid)]
        if not seen:
            continue  # never seen: nothing to ask
        count.candidates += 1
        if any(m.sightings.barely_seen(oid) for oid in members):
            count.drop("barely_visible_member")
            continue
        if len({m.objects[oid][0] for oid in seen}) < 2:
            count.drop("one_room")
            continue
        intervals, shown = [], []
        for oid in seen:
            room = m.objects[oid][0]
            for t0, t1 in m.sightings.sightings[oid]:
                intervals.append(m.stamps(NameSighting(t0, t1, oid, room)))
                shown.append(oid)
        text = TEMPLATE.format(plural(category))
        evidence = Evidence(tuple(intervals), tuple(shown), {"category": category})
        drafts.append(MissionDraft(NAME, text, len(seen), tuple(seen), evidence, unit="count"))
    count.usable = len(drafts)
    return drafts


def _named(category_plural: str, name: str) -> bool:
    """Whether ``name`` ("grey trash can") is of the category whose plural is ``category_plural``."""
    words = name.split(" ")
    return any(plural(" ".join(words[i:])) == category_plural for i in range(len(words)))


@dataclass
class _Object:
    """One object of a count: its name, where its first listing puts it on the map, the frames listing it."""

    name: str
    x: float
    y: float
    frames: list[int]

    def near(self, x: float, y: float) -> bool:
        return math.dist((self.x, self.y), (x, y)) < SAME_OBJECT_M


def solve(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    """The category's listings on one map, those of one name close together counted once."""
    category = match.group(1)
    if reading.memory_count is not None:  # the memory counted every sighting: more than the frames hold
        n = reading.memory_count
        return f"My memory of every sighting counts {n} different {category}. The answer is {n}.", n
    listed = [item for item in reading.listings if _named(category, item.name)]
    if not listed:
        return f"No {category} are described. The answer is 0.", 0
    if any(item.position is None for item in listed):
        missing = next(item for item in listed if item.position is None)
        raise Unanswerable(f"the {missing.name} of frame {missing.frame} has no position")
    runs = sorted({item.run for item in listed})
    origins = dict(zip(runs, poses(reading, runs), strict=True)) if len(runs) > 1 else {}
    objects: list[_Object] = []
    for item in listed:
        ahead, left = item.position[:2] if item.position else (0.0, 0.0)
        origin = origins.get(item.run)
        x, y = origin.place(ahead, left) if origin is not None else (ahead, left)
        same = next((o for o in objects if o.name == item.name and o.near(x, y)), None)
        if same is None:
            objects.append(_Object(item.name, x, y, [item.frame]))
        else:
            same.frames.append(item.frame)
    cited = "; ".join(
        f"the {o.name} at ({o.x:.1f}, {o.y:.1f}) in frame{'s' * (len(o.frames) > 1)} "
        f"{', '.join(map(str, o.frames))}"
        for o in objects
    )
    text = (
        f"On the map of frame 0 (positions carried by my motions), the {category} described are: {cited}. "
        f"Listings of one name less than {SAME_OBJECT_M:g} m apart are one object, so I saw {len(objects)}. "
        f"The answer is {len(objects)}."
    )
    return text, len(objects)


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
