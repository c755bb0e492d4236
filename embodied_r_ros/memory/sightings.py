"""Every sighting the memory holds, by name and place: what counting and "when did I last see X" need.

A memory search by similarity (:mod:`.search`) finds the key frames whose descriptions resemble a question,
the best ``k`` of them. That serves "where did I see the red backpack?", but not a count over an hour ("how
many chairs did I see?": every chair, not the 32 most chair-like frames) nor "the last time I saw X" (one
sighting among many alike: similarity cannot tell which is last). This module reads the objects named in
the memory's question-agnostic descriptions (:mod:`.describer` writes one per key frame) into *sightings*:
a name, the stamp, and where the object stood in the odometry frame (the key frame's pose, plus the
object's direction and distance as the description gives them). Sightings of one name at one place are
one *identity* (an object seen again on a revisit), sightings of one name far apart are two ("the red chair"
of room 3 and the one of room 12), and so are two of one name in one key frame (two red chairs side by
side). :func:`sighting_answer` turns a question into the key frames to answer it from, in time order: one
per identity for a count, each identity's last (or first) sighting for "last" ("first"); other questions go
to the similarity search. A count over hours holds more objects than any prompt holds key frames (96 chairs
against 32 frames), so a count question also gets the memory's tally (:func:`tally`: "From every sighting
in my memory: 12 red chairs and 9 blue chairs, 21 in all."), which :func:`add_summary` puts after the
first observation the reasoner reads; a node of several cameras tallies their sightings together
(:func:`merged_tally`).

Descriptions are read in the form the ground-truth perceiver writes and the VLM prompt asks for
(``<colour> <thing> <direction>, <near|far>, <distance> m`` items after "I see"); a VLM that writes free
prose gives fewer sightings (what cannot be read is left out, never guessed). Without a pose (no odometry)
or a distance, sightings of one name are one identity: the place cannot tell them apart.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from ..frames import Pose
from ..perception import Description
from ..poses.ego_motion import heading
from .reader import MemoryReader
from .records import SearchHit
from .words import words

SAME_OBJECT_M = 4.0  # sightings of one name closer than this (object positions) are one identity
# The horizontal bearing each direction word stands for (degrees, left positive): the middle of the ranges
# the ground-truth perceiver uses (ahead < 8, ahead-left/right < 22, left/right beyond).
BEARINGS_DEG = {"ahead": 0.0, "ahead-left": 15.0, "ahead-right": -15.0, "left": 30.0, "right": -30.0}
_ITEM = re.compile(
    r"^(?P<name>[a-z][a-z -]*?)\s+(?P<direction>ahead-left|ahead-right|ahead|left|right)"
    r"(?:\s+(?:below|above))?\s*,\s*(?:near|far)\s*,\s*(?P<distance>\d+(?:\.\d+)?)\s*m\b"
)
_LISTING = re.compile(r"(?:^|[.:]\s*)(?:I see|First seen:)\s+(?P<items>[^.]*(?:\.\d[^.]*)*)", re.IGNORECASE)
# "how many chairs", not "how many times" (passes, not objects) nor a number of units
_COUNT = re.compile(
    r"\bhow many\b(?!\s+(?:times|seconds|minutes|hours|metres|meters|steps)\b)", re.IGNORECASE
)
# What a count asks about: the words after "how many (different)" up to its verb
_COUNTED = re.compile(
    r"\bhow many\s+(?:different\s+)?(?P<things>.+?)\s+(?:did|do|have|has|are|were|was|is|can)\b",
    re.IGNORECASE,
)
_LAST = re.compile(r"\b(?:last|most recently|latest)\b", re.IGNORECASE)
_FIRST = re.compile(r"\b(?:first|earliest)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Mention:
    """One object a description names: its name ("red chair"), horizontal bearing off the camera's axis
    (degrees, left positive) and distance (metres)."""

    name: str
    bearing_deg: float
    distance_m: float


@dataclass(frozen=True)
class Sighting:
    """One object named at one key frame; ``position`` where it stood in the odometry frame (x, y; None
    without the key frame's pose); ``camera``: whose key frame, where a node's cameras are tallied together
    (:func:`merged_tally`; a key frame is its camera and its stamp)."""

    stamp_ns: int
    name: str
    position: tuple[float, float] | None
    distance_m: float
    camera: str = ""


@dataclass
class Identity:
    """One object: its sightings (time order) under one name at one place."""

    name: str
    sightings: list[Sighting] = field(default_factory=list)

    @property
    def first_ns(self) -> int:
        return self.sightings[0].stamp_ns

    @property
    def last_ns(self) -> int:
        return self.sightings[-1].stamp_ns

    @property
    def position(self) -> tuple[float, float] | None:
        """The mean of its sightings' positions (None when none has one)."""
        placed = [s.position for s in self.sightings if s.position is not None]
        if not placed:
            return None
        return (sum(p[0] for p in placed) / len(placed), sum(p[1] for p in placed) / len(placed))

    def clearest(self) -> Sighting:
        """Its sighting from nearest by (the key frame that shows it best)."""
        return min(self.sightings, key=lambda s: (s.distance_m, s.stamp_ns))


def mentions(text: str) -> list[Mention]:
    """The objects ``text`` lists after "I see" (or "First seen:"), each ``<name> <direction>, <near|far>,
    <distance> m``; what does not read so is left out."""
    found = []
    for listing in _LISTING.finditer(text):
        for item in listing.group("items").split(";"):
            match = _ITEM.match(item.strip().lower())
            if match:
                name = " ".join(match.group("name").split())
                bearing = BEARINGS_DEG[match.group("direction")]
                found.append(Mention(name, bearing, float(match.group("distance"))))
    return found


def place(mention: Mention, pose: Pose | None) -> tuple[float, float] | None:
    """Where ``mention``'s object stood in the odometry frame, seen from ``pose`` (None without one)."""
    if pose is None:
        return None
    return place_from(mention, pose.position[0], pose.position[1], heading(pose))


def place_from(mention: Mention, x: float, y: float, heading_rad: float) -> tuple[float, float]:
    """Where ``mention``'s object stood in the odometry frame, seen from (``x``, ``y``) facing
    ``heading_rad`` (radians from +x towards +y)."""
    angle = heading_rad + math.radians(mention.bearing_deg)
    return (x + mention.distance_m * math.cos(angle), y + mention.distance_m * math.sin(angle))


def identities(sightings: Iterable[Sighting], same_m: float = SAME_OBJECT_M) -> list[Identity]:
    """``sightings`` as identities: per name, in time order, each sighting joins the identity of that name
    whose position is nearest when it is within ``same_m`` metres, else starts one; sightings without a
    position join their name's one identity. An identity that holds a sighting of the same key frame (its
    camera and stamp) is never joined: two red chairs in one view are two chairs. In order of first
    sighting."""
    by_name: dict[str, list[Identity]] = {}
    # In time order, a key frame's sightings one after another: an identity that holds one of them holds
    # it last.
    for sighting in sorted(sightings, key=lambda s: (s.stamp_ns, s.camera)):
        known = by_name.setdefault(sighting.name, [])
        best, best_m = None, math.inf
        for identity in known:
            seen = identity.sightings[-1]
            if (seen.stamp_ns, seen.camera) == (sighting.stamp_ns, sighting.camera):
                continue
            where = identity.position
            if sighting.position is None or where is None:
                gap = 0.0 if sighting.position is None and where is None else math.inf
            else:
                gap = math.dist(sighting.position, where)
            if gap < best_m:
                best, best_m = identity, gap
        if best is not None and best_m <= same_m:
            best.sightings.append(sighting)
        else:
            known.append(Identity(sighting.name, [sighting]))
    return sorted((i for group in by_name.values() for i in group), key=lambda i: i.first_ns)


class SightingIndex:
    """The sightings of a memory's question-agnostic descriptions (one timeline), kept up to date by
    :meth:`add` (each description once, by its stamp)."""

    def __init__(self, timeline: int = 0) -> None:
        self.timeline = timeline
        self.last_id = 0  # the last description row read (:func:`catch_up`)
        self._sightings: list[Sighting] = []
        self._seen: set[int] = set()

    def __len__(self) -> int:
        return len(self._sightings)

    def add(self, stamp_ns: int, text: str, pose: Pose | None) -> None:
        """The sightings of one key frame's description (a stamp read before is skipped: a key frame
        described again would count its objects twice)."""
        if stamp_ns in self._seen:
            return
        self._seen.add(stamp_ns)
        for mention in mentions(text):
            self._sightings.append(Sighting(stamp_ns, mention.name, place(mention, pose), mention.distance_m))

    def holds(self, stamp_ns: int) -> bool:
        """Whether a description stamped ``stamp_ns`` was read into the index already."""
        return stamp_ns in self._seen

    def names(self) -> set[str]:
        return {s.name for s in self._sightings}

    def between(self, start_ns: int, end_ns: int, names: set[str]) -> list[Sighting]:
        """The sightings of ``names`` stamped in [start_ns, end_ns], in time order."""
        chosen = [s for s in self._sightings if s.name in names and start_ns <= s.stamp_ns <= end_ns]
        return sorted(chosen, key=lambda s: s.stamp_ns)


def catch_up(index: SightingIndex | None, memory: MemoryReader, max_gap_s: float) -> SightingIndex:
    """``index`` with the question-agnostic descriptions ``memory`` wrote since it was last read, each
    placed with the pose stored at its stamp (``max_gap_s``: the farthest a pose sample may be); a new
    index, read from the memory's first row, when there was none, when the memory's timeline changed (a bag
    played again) or when its description rows end before the last one read (it was cleared: its row ids
    start again, and rows read before are another memory's)."""
    if index is not None and memory.last_description_id() < index.last_id:
        index = None
    while True:
        timeline, rows = memory.agnostic_descriptions(index.last_id if index is not None else 0)
        if index is not None and index.timeline != timeline:
            index = None
            continue  # read the new timeline from its first row
        if index is None:
            index = SightingIndex(timeline)
        if not rows:
            return index
        for row_id, stamp, text in rows:
            if not index.holds(stamp):  # a key frame described again: no pose lookup for a skipped row
                index.add(stamp, text, memory.pose_at(stamp, max_gap_s))
            index.last_id = row_id


def named_in(question: str, names: Iterable[str]) -> set[str]:
    """The names the question (with its options) names: a whole name ("red chair", "red chairs"), else
    every name of a thing it names alone ("chairs", "how many lamps": every "<colour> chair"); words are
    compared by their :func:`~.words.stem` ("bookshelves" names "black bookshelf")."""
    text = " " + " ".join(words(question)) + " "
    keys = {name: " ".join(words(name)) for name in set(names)}
    whole = {name for name, key in keys.items() if key and f" {key} " in text}
    if whole:
        # a name inside a longer one ("lamp" in "lamp post") is not asked about when the longer is
        return {n for n in whole if not any(n != m and f" {keys[n]} " in f" {keys[m]} " for m in whole)}
    return {name for name, key in keys.items() if key and f" {key.split()[-1]} " in text}


SUMMARY_START = "From every sighting in my memory: "


@dataclass(frozen=True)
class SightingAnswer:
    """What the sightings give one question (:func:`sighting_answer`): ``hits``, the key frames to answer it
    from (in time order; None when the sightings do not serve it); for a count, ``summary``, the memory's
    tally (:func:`tally`; "" without one), and ``counted``, the sightings it counted (a node's cameras
    tally theirs together: :func:`merged_tally`)."""

    hits: list[SearchHit] | None = None
    summary: str = ""
    counted: tuple[Sighting, ...] = ()


def sighting_answer(
    index: SightingIndex,
    question: str,
    options: Sequence[str],
    start_ns: int,
    end_ns: int,
    k: int,
    same_m: float = SAME_OBJECT_M,
    text_of: Callable[[int], str] = lambda stamp: "",
) -> SightingAnswer:
    """The key frames (as hits, in time order) to answer a question about the things it names from their
    sightings in [start_ns, end_ns], and for a count the memory's tally; no hits when the sightings do not
    serve it (it names nothing they hold, or asks neither a count, nor a last, nor a first sighting: the
    similarity search answers it):

    * "how many ...": one key frame per identity of the things counted (the words after "how many", see
      :data:`_COUNTED`; its clearest sighting), at most ``k``, and the tally of every identity;
    * "... last ...": each identity's last sighting, and the one before it, the latest first when more
      than ``k``;
    * "... first ...": each identity's first sighting, and the one after it, the earliest first.
    """
    count, last, first = (bool(p.search(question)) for p in (_COUNT, _LAST, _FIRST))
    if not (count or last or first):
        return SightingAnswer()
    if count:  # "how many chairs did I see near the red table": chairs only
        counted = _COUNTED.search(question)
        asked = counted.group("things") if counted else question
    else:  # the options name the things too ("which did I see first: ...")
        asked = " ".join([question, *options])
    names = named_in(asked, index.names())
    chosen = index.between(start_ns, end_ns, names) if names else []
    found = identities(chosen, same_m)
    if not found:
        return SightingAnswer()
    if count:
        stamps = [i.clearest().stamp_ns for i in found][:k]
    elif last:
        ends = sorted(found, key=lambda i: -i.last_ns)
        stamps = [s.stamp_ns for i in ends for s in i.sightings[-2:][::-1]][:k]
    else:
        starts = sorted(found, key=lambda i: i.first_ns)
        stamps = [s.stamp_ns for i in starts for s in i.sightings[:2]][:k]
    hits = [SearchHit(stamp, 1.0, text_of(stamp)) for stamp in sorted(set(stamps))]
    if not count:
        return SightingAnswer(hits)
    return SightingAnswer(hits, tally(found), tuple(chosen))


def tally(found: Sequence[Identity]) -> str:
    """The identities counted, in words: "From every sighting in my memory: 12 red chairs and 9 blue
    chairs, 21 in all." (most first); "" when there are none, or none has a place (without places alike
    objects cannot be told apart: no tally rather than a wrong one)."""
    if not found or all(i.position is None for i in found):
        return ""
    counts: dict[str, int] = {}
    for identity in found:
        counts[identity.name] = counts.get(identity.name, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))  # the most first
    parts = [f"{n} {_plural(name) if n != 1 else name}" for name, n in ranked]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{SUMMARY_START}{listed}, {len(found)} in all."


