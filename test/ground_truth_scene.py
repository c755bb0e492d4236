"""A hand-built scene whose ground-truth descriptions are known from geometry (for the ground-truth tests).

The camera stands at (0, 0, 1.25) facing +x (REP-103: y is left), walks 1 m forward in 2 s, then turns
60 deg left in 2 s. The objects, centres at camera height:

- red chair: a 0.6 m cube straight ahead, centre 2 m away -> "ahead, near, 2 m";
- blue box: behind the camera -> never in view;
- green stool: a 0.3 m cube 4 m ahead, hidden behind the red chair -> occluded, never in view;
- yellow lamp: 25 deg to the left, centre 3.31 m away -> "left, far, 3.5 m".
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from embodied_r_training.synth.render import CameraModel
from embodied_r_training.synth.trajectory import TURN, WALK, Segment, StartState, Trajectory
from embodied_r_training.synth.world import BOX, CYLINDER, INDOOR, Room, SceneObject, World

from embodied_r_ros.frames import NS_PER_S, Frame, Pose
from embodied_r_ros.keyframes import KeyFrame

START_NS = 1_700_000_000 * NS_PER_S
EYE = 1.25
LAMP_BEARING_DEG = 25.0


def objects(with_occluder: bool = True) -> tuple[SceneObject, ...]:
    """The scene's objects; without the occluder the green stool is in plain view."""
    lamp_x = 3.0
    lamp_y = lamp_x * math.tan(math.radians(LAMP_BEARING_DEG))
    items = [
        ("red", "chair", BOX, (0.6, 0.6, 0.6), (2.0, 0.0, EYE)),
        ("blue", "box", BOX, (0.5, 0.5, 0.5), (-2.0, 0.0, EYE)),
        ("green", "stool", BOX, (0.3, 0.3, 0.3), (4.0, 0.0, EYE)),
        ("yellow", "lamp", CYLINDER, (0.3, 0.3, 1.6), (lamp_x, lamp_y, EYE)),
    ]
    if not with_occluder:
        items = [i for i in items if i[1] != "chair"]
    return tuple(
        SceneObject(k + 1, category, colour, shape, size, position)
        for k, (colour, category, shape, size, position) in enumerate(items)
    )


def world(with_occluder: bool = True) -> World:
    return World(INDOOR, objects(with_occluder), (-4.4, 4.4, -4.4, 4.4), Room((10.0, 10.0, 3.0)))


def trajectory() -> Trajectory:
    return Trajectory(
        StartState(0.0, 0.0, EYE, 0.0, 0.0),
        [Segment(WALK, 2.0, forward_m=1.0), Segment(TURN, 2.0, yaw_deg=60.0)],
    )


def write_scene(
    directory: Path,
    with_occluder: bool = True,
    *,
    scene_world: World | None = None,
    path: Trajectory | None = None,
) -> Path:
    """scene.json as `embodied-r synth` writes it (the keys ground truth reads); returns its path.
    ``scene_world`` and ``path`` replace this module's world and trajectory."""
    camera = CameraModel.from_fov(320, 240, 70.0)
    scene = {
        "start_ns": START_NS,
        "rate_hz": 10.0,
        "camera": {"width": camera.width, "height": camera.height, "k": list(camera.k)},
        "world": (scene_world or world(with_occluder)).to_dict(),
        "trajectory": (path or trajectory()).to_dict(),
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scene.json"
    path.write_text(json.dumps(scene), encoding="utf-8")
    return path


def keyframes(times_s: tuple[float, ...] = (0.0, 2.0, 4.0), poses: bool = False) -> list[KeyFrame]:
    """Key frames at these scene times (blank images: ground truth reads only stamps)."""
    image = np.zeros((120, 160, 3), np.uint8)
    path = trajectory()
    frames = []
    for i, t in enumerate(times_s):
        pose: Pose | None = path.pose(t) if poses else None
        frames.append(KeyFrame(Frame(image, START_NS + round(t * NS_PER_S), pose), i))
    return frames
