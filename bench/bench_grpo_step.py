"""Where a GRPO step's time goes, and what the reasoner's settings cut (issue 42): completions per second.

Runs the experiment's own training config (``training/configs/reasoner_cpu.yaml``: its rewards, LoRA and
consistency reference) for a few steps in each of two variants, in ONE process on the same data, and
splits each step's wall time into

* ``rollouts``: sampling the group's completions (``GRPOTrainer._generate``),
* ``rewards``: format, accuracy and consistency (its reference model's answers included),
* ``logps``: the rest of the scoring: per-token log-probabilities outside the loss (the frozen reference's
  for the KL term, the old policy's when generation and updates are not aligned),
* ``policy``: the rest of the step: the policy's forward and backward over prompt + completion, the update.

Variants (each a set of ``--set`` overrides of the config, and the trainer's loss pass):

* ``before``: the settings of the earlier reasoner run: one question of 8 completions a step, float32,
  KL to the reference (beta 0.04), TRL's loss pass (every row runs its prompt).
* ``rows``: the config as it stands: several questions a step (gradient accumulation), bf16 autocast
  over float32 weights on the CPU, no KL term (beta 0: no reference forward); TRL's loss pass.
* ``after``: as ``rows``, with the project's loss pass (``rl/shared_prompt.py``: each prompt run once
  per group, its cache repeated for the group's completions; the same gradient).

Run (the policy: any model that writes the reasoning format, e.g. the SFT model of the experiment):

    python bench/bench_grpo_step.py --model out/reasoner/models/sft_all/weights \
        --data out/reasoner/data/train_all --steps 2 --json out/bench_grpo_step.json

Tiny smoke (the project's tiny LM, synthetic data built on the fly): ``--tiny``. The figures go to
BENCHMARKS.md with the machine and the command; timings never go into tests.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import StepTimer, Timed  # noqa: E402  (the timers of the GRPO benchmark beside it)

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "training" / "configs" / "reasoner_cpu.yaml"
VARIANTS = {  # name -> (config overrides, the project's shared-prompt loss pass or TRL's)
    "before": (
        [
            "grpo.per_device_train_batch_size=8",
            "grpo.gradient_accumulation_steps=1",
            "grpo.bf16=false",
            "grpo.beta=0.04",
        ],
        False,
    ),  # fmt: skip
    "rows": ([], False),
    "after": ([], True),
}
PARTS = {  # timed methods of TRL's GRPOTrainer (log-probs are not timed apart: the loss computes them too)
    "rollouts": "_generate",
    "rewards": "_calculate_rewards",
    "scoring": "_generate_and_score_completions",  # rollouts, rewards and the log-probs outside the loss
}


def run(variant: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``--warmup + --steps`` GRPO steps of ``variant``; figures over the last ``--steps``."""
    from embodied_r_training.rl.train import build_trainer
    from embodied_r_training.rl.train_config import load_train_config

    steps = args.warmup + args.steps
    overrides, shared_pass = VARIANTS[variant]
    sets = [f"model={args.model}", f"data.path={args.data}", f"output_dir={out}", "warm_start.steps=0",
            f"grpo.max_steps={steps}", "grpo.save_strategy='no'", "grpo.logging_steps=1", *overrides,
            *args.set]  # fmt: skip
    config = load_train_config(args.config, sets)
    timer = StepTimer()
    from trl import GRPOTrainer

    trainer = build_trainer(config, [timer], trainer_class=None if shared_pass else GRPOTrainer)
    for part, method in PARTS.items():  # instance attributes shadow the methods TRL calls on self
        timed = Timed(getattr(trainer, method))
        setattr(trainer, method, timed)
        timer.parts[part] = timed
    trainer.train()
    timed_steps = timer.steps[args.warmup :]
    wall = sum(s["wall"] for s in timed_steps)
    seconds = {p: sum(s[p] for s in timed_steps) for p in PARTS}
    share = {
        "rollouts": seconds["rollouts"] / wall,
        "rewards": seconds["rewards"] / wall,
        "logps": (seconds["scoring"] - seconds["rollouts"] - seconds["rewards"]) / wall,
        "policy": (wall - seconds["scoring"]) / wall,
    }
    grpo = config.grpo
    completions = grpo["per_device_train_batch_size"] * grpo.get("gradient_accumulation_steps", 1)
    lengths = [
        r["completions/mean_length"] for r in trainer.state.log_history if "completions/mean_length" in r
    ]
    spread = [r["frac_reward_zero_std"] for r in trainer.state.log_history if "frac_reward_zero_std" in r]
    return {
        "settings": overrides or ["the config as it stands"],
        "loss_pass": "each prompt once per group" if shared_pass else "TRL's: every row its prompt",
        "completions_per_step": completions,
        "questions_per_step": completions // grpo["num_generations"],
        "step_s_median": statistics.median(s["wall"] for s in timed_steps),
        "completions_per_s": completions * len(timed_steps) / wall,
        "mean_completion_tokens": statistics.fmean(lengths[args.warmup :])
        if lengths[args.warmup :]
        else None,
        "share": share,
        "groups_without_spread": statistics.fmean(spread) if spread else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, help="the policy (a model folder that writes <think>/<answer>)")
    parser.add_argument("--data", type=Path, help="a data set of `embodied-r prepare` (train split)")
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--tiny", action="store_true", help="smoke run: the tiny LM on synthetic data")
    parser.add_argument("--variants", default="before,rows,after")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--set", action="append", default=[], help="more config overrides (KEY=VALUE)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TQDM_DISABLE", "1")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or not set(variants) <= set(VARIANTS):
        parser.error(f"--variants takes {' and/or '.join(VARIANTS)}, got {args.variants!r}")
    with tempfile.TemporaryDirectory(prefix="bench_grpo_step_") as tmp:
        root = Path(tmp)
        if args.tiny:
            from embodied_r_training.synth.synthetic_dataset import build_synthetic_dataset

            from embodied_r_ros.testing.tiny_models import LM_SUBDIR, VLM_SUBDIR, ensure_tiny_models

            models = ensure_tiny_models()
            args.model = models / LM_SUBDIR
            args.data = build_synthetic_dataset(root, models / VLM_SUBDIR, scenes=2)
            args.set += ["grpo.max_completion_length=16", "reference.max_new_tokens=4"]
        elif args.model is None or args.data is None:
            parser.error("give --model and --data (or --tiny)")
        started = time.time()
        runs = {v: run(v, args, root / v) for v in variants}
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} at the end",
        "model": str(args.model),
        "seconds": round(time.time() - started),
        "runs": runs,
    }
    for base in ("before", "rows"):  # ratios of completions per second within this one process
        if {base, "after"} <= set(runs):
            results[f"after_vs_{base}_completions_per_s"] = (
                runs["after"]["completions_per_s"] / runs[base]["completions_per_s"]
            )
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
