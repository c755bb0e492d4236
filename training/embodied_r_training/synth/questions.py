"""Spatial questions with ground-truth answers, computed from a world's geometry, the camera trajectory and
what the camera saw.

Tasks (VSI-Bench style, plus the robot's own motion):

==================== ======== ====================================================================
task                 forms    ground truth
==================== ======== ====================================================================
appearance_order     mc       order of first sighting (>= 0.2 % of the image) of 3 objects
relative_direction   mc       standing at A facing B: C's quadrant (front/back x left/right)
relative_distance    mc       which of 3-4 objects has its centre closest to A's centre
object_count         num      objects of one category seen in the window
abs_distance         mc, num  distance between two objects' centres (m)
object_size          mc, num  an object's longest dimension (m)
room_size            mc, num  the room's floor area (m^2, indoor only)
route                mc       the turns between two walk (or flight) legs, from near A to near B
ego_distance         mc, num  distance the camera travelled along its path in the window (m)
ego_turn             mc       net turn over the window (direction and rough angle)
ego_altitude         mc, num  altitude change over the window (outdoor: direction and metres)
==================== ======== ====================================================================

Rules that keep every answer unambiguous: an object never seen in a question's window is never named in
it; horizontal geometry is used for directions; a question is skipped rather than asked when its answer
is near a decision boundary (quadrant boundaries within 15 deg, a runner-up within 15 % of the closest,
appearance times within 0.5 s, a category member that is only barely visible, turn angles near the
labels' limits). Windows that do not span the whole clip start and end on the key-frame candidate grid
(``candidate_fps`` per second from the first frame), so the key frames cover them from end to end.

Rules that keep options from giving the answer away (a reader who sees only the options should do no
better than chance, :mod:`embodied_r_training.eval.baselines`): the correct option's letter is chosen so
that the letters stay balanced over a scene's questions; a numeric answer's rank among its sorted options
is uniform (neighbouring options 25-60 % apart, all inside a plausible range of the task), and so is the
amount's in ego_turn and ego_altitude options, whose directions are drawn at random; among a task's
candidate questions each distinct answer is equally likely to be asked (e.g. the four quadrants); route
distractors are turn sequences drawn as true routes are distributed, not edits of the truth (the one
option a single edit away from all others would be the truth). Counts are asked in numeric form only, as
VSI-Bench does: most categories are seen once, and no set of count options hides that from a blind reader
(one who always picks "1" would be right in most questions).

An optional :class:`QuestionScreen` (``embodied-r synth`` passes one, see :mod:`.answerable`) sees every
question before it is kept and refuses the ones no reader of their prompt could answer; the next candidate
of the task is tried instead.

The questions are :class:`embodied_r_ros.question_file.Question` records; that module reads and writes
their file (``questions.jsonl``).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from embodied_r_ros.config import KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.keyframes import candidate_indices
from embodied_r_ros.question_file import MC, NUMERIC, Question
from embodied_r_ros.reasoning.options import OPTION_LETTERS

from .trajectory import MOVING_KINDS, Trajectory
from .visibility import DEFAULT_MIN_FRACTION, Visibility
from .world import INDOOR, SceneObject, World, random_room

TASKS = (
    "appearance_order",
    "relative_direction",
    "relative_distance",
    "object_count",
    "abs_distance",
    "object_size",
    "room_size",
    "route",
    "ego_distance",
    "ego_turn",
    "ego_altitude",
)
QUADRANTS = ("front-left", "front-right", "back-left", "back-right")
_PLURALS = {"box": "boxes", "bookshelf": "bookshelves"}
# Random draws of objects per task: many are dropped when their key frames miss an object (the screen).
DRAFT_TRIES = 200
# Rooms drawn to stand beside the true one in room_size options; random windows for my-motion questions.
ROOM_DRAWS = 40
TRAVEL_WINDOWS = 40
# True routes' turns, as the walks and flights give them (measured on 1,200 generated scenes: 92 routes).
ROUTE_TURNS = {"turn left": 0.37, "turn right": 0.37, "turn around": 0.26}


# ---------------------------------------------------------------------------------------- ground truth


def object_distance(a: SceneObject, b: SceneObject) -> float:
    """Distance between the two objects' centres (3D, metres)."""
    return float(np.linalg.norm(np.subtract(a.position, b.position)))


