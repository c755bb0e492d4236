"""Synthetic worlds and the numpy renderer: generation, projection, ids, colours, texture consistency."""

from __future__ import annotations

import math

import numpy as np
import pytest
from embodied_r_training.synth.render import CameraModel, Renderer
from embodied_r_training.synth.trajectory import plan_trajectory, quaternion_from_yaw_pitch
from embodied_r_training.synth.world import (
    BOX,
    CYLINDER,
    INDOOR,
    OUTDOOR,
    Room,
    SceneObject,
    World,
    free_space,
    generate_world,
)

from embodied_r_ros.frames import Pose
from embodied_r_ros.keyframes import FrameMatcher
from embodied_r_ros.poses.ego_motion import quaternion_to_matrix

W, H = 160, 120


def room_world(*objects: SceneObject, size: tuple[float, float, float] = (8.0, 6.0, 2.8)) -> World:
    return World(INDOOR, tuple(objects), (-3.4, 3.4, -2.4, 2.4), Room(size), texture_seed=3)


def level(
    x: float = 0.0, y: float = 0.0, z: float = 1.2, yaw_deg: float = 0.0, pitch_deg: float = 0.0
) -> Pose:
    return Pose((x, y, z), quaternion_from_yaw_pitch(math.radians(yaw_deg), math.radians(pitch_deg)))


# ------------------------------------------------------------------------------------------------- worlds


@pytest.mark.parametrize("outdoor", [False, True])
def test_generated_worlds_are_deterministic_and_well_formed(outdoor: bool) -> None:
    a = generate_world(np.random.default_rng(11), outdoor=outdoor)
    b = generate_world(np.random.default_rng(11), outdoor=outdoor)
    c = generate_world(np.random.default_rng(12), outdoor=outdoor)
    assert a == b and a != c
    assert [o.id for o in a.objects] == list(range(1, len(a.objects) + 1))
    assert len({o.name for o in a.objects}) == len(a.objects)
    assert World.from_dict(a.to_dict()).to_dict() == a.to_dict()
    if outdoor:
        assert a.kind == OUTDOOR and a.room is None
        assert sum(o.category == "building" for o in a.objects) >= 8
    else:
        assert a.kind == INDOOR and 5 <= len(a.objects) <= 15
        hx, hy, height = a.room.size[0] / 2, a.room.size[1] / 2, a.room.size[2]
        for obj in a.objects:
            corners = obj.corners()
            assert np.all(np.abs(corners[:, 0]) <= hx + 1e-6) and np.all(np.abs(corners[:, 1]) <= hy + 1e-6)
            assert corners[:, 2].min() >= -1e-6 and corners[:, 2].max() <= height + 1e-6
        # No two footprints overlap, and there is room to walk.
        for i, p in enumerate(a.objects):
            for q in a.objects[i + 1 :]:
                xs = np.linspace(-hx, hx, 200)
                gx, gy = np.meshgrid(xs, np.linspace(-hy, hy, 150))
                inside_both = (p.footprint_distance(gx, gy) == 0) & (q.footprint_distance(gx, gy) == 0)
                assert not inside_both.any(), (p.name, q.name)
        assert free_space(a)[2].mean() >= 0.4


def test_world_rejects_duplicate_names_and_bad_ids() -> None:
    chair = SceneObject(1, "chair", "red", BOX, (0.5, 0.5, 0.9), (1.0, 0.0, 0.45))
    with pytest.raises(ValueError, match="unique"):
        room_world(chair, SceneObject(2, "chair", "red", BOX, (0.5, 0.5, 0.9), (2.0, 0.0, 0.45)))
    with pytest.raises(ValueError, match="ids"):
        room_world(SceneObject(2, "chair", "red", BOX, (0.5, 0.5, 0.9), (2.0, 0.0, 0.45)))


# ------------------------------------------------------------------------------------------------- camera


def test_camera_intrinsics_and_projection_agree_with_the_rays() -> None:
    cam = CameraModel.from_fov(W, H, 90.0)
    assert cam.fx == pytest.approx(W / 2) and cam.cx == pytest.approx((W - 1) / 2)
    pose = level(1.0, 2.0, 1.5, yaw_deg=30.0, pitch_deg=10.0)
    rays = cam.body_rays()
    rot = quaternion_to_matrix(pose.orientation)
    # A point 3 m along the ray of pixel (u, v) projects back onto (u, v).
    for u, v in ((0, 0), (W - 1, H - 1), (40, 90)):
        point = np.asarray(pose.position) + 3.0 * rot @ rays[v, u]
        uv, depth = cam.project(point[None], pose)
        assert uv[0] == pytest.approx([u, v], abs=1e-4) and depth[0] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="field of view"):
        CameraModel.from_fov(W, H, 180.0)


# ------------------------------------------------------------------------------------------------- render


