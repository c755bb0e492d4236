"""Model backends: in-process transformers or an OpenAI-compatible server, behind one interface.

Importing this package is cheap; torch and transformers load only when a transformers backend is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import ModelConfig
from .base import (
    BackendError,
    ChatMessage,
    ChatRequest,
    GenerationBackend,
    ModelNotFoundError,
    PromptTooLongError,
)
from .loading import resolve_model_dir
from .openai_backend import OpenAIBackend

if TYPE_CHECKING:
    from .transformers_backend import TransformersBackend

__all__ = [
    "BackendError",
    "ChatMessage",
    "ChatRequest",
    "GenerationBackend",
    "ModelNotFoundError",
    "PromptTooLongError",
    "OpenAIBackend",
    "TransformersBackend",
    "load_backend",
    "load_role",
    "resolve_model_dir",
]


def load_backend(config: ModelConfig, *, vision: bool) -> GenerationBackend:
    """The backend named by ``config.backend``; ``vision=True`` for the VLM (accepts images).

    Raises :class:`ModelNotFoundError` at once when a transformers model is not on disk, and
    :class:`BackendError` for a model that cannot serve the role (e.g. a text-only model as the VLM).
    """
    if config.backend == "openai":
        return OpenAIBackend(config, vision=vision)
    if config.backend == "transformers":
        from .transformers_backend import TransformersBackend

        return TransformersBackend(config, vision=vision)
    raise BackendError(f"unknown backend {config.backend!r}; use transformers or openai")


def load_role(role: str, key: str, config: ModelConfig, *, vision: bool) -> GenerationBackend:
    """:func:`load_backend` for one role of the pipeline (``role`` "VLM", ``key`` its section "vlm"): any
    failure becomes a :class:`BackendError` (of the original kind when it is one) naming the role, its
    settings, the reason and the fix."""
    try:
        return load_backend(config, vision=vision)
    except Exception as exc:  # any failure here means: this model cannot serve; say which and why
        why = " ".join(str(exc).split()) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
        settings = f"{key}.model = {config.model!r}, {key}.backend = {config.backend}, " + (
            f"{key}.openai.base_url = {config.openai.base_url}"
            if config.backend == "openai"
            else f"{key}.transformers.device = {config.transformers.device}"
        )
        kind = type(exc) if isinstance(exc, BackendError) else BackendError
        raise kind(f"cannot load the {role} ({settings}): {why}") from exc


def __getattr__(name: str) -> Any:
    # Heavy modules (torch, transformers) are imported on first use only.
    if name == "TransformersBackend":
        from .transformers_backend import TransformersBackend

        return TransformersBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
