"""GGUF files (llama.cpp's format) turned into ordinary transformers checkpoint directories.

transformers reads a GGUF only through ``from_pretrained(dir, gguf_file=name)``, dequantizing its weights,
and refuses to ``save_pretrained`` the result. :func:`convert_gguf` loads the file that way, moves the
weights into a plain model of the same architecture and saves it (safetensors, float32) with the
tokenizer, its chat template and a clean generation config. The directory is written atomically, the
same file always gives the same bytes, and a marker (:data:`MARKER`) records the source's name, size and
sha256, so converting the same file again is a no-op and a changed file is converted again.

:func:`cached_conversion` does this once per file into a cache directory (:func:`gguf_cache_root`), which
is how a ``.gguf`` path given as a model name becomes a directory (see ``loading.resolve_model_dir``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import BackendError

logger = logging.getLogger(__name__)

# Bump when the converted layout changes, so older conversions are redone.
FORMAT_VERSION = 1
MARKER = "embodied_r_gguf.json"
CACHE_ENV = "EMBODIED_R_CACHE"
_GGUF_MAGIC = b"GGUF"
# Tokens that end a chat turn in common templates; greedy decoding must stop on them, not only on eos.
_END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>")
# (path, size, mtime_ns) -> sha256: hashing a multi-GB file once per process is enough.
_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def is_gguf_name(model: str) -> bool:
    """True when a model name is a path to a ``.gguf`` file (by its suffix)."""
    return model.lower().endswith(".gguf")


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file, remembered per process while its size and mtime stay the same."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _SHA_MEMO:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _SHA_MEMO[key] = digest.hexdigest()
    return _SHA_MEMO[key]


def supported_architectures() -> list[str]:
    """The GGUF architectures (``general.architecture``) the installed transformers can load.

    Two lists in transformers 5.x: the packed-weight loader's ``GGUF_ARCHS`` and the legacy loader's
    ``GGUF_SUPPORTED_ARCHITECTURES`` (whose first entries, ``general`` and ``tokenizer``, are metadata
    sections, not architectures).
    """
    from transformers.integrations.gguf import GGUF_ARCHS
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    legacy = [a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer")]
    return sorted(set(legacy) | set(GGUF_ARCHS))


def _normalised(arch: str) -> str:
    # llama.cpp writes "qwen2moe" / "gpt-oss" where transformers' list has "qwen2_moe" / "gpt_oss".
    return arch.replace("-", "").replace("_", "")


def gguf_architecture(path: Path) -> str:
    """``general.architecture`` of a GGUF file; raises :class:`BackendError` for a file that is not one."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise BackendError(f"cannot read GGUF file {path}: {exc}") from exc
    if magic != _GGUF_MAGIC:
        raise BackendError(
            f"{path} is not a GGUF file (it does not start with the GGUF magic bytes, found {magic!r}); "
            "give a llama.cpp .gguf model file, or a checkpoint directory holding config.json"
        )
    from gguf import GGUFReader

    try:
        field = GGUFReader(path).get_field("general.architecture")
        if field is None:
            raise ValueError("no general.architecture key")
        return str(field.contents())
    except (ValueError, KeyError, IndexError, OSError) as exc:
        raise BackendError(f"GGUF file {path} is damaged or incomplete: {exc}") from exc


def check_architecture(path: Path) -> str:
    """The file's architecture if transformers reads it; else :class:`BackendError` listing those it can."""
    arch = gguf_architecture(path)
    supported = supported_architectures()
    if _normalised(arch) not in {_normalised(a) for a in supported} and not arch.startswith("t5"):
        import transformers

        raise BackendError(
            f"GGUF file {path} holds architecture {arch!r}, which transformers {transformers.__version__} "
            f"cannot read from GGUF; supported: {', '.join(supported)}. Use a checkpoint directory "
            "(safetensors) of that model instead"
        )
    return arch


