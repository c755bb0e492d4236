"""``embodied-r compare``: several ``embodied-r eval`` runs of the same split side by side.

Each run is an eval output directory (``metrics.json`` + ``predictions.jsonl``), given as ``DIR`` or
``LABEL=DIR``. The table has one row per system: multiple-choice accuracy and numeric MRA with their 95 %
bootstrap intervals, the per-task scores, format and consistency rates and the mean completion length.
With ``--baseline LABEL`` (repeatable) it adds each system's paired difference in multiple-choice
accuracy against that baseline, resampling the same questions for both (:func:`.stats.paired_difference`),
and says whether the interval excludes 0.

Writes ``comparison.md``, ``comparison.json`` and ``comparison.png`` (accuracy bars with their intervals).
Runs on different records are refused: a comparison is only meaningful on the same questions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_r_ros.config import ConfigError

from .stats import Interval, bootstrap_ci, paired_difference

MC, NUMERIC = "mc", "numeric"


@dataclass
class Run:
    """One evaluated system: its label, metrics and per-record scores by id."""

    label: str
    path: Path
    metrics: dict[str, Any]
    predictions: dict[str, dict[str, Any]]

    def scores(self, ids: list[str]) -> list[float]:
        return [float(self.predictions[i]["score"]) for i in ids]


def load_run(spec: str) -> Run:
    """``DIR`` or ``LABEL=DIR`` of an eval output; the label defaults to the metrics' label."""
    label, _, path_text = spec.rpartition("=") if "=" in spec else ("", "", spec)
    path = Path(path_text)
    metrics_file, predictions_file = path / "metrics.json", path / "predictions.jsonl"
    if not metrics_file.is_file() or not predictions_file.is_file():
        raise ConfigError(
            f"{path} is not an `embodied-r eval` output (it needs metrics.json and predictions.jsonl); "
            "run embodied-r eval --out DIR first"
        )
    metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
    with predictions_file.open(encoding="utf-8") as handle:
        predictions = {row["id"]: row for row in map(json.loads, filter(str.strip, handle))}
    return Run(label or metrics.get("label") or path.name, path, metrics, predictions)


def _ids(runs: list[Run], form: str | None = None) -> list[str]:
    """The record ids all runs share (checked equal), optionally of one form."""
    first = runs[0]
    for run in runs[1:]:
        if set(run.predictions) != set(first.predictions):
            raise ConfigError(
                f"{run.path} and {first.path} scored different records ({len(run.predictions)} vs "
                f"{len(first.predictions)}); compare runs of the same split and --limit"
            )
    return sorted(i for i, p in first.predictions.items() if form is None or p["form"] == form)


def _interval(interval: Interval | None) -> dict[str, float] | None:
    return None if interval is None else interval.as_dict()


def compare(runs: list[Run], baselines: list[str] = ()) -> dict[str, Any]:
    """The comparison of ``runs`` (same records) as a JSON-able dict; see the module docstring."""
    if not runs:
        raise ConfigError("nothing to compare: give at least one eval output directory")
    labels = [r.label for r in runs]
    unknown = [b for b in baselines if b not in labels]
    if unknown:
        raise ConfigError(f"--baseline {', '.join(unknown)} is none of the runs' labels: {', '.join(labels)}")
    mc_ids, numeric_ids = _ids(runs, MC), _ids(runs, NUMERIC)
    by_label = {r.label: r for r in runs}
    systems = []
    for run in runs:
        overall = run.metrics["overall"]
        row: dict[str, Any] = {
            "label": run.label,
            "path": str(run.path),
            "models": run.metrics.get("models", {}),
            "perception": run.metrics.get("perception", ""),
            "mc_accuracy": _interval(bootstrap_ci(run.scores(mc_ids))),
            "numeric_mra": _interval(bootstrap_ci(run.scores(numeric_ids))),
            "format_rate": overall.get("format_rate"),
            "consistency_rate": overall.get("consistency_rate"),
            "mean_length": overall.get("mean_length"),
            "tasks": {
                f"{task} ({form})": group["score"]
                for task, forms in run.metrics["tasks"].items()
                for form, group in forms.items()
            },
            "versus": {},
        }
        for baseline in baselines:
            if baseline != run.label:
                difference = paired_difference(run.scores(mc_ids), by_label[baseline].scores(mc_ids))
                row["versus"][baseline] = {
                    **(_interval(difference) or {}),
                    "significant": bool(difference is not None and difference.excludes(0.0)),
                }
        systems.append(row)
    return {"records": {"mc": len(mc_ids), "numeric": len(numeric_ids)}, "systems": systems}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def percent_with_ci(interval: dict[str, float] | None) -> str:
    """``mean [low, high]`` in % of an interval dict (as :meth:`Interval.as_dict` gives), or –."""
    if interval is None:
        return "–"
    return f"{_pct(interval['mean'])} [{_pct(interval['low'])}, {_pct(interval['high'])}]"


