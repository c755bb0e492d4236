"""mission_count (numeric): "How many different <category> did I see ...?", over the whole mission or a part
of it ("in the first 30 minutes", "in the last 60 minutes", "between minute 30 and minute 90" of a 2-hour
mission: the question's window is that part, so a node is asked it with that window).

The truth: the objects of that category in view at least once in the window (revisits count once, two
objects with one name twice). Only categories seen in two or more rooms in the window and with no barely
visible member are asked about, and no window whose edge cuts a sighting (within :data:`EDGE_S`: whether
the key frames of that sighting fall inside is a matter of sampling).

The prompt must carry each frame's position in one mission frame (odometry x, y) and where the objects are
from it, so a revisit's chair can be told from a second chair of one name: the oracle puts
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
TEMPLATE = Template(
    "How many different {} did I see over the whole mission?",
    "How many different {} did I see in the first {} minutes of the mission?",
    "How many different {} did I see in the last {} minutes of the mission?",
    "How many different {} did I see between minute {} and minute {} of the mission?",
    "How many different {} did I see in the first minute of the mission?",
    "How many different {} did I see in the last minute of the mission?",
)
SAME_OBJECT_M = 4.0  # listings of one name closer than this on the dead-reckoned map are one object
EDGE_S = 5.0  # a window's edge this close to a sighting of the category leaves the count to chance
WHOLE, FIRST, LAST, BETWEEN, FIRST_MINUTE, LAST_MINUTE = range(6)  # the template's variants


@dataclass(frozen=True)
class CountWindow:
    """A part of the mission a count asks about: seconds from the start (both included), the template's
    variant and the minutes its text names; ``whole`` for the whole mission."""

    start_s: float
    end_s: float
    variant: int
    minutes: tuple[int, ...] = ()

    @property
    def whole(self) -> bool:
        return self.variant == WHOLE


def count_windows(end_s: float) -> list[CountWindow]:
    """The whole mission, its first and last quarter and half, and the middle half, in whole minutes (a part
    of no whole minute, or as long as the mission, is left out)."""
    minutes = end_s / 60
    windows = [CountWindow(0.0, end_s, WHOLE)]
    for n in sorted({round(minutes * 0.25), round(minutes * 0.5)}):
        if 1 <= n < minutes:
            first, last = (FIRST, LAST) if n > 1 else (FIRST_MINUTE, LAST_MINUTE)
            shown = (n,) if n > 1 else ()
            windows.append(CountWindow(0.0, n * 60.0, first, shown))
            windows.append(CountWindow(end_s - n * 60.0, end_s, last, shown))
    a, b = round(minutes * 0.25), round(minutes * 0.75)
    if a >= 1 and b - a >= 2 and b < minutes:
        windows.append(CountWindow(a * 60.0, b * 60.0, BETWEEN, (a, b)))
    return windows


def _within(sightings: list[tuple[float, float]], window: CountWindow) -> list[tuple[float, float]]:
    """The sightings that overlap ``window``."""
    return [(t0, t1) for t0, t1 in sightings if t0 <= window.end_s and t1 >= window.start_s]


def _cuts(window: CountWindow, t0: float, t1: float, end_s: float) -> bool:
    """Whether an edge of ``window`` inside the mission is within :data:`EDGE_S` of the sighting [t0, t1]."""
    edges = [e for e in (window.start_s, window.end_s) if 0.0 < e < end_s]
    return any(t0 - EDGE_S < e < t1 + EDGE_S for e in edges)


def generate(m: MissionContext) -> list[MissionDraft]:
    """One question per category and window (:func:`count_windows`) seen there in two or more rooms, none
    of its members barely visible, no window edge cutting one of its sightings."""
    count = m.counts[NAME]
    drafts = []
    categories = sorted({obj.category for _, obj in m.objects.values()})
    windows = count_windows(m.end_s)
    for category in categories:
        members = [oid for oid, (_, obj) in m.objects.items() if obj.category == category]
        if not any(m.sightings.seen(oid) for oid in members):
            continue  # never seen: nothing to ask
        barely = any(m.sightings.barely_seen(oid) for oid in members)
        sightings = [sighting for oid in members for sighting in m.sightings.sightings[oid]]
        for window in windows:
            inside = {oid: _within(m.sightings.sightings[oid], window) for oid in members}
            seen = [oid for oid in members if inside[oid]]
            if not seen:
                continue  # nothing of it in this part
            count.candidates += 1
            if barely:
                count.drop("barely_visible_member")
            elif any(_cuts(window, t0, t1, m.end_s) for t0, t1 in sightings):
                count.drop("window_edge_cuts_a_sighting")
            elif len({m.objects[oid][0] for oid in seen}) < 2:
                count.drop("one_room")
            else:
                drafts.append(_draft(m, category, window, seen, inside))
    count.usable = len(drafts)
    return drafts


def _draft(
    m: MissionContext,
    category: str,
    window: CountWindow,
    seen: list[int],
    inside: dict[int, list[tuple[float, float]]],
) -> MissionDraft:
    intervals, shown = [], []
    for oid in seen:
        room = m.objects[oid][0]
        for t0, t1 in inside[oid]:
            start, end = max(t0, window.start_s), min(t1, window.end_s)
            intervals.append(m.stamps(NameSighting(start, end, oid, room)))
            shown.append(oid)
    text = TEMPLATE.format(plural(category), *map(str, window.minutes), variant=window.variant)
    evidence = Evidence(tuple(intervals), tuple(shown), {"category": category, "whole": window.whole})
    part = None if window.whole else (window.start_s, window.end_s)
    return MissionDraft(NAME, text, len(seen), tuple(seen), evidence, unit="count", window_s=part)


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
