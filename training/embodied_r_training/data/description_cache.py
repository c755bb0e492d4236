"""On-disk cache of VLM replies, so the expensive perception step runs once per question and key frames.

An entry is keyed by (VLM model, the key frames' content hashes and poses, question, options,
``prompts.PROMPT_VERSION``, and the generation settings that change a reply: max_new_tokens, temperature,
adapter): change any of these and the entry is not reused. Each entry is one small
JSON file (``DIR/ab/abcdef....json``) written to a temporary name and renamed, so a killed run leaves
only complete entries; re-running reads them instead of calling the VLM. Plain files need no lock and
several processes may share one cache directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from embodied_r_ros.config import ModelConfig
from embodied_r_ros.frames import Frame
from embodied_r_ros.reasoning import prompts


def frame_hash(frame: Frame) -> str:
    """SHA-256 of the frame's pixels and shape (the stamp does not change what the VLM sees)."""
    digest = hashlib.sha256(str(frame.image.shape).encode())
    digest.update(frame.image.tobytes())
    return digest.hexdigest()


def generation_settings(vlm: ModelConfig) -> dict[str, Any]:
    """The VLM settings that change its replies, for :func:`cache_key` (not where or how it runs)."""
    return {
        "max_new_tokens": vlm.max_new_tokens,
        "temperature": vlm.temperature,
        "adapter": vlm.transformers.adapter,
    }


def cache_key(
    model: str,
    frames: Sequence[Frame],
    question: str,
    options: Sequence[str],
    generation: Mapping[str, Any] | None = None,
) -> str:
    """The cache key of one question's VLM replies (hex SHA-256).

    ``generation``: the settings that change a reply (:func:`generation_settings`); a reply cut at 64 new
    tokens must not be reused for a run that asks for 256.
    """
    # Poses change the step prompts (odometry motion), so they belong to the key with the pixels.
    payload: dict[str, Any] = {
        "model": model,
        "frames": [frame_hash(f) for f in frames],
        "poses": [None if f.pose is None else [f.pose.position, f.pose.orientation] for f in frames],
        "question": question,
        "options": list(options),
        "prompt_version": prompts.PROMPT_VERSION,
    }
    if generation is not None:
        payload["generation"] = dict(generation)
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class DescriptionCache:
    """VLM replies on disk under ``directory``, one file per key."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._remove_orphans()

    def _remove_orphans(self) -> None:
        """Delete temporary files of writers that are gone (a run killed between write and rename)."""
        for tmp in self.directory.glob("??/.tmp-*"):
            pid = tmp.name.split("-")[1]
            if pid.isdigit() and not _alive(int(pid)):
                tmp.unlink(missing_ok=True)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> list[str] | None:
        """The replies stored under ``key``, or None (an unreadable entry counts as missing)."""
        try:
            replies = json.loads(self._path(key).read_text(encoding="utf-8"))["replies"]
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        return [str(r) for r in replies]

    def put(self, key: str, replies: Sequence[str]) -> None:
        """Store ``replies`` under ``key`` atomically (write a temporary file, then rename)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{os.getpid()}-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"replies": list(replies)}, handle, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("??/[!.]*.json"))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, as another user's process
    return True
