"""When each object of a mission was in view: its sightings, as intervals of frame times.

The rule is the ground truth's and the questions' (:mod:`.visibility`): an object is in view in a frame
when it covers at least ``min_fraction`` of the image (occlusion included: the id masks of the rendered
frames). A sighting is a run of frames with the object in view, runs less than ``merge_gap_s`` apart
joined (a glance away and back is one sighting); it spans its first to its last frame in view.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .visibility import Visibility

FAINT_SHARE = 0.1  # an object above this share of ``min_fraction`` is "faintly" visible (questions avoid it)


def runs(times: np.ndarray, merge_gap_s: float) -> list[tuple[float, float]]:
    """Sorted ``times`` grouped into (first, last) runs whose neighbours are at most ``merge_gap_s`` apart
    (or consecutive frames, whatever the gap)."""
    if len(times) == 0:
        return []
    breaks = np.flatnonzero(np.diff(times) > merge_gap_s + 1e-9)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [len(times) - 1]])
    return [(float(times[a]), float(times[b])) for a, b in zip(starts, ends, strict=True)]


@dataclass(frozen=True)
class MissionSightings:
    """Per mission object id (1..n): its sightings (seconds from the mission start), its faint sightings
    (at ``FAINT_SHARE`` of the threshold: when a viewer might already have noticed it) and the largest share
    of the image it covered."""

    sightings: dict[int, list[tuple[float, float]]]
    faint: dict[int, list[tuple[float, float]]]
    max_fraction: dict[int, float]
    min_fraction: float

    @classmethod
    def from_visibility(
        cls, visibility: Visibility, min_fraction: float, merge_gap_s: float
    ) -> MissionSightings:
        """The sightings of every object in ``visibility`` (its columns are mission object ids)."""
        n = visibility.pixels.shape[1] - 1
        # The frame step: consecutive frames always join, whatever merge_gap_s says.
        step = float(np.median(np.diff(visibility.times_s))) if len(visibility.times_s) > 1 else 0.0
        gap = max(merge_gap_s, step)
        sightings, faint, best = {}, {}, {}
        for k in range(1, n + 1):
            column = visibility.pixels[:, k]
            clear = visibility.times_s[column >= min_fraction * visibility.image_pixels]
            dim = visibility.times_s[column >= FAINT_SHARE * min_fraction * visibility.image_pixels]
            sightings[k] = runs(clear, gap)
            faint[k] = runs(dim, gap)
            best[k] = float(column.max()) / visibility.image_pixels if len(column) else 0.0
        return cls(sightings, faint, best, min_fraction)

    def seen(self, object_id: int) -> bool:
        """Whether the object was in view at all."""
        return bool(self.sightings[object_id])

    def barely_seen(self, object_id: int) -> bool:
        """Faintly visible but never clearly (would a viewer count it?)."""
        return not self.sightings[object_id] and bool(self.faint[object_id])
