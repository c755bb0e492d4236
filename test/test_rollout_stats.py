"""training/experiments/rollout_stats.py: the per-block GRPO figures and the greedy letters it reports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "training" / "experiments" / "rollout_stats.py"


def _module():
    spec = importlib.util.spec_from_file_location("rollout_stats_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _step(step: int, accuracy: float, std: float, kl: float) -> dict:
    return {"step": step, "reward/accuracy": accuracy, "reward/format": 1.0, "entropy": 0.1 * step,
            "kl": kl, "reward_std": std}  # fmt: skip


def _named(record: dict) -> dict:
    """The record as logged since rewards are named: ``rewards/<name>/mean`` for ``reward/<name>``."""
    return {
        (f"rewards/{k.split('/')[1]}/mean" if k.startswith("reward/") else k): v for k, v in record.items()
    }


@pytest.mark.parametrize("keys", ["kept runs", "named"])
def test_blocks_count_groups_without_an_advantage_and_take_the_largest_kl(tmp_path: Path, keys: str) -> None:
    stats = _module()
    history = [_step(1, 0.0, 0.0, 0.1), _step(2, 1.0, 3e-8, 0.5), _step(3, 0.5, 0.4, 0.2)]
    if keys == "named":
        history = [_named(r) for r in history]
        assert "rewards/accuracy/mean" in history[0] and "reward/accuracy" not in history[0]
    # A log as the experiments keep it (log_history.json); records without a rollout reward (the run
    # summary) are skipped.
    (tmp_path / "log_history.json").write_text(json.dumps({"log_history": [*history, {"train_loss": 1}]}))
    steps = stats.log_steps(tmp_path)
    assert [r["step"] for r in steps] == [1, 2, 3]
    rows = stats.run_rows("run", steps, block=2)
    assert rows == [
        "| run | 1-2 | 0.50 | 1.00 | 0.150 | 0.50 | 2 of 2 |",  # float-rounding ties count as one reward
        "| run | 3-3 | 0.50 | 1.00 | 0.300 | 0.20 | 0 of 1 |",
    ]


def test_letters_are_read_as_the_grader_read_them(tmp_path: Path) -> None:
    stats = _module()
    predictions = [
        {"form": "mc", "answer": "B", "score": 1.0},
        {"form": "mc", "answer": "B", "score": 0.0},
        {"form": "mc", "answer": None, "score": 0.0},
        {"form": "mc", "answer": "A", "score": 1.0},
        {"form": "numeric", "answer": 2.0, "score": 0.5},
    ]
    (tmp_path / "predictions.jsonl").write_text("\n".join(json.dumps(p) for p in predictions) + "\n")
    found = stats.letters(tmp_path)
    assert found["letters"] == {"A": 1, "B": 2, "none": 1}
    assert found["accuracy"] == 0.5
    assert abs(found["entropy_bits"] - 1.5) < 1e-9
