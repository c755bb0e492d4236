"""Completions kept as they are generated, so an interrupted evaluation resumes where it stopped.

A model row of ``embodied-r eval`` generates for tens of minutes on a CPU. Each generated batch is appended
to ``OUT/completions.partial.jsonl`` under a header that says what generated it (the system, the models
and their files' sizes and times, the data set and split, the records' ids, the batch size and the seed).
A run that finds the file with the same header generates only the records it lacks; batches are whole, so
greedy completions come out as an uninterrupted run's would (sampled ones draw from another point of the
random stream). Any other header means another evaluation: the file is started again. The finished run
removes it (its completions are then in ``predictions.jsonl``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

logger = logging.getLogger(__name__)

PARTIAL_FILE = "completions.partial.jsonl"


def files_signature(directory: str | Path | None) -> list[list[Any]]:
    """(name, size, mtime in ns) of the files directly in ``directory`` (a local model or adapter
    folder); [] for a hub id, a served name or no folder."""
    if not directory or not Path(directory).is_dir():
        return []
    return [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(Path(directory).iterdir())
            if p.is_file()]  # fmt: skip


def ids_digest(ids: Iterable[str]) -> str:
    """A digest of the records' ids in order."""
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


class PartialCompletions:
    """The completions generated so far (``done``: record index -> (completion, tokens or None)), and the
    file that keeps them (:meth:`append` after each batch, :meth:`remove` when the run is complete)."""

    def __init__(self, out: Path, header: Mapping[str, Any]) -> None:
        self.path = out / PARTIAL_FILE
        self.header = json.loads(json.dumps(dict(header), default=str))  # as it reads back from the file
        self.done: dict[int, tuple[str, int | None]] = self._read()
        out.mkdir(parents=True, exist_ok=True)
        self._handle: TextIO | None = None  # opened at the first append, after a clean rewrite

    def _read(self) -> dict[int, tuple[str, int | None]]:
        if not self.path.is_file():
            return {}
        lines = self.path.read_text(encoding="utf-8").splitlines()
        done: dict[int, tuple[str, int | None]] = {}
        try:
            if not lines or json.loads(lines[0]).get("header") != self.header:
                logger.info("%s: made by another evaluation; starting again", self.path)
                return {}
            for line in lines[1:]:
                row = json.loads(line)
                done[int(row["index"])] = (str(row["completion"]), row["tokens"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            # A line cut off by the interruption ends what is kept: the batches before it stand.
            logger.warning("%s: a damaged line after %d completions; keeping those", self.path, len(done))
        if done:
            logger.info("%s: resuming after %d completions", self.path, len(done))
        return done

    def append(self, rows: Sequence[tuple[int, str, int | None]]) -> None:
        """Keep a generated batch: (record index, completion, tokens or None) per record."""
        if self._handle is None:
            self._rewrite()
            self._handle = self.path.open("a", encoding="utf-8")
        for index, completion, tokens in rows:
            self.done[index] = (completion, tokens)
            line = {"index": index, "completion": completion, "tokens": tokens}
            self._handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        self._handle.flush()

    def _rewrite(self) -> None:
        """The header and the completions kept, with no damaged tail, before new ones are appended."""
        with self.path.open("w", encoding="utf-8") as handle:
            handle.write(json.dumps({"header": self.header}) + "\n")
            for index, (completion, tokens) in sorted(self.done.items()):
                line = {"index": index, "completion": completion, "tokens": tokens}
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def remove(self) -> None:
        """The run is complete: the file goes."""
        self.close()
        self.path.unlink(missing_ok=True)
