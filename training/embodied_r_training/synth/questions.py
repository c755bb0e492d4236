"""Spatial questions with ground-truth answers, computed from a world's geometry, the camera trajectory and
what the camera saw.

Tasks (VSI-Bench style, plus the robot's own motion):

==================== ======== ====================================================================
task                 forms    ground truth
==================== ======== ====================================================================
appearance_order     mc       order of first sighting (>= 0.2 % of the image) of 3 objects
relative_direction   mc       standing at A facing B: C's quadrant (front/back x left/right)
relative_distance    mc       which of 3-4 objects has its centre closest to A's centre
object_count         mc, num  objects of one category seen in the window
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
labels' limits). Multiple-choice options are texts (no letters); the correct option's position is chosen
so that the letters stay balanced over a scene's questions; distractors are plausible (other
permutations, the other quadrants, nearby objects, values 0.4x-2.3x the truth that differ from each
other by at least 20 %). Numeric answers are SI: metres, square metres, counts.

The questions are :class:`embodied_r_ros.question_file.Question` records; that module reads and writes
their file (``questions.jsonl``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.question_file import MC, NUMERIC, Question

from .trajectory import MOVING_KINDS, Trajectory
from .visibility import DEFAULT_MIN_FRACTION, Visibility
from .world import INDOOR, SceneObject, World

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
LETTERS = "ABCDEFGH"
_PLURALS = {"box": "boxes", "bookshelf": "bookshelves"}
_RATIOS = (0.4, 0.55, 0.7, 1.35, 1.6, 1.9, 2.3)


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
    """How many questions of each task and form per scene, and the visibility threshold."""

    per_task: int = 2
    min_fraction: float = DEFAULT_MIN_FRACTION
    forms: tuple[str, ...] = (MC, NUMERIC)

    def __post_init__(self) -> None:
        if self.per_task < 1:
            raise ValueError(f"per_task must be >= 1, got {self.per_task}")
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


def _numeric_distractors(value: float, unit: str, rng: np.random.Generator, n: int = 3) -> list[str] | None:
    """``n`` option texts at 0.4x-2.3x ``value``, all options at least 20 % apart; None if impossible."""
    if unit == "count":
        pool = [c for c in range(max(1, int(value) - 2), int(value) + 4) if c != int(value)]
        picks = [pool[i] for i in rng.permutation(len(pool))[:n]]
        return [str(c) for c in picks] if len(picks) == n else None
    chosen = [value]
    for i in rng.permutation(len(_RATIOS)):
        candidate = value * _RATIOS[i]
        if all(abs(candidate - c) >= 0.2 * max(candidate, c) for c in chosen):
            chosen.append(candidate)
        if len(chosen) == n + 1:
            break
    texts = [_fmt(c, unit) for c in chosen]
    if len(chosen) < n + 1 or len(set(texts)) < len(texts):
        return None
    return texts[1:]


def _numeric_drafts(
    ctx: _Context,
    task: str,
    text_mc: str,
    text_num: str,
    value: float,
    unit: str,
    window: tuple[float, float],
    objects: tuple[int, ...],
) -> list[_Draft]:
    drafts = []
    if MC in ctx.config.forms:
        distractors = _numeric_distractors(value, unit, ctx.rng)
        if distractors:
            drafts.append(_Draft(task, MC, text_mc, window, _fmt(value, unit), distractors, "", objects))
    if NUMERIC in ctx.config.forms:
        answer: float | int = int(value) if unit == "count" else round(float(value), 3)
        drafts.append(_Draft(task, NUMERIC, text_num, window, answer, [], unit, objects))
    return drafts


def _appearance_order(ctx: _Context) -> list[_Draft]:
    vis, cfg, end = ctx.visibility, ctx.config, ctx.end_s
    first = {o.id: vis.first_seen(o.id, 0.0, end, cfg.min_fraction) for o in ctx.seen}
    faint = {o.id: vis.first_seen(o.id, 0.0, end, cfg.min_fraction / 10) for o in ctx.seen}
    drafts = []
    if len(ctx.seen) < 3:
        return drafts
    for _ in range(60):
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
    for _ in range(80):
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
    for _ in range(60):
        target = ctx.seen[int(ctx.rng.integers(0, len(ctx.seen)))]
        others = [o for o in ctx.seen if o.id != target.id]
        candidates = ctx.sample(others, min(4, len(others)))
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
        drafts += _numeric_drafts(ctx, "object_count", text, text, count, "count", (0.0, end), seen_ids)
    return drafts


def _abs_distance(ctx: _Context) -> list[_Draft]:
    drafts = []
    pairs = list(itertools.combinations(ctx.seen, 2))
    for i in ctx.rng.permutation(len(pairs))[:12]:
        a, b = pairs[i]
        d = object_distance(a, b)
        if d < 0.5 * ctx.scale:
            continue
        text = f"What is the distance between the centres of {ctx.the(a)} and {ctx.the(b)}, in metres?"
        drafts += _numeric_drafts(ctx, "abs_distance", text, text, d, "m", (0.0, ctx.end_s), (a.id, b.id))
    return drafts


def _object_size(ctx: _Context) -> list[_Draft]:
    drafts = []
    for obj in ctx.sample(ctx.seen, 8):
        text = f"What is the longest dimension (length, width or height) of {ctx.the(obj)}, in metres?"
        drafts += _numeric_drafts(
            ctx, "object_size", text, text, obj.longest_dimension, "m", (0.0, ctx.end_s), (obj.id,)
        )
    return drafts


def _room_size(ctx: _Context) -> list[_Draft]:
    if ctx.world.room is None:
        return []
    text = "What is the floor area of this room, in square metres?"
    return _numeric_drafts(
        ctx, "room_size", text, text, ctx.world.room.floor_area, "m^2", (0.0, ctx.end_s), ()
    )


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
    moving = [i for i, s in traj.segments_in(0.0, ctx.end_s) if s.kind in MOVING_KINDS]
    verb = "walked" if ctx.indoor else "flew"
    drafts = []
    for a, b in itertools.combinations(moving, 2):
        turns = route_turns(traj, a, b)
        if not turns or len(turns) > 3:
            continue
        t0, t1 = traj.segment_bounds[a][0], traj.segment_bounds[b][1]
        start = _near_object(ctx, traj.position(t0)[:2], t0, t1)
        goal = _near_object(ctx, traj.position(t1)[:2], t0, t1)
        if start is None or goal is None or start.id == goal.id:
            continue
        correct = ", then ".join(turns)
        options = [", then ".join(v) for v in _one_edit(turns)]
        options = sorted(set(options) - {correct})
        if len(options) < 3:
            continue
        distractors = [options[i] for i in sorted(ctx.rng.permutation(len(options))[:3])]
        text = (
            f"In this clip I {verb} from near {ctx.the(start)} to near {ctx.the(goal)}. "
            "Which turns did I make on the way, in order?"
        )
        drafts.append(_Draft("route", MC, text, (t0, t1), correct, distractors, objects=(start.id, goal.id)))
    return drafts


_TURNS = ("turn left", "turn right", "turn around")


def _one_edit(turns: list[str]) -> list[list[str]]:
    """Turn sequences one change away from ``turns`` (a turn replaced, added or dropped), 1-4 turns long."""
    variants = []
    for k in range(len(turns)):
        variants += [turns[:k] + [t] + turns[k + 1 :] for t in _TURNS if t != turns[k]]
        variants.append(turns[:k] + turns[k + 1 :])
    for k in range(len(turns) + 1):
        variants += [turns[:k] + [t] + turns[k:] for t in _TURNS]
    return [v for v in variants if 1 <= len(v) <= 4]


def _windows(ctx: _Context, n: int, min_s: float, max_s: float) -> list[tuple[float, float]]:
    """``n`` random windows of [min_s, max_s] seconds inside the clip, on the frame times."""
    times = ctx.visibility.times_s
    windows = []
    if len(times) < 2 or times[-1] < min_s:
        return windows
    for _ in range(n):
        length = float(ctx.rng.uniform(min_s, min(max_s, times[-1])))
        i0 = int(ctx.rng.integers(0, max(1, np.searchsorted(times, times[-1] - length) + 1)))
        i1 = int(np.searchsorted(times, times[i0] + length))
        i1 = min(i1, len(times) - 1)
        windows.append((float(times[i0]), float(times[i1])))
    return windows


def _ego_distance(ctx: _Context) -> list[_Draft]:
    drafts = []
    for t0, t1 in _windows(ctx, 12, 4.0, 15.0):
        distance = ctx.trajectory.path_length(t0, t1)
        if distance < 1.0 * ctx.scale:
            continue
        text = "How far did I travel during this clip, measured along my path, in metres?"
        drafts += _numeric_drafts(ctx, "ego_distance", text, text, distance, "m", (t0, t1), ())
    return drafts


def _ego_turn(ctx: _Context) -> list[_Draft]:
    drafts = []
    traj = ctx.trajectory
    inside = [i for i, _ in traj.segments_in(0.0, ctx.end_s)]
    for first, last in itertools.combinations_with_replacement(inside, 2):
        if last - first > 3:
            continue
        t0, t1 = traj.segment_bounds[first][0], traj.segment_bounds[last][1]
        change = traj.yaw_deg(t1) - traj.yaw_deg(t0)
        if not 30.0 <= abs(change) <= 330.0:
            continue
        amount = int(round(abs(change) / 15.0) * 15)
        other = amount + 90 if amount <= 180 else amount - 90
        side, opposite = ("left", "right") if change > 0 else ("right", "left")
        correct = f"{side}, about {amount} degrees"
        distractors = [
            f"{opposite}, about {amount} degrees",
            f"{side}, about {other} degrees",
            f"{opposite}, about {other} degrees",
        ]
        text = "Which way did I turn in total during this clip, and by about how much?"
        drafts.append(_Draft("ego_turn", MC, text, (t0, t1), correct, distractors))
    return drafts


def _ego_altitude(ctx: _Context) -> list[_Draft]:
    if ctx.indoor:
        return []
    drafts = []
    traj = ctx.trajectory
    inside = [i for i, _ in traj.segments_in(0.0, ctx.end_s)]
    for first, last in itertools.combinations_with_replacement(inside, 2):
        if last - first > 2:
            continue
        t0, t1 = traj.segment_bounds[first][0], traj.segment_bounds[last][1]
        change = float(traj.position(t1)[2] - traj.position(t0)[2])
        if abs(change) < 2.0:
            continue
        side, opposite = ("up", "down") if change > 0 else ("down", "up")
        amount = abs(change)
        other = amount * 2.2 if amount < 6 else amount / 2.2
        correct = f"{side}, about {amount:.0f} m"
        distractors = [
            f"{opposite}, about {amount:.0f} m",
            f"{side}, about {other:.0f} m",
            f"{opposite}, about {other:.0f} m",
        ]
        text_mc = "Did I fly up or down during this clip, and by about how much?"
        if MC in ctx.config.forms:
            drafts.append(_Draft("ego_altitude", MC, text_mc, (t0, t1), correct, distractors))
        if NUMERIC in ctx.config.forms:
            text = "By how many metres did my altitude change during this clip (up or down)?"
            drafts.append(_Draft("ego_altitude", NUMERIC, text, (t0, t1), round(amount, 3), [], "m"))
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
        counts = self.counts.setdefault(n_options, np.zeros(n_options, dtype=np.int64))
        least = np.flatnonzero(counts == counts.min())
        pos = int(least[int(self.rng.integers(0, len(least)))])
        counts[pos] += 1
        return pos


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
) -> list[Question]:
    """Questions about one rendered scene, ``config.per_task`` per task and form at most.

    The clip is the frames in ``visibility`` (seconds from the bag start, which is at ``start_ns``);
    ``bag`` is written as is into every record (the bag's path relative to the questions file).
    """
    config = config or QuestionConfig()
    if len(visibility.times_s) == 0:
        return []
    end_s = float(visibility.times_s[-1])
    ctx = _Context(world, trajectory, visibility, end_s, config, rng)
    balancer = _LetterBalancer(rng)
    questions: list[Question] = []
    for task in TASKS:
        drafts = _GENERATORS[task](ctx)
        for form in (MC, NUMERIC):
            if form not in config.forms:
                continue
            chosen: list[_Draft] = []
            for i in rng.permutation(len(drafts)):
                d = drafts[i]
                if d.form == form and all((d.text, d.window) != (c.text, c.window) for c in chosen):
                    chosen.append(d)
                if len(chosen) == config.per_task:
                    break
            chosen.sort(key=lambda d: (d.window, d.text))
            for draft in chosen:
                questions.append(_finish(draft, len(questions), scene_id, bag, start_ns, balancer, rng))
    return questions


def _finish(
    draft: _Draft,
    number: int,
    scene_id: str,
    bag: str,
    start_ns: int,
    balancer: _LetterBalancer,
    rng: np.random.Generator,
) -> Question:
    t0, t1 = draft.window
    common = dict(
        id=f"{scene_id}-{number:03d}",
        bag=bag,
        start_s=round(t0, 3),
        end_s=round(t1, 3),
        # From the unrounded times, so that a window ending on a frame ends exactly on its stamp.
        start_ns=start_ns + round(t0 * NS_PER_S),
        end_ns=start_ns + round(t1 * NS_PER_S),
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
    pos = balancer.position(len(distractors) + 1)
    options = distractors[:pos] + [str(draft.correct)] + distractors[pos:]
    return Question(
        options=tuple(options), answer=LETTERS[pos], unit="", answer_text=str(draft.correct), **common
    )
