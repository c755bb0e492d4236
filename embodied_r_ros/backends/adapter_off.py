"""The base model of a LoRA model: a backend that generates with the adapter turned off.

The consistency reward's reference and ``embodied-r eval``'s reference are the policy's starting weights.
With LoRA those are the loaded model itself under peft's ``disable_adapter()``, so no second copy of the
weights is loaded, in training (:class:`embodied_r_training.rl.train.PolicyReference`) and in evaluation.
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import ChatRequest


class AdapterOff:
    """A :class:`~embodied_r_ros.backends.GenerationBackend` over a transformers backend whose model is a
    peft model: ``generate`` runs under ``disable_adapter()``. The wrapped backend belongs to the caller."""

    supports_images = False

    def __init__(self, backend: Any) -> None:
        if not callable(getattr(getattr(backend, "model", None), "disable_adapter", None)):
            raise TypeError(
                f"AdapterOff needs a backend whose model has a LoRA adapter (peft), got {backend!r}"
            )
        self.backend = backend
        self.config = backend.config.with_adapter("")

    def generate(
        self,
        requests: Sequence[ChatRequest],
        *,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
    ) -> list[str]:
        """One completion per request from the base model."""
        with self.backend.model.disable_adapter():
            return self.backend.generate(requests, max_new_tokens=max_new_tokens, temperature=temperature)

    def close(self) -> None:
        """Nothing to release: the wrapped backend belongs to the caller."""
