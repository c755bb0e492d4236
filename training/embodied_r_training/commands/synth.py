"""``embodied-r synth``: the command line of :mod:`embodied_r_training.synth.generate` (what it writes and how
is documented there)."""

from __future__ import annotations

import argparse

from embodied_r_ros.cli.flags import (
    add_config_flags,
    argument_type,
    config_flags,
    config_from_flags,
    flag_fields,
)
from embodied_r_ros.config import ConfigError

from ..synth.generate import SynthConfig, parse_size, synthesize
from ..synth.mission import MissionConfig
from ..synth.mission_writer import write_mission

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
        "--size", type=size_type, default=None, metavar="WxH", help="image size (640x480; 320x240 missions)"
    )
    add_config_flags(parser, SynthConfig, _AFTER_SIZE)
    mission = parser.add_argument_group(
        "long missions",
        "--mission MINUTES writes one mission into --out instead of scenes: rooms along a corridor walked "
        "one after another with revisits, names recurring in far-apart rooms, and memory questions over the "
        "whole mission (first / last sighting, counts across rooms, the distance between two sightings) "
        "with the intervals holding their evidence (mission.json). --seed, --size, --storage, --jpeg-quality "
        "(images are always JPEG), --hfov and --start-time apply; the scene flags do not.",
    )
    mission.add_argument("--mission", type=float, default=None, metavar="MINUTES", help="mission length")
    add_config_flags(mission, MissionConfig, _MISSION_ONLY)


# The fields whose flags follow --size in the help, in field order.
_AFTER_SIZE = (
    "rate_hz", "duration_s", "storage", "compressed", "jpeg_quality", "outdoor", "preview", "hfov_deg",
    "questions_per_task", "start_s", "jobs", "max_keyframes",
)  # fmt: skip


# MissionConfig's own flags (the flags it shares with SynthConfig are the scenes' ones).
_MISSION_ONLY = (
    "fps", "odom_hz", "rooms_per_minute", "revisit_probability", "revisit_reach", "recurring_share",
    "min_fraction", "merge_gap_s", "questions_per_kind",
)  # fmt: skip
# SynthConfig's fields that mean nothing for a mission: set to other than their default, they are an error.
_SCENES_ONLY = (
    "scenes", "rate_hz", "duration_s", "outdoor", "preview", "questions_per_task", "jobs", "max_keyframes"
)  # fmt: skip


def run_synth(args: argparse.Namespace) -> int:
    """Run ``embodied-r synth`` from parsed arguments."""
    if args.mission is not None:
        return run_mission(args)
    width, height = args.size or (640, 480)
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


def run_mission(args: argparse.Namespace) -> int:
    """``embodied-r synth --mission MINUTES``: write one long mission into ``--out``; print what it holds."""
    values = flag_fields(SynthConfig, args)
    scene_flags = config_flags(SynthConfig, _SCENES_ONLY)
    given = [flag.name for flag in scene_flags if values[flag.parameters[0]] != flag.default]
    if given:
        flags = ", ".join(given)
        raise ConfigError(
            f"{flags}: not for --mission (a mission's length is --mission MINUTES, its camera rate --fps); "
            "drop them, or drop --mission to write scenes"
        )
    width, height = args.size or (MissionConfig.width, MissionConfig.height)
    config = config_from_flags(
        MissionConfig, args, minutes=args.mission, width=width, height=height, compressed=True
    )
    result = write_mission(config, args.out)
    kinds = ", ".join(f"{kind} {count.kept}" for kind, count in result.counts.items())
    print(
        f"{result.directory}: {config.minutes:g}-minute mission, {result.frames} frames, "
        f"{result.bag_bytes / 1e6:.1f} MB bag, {result.questions} questions ({kinds}): "
        f"{result.directory / 'questions.jsonl'}, {result.directory / 'mission.json'}"
    )
    return 0
