"""``embodied-r synth``: the command line of :mod:`embodied_r_training.synth.generate` (what it writes and how
is documented there)."""

from __future__ import annotations

import argparse
from pathlib import Path

from embodied_r_training.synth.bag_writer import STORAGES
from embodied_r_training.synth.generate import DEFAULT_START_S, SynthConfig, parse_size, synthesize


def size_type(text: str) -> tuple[int, int]:
    """``--size WxH`` for argparse: :func:`parse_size`, its message shown as the argument's error."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r synth``."""
    parser = subparsers.add_parser(
        "synth",
        help="write synthetic egocentric rosbags with ground-truth spatial questions",
        description="Procedural rooms (or, with --outdoor, a plaza seen from a drone), rendered along a "
        "camera path into rosbag2 files with /camera/image_raw, /camera/camera_info and /odom, and a "
        "questions.jsonl per scene whose answers come from the geometry. Same seed, same bytes.",
    )
    parser.set_defaults(func=run_synth)
    parser.add_argument(
        "--out", type=Path, required=True, help="output directory (scene_NNNN/ are created in it)"
    )
    parser.add_argument("--scenes", type=int, default=1, help="number of scenes (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed; scene i depends only on (seed, i)")
    parser.add_argument(
        "--size", type=size_type, default=(640, 480), metavar="WxH", help="image size (640x480)"
    )
    parser.add_argument("--rate", type=float, default=10.0, help="camera (and odometry) rate in Hz (10)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per scene (30)")
    parser.add_argument("--storage", choices=STORAGES, default="mcap", help="rosbag2 storage (mcap)")
    parser.add_argument(
        "--compressed",
        action="store_true",
        help="JPEG images on /camera/image_raw/compressed instead of raw rgb8 (bags ~20x smaller)",
    )
    parser.add_argument("--jpeg-quality", type=int, default=90, help="with --compressed (90)")
    parser.add_argument("--outdoor", action="store_true", help="drone flights over a plaza instead of rooms")
    parser.add_argument("--preview", action="store_true", help="also write scene_NNNN/preview.png")
    parser.add_argument("--hfov", type=float, default=70.0, help="horizontal field of view in degrees (70)")
    parser.add_argument("--questions-per-task", type=int, default=2, help="per task and form, per scene (2)")
    parser.add_argument(
        "--start-time",
        type=int,
        default=DEFAULT_START_S,
        help=f"stamp of each bag's first message, seconds since the epoch ({DEFAULT_START_S})",
    )
    parser.add_argument("--jobs", type=int, default=1, help="scenes rendered in parallel processes (1)")


def run_synth(args: argparse.Namespace) -> int:
    """Run ``embodied-r synth`` from parsed arguments."""
    config = SynthConfig(
        out=args.out,
        scenes=args.scenes,
        seed=args.seed,
        width=args.size[0],
        height=args.size[1],
        rate_hz=args.rate,
        duration_s=args.duration,
        storage=args.storage,
        compressed=args.compressed,
        jpeg_quality=args.jpeg_quality,
        outdoor=args.outdoor,
        preview=args.preview,
        hfov_deg=args.hfov,
        questions_per_task=args.questions_per_task,
        start_s=args.start_time,
        jobs=args.jobs,
    )
    results = synthesize(config)
    for r in results:
        extra = f", preview {r.directory / 'preview.png'}" if config.preview else ""
        print(f"{r.directory}: {r.frames} frames, {len(r.questions)} questions{extra}")
    total = sum(len(r.questions) for r in results)
    print(f"{len(results)} scene(s), {total} questions: {config.out / 'questions.jsonl'}")
    return 0
