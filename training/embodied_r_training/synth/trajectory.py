"""Camera trajectories: smooth walks through a room and drone flights over a plaza, with a pose at any time.

A trajectory is a start state and a list of :class:`Segment` s. A segment changes the state by fixed
amounts over its duration, each following the same smooth profile s(tau) = 3 tau^2 - 2 tau^3 (speed zero
at both ends, so the motion is continuous in position and velocity): ``forward_m`` along the current
heading (horizontal), ``yaw_deg`` (positive = turn left), ``up_m`` and ``pitch_deg`` (REP-103: positive =
nose down). A walk is "turn towards the next waypoint, walk to it", with pauses and quick looks around;
a flight adds climbs, descents and camera tilts.

Poses follow REP-103 body axes (x forward, y left, z up; the camera looks along body x) and are the
camera's poses: the body frame sits at the camera's optical centre, so z is the camera height. The
orientation is yaw about z then pitch about the new y, no roll.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from embodied_r_ros.frames import Pose

from .world import INDOOR, OBJECT_CLEARANCE_M, World, free_space

WALK = "walk"
TURN = "turn"
PAUSE = "pause"
LOOK = "look"  # a quick look to one side (turn, and usually back)
FLY = "fly"
CLIMB = "climb"
TILT = "tilt"
MOVING_KINDS = (WALK, FLY)  # segments that carry the camera from place to place


@dataclass(frozen=True)
class Segment:
    """One piece of motion: what changes, by how much, over ``duration_s`` seconds (see module docstring)."""

    kind: str
    duration_s: float
    forward_m: float = 0.0
    yaw_deg: float = 0.0
    up_m: float = 0.0
    pitch_deg: float = 0.0

    def __post_init__(self) -> None:
        if not self.duration_s > 0:
            raise ValueError(f"segment duration must be > 0 s, got {self.duration_s} ({self.kind})")


@dataclass(frozen=True)
class StartState:
    """Where a trajectory starts: position (m), heading and pitch (degrees)."""

    x: float = 0.0
    y: float = 0.0
    z: float = 1.25
    yaw_deg: float = 0.0
    pitch_deg: float = 0.0


def _smooth(tau: np.ndarray) -> np.ndarray:
    return tau * tau * (3.0 - 2.0 * tau)


def _smooth_rate(tau: np.ndarray) -> np.ndarray:
    return 6.0 * tau * (1.0 - tau)


def quaternion_from_yaw_pitch(yaw: float, pitch: float) -> tuple[float, float, float, float]:
    """Unit quaternion (x, y, z, w) of a turn by ``yaw`` about z, then ``pitch`` about the new y (rad)."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    return (-sy * sp, cy * sp, sy * cp, cy * cp)


def _rotation(yaw: float, pitch: float) -> np.ndarray:
    cy, sy, cp, sp = math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch)
    rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    return rz @ ry


