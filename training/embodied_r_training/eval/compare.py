"""``embodied-r compare``: several ``embodied-r eval`` runs of the same split side by side.

Each run is an eval output directory (``metrics.json`` + ``predictions.jsonl``), given as ``DIR`` or
``LABEL=DIR``. The table has one row per system: multiple-choice accuracy and numeric MRA with their 95 %
bootstrap intervals, the per-task scores, format and consistency rates and the mean completion length.
With ``--baseline LABEL`` (repeatable) it adds each system's paired difference in multiple-choice
accuracy against that baseline, resampling the same questions for both (:func:`.stats.paired_difference`),
and says whether the interval excludes 0.

Blind rows never see the descriptions: the programs ``chance``, ``options-only`` and ``constant``, and
``question-only`` model rows (found by the system their metrics name), plus any run given with ``--blind
LABEL``. Per task and form the best blind row is the one with the best score on that task IN THIS TABLE
(chosen on the very questions it is scored on: it flatters the blind side), and each system gets its paired
difference per form against that composite reader, each question scored by its task's best blind row.
Every difference is taken from the per-question scores, never from rounded figures.

Writes ``comparison.md``, ``comparison.json``, ``comparison.png`` (accuracy bars with their intervals) and,
with blind rows, ``comparison_tasks.png`` (each system per task beside that task's best blind row).
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
# The eval systems that never see the key-frame descriptions (embodied-r eval --system).
BLIND_SYSTEMS = ("chance", "options-only", "constant", "question-only")
# A row whose answers are mostly untagged (format rate below this) gets its lenient reading as a footnote.
LENIENT_BELOW = 0.5
# What the code scores numeric answers by (embodied_r_ros.reasoning.answers.mean_relative_accuracy).
MRA_DEFINITION = (
    "MRA (VSI-Bench's mean relative accuracy): the mean over the thresholds θ in {0.50, 0.55, ..., 0.95} of "
    "1[|ŷ − y| / |y| ≤ 1 − θ] (inclusive, with a 1e-9 slack so an error of exactly 10 % is within 10 %; "
    "y = 0 scores 1 only for ŷ = 0; an unreadable answer scores 0)."
)


@dataclass
class Run:
    """One evaluated system: its label, metrics and per-record scores by id."""

    label: str
    path: Path
    metrics: dict[str, Any]
    predictions: dict[str, dict[str, Any]]

    def scores(self, ids: list[str]) -> list[float]:
        return [float(self.predictions[i]["score"]) for i in ids]

    def task_scores(self, ids: list[str]) -> dict[str, float]:
        """The mean score per task and form ("abs_distance (numeric)") over ``ids``, unrounded."""
        groups: dict[str, list[float]] = {}
        for i in ids:
            groups.setdefault(task_key(self.predictions[i]), []).append(float(self.predictions[i]["score"]))
        return {task: sum(values) / len(values) for task, values in groups.items()}

    @property
    def blind(self) -> bool:
        """Whether the run's system never sees the descriptions (:data:`BLIND_SYSTEMS`)."""
        return self.metrics.get("system") in BLIND_SYSTEMS


def task_key(prediction: dict[str, Any]) -> str:
    """A prediction's task and form as tables name them: "abs_distance (numeric)"."""
    return f"{prediction['task']} ({prediction['form']})"


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


def _significant(difference: Interval | None) -> dict[str, Any]:
    return {
        **(_interval(difference) or {}),
        "significant": bool(difference is not None and difference.excludes(0.0)),
    }


