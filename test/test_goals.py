"""The goals a reasoner must meet beside the blind rows: a one-letter answerer and a number copier fail them,
a reasoner whose letters follow its reasoning meets them."""

from __future__ import annotations

from pathlib import Path

import pytest
from embodied_r_training.eval.compare import Run
from embodied_r_training.eval.goals import Goals, check_goals, goals_markdown

OPTIONS = ["3.2 m", "0.9 m", "1.3 m", "1.8 m"]


def _run(label: str, system: str, rows: list[dict]) -> Run:
    return Run(label, Path(label), {"system": system}, {r["id"]: r for r in rows})


def _mc(i: int, answer: str | None, solution: str, think: str = "", score: float | None = None) -> dict:
    completion = f"<think>{think}</think><answer>{answer}</answer>" if answer else think
    right = float(answer == solution) if score is None else score
    return {"id": f"q{i}", "task": "abs_distance", "form": "mc", "answer": answer, "solution": solution,
            "score": right, "completion": completion}  # fmt: skip


def _numeric(i: int, task: str, score: float) -> dict:
    return {"id": f"n{task}{i}", "task": task, "form": "numeric", "answer": 1.0, "solution": "1",
            "score": score, "completion": "<think>x</think><answer>1</answer>"}  # fmt: skip


def test_a_one_letter_answerer_fails_and_a_reasoner_meets_the_goals() -> None:
    letters = "ABCD" * 10  # 40 questions, truths spread over the letters
    blind = _run("options only", "options-only", [_mc(i, None, s, score=0.25) for i, s in enumerate(letters)])
    options = {f"q{i}": OPTIONS for i in range(40)}
    goals = Goals(min_task_questions=30)

    one_letter = _run("sft", "reasoner", [_mc(i, "C", s, "Nearest to 1: 1.3 m, option C.") for i, s in
                                          enumerate(letters)])  # fmt: skip
    checks = {
        c.goal.split(" (")[0].split(":")[0]: c
        for c in check_goals(one_letter, [blind], blind, options, goals)
    }
    assert not checks["multiple choice, overall"].met and checks["multiple choice, overall"].measured == 0.25
    assert not checks["most frequent answer letter, share"].met
    assert checks["most frequent answer letter, share"].detail["letter"] == "C"
    assert checks["answer letter = the option the think concludes"].met  # it is consistent, just blind

    reasoner = _run("grpo", "reasoner", [
        _mc(i, s, s, f"Nearest: {OPTIONS['ABCD'.index(s)]}, option {s}.") if i % 5 else _mc(i, "A", s, "...")
        for i, s in enumerate(letters)
    ])  # fmt: skip
    checks = check_goals(reasoner, [blind], blind, options, goals)
    by_goal = {c.goal: c for c in checks}
    assert by_goal["multiple choice, overall"].measured == pytest.approx(0.8 + 0.2 * 0.25)  # q0, q5: "A"
    assert by_goal["abs_distance (mc): over options-only + 10"].met
    assert by_goal["most frequent answer letter, share"].met
    assert by_goal["answer letter = the option the think concludes"].measured == 0.8  # "..." concludes none
    assert "3 of 4 goals met." in goals_markdown("grpo", checks)  # all but the agreement


def test_numeric_goals_hold_a_copier_against_each_tasks_best_blind_row() -> None:
    tasks = ("abs_distance", "object_size")
    constant = _run("constant", "constant", [_numeric(i, t, 0.6) for t in tasks for i in range(10)])
    chance_scores = {"abs_distance": 0.2, "object_size": 0.7}
    chance = _run("chance", "chance", [_numeric(i, t, chance_scores[t]) for t in tasks for i in range(10)])
    # A copier: perfect on a read-off task, below the blind constant where values must be combined.
    copied = {"abs_distance": 0.5, "object_size": 1.0}
    copier = _run("sft", "reasoner", [_numeric(i, t, copied[t]) for t in tasks for i in range(10)])
    checks = {c.goal: c for c in check_goals(copier, [constant, chance], constant, {})}
    overall = checks["numeric MRA, over the best blind row + 15"]
    assert abs(overall.target - (0.65 + 0.15)) < 1e-9  # each task's best blind row: 0.6 and 0.7
    assert overall.met is False and abs(overall.measured - 0.75) < 1e-9
    combining = checks["abs_distance (numeric): over the best blind row (constant)"]
    assert abs(combining.target - 0.6) < 1e-9 and not combining.met
    assert not any(goal.startswith("object_size") for goal in checks)  # a read-off task has no such goal