class Trajectory:
    """A start state and segments, tabulated densely (``step_s``) so that any time has a pose and twist."""

    def __init__(self, start: StartState, segments: Sequence[Segment], step_s: float = 0.01) -> None:
        if not segments:
            raise ValueError("a trajectory needs at least one segment")
        self.start = start
        self.segments = tuple(segments)
        times = [np.zeros(1)]
        x, y, z = [np.array([start.x])], [np.array([start.y])], [np.array([start.z])]
        yaw, pitch = [np.array([math.radians(start.yaw_deg)])], [np.array([math.radians(start.pitch_deg)])]
        rates = [np.zeros((1, 4))]  # forward speed, climb rate, yaw rate, pitch rate at each row
        bounds = []
        t0 = 0.0
        for seg in self.segments:
            n = max(2, math.ceil(seg.duration_s / step_s))
            tau = np.linspace(0.0, 1.0, n + 1)
            s = _smooth(tau)
            yaw0, pitch0 = yaw[-1][-1], pitch[-1][-1]
            seg_yaw = yaw0 + math.radians(seg.yaw_deg) * s
            mid = yaw0 + math.radians(seg.yaw_deg) * _smooth(0.5 * (tau[1:] + tau[:-1]))
            step = seg.forward_m * np.diff(s)  # forward distance of each sub-step, along the mid heading
            x.append(x[-1][-1] + np.cumsum(step * np.cos(mid)))
            y.append(y[-1][-1] + np.cumsum(step * np.sin(mid)))
            z.append(z[-1][-1] + seg.up_m * s[1:])
            yaw.append(seg_yaw[1:])
            pitch.append(pitch0 + math.radians(seg.pitch_deg) * s[1:])
            ds = _smooth_rate(tau[1:])[:, None] / seg.duration_s
            amounts = np.array(
                [seg.forward_m, seg.up_m, math.radians(seg.yaw_deg), math.radians(seg.pitch_deg)]
            )
            rates.append(ds * amounts)
            times.append(t0 + seg.duration_s * tau[1:])
            bounds.append((t0, t0 + seg.duration_s))
            t0 += seg.duration_s
        self._t = np.concatenate(times)
        self._state = np.stack(
            [np.concatenate(a) for a in (x, y, z, yaw, pitch)] + list(np.concatenate(rates).T), axis=1
        )
        self.segment_bounds: tuple[tuple[float, float], ...] = tuple(bounds)
        self.duration_s = t0

    def _at(self, t: float) -> np.ndarray:
        t = min(max(float(t), 0.0), self.duration_s)
        i = int(np.searchsorted(self._t, t, side="right")) - 1
        i = min(max(i, 0), len(self._t) - 2)
        t0, t1 = self._t[i], self._t[i + 1]
        alpha = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
        return (1 - alpha) * self._state[i] + alpha * self._state[i + 1]

    def position(self, t: float) -> np.ndarray:
        """Camera position (m) at time ``t`` seconds (clamped to the trajectory)."""
        return self._at(t)[:3].copy()

    def yaw_deg(self, t: float) -> float:
        """Heading at ``t`` in degrees, unwrapped (it keeps counting past +-180 as the camera turns)."""
        return math.degrees(self._at(t)[3])

    def pitch_deg(self, t: float) -> float:
        """Pitch at ``t`` in degrees (REP-103: positive = looking down)."""
        return math.degrees(self._at(t)[4])

    def pose(self, t: float) -> Pose:
        """The camera's pose at ``t`` (REP-103 body axes, quaternion x, y, z, w)."""
        s = self._at(t)
        x, y, z = (float(v) for v in s[:3])
        return Pose((x, y, z), quaternion_from_yaw_pitch(float(s[3]), float(s[4])))

    def twist(self, t: float) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """Linear (m/s) and angular (rad/s) velocity at ``t`` in the body frame (as in Odometry.twist)."""
        s = self._at(t)
        yaw, pitch, speed, climb, yaw_rate, pitch_rate = s[3], s[4], s[5], s[6], s[7], s[8]
        rot = _rotation(yaw, pitch)
        linear = rot.T @ np.array([speed * math.cos(yaw), speed * math.sin(yaw), climb])
        # Yaw turns about world z; pitch about the yawed y axis.
        angular = rot.T @ (
            np.array([0.0, 0.0, yaw_rate]) + _rotation(yaw, 0.0) @ np.array([0.0, pitch_rate, 0.0])
        )
        return (float(linear[0]), float(linear[1]), float(linear[2])), (
            float(angular[0]),
            float(angular[1]),
            float(angular[2]),
        )

    def path_length(self, t0: float, t1: float) -> float:
        """Distance travelled (3D, along the path) between ``t0`` and ``t1`` seconds."""
        lo, hi = sorted((min(max(t0, 0.0), self.duration_s), min(max(t1, 0.0), self.duration_s)))
        inside = (self._t > lo) & (self._t < hi)
        points = np.vstack([self._at(lo)[:3], self._state[inside, :3], self._at(hi)[:3]])
        return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())

    def segments_in(self, t0: float, t1: float) -> list[tuple[int, Segment]]:
        """(index, segment) of the segments lying wholly inside [t0, t1]."""
        return [
            (i, seg)
            for i, (seg, (a, b)) in enumerate(zip(self.segments, self.segment_bounds, strict=True))
            if a >= t0 - 1e-9 and b <= t1 + 1e-9
        ]

    def to_dict(self) -> dict:
        """Plain data for JSON: the start state and the segments."""
        return {"start": asdict(self.start), "segments": [asdict(s) for s in self.segments]}

    @classmethod
    def from_dict(cls, data: dict) -> Trajectory:
        """Inverse of :meth:`to_dict`."""
        return cls(StartState(**data["start"]), [Segment(**s) for s in data["segments"]])


# ------------------------------------------------------------------------------------------------ planning


def _wrap_deg(angle: float) -> float:
    return (angle + 180.0) % 360.0 - 180.0


