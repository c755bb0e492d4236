"""training/experiments/ood_table.py: each test environment's rows read the right questions, and GRPO
minus SFT is paired over the same ones."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "training" / "experiments" / "ood_table.py"


@pytest.fixture
def ood_table(monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("ood_table_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def _eval(path: Path, scores: dict[str, tuple[str, float]]) -> None:
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps({"label": path.name}))
    rows = [{"id": i, "form": form, "score": score} for i, (form, score) in scores.items()]
    (path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_rows_per_test_set_with_blind_rows_paired_differences_and_missing_runs(
    ood_table, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    joined = {"indoor/q1": ("mc", 1.0), "indoor/q2": ("mc", 0.0), "indoor/q3": ("numeric", 0.5),
              "outdoor/q1": ("mc", 0.0)}  # fmt: skip
    _eval(results / "eval" / "options_only", joined)
    _eval(
        results / "eval" / "ood" / "sft_indoor_on_indoor",
        {"q1": ("mc", 0.0), "q2": ("mc", 0.0), "q3": ("numeric", 0.2)},
    )
    _eval(
        results / "eval" / "ood" / "grpo_indoor_on_indoor",
        {"q1": ("mc", 1.0), "q2": ("mc", 0.0), "q3": ("numeric", 0.6)},
    )
    rows = ood_table.ood_rows(results)

    blind = [r for r in rows if r["system"].startswith("options only")]
    assert [(r["test"], r["n_mc"], r["n_numeric"]) for r in blind] == [("indoor", 2, 1), ("outdoor", 1, 0)]
    assert blind[0]["mc"]["mean"] == pytest.approx(0.5)
    grpo = next(
        r for r in rows if r["test"] == "indoor" and r["trained"] == "indoor (ID)" and "GRPO" in r["system"]
    )
    assert grpo["grpo_minus_sft"]["mc"]["mean"] == pytest.approx(0.5)
    assert grpo["grpo_minus_sft"]["numeric"]["mean"] == pytest.approx(0.4)
    missing = [(r["test"], r["trained"]) for r in rows if r.get("missing")]
    assert ("indoor", "outdoor (OOD)") in missing and ("outdoor", "indoor (OOD)") in missing
    assert "not kept yet" in ood_table.markdown(rows)


def test_the_best_constant_stands_beside_the_other_blind_rows(ood_table, tmp_path: Path) -> None:
    results = tmp_path / "results"
    _eval(results / "eval" / "chance", {"indoor/q1": ("numeric", 0.1), "outdoor/q1": ("numeric", 0.0)})
    _eval(results / "eval" / "constant", {"indoor/q1": ("numeric", 0.7), "outdoor/q1": ("numeric", 0.4)})
    rows = [r for r in ood_table.ood_rows(results) if not r["trained"]]
    assert [(r["test"], r["system"], r["numeric"]["mean"]) for r in rows] == [
        ("indoor", "chance", pytest.approx(0.1)), ("indoor", "best constant (blind)", pytest.approx(0.7)),
        ("outdoor", "chance", 0.0), ("outdoor", "best constant (blind)", pytest.approx(0.4)),
    ]  # fmt: skip
    assert "| indoor | best constant (blind) | – |" in ood_table.markdown(rows)
