"""``embodied-r prepare``: the command line of :mod:`embodied_r_training.data.prepare` (rosbags, or robots'
memory stores, + questions -> the training data set; the output is documented there). Ends with status 1
when anything failed."""

from __future__ import annotations

import argparse
from pathlib import Path

from embodied_r_ros.cli.flags import add_config_flags, config_from_flags
from embodied_r_ros.config import VLM_PERCEIVER, ConfigError

from ..data.prepare import PrepareConfig, run_prepare, summary_table, write_dataset
from ..perceivers import GROUND_TRUTH
from ..synth.ground_truth import DEFAULT_SCENE_FILE

# The fields of PrepareConfig that have a flag here, in the order of the help.
FLAG_FIELDS = (
    "out", "vlm.model", "vlm.backend", "perception.perceiver", "perception.scene", "vlm.openai.base_url",
    "vlm.openai.max_concurrency", "vlm.transformers.device", "vlm.max_new_tokens", "cache", "topics.image",
    "topics.odometry", "seed", "fractions", "folds", "batch_size", "keyframes.max_keyframes", "progress",
)  # fmt: skip


def _fractions(text: str) -> tuple[float, float, float]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"--split wants three numbers TRAIN,VAL,TEST, got {text!r}")
    return values  # type: ignore[return-value]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r prepare`` (``embodied-r import-video`` makes its input from benchmark videos)."""
    parser = subparsers.add_parser(
        "prepare",
        help="build a training data set from rosbags (or robots' memory stores) and their questions (VLM "
        "descriptions)",
    )
    parser.add_argument(
        "questions",
        type=Path,
        nargs="+",
        help="questions.jsonl file(s); each question's bag (a rosbag2 directory, or a node's memory store "
        "NAME.sqlite) relative to its file",
    )
    add_config_flags(parser, PrepareConfig, FLAG_FIELDS, types={"--split": _fractions})
    parser.set_defaults(func=run_prepare_command)


def run_prepare_command(args: argparse.Namespace) -> int:
    """Run ``embodied-r prepare``: 0 when every question became a record, 1 when anything failed."""
    if args.vlm_backend == GROUND_TRUTH:
        raise ConfigError(
            f"--vlm-backend {GROUND_TRUTH} is now --perceiver {GROUND_TRUTH} (and --scene for a scene file "
            f"other than {DEFAULT_SCENE_FILE} beside each bag)"
        )
    if not args.vlm and args.perceiver == VLM_PERCEIVER:
        raise ConfigError(
            f"--vlm is required with --vlm-backend {args.vlm_backend} (a VLM directory or served model "
            f"name); or describe synthetic bags with --perceiver {GROUND_TRUTH}"
        )
    config = config_from_flags(PrepareConfig, args, questions=list(args.questions))
    result = run_prepare(config)
    summary = write_dataset(config.out, result)
    print(summary_table(summary))
    for failure in result.failures:
        print(f"FAILED {failure.what}: {failure.reason}")
    if result.failures:
        print(f"{len(result.failures)} item(s) failed; the rest is in {config.out} (see failures.jsonl)")
        return 1
    return 0
