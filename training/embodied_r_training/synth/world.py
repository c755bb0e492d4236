"""Synthetic worlds: a room (or an outdoor plaza) holding labelled objects, generated from a seed.

Coordinates are metres in a fixed world frame with REP-103 axes (x, y horizontal, z up). A room spans
``[-sx/2, sx/2] x [-sy/2, sy/2] x [0, height]``; outdoors the ground is the plane z = 0 and buildings stand
around an open plaza. Every object is one primitive, an upright box or a vertical cylinder, rotated by
``yaw`` about z, with a category, a colour name and its real size, so questions about it have exact answers.
Within one world a (colour, category) pair is unique, so "the red chair" always names one object.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

INDOOR = "indoor"
OUTDOOR = "outdoor"
BOX = "box"
CYLINDER = "cylinder"

# Colour names and the RGB the renderer paints them with (chosen to stay distinct under shading).
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 40, 40),
    "orange": (235, 125, 30),
    "yellow": (230, 200, 45),
    "green": (50, 150, 60),
    "blue": (45, 85, 200),
    "purple": (130, 60, 170),
    "pink": (235, 140, 175),
    "brown": (120, 75, 40),
    "white": (235, 235, 228),
    "grey": (130, 130, 130),
    "black": (35, 35, 38),
    "beige": (215, 195, 150),
}

# Where an object stands: anywhere on the floor, with its back against a wall, or hung on a wall.
FLOOR = "floor"
WALL = "wall"
WALL_MOUNTED = "wall_mounted"
PERIMETER = "perimeter"  # outdoor buildings around the plaza


@dataclass(frozen=True)
class Category:
    """A kind of object: its shape, typical size (x length, y depth, z height; a cylinder's x and y are its
    diameter), where it stands, at most how many a world holds, and the colours it comes in."""

    name: str
    shape: str
    size: tuple[float, float, float]
    placement: str
    max_count: int
    colours: tuple[str, ...]
    mount_z: float = 0.0  # WALL_MOUNTED: height of the object's bottom edge
    size_jitter: float = 0.15  # each dimension is scaled by U(1 - jitter, 1 + jitter)


_ALL = tuple(COLOURS)
_FURNITURE = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "white", "grey", "black")
INDOOR_CATEGORIES: tuple[Category, ...] = (
    Category("chair", BOX, (0.5, 0.5, 0.9), FLOOR, 4, _FURNITURE),
    Category("table", BOX, (1.4, 0.8, 0.75), FLOOR, 2, _FURNITURE),
    Category("sofa", BOX, (2.0, 0.9, 0.85), WALL, 1, _FURNITURE),
    Category("bed", BOX, (2.0, 1.6, 0.55), WALL, 1, _FURNITURE),
    Category("lamp", CYLINDER, (0.3, 0.3, 1.6), FLOOR, 2, _FURNITURE),
    Category("plant", CYLINDER, (0.5, 0.5, 1.0), FLOOR, 3, ("green", "yellow", "orange", "pink")),
    Category("tv", BOX, (1.2, 0.08, 0.7), WALL_MOUNTED, 1, ("black", "grey", "white"), mount_z=1.0),
    Category("door", BOX, (0.9, 0.06, 2.05), WALL, 2, _FURNITURE, size_jitter=0.05),
    Category("box", BOX, (0.5, 0.5, 0.5), FLOOR, 4, _FURNITURE),
    Category("bookshelf", BOX, (0.9, 0.35, 1.8), WALL, 2, _FURNITURE),
    Category("cabinet", BOX, (1.0, 0.5, 0.9), WALL, 2, _FURNITURE),
    Category("trash can", CYLINDER, (0.35, 0.35, 0.6), FLOOR, 2, _FURNITURE),
    Category("stool", CYLINDER, (0.4, 0.4, 0.5), FLOOR, 3, _FURNITURE),
    Category("fridge", BOX, (0.7, 0.7, 1.8), WALL, 1, ("white", "grey", "black", "red", "blue")),
)
OUTDOOR_CATEGORIES: tuple[Category, ...] = (
    Category("building", BOX, (18.0, 12.0, 20.0), PERIMETER, 12, _ALL, size_jitter=0.45),
    Category("car", BOX, (4.5, 1.8, 1.5), FLOOR, 4, _FURNITURE, size_jitter=0.1),
    Category("truck", BOX, (8.0, 2.5, 3.2), FLOOR, 2, _FURNITURE, size_jitter=0.1),
    Category("tree", CYLINDER, (3.0, 3.0, 7.0), FLOOR, 3, ("green", "orange", "yellow"), size_jitter=0.25),
    Category("lamp post", CYLINDER, (0.3, 0.3, 6.0), FLOOR, 3, ("black", "grey", "white", "green")),
    Category("container", BOX, (6.0, 2.4, 2.6), FLOOR, 3, _FURNITURE, size_jitter=0.05),
    Category("water tank", CYLINDER, (5.0, 5.0, 6.0), FLOOR, 1, ("white", "grey", "blue")),
    Category("kiosk", BOX, (3.0, 3.0, 3.0), FLOOR, 2, _FURNITURE),
)
CATEGORIES: dict[str, Category] = {c.name: c for c in INDOOR_CATEGORIES + OUTDOOR_CATEGORIES}
_PLURALS = {"box": "boxes", "bookshelf": "bookshelves"}


def plural(category: str) -> str:
    """The plural of a category name ("box" -> "boxes")."""
    return _PLURALS.get(category, category + "s")


@dataclass(frozen=True)
class SceneObject:
    """One object: ``position`` is the centre of its bounding box, ``size`` its full extents along its own
    x, y, z axes (a cylinder: diameter, diameter, height), ``yaw`` its rotation about z in radians.
    ``id`` runs 1..n within a world (0 marks "no object" in the renderer's id mask)."""

    id: int
    category: str
    colour: str
    shape: str
    size: tuple[float, float, float]
    position: tuple[float, float, float]
    yaw: float = 0.0

    @property
    def name(self) -> str:
        """How questions name the object, e.g. "red chair" (unique within its world)."""
        return f"{self.colour} {self.category}"

    @property
    def rgb(self) -> tuple[int, int, int]:
        """The RGB the renderer paints this object with."""
        return COLOURS[self.colour]

    @property
    def longest_dimension(self) -> float:
        """The largest of length, width and height (m)."""
        return max(self.size)

    def corners(self) -> np.ndarray:
        """The 8 corners of the (oriented) bounding box, (8, 3) in world coordinates."""
        half = np.asarray(self.size, dtype=np.float64) / 2
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
        local = signs * half
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        return local @ rot.T + np.asarray(self.position)

    def footprint_distance(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Horizontal distance from points (x, y) to the object's footprint (0 inside it)."""
        dx = np.asarray(x, dtype=np.float64) - self.position[0]
        dy = np.asarray(y, dtype=np.float64) - self.position[1]
        if self.shape == CYLINDER:
            return np.maximum(np.hypot(dx, dy) - self.size[0] / 2, 0.0)
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        lx, ly = c * dx + s * dy, -s * dx + c * dy  # into the object's frame
        ex = np.maximum(np.abs(lx) - self.size[0] / 2, 0.0)
        ey = np.maximum(np.abs(ly) - self.size[1] / 2, 0.0)
        return np.hypot(ex, ey)

    def footprint_extent(self) -> tuple[float, float]:
        """Half extents of the axis-aligned box around the footprint (x, y)."""
        if self.shape == CYLINDER:
            return self.size[0] / 2, self.size[0] / 2
        c, s = abs(math.cos(self.yaw)), abs(math.sin(self.yaw))
        hx, hy = self.size[0] / 2, self.size[1] / 2
        return c * hx + s * hy, s * hx + c * hy


@dataclass(frozen=True)
class Room:
    """A box-shaped room centred on the origin: ``size`` = (x extent, y extent, height) in metres."""

    size: tuple[float, float, float]

    @property
    def floor_area(self) -> float:
        """Floor area in square metres."""
        return self.size[0] * self.size[1]


@dataclass(frozen=True)
class World:
    """A scene: its kind, the room (None outdoors), the objects, the area the camera may move in
    (``bounds`` = x_min, x_max, y_min, y_max), surface colours and the seed of the procedural textures."""

    kind: str
    objects: tuple[SceneObject, ...]
    bounds: tuple[float, float, float, float]
    room: Room | None = None
    floor_rgb: tuple[int, int, int] = (150, 120, 90)
    wall_rgb: tuple[int, int, int] = (200, 195, 180)
    ceiling_rgb: tuple[int, int, int] = (235, 235, 230)
    texture_seed: int = 0

    def __post_init__(self) -> None:
        ids = [o.id for o in self.objects]
        if ids != list(range(1, len(ids) + 1)):
            raise ValueError(f"object ids must run 1..n in order, got {ids}")
        names = [o.name for o in self.objects]
        if len(set(names)) != len(names):
            raise ValueError(f"object names (colour + category) must be unique within a world, got {names}")
        if self.kind not in (INDOOR, OUTDOOR):
            raise ValueError(f"world kind must be {INDOOR!r} or {OUTDOOR!r}, got {self.kind!r}")
        if self.kind == INDOOR and self.room is None:
            raise ValueError("an indoor world needs a room")

    def object(self, object_id: int) -> SceneObject:
        """The object with this id."""
        return self.objects[object_id - 1]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON; floats are kept exact, so :meth:`from_dict` rebuilds the same world."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> World:
        """Inverse of :meth:`to_dict`."""
        objects = tuple(
            SceneObject(
                id=int(o["id"]),
                category=o["category"],
                colour=o["colour"],
                shape=o["shape"],
                size=tuple(o["size"]),
                position=tuple(o["position"]),
                yaw=float(o["yaw"]),
            )
            for o in data["objects"]
        )
        room = Room(tuple(data["room"]["size"])) if data.get("room") else None
        return cls(
            kind=data["kind"],
            objects=objects,
            bounds=tuple(data["bounds"]),
            room=room,
            floor_rgb=tuple(data["floor_rgb"]),
            wall_rgb=tuple(data["wall_rgb"]),
            ceiling_rgb=tuple(data["ceiling_rgb"]),
            texture_seed=int(data["texture_seed"]),
        )


# ---------------------------------------------------------------------------------------------- generation

WALL_CLEARANCE_M = 0.6  # the camera keeps this far from walls
OBJECT_CLEARANCE_M = 0.45  # ... and from object footprints
GRID_M = 0.25  # resolution of the free-space grid


def free_space(
    world: World, clearance: float = OBJECT_CLEARANCE_M, grid: float = GRID_M
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cells of a grid over ``world.bounds`` where the camera may stand: (xs, ys, free[ny, nx])."""
    x0, x1, y0, y1 = world.bounds
    xs = np.arange(x0, x1 + 1e-9, grid)
    ys = np.arange(y0, y1 + 1e-9, grid)
    gx, gy = np.meshgrid(xs, ys)
    free = np.ones(gx.shape, dtype=bool)
    for obj in world.objects:
        free &= obj.footprint_distance(gx, gy) >= clearance
    return xs, ys, free


def _size(category: Category, rng: np.random.Generator) -> tuple[float, float, float]:
    scale = rng.uniform(1 - category.size_jitter, 1 + category.size_jitter, size=3)
    size = [round(float(d * s), 3) for d, s in zip(category.size, scale, strict=True)]
    if category.shape == CYLINDER:
        size[1] = size[0]
    return size[0], size[1], size[2]


def _overlaps(candidate: SceneObject, placed: list[SceneObject], gap: float) -> bool:
    cx, cy = candidate.footprint_extent()
    for other in placed:
        ox, oy = other.footprint_extent()
        if (
            abs(candidate.position[0] - other.position[0]) < cx + ox + gap
            and abs(candidate.position[1] - other.position[1]) < cy + oy + gap
        ):
            return True
    return False


def _pick_category(
    categories: tuple[Category, ...], counts: dict[str, int], used: set[str], rng: np.random.Generator
) -> Category | None:
    options = [
        c
        for c in categories
        if counts.get(c.name, 0) < c.max_count and any(f"{col} {c.name}" not in used for col in c.colours)
    ]
    if not options:
        return None
    return options[int(rng.integers(0, len(options)))]


def _new_object(
    object_id: int,
    category: Category,
    size: tuple[float, float, float],
    position: tuple[float, float, float],
    yaw: float,
    used: set[str],
    rng: np.random.Generator,
) -> SceneObject:
    """An object of ``category`` with a colour not yet used for that category."""
    return SceneObject(
        object_id, category.name, _pick_colour(category, used, rng), category.shape, size, position, yaw
    )


def _pick_colour(category: Category, used: set[str], rng: np.random.Generator) -> str:
    colours = [c for c in category.colours if f"{c} {category.name}" not in used]
    return colours[int(rng.integers(0, len(colours)))]


def _place_indoor(
    category: Category, size: tuple[float, float, float], room: Room, rng: np.random.Generator
) -> tuple[tuple[float, float, float], float]:
    """A random position and yaw for ``category`` in ``room`` (not yet checked against other objects)."""
    hx, hy, height = room.size[0] / 2, room.size[1] / 2, room.size[2]
    length, depth, tall = size
    z = category.mount_z + tall / 2 if category.placement == WALL_MOUNTED else tall / 2
    z = min(z, height - tall / 2 - 0.05)
    if category.placement in (WALL, WALL_MOUNTED):
        wall = int(rng.integers(0, 4))  # +y, -y, +x, -x
        along = hx if wall < 2 else hy
        s = float(rng.uniform(-along + length / 2 + 0.1, along - length / 2 - 0.1))
        inset = depth / 2 + 0.005
        if wall == 0:
            return (s, hy - inset, z), 0.0
        if wall == 1:
            return (s, -hy + inset, z), math.pi
        if wall == 2:
            return (hx - inset, s, z), math.pi / 2
        return (-hx + inset, s, z), -math.pi / 2
    margin = max(length, depth) / 2 + 0.1
    x = float(rng.uniform(-hx + margin, hx - margin))
    y = float(rng.uniform(-hy + margin, hy - margin))
    if rng.random() < 0.7:  # most furniture is aligned with the walls
        yaw = float(rng.integers(0, 4)) * math.pi / 2 + float(rng.normal(0, 0.05))
    else:
        yaw = float(rng.uniform(-math.pi, math.pi))
    return (x, y, z), yaw


def random_room(rng: np.random.Generator) -> Room:
    """A room's size as indoor worlds draw it (4-9 m by 3.5-7 m, 2.5-3.1 m high, to the centimetre)."""
    sx = round(float(rng.uniform(4.0, 9.0)), 2)
    sy = round(float(rng.uniform(3.5, 7.0)), 2)
    height = round(float(rng.uniform(2.5, 3.1)), 2)
    return Room((sx, sy, height))


def generate_indoor(rng: np.random.Generator, n_objects: int | None = None) -> World:
    """A random room with 5-15 objects (fewer in small rooms), leaving space to walk about."""
    room = random_room(rng)
    sx, sy, _ = room.size
    capacity = max(5, min(15, int(sx * sy / 2.6)))
    target = n_objects if n_objects is not None else int(rng.integers(5, capacity + 1))
    m = WALL_CLEARANCE_M
    bounds = (-sx / 2 + m, sx / 2 - m, -sy / 2 + m, sy / 2 - m)
    wall_colours = [(205, 200, 185), (190, 205, 215), (215, 200, 200), (200, 210, 190), (225, 220, 205)]
    floor_colours = [(150, 115, 80), (120, 120, 125), (170, 150, 120), (110, 85, 65), (160, 160, 150)]
    texture_seed = int(rng.integers(0, 2**31))
    wall_rgb = wall_colours[int(rng.integers(0, len(wall_colours)))]
    floor_rgb = floor_colours[int(rng.integers(0, len(floor_colours)))]

    placed: list[SceneObject] = []
    counts: dict[str, int] = {}
    used: set[str] = set()
    for _ in range(target * 40):
        if len(placed) >= target:
            break
        category = _pick_category(INDOOR_CATEGORIES, counts, used, rng)
        if category is None:
            break
        size = _size(category, rng)
        position, yaw = _place_indoor(category, size, room, rng)
        candidate = _new_object(len(placed) + 1, category, size, position, yaw, used, rng)
        if _overlaps(candidate, placed, gap=0.3):
            continue
        # Keep at least 40% of the walkable grid free, so the camera can walk around the objects.
        trial = World(INDOOR, tuple(placed + [candidate]), bounds, room)
        if free_space(trial)[2].mean() < 0.4:
            continue
        placed.append(candidate)
        counts[category.name] = counts.get(category.name, 0) + 1
        used.add(candidate.name)
    return World(
        INDOOR, tuple(placed), bounds, room, floor_rgb=floor_rgb, wall_rgb=wall_rgb, texture_seed=texture_seed
    )


def generate_outdoor(rng: np.random.Generator, n_objects: int | None = None) -> World:
    """An open plaza with buildings around it and 5-10 objects on it, for drone flights above.

    The camera's ``bounds`` are the plaza less 3 m; the renderer paves the plaza and grasses the rest.
    """
    half = round(float(rng.uniform(30.0, 45.0)), 1)
    placed: list[SceneObject] = []
    used: set[str] = set()
    building = CATEGORIES["building"]
    # Buildings along the four sides, just outside the plaza, at most a quarter of them on each side.
    per_side = building.max_count // 4
    for side in range(4):
        along = -half
        on_side = 0
        while along < half - 8 and on_side < per_side:
            size = _size(building, rng)
            length = min(size[0], half - along)
            if length < 8:
                break
            size = (round(length, 3), size[1], size[2])
            offset = half + 2.0 + size[1] / 2 + float(rng.uniform(0, 4))
            centre = along + size[0] / 2
            x, y, yaw = {
                0: (centre, offset, 0.0),
                1: (-centre, -offset, math.pi),
                2: (offset, -centre, math.pi / 2),
                3: (-offset, centre, -math.pi / 2),
            }[side]
            obj = SceneObject(
                len(placed) + 1,
                "building",
                _pick_colour(building, used, rng),
                BOX,
                size,
                (x, y, size[2] / 2),
                yaw,
            )
            placed.append(obj)
            used.add(obj.name)
            on_side += 1
            along += size[0] + float(rng.uniform(3, 10))
    counts = {"building": len(placed)}
    target = n_objects if n_objects is not None else int(rng.integers(5, 11))
    ground_categories = tuple(c for c in OUTDOOR_CATEGORIES if c.placement == FLOOR)
    n_buildings = len(placed)
    for _ in range(target * 40):
        if len(placed) - n_buildings >= target:
            break
        category = _pick_category(ground_categories, counts, used, rng)
        if category is None:
            break
        size = _size(category, rng)
        margin = max(size[0], size[1]) / 2 + 2
        position = (
            float(rng.uniform(-half + margin, half - margin)),
            float(rng.uniform(-half + margin, half - margin)),
            size[2] / 2,
        )
        yaw = float(rng.uniform(-math.pi, math.pi))
        candidate = _new_object(len(placed) + 1, category, size, position, yaw, used, rng)
        if _overlaps(candidate, placed, gap=2.0):
            continue
        placed.append(candidate)
        counts[category.name] = counts.get(category.name, 0) + 1
        used.add(candidate.name)
    ground = [(120, 125, 115), (135, 130, 120), (110, 120, 105)]
    return World(
        OUTDOOR,
        tuple(placed),
        (-half + 3, half - 3, -half + 3, half - 3),
        None,
        floor_rgb=ground[int(rng.integers(0, len(ground)))],
        wall_rgb=(95, 140, 75),  # outdoors: the grass beyond the plaza
        ceiling_rgb=(150, 185, 225),  # outdoors: the sky at the zenith
        texture_seed=int(rng.integers(0, 2**31)),
    )


def generate_world(rng: np.random.Generator, outdoor: bool = False) -> World:
    """An indoor room or, with ``outdoor``, a plaza for a drone flight."""
    return generate_outdoor(rng) if outdoor else generate_indoor(rng)
