"""``embodied-r eval``: the command line of :mod:`embodied_r_training.eval.evaluate` (systems, scoring and
outputs are documented there). Ends with status 1 when any record was skipped."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embodied_r_training.data.bag_reader import BagTopics
from embodied_r_training.data.splits import SPLITS
from embodied_r_training.eval.evaluate import DEFAULT_LM, SYSTEMS, EvalConfig, metrics_markdown, run_eval
from embodied_r_training.rl.rewards import ConsistencyConfig

from ..config import ConfigError, ModelConfig


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r eval``."""
    parser = subparsers.add_parser(
        "eval", help="score the reasoner (or a baseline) on a data-set split: metrics, tables and plots"
    )
    parser.add_argument("dataset", type=Path, help="data-set directory written by embodied-r prepare")
    parser.add_argument(
        "--system", default="reasoner", choices=SYSTEMS, help="what answers (default reasoner)"
    )
    parser.add_argument("--split", default="test", choices=SPLITS)
    parser.add_argument("--limit", type=int, default=0, help="first N records only (0 = all)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (DATASET/eval/SYSTEM-SPLIT)")
    parser.add_argument("--lm", default=DEFAULT_LM, help=f"reasoning LM: directory or name ({DEFAULT_LM})")
    parser.add_argument("--adapter", default="", help="LoRA adapter directory for --lm (reasoner only)")
    parser.add_argument("--lm-backend", default="transformers", choices=["transformers", "openai"])
    parser.add_argument("--vlm", default="", help="--system vlm: the VLM, directory or served name")
    parser.add_argument("--vlm-backend", default="transformers", choices=["transformers", "openai"])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="openai backends: server URL")
    parser.add_argument("--reference", default="", help="consistency reference model (default: the base LM)")
    parser.add_argument("--reference-temperature", type=float, default=0.1, help="paper: 0.1")
    parser.add_argument("--no-consistency", action="store_true", help="skip the consistency check")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    parser.add_argument("--batch-size", type=int, default=8, help="records per generate call")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--bag-root", type=Path, default=None, help="--system vlm: bags at DIR/<scene>")
    parser.add_argument(
        "--image-topic", default="", help="camera topic (default: the bag's only image topic)"
    )
    parser.add_argument("--odom-topic", default="/odom", help="odometry topic ('' = no poses)")
    parser.add_argument("--train-log", type=Path, default=None, help="trainer_state.json or its directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run_eval_command)


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """The :class:`EvalConfig` of parsed ``embodied-r eval`` arguments (ConfigError for bad values)."""
    try:
        common = {
            "device": args.device, "dtype": args.dtype, "base_url": args.base_url,
            "max_new_tokens": args.max_new_tokens, "temperature": args.temperature,
        }  # fmt: skip
        lm = ModelConfig(model=args.lm, backend=args.lm_backend, adapter=args.adapter, **common)
        vlm = ModelConfig(model=args.vlm, backend=args.vlm_backend, **common) if args.vlm else None
        reference = (
            ModelConfig(model=args.reference, backend=args.lm_backend, **common) if args.reference else None
        )
        consistency = ConsistencyConfig(temperature=args.reference_temperature)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return EvalConfig(
        dataset=args.dataset,
        out=args.out or args.dataset / "eval" / f"{args.system}-{args.split}",
        system=args.system,
        split=args.split,
        limit=args.limit,
        lm=lm,
        vlm=vlm,
        reference=reference,
        consistency=not args.no_consistency,
        consistency_config=consistency,
        batch_size=args.batch_size,
        topics=BagTopics(args.image_topic, args.odom_topic),
        bag_root=args.bag_root,
        train_log=args.train_log,
        seed=args.seed,
        progress=not args.no_progress,
    )


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``embodied-r eval``: 0 when every record was evaluated, 1 when any was skipped."""
    config = config_from_args(args)
    if config.train_log is not None:
        from embodied_r_training.eval.plots import load_log_history

        load_log_history(config.train_log)  # a bad --train-log fails before any model is loaded
    result = run_eval(config)
    print(metrics_markdown(result.metrics), end="")
    print(f"wrote {', '.join(str(p) for p in result.files)}")
    if result.skipped:
        print(
            f"{len(result.skipped)} of {len(result.skipped) + len(result.predictions)} record(s) skipped "
            f"(listed in {config.out / 'metrics.json'} under 'skipped'):",
            file=sys.stderr,
        )
        for s in result.skipped:
            print(f"SKIPPED {s.id}: {s.reason}", file=sys.stderr)
        return 1
    return 0
