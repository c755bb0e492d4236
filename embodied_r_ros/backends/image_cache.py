"""A bounded cache of encoded images (the VLM's vision-tower embeddings), keyed by image content.

Key frames are shared between the requests of one query (frame j is in request j and j+1) and between
queries over the same window, so each is preprocessed and encoded once. The key is a 128-bit hash of the
pixels and the shape, so a new array with the same content hits and a reused buffer with new content
misses.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import torch
import xxhash


def image_key(image: np.ndarray) -> bytes:
    """Content key of an image: xxh3-128 of its bytes plus its shape and dtype."""
    digest = xxhash.xxh3_128(np.ascontiguousarray(image)).digest()
    return digest + repr((image.shape, image.dtype.str)).encode()


class EncodedImageCache:
    """LRU map from :func:`image_key` to (embeddings, grid_thw), at most ``max_bytes`` of embeddings."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._entries: OrderedDict[bytes, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The cached (embeddings, grid_thw) for ``key``, or None; counts hits and misses."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, key: bytes, embeddings: torch.Tensor, grid: torch.Tensor) -> None:
        """Store an entry, evicting the least recently used ones to stay within the budget."""
        size = embeddings.numel() * embeddings.element_size()
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (embeddings, grid)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (old, _) = self._entries.popitem(last=False)
                self._bytes -= old.numel() * old.element_size()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