def best_blind(blind: list[Run], ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per task and form, the blind run with the best mean score over ``ids`` (the first given on ties):
    ``{"label", "score"}``, the score unrounded."""
    best: dict[str, dict[str, Any]] = {}
    for run in blind:
        for task, score in run.task_scores(ids).items():
            if task not in best or score > best[task]["score"]:
                best[task] = {"label": run.label, "score": score}
    return dict(sorted(best.items()))


def best_blind_scores(runs: list[Run], best: dict[str, dict[str, Any]], ids: list[str]) -> list[float]:
    """Per question of ``ids``, the score of its task's best blind run (:func:`best_blind`)."""
    by_label = {r.label: r for r in runs}
    return [float(by_label[best[task_key(p)]["label"]].predictions[i]["score"])
            for i, p in ((i, runs[0].predictions[i]) for i in ids)]  # fmt: skip


def compare(runs: list[Run], baselines: list[str] = (), blind: list[str] = ()) -> dict[str, Any]:
    """The comparison of ``runs`` (same records) as a JSON-able dict; see the module docstring. ``blind``:
    labels of further runs that never see the descriptions (beside those :attr:`Run.blind` finds)."""
    if not runs:
        raise ConfigError("nothing to compare: give at least one eval output directory")
    labels = [r.label for r in runs]
    for flag, given in (("--baseline", baselines), ("--blind", blind)):
        unknown = [b for b in given if b not in labels]
        if unknown:
            raise ConfigError(f"{flag} {', '.join(unknown)} is none of the runs' labels: {', '.join(labels)}")
    mc_ids, numeric_ids = _ids(runs, MC), _ids(runs, NUMERIC)
    by_label = {r.label: r for r in runs}
    blind_runs = [r for r in runs if r.blind or r.label in blind]
    best = best_blind(blind_runs, mc_ids + numeric_ids)
    forms = ((MC, mc_ids), (NUMERIC, numeric_ids))
    composite = {form: best_blind_scores(runs, best, ids) for form, ids in forms} if blind_runs else {}
    blind_labels = {r.label for r in blind_runs}
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
            "length_unit": run.metrics.get("length_unit", "characters"),
            "blind": run.label in blind_labels,
            "lenient": run.metrics.get("lenient"),
            "tasks": {
                f"{task} ({form})": group["score"]
                for task, forms in run.metrics["tasks"].items()
                for form, group in forms.items()
            },
            "versus": {},  # MC accuracy against each baseline, paired
            "versus_numeric": {},  # numeric MRA against each baseline, paired
            "versus_best_blind": {
                form: _significant(paired_difference(run.scores(ids), composite[form])) for form, ids in forms
            }
            if blind_runs
            else {},
        }
        for baseline in baselines:
            if baseline != run.label:
                other = by_label[baseline]
                mc = paired_difference(run.scores(mc_ids), other.scores(mc_ids))
                numeric = paired_difference(run.scores(numeric_ids), other.scores(numeric_ids))
                row["versus"][baseline] = _significant(mc)
                row["versus_numeric"][baseline] = _significant(numeric)
        systems.append(row)
    return {
        "records": {"mc": len(mc_ids), "numeric": len(numeric_ids)},
        "blind": [r.label for r in blind_runs],
        "best_blind": best,
        "best_blind_overall": {form: _interval(bootstrap_ci(scores)) for form, scores in composite.items()}
        if blind_runs
        else {},
        "systems": systems,
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def percent_with_ci(interval: dict[str, float] | None) -> str:
    """``mean [low, high]`` in % of an interval dict (as :meth:`Interval.as_dict` gives), or –."""
    if interval is None:
        return "–"
    return f"{_pct(interval['mean'])} [{_pct(interval['low'])}, {_pct(interval['high'])}]"


def _length(s: dict[str, Any], unit: str | None) -> str:
    if s["mean_length"] is None:
        return "–"
    return f"{s['mean_length']:.0f}" + ("" if unit else f" {s['length_unit']}")


def _difference(d: dict[str, Any] | None) -> str:
    return "–" if not d or "mean" not in d else f"{percent_with_ci(d)}{' *' if d['significant'] else ''}"


def comparison_markdown(result: dict[str, Any]) -> str:
    """The comparison as markdown tables: overall (with intervals and paired differences), then per task."""
    systems = result["systems"]
    baselines = sorted({b for s in systems for b in s["versus"]})
    blind = bool(result.get("blind"))
    # Added by callers that also read answers outside the tags (e.g. the SmolLM2 experiment).
    lenient = any(s.get("mc_accuracy_lenient") for s in systems)
    units = {s.get("length_unit", "characters") for s in systems}
    unit = units.pop() if len(units) == 1 else None  # one unit: in the header; several: in each cell
    records = result["records"]
    versus_blind = ["MC vs best blind", "MRA vs best blind"] if blind else []
    lines = [
        f"Held-out records: {records['mc']} multiple choice, {records['numeric']} numeric. Scores in %, "
        "[95 % bootstrap interval]; differences are paired (same questions), from unrounded scores.",
        "",
        "| system | MC accuracy | numeric MRA | format | consistency | "
        + (f"mean length ({unit}) | " if unit else "mean length | ")
        + "".join(f"MC vs {b} | MRA vs {b} | " for b in baselines)
        + "".join(f"{c} | " for c in versus_blind)
        + ("MC accuracy, untagged answers read whole |" if lenient else ""),
        "|---|---:|---:|---:|---:|---:|" + "---:|" * (2 * len(baselines) + len(versus_blind) + lenient),
    ]
    for s in systems:
        versus = "".join(
            f"{_difference(s['versus'].get(b))} | {_difference(s['versus_numeric'].get(b))} | "
            for b in baselines
        )
        if blind:
            versus += "".join(f"{_difference(s['versus_best_blind'].get(f))} | " for f in (MC, NUMERIC))
        extra = f"{percent_with_ci(s.get('mc_accuracy_lenient'))} |" if lenient else ""
        label = f"{s['label']} (blind)" if s.get("blind") and "blind" not in s["label"] else s["label"]
        lines.append(
            f"| {label} | {percent_with_ci(s['mc_accuracy'])} | {percent_with_ci(s['numeric_mra'])} | "
            f"{_pct(s['format_rate'])} | {_pct(s['consistency_rate'])} | {_length(s, unit)} | {versus}{extra}"
        )
    lines.append("")
    if baselines or blind:
        lines.append("`*`: the interval of the difference excludes 0.")
    if blind:
        overall = result.get("best_blind_overall", {})
        lines.append(
            f'Blind rows (never see the descriptions): {", ".join(result["blind"])}. "vs best blind": each '
            "question scored against the blind row with the best score on its task in this table (per task "
            "below), chosen on these same questions, which flatters the blind side; that composite scores "
            f"{percent_with_ci(overall.get(MC))} MC accuracy and {percent_with_ci(overall.get(NUMERIC))} MRA."
        )
    lines.append(MRA_DEFINITION)
    lines.append(
        f"Mean length: of the completions, in {unit}." if unit else
        "Mean length: of the completions, in each row's unit (tokens of its LM, or characters)."
    )  # fmt: skip
    for s in systems:
        read = s.get("lenient")
        if read and s["format_rate"] is not None and s["format_rate"] < LENIENT_BELOW:
            lines.append(
                f"{s['label']} read leniently (no <answer> tag needed): {_pct(read.get('mc'))} MC / "
                f"{_pct(read.get('numeric'))} MRA."
            )
    tasks = sorted({t for s in systems for t in s["tasks"]})
    best = result.get("best_blind", {})
    lines += [
        "",
        "| task | " + " | ".join(s["label"] for s in systems) + (" | best blind (row) |" if blind else " |"),
    ]
    lines.append("|---|" + "---:|" * len(systems) + ("---|" if blind else ""))
    for task in tasks:
        row = f"| {task} | " + " | ".join(_pct(s["tasks"].get(task)) for s in systems) + " |"
        if blind:
            b = best.get(task)
            row += f" {_pct(b['score'])} ({b['label']}) |" if b else " – |"
        lines.append(row)
    return "\n".join(line.rstrip() for line in lines) + "\n"


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


def plot_tasks_against_blind(result: dict[str, Any], path: Path) -> Path | None:
    """Per task and form, each system that sees the descriptions (the oracle, whose 100 % is the bound,
    left out) beside the best blind row of that task (grey, named): where a system beats a blind guess
    and where not. None when the comparison has no blind rows."""
    from matplotlib.figure import Figure

    best = result.get("best_blind") or {}
    if not best:
        return None
    shown = [s for s in result["systems"] if not s["blind"] and "oracle" not in s["label"].lower()]
    tasks = sorted(best, key=lambda t: (not t.endswith(f"({MC})"), t))
    bars = [(s["label"], [s["tasks"].get(t) for t in tasks]) for s in shown]
    bars.append(("best blind row of the task", [best[t]["score"] for t in tasks]))
    height = 0.8 / len(bars)
    figure = Figure(figsize=(9.0, 1.0 + 0.22 * len(tasks) * len(bars)), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    colours = [f"C{i}" for i in range(len(bars) - 1)] + ["0.6"]
    for k, ((label, scores), colour) in enumerate(zip(bars, colours, strict=True)):
        ys = [i - 0.4 + (k + 0.5) * height for i in range(len(tasks))]
        values = [100 * (v or 0.0) for v in scores]
        axes.barh(ys, values, height, label=label, color=colour)
    for i, task in enumerate(tasks):  # which blind row is the best one for this task
        axes.text(100 * best[task]["score"] + 1, i + 0.4 - 0.5 * height, best[task]["label"], va="center",
                  fontsize=7, color="0.35")  # fmt: skip
    axes.set_yticks(range(len(tasks)), tasks)
    axes.invert_yaxis()
    axes.set_xlim(0, 115)
    axes.set_xlabel("% (multiple choice: accuracy; numeric: MRA)")
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def write_comparison(result: dict[str, Any], out: Path) -> list[Path]:
    """comparison.json, comparison.md, comparison.png and (with blind rows) comparison_tasks.png in
    ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "comparison.json", out / "comparison.md"]
    files[0].write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    files[1].write_text(comparison_markdown(result), encoding="utf-8")
    files.append(plot_comparison(result, out / "comparison.png"))
    tasks = plot_tasks_against_blind(result, out / "comparison_tasks.png")
    return files + ([tasks] if tasks is not None else [])
