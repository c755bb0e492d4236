"""The staged reward weights of Embodied-R: which mix of the rewards, by name, each epoch trains.

The paper trains format first, then accuracy, then adds logical consistency: format:accuracy:consistency
is 7:3:0 in epochs 1-2, 3:7:0 in epochs 3-4 and 1:7:2 from epoch 5 on. The public reference code only
implemented the last stage; here the whole schedule is data (:class:`RewardSchedule`), the paper's as
the default. A stage weights rewards by their registered names (:func:`.rewards.register_reward`), so a
new reward is one more name in a stage; a name a stage leaves out weighs 0 there.

Epochs are 1-based. TRL hands reward functions ``trainer_state``, whose ``epoch`` is a float: 0.0 before
the first optimizer step and ``e + (step + 1) / steps_in_epoch`` after a step of the 0-based epoch ``e``
(transformers' Trainer), so it reaches exactly ``e + 1`` at the end of epoch ``e``. The 1-based epoch of
a step is therefore ``floor(state.epoch) + 1``: 0.0 .. 0.999 is epoch 1, 1.0 (the first step after the
first epoch ended) is epoch 2, and so on. See :func:`epoch_from_state`.

A run far shorter than an epoch (a CPU experiment of a few dozen steps over hundreds of questions) cannot
stage by epoch; its stages may give ``start_step`` instead (0-based optimizer steps, the first stage at 0),
e.g. the paper's 12-epoch shape compressed onto the step budget. A schedule uses one or the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from embodied_r_ros.config import ConfigError

from .rewards import RegisteredReward, registered_reward, registered_rewards

# A float epoch a hair below an integer (accumulated rounding) still counts as that integer's epoch.
_EPOCH_SLACK = 1e-9
# The keys of a stage in a config besides the reward names.
STAGE_KEYS = ("start_epoch", "start_step")


@dataclass(frozen=True)
class Stage:
    """From ``start_epoch`` (1-based), or from optimizer step ``start_step`` (0-based) when given, until
    the next stage: the ratio of the rewards' weights, by registered reward name (absent names weigh 0)."""

    start_epoch: int = 1
    weights: Mapping[str, float] = field(default_factory=dict)
    start_step: int | None = None

    def __post_init__(self) -> None:
        if self.start_step is not None and (
            isinstance(self.start_step, bool) or not isinstance(self.start_step, int) or self.start_step < 0
        ):
            raise ConfigError(f"reward stage start_step must be an integer >= 0, got {self.start_step!r}")
        if (
            isinstance(self.start_epoch, bool)
            or not isinstance(self.start_epoch, int)
            or self.start_epoch < 1
        ):
            raise ConfigError(f"reward stage start_epoch must be an integer >= 1, got {self.start_epoch!r}")
        start = f"step {self.start_step}" if self.start_step is not None else f"epoch {self.start_epoch}"
        where = f"reward stage from {start}"
        if not isinstance(self.weights, Mapping):
            raise ConfigError(f"{where}: weights must map reward names to ratios, got {self.weights!r}")
        for name in self.weights:
            try:
                registered_reward(name)
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from exc
        ratios = dict(self.weights)
        if not all(isinstance(r, (int, float)) and math.isfinite(r) and r >= 0 for r in ratios.values()):
            raise ConfigError(f"{where}: reward weights must be finite numbers >= 0, got {ratios}")
        if sum(ratios.values()) <= 0:
            raise ConfigError(f"{where}: the weights are all 0; give one > 0")
        object.__setattr__(self, "weights", ratios)  # a copy: the caller's mapping can change later


PAPER_STAGES: tuple[Stage, ...] = (
    Stage(start_epoch=1, weights={"format": 7, "accuracy": 3, "consistency": 0}),
    Stage(start_epoch=3, weights={"format": 3, "accuracy": 7, "consistency": 0}),
    Stage(start_epoch=5, weights={"format": 1, "accuracy": 7, "consistency": 2}),
)


