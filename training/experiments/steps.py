"""What the experiment scripts share: running ``embodied-r`` commands, resumable timed stages, joining
prepared data sets."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


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

    def run(self, name: str, done: Path, work: Any) -> None:
        if done.exists():
            logger.info("%s: done already (%s)", name, done)
            return
        logger.info("%s: starting", name)
        start = time.perf_counter()
        work()
        self.times[name] = round(time.perf_counter() - start, 1)
        self.path.write_text(json.dumps(self.times, indent=1) + "\n")
        logger.info("%s: %.0f s", name, self.times[name])


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
