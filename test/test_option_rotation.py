"""data.rotate_options: the options of a GRPO group's copies are rotations of one order, the solution
letter follows its option, and a real TRL step hands the rewards the rotated rows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from embodied_r_training.data.schema import read_split, write_split
from embodied_r_training.rl.option_rotation import rotate_batch, rotate_record, with_rotated_options
from embodied_r_training.rl.train import build_trainer
from embodied_r_training.rl.train_config import build_train_config

from embodied_r_ros.config import ConfigError
from embodied_r_ros.reasoning.answers import extract_choice
from embodied_r_ros.reasoning.prompts import question_block, reasoning_prompt

QUESTION = "Which object did I pass first?"
OPTIONS = ["red chair", "blue lamp", "green table", "white door"]


def _record(row_id: str = "q1", options: list[str] = OPTIONS, solution: str = "C") -> dict:
    observations = [(None, "a red chair ahead"), ("move forward", "a green table left")]
    user = reasoning_prompt(observations, QUESTION, options)
    return {
        "id": row_id,
        "prompt": [{"role": "system", "content": "reason"}, {"role": "user", "content": user}],
        "solution": solution,
        "question": QUESTION,
        "options": list(options),
        "task": "appearance_order",
    }


def _batch(rows: list[dict]) -> dict[str, list]:
    return {c: [r[c] for r in rows] for c in rows[0]}


def _rows(batch: dict[str, list]) -> list[dict]:
    return [dict(zip(batch, values, strict=True)) for values in zip(*batch.values(), strict=True)]


def _shown_options(row: dict) -> list[str]:
    block = row["prompt"][-1]["content"].split("Options:\n", 1)[1]
    return [line.split(". ", 1)[1] for line in block.splitlines()[: len(OPTIONS)]]


def test_a_group_of_eight_puts_the_right_option_under_every_letter_twice() -> None:
    rows = _rows(rotate_batch(_batch([_record()] * 8), seed=0))
    assert Counter(r["solution"] for r in rows) == {"A": 2, "B": 2, "C": 2, "D": 2}
    for row in rows:
        # The prompt shows the rotated options, and the solution letter names the original right one.
        assert _shown_options(row) == row["options"]
        assert row["options"][ord(row["solution"]) - ord("A")] == "green table"
        assert row["prompt"][-1]["content"].endswith(question_block(QUESTION, row["options"]))
        assert sorted(row["options"]) == sorted(OPTIONS)
        assert row["prompt"][-1]["content"].startswith("You are a robot.")  # the descriptions are kept
    assert len({tuple(r["options"]) for r in rows}) == 4  # four orders, each twice
    # Stateless: the same fetch gives the same prompts (a resumed run sees what the first run saw).
    assert _rows(rotate_batch(_batch([_record()] * 8), seed=0)) == rows
    # Another seed draws another base order for the same question.
    other = _rows(rotate_batch(_batch([_record()] * 8), seed=1))
    assert [r["options"] for r in other] != [r["options"] for r in rows]


def test_numeric_rows_and_the_original_record_are_left_alone() -> None:
    numeric = _record("n1", options=[], solution="2.5")
    original = _record()
    rows = _rows(rotate_batch(_batch([numeric, original]), seed=0))
    assert rows[0] == numeric
    assert original["options"] == OPTIONS and original["solution"] == "C"  # rotation copies, never mutates


def test_a_row_whose_prompt_does_not_match_names_the_row_and_the_fix() -> None:
    stale = _record("scene3/q7")
    stale["prompt"][-1]["content"] = stale["prompt"][-1]["content"].replace("Options:", "Choices:")
    with pytest.raises(ConfigError, match=r"'scene3/q7'.*rebuild it with embodied-r prepare"):
        rotate_record(stale, [1, 0, 2, 3])
    with pytest.raises(ConfigError, match="solution 'E' is not one of the letters"):
        rotate_record(_record(solution="E"), [1, 0, 2, 3])


def _mc_dataset(tiny_dataset: Path, out: Path) -> tuple[Path, dict]:
    """A copy of the tiny data set whose train split holds one multiple-choice row."""
    train = read_split(tiny_dataset, "train", ["prompt", "options"], "this test")
    row = next(r for r in train if len(r["options"]) == 4)
    out.mkdir()
    write_split(out, "train", [row])
    return out, row


def test_a_real_grpo_step_scores_each_completion_against_its_rotated_options(
    tiny_models_dir: Path, tiny_dataset: Path, tmp_path: Path
) -> None:
    data, row = _mc_dataset(tiny_dataset, tmp_path / "mc")
    right = row["options"][ord(row["solution"]) - ord("A")]
    config = build_train_config({
        "model": str(tiny_models_dir / "lm"),
        "output_dir": str(tmp_path / "run"),
        "data": {"path": str(data), "rotate_options": True},
        "rewards": [{"start_step": 0, "format": 1, "accuracy": 1, "consistency": 0}],
        "grpo": dict(use_cpu=True, bf16=False, num_generations=8, per_device_train_batch_size=8,
                     max_completion_length=8, max_steps=1, save_strategy="no", logging_steps=1),
    })  # fmt: skip
    trainer = build_trainer(config)
    seen: list[dict] = []
    reward = trainer.reward_funcs[0]

    def recording(completions, solution, **kwargs):  # what TRL hands the reward function
        rows = zip(solution, kwargs["options"], kwargs["prompts"], strict=True)
        seen.extend({"solution": s, "options": o, "prompt": p} for s, o, p in rows)
        return reward(completions, solution, **kwargs)

    trainer.reward_funcs[0] = recording
    trainer.train()
    assert len(seen) == 8
    assert Counter(s["solution"] for s in seen) == {"A": 2, "B": 2, "C": 2, "D": 2}
    for s in seen:
        assert s["options"][ord(s["solution"]) - ord("A")] == right
        assert s["prompt"][-1]["content"].endswith(question_block(row["question"], s["options"]))
        # The grader reads the rotated letters: the right letter scores, another does not.
        assert extract_choice(s["solution"], s["options"]) == s["solution"]


def test_a_bad_row_fails_before_training(tiny_dataset: Path) -> None:
    train = read_split(tiny_dataset, "train", ["prompt", "options"], "this test")
    rows = [dict(r) for r in train]
    rows[0]["prompt"] = [{"role": "user", "content": "no question block"}]
    rows[0]["options"], rows[0]["solution"] = OPTIONS, "A"
    from datasets import Dataset

    with pytest.raises(ConfigError, match="rebuild it with embodied-r prepare"):
        with_rotated_options(Dataset.from_list(rows), seed=0)
