"""Train/val/test splits and k folds by scene, so no scene leaks between training and testing."""

from __future__ import annotations

from typing import Iterable

import numpy as np

SPLITS = ("train", "val", "test")


def _shuffled(scenes: Iterable[str], seed: int) -> list[str]:
    unique = sorted(set(scenes))
    order = np.random.default_rng(seed).permutation(len(unique))
    return [unique[i] for i in order]


def split_scenes(
    scenes: Iterable[str], seed: int = 0, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
) -> dict[str, str]:
    """scene -> "train" / "val" / "test", shuffled with ``seed`` in the given fractions.

    Every split with a non-zero fraction gets at least one scene when there are enough scenes (train
    first); the same scenes and seed always give the same assignment.
    """
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not sum(fractions) > 0:
        raise ValueError(f"split fractions must be three non-negative numbers, got {fractions}")
    order = _shuffled(scenes, seed)
    total = sum(fractions)
    n = len(order)
    counts = [0] + [int(round(n * f / total)) for f in fractions[1:]]
    counts[1] = min(counts[1], n)
    counts[2] = min(counts[2], n - counts[1])
    for i in (2, 1):  # small sets: give test and val a scene each while train keeps at least one
        if fractions[i] > 0 and counts[i] == 0 and n - sum(counts) > 1:
            counts[i] = 1
    counts[0] = n - counts[1] - counts[2]
    assignment: dict[str, str] = {}
    start = 0
    for name, count in zip(SPLITS, counts, strict=True):
        for scene in order[start : start + count]:
            assignment[scene] = name
        start += count
    return assignment


def fold_scenes(scenes: Iterable[str], folds: int, seed: int = 0) -> dict[str, int]:
    """scene -> fold 0..folds-1, shuffled with ``seed``, fold sizes differing by at most one scene."""
    if folds < 2:
        raise ValueError(f"--folds must be >= 2, got {folds}")
    order = _shuffled(scenes, seed)
    if len(order) < folds:
        raise ValueError(f"{folds} folds need at least {folds} scenes, got {len(order)}")
    return {scene: i % folds for i, scene in enumerate(order)}
