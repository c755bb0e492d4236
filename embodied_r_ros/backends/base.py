"""The one small interface every model backend implements.

A request is a chat: a list of :class:`ChatMessage`. A message's ``content`` is a tuple of parts, each
either a ``str`` (text) or an HxWx3 uint8 RGB ``numpy.ndarray`` (an image), in the order the model sees
them. A backend takes a batch of requests and returns one completion string per request, in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..config import ModelConfig

Part = str | np.ndarray


class BackendError(RuntimeError):
    """A model could not be loaded or queried; the message names the model and the fix."""


class PromptTooLongError(BackendError, ValueError):
    """A prompt and the tokens asked for do not fit the model's context; the message gives both counts."""


class ModelNotFoundError(BackendError):
    """The model is neither on disk nor downloadable; the message says how to get it."""


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn: ``role`` is "system", "user" or "assistant"; ``content`` is text and images."""

    role: str
    content: tuple[Part, ...]

    @classmethod
    def text(cls, role: str, text: str) -> ChatMessage:
        return cls(role, (text,))

    @property
    def images(self) -> list[np.ndarray]:
        return [p for p in self.content if isinstance(p, np.ndarray)]

    @property
    def joined_text(self) -> str:
        return "".join(p for p in self.content if isinstance(p, str))


ChatRequest = Sequence[ChatMessage]


@runtime_checkable
class GenerationBackend(Protocol):
    """What perception and reasoning need from a model."""

    config: ModelConfig
    supports_images: bool

    def generate(
        self,
        requests: Sequence[ChatRequest],
        *,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
    ) -> list[str]:
        """One completion per request, in order; ``None`` means the config's value."""
        ...

    def close(self) -> None:
        """Release the model (GPU memory, HTTP sessions)."""
        ...


@dataclass(frozen=True)
class PromptRoom:
    """How a prompt sits in a model's context: its tokens and the most a prompt may take (the context less
    the tokens asked for), so that ``tokens <= limit`` fits."""

    tokens: int
    limit: int

    @property
    def fits(self) -> bool:
        return self.tokens <= self.limit


@runtime_checkable
class MeasuresPrompts(Protocol):
    """A backend that can say, before generating, whether a prompt fits its context (the transformers
    backend; an HTTP server's tokenizer is out of reach). Prompt fitting uses it where a backend has it."""

    def prompt_room(self, request: ChatRequest, max_new_tokens: int | None = None) -> PromptRoom | None:
        """``request``'s tokens and the context's room for a prompt; None when the context is unknown."""
        ...

