"""Curriculum by task: GRPO sees the questions of easy tasks first (config ``curriculum:``; off by default).

A curriculum is a list of stages, each from an optimizer step (0-based, the first at 0) on, naming the
tasks whose questions the trainer draws from then (``all``: every task)::

    curriculum:
      - {start_step: 0, tasks: [object_count]}
      - {start_step: 16, tasks: all}

Why: a GRPO group carries a signal only when its completions differ in reward, which needs a policy that
sometimes gets the question right. A small LM gets some tasks right by reading the answer off the
descriptions (how many lamps: count the "lamp" entries) long before it can do the relational ones (which
way is the door from the chair); starting there gives the policy rewards it can learn from before the hard
tasks arrive (curriculum learning: Bengio et al., ICML 2009; by task for RL fine-tuning of LLMs, e.g.
Kimi k1.5, 2025). The paper trains on its shuffled data set.

How: the training split is reordered once, before training, into the order the steps will read it: stage
``i`` gets ``round(end_i * p) - round(start_i * p)`` rows, ``p`` being the unique prompts one optimizer step
reads, drawn without repetition (a stage with fewer questions than steps cycles through them again) from
a seeded shuffle of its tasks' questions, questions an earlier stage showed coming last; TRL's sampler
then keeps that order (``shuffle_dataset: false``). The order is a pure function of the data, the
curriculum and the seed, so a resumed run reads the same prompts.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from embodied_r_ros.config import ConfigError

logger = logging.getLogger(__name__)

ALL_TASKS = "all"


@dataclass(frozen=True)
class CurriculumStage:
    """From optimizer step ``start_step`` (0-based) until the next stage: questions of ``tasks`` only
    (empty: every task)."""

    start_step: int
    tasks: tuple[str, ...] = ()

    def admits(self, task: str) -> bool:
        """Whether a question of ``task`` belongs to this stage."""
        return not self.tasks or task in self.tasks


@dataclass(frozen=True)
class Curriculum:
    """The stages of a curriculum, by increasing ``start_step``, the first at step 0."""

    stages: tuple[CurriculumStage, ...]

    def __post_init__(self) -> None:
        starts = [s.start_step for s in self.stages]
        if not starts or starts[0] != 0:
            raise ConfigError(f"curriculum: the first stage must start at step 0, got start steps {starts}")
        if any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
            raise ConfigError(f"curriculum: stage start steps must increase strictly, got {starts}")

    @classmethod
    def from_list(cls, items: Any) -> Curriculum:
        """A curriculum from YAML-style data: ``[{start_step: 0, tasks: [object_count]}, ...]``."""
        if not isinstance(items, Sequence) or isinstance(items, (str, bytes)) or not items:
            raise ConfigError(
                "curriculum must be a list of stages such as [{start_step: 0, tasks: [object_count]}, "
                f"{{start_step: 16, tasks: all}}], got {items!r}"
            )
        stages = []
        for item in items:
            keys = set(item) if isinstance(item, Mapping) else set()
            if not isinstance(item, Mapping) or keys - {"start_step", "tasks"} or "start_step" not in keys:
                raise ConfigError(
                    f"curriculum stage {item!r}: give start_step (an optimizer step) and tasks (a list of "
                    f"task names, or {ALL_TASKS!r}), nothing else"
                )
            step, tasks = item["start_step"], item.get("tasks", ALL_TASKS)
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise ConfigError(f"curriculum stage {item!r}: start_step must be an integer >= 0")
            if tasks == ALL_TASKS:
                names: tuple[str, ...] = ()
            elif isinstance(tasks, Sequence) and not isinstance(tasks, str) and tasks:
                if not all(isinstance(t, str) and t for t in tasks):
                    raise ConfigError(f"curriculum stage {item!r}: tasks must be task names (strings)")
                names = tuple(dict.fromkeys(tasks))
            else:
                raise ConfigError(
                    f"curriculum stage {item!r}: tasks must be a non-empty list of task names, or "
                    f"{ALL_TASKS!r}"
                )
            stages.append(CurriculumStage(start_step=step, tasks=names))
        return cls(tuple(stages))

    def to_list(self) -> list[dict[str, Any]]:
        """The YAML-style form (:meth:`from_list` reads it back), for records of a run's settings."""
        return [{"start_step": s.start_step, "tasks": list(s.tasks) or ALL_TASKS} for s in self.stages]

    def check_tasks(self, available: Sequence[str], where: str) -> None:
        """Raise :class:`ConfigError` when a stage names a task ``available`` (the data's) lacks."""
        known = set(available)
        for stage in self.stages:
            missing = [t for t in stage.tasks if t not in known]
            if missing:
                raise ConfigError(
                    f"curriculum stage from step {stage.start_step}: {where} has no question of task(s) "
                    f"{', '.join(missing)}; its tasks are {', '.join(sorted(known))}"
                )


def prompts_per_step(completions_per_step: int, num_generations: int, num_iterations: int = 1) -> Fraction:
    """Unique prompts one optimizer step reads: its completions over the group size, over the number of
    optimization passes TRL makes over one generation batch (``num_iterations``)."""
    return Fraction(completions_per_step, num_generations * num_iterations)


def curriculum_order(tasks: Sequence[str], curriculum: Curriculum, max_steps: int, per_step: Fraction,
                     seed: int) -> list[int]:  # fmt: skip
    """The row indices (into ``tasks``, the data set's task column) in the order training reads them.

    Stage ``i`` covers steps ``[start_i, start_{i+1})`` (the last until ``max_steps``) and gets that many
    steps' worth of rows of its tasks; see the module docstring.
    """
    if max_steps < 1:
        raise ConfigError("a curriculum needs grpo.max_steps >= 1: it lays out the rows step by step")
    starts = [s.start_step for s in curriculum.stages]
    if starts[-1] >= max_steps:
        raise ConfigError(
            f"curriculum: stage start step {starts[-1]} is not before grpo.max_steps={max_steps}; every "
            "stage needs steps"
        )
    rng = np.random.default_rng(seed)
    shown: Counter[int] = Counter()
    order: list[int] = []
    for stage, start, end in zip(curriculum.stages, starts, [*starts[1:], max_steps], strict=True):
        rows = round(end * per_step) - round(start * per_step)
        pool = [i for i, task in enumerate(tasks) if stage.admits(task)]
        if not pool:
            raise ConfigError(f"curriculum stage from step {start}: no question of {', '.join(stage.tasks)}")
        picked: list[int] = []
        while len(picked) < rows:
            # Each pass shows every question of the stage once; ones seen least so far come first.
            shuffled = [pool[j] for j in rng.permutation(len(pool))]
            shuffled.sort(key=lambda i: shown[i])
            take = shuffled[: rows - len(picked)]
            shown.update(take)
            picked += take
        order += picked
        logger.info(
            "curriculum steps %d-%d: %d prompts from %d questions of %s",
            start, end - 1, rows, len(pool), ", ".join(stage.tasks) or "every task",
        )  # fmt: skip
    return order


def with_curriculum(dataset: Any, curriculum: Curriculum, max_steps: int, per_step: Fraction, seed: int,
                    where: str = "the training split") -> Any:  # fmt: skip
    """``dataset`` (a ``datasets.Dataset`` with a ``task`` column) reordered for ``curriculum``."""
    tasks = [str(t) for t in dataset["task"]]
    curriculum.check_tasks(tasks, where)
    return dataset.select(curriculum_order(tasks, curriculum, max_steps, per_step, seed))
