"""Does GRPO learn? The tiny random LM, a short warm start, then GRPO on the CPU; the format reward must rise.

One command, CPU only, a few minutes on 2 cores:

    python training/experiments/learn_tiny.py [--out out/learn_tiny] [--figure docs/figures/learn_tiny.png]

1. Data: ``embodied-r synth`` (a few small scenes) + ``embodied-r prepare`` with the tiny VLM, exactly as a
   user builds a data set (reused when ``OUT/data`` already holds one).
2. A SHORT supervised warm start (:mod:`embodied_r_training.rl.warm_start`, few steps): afterwards the LM
   writes ``<think>..</think><answer>..</answer>`` only some of the time at temperature 1, so the format
   reward varies within a group and GRPO has something to push on (a random LM scores 0 everywhere: no
   advantage at all).
3. GRPO with :func:`embodied_r_training.rl.train.train` (TRL's GRPOTrainer, our StagedReward) from the warm
   start, weights format:accuracy:consistency 7:3:0 (the paper's first stage).
4. Baseline, same run: the same GRPO steps from the same warm start with learning rate 0, so sampling noise
   and the reward code are identical and only the updates are missing.

Writes ``OUT/learn_tiny.json`` (format reward mean over the first and last 10 steps for both runs, settings,
times), ``OUT/grpo/plots/{rewards,length}.png`` (:func:`~embodied_r_training.eval.plots.plot_training_curves`)
and one summary figure (``--figure``): per-step format, accuracy and total reward with moving averages,
GRPO against the baseline. The tiny model learns the answer FORMAT, not spatial reasoning: accuracy stays
at chance.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch
from embodied_r_training.eval.plots import plot_training_curves
from embodied_r_training.rl.sft import run_warm_start
from embodied_r_training.rl.train import train
from embodied_r_training.rl.train_config import TrainConfig, build_train_config
from embodied_r_training.synth.synthetic_dataset import build_synthetic_dataset

from embodied_r_ros.testing.tiny_models import LM_SUBDIR, VLM_SUBDIR, ensure_tiny_models

logger = logging.getLogger("learn_tiny")

REPO = Path(__file__).resolve().parents[2]
WINDOW = 10  # steps in the first/last means and the moving average
# The per-step batch means the training log holds (StagedReward's per reward, TRL's for the total).
REWARD_KEYS = {name: f"rewards/{name}/mean" for name in ("format", "accuracy", "total")}


def build_dataset(out: Path, models: Path, scenes: int, size: str) -> Path:
    """The experiment's data set: :func:`build_synthetic_dataset` with the tiny VLM into ``out``."""
    return build_synthetic_dataset(out, models / VLM_SUBDIR, scenes=scenes, size=size)


def grpo_config(args: argparse.Namespace, model: Path, data: Path, out: Path, lr: float) -> TrainConfig:
    """GRPO from ``model`` with the experiment's settings; ``lr`` 0 is the no-update baseline."""
    batch = args.generations * args.prompts_per_step
    return build_train_config(
        {
            "model": str(model),
            "output_dir": str(out),
            "seed": args.seed,
            "data": {"path": str(data)},
            "rewards": [{"start_epoch": 1, "format": 7, "accuracy": 3, "consistency": 0}],
            "grpo": {
                "use_cpu": True, "bf16": False, "learning_rate": lr, "lr_scheduler_type": "constant",
                "beta": args.beta, "num_generations": args.generations, "temperature": args.temperature,
                "per_device_train_batch_size": batch, "gradient_accumulation_steps": 1,
                "max_completion_length": args.max_completion_length, "max_steps": args.steps,
                "gradient_checkpointing": False, "save_strategy": "no", "logging_steps": 1,
            },
        },
        source="learn_tiny",
    )  # fmt: skip


def series(history: list[dict[str, Any]], key: str) -> list[float]:
    """The per-step values of ``key`` in a trainer log, in step order."""
    return [float(row[key]) for row in sorted(history, key=lambda r: r.get("step", 0)) if key in row]


def moving_average(values: list[float], window: int) -> list[float]:
    """Trailing mean over up to ``window`` values."""
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i + 1 - window) : i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def summarise(history: list[dict[str, Any]]) -> dict[str, Any]:
    """First/last-window means of the logged rewards and completion length of one run."""
    result: dict[str, Any] = {}
    for name, key in (*REWARD_KEYS.items(), ("mean_length", "completions/mean_length")):
        values = series(history, key)
        if values:
            result[f"{name}_first{WINDOW}"] = sum(values[:WINDOW]) / len(values[:WINDOW])
            result[f"{name}_last{WINDOW}"] = sum(values[-WINDOW:]) / len(values[-WINDOW:])
    result["format_per_step"] = series(history, REWARD_KEYS["format"])
    return result


