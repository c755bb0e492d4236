"""``embodied-r train``: the command line of :mod:`embodied_r_training.rl.train` (GRPO or SFT of the
reasoning LM from a training YAML, :mod:`embodied_r_training.rl.train_config`).

``python -m embodied_r_training.commands.train --config ...`` runs the same command without
``embodied-r``'s other options: what ``accelerate launch -m`` starts on every GPU.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from embodied_r_ros.backends.cpu_bf16 import check_cpu_bf16
from embodied_r_ros.config import ConfigError

from ..rl.allocator import return_freed_memory
from ..rl.outputs import NODE_PARAMS
from ..rl.train import train
from ..rl.train_config import TrainConfig, load_train_config


def register(subparsers: argparse._SubParsersAction) -> None:
    """``embodied-r train``."""
    parser = subparsers.add_parser(
        "train",
        help="GRPO training of the reasoning LM (TRL) on a data set from `embodied-r prepare`",
        description=(
            "Train the reasoning LM with GRPO and the paper's staged format/accuracy/consistency rewards. "
            "Configs live in training/configs/ (embodied_r.yaml: the paper's settings; cpu_smoke.yaml: a "
            "few CPU steps of the tiny model). Multi-GPU: accelerate launch --config_file "
            "training/configs/accelerate_zero3.yaml -m embodied_r_training.commands.train --config ..."
        ),
    )
    add_arguments(parser)
    parser.set_defaults(func=run_train_command)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="training YAML (training/configs/*.yaml)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config value, e.g. --set grpo.max_steps=2 --set output_dir=out/x (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--resume", nargs="?", const=True, default=None, metavar="CHECKPOINT",
        help="continue from the latest checkpoint in output_dir (or the given checkpoint-N directory)",
    )  # fmt: skip


def run_train_command(args: argparse.Namespace) -> int:
    """The ``train`` subcommand; returns the exit status."""
    config = load_train_config(args.config, args.overrides)
    check_train_bf16(config)
    return_freed_memory()  # RSS that follows the live tensors (rl/allocator.py)
    result = train(config, resume=args.resume)
    params = result.node_params
    adapter = params["transformers"]["adapter"]
    print(f"trained {result.global_step} steps; final model in {result.final_dir}")
    print(f"load it in the node: embodied-r run --params-file {result.final_dir / NODE_PARAMS}")
    print(f"  (lm.model={params['model']}" + (f", lm.transformers.adapter={adapter})" if adapter else ")"))
    return 0


def check_train_bf16(config: TrainConfig) -> None:
    """Stop a CPU run under bf16 autocast on a CPU without native bf16 (backends/cpu_bf16.py) before it
    loads anything: there its matrix products run up to ~66x slower than in float32."""
    if config.grpo.get("use_cpu") and config.grpo.get("bf16"):
        check_cpu_bf16("grpo.bf16 (bf16 autocast of the CPU training)", "set grpo.bf16=false for float32")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m embodied_r_training.commands.train`` (what ``accelerate launch -m`` runs on every GPU)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    prog = "embodied_r_training.commands.train"
    parser = argparse.ArgumentParser(prog=prog, description="GRPO training")
    add_arguments(parser)
    try:
        return run_train_command(parser.parse_args(argv))
    except ConfigError as exc:
        parser.exit(2, f"error: {exc}\n")


if __name__ == "__main__":
    raise SystemExit(main())
