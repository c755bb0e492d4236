"""``embodied-r eval``: the command line of :mod:`embodied_r_training.eval.evaluate` (systems, scoring and
outputs are documented there). Ends with status 1 when any record was skipped."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from embodied_r_ros.backends.cpu_bf16 import check_model_bf16
from embodied_r_ros.cli.flags import add_config_flags, flag_fields
from embodied_r_ros.config import BACKENDS, ModelConfig

from ..eval.evaluate import EvalConfig, metrics_markdown, run_eval

# The fields of EvalConfig that have a flag here, in the order of the help (--out, --vlm, --vlm-backend and
# --reference are this command's own).
BEFORE_MODELS = ("system", "split", "limit")
MODEL_FIELDS = ("lm.model", "lm.transformers.adapter", "lm.backend")
AFTER_MODELS = (
    "consistency_config.temperature", "consistency", "lm.transformers.device", "lm.transformers.dtype",
    "lm.transformers.calculator", "lm.transformers.lookup",
    "batch_size", "lm.temperature", "lm.max_new_tokens", "bag_root", "topics.image", "topics.odometry",
    "train_log", "calibration", "seed", "progress",
)  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r eval``."""
    parser = subparsers.add_parser(
        "eval", help="score the reasoner (or a baseline) on a data-set split: metrics, tables and plots"
    )
    parser.add_argument("dataset", type=Path, help="data-set directory written by embodied-r prepare")
    add_config_flags(parser, EvalConfig, BEFORE_MODELS)
    parser.add_argument("--out", type=Path, default=None, help="output directory (DATASET/eval/SYSTEM-SPLIT)")
    add_config_flags(parser, EvalConfig, MODEL_FIELDS)
    parser.add_argument("--vlm", default="", help="--system vlm: the VLM, directory or served name")
    parser.add_argument("--vlm-backend", default="transformers", choices=BACKENDS)
    add_config_flags(parser, EvalConfig, ("lm.openai.base_url",))
    parser.add_argument("--reference", default="", help="consistency reference model (default: the base LM)")
    add_config_flags(parser, EvalConfig, AFTER_MODELS)
    parser.set_defaults(func=run_eval_command)


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """The :class:`EvalConfig` of parsed ``embodied-r eval`` arguments (ConfigError for bad values).

    The VLM (--vlm) and the consistency reference (--reference) are generated with the LM's settings
    (device, dtype, base URL, tokens, temperature); the reference runs on the LM's backend.
    """
    fields = flag_fields(EvalConfig, args)
    lm: ModelConfig = fields["lm"]
    base = lm.with_adapter("")
    vlm = replace(base, model=args.vlm, backend=args.vlm_backend) if args.vlm else None
    reference = replace(base, model=args.reference) if args.reference else None
    out = args.out or args.dataset / "eval" / f"{fields['system']}-{fields['split']}"
    return EvalConfig(dataset=args.dataset, out=out, vlm=vlm, reference=reference, **fields)


def check_eval_bf16(config: EvalConfig) -> None:
    """Stop an evaluation whose in-process models ask for bf16 on a CPU without native bf16
    (backends/cpu_bf16.py) before any model loads: there its matrix products run up to ~66x slower."""
    for model in (m for m in (config.lm, config.vlm, config.reference) if m is not None):
        check_model_bf16(model, "give --dtype float32 (or auto)")


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``embodied-r eval``: 0 when every record was evaluated, 1 when any was skipped."""
    config = config_from_args(args)
    check_eval_bf16(config)
    if config.train_log is not None:
        from ..eval.plots import load_log_history

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