def direction_angle(observer: SceneObject, facing: SceneObject, target: SceneObject) -> float:
    """Horizontal angle (degrees, (-180, 180], positive = to the left) of ``target`` seen from ``observer``
    looking at ``facing``."""
    heading = math.atan2(facing.position[1] - observer.position[1], facing.position[0] - observer.position[0])
    bearing = math.atan2(target.position[1] - observer.position[1], target.position[0] - observer.position[0])
    angle = math.degrees(bearing - heading)
    return (angle + 180.0) % 360.0 - 180.0 if angle != 180.0 else 180.0


def quadrant(angle_deg: float) -> str:
    """The quadrant name of a horizontal angle from :func:`direction_angle`."""
    front = abs(angle_deg) < 90.0
    left = angle_deg > 0.0
    return f"{'front' if front else 'back'}-{'left' if left else 'right'}"


def relative_direction(observer: SceneObject, facing: SceneObject, target: SceneObject) -> str:
    """Standing at ``observer`` facing ``facing``: front-left, front-right, back-left or back-right."""
    return quadrant(direction_angle(observer, facing, target))


def closest_object(target: SceneObject, candidates: Sequence[SceneObject]) -> SceneObject:
    """The candidate whose centre is nearest to ``target``'s centre."""
    return min(candidates, key=lambda c: (object_distance(target, c), c.id))


def turn_label(angle_deg: float) -> str | None:
    """ "turn left" / "turn right" (35-145 deg), "turn around" (> 155 deg), "" (straight on, < 15 deg) or
    None when the angle is too near a limit to name."""
    a = abs(angle_deg)
    if a < 15.0:
        return ""
    if 35.0 <= a <= 145.0:
        return "turn left" if angle_deg > 0 else "turn right"
    if a > 155.0:
        return "turn around"
    return None


def route_turns(trajectory: Trajectory, first: int, last: int) -> list[str] | None:
    """The turns made between moving segments ``first`` and ``last`` (indices into the segments), from the
    net heading change between consecutive moving segments; None when one of them cannot be named."""
    moving = [i for i in range(first, last + 1) if trajectory.segments[i].kind in MOVING_KINDS]
    turns = []
    for a, b in itertools.pairwise(moving):
        change = trajectory.yaw_deg(trajectory.segment_bounds[b][0]) - trajectory.yaw_deg(
            trajectory.segment_bounds[a][1]
        )
        label = turn_label(change)
        if label is None:
            return None
        if label:
            turns.append(label)
    return turns


def plural(category: str) -> str:
    """The plural of a category name ("box" -> "boxes")."""
    return _PLURALS.get(category, category + "s")


# ------------------------------------------------------------------------------------------ generation


@dataclass(frozen=True)
class QuestionConfig:
    """How many questions of each task and form per scene, the visibility threshold and the key-frame
    candidate rate (windows start and end on its grid)."""

    per_task: int = 2
    min_fraction: float = DEFAULT_MIN_FRACTION
    forms: tuple[str, ...] = (MC, NUMERIC)
    candidate_fps: float = KeyFrameConfig().candidate_fps

    def __post_init__(self) -> None:
        if self.per_task < 1:
            raise ValueError(f"per_task must be >= 1, got {self.per_task}")
        if not self.candidate_fps > 0:
            raise ValueError(f"candidate_fps must be > 0, got {self.candidate_fps}")
        if not 0 < self.min_fraction < 1:
            raise ValueError(f"min_fraction must be in (0, 1), got {self.min_fraction}")
        unknown = set(self.forms) - {MC, NUMERIC}
        if unknown or not self.forms:
            raise ValueError(f"forms must be a non-empty subset of ({MC!r}, {NUMERIC!r}), got {self.forms}")


@dataclass
class _Draft:
    """A question before its options are ordered: the correct option text (or numeric value) and the
    distractors."""

    task: str
    form: str
    text: str
    window: tuple[float, float]
    correct: str | float | int
    distractors: list[str] = field(default_factory=list)
    unit: str = ""
    objects: tuple[int, ...] = ()


class QuestionScreen(Protocol):
    """Decides which questions are kept (``embodied-r synth``: the ones answerable from their prompt)."""

    def prepare(self, windows_ns: Sequence[tuple[int, int]]) -> None:
        """Called once, before any :meth:`accept`, with every window (bag stamps) a question may have."""
        ...

    def accept(self, question: Question) -> bool:
        """Whether ``question`` is kept."""
        ...


