"""GRPO training benchmarks with the tiny LM on the CPU, every figure from runs in the same process.

1. Share of step time spent in our reward code (:class:`~embodied_r_training.rl.staged_reward.StagedReward`:
   parsing, grading, weighting, building the reference queries), with the reference model's answer call
   (``PolicyReference.generate``) timed and reported separately, as is the time inside the reference
   model's ``generate``. Two stages: 7:3:0 (format-first, no reference) and 1:7:2 (consistency weighted: the
   warm-started model gets some answers right by chance, so the reference is asked). Goal: <= 5 %.
2. Reference-model calls per step in the 1:7:2 stage (all of a step's queries in one batched call).
   Goal: <= 1.
3. Steps per second, full fine-tuning vs LoRA, same data, same settings, stage 7:3:0 (and 1:7:2, where
   LoRA's reference is the same model with the adapter switched off).

The policy is the tiny random Qwen2 LM after a supervised warm start (so it writes the tags and its answers
are sometimes right); data: ``embodied-r synth`` + ``embodied-r prepare`` with the tiny VLM (as in
training/experiments/learn_tiny.py). Each run does ``--warmup`` untimed steps, then ``--steps`` timed ones.

Run:  python bench/bench_train.py [--steps 12] [--warmup 2] [--threads 1] [--json out/bench_train.json]

A real model instead of the tiny one (no warm start; the timing does not depend on the answers' format):

    python bench/bench_train.py --model .cache/models/smollm2 --data out/smollm2/data/train_all \
        --stages 7:3:0 --prompts-per-step 1 --max-completion-length 64 --lora-r 16 --lora-targets all-linear \
        --steps 3 --warmup 1 --threads 2

Each run also reports its peak resident memory (Linux: the high-water mark is reset before each run) and
its trainable parameters, so full fine-tuning (a frozen reference copy when beta > 0) and LoRA compare on
memory as well as speed. Memory freed by one run stays in the process, so the peak of a run after the
first is only an upper bound: for a clean figure per variant, run ``--variants full`` and
``--variants lora`` as separate processes.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from embodied_r_training.rl.sft import run_warm_start
from embodied_r_training.rl.train import build_trainer
from embodied_r_training.rl.train_config import build_train_config
from embodied_r_training.synth.synthetic_dataset import build_synthetic_dataset
from transformers import TrainerCallback

from embodied_r_ros.testing.tiny_models import LM_SUBDIR, VLM_SUBDIR, ensure_tiny_models

STAGES = {"7:3:0": (7, 3, 0), "1:7:2": (1, 7, 2)}


class Timed:
    """Wraps a callable (a reward function or a generate method) and sums the seconds of its calls."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self.__name__ = getattr(function, "__name__", type(function).__name__)  # TRL logs reward names
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.function(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step (generation, rewards, forward/backward, update) and, per step,
    the seconds and calls of each :class:`Timed` in ``parts`` (filled in after the trainer is built)."""

    def __init__(self) -> None:
        self.parts: dict[str, Timed] = {}
        self.steps: list[dict[str, float]] = []
        self._start: dict[str, float] = {}

    def _snapshot(self) -> dict[str, float]:
        snap = {"wall": time.perf_counter()}
        for name, part in self.parts.items():
            snap[name], snap[f"{name}_calls"] = part.seconds, part.calls
        return snap

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = self._snapshot()

    def on_step_end(self, args, state, control, **kwargs):
        end = self._snapshot()
        self.steps.append({k: end[k] - self._start[k] for k in end})


def config_for(args: argparse.Namespace, model: Path, data: Path, out: Path, stage: str, lora: bool):
    """The benchmark's training config: ``stage`` weights for the whole run, full fine-tuning or LoRA."""
    f, a, c = STAGES[stage]
    settings: dict[str, Any] = {
        "model": str(model),
        "output_dir": str(out),
        "data": {"path": str(data)},
        "rewards": [{"start_epoch": 1, "format": f, "accuracy": a, "consistency": c}],
        "grpo": {
            "use_cpu": True, "bf16": False, "learning_rate": 1e-3, "beta": 0.001,
            "num_generations": args.generations, "temperature": 1.0,
            "per_device_train_batch_size": args.generations * args.prompts_per_step,
            "max_completion_length": args.max_completion_length, "max_steps": args.warmup + args.steps,
            "gradient_checkpointing": False, "save_strategy": "no", "logging_steps": 1, "disable_tqdm": True,
        },
    }  # fmt: skip
    if lora:
        settings["lora"] = {"enabled": True, "r": args.lora_r, "alpha": 2 * args.lora_r, "dropout": 0.0}
        if args.lora_targets:
            settings["lora"]["target_modules"] = args.lora_targets
    return build_train_config(settings, source=f"bench_train {stage}{' lora' if lora else ''}")


def reset_peak_memory() -> bool:
    """Reset the process's resident-memory high-water mark (Linux); False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_memory_mb() -> float | None:
    """The resident-memory high-water mark (VmHWM) in MiB, None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run(args: argparse.Namespace, model: Path, data: Path, out: Path, stage: str, lora: bool) -> dict:
    """Train ``--warmup + --steps`` steps; the figures cover the last ``--steps``."""
    gc.collect()
    peak_reset = reset_peak_memory()
    timer = StepTimer()
    trainer = build_trainer(config_for(args, model, data, out, stage, lora), callbacks=[timer])
    timer.parts["reward"] = trainer.reward_funcs[0] = Timed(trainer.reward_funcs[0])
    reference = trainer.embodied_r_reference
    if reference is not None:
        # The reference call as a whole, and the reference model's generate inside it (full fine-tuning:
        # TRL's frozen ref_model; unwrapping it on the CPU hands back that same object).
        timer.parts["reference"] = reference.generate = Timed(reference.generate)
        if getattr(trainer, "ref_model", None) is not None:
            timer.parts["ref_generate"] = trainer.ref_model.generate = Timed(trainer.ref_model.generate)
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    trainer.train()
    peak = peak_memory_mb() if peak_reset else None
    steps = timer.steps[args.warmup :]

    def total(key: str) -> float:
        return sum(step.get(key, 0.0) for step in steps)

    wall = total("wall")
    ours = total("reward") - total("reference")  # the reference call runs inside the reward
    inner = total("ref_generate") / wall if "ref_generate" in timer.parts else None  # not timed with LoRA
    accuracy = [r["rewards/accuracy/mean"] for r in trainer.state.log_history if "rewards/accuracy/mean" in r]
    return {
        "stage": stage,
        "lora": lora,
        "steps_timed": len(steps),
        "step_s_median": statistics.median(step["wall"] for step in steps),
        "steps_per_s": len(steps) / wall,
        "reward_code_share": ours / wall,
        "reward_code_ms_per_step": 1000 * ours / len(steps),
        "reference_call_share": total("reference") / wall,
        "reference_model_generate_share": inner,
        "reference_calls_per_step_max": max((step.get("reference_calls", 0) for step in steps), default=0),
        "reference_calls_per_step_mean": total("reference_calls") / len(steps),
        "steps_with_reference_call": sum(1 for step in steps if step.get("reference_calls", 0) > 0),
        "accuracy_mean": sum(accuracy) / len(accuracy) if accuracy else None,
        "trainable_parameters": trainable,
        "frozen_reference_copy": getattr(trainer, "ref_model", None) is not None,
        "peak_memory_mb": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=None, help="a real LM directory, not the tiny one")
    parser.add_argument("--stages", default="7:3:0,1:7:2", help="reward stages to run (7:3:0 and/or 1:7:2)")
    parser.add_argument("--variants", default="full,lora", help="full fine-tuning and/or LoRA")
    parser.add_argument("--lora-r", type=int, default=8, help="LoRA rank (alpha = 2 r)")
    parser.add_argument("--lora-targets", default="", help="LoRA target_modules (default: the config's)")
    parser.add_argument("--data", type=Path, default=None, help="a prepared data set (default: build one)")
    parser.add_argument("--steps", type=int, default=12, help="timed GRPO steps per run")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--warm-steps", type=int, default=20, help="supervised warm start of the tiny LM")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 = steadier timings)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TQDM_DISABLE", "1")

    stages = [stage.strip() for stage in args.stages.split(",") if stage.strip()]
    if not stages or not set(stages) <= set(STAGES):
        parser.error(f"--stages takes {' and/or '.join(STAGES)}, got {args.stages!r}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or not set(variants) <= {"full", "lora"}:
        parser.error(f"--variants takes full and/or lora, got {args.variants!r}")
    if args.model is not None and args.data is None:
        parser.error("--model needs --data (a data set prepared for it, e.g. out/smollm2/data/train_all)")
    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        root = Path(tmp)
        if args.model is not None:
            data, policy = args.data, args.model
        else:
            models = ensure_tiny_models(args.models_dir)
            data = args.data or build_synthetic_dataset(root, models / VLM_SUBDIR, scenes=4)
            policy = warm_start_tiny(args, models, data, root)
        runs = {}
        for variant in variants:
            for stage in stages:
                name = f"{variant} {stage}"
                out = root / name.replace(" ", "_").replace(":", "")
                runs[name] = run(args, policy, data, out, stage, lora=variant == "lora")
    full, lora = runs.get(f"full {stages[0]}"), runs.get(f"lora {stages[0]}")
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), load average {os.getloadavg()[0]:.1f} at the end",
        "model": str(args.model or "tiny random Qwen2 LM after a warm start"),
        "completions_per_step": args.generations * args.prompts_per_step,
        "max_completion_length": args.max_completion_length,
        "runs": runs,
        "lora_vs_full_speed": lora["steps_per_s"] / full["steps_per_s"] if full and lora else None,
    }
    for name, r in runs.items():
        print(
            f"{name}: {r['steps_per_s']:.2f} steps/s (median step {r['step_s_median'] * 1000:.0f} ms); "
            f"reward code {100 * r['reward_code_share']:.2f} % of step time "
            f"({r['reward_code_ms_per_step']:.1f} ms/step, goal <= 5 %); reference call "
            f"{100 * r['reference_call_share']:.1f} %, {r['reference_calls_per_step_mean']:.2f} calls/step, "
            f"max {r['reference_calls_per_step_max']:.0f} (goal <= 1); "
            f"{r['trainable_parameters'] / 1e6:.2f} M trainable parameters, peak memory "
            + ("n/a" if r["peak_memory_mb"] is None else f"{r['peak_memory_mb']:.0f} MiB")
        )
    if full and lora:
        print(f"LoRA / full steps per second ({stages[0]}): {results['lora_vs_full_speed']:.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def warm_start_tiny(args: argparse.Namespace, models: Path, data: Path, root: Path) -> Path:
    """The tiny LM after ``--warm-steps`` supervised steps on the format (so it writes the tags)."""
    return run_warm_start(
        build_train_config(
            {
                "model": str(models / LM_SUBDIR), "output_dir": str(root / "warm"),
                "data": {"path": str(data)},
                "warm_start": {"steps": args.warm_steps, "learning_rate": 1e-2},
                "rewards": [{"start_epoch": 1, "format": 7, "accuracy": 3, "consistency": 0}],
                "grpo": {"use_cpu": True, "bf16": False, "num_generations": 2,
                         "per_device_train_batch_size": 2},
            },
            source="bench_train warm start",
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
