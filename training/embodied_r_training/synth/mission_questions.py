"""Memory questions about a whole mission, with the intervals that hold their evidence.

Every question's window is the whole mission; what it asks about lies in a few far-apart intervals (the
*evidence*: for retrieval recall@k). Objects are named as the ground truth names them ("red chair"); a
name may stand for objects in several rooms (:mod:`.mission` plants such names on purpose), and the
first / last sighting of a name is that of any of its objects.

=================== ======= ==========================================================================
kind                form    ground truth, and what a prompt of retrieved key frames must carry
=================== ======= ==========================================================================
mission_first_seen  mc (2)  "Which did I see first: the X or the Y?": the name whose first sighting is
                            earlier. X and Y are first seen in different rooms, the later one's first
                            (even faint) sighting at least ``far`` seconds after the earlier one's
                            first sighting ends. The prompt must show the frames in time order (or
                            with their mission time).
mission_count       numeric "How many different <category> did I see ...?": the objects of that
                            category in view at least once over the mission (revisits count once, two
                            objects with one name twice). Only categories seen in two or more rooms
                            and with no barely visible member. The prompt must carry each frame's
                            position in one mission frame (odometry x, y) and where the objects are
                            from it, so a revisit's chair can be told from a second chair of one name.
mission_last_seen   mc (4)  "How far into the mission did I last see the X?": options are mission
                            times "m:ss" (to 10 s), the truth the end of the name's last sighting.
                            Each key frame's mission time (since the mission's first frame) must be in
                            the prompt. The options are the last-sighting times of four names drawn at
                            random, no one within ``gap`` of another's last sighting, and each last
                            sighting shorter than ``gap``, so any frame of it lies nearest its option.
mission_route       numeric "How far apart in a straight line ... when I first saw the X and ... the
                            Y?": horizontal metres between the camera's positions at the first frames
                            of the two names' first sightings (far apart, different rooms, >= 3 m).
                            The prompt must carry positions (odometry x, y per frame) or the
                            displacement vector between consecutive frames: path lengths alone do not
                            give a straight-line distance. ``spread_m`` in the evidence says how far
                            the camera moved within either sighting (the answer's tolerance).
=================== ======= ==========================================================================

Options never give the answer away: mission_first_seen's correct letter and mission_last_seen's rank
among its chronologically sorted options are balanced over the mission's questions
(:class:`~.questions._LetterBalancer`), and last_seen's four options are drawn alike (the asked name is one
of four drawn together). Per kind, the candidates, the rules that dropped some and the questions kept are
counted (:class:`KindCount`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from embodied_r_ros.memory.mission_time import mission_clock
from embodied_r_ros.question_file import MC, NUMERIC, Question
from embodied_r_ros.reasoning.options import OPTION_LETTERS

from .mission import MissionPlan, mission_objects
from .mission_sightings import MissionSightings
from .questions import _fmt, _LetterBalancer, plural

KINDS = ("mission_first_seen", "mission_count", "mission_last_seen", "mission_route")
TIME_STEP_S = 10  # last_seen options are mission times to this many seconds
SPREAD_STEP_S = 0.5  # route: the camera's positions within a sighting are sampled this often


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


@dataclass
class MissionQuestions:
    """The questions, their evidence by question id, and the counts per kind."""

    questions: list[Question]
    evidence: dict[str, Evidence]
    counts: dict[str, KindCount]


@dataclass(frozen=True)
class _Sighting:
    """One sighting of a name: seconds from the mission start, the object and its room."""

    t0: float
    t1: float
    object_id: int
    room: int


@dataclass(frozen=True)
class _Draft:
    """A question before its options are placed: numeric (no options), mc with ``distractors`` (the correct
    option goes where the letter balancer says) or mc with ``options`` in a fixed order (the correct one at
    ``rank``)."""

    task: str
    text: str
    correct: str | float | int
    objects: tuple[int, ...]
    evidence: Evidence
    unit: str = ""
    distractors: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    rank: int = 0


def format_mission_time(seconds: float) -> str:
    """Mission time as options show it: "m:ss", to :data:`TIME_STEP_S` seconds."""
    return mission_clock(round(seconds / TIME_STEP_S) * TIME_STEP_S)


class _Mission:
    """What the kinds share: names, their sightings, rooms, and the mission's timing."""

    def __init__(
        self, plan: MissionPlan, sightings: MissionSightings, config: MissionQuestionConfig, end_s: float
    ) -> None:
        self.plan, self.sightings, self.config, self.end_s = plan, sightings, config, end_s
        self.objects = {oid: (room, obj) for oid, room, obj in mission_objects(plan)}
        by_name: dict[str, list[_Sighting]] = defaultdict(list)
        faint: dict[str, float] = {}
        for oid, (room, obj) in self.objects.items():
            for t0, t1 in sightings.sightings[oid]:
                by_name[obj.name].append(_Sighting(t0, t1, oid, room))
            for t0, _ in sightings.faint[oid][:1]:
                faint[obj.name] = min(faint.get(obj.name, np.inf), t0)
        self.by_name = {
            name: sorted(s, key=lambda v: (v.t0, v.object_id)) for name, s in sorted(by_name.items())
        }
        self.faint_first = faint
        self.names = list(self.by_name)
        self.far_s = max(config.min_far_s, config.far_share * end_s)
        self.gap_s = max(config.min_gap_s, config.gap_share * end_s)

    def stamps(self, sighting: _Sighting) -> tuple[int, int]:
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