class _Context:
    """What the task generators share: the scene, its seen objects and the numbers of a window."""

    def __init__(
        self,
        world: World,
        trajectory: Trajectory,
        visibility: Visibility,
        end_s: float,
        config: QuestionConfig,
        rng: np.random.Generator,
        start_ns: int = 0,
    ) -> None:
        self.world = world
        self.trajectory = trajectory
        self.visibility = visibility
        self.end_s = end_s
        self.config = config
        self.rng = rng
        self.indoor = world.kind == INDOOR
        self.scale = 1.0 if self.indoor else 8.0  # outdoor distances are about this much larger
        self.seen = [world.object(i) for i in visibility.seen_ids(0.0, end_s, config.min_fraction)]
        stamps = [start_ns + round(float(t) * NS_PER_S) for t in visibility.times_s]
        # The key-frame candidates (and the clip's last frame): windows start and end on them.
        self.grid = visibility.times_s[candidate_indices(stamps, config.candidate_fps)] if stamps else []

    def snap(self, t0: float, t1: float, inward: bool) -> tuple[float, float] | None:
        """[t0, t1] moved onto the candidate grid, inside it (``inward``) or around it; None when nothing
        of two candidates is left."""
        grid = np.asarray(self.grid, dtype=np.float64)
        if len(grid) < 2:
            return None
        if inward:
            lo, hi = grid[grid >= t0 - 1e-9], grid[grid <= t1 + 1e-9]
            a, b = (float(lo[0]) if len(lo) else None), (float(hi[-1]) if len(hi) else None)
        else:
            lo, hi = grid[grid <= t0 + 1e-9], grid[grid >= t1 - 1e-9]
            a = float(lo[-1]) if len(lo) else float(grid[0])
            b = float(hi[0]) if len(hi) else float(grid[-1])
        return (a, b) if a is not None and b is not None and b > a else None

    def the(self, obj: SceneObject) -> str:
        return f"the {obj.name}"

    def sample(self, items: list, k: int) -> list:
        if len(items) <= k:
            return list(items)
        return [items[i] for i in sorted(self.rng.choice(len(items), size=k, replace=False))]


def _fmt(value: float, unit: str) -> str:
    if unit == "m^2":
        return f"{value:.1f} square metres"
    if unit == "count":
        return str(int(value))
    return f"{value:.1f} m" if value < 10 else f"{value:.0f} m"


def _option_value(text: str) -> float:
    return float(text.split()[0])


class _Distractors:
    """Distractors for one task's answers in one scene, drawn from ``pool``: the values the answer takes
    for the scene's objects, pairs, windows (or for random rooms), as displayed (``shown`` rounds as the
    option text does). The truth is then one more draw from the same distribution as its three distractors,
    so no option is likelier than another to be it, and its rank among the sorted options is uniform.

    Options must be at least 20 % apart. Drawing until they are would favour truths that are hard to fit
    (a common value, crowded by its neighbours), so a truth gets options with probability proportional to
    the chance that a random draw fits it (``samples`` draws estimate it); then one of the fitting draws is
    taken. That keeps the joint distribution of the four values exchangeable."""

    def __init__(
        self,
        pool: Sequence[float],
        rng: np.random.Generator,
        shown: Callable[[float], float],
        n: int = 3,
        samples: int = 400,
    ) -> None:
        self.rng, self.shown = rng, shown
        values = np.array([shown(v) for v in pool], dtype=np.float64)
        if len(values) < n:
            self.draws = np.zeros((0, n))
            self.best = 0.0
            return
        self.draws = values[np.argsort(rng.random((samples, len(values))), axis=1)[:, :n]]
        self.best = max(float(self._fits(x).mean()) for x in set(values.tolist()))

    def _fits(self, value: float) -> np.ndarray:
        """Which draws fit with ``value``: all four values positive and at least 20 % apart."""
        rows = np.sort(np.column_stack([np.full(len(self.draws), value), self.draws]), axis=1)
        return (rows[:, 0] > 0) & np.all(rows[:, 1:] >= 1.2 * rows[:, :-1], axis=1)

    def draw(self, value: float) -> list[float] | None:
        """Three distractors for ``value`` (as displayed), or None (no options for it: see the class)."""
        fits = self._fits(self.shown(value)) if len(self.draws) else np.zeros(0, dtype=bool)
        if not fits.any() or self.rng.random() * self.best >= fits.mean():
            return None
        return [float(v) for v in self.draws[self.rng.choice(np.flatnonzero(fits))]]