def merged_tally(counted: Mapping[str, Sequence[Sighting]], same_m: float = SAME_OBJECT_M) -> str:
    """One tally over the sightings several cameras counted (each camera's :attr:`SightingAnswer.counted`,
    by camera name): a node's cameras share one pose source, so their sightings are placed in one odometry
    frame and merge into one set of identities; an object two cameras saw counts once, two alike objects in
    one key frame of one camera count twice. (Each camera's directions are read as if it looked along the
    shared pose's x axis, the body's: a camera mounted looking elsewhere places its objects turned by its
    mounting angle, and one object it shares with another camera may then count twice.)"""
    pooled = [dataclasses.replace(s, camera=camera) for camera, group in counted.items() for s in group]
    return tally(identities(pooled, same_m))


def add_summary(descriptions: Sequence[Description], summary: str) -> list[Description]:
    """``descriptions`` with ``summary`` (:func:`tally`) after the first observation (unchanged without a
    summary or descriptions)."""
    described = list(descriptions)
    if summary and described:
        first = described[0]
        described[0] = dataclasses.replace(first, observation=f"{first.observation.rstrip()} {summary}")
    return described


def _plural(name: str) -> str:
    """A name's plural as a person writes it ("red chair" -> "red chairs", "grey bench" -> "grey benches",
    "black bookshelf" -> "black bookshelves"); :func:`~.words.stem` reads it back as the name."""
    if name.endswith("lf"):
        return name[:-1] + "ves"
    if name.endswith(("s", "x", "z", "ch", "sh")):
        return name + "es"
    if name.endswith("y") and not name.endswith(("ay", "ey", "oy", "uy")):
        return name[:-1] + "ies"
    return name + "s"
