"""Bootstrap intervals (stats.py), the chance system of `embodied-r eval` and `embodied-r compare`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from embodied_r_training.eval.compare import compare, comparison_markdown, load_run
from embodied_r_training.eval.evaluate import chance_predictions, summarize
from embodied_r_training.eval.stats import bootstrap_ci, paired_difference

from embodied_r_ros.cli.main import main
from embodied_r_ros.config import ConfigError

PNG = b"\x89PNG\r\n\x1a\n"


def test_bootstrap_interval_matches_the_normal_approximation() -> None:
    values = np.random.default_rng(3).integers(0, 2, size=400).astype(float)
    interval = bootstrap_ci(values, seed=1)
    mean, se = values.mean(), values.std() / np.sqrt(len(values))
    assert interval.mean == pytest.approx(mean)
    # Percentile bootstrap of a mean of 400 Bernoulli values: close to mean +- 1.96 standard errors.
    assert interval.low == pytest.approx(mean - 1.96 * se, abs=0.012)
    assert interval.high == pytest.approx(mean + 1.96 * se, abs=0.012)
    assert bootstrap_ci(values, seed=1) == interval  # same seed, same interval
    assert bootstrap_ci([]) is None


def test_paired_difference_sees_what_separate_intervals_hide() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, size=300).astype(float)
    b = a.copy()
    flip = np.flatnonzero(a == 0)[:18]  # b is right on 18 more questions, wrong on none that a got right
    b[flip] = 1.0
    ia, ib = bootstrap_ci(a), bootstrap_ci(b)
    assert ia.high > ib.low  # the two intervals overlap ...
    difference = paired_difference(b, a)
    assert difference.mean == pytest.approx(0.06) and difference.excludes(0.0)  # ... the paired one does not
    assert not paired_difference(a, a).excludes(0.0)
    with pytest.raises(ValueError, match="same records"):
        paired_difference(a, b[:-1])


def _records() -> list[dict]:
    return [
        {"id": "a", "task": "route", "solution": "A", "options": ["x", "y"], "question": "q"},
        {"id": "b", "task": "route", "solution": "B", "options": ["x", "y", "z", "w"], "question": "q"},
        {"id": "c", "task": "abs_distance", "solution": "2.0", "options": [], "question": "q"},
        {"id": "d", "task": "abs_distance", "solution": "4.0", "options": [], "question": "q"},
    ]


def test_chance_is_the_expected_score_of_a_guess() -> None:
    predictions = chance_predictions(_records())
    assert [p.score for p in predictions[:2]] == [0.5, 0.25]
    # numeric: the task's mean answer (3.0) against 2.0 (50 % off) and 4.0 (25 % off)
    assert predictions[2].answer == 3.0 and predictions[2].score == pytest.approx(0.1)
    assert predictions[3].score == pytest.approx(0.6)
    metrics = summarize(predictions)
    assert metrics["overall"]["mc_accuracy"] == pytest.approx(0.375)
    low, high = metrics["overall"]["mc_accuracy_ci"]
    assert 0.25 <= low <= 0.375 <= high <= 0.5


def _eval_dir(root: Path, label: str, scores: dict[str, float]) -> Path:
    """An eval output as `embodied-r eval` writes it, with the given per-record scores."""
    from embodied_r_training.eval.evaluate import Prediction

    records = {r["id"]: r for r in _records() * 1}
    predictions = [
        Prediction(id=i, task=records[i]["task"], form="mc" if records[i]["options"] else "numeric",
                   solution=records[i]["solution"], completion="", answer=None, score=s, format=True,
                   length=5)
        for i, s in scores.items()
    ]  # fmt: skip
    out = root / label
    out.mkdir()
    (out / "metrics.json").write_text(json.dumps(summarize(predictions, label=label)))
    (out / "predictions.jsonl").write_text("".join(json.dumps(p.__dict__) + "\n" for p in predictions))
    return out


def test_compare_tables_runs_of_the_same_records(tmp_path: Path, capsys) -> None:
    weak = _eval_dir(tmp_path, "weak", {"a": 0.0, "b": 0.0, "c": 0.2, "d": 0.3})
    strong = _eval_dir(tmp_path, "strong", {"a": 1.0, "b": 1.0, "c": 0.9, "d": 1.0})
    result = compare([load_run(f"weak={weak}"), load_run(str(strong))], ["weak"])
    strong_row = result["systems"][1]
    assert strong_row["label"] == "strong" and strong_row["mc_accuracy"]["mean"] == 1.0
    assert strong_row["versus"]["weak"]["mean"] == 1.0 and strong_row["versus"]["weak"]["significant"]
    assert result["systems"][0]["versus"] == {}
    # numeric records c and d: 0.9 and 1.0 against 0.2 and 0.3, paired
    assert strong_row["versus_numeric"]["weak"]["mean"] == pytest.approx(0.7)
    table = comparison_markdown(result)
    header, rule = table.splitlines()[2:4]
    assert "| MC vs weak | MRA vs weak |" in header and header.count("|") == rule.count("|")
    assert "| 70.0 [" in table
    assert "| strong | 100.0 [100.0, 100.0] | 95.0 [90.0, 100.0] |" in table
    assert "| route (mc) | 0.0 | 100.0 |" in table and "read whole" not in table
    result["systems"][0]["mc_accuracy_lenient"] = {"mean": 0.5, "low": 0.0, "high": 1.0}
    assert "| 50.0 [0.0, 100.0] |" in comparison_markdown(result)  # a caller's extra column

    out = tmp_path / "cmp"
    assert main(["compare", f"weak={weak}", f"strong={strong}", "--baseline", "weak", "--out", str(out)]) == 0
    assert (out / "comparison.png").read_bytes().startswith(PNG)
    assert json.loads((out / "comparison.json").read_text())["records"] == {"mc": 2, "numeric": 2}
    assert "| weak |" in capsys.readouterr().out
    assert not (out / "comparison_tasks.png").exists()  # no blind row: nothing to set the tasks against
    blind = ["--blind", "weak", "--out", str(tmp_path / "blind")]
    assert main(["compare", f"weak={weak}", f"strong={strong}", *blind]) == 0
    assert (tmp_path / "blind" / "comparison_tasks.png").read_bytes().startswith(PNG)


def test_compare_refuses_different_records_and_unknown_baselines(tmp_path: Path) -> None:
    one = _eval_dir(tmp_path, "one", {"a": 1.0, "b": 0.0})
    two = _eval_dir(tmp_path, "two", {"a": 1.0, "c": 0.5})
    with pytest.raises(ConfigError, match="different records"):
        compare([load_run(str(one)), load_run(str(two))])
    with pytest.raises(ConfigError, match="none of the runs"):
        compare([load_run(str(one))], ["three"])
    with pytest.raises(ConfigError, match="not an `embodied-r eval` output"):
        load_run(str(tmp_path / "missing"))


def _run_dir(root: Path, label: str, scores: dict[str, float], **metrics) -> Path:
    """An eval output of the blind-row test's six questions (route and order: mc; dist: numeric)."""
    from embodied_r_training.eval.evaluate import Prediction

    task = {"m1": "route", "m2": "route", "m3": "order", "m4": "order", "n1": "dist", "n2": "dist"}
    predictions = [
        Prediction(id=i, task=task[i], form="numeric" if i.startswith("n") else "mc", solution="1",
                   completion="x", answer=None, score=s, format=False, length=3)
        for i, s in scores.items()
    ]  # fmt: skip
    out = root / label
    out.mkdir()
    (out / "metrics.json").write_text(json.dumps(summarize(predictions, label=label, **metrics)))
    (out / "predictions.jsonl").write_text("".join(json.dumps(p.__dict__) + "\n" for p in predictions))
    return out


