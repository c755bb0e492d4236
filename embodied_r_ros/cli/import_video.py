"""``embodied-r import-video``: the command line of :mod:`embodied_r_training.data.import_video` (benchmark
videos + question tables -> bags + questions.jsonl; the layouts read are documented there)."""

from __future__ import annotations

import argparse
from pathlib import Path

from embodied_r_training.data.import_video import LAYOUTS, import_videos


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r import-video``."""
    parser = subparsers.add_parser(
        "import-video", help="import benchmark videos + question tables (VSI-Bench, UrbanVideo) as bags"
    )
    parser.add_argument("directory", type=Path, help="the benchmark folder")
    parser.add_argument("--layout", choices=LAYOUTS, required=True)
    parser.add_argument("--out", type=Path, required=True, help="where bags and questions.jsonl go")
    parser.add_argument("--fps", type=float, default=2.0, help="frames per second kept from each video")
    parser.add_argument("--max-side", type=int, default=640, help="longest image side in pixels")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run_import_command)


def run_import_command(args: argparse.Namespace) -> int:
    """Run ``embodied-r import-video``: 0 when every video was imported, 1 otherwise."""
    questions, failures = import_videos(
        args.directory, args.out, args.layout, args.fps, args.max_side, not args.no_progress
    )
    print(f"{len(questions)} questions written to {args.out / 'questions.jsonl'}")
    for what, reason in failures:
        print(f"FAILED {what}: {reason}")
    return 1 if failures else 0
