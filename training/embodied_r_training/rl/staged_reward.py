"""The total reward GRPO trains on: the registered rewards a schedule names, weighted by its stages.

:class:`StagedReward` is the one reward function the trainer hands TRL; TRL logs its batch mean as
``rewards/total/mean`` (and ``reward``). Each call reads the stage's weights for TRL's ``trainer_state``
(:meth:`.schedule.RewardSchedule.weights_for_state`), calls every reward the schedule names
(:mod:`.rewards`' registry) with the arguments TRL passed, in the order they were registered, and sums
``weight * score`` per completion. Through TRL's ``log_metric`` it logs each reward's batch mean as
``rewards/<name>/mean`` and each weight as ``weight/<name>``; ``logging`` gets one line per call at INFO.

Why one function rather than TRL's list of reward functions with ``reward_weights`` set per stage: TRL forms
that sum in float32, which differs in the last bit from this one (float64, rounded to float32 once by
TRL) for about a quarter of the paper's stage weights and scores in tenths, so runs would not reproduce.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .rewards import Completion, RewardContext, RewardFunction
from .schedule import RewardSchedule, epoch_from_state

logger = logging.getLogger(__name__)


class StagedReward:
    """The total reward ``sum(weight[name] * reward[name])`` over the schedule's rewards, weights by stage.

    Every reward a stage names is computed at every call (also at weight 0: it is logged, so it can be
    watched before it counts), except a costly one (registered ``only_when_weighted``, such as the
    consistency reward with its reference model), which runs only while its weight is > 0. A completion
    a reward returns None for gets nothing from that reward, as in TRL; one that every reward returns None
    for gets None (TRL then leaves it out). ``context`` holds what factory-built rewards need: the
    reference model of the consistency reward (:class:`~.rewards.RewardContext`). Hand TRL only this
    function (``reward_weights`` unset): the weights are inside.
    """

    __name__ = "total"  # TRL names reward functions by __name__: it logs this one as rewards/total/mean

    def __init__(self, schedule: RewardSchedule | None = None, context: RewardContext | None = None) -> None:
        self.schedule = schedule or RewardSchedule()
        context = context or RewardContext()
        self.rewards = self.schedule.rewards()
        missing = [r.name for r in self.rewards if r.needs_reference and context.reference is None]
        if missing:
            raise ValueError(
                f"the reward schedule weights {', '.join(missing)}, which needs a reference model; pass "
                f"RewardContext(reference=...) built from a reference backend, or give {missing[0]} weight 0 "
                "in every stage"
            )
        self.functions: dict[str, RewardFunction] = {r.name: r.build(context) for r in self.rewards}

    def __call__(
        self,
        completions: Sequence[Completion],
        solution: Sequence[Any],
        trainer_state: Any = None,
        log_metric: Callable[[str, float], None] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """One total reward per completion; see the class docstring. ``solution`` is the data set's required
        column; every other argument TRL passes reaches the rewards as it came."""
        epoch = epoch_from_state(trainer_state)
        weights = self.schedule.weights_for_state(trainer_state)
        scores: dict[str, list[float | None]] = {}
        for reward in self.rewards:
            if reward.only_when_weighted and weights[reward.name] == 0:
                continue  # costly and not counted in this stage
            values = self.functions[reward.name](
                completions=completions, solution=solution, trainer_state=trainer_state,
                log_metric=log_metric, **kwargs,
            )  # fmt: skip
            scores[reward.name] = _checked(reward.name, values, len(completions))
        total = [
            _weighted_sum([(weights[name], values[i]) for name, values in scores.items()])
            for i in range(len(completions))
        ]
        self._log(epoch, weights, scores, total, log_metric)
        return total

    @staticmethod
    def _log(
        epoch: int,
        weights: Mapping[str, float],
        scores: Mapping[str, list[float | None]],
        total: list[float | None],
        log_metric: Callable[[str, float], None] | None,
    ) -> None:
        means = {name: _mean(values) for name, values in scores.items()}
        parts = [
            f"{name} {_text(means[name])} (weight {w:.3f})" if name in means else f"{name} skipped (weight 0)"
            for name, w in weights.items()
        ]
        logger.info(
            "rewards epoch %d n=%d: %s; total %s", epoch, len(total), ", ".join(parts), _text(_mean(total))
        )
        if log_metric is not None:
            for name, mean in means.items():
                if mean is not None:  # a reward that applied to no completion of the batch has no mean
                    log_metric(f"rewards/{name}/mean", mean)
            for name, weight in weights.items():
                log_metric(f"weight/{name}", weight)


def _checked(name: str, values: Sequence[Any], n: int) -> list[float | None]:
    """A reward's scores as floats, None where it does not apply (None or NaN, as TRL reads them)."""
    values = list(values)
    if len(values) != n:
        raise ValueError(
            f"reward {name!r} returned {len(values)} scores for {n} completions; a reward function returns "
            "one float (or None) per completion"
        )
    floats = [None if v is None else float(v) for v in values]
    return [None if v is None or math.isnan(v) else v for v in floats]


def _weighted_sum(terms: list[tuple[float, float | None]]) -> float | None:
    """``sum(weight * score)`` over the scores that apply, in order; None when none does."""
    applied = [weight * score for weight, score in terms if score is not None]
    return sum(applied) if applied else None


def _mean(values: list[float | None]) -> float | None:
    applied = [v for v in values if v is not None]
    return sum(applied) / len(applied) if applied else None


def _text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
