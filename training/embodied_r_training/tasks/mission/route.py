"""mission_route (numeric): "How far apart in a straight line ... when I first saw the X and ... the Y?".

Horizontal metres between the camera's positions at the first frames of the two names' first sightings
(far apart, different rooms, >= ``min_route_m``). The prompt must carry positions (odometry x, y per frame)
or the displacement between consecutive frames: path lengths alone do not give a straight-line distance.
``spread_m`` in the evidence says how far the camera moved within either sighting (the answer's
tolerance). The oracle reads the robot's positions at the frames that first list the two names: their
place lines' odometry positions when both have one, else by dead reckoning; it abstains when a name is
never listed or (without positions) a motion between the two frames is not given in metres.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..task import Answer, QuestionTask, Template
from .context import Evidence, MissionContext, MissionDraft
from .reading import MissionReading, first_frames, poses

NAME = "mission_route"
TEMPLATE = Template(
    "How far apart in a straight line were the place where I first saw the {} and the place where I first "
    "saw the {}?"
)
SPREAD_STEP_S = 0.5  # the camera's positions within a sighting are sampled this often


def generate(m: MissionContext) -> list[MissionDraft]:
    """Every far pair of names (:meth:`~.context.MissionContext.far_pairs`) at least ``min_route_m`` apart,
    named in random order."""
    count = m.counts[NAME]
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
        named = [x, y] if m.rng.random() < 0.5 else [y, x]
        text = TEMPLATE.format(named[0], named[1])
        notes = {"spread_m": round(max(spread[x], spread[y]), 2)}
        evidence = Evidence(
            (m.stamps(first_x), m.stamps(first_y)), (first_x.object_id, first_y.object_id), notes
        )
        drafts.append(MissionDraft(NAME, text, round(metres, 2), evidence.objects, evidence, unit="m"))
    return drafts


def solve(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    """The straight line between where I stood at the two first listings."""
    names = [match.group(1), match.group(2)]
    frames = first_frames(reading, names)
    positions = [reading.places[f].position if reading.places[f] else None for f in frames]
    if positions[0] is not None and positions[1] is not None:
        a, b = positions
        where = "by my odometry"
    else:
        found = poses(reading, frames)
        a, b = (found[0].x, found[0].y), (found[1].x, found[1].y)
        where = "on the map of frame 0 (chaining my motions)"
    metres = math.dist(a, b)
    text = (
        f"I first saw the {names[0]} at frame {frames[0]}, where I stood at ({a[0]:.1f}, {a[1]:.1f}) "
        f"{where}, and the {names[1]} at frame {frames[1]}, at ({b[0]:.1f}, {b[1]:.1f}). The straight line "
        f"between them is {metres:.2f} m."
    )
    return text, round(metres, 2)


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
