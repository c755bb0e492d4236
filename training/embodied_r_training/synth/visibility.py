"""Which objects the camera saw, and when: per-frame pixel counts taken from the renderer's id masks.

Occlusion is included for free: an object hidden behind another has no pixels in the mask. An object is
"seen" in a frame when it covers at least ``min_fraction`` of the image (default 0.2 %, about 150 pixels
at 320x240, enough for a person or a VLM to name it); questions only ask about objects seen in their
time window, and count questions also refuse categories with a barely visible member (see
:mod:`embodied_r_training.tasks.object_count`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_MIN_FRACTION = 0.002


@dataclass(frozen=True)
class Visibility:
    """``pixels[f, k]``: pixels of object id ``k`` in frame ``f`` (column 0: background), frames at
    ``times_s`` seconds from the bag start, images of ``image_pixels`` pixels."""

    times_s: np.ndarray
    pixels: np.ndarray
    image_pixels: int

    def _rows(self, t0: float, t1: float) -> np.ndarray:
        return (self.times_s >= t0 - 1e-9) & (self.times_s <= t1 + 1e-9)

    def max_fraction(self, object_id: int, t0: float, t1: float) -> float:
        """The largest share of the image the object covers in any frame of [t0, t1]."""
        rows = self._rows(t0, t1)
        if not rows.any():
            return 0.0
        return float(self.pixels[rows, object_id].max()) / self.image_pixels

    def frames_seen(
        self, object_id: int, t0: float, t1: float, min_fraction: float = DEFAULT_MIN_FRACTION
    ) -> np.ndarray:
        """Times (s) of the frames in [t0, t1] where the object is seen."""
        rows = self._rows(t0, t1) & (self.pixels[:, object_id] >= min_fraction * self.image_pixels)
        return self.times_s[rows]

    def first_seen(
        self, object_id: int, t0: float, t1: float, min_fraction: float = DEFAULT_MIN_FRACTION
    ) -> float | None:
        """Time (s) of the first frame in [t0, t1] where the object is seen, or None."""
        seen = self.frames_seen(object_id, t0, t1, min_fraction)
        return float(seen[0]) if len(seen) else None

    def seen_ids(self, t0: float, t1: float, min_fraction: float = DEFAULT_MIN_FRACTION) -> list[int]:
        """Ids of the objects seen in at least one frame of [t0, t1], ascending."""
        rows = self._rows(t0, t1)
        if not rows.any():
            return []
        best = self.pixels[rows].max(axis=0)
        return [int(k) for k in np.nonzero(best >= min_fraction * self.image_pixels)[0] if k != 0]


class VisibilityRecorder:
    """Collects the pixel counts of each rendered frame; :meth:`result` gives the :class:`Visibility`."""

    def __init__(self, n_objects: int, image_pixels: int) -> None:
        self.n_objects = n_objects
        self.image_pixels = image_pixels
        self._times: list[float] = []
        self._rows: list[np.ndarray] = []

    def add(self, time_s: float, ids: np.ndarray) -> None:
        """Record the id mask of the frame at ``time_s`` seconds."""
        counts = np.bincount(ids.ravel().astype(np.int64), minlength=self.n_objects + 1)
        self._times.append(float(time_s))
        self._rows.append(counts[: self.n_objects + 1].astype(np.int32))

    def result(self) -> Visibility:
        """Everything recorded so far."""
        pixels = np.stack(self._rows) if self._rows else np.zeros((0, self.n_objects + 1), dtype=np.int32)
        return Visibility(np.asarray(self._times, dtype=np.float64), pixels, self.image_pixels)
