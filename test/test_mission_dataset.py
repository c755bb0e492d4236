"""Mission questions as training rows, put as the node puts them (eval/mission_dataset.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from embodied_r_training.data.schema import COLUMNS, read_split
from embodied_r_training.eval.mission_dataset import (
    FIRST_SEED,
    GROUND_TRUTH,
    MissionDataConfig,
    build_mission_dataset,
    mission_seeds,
)
from embodied_r_training.tasks.mission.oracle import mission_oracle
from synth_helpers import SHORT_MISSION

from embodied_r_ros.question_file import read_questions
from embodied_r_ros.reasoning.answers import mean_relative_accuracy


def test_each_length_gets_its_own_seeds_far_from_the_benchmark_s() -> None:
    pairs = mission_seeds(MissionDataConfig(minutes=(5.0, 20.0), count=3))
    assert [m for m, _ in pairs] == [5.0] * 3 + [20.0] * 3
    seeds = [s for _, s in pairs]
    assert len(set(seeds)) == 6 and min(seeds) == FIRST_SEED


def test_mission_questions_become_rows_the_oracle_answers_from_their_prompt(
    short_mission: Path, e5_embedder, tmp_path: Path
) -> None:
    config = MissionDataConfig(minutes=(SHORT_MISSION.minutes,), count=1, first_seed=77)
    missions = tmp_path / "missions"
    shutil.copytree(short_mission, missions / f"m{SHORT_MISSION.minutes:g}-seed77")  # written already: kept
    report = build_mission_dataset(tmp_path / "data", missions, e5_embedder, config)

    rows = [json.loads(line) for line in (tmp_path / "data" / "train.jsonl").read_text().splitlines()]
    asked = read_questions(short_mission / "questions.jsonl")
    assert rows and sum(report.rows.values()) == len(rows)
    assert len(rows) + sum(report.left_out.values()) == len(asked)  # every question: a row or a reason
    assert len({r["task"] for r in rows}) >= 3  # several mission kinds, not one
    truth = {q.id: q for q in asked}
    for row in rows:
        assert list(row) == list(COLUMNS)
        assert row["vlm"] == GROUND_TRUTH and row["split"] == "train" and row["scene"].startswith("m2-")
        user = row["prompt"][-1]["content"]
        assert row["question"] in user and row["keyframe_stamps_ns"]
        assert row["solution"] == str(truth[row["id"]].answer)
        answer = mission_oracle(user).answer  # the prompt alone gives the solution
        assert (
            str(answer) == row["solution"]
            or mean_relative_accuracy(float(answer), truth[row["id"]].answer) >= 0.95
        )
    read = read_split(tmp_path / "data", "train", ["prompt", "solution"], "this test")  # as SFT reads it
    assert len(read) == len(rows)
