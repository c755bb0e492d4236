"""Decoding with tools: a step's result written by :mod:`embodied_r_ros.reasoning.calculator`, an option
lookup's yes/no and the answer letter by :mod:`embodied_r_ros.reasoning.conclusion`.

:class:`ToolTokens` follows each row of a decoding batch token by token (the loop of :mod:`.decoding`
calls it after choosing each step's tokens). When a row's text reaches the place of a result ("x: 1.06 +
1.68 =") or of a lookup ("B. green bed:", "<answer>"), it tokenizes what the tool writes there (" 2.74",
" yes.", "B") and puts those tokens in place of what the model chooses over the next steps; the model reads
them as it reads its own, so it goes on from them. Used for the LM when ``lm.transformers.calculator`` or
``lm.transformers.lookup`` is true (transformers backend).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import torch

from ..reasoning import calculator, conclusion


class ToolTokens:
    """The forced tokens of a batch of ``rows`` completions (see the module docstring): the calculator's
    when ``calculate``, the lookup's for rows whose ``options`` (one list a row) are not empty."""

    def __init__(
        self,
        tokenizer: Any,
        rows: int,
        calculate: bool = True,
        options: Sequence[Sequence[str]] | None = None,
    ) -> None:
        if options is not None and len(options) != rows:
            raise ValueError(f"ToolTokens: {len(options)} option lists for {rows} rows; give one a row")
        self.tokenizer = tokenizer
        self.calculate = calculate
        self.options = [list(o) for o in options] if options is not None else [[] for _ in range(rows)]
        self.texts = [""] * rows  # each row's completion so far
        self.pending: list[deque[int]] = [deque() for _ in range(rows)]
        self.written = 0  # results the calculator wrote (tokens are counted in ``forced``)
        self.looked_up = 0  # yes/no and letters the lookup wrote
        self.forced = 0
        self._pieces: dict[int, str] = {}

    def _piece(self, token: int) -> str:
        if token not in self._pieces:
            self._pieces[token] = self.tokenizer.decode([token], skip_special_tokens=True)
        return self._pieces[token]

    def _next(self, row: int, piece: str) -> str | None:
        """What a tool writes after ``row``'s text, whose last token is ``piece``; None: the model writes."""
        end = piece.rstrip(" ")
        text = self.texts[row]
        if self.options[row] and end.endswith(conclusion.TRIGGER_ENDINGS):
            found = conclusion.lookup_continuation(text, self.options[row])
            if found:
                self.looked_up += 1
                return found
        if self.calculate and end.endswith(calculator.TRIGGER_ENDINGS):
            found = calculator.continuation(text)
            if found:
                self.written += 1
                return found
        return None

    def __call__(self, active: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        """``chosen`` (one token for each row of ``active``, the batch's rows by their original place) with
        the tools' pending tokens in place of the model's."""
        chosen = chosen.clone()
        for i, row in enumerate(active.tolist()):
            if self.pending[row]:
                chosen[i] = self.pending[row].popleft()
                self.forced += 1
            piece = self._piece(int(chosen[i]))
            self.texts[row] += piece
            if self.pending[row]:
                continue
            found = self._next(row, piece)
            if found:
                self.pending[row].extend(self.tokenizer.encode(found, add_special_tokens=False))
        return chosen
