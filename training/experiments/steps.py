"""What the experiment scripts share: running ``embodied-r`` commands, resumable timed stages, joining
prepared data sets, the recipe their results are kept by, and evaluations kept across machines."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

from kept import KeptResults, Recipe, text_file_identity, tree_identity, value_identity

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]


def cli(args: list[str]) -> None:
    """Run one ``embodied-r`` command in-process (the users' code path); a failure stops the experiment."""
    from embodied_r_ros.cli.main import main

    logger.info("embodied-r %s", " ".join(args))
    status = main(args)
    if status != 0:
        raise SystemExit(f"embodied-r {args[0]} failed with status {status}: embodied-r {' '.join(args)}")


class Stages:
    """Times each stage and skips the ones whose output already exists (so a rerun resumes)."""

    def __init__(self, out: Path) -> None:
        self.path = out / "times.json"
        self.times: dict[str, float] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def run(self, name: str, done: Path, work: Any) -> bool:
        """Run ``work`` unless ``done`` exists; True when it ran here."""
        if done.exists():
            logger.info("%s: done already (%s)", name, done)
            return False
        logger.info("%s: starting", name)
        start = time.perf_counter()
        work()
        self.times[name] = round(time.perf_counter() - start, 1)
        self.path.write_text(json.dumps(self.times, indent=1) + "\n")
        logger.info("%s: %.0f s", name, self.times[name])
        return True


def join_sets(parts: dict[str, Path], split: str, out: Path) -> None:
    """One data set from several prepared ones: ``split`` rows with ids and scenes prefixed by the key."""
    from datasets import Dataset

    rows = []
    for prefix, path in parts.items():
        for line in (path / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                row["id"], row["scene"] = f"{prefix}/{row['id']}", f"{prefix}/{row['scene']}"
                rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    Dataset.from_list(rows).to_parquet(str(out / f"{split}.parquet"))


# What a kept evaluation holds.
KEPT_EVAL_FILES = ("metrics.json", "predictions.jsonl")
# Arguments that say where results go, not what they are (the config and the model enter by content).
NOT_IN_RECIPE = ("out", "figures", "results", "no_keep", "parts", "config", "model")


def experiment_recipe(args: argparse.Namespace, config: Any, data: dict[str, Path]) -> Recipe:
    """What every result of an experiment depends on besides the code: the resolved training ``config``,
    the base model's files (``args.model``), the prepared data sets (``data``: name -> directory, its
    train or test split by the name) and the other arguments."""
    splits = {n: p / ("train.jsonl" if n.startswith("train") else "test.jsonl") for n, p in data.items()}
    # Where the checkout and OUT lie is no part of it (the data's bag paths, the config's own path).
    places = {str(Path(args.out).resolve()): "<out>", str(REPO): "<repo>"}
    data_ids = {name: text_file_identity(path, places) for name, path in sorted(splits.items())}
    return Recipe({
        "config": value_identity(dataclasses.asdict(config), places),
        "model": tree_identity(args.model),
        "data": value_identity(data_ids),
        "arguments": value_identity({k: v for k, v in vars(args).items() if k not in NOT_IN_RECIPE}),
    })  # fmt: skip


def evaluate(
    out: Path,
    dataset: Path,
    name: str,
    system: list[str],
    flags: list[str],
    stages: Stages,
    kept: KeptResults,
) -> Path:
    """``embodied-r eval DATASET --split test`` of one system (its arguments ``system``, the experiment's
    shared ``flags``) into ``OUT/eval/NAME``: restored when kept, kept when new."""
    target = out / "eval" / name
    command = ["eval", str(dataset), "--split", "test", "--out", str(target), *flags, *system]
    if not kept.restore("eval", name, KEPT_EVAL_FILES):
        kept.claim(target)
    if stages.run(f"eval {name}", target / "metrics.json", lambda: cli(command)):
        kept.record(target)  # the code the evaluation loaded, beyond what was loaded when it was claimed
    kept.keep("eval", name, {f: target / f for f in KEPT_EVAL_FILES})
    return target


def restorable(kept: KeptResults, names: list[str]) -> set[str]:
    """The evaluations among ``names`` that are kept and valid (restored into OUT on the way)."""
    return {name for name in names if kept.restore("eval", name, KEPT_EVAL_FILES)}


def grpo_log(out: Path, name: str, kept: KeptResults) -> list[dict[str, Any]]:
    """GRPO run ``name``'s log history: kept (``log_history.json``), or read from its checkpoints in
    ``OUT/runs/NAME`` (then kept); [] when neither is there."""
    from embodied_r_training.eval.plots import load_log_history

    run_dir = out / "runs" / name
    log = run_dir / "log_history.json"
    if not kept.restore("runs", name, ("log_history.json",)):
        if not any(run_dir.glob("checkpoint-*")):
            return []
        log.write_text(json.dumps({"log_history": load_log_history(run_dir)}) + "\n", encoding="utf-8")
        kept.keep("runs", name, {"log_history.json": log})
    return load_log_history(log)
