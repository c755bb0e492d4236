"""Ground truth from a scene's geometry, shared by the generators (from the world) and the solvers (from
the positions and turns a prompt gives): distances, directions, quadrants and turn labels."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from ..synth.trajectory import MOVING_KINDS, Trajectory
from ..synth.world import SceneObject

QUADRANTS = ("front-left", "front-right", "back-left", "back-right")


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
