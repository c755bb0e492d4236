"""Side by side: how GRPO runs behaved (rollouts, by block of steps) and what their greedy models answer.

    python training/experiments/rollout_stats.py \
        --run "fixed=results/smollm2/runs/grpo_all" \
        --run "rotated=out/smollm2/runs/grpo_all_rotated" \
        --eval "fixed=results/smollm2/eval/grpo" \
        --eval "rotated=out/smollm2/eval/grpo_rotated" [--block 8]

``--run LABEL=DIR``: a GRPO output directory (its checkpoints) or one holding ``log_history.json``; per block
of steps: rollout accuracy and format rewards, sampling entropy (nats/token), the largest KL, and the steps
whose whole group got one reward (reward std < 1e-6: no advantage; TRL's ``frac_reward_zero_std`` misses
ties that differ by float rounding). ``--eval LABEL=DIR``: an ``embodied-r eval`` output; the letters its
greedy multiple-choice answers name (as the grader read them), their entropy in bits (2.0 = all four equally
often), and MC accuracy. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any


def _pairs(specs: list[str]) -> list[tuple[str, Path]]:
    pairs = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep:
            raise SystemExit(f"expected LABEL=DIR, got {spec!r}")
        pairs.append((label, Path(path)))
    return pairs


def reward_key(record: dict[str, Any], name: str) -> str:
    """The key of reward ``name``'s batch mean in a log record: ``rewards/<name>/mean``, or ``reward/<name>``
    in logs written before rewards were logged by name (the kept runs under training/experiments/results).
    """
    old = f"reward/{name}"
    return old if old in record else f"rewards/{name}/mean"


def log_steps(run: Path) -> list[dict[str, Any]]:
    """The per-step log records of a GRPO run (those with a rollout reward)."""
    from embodied_r_training.eval.plots import load_log_history

    source = run / "log_history.json" if (run / "log_history.json").is_file() else run
    return [r for r in load_log_history(source) if reward_key(r, "accuracy") in r]


def run_rows(label: str, steps: list[dict[str, Any]], block: int) -> list[str]:
    rows = []
    for start in range(0, len(steps), block):
        part = steps[start : start + block]

        def mean(key: str, part: list[dict[str, Any]] = part) -> float:
            return sum(float(r[key]) for r in part) / len(part)

        def reward(name: str, part: list[dict[str, Any]] = part) -> float:
            return sum(float(r[reward_key(r, name)]) for r in part) / len(part)

        one_reward = sum(float(r["reward_std"]) < 1e-6 for r in part)
        kl = max(float(r.get("kl", 0)) for r in part)
        rows.append(
            f"| {label} | {int(part[0]['step'])}-{int(part[-1]['step'])} | {reward('accuracy'):.2f} | "
            f"{reward('format'):.2f} | {mean('entropy'):.3f} | {kl:.2f} | {one_reward} of {len(part)} |"
        )
    return rows


def letters(eval_dir: Path) -> dict[str, Any]:
    """The letters of the greedy MC answers, their entropy in bits, and MC accuracy."""
    chosen: Counter[str] = Counter()
    scores = []
    for line in (eval_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        prediction = json.loads(line) if line.strip() else None
        if not prediction or prediction["form"] != "mc":
            continue
        chosen[str(prediction["answer"] or "none")] += 1  # the letter the grader read, with the options
        scores.append(float(prediction["score"]))
    total = sum(chosen.values())
    entropy = max(0.0, -sum(n / total * math.log2(n / total) for n in chosen.values()))
    return {"letters": dict(sorted(chosen.items())), "entropy_bits": entropy, "accuracy": sum(scores) / total}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", action="append", default=[], help="LABEL=DIR of a GRPO run")
    parser.add_argument("--eval", action="append", default=[], help="LABEL=DIR of an embodied-r eval output")
    parser.add_argument("--block", type=int, default=8, help="steps per row")
    args = parser.parse_args()
    if args.run:
        print(
            "| run | steps | accuracy reward | format reward | entropy (nats/token) | max KL | "
            "groups with one reward |"
        )
        print("|---|---|---:|---:|---:|---:|---:|")
        for label, run in _pairs(args.run):
            print("\n".join(run_rows(label, log_steps(run), args.block)))
        print()
    if args.eval:
        print("| model | MC accuracy | greedy letters | letter entropy (bits) |")
        print("|---|---:|---|---:|")
        for label, path in _pairs(args.eval):
            found = letters(path)
            spread = ", ".join(f"{k} {v}" for k, v in found["letters"].items())
            print(f"| {label} | {100 * found['accuracy']:.1f} | {spread} | {found['entropy_bits']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
