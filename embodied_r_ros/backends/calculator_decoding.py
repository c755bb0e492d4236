"""Decoding with a calculator: a step's result written by :mod:`embodied_r_ros.reasoning.calculator`.

:class:`CalculatorTokens` follows each row of a decoding batch token by token (the loop of
:mod:`.decoding` calls it after choosing each step's tokens). When a row's text reaches the place of a
result ("x: 1.06 + 1.68 ="), it tokenizes what the calculator writes there (" 2.74") and puts those tokens
in place of what the model chooses over the next steps; the model reads them as it reads its own, so it
goes on from the exact result. Used for the LM when ``lm.calculator`` is true (transformers backend).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch

from ..reasoning.calculator import TRIGGER_ENDINGS, continuation


class CalculatorTokens:
    """The forced tokens of a batch of ``rows`` completions (see the module docstring)."""

    def __init__(self, tokenizer: Any, rows: int) -> None:
        self.tokenizer = tokenizer
        self.texts = [""] * rows  # each row's completion so far
        self.pending: list[deque[int]] = [deque() for _ in range(rows)]
        self.written = 0  # results the calculator wrote (tokens are counted in ``forced``)
        self.forced = 0
        self._pieces: dict[int, str] = {}

    def _piece(self, token: int) -> str:
        if token not in self._pieces:
            self._pieces[token] = self.tokenizer.decode([token], skip_special_tokens=True)
        return self._pieces[token]

    def __call__(self, active: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        """``chosen`` (one token for each row of ``active``, the batch's rows by their original place) with
        the calculator's pending tokens in place of the model's."""
        chosen = chosen.clone()
        for i, row in enumerate(active.tolist()):
            if self.pending[row]:
                chosen[i] = self.pending[row].popleft()
                self.forced += 1
            piece = self._piece(int(chosen[i]))
            self.texts[row] += piece
            if self.pending[row] or not piece.rstrip(" ").endswith(TRIGGER_ENDINGS):
                continue
            found = continuation(self.texts[row])
            if found:
                self.pending[row].extend(self.tokenizer.encode(found, add_special_tokens=False))
                self.written += 1
        return chosen