def _first_seen(m: _Mission, rng: np.random.Generator, count: KindCount) -> list[_Draft]:
    drafts = []
    for x, y in m.far_pairs(count):
        first_x, first_y = m.by_name[x][0], m.by_name[y][0]
        named = [x, y] if rng.random() < 0.5 else [y, x]  # the text's order says nothing
        text = f"Which did I see first: the {named[0]} or the {named[1]}?"
        evidence = Evidence((m.stamps(first_x), m.stamps(first_y)), (first_x.object_id, first_y.object_id))
        drafts.append(_Draft("mission_first_seen", text, x, evidence.objects, evidence, distractors=(y,)))
    return drafts


def _count(m: _Mission, rng: np.random.Generator, count: KindCount) -> list[_Draft]:
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
                intervals.append(m.stamps(_Sighting(t0, t1, oid, room)))
                shown.append(oid)
        text = f"How many different {plural(category)} did I see over the whole mission?"
        evidence = Evidence(tuple(intervals), tuple(shown), {"category": category})
        drafts.append(_Draft("mission_count", text, len(seen), tuple(seen), evidence, unit="count"))
    count.usable = len(drafts)
    return drafts


def _last_seen(m: _Mission, rng: np.random.Generator, count: KindCount) -> list[_Draft]:
    last = {name: max(s, key=lambda v: (v.t1, v.object_id)) for name, s in m.by_name.items()}
    sets: list[tuple[str, ...]] = []
    tried: set[tuple[str, ...]] = set()
    for _ in range(m.config.draws if len(m.names) >= 4 else 0):
        four = tuple(sorted(m.names[i] for i in rng.choice(len(m.names), size=4, replace=False)))
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
            text = f"How far into the mission (minutes:seconds) did I last see the {name}?"
            drafts.append(
                _Draft(
                    "mission_last_seen",
                    text,
                    options[rank],
                    evidence.objects,
                    evidence,
                    options=options,
                    rank=rank,
                )
            )
    return drafts