def _signed_options(
    side: str, opposite: str, values: list[float], text: Callable[[str, float], str], rng: np.random.Generator
) -> list[str]:
    """Distractor texts for a direction-and-amount answer: each of ``values`` with a side at random."""
    return [text(side if rng.random() < 0.5 else opposite, v) for v in values]


def _numeric_drafts(
    ctx: _Context,
    task: str,
    text: str,
    value: float,
    unit: str,
    window: tuple[float, float],
    objects: tuple[int, ...],
    distractors: _Distractors | None,
) -> list[_Draft]:
    """The numeric question and, when ``distractors`` give options for it, the multiple-choice one."""
    drafts = []
    if MC in ctx.config.forms and distractors is not None:
        values = distractors.draw(value)
        if values is not None:
            options = [_fmt(v, unit) for v in values]
            drafts.append(_Draft(task, MC, text, window, _fmt(value, unit), options, "", objects))
    if NUMERIC in ctx.config.forms:
        drafts.append(_Draft(task, NUMERIC, text, window, round(float(value), 3), [], unit, objects))
    return drafts


def _metres_shown(unit: str) -> Callable[[float], float]:
    """How an option in ``unit`` displays a value (for :class:`_Distractors`)."""
    return lambda v: _option_value(_fmt(v, unit))


def _appearance_order(ctx: _Context) -> list[_Draft]:
    vis, cfg, end = ctx.visibility, ctx.config, ctx.end_s
    first = {o.id: vis.first_seen(o.id, 0.0, end, cfg.min_fraction) for o in ctx.seen}
    faint = {o.id: vis.first_seen(o.id, 0.0, end, cfg.min_fraction / 10) for o in ctx.seen}
    drafts = []
    if len(ctx.seen) < 3:
        return drafts
    for _ in range(DRAFT_TRIES):
        trio = ctx.sample(ctx.seen, 3)
        ordered = sorted(trio, key=lambda o: first[o.id])
        # Each must have become (even faintly) visible only after the previous was clearly seen.
        if any(faint[b.id] < first[a.id] + 0.5 for a, b in itertools.pairwise(ordered)):
            continue
        names = [o.name for o in ordered]
        listed = ", ".join(ctx.the(o) for o in trio[:-1]) + f" and {ctx.the(trio[-1])}"
        text = f"In what order do these objects first appear in the video: {listed}?"
        perms = [", ".join(p) for p in itertools.permutations(names) if list(p) != names]
        distractors = [perms[i] for i in ctx.rng.permutation(len(perms))[:3]]
        drafts.append(
            _Draft(
                "appearance_order",
                MC,
                text,
                (0.0, end),
                ", ".join(names),
                distractors,
                objects=tuple(o.id for o in trio),
            )
        )
    return drafts


def _relative_direction(ctx: _Context) -> list[_Draft]:
    drafts = []
    if len(ctx.seen) < 3:
        return drafts
    for _ in range(DRAFT_TRIES):
        a, b, c = ctx.sample(ctx.seen, 3)
        order = ctx.rng.permutation(3)
        a, b, c = ([a, b, c][i] for i in order)
        if object_distance(a, b) < 1.0 * ctx.scale or object_distance(a, c) < 0.8 * ctx.scale:
            continue
        angle = direction_angle(a, b, c)
        if min(abs(angle), abs(abs(angle) - 90.0), abs(abs(angle) - 180.0)) < 15.0:
            continue
        answer = quadrant(angle)
        text = (
            f"If I am standing by {ctx.the(a)} and facing {ctx.the(b)}, is {ctx.the(c)} to my "
            "front-left, front-right, back-left, or back-right?"
        )
        drafts.append(
            _Draft(
                "relative_direction",
                MC,
                text,
                (0.0, ctx.end_s),
                answer,
                [q for q in QUADRANTS if q != answer],
                objects=(a.id, b.id, c.id),
            )
        )
    return drafts


def _relative_distance(ctx: _Context) -> list[_Draft]:
    drafts = []
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
        text = (
            f"Which of these objects is closest to {ctx.the(target)} (measured between their centres): "
            f"{listed}?"
        )
        drafts.append(
            _Draft(
                "relative_distance",
                MC,
                text,
                (0.0, ctx.end_s),
                best.name,
                [c.name for c in candidates if c.id != best.id],
                objects=(target.id, *(c.id for c in candidates)),
            )
        )
    return drafts


