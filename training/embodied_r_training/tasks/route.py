"""route (mc): the turns between two walk (or flight) legs, from near one object to near another.

Distractors are turn sequences of the same length drawn as true routes are distributed (:data:`ROUTE_TURNS`),
not edits of the truth (the one option a single edit away from all others would be the truth). The oracle
reads the "Path:" accounts: the net turn between consecutive legs.
"""

from __future__ import annotations

import itertools
import re

import numpy as np

from embodied_r_ros.question_file import MC

from ..synth.trajectory import FLY, MOVING_KINDS, TURN, WALK
from ..synth.world import SceneObject
from .geometry import route_turns, turn_label
from .reading import Reading, option_equal, steps
from .scene import Draft, SceneContext
from .task import Answer, QuestionTask, Template, Unanswerable

NAME = "route"
TEMPLATE = Template(  # variants: indoors I walk, outdoors I fly
    "In this clip I walked from near the {} to near the {}. Which turns did I make on the way, in order?",
    "In this clip I flew from near the {} to near the {}. Which turns did I make on the way, in order?",
)
# True routes' turns, as the walks and flights give them (measured on 1,200 generated scenes: 92 routes).
ROUTE_TURNS = {"turn left": 0.37, "turn right": 0.37, "turn around": 0.26}


def _near_object(ctx: SceneContext, point: np.ndarray, t0: float, t1: float) -> SceneObject | None:
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


def generate(ctx: SceneContext) -> list[Draft]:
    """Pairs of legs one to three turns apart, each end clearly near a seen object."""
    traj = ctx.trajectory
    moving = [i for i, s in enumerate(traj.segments) if s.kind in MOVING_KINDS]
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
        text = TEMPLATE.format(start.name, goal.name, variant=0 if ctx.indoor else 1)
        drafts.append(Draft(NAME, MC, text, (t0, t1), correct, distractors, objects=(start.id, goal.id)))
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
    (:class:`~.amounts.Distractors`), a truth gets options with probability proportional to the chance
    that a random draw of three differs from it and from each other, then one such draw is taken. None: no
    options."""
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


def solve(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The net turn between consecutive legs of the "Path:" accounts, named as turn labels."""
    turns: list[str] = []
    cited: list[str] = []
    legs = 0
    heading_change = 0.0
    moving = False  # whether the previous piece was a leg (walk or flight)
    for j, pieces in steps(reading):
        for piece in pieces:
            if piece.kind in (WALK, FLY):
                if legs and not moving:
                    label = turn_label(heading_change)
                    if label is None:
                        raise Unanswerable(f"a turn of {heading_change:g} deg is too near a label's limit")
                    if label:
                        turns.append(label)
                        cited.append(f"{label} ({heading_change:+g} deg, by frame {j})")
                legs += 0 if moving else 1
                moving, heading_change = True, 0.0
            elif piece.kind == TURN:
                heading_change += piece.turn_deg
                moving = False
    if not turns:
        raise Unanswerable("no turn between legs")
    correct = ", then ".join(turns)
    lines = [f"Between my {legs} legs I turned:", *cited, f"So: {correct}."]
    sentence, letter = option_equal(reading, correct)
    return "\n".join([*lines, sentence]), letter


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