def comparison_markdown(result: dict[str, Any]) -> str:
    """The comparison as markdown tables: overall (with intervals and paired differences), then per task."""
    systems = result["systems"]
    baselines = sorted({b for s in systems for b in s["versus"]})
    # Added by callers that also read answers outside the tags (e.g. the SmolLM2 experiment).
    lenient = any(s.get("mc_accuracy_lenient") for s in systems)
    records = result["records"]
    lines = [
        f"Held-out records: {records['mc']} multiple choice, {records['numeric']} numeric. Scores in %, "
        "[95 % bootstrap interval]; differences are paired (same questions).",
        "",
        "| system | MC accuracy | numeric MRA | format | consistency | mean length | "
        + "".join(f"MC vs {b} | " for b in baselines)
        + ("MC accuracy, untagged answers read whole |" if lenient else ""),
        "|---|---:|---:|---:|---:|---:|" + "---:|" * (len(baselines) + lenient),
    ]
    for s in systems:
        versus = ""
        for b in baselines:
            d = s["versus"].get(b)
            versus += "– | " if d is None else f"{percent_with_ci(d)}{' *' if d['significant'] else ''} | "
        length = "–" if s["mean_length"] is None else f"{s['mean_length']:.0f}"
        extra = f"{percent_with_ci(s.get('mc_accuracy_lenient'))} |" if lenient else ""
        lines.append(
            f"| {s['label']} | {percent_with_ci(s['mc_accuracy'])} | {percent_with_ci(s['numeric_mra'])} | "
            f"{_pct(s['format_rate'])} | {_pct(s['consistency_rate'])} | {length} | {versus}{extra}"
        )
    if baselines:
        lines += ["", "`*`: the interval of the difference excludes 0."]
    tasks = sorted({t for s in systems for t in s["tasks"]})
    lines += ["", "| task | " + " | ".join(s["label"] for s in systems) + " |"]
    lines.append("|---|" + "---:|" * len(systems))
    for task in tasks:
        lines.append(f"| {task} | " + " | ".join(_pct(s["tasks"].get(task)) for s in systems) + " |")
    return "\n".join(lines) + "\n"


def plot_comparison(result: dict[str, Any], path: Path) -> Path:
    """Bars of multiple-choice accuracy and numeric MRA per system with their 95 % intervals."""
    from matplotlib.figure import Figure

    systems = result["systems"]
    figure = Figure(figsize=(max(6.0, 1.3 * len(systems) + 2), 4.0), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    width = 0.4
    for offset, key, name, colour in ((-0.2, "mc_accuracy", "MC accuracy", "tab:blue"),
                                      (0.2, "numeric_mra", "numeric MRA", "tab:orange")):  # fmt: skip
        xs, heights, errors = [], [], [[], []]
        for i, s in enumerate(systems):
            interval = s[key]
            if interval is None:
                continue
            xs.append(i + offset)
            heights.append(100 * interval["mean"])
            errors[0].append(100 * (interval["mean"] - interval["low"]))
            errors[1].append(100 * (interval["high"] - interval["mean"]))
        axes.bar(xs, heights, width, yerr=errors, capsize=3, label=name, color=colour)
    axes.set_xticks(range(len(systems)), [s["label"] for s in systems], rotation=20, ha="right")
    axes.set_ylabel("% (95 % bootstrap interval)")
    axes.set_ylim(0, 100)
    axes.legend()
    axes.grid(axis="y", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def write_comparison(result: dict[str, Any], out: Path) -> list[Path]:
    """comparison.json, comparison.md and comparison.png in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "comparison.json", out / "comparison.md"]
    files[0].write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    files[1].write_text(comparison_markdown(result), encoding="utf-8")
    files.append(plot_comparison(result, out / "comparison.png"))
    return files
