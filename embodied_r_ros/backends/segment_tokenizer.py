"""Tokenization that remembers the fixed parts of prompts.

Perception prompts repeat the same long system and instruction text for every key frame; only a few
words change. Hugging Face tokenizers split a text at its added (special) tokens before anything else and
tokenize the pieces independently, so each piece can be tokenized once and cached: the ids are exactly
those of tokenizing the whole text. Only added tokens that are matched verbatim (not normalized, no
stripping of neighbouring spaces) are used as split points, which keeps that equivalence.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Sequence


class SegmentTokenizer:
    """``tokenizer(texts, add_special_tokens=False)["input_ids"]``, with the pieces between special tokens
    cached (LRU, ``max_entries``)."""

    def __init__(self, tokenizer: Any, max_entries: int = 4096) -> None:
        self.tokenizer = tokenizer
        self.max_entries = max_entries
        self._cache: OrderedDict[str, list[int]] = OrderedDict()
        backend = getattr(tokenizer, "_tokenizer", None)  # the Rust tokenizer of a "fast" tokenizer
        added = backend.get_added_tokens_decoder() if hasattr(backend, "get_added_tokens_decoder") else {}
        verbatim = {
            token.content: token_id
            for token_id, token in added.items()
            if not (token.normalized or token.lstrip or token.rstrip or token.single_word)
        }
        self._special_ids = verbatim
        # Longest first, so a token that contains another is matched whole.
        names = sorted(verbatim, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(map(re.escape, names)) + ")") if names else None

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (no special tokens added), equal to the tokenizer's own."""
        if self._split is None:
            return self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        pieces = [self._split.split(text) for text in texts]
        new = sorted({p for parts in pieces for p in parts[0::2] if p and p not in self._cache})
        if new:
            encoded = self.tokenizer(new, add_special_tokens=False)["input_ids"]
            for piece, ids in zip(new, encoded, strict=True):
                self._cache[piece] = ids
        rows = []
        for parts in pieces:
            row: list[int] = []
            for i, part in enumerate(parts):
                if i % 2:
                    row.append(self._special_ids[part])
                elif part:
                    row.extend(self._cache[part])
                    self._cache.move_to_end(part)
            rows.append(row)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return rows
