"""Bootstrap confidence intervals for evaluation scores (percentile bootstrap over records).

Scores of a held-out split are means over records (accuracy 0/1 for multiple choice, MRA for numeric), so
their uncertainty is the sampling error of a few hundred questions. :func:`bootstrap_ci` resamples the
records with replacement; :func:`paired_difference` resamples the SAME records for two systems, which is
the right test when both answered the same questions (their errors are correlated, and the interval of the
difference is narrower than the two intervals side by side suggest).

Resamples come from ``numpy.random.default_rng(seed)``: the same scores and seed give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A mean and its percentile-bootstrap confidence interval ``[low, high]`` at ``level``."""

    mean: float
    low: float
    high: float
    level: float = LEVEL

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "level": self.level}

    def excludes(self, value: float) -> bool:
        """Whether ``value`` lies outside the interval (e.g. 0 for a difference: significant)."""
        return value < self.low or value > self.high


def _resample_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    return values[picks].mean(axis=1)


def _interval(mean: float, means: np.ndarray, level: float) -> Interval:
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return Interval(float(mean), float(low), float(high), level)


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0
) -> Interval | None:
    """The mean of ``values`` with its bootstrap interval; None for no values."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return None
    return _interval(float(data.mean()), _resample_means(data, resamples, seed), level)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> Interval | None:
    """Mean of ``a - b`` over the same records (aligned, equal length) with its bootstrap interval."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need the same records: {len(a)} vs {len(b)} values")
    return bootstrap_ci(
        np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64),
        resamples=resamples,
        level=level,
        seed=seed,
    )