@dataclass(frozen=True)
class RewardSchedule:
    """Reward ratios by epoch: ``stages`` sorted by ``start_epoch``, the first starting at epoch 1.

    Ratios are given as in the paper (7:3:0) and normalised to sum 1, so the total reward stays in [0, 1]
    when every reward does.
    """

    stages: tuple[Stage, ...] = PAPER_STAGES

    def __post_init__(self) -> None:
        steps = [s.start_step for s in self.stages]
        if any(step is not None for step in steps):
            if any(step is None for step in steps) or steps[0] != 0:
                raise ConfigError(
                    "reward schedule: stages by step need start_step on every stage, the first at 0; "
                    f"got {steps}"
                )
            if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
                raise ConfigError(f"reward schedule: stage start steps must increase strictly, got {steps}")
            return
        starts = [s.start_epoch for s in self.stages]
        if not starts or starts[0] != 1:
            raise ConfigError(f"reward schedule: the first stage must start at epoch 1, got starts {starts}")
        if any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
            raise ConfigError(f"reward schedule: stage start epochs must increase strictly, got {starts}")

    @property
    def names(self) -> tuple[str, ...]:
        """Every reward some stage names (also at weight 0), in the order the rewards were registered."""
        named = {name for stage in self.stages for name in stage.weights}
        order = {name: i for i, name in enumerate(registered_rewards())}
        return tuple(sorted(named, key=lambda name: (order.get(name, len(order)), name)))

    @property
    def weighted_names(self) -> tuple[str, ...]:
        """The rewards weighted > 0 in some stage (those that enter the total at some step)."""
        return tuple(n for n in self.names if any(s.weights.get(n, 0) > 0 for s in self.stages))

    def rewards(self) -> tuple[RegisteredReward, ...]:
        """The registered rewards this schedule computes at some step: every reward a stage names, except
        a costly one (``only_when_weighted``) that no stage weights."""
        computed = []
        for name in self.names:
            reward = registered_reward(name)
            if name in self.weighted_names or not reward.only_when_weighted:
                computed.append(reward)
        return tuple(computed)

    def weights_for_epoch(self, epoch: int) -> dict[str, float]:
        """The normalised weights of 1-based ``epoch`` by reward name, one for each of :attr:`names` (the
        last stage holds for every later epoch)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise ValueError(f"epoch must be an integer >= 1 (1-based), got {epoch!r}")
        if self.by_step:
            raise ValueError("this schedule stages by optimizer step; use weights_for_step")
        return self._normalised([s for s in self.stages if s.start_epoch <= epoch][-1])

    @property
    def by_step(self) -> bool:
        """Whether the stages start at optimizer steps (else at epochs)."""
        return self.stages[0].start_step is not None

    def weights_for_step(self, step: int) -> dict[str, float]:
        """The normalised weights at 0-based optimizer ``step`` of a schedule by steps."""
        if not self.by_step:
            raise ValueError("this schedule stages by epoch; use weights_for_epoch")
        return self._normalised([s for s in self.stages if s.start_step <= step][-1])

    def weights_for_state(self, trainer_state: Any) -> dict[str, float]:
        """The weights for the step TRL's ``trainer_state`` describes: its ``global_step`` (optimizer steps
        done) for a schedule by steps, else its epoch (see :func:`epoch_from_state`)."""
        if self.by_step:
            epoch_from_state(trainer_state)  # the same check that a trainer state was given
            return self.weights_for_step(int(getattr(trainer_state, "global_step", 0) or 0))
        return self.weights_for_epoch(epoch_from_state(trainer_state))

    def _normalised(self, stage: Stage) -> dict[str, float]:
        # Summed in registration order: format + accuracy + consistency, as the weights always were.
        names = self.names
        total = sum(stage.weights.get(name, 0) for name in names)
        return {name: stage.weights.get(name, 0) / total for name in names}

    @classmethod
    def from_list(cls, stages: Sequence[Mapping[str, Any]]) -> RewardSchedule:
        """A schedule from YAML-style data: ``[{start_epoch: 1, format: 7, accuracy: 3}, ...]``: each stage
        has ``start_epoch`` (or ``start_step``) and the weights of rewards by registered name.

        Unknown keys raise :class:`ConfigError` listing the registered rewards.
        """
        if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence):
            raise ConfigError(f"reward schedule must be a list of stages, got {stages!r}")
        built = []
        for i, stage in enumerate(stages):
            if not isinstance(stage, Mapping):
                raise ConfigError(f"reward schedule stage {i} must be a mapping, got {stage!r}")
            known = set(registered_rewards())
            unknown = sorted((k for k in stage if k not in STAGE_KEYS and k not in known), key=str)
            if unknown or not set(STAGE_KEYS) & set(stage):
                problem = f"unknown key(s) {unknown}" if unknown else "no start_epoch (or start_step)"
                raise ConfigError(
                    f"reward schedule stage {i} has {problem}; a stage takes {' or '.join(STAGE_KEYS)} and "
                    f"weights by reward name; registered rewards: {', '.join(registered_rewards())}"
                )
            weights = {k: v for k, v in stage.items() if k not in STAGE_KEYS}
            built.append(Stage(weights=weights, **{k: v for k, v in stage.items() if k in STAGE_KEYS}))
        return cls(tuple(built))


def epoch_from_state(trainer_state: Any) -> int:
    """The 1-based epoch of the current step: ``floor(trainer_state.epoch) + 1``.

    ``trainer_state`` is TRL's/transformers' ``TrainerState`` (anything with a float ``epoch``); an
    ``epoch`` of None (not started) is epoch 1. ``trainer_state`` None raises ValueError: outside a
    trainer, ask :meth:`RewardSchedule.weights_for_epoch` for an explicit epoch instead.
    """
    if trainer_state is None:
        raise ValueError(
            "the staged reward needs trainer_state (TRL's GRPOTrainer passes it); outside a trainer use "
            "RewardSchedule.weights_for_epoch(epoch)"
        )
    epoch = getattr(trainer_state, "epoch", None)
    if epoch is None:
        return 1
    value = float(epoch)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"trainer_state.epoch must be a finite number >= 0, got {epoch!r}")
    return math.floor(value + _EPOCH_SLACK) + 1
