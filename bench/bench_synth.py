"""Benchmark of the synthetic world: render speed on one core and rosbag2 write speed.

- render: frames/s of :class:`Renderer` along a planned walk (indoor) or flight (outdoor), at 320x240 and
  640x480, with BLAS/OpenMP/OpenCV limited to one thread (numpy's element-wise work is single-threaded);
- bag write: pre-rendered 640x480 frames written with :class:`SceneBagWriter` (image + camera info +
  odometry per frame) to MCAP and sqlite3, raw rgb8 and JPEG (encoding included): messages/s and MB/s
  of bag on disk;
- scene: one whole ``embodied-r synth`` scene of ``--scene-seconds`` at 320x240, 10 Hz (world, path,
  rendering, bag, questions), the figure a user waits for.

Usage: ``python bench/bench_synth.py [--frames N] [--scene-seconds S] [--json PATH]``
"""

from __future__ import annotations

import os

# One core: set before numpy (and its BLAS) is imported.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

# Run from a checkout without installing the package.
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "training")]

from embodied_r_training.synth.bag_writer import BagOptions, SceneBagWriter  # noqa: E402
from embodied_r_training.synth.generate import SynthConfig, synthesize_scene  # noqa: E402
from embodied_r_training.synth.render import CameraModel, Renderer  # noqa: E402
from embodied_r_training.synth.trajectory import plan_trajectory  # noqa: E402
from embodied_r_training.synth.world import generate_world  # noqa: E402

START_NS = 1_700_000_000 * 1_000_000_000


def render_speed(outdoor: bool, size: tuple[int, int], frames: int, seed: int) -> float:
    """Frames per second rendering ``frames`` frames at 10 Hz along a planned path."""
    rng = np.random.default_rng(seed)
    world = generate_world(rng, outdoor=outdoor)
    trajectory = plan_trajectory(world, frames / 10.0, rng)
    renderer = Renderer(world, CameraModel.from_fov(*size))
    renderer.render(trajectory.pose(0.0))  # warm-up
    started = time.perf_counter()
    for i in range(frames):
        renderer.render(trajectory.pose(i / 10.0))
    return frames / (time.perf_counter() - started)


def bag_speed(storage: str, compressed: bool, frames: int, seed: int, workdir: Path) -> dict[str, float]:
    """Messages/s and MB/s writing ``frames`` pre-rendered 640x480 frames (3 messages each)."""
    rng = np.random.default_rng(seed)
    world = generate_world(rng)
    trajectory = plan_trajectory(world, frames / 10.0, rng)
    camera = CameraModel.from_fov(640, 480)
    renderer = Renderer(world, camera)
    poses = [trajectory.pose(i / 10.0) for i in range(frames)]
    images = [renderer.render(pose).image for pose in poses]
    twists = [trajectory.twist(i / 10.0) for i in range(frames)]
    path = workdir / f"bag_{storage}_{'jpeg' if compressed else 'raw'}"
    started = time.perf_counter()
    with SceneBagWriter(path, camera, BagOptions(storage=storage, compressed=compressed)) as bag:
        for i, (image, pose, (linear, angular)) in enumerate(zip(images, poses, twists, strict=True)):
            stamp = START_NS + i * 100_000_000
            bag.write_frame(stamp, image)
            bag.write_odometry(stamp, pose, linear, angular)
    elapsed = time.perf_counter() - started
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return {
        "messages_per_s": 3 * frames / elapsed,
        "mb_per_s": size / 1e6 / elapsed,
        "mb_per_frame": size / 1e6 / frames,
    }


def scene_time(seconds: float, workdir: Path) -> float:
    """Seconds to synthesise one whole indoor scene of ``seconds`` at 320x240, 10 Hz."""
    config = SynthConfig(out=workdir / "scene", width=320, height=240, rate_hz=10.0, duration_s=seconds)
    started = time.perf_counter()
    synthesize_scene(config, 0)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100, help="frames per render/bag measurement")
    parser.add_argument("--scene-seconds", type=float, default=60.0, help="length of the whole-scene run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args()
    cv2.setNumThreads(1)

    figures: dict[str, float | int | str] = {}
    for outdoor in (False, True):
        for size in ((320, 240), (640, 480)):
            key = f"render_{'outdoor' if outdoor else 'indoor'}_{size[0]}x{size[1]}_fps"
            figures[key] = render_speed(outdoor, size, args.frames, args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="bench_synth_"))
    try:
        for storage in ("mcap", "sqlite3"):
            for compressed in (False, True):
                speed = bag_speed(storage, compressed, args.frames, args.seed, workdir)
                name = f"bag_{storage}_{'jpeg' if compressed else 'raw'}_640x480"
                for k, v in speed.items():
                    figures[f"{name}_{k}"] = v
        figures[f"scene_{args.scene_seconds:g}s_320x240_10hz_s"] = scene_time(args.scene_seconds, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    figures.update(frames=args.frames, seed=args.seed, threads=1, numpy=np.__version__)
    figures.update(opencv=cv2.__version__, python=platform.python_version(), machine=platform.machine())

    print(f"{'figure':<46}{'value':>12}")
    for key, value in figures.items():
        print(f"{key:<46}{value:>12.2f}" if isinstance(value, float) else f"{key:<46}{value!s:>12}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