def _path_free(world: World, a: np.ndarray, b: np.ndarray, clearance: float) -> bool:
    x0, x1, y0, y1 = world.bounds
    n = max(2, int(np.linalg.norm(b - a) / 0.1) + 1)
    xs, ys = np.linspace(a[0], b[0], n), np.linspace(a[1], b[1], n)
    if xs.min() < x0 or xs.max() > x1 or ys.min() < y0 or ys.max() > y1:
        return False
    return all(bool(np.all(obj.footprint_distance(xs, ys) >= clearance)) for obj in world.objects)


def _near_objects(world: World, cells: np.ndarray, reach: float) -> np.ndarray:
    """Which cells lie within ``reach`` (horizontally) of some object's footprint."""
    near = np.zeros(len(cells), dtype=bool)
    for obj in world.objects:
        near |= obj.footprint_distance(cells[:, 0], cells[:, 1]) <= reach
    return near


def _choose_waypoint(
    world: World,
    here: np.ndarray,
    cells: np.ndarray,
    near: np.ndarray,
    visited: list[np.ndarray],
    rng: np.random.Generator,
    reach: tuple[float, float],
    clearance: float,
) -> np.ndarray | None:
    """A free cell within ``reach`` of ``here`` reachable in a straight line, preferring unvisited places
    next to objects (people walk up to things; it also gives route questions their landmarks)."""
    dist = np.linalg.norm(cells - here, axis=1)
    inside = (dist >= reach[0]) & (dist <= reach[1])
    pool, pool_near = cells[inside], near[inside]
    if len(pool) == 0:
        return None
    pick = rng.permutation(len(pool))[:40]
    pool, pool_near = pool[pick], pool_near[pick]
    recent = np.array(visited[-6:])
    novelty = np.min(np.linalg.norm(pool[:, None, :] - recent[None, :, :], axis=2), axis=1) / reach[1]
    score = novelty + 0.6 * pool_near + rng.uniform(0, 0.5, len(pool))
    order = np.argsort(-score, kind="stable")
    for i in order:
        if _path_free(world, here, pool[i], clearance):
            return pool[i]
    return None


def plan_walk(
    world: World,
    duration_s: float,
    rng: np.random.Generator,
    *,
    height: float = 1.25,
    pitch_deg: float = 12.0,
) -> Trajectory:
    """A walk around an indoor ``world`` lasting at least ``duration_s``: turns towards waypoints, walks
    (0.5-0.9 m/s), pauses and quick looks to the side, keeping clear of walls and objects."""
    xs, ys, free = free_space(world)
    gx, gy = np.meshgrid(xs, ys)
    cells = np.stack([gx[free], gy[free]], axis=1)
    if len(cells) == 0:
        raise ValueError("the room has no free space to walk in; generate it with fewer objects")
    near = _near_objects(world, cells, 1.0)
    here = cells[int(rng.integers(0, len(cells)))].astype(np.float64)
    yaw = float(rng.uniform(-180.0, 180.0))
    start = StartState(float(here[0]), float(here[1]), height, yaw, pitch_deg)
    segments: list[Segment] = []
    visited = [here.copy()]
    total = 0.0
    clearance = OBJECT_CLEARANCE_M - 0.1
    while total < duration_s:
        r = rng.random()
        if r < 0.1 and segments:
            seg = Segment(PAUSE, float(rng.uniform(1.0, 2.5)))
            segments.append(seg)
            total += seg.duration_s
            continue
        if r < 0.22 and segments:
            angle = float(rng.choice([-1.0, 1.0]) * rng.uniform(40.0, 90.0))
            rate = float(rng.uniform(60.0, 110.0))
            looks = [Segment(LOOK, abs(angle) / rate * 1.5, yaw_deg=angle)]
            if rng.random() < 0.7:
                looks.append(Segment(LOOK, abs(angle) / rate * 1.5, yaw_deg=-angle))
            for seg in looks:
                segments.append(seg)
                total += seg.duration_s
                yaw += seg.yaw_deg
            continue
        target = _choose_waypoint(world, here, cells, near, visited, rng, (1.0, 5.0), clearance)
        if target is None:
            seg = Segment(TURN, 2.0, yaw_deg=180.0 * float(rng.choice([-1.0, 1.0])))
            segments.append(seg)
            total += seg.duration_s
            yaw += seg.yaw_deg
            continue
        delta = target - here
        turn = _wrap_deg(math.degrees(math.atan2(delta[1], delta[0])) - yaw)
        if abs(turn) > 2.0:
            rate = float(rng.uniform(45.0, 90.0))
            seg = Segment(TURN, max(0.6, abs(turn) / rate * 1.5), yaw_deg=turn)
            segments.append(seg)
            total += seg.duration_s
            yaw += turn
        distance = float(np.linalg.norm(delta))
        speed = float(rng.uniform(0.5, 0.9))
        seg = Segment(WALK, distance / speed, forward_m=distance)
        segments.append(seg)
        total += seg.duration_s
        here = target.astype(np.float64)
        visited.append(here.copy())
    return Trajectory(start, segments)