def _route(m: _Mission, rng: np.random.Generator, count: KindCount) -> list[_Draft]:
    trajectory = m.plan.trajectory
    # Per name, once (a long mission has ~10^5 pairs): where its first sighting began, and how far the
    # camera moved during it.
    where: dict[str, np.ndarray] = {}
    spread: dict[str, float] = {}
    for name, sightings in m.by_name.items():
        first = sightings[0]
        where[name] = trajectory.position(first.t0)[:2]
        steps = [*np.arange(first.t0, first.t1 + 1e-9, SPREAD_STEP_S), first.t1]
        spread[name] = max(float(np.linalg.norm(trajectory.position(t)[:2] - where[name])) for t in steps)
    drafts = []
    for x, y in m.far_pairs(count):
        first_x, first_y = m.by_name[x][0], m.by_name[y][0]
        metres = float(np.linalg.norm(where[x] - where[y]))
        if metres < m.config.min_route_m:
            count.drop("too_near")
            count.usable -= 1
            continue
        named = [x, y] if rng.random() < 0.5 else [y, x]
        text = (
            f"How far apart in a straight line were the place where I first saw the {named[0]} and the place "
            f"where I first saw the {named[1]}?"
        )
        notes = {"spread_m": round(max(spread[x], spread[y]), 2)}
        evidence = Evidence(
            (m.stamps(first_x), m.stamps(first_y)), (first_x.object_id, first_y.object_id), notes
        )
        drafts.append(_Draft("mission_route", text, round(metres, 2), evidence.objects, evidence, unit="m"))
    return drafts


_KINDS = {
    "mission_first_seen": _first_seen,
    "mission_count": _count,
    "mission_last_seen": _last_seen,
    "mission_route": _route,
}


def generate_mission_questions(
    plan: MissionPlan,
    sightings: MissionSightings,
    rng: np.random.Generator,
    *,
    end_s: float,
    bag: str = "bag",
    mission_id: str = "mission",
    config: MissionQuestionConfig | None = None,
) -> MissionQuestions:
    """Up to ``config.per_kind`` questions of each kind about the mission (frames from 0 to ``end_s``
    seconds); ids ``<mission_id>-NNN``. Candidates are taken in random order, each name asked about at most
    once per kind."""
    config = config or MissionQuestionConfig()
    mission = _Mission(plan, sightings, config, end_s)
    balancer = _LetterBalancer(rng)
    window = dict(
        bag=bag,
        start_s=0.0,
        end_s=round(end_s, 3),
        start_ns=plan.config.stamp_ns(0.0),
        end_ns=plan.config.stamp_ns(end_s),
    )
    questions: list[Question] = []
    evidence: dict[str, Evidence] = {}
    counts = {kind: KindCount() for kind in KINDS}
    for kind in KINDS:
        drafts = _KINDS[kind](mission, rng, counts[kind])
        asked: set[str] = set()
        kept = 0
        for i in rng.permutation(len(drafts)).tolist():
            if kept >= config.per_kind:
                break
            draft = drafts[i]
            names = {mission.objects[o][1].name for o in draft.objects}
            if names & asked:
                continue
            options: tuple[str, ...] = ()
            position = 0
            if draft.options:  # a fixed order: asked only when its rank is the balancer's letter
                position = balancer.position(len(draft.options))
                if position != draft.rank:
                    continue
                options = draft.options
            elif draft.distractors:
                position = balancer.position(len(draft.distractors) + 1)
                rest = list(draft.distractors)
                options = (*rest[:position], str(draft.correct), *rest[position:])
            if options:
                balancer.take(len(options), position)
            question_id = f"{mission_id}-{len(questions):03d}"
            questions.append(_question(draft, options, position, question_id, window))
            evidence[question_id] = draft.evidence
            asked |= names
            kept += 1
        counts[kind].kept = kept
    return MissionQuestions(questions, evidence, counts)


def _question(
    draft: _Draft, options: tuple[str, ...], position: int, question_id: str, window: dict
) -> Question:
    common = dict(id=question_id, task=draft.task, question=draft.text, objects=draft.objects, **window)
    if not options:
        value = draft.correct
        text = str(value) if draft.unit == "count" else _fmt(float(value), draft.unit)
        return Question(form=NUMERIC, answer=value, unit=draft.unit, answer_text=text, **common)
    return Question(
        form=MC, options=options, answer=OPTION_LETTERS[position], answer_text=str(draft.correct), **common
    )
