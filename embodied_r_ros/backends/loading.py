"""Turning a configured model name into a local checkpoint directory, or a clear error at once.

Robots usually run offline, so nothing is fetched unless ``allow_download`` is set: a name is looked up
as a local directory, then in the local Hugging Face cache; a model found nowhere raises
:class:`ModelNotFoundError` immediately (no network wait) with the commands that fetch it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from .base import BackendError, ModelNotFoundError
from .gguf import cached_conversion, is_gguf_name

logger = logging.getLogger(__name__)

# Hugging Face repo ids: "name" or "owner/name" of letters, digits, "-", "_", ".".
_REPO_ID = re.compile(r"^[\w.\-]{1,96}(/[\w.\-]{1,96})?$")
# Files a checkpoint needs; anything else in a repo (original/ weights, docs, images) is skipped.
_DOWNLOAD_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.jinja", "*.model", "*.tiktoken"]
_WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json")


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or name.endswith("/") or not _REPO_ID.match(name)


def _hub_cache() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def how_to_get(name: str) -> str:
    """The advice that ends every "model not found" message: how to put ``name`` on this machine."""
    repo = name if _REPO_ID.match(name) else "<owner>/<model>"
    return (
        f"To get it: on a machine with internet run `hf download {repo}` (older clients: "
        f"`huggingface-cli download {repo}`), then copy its Hugging Face cache ({_hub_cache()}, "
        "or set HF_HOME) or the downloaded folder to this machine and set the model to that folder; "
        "or set allow_download: true where the hub is reachable. For a smoke run without real weights, "
        "`embodied-r tiny-models DIR` builds tiny random models: use DIR/vlm and DIR/lm."
    )


def check_model_dir(path: Path, name: str | None = None) -> Path:
    """Return ``path`` if it holds a transformers checkpoint (config.json and weights), else raise.

    Raises :class:`BackendError` naming the directory and what is missing.
    """
    label = f"model {name!r} ({path})" if name and name != str(path) else f"model directory {path}"
    if not (path / "config.json").is_file():
        raise BackendError(
            f"{label} has no config.json, so it is not a Hugging Face checkpoint folder; point the model "
            "at the folder that holds config.json (in the HF cache: "
            ".../models--<owner>--<name>/snapshots/<hash>)"
        )
    if not any(next(path.glob(g), None) for g in _WEIGHT_GLOBS):
        raise BackendError(
            f"{label} has config.json but no weights (*.safetensors or pytorch_model*.bin); the copy or "
            f"download is incomplete. {how_to_get(name or str(path))}"
        )
    return path


def read_model_config(path: Path) -> dict[str, Any]:
    """The parsed config.json of a checkpoint directory; a broken file raises :class:`BackendError`."""
    try:
        return json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise BackendError(f"cannot read {path / 'config.json'}: {exc}; the checkpoint is damaged") from exc


def _from_cache(repo_id: str) -> Path | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
        return None


def _download(repo_id: str, trust_remote_code: bool) -> Path:
    from huggingface_hub import snapshot_download

    patterns = _DOWNLOAD_PATTERNS + (["*.py"] if trust_remote_code else [])
    logger.info("downloading %s from the Hugging Face hub", repo_id)
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except Exception as exc:  # any hub, network or disk failure means: not available here
        offline = " (HF_HUB_OFFLINE is set)" if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") else ""
        raise ModelNotFoundError(
            f"model {repo_id!r} is not on this machine and downloading it failed{offline}: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. {how_to_get(repo_id)}"
        ) from exc


def _gguf_dir(model: str, path: Path) -> Path:
    """The converted checkpoint of a ``.gguf`` file (converted into the GGUF cache on first use)."""
    if not path.is_file():
        raise ModelNotFoundError(
            f"GGUF model file {path} does not exist (cwd: {Path.cwd()}); give the path of a llama.cpp .gguf "
            "file (or a checkpoint directory, such as the one `embodied-r models smollm2 DIR` writes)"
        )
    converted = cached_conversion(path)
    logger.info("model %s: using its transformers conversion %s", model, converted)
    return check_model_dir(converted, model)


def resolve_model_dir(model: str, *, allow_download: bool = False, trust_remote_code: bool = False) -> Path:
    """The local checkpoint directory for ``model`` (a directory path, a ``.gguf`` file or a hub repo id).

    Order: an existing directory; a ``.gguf`` file, converted once into the GGUF cache (see
    :func:`.gguf.gguf_cache_root`) and that conversion's directory returned; the local Hugging Face cache;
    a download when ``allow_download``.
    Raises :class:`ModelNotFoundError` (at once, without network access unless ``allow_download``) when
    the model is nowhere, and :class:`BackendError` for a directory that is not a checkpoint.
    """
    if not model:
        raise ModelNotFoundError(f"no model configured (model is empty). {how_to_get('')}")
    local = Path(model).expanduser()
    if local.is_dir():
        logger.info("model %s: using local directory %s", model, local.resolve())
        return check_model_dir(local, model)
    if is_gguf_name(model):
        return _gguf_dir(model, local)
    if local.exists():
        raise BackendError(
            f"model {model!r} is a file, not a checkpoint directory holding config.json (a llama.cpp model "
            "file is accepted when its name ends in .gguf)"
        )
    if _looks_like_path(model):
        raise ModelNotFoundError(
            f"model directory {local} does not exist (cwd: {Path.cwd()}). {how_to_get(model)}"
        )

    cached = _from_cache(model)
    if cached is not None:
        logger.info("model %s: using Hugging Face cache %s", model, cached)
        return check_model_dir(cached, model)
    if not allow_download:
        raise ModelNotFoundError(
            f"model {model!r} is neither a local directory (cwd: {Path.cwd()}) nor in the Hugging Face "
            f"cache ({_hub_cache()}), and allow_download is false. {how_to_get(model)}"
        )
    return check_model_dir(_download(model, trust_remote_code), model)


def resolve_adapter_dir(adapter: str) -> Path:
    """The local directory of a PEFT LoRA adapter (it must hold adapter_config.json); else raise."""
    path = Path(adapter).expanduser()
    if not path.is_dir():
        raise ModelNotFoundError(
            f"LoRA adapter directory {path} does not exist (cwd: {Path.cwd()}); set adapter to the folder "
            "written by the trainer's save_pretrained (it holds adapter_config.json), or leave it empty"
        )
    if not (path / "adapter_config.json").is_file():
        raise BackendError(
            f"LoRA adapter directory {path} has no adapter_config.json; point adapter at the folder written "
            "by PEFT's save_pretrained (a full fine-tuned model goes in model, not adapter)"
        )
    return path
