"""A LoRA adapter merged into its base model: one ordinary checkpoint directory, loaded like any other.

``embodied-r models merge BASE ADAPTER DIR`` writes it (the demo's trained reasoner: SmolLM2 with the
adapter of SFT on oracle traces, kept in results/reasoner/models/). The directory records what it was made
from (``embodied_r_merge.json``): a second call with the same base and adapter does nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .base import BackendError

MARKER = "embodied_r_merge.json"


def _identity(directory: Path) -> dict[str, str]:
    """{file name: sha256} of a directory's files (the marker left out)."""
    found = {}
    for path in sorted(p for p in directory.iterdir() if p.is_file() and p.name != MARKER):
        found[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def merge_adapter(base: Path, adapter: Path, out: Path) -> Path:
    """``base`` (a checkpoint directory) with the LoRA ``adapter`` (peft's save_pretrained) merged in,
    saved with the base's tokenizer to ``out``; returns ``out``. Raises BackendError naming a missing
    directory."""
    for role, path in (("base model", base), ("LoRA adapter", adapter)):
        if not (path / ("config.json" if role == "base model" else "adapter_config.json")).is_file():
            raise BackendError(f"cannot merge: the {role} {path} is not a checkpoint directory")
    made_from = {"base": str(base), "adapter": _identity(adapter), "base_files": _identity(base)}
    marker = out / MARKER
    if marker.is_file() and json.loads(marker.read_text(encoding="utf-8")) == made_from:
        return out
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter).merge_and_unload()
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)
    marker.write_text(json.dumps(made_from, indent=1) + "\n", encoding="utf-8")
    return out
