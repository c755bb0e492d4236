"""PNG plots of evaluations and training runs (matplotlib, Agg, imported only when a plot is drawn).

* :func:`plot_task_scores`: per-task bars of an ``embodied-r eval`` metrics dict (``per_task.png``).
* :func:`plot_training_curves`: reward and completion-length curves over steps from a TRL/HF
  ``log_history`` (``rewards.png``, ``length.png``); usable on its own, e.g. by experiment scripts.
* :func:`load_log_history`: the ``log_history`` of a ``trainer_state.json``, its directory, or the newest
  ``checkpoint-*/trainer_state.json`` below an output directory.

Keys read from the log (TRL 1.16 GRPOTrainer): every key starting with ``reward`` (TRL's ``reward`` and
``rewards/total/mean``, and ``rewards/<name>/mean`` per reward, logged by our staged reward through
``log_metric``; ``reward/<name>`` in logs written before rewards were named), without the ``std`` ones;
lengths from ``completions/mean_length``, ``completions/mean_terminated_length`` (lines) and
``completions/min_length`` / ``completions/max_length`` (a band). ``eval_`` keys are drawn dashed.
Figures are built on :class:`matplotlib.figure.Figure` directly, without pyplot, so no global backend
state is touched.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from embodied_r_ros.config import ConfigError

LENGTH_LINES = ("completions/mean_length", "completions/mean_terminated_length", "completion_length")
LENGTH_BAND = ("completions/min_length", "completions/max_length")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def plot_task_scores(metrics: dict[str, Any], path: Path) -> Path:
    """Horizontal bars of each task/form score (accuracy for mc, MRA for numeric) with format rates,
    and a line at the overall score; returns ``path``."""
    rows = [
        (f"{task} ({'acc' if form == 'mc' else 'MRA'})", s["score"] or 0.0, s["format_rate"] or 0.0, s["n"])
        for task, forms in metrics["tasks"].items()
        for form, s in forms.items()
    ]
    figure = _figure(8.0, 1.2 + 0.42 * max(len(rows), 1))
    axes = figure.add_subplot()
    positions = list(range(len(rows)))
    axes.barh([p + 0.2 for p in positions], [r[1] for r in rows], height=0.4, label="score", color="tab:blue")
    axes.barh(
        [p - 0.2 for p in positions], [r[2] for r in rows], height=0.4, label="format", color="tab:gray"
    )
    for p, (_, score, _, n) in zip(positions, rows, strict=True):
        axes.text(min(score, 0.9) + 0.01, p + 0.2, f"{score:.2f} (n={n})", va="center", fontsize=8)
    overall = metrics["overall"]["score"]
    if overall is not None:
        axes.axvline(overall, color="tab:red", linestyle="--", label=f"all records {overall:.2f}")
    axes.set_yticks(positions, [r[0] for r in rows])
    axes.invert_yaxis()
    axes.set_xlim(0, 1.05)
    axes.set_xlabel("score (accuracy or MRA) / format rate")
    axes.set_title(f"{metrics.get('label', metrics.get('system', ''))}, split {metrics.get('split', '?')}")
    axes.legend(loc="lower right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def _series(log_history: Iterable[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of ``key``, skipping entries without it and None/NaN values."""
    steps, values = [], []
    for index, entry in enumerate(log_history):
        value = entry.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        steps.append(float(entry.get("step", index)))
        values.append(float(value))
    return steps, values


def _keys(log_history: Sequence[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for entry in log_history:
        seen.update(dict.fromkeys(entry))
    return list(seen)


def reward_keys(log_history: Sequence[dict[str, Any]]) -> list[str]:
    """The reward curves to draw: keys starting with ``reward`` (or ``eval_reward``), without ``std``."""
    return [
        k
        for k in _keys(log_history)
        if re.match(r"(eval_)?reward", k) and "std" not in k and _series(log_history, k)[0]
    ]


def _plot_curves(
    log_history: Sequence[dict[str, Any]],
    keys: Sequence[str],
    path: Path,
    ylabel: str,
    band: tuple[str, str] | None = None,
) -> Path:
    """One line per key over steps (``eval_`` keys dashed), with an optional min..max band."""
    figure = _figure(8.0, 4.5)
    axes = figure.add_subplot()
    if band is not None:
        low, high = _series(log_history, band[0]), _series(log_history, band[1])
        if low[0] and low[0] == high[0]:
            axes.fill_between(low[0], low[1], high[1], alpha=0.2, label=f"{band[0]} .. {band[1]}")
    for key in keys:
        steps, values = _series(log_history, key)
        axes.plot(steps, values, "--" if key.startswith("eval_") else "-", marker=".", label=key)
    axes.set_xlabel("step")
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.savefig(path)
    return path


def plot_training_curves(log_history: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Draw ``out_dir/rewards.png`` (every reward key over steps) and ``out_dir/length.png`` (completion
    lengths), each only when the log has such keys; returns the paths written (possibly none)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    rewards = reward_keys(log_history)
    if rewards:
        written.append(_plot_curves(log_history, rewards, out_dir / "rewards.png", "reward (batch mean)"))
    lengths = [
        k
        for k in _keys(log_history)
        if k.removeprefix("eval_") in LENGTH_LINES and _series(log_history, k)[0]
    ]
    if lengths:
        path = out_dir / "length.png"
        written.append(_plot_curves(log_history, lengths, path, "completion length (tokens)", LENGTH_BAND))
    return written


def _checkpoint_step(path: Path) -> int:
    match = re.fullmatch(r"checkpoint-(\d+)", path.parent.name)
    return int(match.group(1)) if match else -1


def load_log_history(path: Path) -> list[dict[str, Any]]:
    """``log_history`` of a trainer state: ``path`` is a trainer_state.json, a directory holding one, or an
    output directory whose newest ``checkpoint-*/trainer_state.json`` is read. ConfigError when none is
    found or it is not a trainer state."""
    path = Path(path)
    if path.is_dir():
        candidates = [path / "trainer_state.json"] if (path / "trainer_state.json").is_file() else []
        candidates = candidates or sorted(path.glob("checkpoint-*/trainer_state.json"), key=_checkpoint_step)
        if not candidates:
            raise ConfigError(
                f"--train-log {path} holds no trainer_state.json (nor checkpoint-*/trainer_state.json); pass "
                "the training output directory or the trainer_state.json file"
            )
        path = candidates[-1]
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"--train-log {path} cannot be read as JSON ({exc}); pass a trainer_state.json"
        ) from exc
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list) or not all(isinstance(e, dict) for e in history):
        raise ConfigError(
            f"--train-log {path} has no log_history list; pass a trainer_state.json written by a HF or TRL "
            "trainer"
        )
    return history
