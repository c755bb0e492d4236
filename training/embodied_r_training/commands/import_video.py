"""``embodied-r import-video``: the command line of :mod:`embodied_r_training.data.import_video` (benchmark
videos + question tables -> bags + questions.jsonl; the layouts read are documented there)."""

from __future__ import annotations

import argparse
from pathlib import Path

from embodied_r_ros.cli.flags import add_config_flags, config_from_flags

from ..data.import_video import ImportConfig, import_videos


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r import-video``."""
    parser = subparsers.add_parser(
        "import-video", help="import benchmark videos + question tables (VSI-Bench, UrbanVideo) as bags"
    )
    parser.add_argument("directory", type=Path, help="the benchmark folder")
    add_config_flags(parser, ImportConfig, ("layout", "out", "fps", "max_side", "progress"))
    parser.set_defaults(func=run_import_command)


def run_import_command(args: argparse.Namespace) -> int:
    """Run ``embodied-r import-video``: 0 when every video was imported, 1 otherwise."""
    config = config_from_flags(ImportConfig, args, directory=args.directory)
    questions, failures = import_videos(config)
    print(f"{len(questions)} questions written to {config.out / 'questions.jsonl'}")
    for what, reason in failures:
        print(f"FAILED {what}: {reason}")
    return 1 if failures else 0