def _object_count(ctx: _Context) -> list[_Draft]:
    drafts = []
    vis, cfg, end = ctx.visibility, ctx.config, ctx.end_s
    for category in sorted({o.category for o in ctx.seen}):
        members = [o for o in ctx.world.objects if o.category == category]
        fractions = [vis.max_fraction(o.id, 0.0, end) for o in members]
        if any(cfg.min_fraction / 10 <= f < cfg.min_fraction for f in fractions):
            continue  # a barely visible member: would a viewer count it?
        count = sum(f >= cfg.min_fraction for f in fractions)
        text = f"How many {plural(category)} appear in this video?"
        seen_ids = tuple(o.id for o, f in zip(members, fractions, strict=True) if f >= cfg.min_fraction)
        if NUMERIC in cfg.forms:  # numeric only, as in VSI-Bench (see the module docstring)
            drafts.append(_Draft("object_count", NUMERIC, text, (0.0, end), count, [], "count", seen_ids))
    return drafts


def _abs_distance(ctx: _Context) -> list[_Draft]:
    drafts = []
    pairs = [
        (a, b) for a, b in itertools.combinations(ctx.seen, 2) if object_distance(a, b) >= 0.5 * ctx.scale
    ]
    distractors = _Distractors([object_distance(a, b) for a, b in pairs], ctx.rng, _metres_shown("m"))
    for a, b in pairs:
        text = f"What is the distance between the centres of {ctx.the(a)} and {ctx.the(b)}, in metres?"
        distance = object_distance(a, b)
        drafts += _numeric_drafts(
            ctx, "abs_distance", text, distance, "m", (0.0, ctx.end_s), (a.id, b.id), distractors
        )
    return drafts


def _object_size(ctx: _Context) -> list[_Draft]:
    drafts = []
    distractors = _Distractors([o.longest_dimension for o in ctx.seen], ctx.rng, _metres_shown("m"))
    for obj in ctx.seen:
        text = f"What is the longest dimension (length, width or height) of {ctx.the(obj)}, in metres?"
        drafts += _numeric_drafts(
            ctx, "object_size", text, obj.longest_dimension, "m", (0.0, ctx.end_s), (obj.id,), distractors
        )
    return drafts


def _room_size(ctx: _Context) -> list[_Draft]:
    if ctx.world.room is None:
        return []
    text = "What is the floor area of this room, in square metres?"
    rooms = [random_room(ctx.rng).floor_area for _ in range(ROOM_DRAWS)]
    distractors = _Distractors(rooms, ctx.rng, _metres_shown("m^2"))
    area = ctx.world.room.floor_area
    return _numeric_drafts(ctx, "room_size", text, area, "m^2", (0.0, ctx.end_s), (), distractors)


def _near_object(ctx: _Context, point: np.ndarray, t0: float, t1: float) -> SceneObject | None:
    """The seen object clearly nearest (horizontally) to ``point``, within reach of it, or None."""
    seen = {o.id for o in ctx.seen}
    ranked = sorted(
        (float(o.footprint_distance(point[0], point[1])), o.id) for o in ctx.world.objects if o.id in seen
    )
    if not ranked or ranked[0][0] > 1.5 * ctx.scale:
        return None
    if len(ranked) > 1 and ranked[1][0] - ranked[0][0] < 0.5 * ctx.scale:
        return None
    obj = ctx.world.object(ranked[0][1])
    return obj if ctx.visibility.first_seen(obj.id, t0, t1, ctx.config.min_fraction) is not None else None


def _route(ctx: _Context) -> list[_Draft]:
    traj = ctx.trajectory
    moving = [i for i, s in enumerate(traj.segments) if s.kind in MOVING_KINDS]
    verb = "walked" if ctx.indoor else "flew"
    drafts = []
    inside = {i for i, _ in traj.segments_in(0.0, ctx.end_s)}
    for a, b in itertools.combinations([i for i in moving if i in inside], 2):
        turns = route_turns(traj, a, b)
        if not turns or len(turns) > 3:
            continue
        window = ctx.snap(traj.segment_bounds[a][0], traj.segment_bounds[b][1], inward=False)
        if window is None:
            continue
        t0, t1 = window
        # Snapped out onto the grid, the window must not take in a leg with another turn.
        legs = [i for i, (lo, hi) in enumerate(traj.segment_bounds) if hi > t0 and lo < t1 and i in moving]
        if route_turns(traj, legs[0], legs[-1]) != turns:
            continue
        start = _near_object(ctx, traj.position(t0)[:2], t0, t1)
        goal = _near_object(ctx, traj.position(t1)[:2], t0, t1)
        if start is None or goal is None or start.id == goal.id:
            continue
        correct = ", then ".join(turns)
        distractors = _route_distractors(turns, ctx.rng)
        if distractors is None:
            continue
        text = (
            f"In this clip I {verb} from near {ctx.the(start)} to near {ctx.the(goal)}. "
            "Which turns did I make on the way, in order?"
        )
        drafts.append(_Draft("route", MC, text, (t0, t1), correct, distractors, objects=(start.id, goal.id)))
    return drafts


