"""Results kept across machines and sessions, keyed by what they are made of.

On 2 CPU cores an experiment takes longer than one working session on a fresh machine, so each finished
stage (an evaluation's metrics and predictions, a training run's adapter or log) is copied into a committed
folder (``root``, e.g. ``results/reasoner``) with a ``provenance.json`` that holds its :class:`StageKey`:

- the stage's inputs by content (``inputs``: name -> identity): the prepared data files themselves (not
  the code that wrote them), the stage's resolved config, the model's files, what the trainer is fed (the
  SFT examples, traces included), the library versions; where the checkout and OUT lie is written as a
  placeholder (:func:`portable`), so a clean checkout anywhere restores what another one kept;
- the code of that stage alone (``code``): the trainer and its rewards, or the evaluator and the system's
  generation, by what each definition computes (:mod:`stage_code`), not by file or commit.

A kept result is restored only for an equal key: a change that leaves a stage's inputs and code as they were
(a refactor elsewhere, a module moved, a comment) leaves it valid; one that changes them invalidates it, and
the log names what changed. Results in the OUT directory carry the same record: one that another key left
there is moved aside (``NAME.stale-TIME``) and recomputed, never reused or kept as this run's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stage_code import code_changes

logger = logging.getLogger(__name__)

PROVENANCE = "provenance.json"
_CHUNK = 1 << 20


def file_identity(path: Path) -> str:
    """sha256 of one file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_identity(path: Path, skip: Iterable[str] = ()) -> str:
    """sha256 over a directory's files (relative names and contents), or one file's; ``skip``: file or
    folder names left out (checkpoints, logs). A missing path raises FileNotFoundError."""
    path = Path(path)
    if path.is_file():
        return file_identity(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} does not exist: nothing to identify")
    skipped = set(skip)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = item.relative_to(path)
        if skipped & set(relative.parts):
            continue
        digest.update(f"{relative.as_posix()}\0{file_identity(item)}\n".encode())
    return digest.hexdigest()


def value_identity(value: Any, places: Mapping[str, str] | None = None) -> str:
    """sha256 of a JSON-able value (a resolved config, arguments), independent of key order; ``places``
    as in :func:`portable`."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(portable(text, places).encode()).hexdigest()


def portable(text: str, places: Mapping[str, str] | None) -> str:
    """``text`` with each absolute folder of ``places`` (folder -> placeholder, e.g. the OUT directory ->
    ``<out>``) written as its placeholder, longest first: a result's identity must not depend on where the
    checkout and its OUT directory lie (prepared data and resolved configs hold absolute paths)."""
    for folder in sorted(places or {}, key=len, reverse=True):
        text = text.replace(folder.rstrip("/") + "/", places[folder] + "/")
    return text


def text_file_identity(path: Path, places: Mapping[str, str] | None = None) -> str:
    """sha256 of a text file's content as :func:`portable` writes it."""
    return hashlib.sha256(portable(path.read_text(encoding="utf-8"), places).encode()).hexdigest()


@dataclass(frozen=True)
class StageKey:
    """What one stage's result is made of: its inputs (name -> identity) and its code (definition name ->
    identities, :func:`stage_code.code_identity`). ``where`` (definition name -> the modules that hold it
    now) only makes messages readable; it is no part of the key."""

    inputs: Mapping[str, str] = field(default_factory=dict)
    code: Mapping[str, list[str]] = field(default_factory=dict)
    where: Mapping[str, str] = field(default_factory=dict, compare=False)

    def with_inputs(self, **more: str) -> StageKey:
        """This key plus more inputs."""
        return StageKey({**self.inputs, **more}, self.code, self.where)

    def as_dict(self) -> dict[str, Any]:
        return {
            "inputs": dict(sorted(self.inputs.items())),
            "code": {n: list(d) for n, d in sorted(self.code.items())},
        }

    def why_not(self, recorded: Mapping[str, Any] | None) -> str | None:
        """Why a result recorded with key ``recorded`` (:meth:`as_dict`) is not this key's, naming every input
        and code definition that differs; None when it is."""
        if not recorded or "inputs" not in recorded:
            return "it has no key (made before results were keyed by content)"
        reasons = []
        inputs = dict(self.inputs)
        differs = sorted(
            k for k in set(inputs) | set(recorded["inputs"]) if inputs.get(k) != recorded["inputs"].get(k)
        )
        if differs:
            reasons.append(f"made from another {', '.join(differs)}")
        changed = code_changes(recorded.get("code", {}), self.code)
        if changed:
            named = [f"{n} ({self.where[n]})" if n in self.where else f"{n} (gone)" for n in changed[:12]]
            more = f" and {len(changed) - 12} more" if len(changed) > 12 else ""
            reasons.append(f"its code changed: {', '.join(named)}{more}")
        return "; ".join(reasons) or None


def _head(repo: Path | None) -> str:
    """The checkout's commit (a record for people; no part of any key), '' outside a git checkout."""
    if repo is None:
        return ""
    found = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else ""


