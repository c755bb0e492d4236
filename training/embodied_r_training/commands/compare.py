"""``embodied-r compare``: the command line of :mod:`embodied_r_training.eval.compare` (several eval runs of
the same split side by side)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..eval.compare import compare, comparison_markdown, load_run, write_comparison


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r compare``."""
    parser = subparsers.add_parser(
        "compare", help="several eval runs of the same split side by side, with bootstrap intervals"
    )
    parser.add_argument("runs", nargs="+", help="eval output directories, as DIR or LABEL=DIR")
    parser.add_argument("--out", type=Path, required=True, help="where comparison.{md,json,png} go")
    parser.add_argument(
        "--baseline", action="append", default=[], help="label to take paired differences against"
    )
    parser.add_argument(
        "--blind",
        action="append",
        default=[],
        help="label of a further blind row (never sees the descriptions; chance, options-only, constant and "
        "question-only runs count as blind anyway)",
    )
    parser.set_defaults(func=run_compare_command)


def run_compare_command(args: argparse.Namespace) -> int:
    """Run ``embodied-r compare``."""
    result = compare([load_run(spec) for spec in args.runs], args.baseline, args.blind)
    files = write_comparison(result, args.out)
    print(comparison_markdown(result), end="")
    print(f"wrote {', '.join(str(p) for p in files)}")
    return 0