def _random_route(rng: np.random.Generator, length: int) -> str:
    """A turn sequence of ``length`` turns, each drawn as true turns are distributed (:data:`ROUTE_TURNS`)."""
    weights = np.array(list(ROUTE_TURNS.values()))
    turns = rng.choice(len(weights), size=length, p=weights / weights.sum())
    return ", then ".join(list(ROUTE_TURNS)[int(i)] for i in turns)


def _route_distractors(turns: list[str], rng: np.random.Generator, samples: int = 400) -> list[str] | None:
    """The other options of a route whose truth is ``turns``: sequences of the SAME length, so that no
    option stands out by its length (true routes are mostly one turn; mixed lengths let a blind reader pick
    the odd one out). One turn: the two other single turns (three options), kept with a probability that
    makes each turn equally likely as the truth. Longer: three random sequences of that length
    (:func:`_random_route`), so that the truth is one more draw of the same kind; as for numbers
    (:class:`_Distractors`), a truth gets options with probability proportional to the chance that a random
    draw of three differs from it and from each other, then one such draw is taken. None: no options."""
    correct = ", then ".join(turns)
    if len(turns) == 1:
        if rng.random() >= min(ROUTE_TURNS.values()) / ROUTE_TURNS[turns[0]]:
            return None
        return [t for t in ROUTE_TURNS if t != correct]
    draws = [[_random_route(rng, len(turns)) for _ in range(3)] for _ in range(samples)]

    def fits(text: str) -> np.ndarray:
        return np.array([len({text, *row}) == 4 for row in draws])

    best = max(float(fits(text).mean()) for text in {t for row in draws for t in row})
    fitting = fits(correct)
    if not fitting.any() or rng.random() >= fitting.mean() / best:
        return None
    return draws[int(rng.choice(np.flatnonzero(fitting)))]


def _windows(ctx: _Context, n: int, min_s: float, max_s: float) -> list[tuple[float, float]]:
    """``n`` random windows of about [min_s, max_s] seconds inside the clip, on the candidate grid."""
    times = ctx.visibility.times_s
    windows: list[tuple[float, float]] = []
    if len(times) < 2 or times[-1] < min_s:
        return windows
    for _ in range(n):
        length = float(ctx.rng.uniform(min_s, min(max_s, times[-1])))
        t0 = float(ctx.rng.uniform(0.0, max(0.0, times[-1] - length)))
        window = ctx.snap(t0, min(t0 + length, float(times[-1])), inward=False)
        if window is not None:
            windows.append(window)
    return windows


def _ego_distance(ctx: _Context) -> list[_Draft]:
    drafts = []
    windows = sorted(set(_windows(ctx, TRAVEL_WINDOWS, 4.0, 15.0)))
    windows = [w for w in windows if ctx.trajectory.path_length(*w) >= 1.0 * ctx.scale]
    distances = [ctx.trajectory.path_length(*w) for w in windows]
    distractors = _Distractors(distances, ctx.rng, _metres_shown("m"))
    text = "How far did I travel during this clip, measured along my path, in metres?"
    for window, distance in zip(windows, distances, strict=True):
        drafts += _numeric_drafts(ctx, "ego_distance", text, distance, "m", window, (), distractors)
    return drafts


def _segment_windows(ctx: _Context, most_apart: int) -> list[tuple[float, float]]:
    """Windows from the start of a segment to the end of one at most ``most_apart`` later, around on the
    candidate grid."""
    traj = ctx.trajectory
    inside = [i for i, _ in traj.segments_in(0.0, ctx.end_s)]
    windows = []
    for first, last in itertools.combinations_with_replacement(inside, 2):
        if last - first > most_apart:
            continue
        window = ctx.snap(traj.segment_bounds[first][0], traj.segment_bounds[last][1], inward=False)
        if window is not None and window not in windows:
            windows.append(window)
    return windows


