"""A CPU ray caster in numpy: pinhole RGB frames of a :class:`~.world.World`, with object ids and depth.

The camera sits at the body origin and looks along body x (REP-103: x forward, y left, z up); image u
grows to the body's right (-y) and v downwards (-z). Every pixel's ray is cast at once, vectorised:

- the room is a box seen from inside, so the floor, ceiling and walls hit is the nearest exit of the ray
  through the box's three slab pairs (outdoors: the ground plane z = 0, else sky);
- each object is intersected only over the pixels of its projected bounding box (slab test for boxes,
  quadratic plus caps for cylinders), and wins a pixel when it is nearer than what is there.

Surfaces are shaded with procedural textures hashed from world (or object-local) coordinates: tiles and
grout on floors, panels and pictures on walls, windows on buildings, fine speckle everywhere. The pattern
is a function of the 3D point, so it stays put from frame to frame and ORB finds the same corners again;
detail finer than about two pixels fades out with distance (no flicker), and lines keep their mean
coverage when they get thinner than a pixel. Objects keep their colour (shading only scales it) and get
dark outlines along their edges, so colour names stay true.

``depth`` is the distance along the optical axis (body x), not along the ray; pixels with no object hold
0 in ``ids``. ``bench/bench_synth.py`` measures the speed (frames/s on one core).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from embodied_r_ros.frames import Pose
from embodied_r_ros.poses.ego_motion import quaternion_to_matrix

from .world import BOX, INDOOR, SceneObject, World

NEAR_M = 0.05  # corners nearer than this (or behind) make an object's pixel box the whole image
_LIGHT = np.array([0.35, 0.25, 0.90]) / np.linalg.norm([0.35, 0.25, 0.90])
_HORIZON_RGB = np.array([205.0, 218.0, 232.0], dtype=np.float32)
# Saturated colours for the pictures on the walls (features and something to look at).
_PICTURE_RGB = np.array(
    [[190, 60, 50], [50, 110, 170], [230, 190, 60], [60, 140, 90], [120, 70, 140], [30, 30, 30],
     [240, 240, 235], [200, 120, 60]], dtype=np.float32,
)  # fmt: skip
_WINDOW_RGB = np.array([55.0, 72.0, 95.0], dtype=np.float32)
# Corner index pairs (corners are numbered 4 ix + 2 iy + iz) joined by the 12 edges of a box.
_BOX_EDGES = tuple((i, i ^ bit) for i in range(8) for bit in (1, 2, 4) if i < i ^ bit)

# Background surface codes in the (flat) surface buffer.
FLOOR, CEILING, WALL_X, WALL_Y, SKY = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class CameraModel:
    """Pinhole intrinsics in pixels (no distortion); pixel centres sit at integer coordinates."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @classmethod
    def from_fov(cls, width: int, height: int, hfov_deg: float = 70.0) -> CameraModel:
        """Square pixels, principal point in the middle, ``hfov_deg`` across the width."""
        if width < 8 or height < 8:
            raise ValueError(f"image size must be at least 8x8 pixels, got {width}x{height}")
        if not 10.0 <= hfov_deg <= 170.0:
            raise ValueError(f"horizontal field of view must be in [10, 170] degrees, got {hfov_deg}")
        fx = (width / 2) / math.tan(math.radians(hfov_deg) / 2)
        return cls(int(width), int(height), fx, fx, (width - 1) / 2, (height - 1) / 2)

    @property
    def k(self) -> tuple[float, ...]:
        """The 3x3 intrinsic matrix, row-major (sensor_msgs/CameraInfo ``k``)."""
        return (self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0)

    def body_rays(self) -> np.ndarray:
        """(H, W, 3) float32 ray directions in body axes, scaled so that the x (forward) component is 1."""
        u = np.arange(self.width, dtype=np.float64)
        v = np.arange(self.height, dtype=np.float64)
        uu, vv = np.meshgrid(u, v)
        rays = np.stack([np.ones_like(uu), -(uu - self.cx) / self.fx, -(vv - self.cy) / self.fy], axis=-1)
        return rays.astype(np.float32)

    def project(self, points: np.ndarray, pose: Pose) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates (N, 2) of world ``points`` (N, 3) seen from ``pose``, and their depth (N,)
        along the optical axis (<= 0: behind the camera, the pixel coordinates are then meaningless)."""
        rot = quaternion_to_matrix(pose.orientation)
        body = (np.asarray(points, dtype=np.float64).reshape(-1, 3) - np.asarray(pose.position)) @ rot
        depth = body[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = self.cx - self.fx * body[:, 1] / depth
            v = self.cy - self.fy * body[:, 2] / depth
        return np.stack([u, v], axis=1), depth


@dataclass(frozen=True)
class RenderResult:
    """One rendered frame: ``image`` HxWx3 uint8 RGB, ``ids`` HxW int16 object ids (0: none), ``depth``
    HxW float32 metres along the optical axis (inf: sky)."""

    image: np.ndarray
    ids: np.ndarray
    depth: np.ndarray


def _hash01(i: np.ndarray, j: np.ndarray, salt: np.ndarray | int) -> np.ndarray:
    """A float32 in [0, 1) per integer cell (i, j, salt): a cheap integer hash (wrapping uint32 maths)."""
    h = i.astype(np.uint32) * np.uint32(0x9E3779B1)
    h ^= j.astype(np.uint32) * np.uint32(0x85EBCA77)
    h ^= (np.asarray(salt, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32) * np.uint32(0xC2B2AE3D)
    h ^= h >> np.uint32(15)
    h *= np.uint32(0x2C1B3C6D)
    h ^= h >> np.uint32(12)
    h *= np.uint32(0x297A2D39)
    h ^= h >> np.uint32(15)
    return (h >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / (1 << 24))


def _cells(
    u: np.ndarray, v: np.ndarray, cell_u: float, cell_v: float, salt: np.ndarray | int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hash of the (cell_u x cell_v) cell each point falls in, and the point's position in it (0..1)."""
    su, sv = u / np.float32(cell_u), v / np.float32(cell_v)
    iu, iv = np.floor(su), np.floor(sv)
    return _hash01(iu.astype(np.int64), iv.astype(np.int64), salt), su - iu, sv - iv


