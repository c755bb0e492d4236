"""Curriculum by task: the training split laid out in step order, stage by stage, checked at config load,
and a real TRL run reading the easy task's questions first."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from embodied_r_training.data.schema import read_split, write_split
from embodied_r_training.rl.curriculum import Curriculum, curriculum_order, prompts_per_step, with_curriculum
from embodied_r_training.rl.train import build_trainer, grpo_arguments
from embodied_r_training.rl.train_config import build_train_config

from embodied_r_ros.config import ConfigError

TWO_STAGES = [{"start_step": 0, "tasks": ["object_count"]}, {"start_step": 4, "tasks": "all"}]
# No consistency weight: these configs need no reference model.
REWARDS = [{"start_step": 0, "format": 1, "accuracy": 1, "consistency": 0}]


def _tasks() -> list[str]:
    # 6 counting questions, 10 others: enough for stage 2, too few for a long stage 1 (it must cycle).
    return ["object_count"] * 6 + ["route"] * 4 + ["ego_turn"] * 6


def test_each_stage_reads_only_its_tasks_for_its_steps() -> None:
    tasks = _tasks()
    order = curriculum_order(tasks, Curriculum.from_list(TWO_STAGES), max_steps=10, per_step=Fraction(1),
                             seed=0)  # fmt: skip
    assert len(order) == 10
    assert {tasks[i] for i in order[:4]} == {"object_count"}
    assert len(set(order[:4])) == 4  # no question twice while the stage has unseen ones
    # Stage 2 (every task) shows questions stage 1 did not before repeating any.
    assert not set(order[4:]) & set(order[:4])
    assert len(set(order[4:])) == 6
    # The order is a function of the seed: the same seed, the same prompts (resume); another, others.
    again = curriculum_order(tasks, Curriculum.from_list(TWO_STAGES), 10, Fraction(1), seed=0)
    other = curriculum_order(tasks, Curriculum.from_list(TWO_STAGES), 10, Fraction(1), seed=1)
    assert again == order and other != order


def test_a_stage_longer_than_its_questions_cycles_through_them_evenly() -> None:
    tasks = _tasks()
    stages = [
        {"start_step": 0, "tasks": ["object_count"]},
        {"start_step": 15, "tasks": ["route", "ego_turn"]},
    ]
    order = curriculum_order(tasks, Curriculum.from_list(stages), max_steps=16, per_step=Fraction(1), seed=3)
    counts = Counter(order[:15])
    assert set(counts.values()) == {2, 3} and sum(counts.values()) == 15  # 6 questions, 15 steps: 2-3 each
    assert tasks[order[15]] in ("route", "ego_turn")


def test_rows_per_stage_follow_the_prompts_one_step_reads() -> None:
    # 16 completions a step in groups of 8 = 2 prompts; two passes over each generation (num_iterations 2)
    # halve it again.
    assert prompts_per_step(16, 8) == 2
    assert prompts_per_step(8, 8, num_iterations=2) == Fraction(1, 2)
    tasks = _tasks()
    order = curriculum_order(tasks, Curriculum.from_list(TWO_STAGES), 10, Fraction(2), seed=0)
    assert len(order) == 20 and {tasks[i] for i in order[:8]} == {"object_count"}
    half = curriculum_order(tasks, Curriculum.from_list(TWO_STAGES), 10, Fraction(1, 2), seed=0)
    assert len(half) == 5 and {tasks[i] for i in half[:2]} == {"object_count"}


@pytest.mark.parametrize(
    ("curriculum", "grpo", "match"),
    [
        ([{"start_step": 2, "tasks": "all"}], {"max_steps": 8}, "first stage must start at step 0"),
        ([{"start_step": 0, "tasks": "all"}, {"start_step": 0, "tasks": "all"}], {"max_steps": 8},
         "increase strictly"),
        ([{"start_step": 0, "task": ["route"]}], {"max_steps": 8}, "give start_step .* and tasks"),
        ([{"start_step": 0, "tasks": []}], {"max_steps": 8}, "non-empty list of task names"),
        (TWO_STAGES, {}, "needs grpo.max_steps >= 1"),
        (TWO_STAGES, {"max_steps": 4}, "starts at step 4, not before grpo.max_steps=4"),
        (TWO_STAGES, {"max_steps": 8, "shuffle_dataset": True}, "shuffle_dataset: true would undo"),
        ("object_count", {"max_steps": 8}, "must be a list of stages"),
    ],
)  # fmt: skip
def test_a_bad_curriculum_fails_at_config_load(curriculum, grpo, match) -> None:
    data = {"model": "tiny", "curriculum": curriculum, "rewards": REWARDS, "grpo": grpo}
    with pytest.raises(ConfigError, match=match):
        build_train_config(data, source="c.yaml")


def test_sft_rejects_a_curriculum_and_grpo_keeps_the_data_order() -> None:
    sft = {"model": "tiny", "method": "sft", "warm_start": {"steps": 2}, "curriculum": TWO_STAGES,
           "rewards": REWARDS, "grpo": {"max_steps": 8}}  # fmt: skip
    with pytest.raises(ConfigError, match="method sft would ignore it"):
        build_train_config(sft)
    config = build_train_config({"model": "tiny", "curriculum": TWO_STAGES, "rewards": REWARDS, "grpo": {
        "max_steps": 8, "use_cpu": True, "bf16": False}})  # fmt: skip
    assert grpo_arguments(config).shuffle_dataset is False
    assert build_train_config({"model": "tiny", "rewards": REWARDS}).curriculum is None
    assert Curriculum.from_list(config.curriculum.to_list()) == config.curriculum


def test_a_task_the_data_lacks_is_named_with_the_tasks_it_has() -> None:
    from datasets import Dataset

    dataset = Dataset.from_list([{"id": str(i), "task": t} for i, t in enumerate(_tasks())])
    typo = [{"start_step": 0, "tasks": ["object_cont"]}, {"start_step": 2, "tasks": "all"}]
    stages = Curriculum.from_list(typo)
    with pytest.raises(ConfigError, match=r"no question of task\(s\) object_cont; its tasks are ego_turn, "):
        with_curriculum(dataset, stages, 4, Fraction(1), seed=0, where="train.jsonl")
    ordered = with_curriculum(dataset, Curriculum.from_list(TWO_STAGES), 6, Fraction(1), seed=0)
    assert ordered["task"][:4] == ["object_count"] * 4 and len(ordered) == 6


def test_a_real_grpo_run_reads_the_first_stage_tasks_first(
    tiny_models_dir: Path, tiny_dataset: Path, tmp_path: Path
) -> None:
    rows = list(read_split(tiny_dataset, "train", ["prompt", "task"], "this test"))
    easy = Counter(r["task"] for r in rows).most_common()[-1][0]  # the rarest task: a real selection
    data = tmp_path / "data"
    data.mkdir()
    write_split(data, "train", rows)
    config = build_train_config({
        "model": str(tiny_models_dir / "lm"),
        "output_dir": str(tmp_path / "run"),
        "data": {"path": str(data)},
        "curriculum": [{"start_step": 0, "tasks": [easy]}, {"start_step": 2, "tasks": "all"}],
        "rewards": REWARDS,
        "grpo": dict(use_cpu=True, bf16=False, num_generations=2, per_device_train_batch_size=4,
                     max_completion_length=4, max_steps=4, save_strategy="no", logging_steps=1),
    })  # fmt: skip
    trainer = build_trainer(config)
    seen: list[tuple[int, str]] = []
    reward = trainer.reward_funcs[0]

    def recording(completions, solution, **kwargs):  # what TRL hands the reward function, step by step
        step = kwargs["trainer_state"].global_step
        seen.extend((step, task) for task in kwargs["task"])
        return reward(completions, solution, **kwargs)

    trainer.reward_funcs[0] = recording
    trainer.train()
    assert [step for step, _ in seen] == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4  # 2 prompts x 2 a step
    assert {task for step, task in seen if step < 2} == {easy}
    assert len(trainer.train_dataset) == 8  # 4 steps x 2 prompts, laid out in step order
