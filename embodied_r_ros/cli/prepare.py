"""``embodied-r prepare``: the command line of :mod:`embodied_r_training.data.prepare` (rosbags + questions
-> the training data set; the output is documented there). Ends with status 1 when anything failed."""

from __future__ import annotations

import argparse
from pathlib import Path

from embodied_r_training.data.bag_reader import BagTopics
from embodied_r_training.data.prepare import (
    DEFAULT_CACHE,
    PrepareConfig,
    run_prepare,
    summary_table,
    write_dataset,
)
from embodied_r_training.synth.ground_truth import DEFAULT_SCENE_FILE

from ..config import GROUND_TRUTH, ConfigError, KeyFrameConfig, ModelConfig


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
        "prepare", help="build a training data set from rosbags and their questions (VLM descriptions)"
    )
    parser.add_argument(
        "questions", type=Path, nargs="+", help="questions.jsonl file(s); bags relative to them"
    )
    parser.add_argument("--out", type=Path, required=True, help="output data-set directory")
    parser.add_argument(
        "--vlm",
        help="VLM: local directory or served model name; with --vlm-backend ground_truth the scene file: a "
        f"bare name is looked up beside each bag directory (default {DEFAULT_SCENE_FILE})",
    )
    parser.add_argument(
        "--vlm-backend",
        default="transformers",
        choices=["transformers", "openai", GROUND_TRUTH],
        help="transformers, openai, or ground_truth: no VLM, a measuring instrument for `embodied-r synth` "
        "bags that describes key frames from the scene's geometry (what a perfect VLM would say)",
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="openai backend: server URL")
    parser.add_argument("--concurrency", type=int, default=8, help="openai backend: requests in flight")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help=f"description cache ({DEFAULT_CACHE})"
    )
    parser.add_argument(
        "--image-topic", default="", help="camera topic (default: the bag's only image topic)"
    )
    parser.add_argument("--odom-topic", default="/odom", help="odometry topic ('' = no poses)")
    parser.add_argument("--seed", type=int, default=0, help="split shuffle seed")
    parser.add_argument("--split", type=_fractions, default=(0.8, 0.1, 0.1), help="TRAIN,VAL,TEST fractions")
    parser.add_argument("--folds", type=int, default=0, help="add a fold column with K folds by scene")
    parser.add_argument("--batch-size", type=int, default=32, help="VLM requests per generate call")
    parser.add_argument(
        "--max-keyframes",
        type=int,
        default=KeyFrameConfig().max_keyframes,
        help="key frames per question at most (paper: 32; fewer make shorter prompts, as the node's "
        "keyframes.max_keyframes does)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run_prepare_command)


def run_prepare_command(args: argparse.Namespace) -> int:
    """Run ``embodied-r prepare``: 0 when every question became a record, 1 when anything failed."""
    if not args.vlm and args.vlm_backend != GROUND_TRUTH:
        raise ConfigError(
            f"--vlm is required with --vlm-backend {args.vlm_backend} (a VLM directory or served model "
            f"name); or describe synthetic bags with --vlm-backend {GROUND_TRUTH}"
        )
    vlm = ModelConfig(
        model=args.vlm or DEFAULT_SCENE_FILE,
        backend=args.vlm_backend,
        base_url=args.base_url,
        max_concurrency=args.concurrency,
        device=args.device,
        max_new_tokens=args.max_new_tokens,
    )
    try:
        keyframes = KeyFrameConfig(max_keyframes=args.max_keyframes)
    except ConfigError as exc:
        raise ConfigError(f"--max-keyframes {args.max_keyframes}: {exc}") from exc
    config = PrepareConfig(
        keyframes=keyframes,
        questions=list(args.questions),
        out=args.out,
        vlm=vlm,
        cache=args.cache,
        topics=BagTopics(args.image_topic, args.odom_topic),
        seed=args.seed,
        fractions=args.split,
        folds=args.folds,
        batch_size=args.batch_size,
        progress=not args.no_progress,
    )
    result = run_prepare(config)
    summary = write_dataset(config.out, result)
    print(summary_table(summary))
    for failure in result.failures:
        print(f"FAILED {failure.what}: {failure.reason}")
    if result.failures:
        print(f"{len(result.failures)} item(s) failed; the rest is in {config.out} (see failures.jsonl)")
        return 1
    return 0
