"""Results kept across machines and sessions, keyed by everything that made them.

On 2 CPU cores an experiment takes longer than one working session on a fresh machine, so each finished
evaluation (metrics, predictions) and each training run's log is copied into a committed folder (``root``,
e.g. ``results/smollm2``) with a ``provenance.json`` that says what made it:

- the code: the commit it ran from and the repository files the process that computed it had loaded once
  it finished (every module of the project, the config, the script: :meth:`KeptResults.record`), plus
  those of the process that kept it where that is sound; a result is valid only while ``git diff`` shows
  none of them changed;
- the recipe: a :class:`Recipe`, one identity per input besides the code (the config's resolved content,
  the model's files, the data set's files, the script's arguments); a result is valid only for an equal
  recipe, so another config, model, data set or argument never restores it. Identities are by content,
  with the checkout and the OUT directory written as placeholders (:func:`portable`): where a checkout
  lies is no part of a result, so a clean checkout anywhere restores what another one kept.

Results in the OUT directory carry the same record: one that other code or another recipe left there is
moved aside (``NAME.stale-TIME``) and recomputed, never reused or kept as this run's.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
class Recipe:
    """What made a result besides the code: input name -> identity (a hash, or a short value)."""

    inputs: Mapping[str, str] = field(default_factory=dict)

    def with_inputs(self, **more: str) -> Recipe:
        """This recipe plus more inputs (e.g. the eval set of one evaluation)."""
        return Recipe({**self.inputs, **more})

    def as_dict(self) -> dict[str, str]:
        return dict(sorted(self.inputs.items()))

    def differences(self, other: Mapping[str, str]) -> list[str]:
        """The input names whose identity differs from ``other``'s (missing on either side included)."""
        mine = self.as_dict()
        return sorted(k for k in set(mine) | set(other) if mine.get(k) != other.get(k))


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


