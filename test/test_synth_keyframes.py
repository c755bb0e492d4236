"""The core's key-frame selector on a synthetic bag: many key frames while the camera turns fast, few while
it stands still."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from embodied_r_training.synth.bag_writer import IMAGE_TOPIC, ODOM_TOPIC, SceneBagWriter
from embodied_r_training.synth.render import CameraModel, Renderer
from embodied_r_training.synth.trajectory import PAUSE, TURN, Segment, StartState, Trajectory
from embodied_r_training.synth.world import generate_world
from synth_helpers import decode_image, odom_pose, read_bag, stamp_ns

from embodied_r_ros.config import KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S, Frame
from embodied_r_ros.keyframes import (
    REASON_LOW_OVERLAP,
    REASON_MATCH_FAILED,
    StreamingKeyFrameSelector,
    select_keyframes,
)

RATE = 2.0
START_NS = 1_700_000_000 * NS_PER_S


def write_bag(path: Path, world_seed: int, outdoor: bool) -> list[Frame]:
    """Stand still 10 s, turn 540 deg in 10 s (a fast turn), stand still 8 s; the frames read from the bag."""
    world = generate_world(np.random.default_rng(world_seed), outdoor=outdoor)
    x0, x1, y0, y1 = world.bounds
    start = StartState(
        (x0 + x1) / 2, (y0 + y1) / 2, 15.0 if outdoor else 1.25, 0.0, 20.0 if outdoor else 12.0
    )
    trajectory = Trajectory(
        start, [Segment(PAUSE, 10.0), Segment(TURN, 10.0, yaw_deg=540.0), Segment(PAUSE, 8.0)]
    )
    camera = CameraModel.from_fov(320, 240)
    renderer = Renderer(world, camera)
    with SceneBagWriter(path, camera) as bag:
        for t in np.arange(0.0, 28.0 + 1e-9, 1.0 / RATE):
            stamp = START_NS + round(float(t) * NS_PER_S)
            pose = trajectory.pose(float(t))
            bag.write_frame(stamp, renderer.render(pose).image)
            bag.write_odometry(stamp, pose, *trajectory.twist(float(t)))
    contents = read_bag(path)
    images, odoms = contents.messages[IMAGE_TOPIC], contents.messages[ODOM_TOPIC]
    return [
        Frame(decode_image(image).copy(), stamp_ns(image), odom_pose(odom))
        for (_, image), (_, odom) in zip(images, odoms, strict=True)
    ]


def kept_by_rule(keyframes: list, lo_s: float, hi_s: float) -> int:
    """Key frames in [lo_s, hi_s) that the overlap rule kept (not first/last/clamp additions)."""
    return sum(
        k.reason in (REASON_LOW_OVERLAP, REASON_MATCH_FAILED)
        and lo_s <= (k.frame.stamp_ns - START_NS) / NS_PER_S < hi_s
        for k in keyframes
    )


def test_fast_turns_keep_more_key_frames_than_standing_still(tmp_path: Path) -> None:
    for seed, outdoor in ((0, False), (1, True)):
        frames = write_bag(tmp_path / f"bag_{seed}", seed, outdoor)
        assert len(frames) == 57 and frames[0].pose is not None
        keyframes = select_keyframes(frames, KeyFrameConfig())
        still_before, turning, still_after = (
            kept_by_rule(keyframes, 0.5, 10.5),
            kept_by_rule(keyframes, 10.5, 20.5),
            kept_by_rule(keyframes, 20.5, 28.5),
        )
        assert still_before == 0, [(k.reason, k.frame.stamp_ns) for k in keyframes]
        assert turning >= 5, [(k.reason, k.overlap) for k in keyframes]
        assert still_after <= 1  # the first candidate after the turn may differ from the last kept
        # The streaming selector (as the node runs it) decides the same.
        selector = StreamingKeyFrameSelector(KeyFrameConfig())
        for frame in frames:
            selector.push(frame)
        assert [k.frame.stamp_ns for k in selector.finish()] == [k.frame.stamp_ns for k in keyframes]