def test_box_in_front_covers_the_centre_with_its_colour_and_id() -> None:
    box = SceneObject(1, "box", "red", BOX, (0.6, 0.6, 0.6), (2.0, 0.0, 1.2))
    result = Renderer(room_world(box), CameraModel.from_fov(W, H)).render(level())
    assert result.image.shape == (H, W, 3) and result.image.dtype == np.uint8
    assert result.ids.shape == (H, W)
    v, u = H // 2, W // 2
    assert result.ids[v, u] == 1
    # The near face is 0.3 m in front of the box's centre: 1.7 m away along the optical axis.
    assert result.depth[v, u] == pytest.approx(1.7, abs=1e-3)
    r, g, b = result.image[result.ids == 1].astype(float).mean(axis=0)
    assert r > 1.8 * g and r > 1.8 * b  # still red under shading and texture
    # Its apparent width matches the pinhole model: 0.6 m at 1.7 m.
    cam = CameraModel.from_fov(W, H)
    columns = np.flatnonzero(result.ids[v] == 1)
    assert columns.size == pytest.approx(0.6 / 1.7 * cam.fx, abs=2)
    # Nothing behind the camera is drawn.
    behind = Renderer(room_world(box), cam).render(level(yaw_deg=180.0))
    assert not (behind.ids == 1).any()


def test_cylinder_is_round_and_occludes_what_is_behind_it() -> None:
    lamp = SceneObject(1, "lamp", "blue", CYLINDER, (0.4, 0.4, 1.6), (2.0, 0.0, 0.8))
    box = SceneObject(2, "box", "yellow", BOX, (1.6, 1.6, 1.6), (3.5, 0.0, 0.8))
    result = Renderer(room_world(lamp, box), CameraModel.from_fov(W, H)).render(level(z=0.8))
    v, u = H // 2, W // 2
    assert result.ids[v, u] == 1 and result.depth[v, u] == pytest.approx(1.8, abs=0.01)
    assert (result.ids == 2).any()  # the box shows on both sides of the lamp
    left = np.flatnonzero(result.ids[v] == 1)
    assert (result.ids[v, left.min() - 2] == 2) and (result.ids[v, left.max() + 2] == 2)


@pytest.mark.parametrize("outdoor", [False, True])
def test_projected_centres_land_on_their_objects(outdoor: bool) -> None:
    rng = np.random.default_rng(5)
    world = generate_world(rng, outdoor=outdoor)
    trajectory = plan_trajectory(world, 20.0, rng)
    cam = CameraModel.from_fov(W, H)
    renderer = Renderer(world, cam)
    checked = 0
    for t in np.arange(0.0, 20.0, 0.5):
        pose = trajectory.pose(float(t))
        frame = renderer.render(pose)
        centres = np.array([o.position for o in world.objects])
        uv, depth = cam.project(centres, pose)
        for obj, (u, v), d in zip(world.objects, uv, depth, strict=True):
            ui, vi = int(round(u)), int(round(v))
            if d <= 0.1 or not (0 <= ui < W and 0 <= vi < H):
                continue
            # The centre is inside the object: its pixel shows the object, or something nearer than it.
            assert frame.ids[vi, ui] == obj.id or frame.depth[vi, ui] < d, (obj.name, t)
            checked += frame.ids[vi, ui] == obj.id
    assert checked >= 10


def test_outdoor_sky_above_ground_below() -> None:
    world = generate_world(np.random.default_rng(2), outdoor=True)
    result = Renderer(world, CameraModel.from_fov(W, H)).render(level(0.0, 0.0, 20.0, yaw_deg=0.0))
    assert np.isinf(result.depth[0]).all()  # the top row is sky
    bottom = result.depth[-1][result.ids[-1] == 0]
    assert np.isfinite(bottom).all() and bottom.size > 0
    sky = result.image[0].astype(float).mean(axis=0)
    assert sky[2] > sky[0]  # bluish


def test_rendering_is_deterministic_and_textures_stay_put() -> None:
    world = generate_world(np.random.default_rng(8))
    x0, x1, y0, y1 = world.bounds
    centre = ((x0 + x1) / 2, (y0 + y1) / 2)
    renderer = Renderer(world, CameraModel.from_fov(320, 240))
    a = renderer.render(level(*centre, pitch_deg=12.0))
    b = Renderer(world, CameraModel.from_fov(320, 240)).render(level(*centre, pitch_deg=12.0))
    assert np.array_equal(a.image, b.image) and np.array_equal(a.ids, b.ids)
    # A pure rotation is a homography: ORB finds the same texture again and the overlap follows the angle.
    matcher = FrameMatcher()
    reference = matcher.features(a.image)
    for turn in (10.0, 30.0):
        turned = renderer.render(level(*centre, yaw_deg=turn, pitch_deg=12.0))
        overlap = matcher.overlap(matcher.features(turned.image), reference)
        assert overlap == pytest.approx(1 - turn / 70.0, abs=0.08)