def _detail(cell: float, footprint: np.ndarray) -> np.ndarray:
    """Weight of a pattern with this cell size: 1 when a cell spans >= 4 pixels, 0 below 2 (no aliasing)."""
    return np.clip((np.float32(cell) / footprint - 2.0) * 0.5, 0.0, 1.0)


def _lines(
    frac_u: np.ndarray, frac_v: np.ndarray, cell: float, width: float, footprint: np.ndarray, strength: float
) -> np.ndarray:
    """Brightness factor of dark grid lines of ``width`` metres on a ``cell`` grid; lines thinner than a
    pixel are widened and lightened so that their mean coverage (and the image's look) is kept."""
    drawn = np.maximum(np.float32(width), 0.7 * footprint)
    du = np.minimum(frac_u, 1 - frac_u) * np.float32(cell)
    dv = np.minimum(frac_v, 1 - frac_v) * np.float32(cell)
    on_line = (du < drawn * 0.5) | (dv < drawn * 0.5)
    amount = np.float32(strength) * np.minimum(1.0, np.float32(width) / drawn)
    return np.where(on_line, 1.0 - amount, 1.0).astype(np.float32)


class Renderer:
    """Renders one world through one camera; holds the per-pixel rays and per-object tables."""

    def __init__(self, world: World, camera: CameraModel) -> None:
        self.world = world
        self.camera = camera
        # Rays as (3, H, W): each axis contiguous, which the per-axis slab tests read fastest.
        self._rays = np.ascontiguousarray(camera.body_rays().transpose(2, 0, 1))
        self._flat_rays = self._rays.reshape(3, -1)
        n = len(world.objects)
        self._object_rgb = np.zeros((n + 1, 3), dtype=np.float32)
        self._is_building = np.zeros(n + 1, dtype=bool)
        for obj in world.objects:
            self._object_rgb[obj.id] = obj.rgb
            self._is_building[obj.id] = obj.category == "building"
        self._corners = [obj.corners() for obj in world.objects]
        self._seed = world.texture_seed

    # ------------------------------------------------------------------------------------------ geometry

    def _background(self, d: np.ndarray, o: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Depth, surface code and face sign of the room (or ground/sky) hit of each ray (``d``: 3 x n)."""
        n = d.shape[1]
        if self.world.kind == INDOOR:
            sx, sy, height = self.world.room.size
            lo, hi = (-sx / 2, -sy / 2, 0.0), (sx / 2, sy / 2, height)
            depth = np.full(n, np.inf, dtype=np.float32)
            axis = np.zeros(n, dtype=np.int8)
            positive = np.zeros(n, dtype=bool)
            for k in range(3):  # the camera is inside the box: the exit is the nearest of three walls
                pos = d[k] > 0
                t = (np.where(pos, np.float32(hi[k]), np.float32(lo[k])) - np.float32(o[k])) / d[k]
                closer = t < depth
                depth = np.where(closer, t, depth)
                axis[closer] = k
                positive = np.where(closer, pos, positive)
            code = np.where(
                axis == 2, np.where(positive, CEILING, FLOOR), np.where(axis == 0, WALL_X, WALL_Y)
            )
            return depth, code.astype(np.int8), positive
        dz = d[2]
        ground = dz < -1e-6
        depth = np.where(ground, np.float32(-o[2]) / dz, np.inf).astype(np.float32)
        code = np.where(ground, FLOOR, SKY).astype(np.int8)
        return depth, code, np.zeros(n, dtype=bool)

    def _pixel_box(
        self, corners: np.ndarray, rot: np.ndarray, o: np.ndarray
    ) -> tuple[int, int, int, int] | None:
        """The image rows/columns (v0, v1, u0, u1) an object can cover, or None when it is out of view.

        The part of the box in front of the near plane is the hull of its front corners and of the points
        where its edges cross the plane; the projections of those bound its pixels."""
        cam = self.camera
        body = (corners - o) @ rot
        x = body[:, 0]
        front = x >= NEAR_M
        if not front.any():
            return None
        points = body[front]
        if not front.all():
            crossings = [
                body[i] + (NEAR_M - x[i]) / (x[j] - x[i]) * (body[j] - body[i])
                for i, j in _BOX_EDGES
                if front[i] != front[j]
            ]
            points = np.vstack([points, *crossings])
        u = cam.cx - cam.fx * points[:, 1] / points[:, 0]
        v = cam.cy - cam.fy * points[:, 2] / points[:, 0]
        u0, u1 = max(0, int(np.floor(u.min())) - 1), min(cam.width, int(np.ceil(u.max())) + 2)
        v0, v1 = max(0, int(np.floor(v.min())) - 1), min(cam.height, int(np.ceil(v.max())) + 2)
        if u0 >= u1 or v0 >= v1:
            return None
        return v0, v1, u0, u1

    @staticmethod
    def _hit_box(o: np.ndarray, d: np.ndarray, half: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Slab test of rays o + t d (``d``: 3 x n) against a centred box: (t, hit, face axis)."""
        n = d.shape[1]
        near = np.full(n, -np.inf, dtype=np.float32)
        far = np.full(n, np.inf, dtype=np.float32)
        axis = np.zeros(n, dtype=np.int8)
        for k in range(3):
            inv = np.float32(1.0) / d[k]  # 0 -> inf: a ray parallel to the slab is inside it or never
            t1 = np.float32(-half[k] - o[k]) * inv
            t2 = np.float32(half[k] - o[k]) * inv
            lo = np.minimum(t1, t2)
            better = lo > near
            near = np.where(better, lo, near)
            axis[better] = k
            far = np.minimum(far, np.maximum(t1, t2))
        return near, (near <= far) & (near > 1e-3), axis

    @staticmethod
    def _hit_cylinder(
        o: np.ndarray, d: np.ndarray, radius: float, half_z: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rays o + t d (``d``: 3 x n) against a centred upright cylinder: (t, hit, hit is on a cap)."""
        a = d[0] * d[0] + d[1] * d[1]
        b = 2 * (o[0] * d[0] + o[1] * d[1])
        c = o[0] ** 2 + o[1] ** 2 - radius**2
        disc = b * b - 4 * a * c
        root = np.sqrt(np.maximum(disc, 0.0))
        side0 = np.where(disc >= 0, (-b - root) / (2 * a), np.inf)
        side1 = np.where(disc >= 0, (-b + root) / (2 * a), -np.inf)
        vertical = a < 1e-12  # a ray along the axis is inside the tube or never
        side0 = np.where(vertical, -np.inf if c < 0 else np.inf, side0)
        side1 = np.where(vertical, np.inf if c < 0 else -np.inf, side1)
        inv = 1.0 / d[2]
        z1 = (-half_z - o[2]) * inv
        z2 = (half_z - o[2]) * inv
        zmin, zmax = np.minimum(z1, z2), np.maximum(z1, z2)
        cap = zmin > side0
        near = np.where(cap, zmin, side0)
        far = np.minimum(zmax, side1)
        return near, (near <= far) & (near > 1e-3), cap

    @staticmethod
    def _surface(
        obj: SceneObject, point: np.ndarray, d: np.ndarray, aux: np.ndarray, light: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Face coordinates (u, v), distance to the face's edge, Lambert term and face code of hit points
        (``point``, ``d``: 3 x n, object-local; ``aux``: the face axis (box) or the cap flag (cylinder))."""
        half = np.asarray(obj.size, dtype=np.float64) / 2
        if obj.shape == BOX:
            axis = aux.astype(np.int64)
            u = np.where(axis == 0, point[1], point[0])
            v = np.where(axis == 2, point[1], point[2])
            half_u = np.where(axis == 0, half[1], half[0])
            half_v = np.where(axis == 2, half[1], half[2])
            edge = np.minimum(half_u - np.abs(u), half_v - np.abs(v))
            sign = -np.sign(d[axis, np.arange(d.shape[1])])  # the face normal points back at the camera
            lambert = sign * light[axis]
            face = axis * 16 + sign.astype(np.int64) + 8
            return u, v, edge, lambert, face
        cap = aux
        angle = np.arctan2(point[1], point[0])
        radial = np.hypot(point[0], point[1])
        u = np.where(cap, point[0], angle * half[0])
        v = np.where(cap, point[1], point[2])
        edge = np.where(cap, half[0] - radial, half[2] - np.abs(point[2]))
        cap_sign = -np.sign(d[2])
        side_light = (point[0] * light[0] + point[1] * light[1]) / max(half[0], 1e-6)
        lambert = np.where(cap, cap_sign * light[2], side_light)
        facet = np.floor((angle + math.pi) / (math.pi / 4)).astype(np.int64) % 8  # for hashing the texture
        face = np.where(cap, 2 * 16 + cap_sign.astype(np.int64) + 8, facet + 8)
        return u, v, edge, lambert, face

    # ------------------------------------------------------------------------------------------- render

    def render(self, pose: Pose) -> RenderResult:
        """Render the world from ``pose`` (the camera's pose; see the module docstring for the axes)."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self._render(pose)

    def _render(self, pose: Pose) -> RenderResult:
        cam = self.camera
        rot = quaternion_to_matrix(pose.orientation)
        o = np.asarray(pose.position, dtype=np.float64)
        d = rot.astype(np.float32) @ self._flat_rays  # 3 x n world directions
        depth, code, positive = self._background(d, o)
        n_pixels = cam.width * cam.height
        ids = np.zeros(n_pixels, dtype=np.int16)
        obj_u = np.zeros(n_pixels, dtype=np.float32)
        obj_v = np.zeros(n_pixels, dtype=np.float32)
        obj_edge = np.zeros(n_pixels, dtype=np.float32)
        obj_shade = np.zeros(n_pixels, dtype=np.float32)
        obj_face = np.zeros(n_pixels, dtype=np.int16)
        grid = (cam.height, cam.width)
        depth2, ids2 = depth.reshape(grid), ids.reshape(grid)
        planes = [a.reshape(grid) for a in (obj_u, obj_v, obj_edge, obj_shade, obj_face)]

        for obj, corners in zip(self.world.objects, self._corners, strict=True):
            box = self._pixel_box(corners, rot, o)
            if box is None:
                continue
            v0, v1, u0, u1 = box
            c, s = math.cos(obj.yaw), math.sin(obj.yaw)
            to_local = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
            local_d = (to_local @ rot).astype(np.float32) @ self._rays[:, v0:v1, u0:u1].reshape(3, -1)
            local_o = to_local @ (o - np.asarray(obj.position))
            if obj.shape == BOX:
                t, hit, aux = self._hit_box(local_o, local_d, np.asarray(obj.size) / 2)
            else:
                t, hit, aux = self._hit_cylinder(local_o, local_d, obj.size[0] / 2, obj.size[2] / 2)
            window = depth2[v0:v1, u0:u1]
            win = hit.reshape(window.shape) & (t.reshape(window.shape) < window)
            if not win.any():
                continue
            # Surface details only for the pixels this object wins.
            flat = win.ravel()
            t_win, d_win = t[flat], local_d[:, flat]
            point = local_o[:, None] + t_win * d_win
            u, v, edge, lambert, face = self._surface(obj, point, d_win, aux[flat], to_local @ _LIGHT)
            if obj.category == "building":
                v = v + obj.size[2] / 2  # windows count floors from the ground
            window[win] = t_win
            ids2[v0:v1, u0:u1][win] = obj.id
            shade = 0.55 + 0.45 * np.clip(lambert, 0.0, 1.0)
            for plane, values in zip(planes, (u, v, edge, shade, face), strict=True):
                plane[v0:v1, u0:u1][win] = values

        image = self._shade(d, o, depth, code, positive, ids, obj_u, obj_v, obj_edge, obj_shade, obj_face)
        return RenderResult(image.reshape(cam.height, cam.width, 3), ids2, depth2)

    # ------------------------------------------------------------------------------------------ shading

    def _shade(
        self,
        d: np.ndarray,
        o: np.ndarray,
        depth: np.ndarray,
        code: np.ndarray,
        positive: np.ndarray,
        ids: np.ndarray,
        obj_u: np.ndarray,
        obj_v: np.ndarray,
        obj_edge: np.ndarray,
        obj_shade: np.ndarray,
        obj_face: np.ndarray,
    ) -> np.ndarray:
        rgb = np.empty((len(depth), 3), dtype=np.float32)
        # Metres covered by one pixel at each hit, along the optical axis (obliquity is handled per surface).
        footprint = np.maximum(depth, 1e-3) / np.float32(self.camera.fx)
        ray_len = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
        background = ids == 0
        indoor = self.world.kind == INDOOR
        for surface in (FLOOR, CEILING, WALL_X, WALL_Y, SKY):
            sel = background & (code == surface)
            if not sel.any():
                continue
            ds, ts = d[:, sel], depth[sel]
            if surface == SKY:
                elevation = np.clip(ds[2] / ray_len[sel] * 2.0, 0.0, 1.0)[:, None]
                zenith = np.asarray(self.world.ceiling_rgb, dtype=np.float32)
                rgb[sel] = _HORIZON_RGB * (1 - elevation) + zenith * elevation
                continue
            point = o[:, None] + ts * ds  # 3 x m
            normal_axis = 2 if surface in (FLOOR, CEILING) else (0 if surface == WALL_X else 1)
            obliquity = ray_len[sel] / np.maximum(np.abs(ds[normal_axis]), 1e-3)
            fp = footprint[sel] * np.minimum(obliquity, 12.0)
            if surface == FLOOR and not indoor:
                rgb[sel] = self._ground(point, fp)
            elif surface == FLOOR:
                rgb[sel] = self._floor(point, fp)
            elif surface == CEILING:
                rgb[sel] = self._ceiling(point, fp)
            else:
                wall_id = (2 if surface == WALL_X else 4) + positive[sel].astype(np.int64)
                rgb[sel] = self._wall(point, fp, normal_axis, wall_id)

        sel = ~background
        if sel.any():
            rgb[sel] = self._objects(
                ids[sel], obj_u[sel], obj_v[sel], obj_edge[sel], obj_shade[sel], obj_face[sel], footprint[sel]
            )
        distance = np.where(np.isfinite(depth), depth, 0.0) * ray_len
        if indoor:
            rgb *= (1.0 / (1.0 + 0.02 * distance))[:, None]
        else:
            fog = np.where(np.isfinite(depth), 1.0 - np.exp(-distance / 450.0), 0.0)[:, None]
            rgb = rgb * (1 - fog) + _HORIZON_RGB * fog
        return np.clip(rgb + 0.5, 0, 255).astype(np.uint8)

    def _floor(self, p: np.ndarray, fp: np.ndarray) -> np.ndarray:
        seed = self._seed
        x, y = p[0], p[1]
        tile, fu, fv = _cells(x, y, 0.6, 0.6, seed ^ 0x11)
        factor = 0.84 + 0.32 * tile
        factor *= _lines(fu, fv, 0.6, 0.02, fp, 0.5)
        speckle, _, _ = _cells(x, y, 0.12, 0.12, seed ^ 0x12)
        factor *= 1.0 + 0.2 * (speckle - 0.5) * _detail(0.12, fp)
        blotch, _, _ = _cells(x, y, 2.4, 2.4, seed ^ 0x13)
        factor *= 0.94 + 0.12 * blotch
        return np.asarray(self.world.floor_rgb, dtype=np.float32) * factor[:, None]

    def _ceiling(self, p: np.ndarray, fp: np.ndarray) -> np.ndarray:
        panel, fu, fv = _cells(p[0], p[1], 0.6, 0.6, self._seed ^ 0x21)
        factor = (0.92 + 0.08 * panel) * _lines(fu, fv, 0.6, 0.025, fp, 0.35)
        return np.asarray(self.world.ceiling_rgb, dtype=np.float32) * factor[:, None]

    def _wall(self, p: np.ndarray, fp: np.ndarray, normal_axis: int, wall_id: np.ndarray) -> np.ndarray:
        seed = self._seed
        u = p[1 - normal_axis]  # along the wall: y for walls of constant x, x for walls of constant y
        z = p[2]
        salt = wall_id * 7919 + seed
        panel, _, _ = _cells(u, z, 0.5, 0.5, salt)
        factor = 0.8 + 0.3 * panel
        speckle, _, _ = _cells(u, z, 0.1, 0.1, salt + 1)
        factor *= 1.0 + 0.22 * (speckle - 0.5) * _detail(0.1, fp)
        shade = {0: 0.82, 1: 0.9}[normal_axis]
        factor *= np.where(z < 0.1, 0.5, 1.0) * shade
        colour = np.asarray(self.world.wall_rgb, dtype=np.float32) * factor[:, None]
        # Pictures: in some 1.5 m x 1 m cells between 1.0 and 2.0 m up, a framed image of coloured blocks.
        pick, fu, fv = _cells(u, z - 1.0, 1.5, 1.0, salt + 2)
        inside = (
            (z >= 1.0) & (z < 2.0) & (pick < 0.45) & (fu > 0.15) & (fu < 0.85) & (fv > 0.15) & (fv < 0.85)
        )
        if inside.any():
            block, bu, bv = _cells(u[inside], z[inside], 0.15, 0.15, salt[inside] + 3)
            tone = _PICTURE_RGB[(block * len(_PICTURE_RGB)).astype(np.int64)]
            frame = (np.minimum(fu[inside] - 0.15, 0.85 - fu[inside]) * 1.5 < 0.03) | (
                np.minimum(fv[inside] - 0.15, 0.85 - fv[inside]) < 0.03
            )
            tone = np.where(frame[:, None], np.float32(40.0), tone * shade)
            colour[inside] = tone
        return colour

    def _ground(self, p: np.ndarray, fp: np.ndarray) -> np.ndarray:
        seed = self._seed
        x, y = p[0], p[1]
        x0, x1, y0, y1 = self.world.bounds
        paved = (x > x0 - 3) & (x < x1 + 3) & (y > y0 - 3) & (y < y1 + 3)
        slab, fu, fv = _cells(x, y, 1.5, 1.5, seed ^ 0x31)
        paving = (0.82 + 0.3 * slab) * _lines(fu, fv, 1.5, 0.06, fp, 0.45)
        patch, _, _ = _cells(x, y, 6.0, 6.0, seed ^ 0x32)
        paving *= 0.92 + 0.16 * patch
        tuft, _, _ = _cells(x, y, 0.6, 0.6, seed ^ 0x33)
        grass = (0.8 + 0.35 * tuft) * (0.85 + 0.3 * patch)
        speckle, _, _ = _cells(x, y, 0.3, 0.3, seed ^ 0x34)
        fine = 1.0 + 0.2 * (speckle - 0.5) * _detail(0.3, fp)
        floor = np.asarray(self.world.floor_rgb, dtype=np.float32)
        lawn = np.asarray(self.world.wall_rgb, dtype=np.float32)
        return np.where(paved[:, None], floor * paving[:, None], lawn * grass[:, None]) * fine[:, None]

    def _objects(
        self,
        ids: np.ndarray,
        u: np.ndarray,
        v: np.ndarray,
        edge: np.ndarray,
        shade: np.ndarray,
        face: np.ndarray,
        fp: np.ndarray,
    ) -> np.ndarray:
        salt = ids.astype(np.int64) * 131 + face.astype(np.int64) * 17 + self._seed
        speckle, _, _ = _cells(u, v, 0.08, 0.08, salt)
        factor = shade * (1.0 + 0.25 * (speckle - 0.5) * _detail(0.08, fp))
        drawn = np.maximum(np.float32(0.015), 0.8 * fp)
        outline = edge < drawn
        factor *= np.where(outline, 1.0 - 0.6 * np.minimum(1.0, 0.015 / drawn), 1.0)
        colour = self._object_rgb[ids] * factor[:, None]
        building = self._is_building[ids] & (np.abs(face // 16) != 2)
        if building.any():
            pane, wu, wv = _cells(u[building], v[building], 2.6, 3.2, salt[building] + 5)
            window = (wu > 0.25) & (wu < 0.75) & (wv > 0.3) & (wv < 0.75)
            lit = _WINDOW_RGB * (0.7 + 0.7 * pane)[:, None] * shade[building][:, None]
            colour[building] = np.where(window[:, None], lit, colour[building])
        return colour