class KeptResults:
    """Finished evaluations and training logs kept in the repository with what made them (module docstring).

    ``root`` None: nothing is kept or restored. ``recipe``: what made this run's results besides the code
    (:meth:`with_recipe` gives the same store for another recipe). ``extra_files``: repository files the
    results depend on beyond the loaded modules (the script, the config).
    """

    def __init__(
        self, repo: Path, root: Path | None, out: Path, recipe: Recipe, extra_files: Iterable[Path] = ()
    ) -> None:
        self.repo, self.root, self.out, self.recipe = Path(repo), root, out, recipe
        self.extra_files = [Path(p) for p in extra_files]
        head = _git(self.repo, "rev-parse", "HEAD")
        self.commit = head.stdout.strip() if head.returncode == 0 else ""
        status = _git(self.repo, "status", "--porcelain", "--untracked-files=all")
        # Files that differ from the commit when this process started: results that depend on them are
        # not kept (nobody could tell later which code made them).
        lines = status.stdout.splitlines() if status.returncode == 0 else None
        self.dirty = None if lines is None else {line[3:].strip() for line in lines}

    def with_recipe(self, recipe: Recipe) -> KeptResults:
        """The same store, for results made from ``recipe``."""
        other = copy.copy(self)
        other.recipe = recipe
        return other

    def _depends_on(self) -> list[str]:
        """Repository files this process's results depend on: the project's loaded modules and extra_files."""
        files = {p.resolve() for p in self.extra_files}
        for module in list(sys.modules.values()):
            name = getattr(module, "__name__", "")
            path = getattr(module, "__file__", None)
            if path and name.split(".")[0] in ("embodied_r_ros", "embodied_r_training"):
                files.add(Path(path).resolve())  # the colcon install holds symlinks into the repository
        repo = self.repo.resolve()
        return sorted(str(p.relative_to(repo)) for p in files if p.is_relative_to(repo))

    def _provenance(self) -> dict[str, Any] | None:
        """This process's record: its commit and the files it has loaded by now; None when nothing is kept
        (``root`` None, not a git checkout, or some of those files differ from the commit)."""
        if self.root is None or not self.commit or self.dirty is None:
            return None
        files = self._depends_on()
        changed = sorted(set(files) & self.dirty)
        if changed:
            logger.warning("not keeping results: %s differ from commit %s (commit them first)", changed,
                           self.commit[:10])  # fmt: skip
            return None
        return {
            "commit": self.commit,
            "files": files,
            "recipe": self.recipe.as_dict(),
            "kept": time.strftime("%Y-%m-%d %H:%M:%S"),
        }

    def _with_my_files(self, provenance: dict[str, Any]) -> dict[str, Any] | None:
        """``provenance`` (a result's, written by the process that computed it) with the files this process
        has loaded added to its list, under this process's commit; None when nothing is kept. Only where
        that is sound: the result's files are the same text at both commits (the same commit, or a later
        one that changed none of them). Otherwise the result's own record: this process's other files, some
        changed since, made no part of it, and adding them would make a valid result look stale."""
        mine = self._provenance()
        if mine is None:
            return None
        theirs = provenance.get("files", [])
        if provenance["commit"] != mine["commit"]:
            same = _git(self.repo, "diff", "--quiet", provenance["commit"], mine["commit"], "--", *theirs)
            if same.returncode != 0:
                return {**provenance, "kept": mine["kept"]}
        return {**provenance, "commit": mine["commit"], "files": sorted(set(theirs) | set(mine["files"])),
                "kept": mine["kept"]}  # fmt: skip

    @staticmethod
    def _read(directory: Path) -> dict[str, Any] | None:
        try:
            return json.loads((directory / PROVENANCE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _why_invalid(self, directory: Path) -> str | None:
        """Why the result in ``directory`` (kept or in OUT) is not this code's and recipe's; None if it is."""
        provenance = self._read(directory)
        return "no provenance" if provenance is None else self._why_not(provenance)

    def _why_not(self, provenance: Mapping[str, Any]) -> str | None:
        """Why a result with ``provenance`` is not this code's and recipe's; None if it is."""
        differs = self.recipe.differences(provenance.get("recipe", {}))
        if differs:
            return f"made from another {', '.join(differs)}"
        diff = _git(self.repo, "diff", "--quiet", provenance["commit"], "--", *provenance["files"])
        if diff.returncode != 0:
            return f"the code changed since {provenance['commit'][:10]} (or that commit is unknown here)"
        return None

    def _set_aside(self, target: Path) -> None:
        """Move an OUT directory another run made aside, so that it is neither reused nor kept as this run's
        result; nothing is deleted."""
        if self.root is None or not target.exists():
            return
        why = self._why_invalid(target)
        if why is None:
            return
        aside = target.with_name(f"{target.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
        logger.warning("%s is not this run's (%s): moved to %s", target, why, aside)
        target.rename(aside)

    def claim(self, target: Path) -> None:
        """Before a stage computes into the OUT directory ``target``: set aside what another run left there
        and record this code and recipe in it, so that a result found there later (a resumed run) is reused
        and kept only when this run made it. Does nothing when results are not kept (``root`` None, or
        uncommitted changes to the code: then OUT is reused as it is)."""
        provenance = self._provenance()
        if provenance is None:
            return
        self._set_aside(target)
        target.mkdir(parents=True, exist_ok=True)
        if not (target / PROVENANCE).is_file():
            (target / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")

    def record(self, target: Path) -> None:
        """After a stage computed into the OUT directory ``target`` in this process: add the files this
        process has loaded by now to the provenance :meth:`claim` wrote before the stage imported the code
        it ran, so that a later run reuses or keeps the result only while all of that code is unchanged."""
        provenance = self._read(target)
        if provenance is None or self._why_not(provenance) is not None:
            return
        recorded = self._with_my_files(provenance)
        if recorded is not None:
            (target / PROVENANCE).write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")

    def vouched(self, target: Path) -> bool:
        """Whether the OUT directory ``target`` holds this run's results (always, when nothing is kept)."""
        return self._provenance() is None or self._why_invalid(target) is None

    def restore(self, kind: str, name: str, files: tuple[str, ...]) -> bool:
        """Copy a kept result (``kind`` eval or runs) made by this code from this recipe into OUT; True when
        it was restored."""
        if self.root is None:
            return False
        kept, target = self.root / kind / name, self.out / kind / name
        if not all((kept / f).is_file() for f in files):
            return False
        why = self._why_invalid(kept)
        if why is not None:
            logger.info("not restoring %s: %s", kept, why)
            return False
        self._set_aside(target)  # an older result in OUT must not shadow the kept one
        target.mkdir(parents=True, exist_ok=True)
        for f in (*files, PROVENANCE):
            if not (target / f).is_file():
                shutil.copyfile(kept / f, target / f)
        return True

    def keep(self, kind: str, name: str, files: dict[str, Path]) -> None:
        """Copy ``files`` (name in the kept dir -> path in OUT) into ``root/kind/name`` with provenance.

        Only results this run made: their OUT directory (``OUT/kind/name``) must carry a valid provenance
        (:meth:`claim` or :meth:`restore` wrote it). The kept provenance is that one (the computing
        process's files) plus, where sound, the files this process loaded (:meth:`_with_my_files`): it
        names the code that made the result, not merely the code that copied it."""
        if self.root is None or not all(p.is_file() for p in files.values()):
            return
        source_dir = self.out / kind / name
        made = self._read(source_dir)
        if made is None or self._why_not(made) is not None:
            logger.warning("not keeping %s: nothing there says this run made it", source_dir)
            return
        kept = self.root / kind / name
        if self._why_invalid(kept) is None:
            return  # kept already (restored, or kept by an earlier run of the same code and recipe)
        provenance = self._with_my_files(made)
        if provenance is None:
            return
        kept.mkdir(parents=True, exist_ok=True)
        for f, source in files.items():
            shutil.copyfile(source, kept / f)
        (kept / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
