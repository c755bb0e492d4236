"""Long synthetic missions: an egocentric walk through room after room, planned in one mission frame.

A mission is the synth generator's rooms laid out along a corridor (room ``r``'s centre at ``(x_r, 0)``,
neighbouring walls :data:`CORRIDOR_GAP_M` apart; each room a world as ``embodied-r synth`` draws it, with
its own seed) and ONE continuous camera trajectory through them, in the mission frame (the odometry frame
of the bag): the robot walks about a room (:func:`~.trajectory.plan_walk`, as synth does), then walks in
a straight line to the start of the next room's walk, room after room. Now and then it goes back to a
room it saw before (``revisit_probability``, at most ``revisit_reach`` rooms back along the corridor):
the same objects seen again, later.

Some objects are named alike on purpose: in a share of the rooms (``recurring_share``) one object takes
the colour of an object of the same category in a far-apart room (at least half the rooms away), so the
same "red chair" stands in two places seen minutes apart, and questions about the last (or first)
sighting of a name, or counts of a category, have evidence spread over the mission.

The mission is cut into *pieces*, each a stretch of time spent in one world: a room visit, or the walk
between two rooms, rendered as a plain hall (an empty room just large enough for that straight walk).
Each world is rendered in its own frame (rooms are centred on their origin); a piece's ``offset`` moves
that frame into the mission frame. A piece is also a scene in the form ``embodied-r synth`` writes
(``scene.json``: world, trajectory, start stamp, camera), which the ground-truth perceiver loads for key
frames inside that piece; a single scene.json cannot hold the mission (one world per file, and names
unique within a world).

Everything is deterministic for (seed, minutes) and the other settings: the order of visits, each room
and each walk come from their own seed streams.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace

import numpy as np

from embodied_r_ros.config import ConfigError, param
from embodied_r_ros.frames import NS_PER_S, Pose

from .bag_writer import DEFAULT_START_S, STORAGES
from .trajectory import PAUSE, TURN, WALK, Segment, StartState, Trajectory, plan_walk
from .visibility import DEFAULT_MIN_FRACTION
from .world import INDOOR, Room, SceneObject, World, generate_indoor

CORRIDOR_GAP_M = 2.0  # between the facing walls of neighbouring rooms
HALL_MARGIN_M = 1.0  # the hall's walls stand this far beyond both ends of the walk through it
HALL_HEIGHT_M = 2.7
HALL_WALL_RGB = (210, 208, 200)
HALL_FLOOR_RGB = (128, 128, 132)
CAMERA_HEIGHT_M = 1.25
PITCH_DEG = 10.0  # one camera tilt (down) for the whole mission
TRANSIT_SPEED_MPS = (0.8, 1.2)
TURN_RATE_DPS = (45.0, 90.0)
MIN_ROOM_WALK_S = 15.0  # a room visit lasts at least this long, however long the walk to it took
ROOM = "room"
HALL = "hall"
# Seed streams: each part of a mission draws from its own, so that changing one leaves the others.
_ORDER, _ROOMS, _WALKS, _RECURRING = 0, 1, 2, 3
QUESTION_STREAM = 4  # the questions' seed stream (drawn by the writer)


@dataclass(frozen=True)
class MissionConfig:
    """A mission's settings; invalid values raise ConfigError naming the setting."""

    minutes: float = param(5.0, "mission length in minutes (5)", flag="--minutes")
    seed: int = param(
        0, "seed; the mission depends only on (seed, minutes) and these settings", flag="--seed"
    )
    fps: float = param(
        2.0, "camera frames per second (2: above the key-frame candidates' 1 fps)", flag="--fps"
    )
    odom_hz: float = param(10.0, "odometry messages per second (10)", flag="--odom-hz")
    width: int = 320
    height: int = 240
    hfov_deg: float = param(70.0, "horizontal field of view in degrees (70)", flag="--hfov")
    rooms_per_minute: float = param(1.0, "room visits per minute (1)", flag="--rooms-per-minute")
    revisit_probability: float = param(
        0.2, "chance that a visit goes back to a room seen before (0.2)", flag="--revisit-probability"
    )
    revisit_reach: int = param(3, "a revisit goes back at most this many rooms (3)", flag="--revisit-reach")
    recurring_share: float = param(
        0.5,
        "share of rooms given an object named like one in a far-apart room (0.5)",
        flag="--recurring-share",
    )
    storage: str = param("mcap", "rosbag2 storage (mcap)", choices=STORAGES, flag="--storage")
    compressed: bool = param(True, "JPEG images (raw rgb8 is ~15x larger)", flag="--compressed")
    jpeg_quality: int = param(85, "JPEG quality (85)", flag="--jpeg-quality")
    start_s: int = param(
        DEFAULT_START_S, "stamp of the first message, s since the epoch", flag="--start-time"
    )
    min_fraction: float = param(
        DEFAULT_MIN_FRACTION,
        "share of the image an object must cover to be seen (0.002)",
        flag="--min-fraction",
    )
    merge_gap_s: float = param(
        2.0, "sightings of one object less than this far apart are one sighting (2 s)", flag="--merge-gap"
    )
    questions_per_kind: int = param(5, "questions per kind (5)", flag="--questions-per-kind")

    def __post_init__(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise ConfigError(message)

        check(0 < self.minutes <= 240, f"--minutes must be in (0, 240], got {self.minutes}")
        check(0 <= self.seed < 2**63, f"--seed must be a non-negative integer, got {self.seed}")
        check(0 < self.fps <= 30, f"--fps must be in (0, 30], got {self.fps}")
        check(0 < self.odom_hz <= 100, f"--odom-hz must be in (0, 100], got {self.odom_hz}")
        check(
            32 <= self.width <= 4096 and 32 <= self.height <= 4096,
            f"the image size must be between 32x32 and 4096x4096 pixels, got {self.width}x{self.height}",
        )
        check(20 <= self.hfov_deg <= 150, f"--hfov must be in [20, 150] degrees, got {self.hfov_deg}")
        check(
            0.05 <= self.rooms_per_minute <= 6,
            f"--rooms-per-minute must be in [0.05, 6], got {self.rooms_per_minute}",
        )
        check(
            0 <= self.revisit_probability < 1,
            f"--revisit-probability must be in [0, 1), got {self.revisit_probability}",
        )
        check(self.revisit_reach >= 1, f"--revisit-reach must be >= 1, got {self.revisit_reach}")
        check(
            0 <= self.recurring_share <= 1, f"--recurring-share must be in [0, 1], got {self.recurring_share}"
        )
        check(
            self.storage in STORAGES, f"--storage must be one of {', '.join(STORAGES)}, got {self.storage!r}"
        )
        check(1 <= self.jpeg_quality <= 100, f"--jpeg-quality must be in 1..100, got {self.jpeg_quality}")
        check(0 <= self.start_s < 2**32, f"--start-time must be in [0, 2^32) seconds, got {self.start_s}")
        check(0 < self.min_fraction < 1, f"--min-fraction must be in (0, 1), got {self.min_fraction}")
        check(self.merge_gap_s >= 0, f"--merge-gap must be >= 0 s, got {self.merge_gap_s}")
        check(
            self.questions_per_kind >= 1, f"--questions-per-kind must be >= 1, got {self.questions_per_kind}"
        )
        check(
            self.n_frames >= 2,
            f"--minutes {self.minutes} at --fps {self.fps} gives {self.n_frames} frame(s); a mission needs "
            "at least 2",
        )

    @property
    def duration_s(self) -> float:
        """The mission's length in seconds."""
        return self.minutes * 60.0

    @property
    def n_frames(self) -> int:
        """Camera frames: duration x fps, rounded."""
        return int(round(self.duration_s * self.fps))

    @property
    def n_visits(self) -> int:
        """Room visits: minutes x rooms per minute, rounded, at least one."""
        return max(1, int(round(self.minutes * self.rooms_per_minute)))

    @property
    def start_ns(self) -> int:
        """Stamp of the mission's first message (ns)."""
        return self.start_s * NS_PER_S

    def frame_times(self) -> np.ndarray:
        """Frame times in seconds from the mission start: i / fps."""
        return np.arange(self.n_frames, dtype=np.float64) / self.fps

    def stamp_ns(self, t: float) -> int:
        """The bag stamp of mission time ``t`` seconds."""
        return self.start_ns + round(float(t) * NS_PER_S)

    def seed_sequence(self, stream: int, index: int = 0) -> np.random.SeedSequence:
        """The seed of one part of the mission (see the module's streams)."""
        return np.random.SeedSequence([self.seed, int(round(self.minutes * 60_000)), stream, index])


@dataclass(frozen=True)
class Piece:
    """A stretch of the mission spent in one world: a room visit (``room`` its index along the corridor) or
    the walk between two rooms (``kind`` hall, ``room`` None). ``offset`` moves the world's frame into the
    mission frame; ``t0``-``t1`` seconds from the mission start; segments ``first``..``last - 1`` of the
    mission trajectory."""

    kind: str
    room: int | None
    world: World
    offset: tuple[float, float]
    t0: float
    t1: float
    first: int
    last: int

    def to_local(self, pose: Pose) -> Pose:
        """A mission-frame pose in this piece's world frame."""
        x, y, z = pose.position
        return Pose((x - self.offset[0], y - self.offset[1], z), pose.orientation)

    def scene_trajectory(self, mission: Trajectory) -> Trajectory:
        """This piece's part of ``mission`` in the world's frame, t = 0 at ``t0`` (what scene.json holds)."""
        x, y, z = mission.position(self.t0)
        start = StartState(
            float(x - self.offset[0]),
            float(y - self.offset[1]),
            float(z),
            mission.yaw_deg(self.t0),
            mission.pitch_deg(self.t0),
        )
        return Trajectory(start, mission.segments[self.first : self.last])


@dataclass(frozen=True)
class MissionPlan:
    """Rooms (worlds in their own frames) with their offsets, the mission trajectory, its pieces in time
    order, and the recurring names planted: (room, object id, the far room it copies) each."""

    config: MissionConfig
    rooms: tuple[World, ...]
    offsets: tuple[tuple[float, float], ...]
    trajectory: Trajectory
    pieces: tuple[Piece, ...]
    recurring: tuple[tuple[int, int, int], ...]

    def piece_at(self, t: float) -> Piece:
        """The piece the camera is in at ``t`` seconds (a boundary belongs to the later piece)."""
        starts = [p.t0 for p in self.pieces]
        return self.pieces[max(0, bisect.bisect_right(starts, t + 1e-9) - 1)]

    def room_pieces(self, room: int) -> list[Piece]:
        """The visits of one room, in time order."""
        return [p for p in self.pieces if p.kind == ROOM and p.room == room]


def _wrap_deg(angle: float) -> float:
    return (angle + 180.0) % 360.0 - 180.0


def visit_order(config: MissionConfig) -> list[int]:
    """Room indices in the order visited: the next room along the corridor, or now and then (see the
    config) one of the last ``revisit_reach`` rooms other than the current one."""
    rng = np.random.default_rng(config.seed_sequence(_ORDER))
    order = [0]
    newest = 0
    for _ in range(1, config.n_visits):
        back = [r for r in range(max(0, newest - config.revisit_reach), newest + 1) if r != order[-1]]
        if newest >= 1 and back and rng.random() < config.revisit_probability:
            order.append(back[int(rng.integers(0, len(back)))])
        else:
            newest += 1
            order.append(newest)
    return order


def corridor_offsets(rooms: tuple[World, ...]) -> tuple[tuple[float, float], ...]:
    """Room centres along the corridor (x axis), neighbouring walls :data:`CORRIDOR_GAP_M` apart."""
    offsets, x = [], 0.0
    for i, world in enumerate(rooms):
        if i:
            x += rooms[i - 1].room.size[0] / 2 + CORRIDOR_GAP_M + world.room.size[0] / 2
        offsets.append((round(x, 3), 0.0))
    return tuple(offsets)


def plant_recurring(
    rooms: list[World], share: float, rng: np.random.Generator
) -> tuple[list[World], list[tuple[int, int, int]]]:
    """In about ``share`` of the rooms, give one object the colour of an object of its category in a room
    at least half the rooms away (a name the room does not hold yet). Returns the rooms and the planted
    (room, object id, source room) triples."""
    n = len(rooms)
    far = max(1, n // 2)
    planted: list[tuple[int, int, int]] = []
    for j in rng.permutation(n).tolist():
        if rng.random() >= share:
            continue
        names = {o.name for o in rooms[j].objects}
        taken = {obj for room, obj, _ in planted if room == j}
        choices = [
            (i, source, target)
            for i in range(n)
            if abs(i - j) >= far
            for source in rooms[i].objects
            for target in rooms[j].objects
            if target.category == source.category and source.name not in names and target.id not in taken
        ]
        if not choices:
            continue
        i, source, target = choices[int(rng.integers(0, len(choices)))]
        objects = tuple(
            replace(o, colour=source.colour) if o.id == target.id else o for o in rooms[j].objects
        )
        rooms[j] = replace(rooms[j], objects=objects)
        planted.append((j, target.id, i))
    return rooms, sorted(planted)


def hall_world(a: np.ndarray, b: np.ndarray, seed: int) -> tuple[World, tuple[float, float]]:
    """An empty room just large enough for a straight walk from ``a`` to ``b`` (mission frame), and its
    offset (its centre in the mission frame)."""
    lo = np.minimum(a, b) - HALL_MARGIN_M
    hi = np.maximum(a, b) + HALL_MARGIN_M
    sx, sy = (float(v) for v in hi - lo)
    centre = (float((lo[0] + hi[0]) / 2), float((lo[1] + hi[1]) / 2))
    m = 0.5
    world = World(
        INDOOR,
        (),
        (-sx / 2 + m, sx / 2 - m, -sy / 2 + m, sy / 2 - m),
        Room((sx, sy, HALL_HEIGHT_M)),
        floor_rgb=HALL_FLOOR_RGB,
        wall_rgb=HALL_WALL_RGB,
        texture_seed=seed,
    )
    return world, centre


def _turn(angle_deg: float, rng: np.random.Generator) -> Segment:
    rate = float(rng.uniform(*TURN_RATE_DPS))
    return Segment(TURN, max(0.6, abs(angle_deg) / rate * 1.5), yaw_deg=angle_deg)


def plan_mission(config: MissionConfig) -> MissionPlan:
    """The rooms, their layout, the visits and the mission trajectory (see the module docstring)."""
    order = visit_order(config)
    n_rooms = max(order) + 1
    rooms = [generate_indoor(np.random.default_rng(config.seed_sequence(_ROOMS, r))) for r in range(n_rooms)]
    rooms, recurring = plant_recurring(
        rooms, config.recurring_share, np.random.default_rng(config.seed_sequence(_RECURRING))
    )
    offsets = corridor_offsets(tuple(rooms))
    per_visit = config.duration_s / len(order)
    end_s = float(config.frame_times()[-1])
    segments: list[Segment] = []
    pieces: list[Piece] = []
    start: StartState | None = None
    here = np.zeros(2)
    yaw = 0.0  # unwrapped heading (deg), as the trajectory counts it
    t = 0.0
    for visit, room in enumerate(order):
        rng = np.random.default_rng(config.seed_sequence(_WALKS, visit))
        offset = np.asarray(offsets[room])
        target_end = end_s + 1.0 if visit == len(order) - 1 else (visit + 1) * per_visit
        # The transit's length is known only once the walk's start is: estimate it from the room's centre.
        transit_guess = 0.0 if visit == 0 else float(np.linalg.norm(offset - here)) / TRANSIT_SPEED_MPS[0] + 3
        walk = plan_walk(
            rooms[room],
            max(MIN_ROOM_WALK_S, target_end - t - transit_guess),
            rng,
            height=CAMERA_HEIGHT_M,
            pitch_deg=PITCH_DEG,
        )
        entry = np.array([walk.start.x, walk.start.y]) + offset
        if visit == 0:
            start = replace(walk.start, x=float(entry[0]), y=float(entry[1]))
            yaw = walk.start.yaw_deg
        else:
            transit: list[Segment] = []
            delta = entry - here
            heading = math.degrees(math.atan2(delta[1], delta[0]))
            first_turn = _wrap_deg(heading - yaw)
            if abs(first_turn) > 2.0:
                transit.append(_turn(first_turn, rng))
            distance = float(np.linalg.norm(delta))
            transit.append(
                Segment(WALK, distance / float(rng.uniform(*TRANSIT_SPEED_MPS)), forward_m=distance)
            )
            last_turn = _wrap_deg(walk.start.yaw_deg - (yaw + first_turn))
            if abs(last_turn) > 2.0:
                transit.append(_turn(last_turn, rng))
            hall, centre = hall_world(here, entry, int(rng.integers(0, 2**31)))
            duration = sum(s.duration_s for s in transit)
            pieces.append(
                Piece(HALL, None, hall, centre, t, t + duration, len(segments), len(segments) + len(transit))
            )
            segments += transit
            t += duration
            yaw += first_turn + last_turn
        # Continue with the room's walk: its segments are relative, so they run on from the entry pose.
        walk_segments = list(walk.segments)
        duration = sum(s.duration_s for s in walk_segments)
        pieces.append(
            Piece(ROOM, room, rooms[room], (float(offset[0]), float(offset[1])), t, t + duration,
                  len(segments), len(segments) + len(walk_segments))
        )  # fmt: skip
        segments += walk_segments
        t += duration
        yaw += sum(s.yaw_deg for s in walk_segments)
        end = walk.position(walk.duration_s)
        here = np.array([end[0], end[1]]) + offset
    if t < end_s:  # a walk shorter than asked (never expected): stand still to the end
        segments.append(Segment(PAUSE, end_s - t + 1.0))
        pieces[-1] = replace(pieces[-1], t1=t + segments[-1].duration_s, last=len(segments))
    # Long walks between rooms may use up the time before the last visits: drop what starts after the end.
    pieces = [p for p in pieces if p.t0 <= end_s]
    segments = segments[: pieces[-1].last]
    kept = max(p.room for p in pieces if p.room is not None) + 1  # new rooms come in corridor order
    recurring = [r for r in recurring if r[0] < kept and r[2] < kept]
    assert start is not None
    trajectory = Trajectory(start, segments)
    return MissionPlan(
        config, tuple(rooms[:kept]), offsets[:kept], trajectory, tuple(pieces), tuple(recurring)
    )


def scene_dict(plan: MissionPlan, index: int, camera: dict, bag: str) -> dict:
    """Piece ``index`` as a ``scene.json`` of ``embodied-r synth`` (world, trajectory in the world's frame,
    start stamp, camera), loadable by the ground-truth perceiver for key frames within the piece."""
    piece = plan.pieces[index]
    config = plan.config
    return {
        "scene": f"piece_{index:04d}",
        "seed": config.seed,
        "index": index,
        "kind": piece.kind,
        "room": piece.room,
        "offset": list(piece.offset),
        "bag": bag,
        "start_ns": config.stamp_ns(piece.t0),
        "end_ns": config.stamp_ns(piece.t1),
        "rate_hz": config.fps,
        "camera": camera,
        "world": piece.world.to_dict(),
        "trajectory": piece.scene_trajectory(plan.trajectory).to_dict(),
    }


def mission_objects(plan: MissionPlan) -> list[tuple[int, int, SceneObject]]:
    """Every room's objects with mission-wide ids 1..n (room by room, in id order): (mission id, room, object
    in its room's frame)."""
    found = []
    for room, world in enumerate(plan.rooms):
        for obj in world.objects:
            found.append((len(found) + 1, room, obj))
    return found