def plot_summary(runs: dict[str, list[dict[str, Any]]], path: Path, title: str) -> Path:
    """Format, accuracy and total reward per step (dots) and their moving averages (lines), run by run."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12.0, 4.0), dpi=100, layout="constrained")
    keys = tuple(REWARD_KEYS.values())
    colors = {"GRPO": "tab:blue", "baseline (lr 0)": "tab:gray"}
    for i, key in enumerate(keys):
        axes = figure.add_subplot(1, len(keys), i + 1)
        for label, history in runs.items():
            values = series(history, key)
            steps = list(range(1, len(values) + 1))
            color = colors.get(label, None)
            axes.plot(steps, values, ".", color=color, alpha=0.35)
            axes.plot(steps, moving_average(values, WINDOW), "-", color=color, label=f"{label}")
        axes.set_title(key)
        axes.set_xlabel("GRPO step")
        axes.set_ylim(-0.03, 1.03)
        axes.grid(alpha=0.3)
        if i == 0:
            axes.set_ylabel(f"batch mean (line: {WINDOW}-step moving average)")
            axes.legend(fontsize=8, loc="lower right")
    figure.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("out/learn_tiny"))
    parser.add_argument("--figure", type=Path, default=REPO / "docs" / "figures" / "learn_tiny.png")
    parser.add_argument("--models-dir", type=Path, default=None, help="tiny models (default: .cache)")
    parser.add_argument("--scenes", type=int, default=4)
    parser.add_argument("--size", default="160x120")
    parser.add_argument("--warm-steps", type=int, default=10, help="supervised warm-start steps")
    parser.add_argument("--warm-lr", type=float, default=1e-2)
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps")
    parser.add_argument("--lr", type=float, default=2e-3, help="GRPO lr (5e-3 collapsed, seed 1)")
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt (group size)")
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--beta", type=float, default=0.001)
    parser.add_argument("--no-baseline", dest="baseline", action="store_false", help="skip the lr-0 run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: robust when shared)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.INFO)
    torch.set_num_threads(args.threads)
    out = args.out.resolve()
    if (out / "grpo").exists() or (out / "baseline").exists() or (out / "warm").exists():
        raise SystemExit(f"{out} holds a previous run (grpo/, baseline/, warm/): remove them or pick --out")
    out.mkdir(parents=True, exist_ok=True)
    models = ensure_tiny_models(args.models_dir)
    times: dict[str, float] = {}

    start = time.perf_counter()
    data = build_dataset(out, models, args.scenes, args.size)
    times["dataset_s"] = time.perf_counter() - start

    start = time.perf_counter()
    warm_config = build_train_config(
        {
            "model": str(models / LM_SUBDIR),
            "output_dir": str(out / "warm"),
            "seed": args.seed,
            "data": {"path": str(data)},
            "warm_start": {"steps": args.warm_steps, "learning_rate": args.warm_lr},
            "rewards": [{"start_epoch": 1, "format": 7, "accuracy": 3, "consistency": 0}],
            "grpo": {"use_cpu": True, "bf16": False, "num_generations": 2, "per_device_train_batch_size": 2},
        },
        source="learn_tiny warm start",
    )
    warm = run_warm_start(warm_config)
    times["warm_start_s"] = time.perf_counter() - start
    logger.info("warm start (%d steps) done in %.0f s: %s", args.warm_steps, times["warm_start_s"], warm)

    runs: dict[str, list[dict[str, Any]]] = {}
    labels = {"grpo": ("GRPO", args.lr)}
    if args.baseline:
        labels["baseline"] = ("baseline (lr 0)", 0.0)
    for name, (label, lr) in labels.items():
        start = time.perf_counter()
        result = train(grpo_config(args, warm, data, out / name, lr))
        times[f"{name}_s"] = time.perf_counter() - start
        runs[label] = result.log_history
        logger.info("%s: %d steps in %.0f s", label, result.global_step, times[f"{name}_s"])

    plots = plot_training_curves(runs["GRPO"], out / "grpo" / "plots")
    batch = args.generations * args.prompts_per_step
    title = (
        f"tiny Qwen2 LM (random init), {args.warm_steps}-step warm start, then GRPO lr {args.lr:g}: "
        f"{args.prompts_per_step} prompts x {args.generations} completions/step, T={args.temperature:g}, "
        f"weights 7:3:0"
    )
    figure = plot_summary(runs, args.figure, title)
    summary = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "completions_per_step": batch,
        "runs": {label: summarise(history) for label, history in runs.items()},
        "times": times,
        "figure": str(figure),
        "plots": [str(p) for p in plots],
    }
    path = out / "learn_tiny.json"
    path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    for label, result in summary["runs"].items():
        print(
            f"{label}: format reward first {WINDOW} steps {result[f'format_first{WINDOW}']:.3f} -> last "
            f"{WINDOW} {result[f'format_last{WINDOW}']:.3f}; accuracy {result[f'accuracy_first{WINDOW}']:.3f}"
            f" -> {result[f'accuracy_last{WINDOW}']:.3f}"
        )
    print(f"figure {figure}; summary {path}; times " + ", ".join(f"{k} {v:.0f}" for k, v in times.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