def _motion_windows(ctx: _Context, most_apart: int) -> list[tuple[float, float]]:
    """Windows for questions about my turns and altitude: around runs of segments (:func:`_segment_windows`)
    and random windows (:func:`_windows`), distinct, in order."""
    return sorted(set(_segment_windows(ctx, most_apart)) | set(_windows(ctx, TRAVEL_WINDOWS, 4.0, 15.0)))


def _turn_text(side: str, degrees: float) -> str:
    return f"{side}, about {degrees:.0f} degrees"


def _altitude_text(side: str, metres: float) -> str:
    return f"{side}, about {metres:.0f} m"


def _ego_turn(ctx: _Context) -> list[_Draft]:
    drafts = []
    traj = ctx.trajectory
    windows = [(t0, t1, traj.yaw_deg(t1) - traj.yaw_deg(t0)) for t0, t1 in _motion_windows(ctx, 3)]
    windows = [w for w in windows if 30.0 <= abs(w[2]) <= 330.0]
    amounts = [int(round(abs(change) / 15.0) * 15) for _, _, change in windows]
    pool = _Distractors(amounts, ctx.rng, float)
    for i, (t0, t1, change) in enumerate(windows):
        side, opposite = ("left", "right") if change > 0 else ("right", "left")
        others = pool.draw(amounts[i])
        if others is None:
            continue
        distractors = _signed_options(side, opposite, others, _turn_text, ctx.rng)
        text = "Which way did I turn in total during this clip, and by about how much?"
        drafts.append(_Draft("ego_turn", MC, text, (t0, t1), _turn_text(side, amounts[i]), distractors))
    return drafts


def _ego_altitude(ctx: _Context) -> list[_Draft]:
    if ctx.indoor:
        return []
    drafts = []
    traj = ctx.trajectory
    windows = [
        (t0, t1, float(traj.position(t1)[2] - traj.position(t0)[2])) for t0, t1 in _motion_windows(ctx, 2)
    ]
    windows = [w for w in windows if abs(w[2]) >= 2.0]
    amounts = [abs(change) for _, _, change in windows]
    pool = _Distractors(amounts, ctx.rng, lambda v: float(round(v)))
    for i, (t0, t1, change) in enumerate(windows):
        side, opposite = ("up", "down") if change > 0 else ("down", "up")
        others = pool.draw(amounts[i])
        if MC in ctx.config.forms and others is not None:
            distractors = _signed_options(side, opposite, others, _altitude_text, ctx.rng)
            text_mc = "Did I fly up or down during this clip, and by about how much?"
            correct = _altitude_text(side, amounts[i])
            drafts.append(_Draft("ego_altitude", MC, text_mc, (t0, t1), correct, distractors))
        if NUMERIC in ctx.config.forms:
            text = "By how many metres did my altitude change during this clip (up or down)?"
            drafts.append(_Draft("ego_altitude", NUMERIC, text, (t0, t1), round(amounts[i], 3), [], "m"))
    return drafts


_GENERATORS = {
    "appearance_order": _appearance_order,
    "relative_direction": _relative_direction,
    "relative_distance": _relative_distance,
    "object_count": _object_count,
    "abs_distance": _abs_distance,
    "object_size": _object_size,
    "room_size": _room_size,
    "route": _route,
    "ego_distance": _ego_distance,
    "ego_turn": _ego_turn,
    "ego_altitude": _ego_altitude,
}


class _LetterBalancer:
    """Puts each correct option where that letter has been correct least often so far (ties: random)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.counts: dict[int, np.ndarray] = {}

    def position(self, n_options: int) -> int:
        """The letter position for the next question's correct option (see :meth:`take`)."""
        counts = self.counts.setdefault(n_options, np.zeros(n_options, dtype=np.int64))
        least = np.flatnonzero(counts == counts.min())
        return int(least[int(self.rng.integers(0, len(least)))])

    def take(self, n_options: int, position: int) -> None:
        """Count ``position`` as used (the question was kept)."""
        self.counts[n_options][position] += 1


def _windows_ns(drafts: Sequence[_Draft], start_ns: int) -> list[tuple[int, int]]:
    """The distinct windows of ``drafts`` in bag stamps (as :func:`_finish` writes them)."""
    return sorted({_window(d, start_ns) for d in drafts})


