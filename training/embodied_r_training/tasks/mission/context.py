"""What a mission task's generator reads and writes: the mission's names and their sightings
(:class:`MissionContext`), the questions before their options are placed (:class:`MissionDraft`) with the
intervals that hold their evidence, and the counts of candidates kept and dropped (:class:`KindCount`)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from embodied_r_ros.memory.mission_time import mission_clock

from ...synth.mission import MissionPlan, mission_objects
from ...synth.mission_sightings import MissionSightings

TIME_STEP_S = 10  # last_seen options are mission times to this many seconds


@dataclass(frozen=True)
class MissionQuestionConfig:
    """How many questions per kind and the rules that keep their answers unambiguous (see the module)."""

    per_kind: int = 5
    far_share: float = 0.2  # first_seen, route: the two sightings at least this share of the mission apart
    min_far_s: float = 30.0  # ... and at least this many seconds
    gap_share: float = 0.08  # last_seen: options at least this share of the mission apart
    min_gap_s: float = 20.0  # ... and at least this many seconds
    min_route_m: float = 3.0
    draws: int = 4000  # random sets of four names tried for last_seen

    def __post_init__(self) -> None:
        if self.per_kind < 1:
            raise ValueError(f"per_kind must be >= 1, got {self.per_kind}")
        if not (0 <= self.far_share < 1 and 0 <= self.gap_share < 0.34):
            raise ValueError(f"far_share must be in [0, 1) and gap_share in [0, 0.34), got {self}")


@dataclass
class KindCount:
    """One kind's candidates (name pairs, categories or sets of four names considered), those a rule
    dropped (per rule), those usable (candidates = usable + dropped), and the questions kept."""

    candidates: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    usable: int = 0
    kept: int = 0

    def drop(self, rule: str) -> None:
        """Count one candidate dropped by ``rule``."""
        self.dropped[rule] = self.dropped.get(rule, 0) + 1

    def to_dict(self) -> dict:
        """Plain data for mission.json."""
        return {
            "candidates": self.candidates,
            "dropped": dict(sorted(self.dropped.items())),
            "usable": self.usable,
            "kept": self.kept,
        }


@dataclass(frozen=True)
class Evidence:
    """Where a question's answer lies: intervals of bag stamps (ns) and the mission object each shows,
    plus facts for the evaluation (``notes``: e.g. route's spread_m, last_seen's recurring)."""

    intervals_ns: tuple[tuple[int, int], ...]
    objects: tuple[int, ...]
    notes: dict = field(default_factory=dict)

    def to_dict(self, task: str) -> dict:
        """Plain data for mission.json (keyed there by question id)."""
        return {
            "task": task,
            "evidence": [list(i) for i in self.intervals_ns],
            "evidence_objects": list(self.objects),
            **self.notes,
        }


@dataclass(frozen=True)
class MissionDraft:
    """A question before its options are placed: numeric (no options), mc with ``distractors`` (the correct
    option goes where the letter balancer says) or mc with ``options`` in a fixed order (the correct one at
    ``rank``). ``window_s``: the part of the mission it asks about (seconds from the start, both ends
    included), None for the whole mission."""

    task: str
    text: str
    correct: str | float | int
    objects: tuple[int, ...]
    evidence: Evidence
    unit: str = ""
    distractors: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    rank: int = 0
    window_s: tuple[float, float] | None = None


@dataclass(frozen=True)
class NameSighting:
    """One sighting of a name: seconds from the mission start, the object and its room."""

    t0: float
    t1: float
    object_id: int
    room: int


def format_mission_time(seconds: float) -> str:
    """Mission time as options show it: "m:ss", to :data:`TIME_STEP_S` seconds."""
    return mission_clock(round(seconds / TIME_STEP_S) * TIME_STEP_S)


class MissionContext:
    """What the kinds share: names, their sightings, rooms, the mission's timing, the random stream and
    each kind's :class:`KindCount` (``counts``, by task name)."""

    def __init__(
        self,
        plan: MissionPlan,
        sightings: MissionSightings,
        config: MissionQuestionConfig,
        end_s: float,
        rng: np.random.Generator,
        counts: dict[str, KindCount],
    ) -> None:
        self.plan, self.sightings, self.config, self.end_s = plan, sightings, config, end_s
        self.rng, self.counts = rng, counts
        self.objects = {oid: (room, obj) for oid, room, obj in mission_objects(plan)}
        by_name: dict[str, list[NameSighting]] = defaultdict(list)
        faint: dict[str, float] = {}
        for oid, (room, obj) in self.objects.items():
            for t0, t1 in sightings.sightings[oid]:
                by_name[obj.name].append(NameSighting(t0, t1, oid, room))
            for t0, _ in sightings.faint[oid][:1]:
                faint[obj.name] = min(faint.get(obj.name, np.inf), t0)
        self.by_name = {
            name: sorted(s, key=lambda v: (v.t0, v.object_id)) for name, s in sorted(by_name.items())
        }
        self.faint_first = faint
        self.names = list(self.by_name)
        self.far_s = max(config.min_far_s, config.far_share * end_s)
        self.gap_s = max(config.min_gap_s, config.gap_share * end_s)

    def stamps(self, sighting: NameSighting) -> tuple[int, int]:
        """The sighting's interval in bag stamps (ns)."""
        config = self.plan.config
        return config.stamp_ns(sighting.t0), config.stamp_ns(sighting.t1)

    def far_pairs(self, count: KindCount) -> list[tuple[str, str]]:
        """Name pairs (earlier, later) first seen in different rooms and far apart (counted in ``count``)."""
        pairs = []
        for a, b in itertools.combinations(self.names, 2):
            count.candidates += 1
            x, y = sorted((a, b), key=lambda n: (self.by_name[n][0].t0, n))
            first_x, first_y = self.by_name[x][0], self.by_name[y][0]
            if first_x.room == first_y.room:
                count.drop("same_room")
            elif self.faint_first[y] - first_x.t1 < self.far_s:
                count.drop("not_far_apart")
            else:
                pairs.append((x, y))
        count.usable = len(pairs)
        return pairs