def test_each_system_is_compared_with_the_best_blind_row_of_each_task(tmp_path: Path) -> None:
    def scores(*values: float) -> dict[str, float]:
        return dict(zip(("m1", "m2", "m3", "m4", "n1", "n2"), values, strict=True))

    tokens = {"length_unit": "tokens"}
    runs = [
        _run_dir(tmp_path, "model", scores(1, 1, 1, 0, 1.0, 0.5), system="reasoner",
                 lenient={"mc": 0.75, "numeric": 0.6}, **tokens),
        _run_dir(tmp_path, "chance", scores(0.5, 0.5, 0.25, 0.25, 0.1, 0.6), system="chance", **tokens),
        _run_dir(tmp_path, "const", scores(1, 0, 1, 1, 0.9, 0.8), system="constant", **tokens),
        _run_dir(tmp_path, "qo", scores(1, 1, 0, 0, 0, 0), system="reasoner", **tokens),  # blind by label
    ]  # fmt: skip
    result = compare([load_run(str(r)) for r in runs], ["chance"], ["qo"])
    assert result["blind"] == ["chance", "const", "qo"]
    # route: chance 0.5, const 0.5, qo 1.0; order: const; dist: const 0.85 (chance 0.35), unrounded
    assert result["best_blind"] == {
        "dist (numeric)": {"label": "const", "score": pytest.approx(0.85)},
        "order (mc)": {"label": "const", "score": 1.0},
        "route (mc)": {"label": "qo", "score": 1.0},
    }
    model = result["systems"][0]
    # per question against its task's best blind row: mc (0 + 0 + 0 - 1) / 4; numeric (0.1 - 0.3) / 2
    assert model["versus_best_blind"]["mc"]["mean"] == pytest.approx(-0.25)
    assert model["versus_best_blind"]["numeric"]["mean"] == pytest.approx(-0.1)
    assert result["systems"][2]["versus_best_blind"]["mc"]["mean"] == pytest.approx(-0.25)  # const on route
    assert [s["blind"] for s in result["systems"]] == [False, True, True, True]
    assert result["best_blind_overall"]["numeric"]["mean"] == pytest.approx(0.85)
    assert model["versus"]["chance"]["mean"] == pytest.approx(0.375)  # the given baselines still work

    table = comparison_markdown(result)
    assert (
        "| mean length (tokens) | MC vs chance | MRA vs chance | MC vs best blind | MRA vs best blind |"
        in table
    )
    assert "| model | 75.0 [" in table and "| -25.0 [" in table and "| -10.0 [" in table
    assert "| qo (blind) |" in table and "| chance (blind) |" in table
    assert "| order (mc) | 50.0 | 25.0 | 100.0 | 0.0 | 100.0 (const) |" in table
    assert "| dist (numeric) | 75.0 | 35.0 | 85.0 | 0.0 | 85.0 (const) |" in table
    assert "flatters the blind side" in table and "0.50, 0.55, ..., 0.95" in table
    # the model writes no tags (format 0 %): its lenient reading as a footnote
    assert "model read leniently (no <answer> tag needed): 75.0 MC / 60.0 MRA." in table

    without = compare([load_run(str(runs[0])), load_run(str(runs[3]))])  # no blind row at all
    assert without["blind"] == [] and without["systems"][0]["versus_best_blind"] == {}
    assert "best blind" not in comparison_markdown(without)
    mixed = _run_dir(tmp_path, "chars", scores(0, 0, 0, 0, 0, 0), system="oracle", length_unit="characters")
    table = comparison_markdown(compare([load_run(str(runs[0])), load_run(str(mixed))]))
    assert "| mean length |" in table and "| 3 tokens |" in table and "| 3 characters |" in table
    with pytest.raises(ConfigError, match="--blind nobody"):
        compare([load_run(str(runs[0]))], blind=["nobody"])
