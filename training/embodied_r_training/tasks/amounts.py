"""Amounts in questions: how an amount is written (``2.3 m``, ``12.5 square metres``) and the distractor
options that stand beside a true amount without giving it away."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from embodied_r_ros.question_file import MC, NUMERIC

from .scene import Draft, SceneContext


def format_amount(value: float, unit: str) -> str:
    """``value`` as an option (or a numeric answer's text) writes it in ``unit`` (m, m^2 or count)."""
    if unit == "m^2":
        return f"{value:.1f} square metres"
    if unit == "count":
        return str(int(value))
    return f"{value:.1f} m" if value < 10 else f"{value:.0f} m"


def shown_as(unit: str) -> Callable[[float], float]:
    """How an option in ``unit`` displays a value (for :class:`Distractors`)."""
    return lambda v: float(format_amount(v, unit).split()[0])


class Distractors:
    """Distractors for one task's answers in one scene, drawn from ``pool``: the values the answer takes
    for the scene's objects, pairs, windows (or for random rooms), as displayed (``shown`` rounds as the
    option text does). The truth is then one more draw from the same distribution as its three distractors,
    so no option is likelier than another to be it, and its rank among the sorted options is uniform.

    Options must be at least 20 % apart. Drawing until they are would favour truths that are hard to fit
    (a common value, crowded by its neighbours), so a truth gets options with probability proportional to
    the chance that a random draw fits it (``samples`` draws estimate it); then one of the fitting draws is
    taken. That keeps the joint distribution of the four values exchangeable."""

    def __init__(
        self,
        pool: Sequence[float],
        rng: np.random.Generator,
        shown: Callable[[float], float],
        n: int = 3,
        samples: int = 400,
    ) -> None:
        self.rng, self.shown = rng, shown
        values = np.array([shown(v) for v in pool], dtype=np.float64)
        if len(values) < n:
            self.draws = np.zeros((0, n))
            self.best = 0.0
            return
        self.draws = values[np.argsort(rng.random((samples, len(values))), axis=1)[:, :n]]
        self.best = max(float(self._fits(x).mean()) for x in set(values.tolist()))

    def _fits(self, value: float) -> np.ndarray:
        """Which draws fit with ``value``: all four values positive and at least 20 % apart."""
        rows = np.sort(np.column_stack([np.full(len(self.draws), value), self.draws]), axis=1)
        return (rows[:, 0] > 0) & np.all(rows[:, 1:] >= 1.2 * rows[:, :-1], axis=1)

    def draw(self, value: float) -> list[float] | None:
        """Three distractors for ``value`` (as displayed), or None (no options for it: see the class)."""
        fits = self._fits(self.shown(value)) if len(self.draws) else np.zeros(0, dtype=bool)
        if not fits.any() or self.rng.random() * self.best >= fits.mean():
            return None
        return [float(v) for v in self.draws[self.rng.choice(np.flatnonzero(fits))]]


def signed_options(
    side: str, opposite: str, values: list[float], text: Callable[[str, float], str], rng: np.random.Generator
) -> list[str]:
    """Distractor texts for a direction-and-amount answer: each of ``values`` with a side at random."""
    return [text(side if rng.random() < 0.5 else opposite, v) for v in values]


def numeric_drafts(
    ctx: SceneContext,
    task: str,
    text: str,
    value: float,
    unit: str,
    window: tuple[float, float],
    objects: tuple[int, ...],
    distractors: Distractors | None,
) -> list[Draft]:
    """The numeric question and, when ``distractors`` give options for it, the multiple-choice one."""
    drafts = []
    if MC in ctx.config.forms and distractors is not None:
        values = distractors.draw(value)
        if values is not None:
            options = [format_amount(v, unit) for v in values]
            drafts.append(Draft(task, MC, text, window, format_amount(value, unit), options, "", objects))
    if NUMERIC in ctx.config.forms:
        drafts.append(Draft(task, NUMERIC, text, window, round(float(value), 3), [], unit, objects))
    return drafts