def read_marker(out_dir: Path) -> dict[str, Any] | None:
    """The conversion marker of ``out_dir``, or None when there is none (or it is unreadable)."""
    try:
        marker = json.loads((out_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def _source_record(gguf_file: Path) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "source_name": gguf_file.name,
        "source_size": gguf_file.stat().st_size,
        "source_sha256": file_sha256(gguf_file),
    }


def _is_current(out_dir: Path, record: dict[str, Any]) -> bool:
    marker = read_marker(out_dir)
    keys = ("format_version", "source_size", "source_sha256")
    return marker is not None and all(marker.get(k) == record[k] for k in keys)


def _stop_token_ids(tokenizer: Any) -> list[int]:
    """eos first, then the end-of-turn tokens the chat template writes (so chats stop at the turn's end)."""
    ids: list[int] = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    template = tokenizer.chat_template or ""
    vocab = tokenizer.get_vocab()
    for token in _END_OF_TURN_TOKENS:
        if token in template and token in vocab and vocab[token] not in ids:
            ids.append(int(vocab[token]))
    return ids


def _load_dense(gguf_file: Path) -> tuple[Any, Any]:
    """(tokenizer, float32 model) read from the GGUF file, every weight dequantized."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    where, name = str(gguf_file.parent), gguf_file.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(
            where,
            gguf_file=name,
            dtype=torch.float32,
            # The packed-weight loader would keep blocks that no plain model can hold; unpack them all.
            quantization_config=GgufConfig(gguf_file=name, dequantize=True),
        )
    except (OSError, ValueError, KeyError, RuntimeError, ImportError, NotImplementedError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise BackendError(f"transformers cannot load GGUF file {gguf_file}: {reason}") from exc
    return tokenizer, model


def _plain_model(model: Any) -> Any:
    """The same weights in a plain (serializable) model of the same class, without copying them."""
    import torch
    from transformers import AutoModelForCausalLM

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the reason save_pretrained refuses
    config.architectures = [type(model).__name__]
    config.name_or_path = ""  # no trace of where this machine keeps its files
    with torch.device("meta"):  # no second copy of the weights: assign them below
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True, assign=True)
    plain.tie_weights()
    return plain.eval()


def _readable_like_other_files(out_dir: Path) -> None:
    """Every file gets config.json's mode (the umask's): transformers writes the weights through a 0600
    temp file, which another account (a ROS node running as its own user) could not read."""
    mode = (out_dir / "config.json").stat().st_mode & 0o777
    for path in out_dir.iterdir():
        path.chmod(mode)


def _write_checkpoint(gguf_file: Path, out_dir: Path, record: dict[str, Any]) -> None:
    from transformers import GenerationConfig

    tokenizer, model = _load_dense(gguf_file)
    if not tokenizer.chat_template:
        logger.warning("GGUF file %s has no chat template; the backend refuses it as a chat LM", gguf_file)
    plain = _plain_model(model)
    del model
    # The GGUF tokenizer says "no limit" (1e30); the model's context is the real one.
    context = getattr(plain.config, "max_position_embeddings", None)
    if isinstance(context, int):
        tokenizer.model_max_length = context
    plain.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    # Only token ids: sampling defaults (temperature, top_p) would change what greedy decoding means.
    stops = _stop_token_ids(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stops[0] if stops else None)
    GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=stops[0] if len(stops) == 1 else (stops or None),
        pad_token_id=pad,
    ).save_pretrained(out_dir)
    _readable_like_other_files(out_dir)
    marker = dict(record, architecture=plain.config.model_type, model_class=type(plain).__name__)
    # Written last: its presence means the directory is complete.
    (out_dir / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")


@contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    """One converter per output directory at a time, across processes."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with (out_dir.parent / f".{out_dir.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def convert_gguf(gguf_file: Path | str, out_dir: Path | str) -> Path:
    """Convert ``gguf_file`` into a transformers checkpoint directory ``out_dir``; returns ``out_dir``.

    A no-op when ``out_dir`` already holds the conversion of a file with the same size and sha256. The
    directory is written next to ``out_dir`` and renamed into place, so readers never see half of it. An
    existing ``out_dir`` that is neither empty nor an earlier conversion is left alone (BackendError).
    Raises :class:`BackendError` for a missing or non-GGUF file and for an architecture transformers
    cannot read (naming the supported ones).
    """
    gguf_file, out_dir = Path(gguf_file).expanduser(), Path(out_dir).expanduser()
    if not gguf_file.is_file():
        raise BackendError(f"GGUF file {gguf_file} does not exist (cwd: {Path.cwd()})")
    record = _source_record(gguf_file)
    if _is_current(out_dir, record):
        logger.debug("GGUF %s: %s is up to date", gguf_file, out_dir)
        return out_dir
    arch = check_architecture(gguf_file)
    with _locked(out_dir):
        if _is_current(out_dir, record):  # another process finished it while we waited
            return out_dir
        if out_dir.exists() and read_marker(out_dir) is None and any(out_dir.iterdir()):
            raise BackendError(
                f"{out_dir} exists and is not a GGUF conversion made by embodied-r; choose a new or empty "
                "directory for the converted model"
            )
        logger.info(
            "converting GGUF %s (%s, %.0f MB) to a transformers checkpoint in %s (dequantized to float32; "
            "once per file, ~20-40 s for a 135M model on 2 cores)",
            gguf_file, arch, record["source_size"] / 1e6, out_dir,
        )  # fmt: skip
        started = time.monotonic()
        tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _write_checkpoint(gguf_file, tmp, record)
            if out_dir.exists():
                old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
                out_dir.rename(old)
                tmp.rename(out_dir)
                shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(out_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        logger.info("converted %s in %.1f s -> %s", gguf_file.name, time.monotonic() - started, out_dir)
    return out_dir


def gguf_cache_root() -> Path:
    """Where converted GGUF files live: ``$EMBODIED_R_CACHE/gguf``, else ``~/.cache/embodied_r_ros/gguf``."""
    base = os.environ.get(CACHE_ENV)
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "embodied_r_ros") / "gguf"


def cached_conversion(gguf_file: Path | str, cache_root: Path | None = None) -> Path:
    """The converted checkpoint of ``gguf_file`` in the cache, converting it on first use.

    The directory is ``<cache_root>/<first 16 hex of sha256>-<file stem>``: the same content shares one
    conversion wherever the file lies, and a changed file gets a new one.
    """
    gguf_file = Path(gguf_file).expanduser()
    if not gguf_file.is_file():
        raise BackendError(f"GGUF file {gguf_file} does not exist (cwd: {Path.cwd()})")
    root = Path(cache_root) if cache_root is not None else gguf_cache_root()
    out_dir = root / f"{file_sha256(gguf_file)[:16]}-{gguf_file.stem}"
    return convert_gguf(gguf_file, out_dir)
