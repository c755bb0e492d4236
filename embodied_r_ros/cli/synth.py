"""``embodied-r synth``: the command line of :mod:`embodied_r_training.synth.generate` (what it writes and how
is documented there)."""

from __future__ import annotations

import argparse

from embodied_r_training.synth.generate import SynthConfig, parse_size, synthesize

from .flags import add_config_flags, argument_type, config_from_flags

# ``--size WxH`` for argparse: parse_size's message is the argument's error.
size_type = argument_type(parse_size)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r synth``: the flags of :class:`SynthConfig`'s fields, and ``--size``."""
    parser = subparsers.add_parser(
        "synth",
        help="write synthetic egocentric rosbags with ground-truth spatial questions",
        description="Procedural rooms (or, with --outdoor, a plaza seen from a drone), rendered along a "
        "camera path into rosbag2 files with /camera/image_raw, /camera/camera_info and /odom, and a "
        "questions.jsonl per scene whose answers come from the geometry. Same seed, same bytes.",
    )
    parser.set_defaults(func=run_synth)
    add_config_flags(parser, SynthConfig, ("out", "scenes", "seed"))
    parser.add_argument(
        "--size", type=size_type, default=(640, 480), metavar="WxH", help="image size (640x480)"
    )
    add_config_flags(parser, SynthConfig, _AFTER_SIZE)


# The fields whose flags follow --size in the help, in field order.
_AFTER_SIZE = (
    "rate_hz", "duration_s", "storage", "compressed", "jpeg_quality", "outdoor", "preview", "hfov_deg",
    "questions_per_task", "start_s", "jobs", "max_keyframes",
)  # fmt: skip


def run_synth(args: argparse.Namespace) -> int:
    """Run ``embodied-r synth`` from parsed arguments."""
    width, height = args.size
    config = config_from_flags(SynthConfig, args, width=width, height=height)
    results = synthesize(config)
    for r in results:
        extra = f", preview {r.directory / 'preview.png'}" if config.preview else ""
        print(f"{r.directory}: {r.frames} frames, {len(r.questions)} questions{extra}")
    total = sum(len(r.questions) for r in results)
    dropped = sum(r.screened.dropped for r in results)
    print(f"{len(results)} scene(s), {total} questions: {config.out / 'questions.jsonl'}")
    print(
        f"{dropped} questions dropped as not answerable from their prompt: {config.out / 'generation.json'}"
    )
    return 0
