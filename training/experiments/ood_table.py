"""Indoor <-> outdoor: the reasoner experiment's OOD evaluations beside the blind rows of each test set.

    python training/experiments/ood_table.py [--results results/reasoner] [--out out/reasoner/tables]

Reads the kept evaluations of ``reasoner.py`` (``eval/ood/{sft,grpo}_TRAIN_on_TEST``, and the main table's
oracle, options-only, chance and best constant, whose ids carry the test environment as a prefix; the
constant is chosen per environment, chance pools both) and writes, per test environment, MC accuracy and
numeric MRA with 95 % bootstrap intervals, whether the model was trained on that environment (ID) or the
other (OOD), and GRPO-from-SFT minus SFT paired over the same questions.
An evaluation not kept yet is listed as missing. Writes ``OUT/ood_blind.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from embodied_r_training.eval.compare import Run, load_run, percent_with_ci
from embodied_r_training.eval.stats import bootstrap_ci, paired_difference

REPO = Path(__file__).resolve().parents[2]
ENVS = ("indoor", "outdoor")
BLIND = {
    "oracle": "oracle (reads the prompt)",
    "options_only": "options only (blind)",
    "chance": "chance",
    "constant": "best constant (blind)",
}
METHODS = {"sft": "SFT on oracle traces", "grpo": "GRPO from SFT"}


def env_subset(run: Run, env: str) -> dict[str, dict[str, Any]]:
    """The predictions of a run on the joined test set that belong to ``env`` (ids ``ENV/...``), by the
    id they have in that environment's own test set."""
    prefix = f"{env}/"
    return {i[len(prefix) :]: p for i, p in run.predictions.items() if i.startswith(prefix)}


def cell(predictions: dict[str, dict[str, Any]], form: str) -> dict[str, float] | None:
    """Mean score of one form (mc: accuracy, numeric: MRA) with its bootstrap interval."""
    interval = bootstrap_ci([p["score"] for p in predictions.values() if p["form"] == form])
    return interval.as_dict() if interval else None


def paired(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], form: str) -> dict[str, Any] | None:
    """Mean of a - b over the questions of ``form`` both answered, with its bootstrap interval and whether
    that interval excludes 0 (``significant``, as ``embodied-r compare`` marks it)."""
    ids = sorted(i for i in a if i in b and a[i]["form"] == form)
    interval = paired_difference([a[i]["score"] for i in ids], [b[i]["score"] for i in ids])
    return {**interval.as_dict(), "significant": interval.excludes(0.0)} if interval else None


def ood_rows(results: Path) -> list[dict[str, Any]]:
    """One row per test environment and system (blind programs, then each trained model)."""
    rows: list[dict[str, Any]] = []
    for test in ENVS:
        for key, label in BLIND.items():
            path = results / "eval" / key
            if (path / "predictions.jsonl").is_file():
                found = env_subset(load_run(str(path)), test)
                rows.append({"test": test, "system": label, "trained": "", **_cells(found)})
        for train in ENVS:
            runs = {}
            for method, label in METHODS.items():
                path = results / "eval" / "ood" / f"{method}_{train}_on_{test}"
                where = "ID" if train == test else "OOD"
                row = {"test": test, "system": label, "trained": f"{train} ({where})"}
                if not (path / "predictions.jsonl").is_file():
                    rows.append({**row, "missing": True})
                    continue
                runs[method] = load_run(str(path)).predictions
                rows.append({**row, **_cells(runs[method])})
            if len(runs) == 2:
                rows[-1]["grpo_minus_sft"] = {
                    f: paired(runs["grpo"], runs["sft"], f) for f in ("mc", "numeric")
                }
    return rows


def _cells(predictions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    n_mc = sum(p["form"] == "mc" for p in predictions.values())
    return {"n_mc": n_mc, "n_numeric": len(predictions) - n_mc, "mc": cell(predictions, "mc"),
            "numeric": cell(predictions, "numeric")}  # fmt: skip


def _difference(interval: dict[str, Any] | None) -> str:
    """A paired difference as the comparison tables write it: ``mean [low, high]`` in %, * if significant."""
    return "–" if interval is None else percent_with_ci(interval) + (" *" if interval["significant"] else "")


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| test set | system | trained on | MC accuracy % | numeric MRA % | GRPO-SFT, MC | GRPO-SFT, MRA |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row.get("missing"):
            values = ["not kept yet"] * 2 + ["–"] * 2
        else:
            diff = row.get("grpo_minus_sft", {})
            values = [percent_with_ci(row["mc"]), percent_with_ci(row["numeric"])]
            values += [_difference(diff.get("mc")), _difference(diff.get("numeric"))] if diff else ["–", "–"]
        lines.append(
            f"| {row['test']} | {row['system']} | {row['trained'] or '–'} | " + " | ".join(values) + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=REPO / "results" / "reasoner")
    parser.add_argument("--out", type=Path, default=Path("out/reasoner/tables"))
    args = parser.parse_args()
    rows = ood_rows(args.results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ood_blind.json").write_text(json.dumps(rows, indent=1) + "\n")
    (args.out / "ood_blind.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