def generate_questions(
    world: World,
    trajectory: Trajectory,
    visibility: Visibility,
    rng: np.random.Generator,
    *,
    bag: str = "bag",
    scene_id: str = "scene",
    start_ns: int = 0,
    config: QuestionConfig | None = None,
    screen: QuestionScreen | None = None,
) -> list[Question]:
    """Questions about one rendered scene, ``config.per_task`` per task and form at most.

    The clip is the frames in ``visibility`` (seconds from the bag start, which is at ``start_ns``);
    ``bag`` is written as is into every record (the bag's path relative to the questions file); ids are
    ``<scene_id>-NNN``. Candidates are tried in random order (each distinct answer equally likely next
    where all candidates of a task share their options, or have none); a ``screen`` refuses the ones it
    does not accept (the next candidate is tried instead).
    """
    config = config or QuestionConfig()
    if len(visibility.times_s) == 0:
        return []
    end_s = float(visibility.times_s[-1])
    ctx = _Context(world, trajectory, visibility, end_s, config, rng, start_ns)
    drafts = {task: _GENERATORS[task](ctx) for task in TASKS}
    if screen is not None:
        screen.prepare(_windows_ns([d for task_drafts in drafts.values() for d in task_drafts], start_ns))
    balancer = _LetterBalancer(rng)
    questions: list[Question] = []
    for task in TASKS:
        for form in (MC, NUMERIC):
            if form not in config.forms:
                continue
            pool = [
                drafts[task][i] for i in rng.permutation(len(drafts[task])) if drafts[task][i].form == form
            ]
            chosen: list[Question] = []
            asked: Counter[str] = Counter()  # how often each answer was kept
            # Balance the answers where every candidate offers the same options (the quadrants) or none
            # (numbers); elsewhere the options are drawn like the truth, which must stay as frequent as it is.
            balance = form == NUMERIC or len({frozenset([d.correct, *d.distractors]) for d in pool}) == 1
            while pool and len(chosen) < config.per_task:
                draft = pool.pop(_next_draft(pool, asked, rng) if balance else 0)
                window = _window(draft, start_ns)
                if any((draft.text, window) == (q.question, (q.start_ns, q.end_ns)) for q in chosen):
                    continue
                position = balancer.position(len(draft.distractors) + 1)
                question = _finish(draft, "", bag, start_ns, position, rng)
                if screen is not None and not screen.accept(question):
                    continue
                if draft.form == MC:
                    balancer.take(len(draft.distractors) + 1, position)
                asked[str(draft.correct)] += 1
                chosen.append(question)
            chosen.sort(key=lambda q: (q.start_ns, q.end_ns, q.question))
            questions += [replace(q, id=f"{scene_id}-{len(questions) + k:03d}") for k, q in enumerate(chosen)]
    return questions


def _window(draft: _Draft, start_ns: int) -> tuple[int, int]:
    return start_ns + round(draft.window[0] * NS_PER_S), start_ns + round(draft.window[1] * NS_PER_S)


def _next_draft(pool: list[_Draft], asked: Counter[str], rng: np.random.Generator) -> int:
    """Index into ``pool`` of the next candidate: an answer drawn uniformly among the least-asked distinct
    answers, then the first candidate (the pool is in random order) with it."""
    least = min(asked[str(d.correct)] for d in pool)
    answers = sorted({str(d.correct) for d in pool if asked[str(d.correct)] == least})
    answer = answers[int(rng.integers(0, len(answers)))]
    return next(i for i, d in enumerate(pool) if str(d.correct) == answer)


def _finish(
    draft: _Draft,
    question_id: str,
    bag: str,
    start_ns: int,
    position: int,
    rng: np.random.Generator,
) -> Question:
    t0, t1 = draft.window
    start, end = _window(draft, start_ns)
    common = dict(
        id=question_id,
        bag=bag,
        start_s=round(t0, 3),
        end_s=round(t1, 3),
        # From the unrounded times, so that a window ending on a frame ends exactly on its stamp.
        start_ns=start,
        end_ns=end,
        task=draft.task,
        form=draft.form,
        question=draft.text,
        objects=draft.objects,
    )
    if draft.form == NUMERIC:
        value = draft.correct
        text = _fmt(float(value), draft.unit) if draft.unit != "count" else str(value)
        return Question(options=(), answer=value, unit=draft.unit, answer_text=text, **common)
    distractors = [draft.distractors[i] for i in rng.permutation(len(draft.distractors))]
    options = distractors[:position] + [str(draft.correct)] + distractors[position:]
    return Question(
        options=tuple(options),
        answer=OPTION_LETTERS[position],
        unit="",
        answer_text=str(draft.correct),
        **common,
    )
