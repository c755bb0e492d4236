"""Model backends: in-process transformers or an OpenAI-compatible server, behind one interface.

Importing this package is cheap; torch and transformers load only when a transformers backend is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import GROUND_TRUTH, ModelConfig
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
    "resolve_model_dir",
]


def load_backend(config: ModelConfig, *, vision: bool) -> GenerationBackend:
    """The backend named by ``config.backend``; ``vision=True`` for the VLM (accepts images).

    Raises :class:`ModelNotFoundError` at once when a transformers model is not on disk, and
    :class:`BackendError` for a model that cannot serve the role (e.g. a text-only model as the VLM).
    """
    if config.backend == GROUND_TRUTH:
        role = "the VLM" if vision else "an LM"
        raise BackendError(
            f"backend {GROUND_TRUTH} cannot be {role} here: it is no model but perception computed from a "
            "simulator scene, usable only as the pipeline's VLM (vlm.backend: ground_truth, vlm.model: the "
            "scene.json that `embodied-r synth` wrote beside the bag); give this model backend transformers "
            "or openai"
        )
    if config.backend == "openai":
        return OpenAIBackend(config, vision=vision)
    if config.backend == "transformers":
        from .transformers_backend import TransformersBackend

        return TransformersBackend(config, vision=vision)
    raise BackendError(f"unknown backend {config.backend!r}; use transformers or openai")


def __getattr__(name: str) -> Any:
    # Heavy modules (torch, transformers) are imported on first use only.
    if name == "TransformersBackend":
        from .transformers_backend import TransformersBackend

        return TransformersBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