def plan_flight(world: World, duration_s: float, rng: np.random.Generator) -> Trajectory:
    """A drone flight over the plaza of an outdoor ``world`` lasting at least ``duration_s``: flights to
    waypoints (3-6 m/s, sometimes climbing), turns, climbs and descents (10-35 m) and camera tilts."""
    x0, x1, y0, y1 = world.bounds
    here = np.array([rng.uniform(x0, x1) * 0.5, rng.uniform(y0, y1) * 0.5])
    z = float(rng.uniform(12.0, 20.0))
    pitch = float(rng.uniform(15.0, 30.0))
    yaw = float(rng.uniform(-180.0, 180.0))
    start = StartState(float(here[0]), float(here[1]), z, yaw, pitch)
    xs = np.arange(x0, x1 + 1e-9, 2.0)
    ys = np.arange(y0, y1 + 1e-9, 2.0)
    gx, gy = np.meshgrid(xs, ys)
    cells = np.stack([gx.ravel(), gy.ravel()], axis=1)
    near = _near_objects(world, cells, 8.0)
    segments: list[Segment] = []
    visited = [here.copy()]
    total = 0.0
    while total < duration_s:
        r = rng.random()
        new: list[Segment] = []
        if r < 0.15 and segments:
            target_z = float(np.clip(z + rng.choice([-1.0, 1.0]) * rng.uniform(4.0, 10.0), 10.0, 35.0))
            if abs(target_z - z) >= 2.0:
                new.append(Segment(CLIMB, abs(target_z - z) / rng.uniform(1.5, 3.0) * 1.5, up_m=target_z - z))
                z = target_z
        elif r < 0.3 and segments:
            target_pitch = float(rng.uniform(5.0, 50.0))
            if abs(target_pitch - pitch) >= 10.0:
                new.append(
                    Segment(
                        TILT,
                        abs(target_pitch - pitch) / rng.uniform(15.0, 30.0) * 1.5,
                        pitch_deg=target_pitch - pitch,
                    )
                )
                pitch = target_pitch
        elif r < 0.38 and segments:
            new.append(Segment(PAUSE, float(rng.uniform(1.0, 2.0))))
        else:
            target = _choose_waypoint(world, here, cells, near, visited, rng, (10.0, 35.0), 0.0)
            if target is None:
                new.append(Segment(TURN, 4.0, yaw_deg=180.0))
                yaw += 180.0
            else:
                delta = target - here
                turn = _wrap_deg(math.degrees(math.atan2(delta[1], delta[0])) - yaw)
                if abs(turn) > 2.0:
                    new.append(
                        Segment(TURN, max(1.0, abs(turn) / rng.uniform(25.0, 45.0) * 1.5), yaw_deg=turn)
                    )
                    yaw += turn
                distance = float(np.linalg.norm(delta))
                climb = 0.0
                if rng.random() < 0.3:
                    climb = float(np.clip(z + rng.uniform(-5.0, 5.0), 10.0, 35.0) - z)
                    z += climb
                new.append(
                    Segment(FLY, distance / rng.uniform(3.0, 6.0) * 1.5, forward_m=distance, up_m=climb)
                )
                here = target.astype(np.float64)
                visited.append(here.copy())
        for seg in new:
            segments.append(seg)
            total += seg.duration_s
    return Trajectory(start, segments)


def plan_trajectory(world: World, duration_s: float, rng: np.random.Generator) -> Trajectory:
    """A walk indoors, a flight outdoors."""
    if world.kind == INDOOR:
        return plan_walk(world, duration_s, rng, pitch_deg=float(rng.uniform(8.0, 15.0)))
    return plan_flight(world, duration_s, rng)
