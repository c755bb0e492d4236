"""Model backends: in-process transformers or an OpenAI-compatible server, behind one interface, chosen by
name from a registry (:mod:`.registry`) that installed packages may add backends to.

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
from .registry import BackendRegistry, core_backends, installed_backends

if TYPE_CHECKING:
    from .transformers_backend import TransformersBackend

__all__ = [
    "BackendError",
    "BackendRegistry",
    "ChatMessage",
    "ChatRequest",
    "GenerationBackend",
    "ModelNotFoundError",
    "PromptTooLongError",
    "OpenAIBackend",
    "TransformersBackend",
    "core_backends",
    "installed_backends",
    "load_backend",
    "load_role",
    "resolve_model_dir",
]


def load_backend(
    config: ModelConfig, *, vision: bool, backends: BackendRegistry | None = None
) -> GenerationBackend:
    """The backend named by ``config.backend`` in ``backends`` (default: :func:`installed_backends`, the
    core's and the installed packages'); ``vision=True`` for the VLM (accepts images).

    Raises :class:`ModelNotFoundError` at once when a transformers model is not on disk, and
    :class:`BackendError` for a model that cannot serve the role (e.g. a text-only model as the VLM) or a
    backend that is not registered.
    """
    return (installed_backends() if backends is None else backends).create(config, vision=vision)


def load_role(role: str, key: str, config: ModelConfig, *, vision: bool) -> GenerationBackend:
    """:func:`load_backend` for one role of the pipeline (``role`` "VLM", ``key`` its section "vlm"): any
    failure becomes a :class:`BackendError` (of the original kind when it is one) naming the role, its
    settings (the backend's own among them: ``vlm.openai.base_url``), the reason and the fix."""
    backends = installed_backends()
    try:
        return load_backend(config, vision=vision, backends=backends)
    except Exception as exc:  # any failure here means: this model cannot serve; say which and why
        why = " ".join(str(exc).split()) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
        settings = [f"{key}.model = {config.model!r}", f"{key}.backend = {config.backend}"]
        settings += backends.settings(config, key)
        kind = type(exc) if isinstance(exc, BackendError) else BackendError
        raise kind(f"cannot load the {role} ({', '.join(settings)}): {why}") from exc


def __getattr__(name: str) -> Any:
    # Heavy modules (torch, transformers) are imported on first use only.
    if name == "TransformersBackend":
        from .transformers_backend import TransformersBackend

        return TransformersBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