class KeptResults:
    """Finished stages kept in the repository with the key of what made them (module docstring).

    ``root`` None: nothing is kept or restored. ``out``: the experiment's OUT directory, where stages compute
    (``OUT/KIND/NAME``). ``repo``: the checkout, whose commit each record names for people.
    """

    def __init__(self, root: Path | None, out: Path, repo: Path | None = None) -> None:
        self.root, self.out, self.commit = root, Path(out), _head(repo)

    @staticmethod
    def _read(directory: Path) -> dict[str, Any] | None:
        try:
            return json.loads((directory / PROVENANCE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def why_invalid(self, directory: Path, key: StageKey) -> str | None:
        """Why the result in ``directory`` (kept or in OUT) is not ``key``'s; None if it is."""
        provenance = self._read(directory)
        return "no provenance" if provenance is None else key.why_not(provenance.get("key"))

    def _record(self, key: StageKey) -> dict[str, Any]:
        return {"key": key.as_dict(), "commit": self.commit, "kept": time.strftime("%Y-%m-%d %H:%M:%S")}

    def _set_aside(self, target: Path, key: StageKey) -> None:
        """Move an OUT directory another key made aside, so that it is neither reused nor kept as this run's
        result; nothing is deleted."""
        if self.root is None or not target.exists():
            return
        why = self.why_invalid(target, key)
        if why is None:
            return
        stale = f"{target.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}"
        aside, n = target.with_name(stale), 1
        while aside.exists():  # two set aside within a second
            n += 1
            aside = target.with_name(f"{stale}-{n}")
        logger.warning("%s is not this run's (%s): moved to %s", target, why, aside)
        target.rename(aside)

    def claim(self, target: Path, key: StageKey) -> None:
        """Before a stage computes into the OUT directory ``target``: set aside what another key left there
        and record ``key`` in it, so that a result found there later (a resumed run) is reused and kept only
        when this key made it. Does nothing when results are not kept (``root`` None: OUT is reused as is)."""
        if self.root is None:
            return
        self._set_aside(target, key)
        target.mkdir(parents=True, exist_ok=True)
        if not (target / PROVENANCE).is_file():
            (target / PROVENANCE).write_text(json.dumps(self._record(key), indent=1) + "\n", encoding="utf-8")

    def restore(self, kind: str, name: str, key: StageKey, files: tuple[str, ...]) -> bool:
        """Copy the kept result ``kind/name`` made with ``key`` into OUT; True when it was restored. A kept
        result of another key is left alone, and the log says what changed."""
        if self.root is None:
            return False
        kept, target = self.root / kind / name, self.out / kind / name
        if not all((kept / f).is_file() for f in files):
            return False
        why = self.why_invalid(kept, key)
        if why is not None:
            logger.warning("kept %s is not valid for this run, recomputing it: %s", kept, why)
            return False
        self._set_aside(target, key)  # an older result in OUT must not shadow the kept one
        target.mkdir(parents=True, exist_ok=True)
        for f in (*files, PROVENANCE):  # all of them: a half-written result of the same key is replaced
            shutil.copyfile(kept / f, target / f)
        return True

    def restore_all(self, kind: str, name: str, key: StageKey) -> list[str]:
        """:meth:`restore` of every file kept in ``kind/name`` (a result whose files vary, such as a training
        checkpoint); the names restored, none when nothing valid for ``key`` is kept."""
        kept = None if self.root is None else self.root / kind / name
        if kept is None or not kept.is_dir():
            return []
        files = tuple(sorted(p.name for p in kept.iterdir() if p.is_file() and p.name != PROVENANCE))
        return list(files) if files and self.restore(kind, name, key, files) else []

    def drop(self, kind: str, name: str) -> None:
        """Remove the kept ``kind/name`` (a stand-in that a finished result replaces, e.g. a checkpoint)."""
        if self.root is not None and (self.root / kind / name).is_dir():
            shutil.rmtree(self.root / kind / name)

    def keep(
        self, kind: str, name: str, key: StageKey, files: dict[str, Path], replace: bool = False
    ) -> None:
        """Copy ``files`` (name in the kept dir -> path in OUT) into ``root/kind/name`` with their provenance.

        Only results this run made: their OUT directory (``OUT/kind/name``) must carry ``key`` (:meth:`claim`
        or :meth:`restore` wrote it), so nothing is ever kept under a key that did not make it. ``replace``:
        what is kept there under the same key is replaced (a later checkpoint of the same run)."""
        if self.root is None or not all(p.is_file() for p in files.values()):
            return
        source_dir = self.out / kind / name
        why = self.why_invalid(source_dir, key)
        if why is not None:
            logger.warning("not keeping %s: nothing there says this key made it (%s)", source_dir, why)
            return
        kept = self.root / kind / name
        if not replace and self.why_invalid(kept, key) is None and all((kept / f).is_file() for f in files):
            return  # kept already (restored, or kept by an earlier run with the same key)
        # Written beside, then put in place by renames: an interruption leaves the old result or the new
        # one, never new files under the old key.
        staging = kept.with_name(f".{kept.name}.keeping")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for f, source in files.items():
            shutil.copyfile(source, staging / f)
        made = self._read(source_dir) or {}
        record = self._record(key) | {
            "commit": made.get("commit", self.commit)
        }  # the commit that computed it
        (staging / PROVENANCE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        replaced = kept.with_name(f".{kept.name}.replaced")
        shutil.rmtree(replaced, ignore_errors=True)
        if kept.exists():
            kept.rename(replaced)
        staging.rename(kept)
        shutil.rmtree(replaced, ignore_errors=True)
