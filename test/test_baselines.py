"""The options-only blind reader, and the distractor rule it must not beat: over many generated scenes of
several seeds, a reader who sees only the options is near chance on every multiple-choice task."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from embodied_r_training.eval.baselines import RULES, option_number, options_only, overall
from embodied_r_training.synth.questions import generate_questions
from embodied_r_training.synth.trajectory import plan_trajectory
from embodied_r_training.synth.visibility import Visibility
from embodied_r_training.synth.world import generate_world

from embodied_r_ros.question_file import MC, Question
from embodied_r_ros.reasoning.options import OPTION_LETTERS

SEEDS = (0, 1, 2)
SCENES = 50  # per environment and seed: about 200 questions per task, so that luck stays small
NUMERIC_MC = ("abs_distance", "object_size", "room_size", "ego_distance")


def scene_questions(seed: int, index: int, outdoor: bool) -> list[Question]:
    """One scene's questions without rendering: every object seen from a random time on."""
    world_seq, path_seq, seen_seq, question_seq = np.random.SeedSequence([seed, index, outdoor]).spawn(4)
    world = generate_world(np.random.default_rng(world_seq), outdoor=outdoor)
    trajectory = plan_trajectory(world, 20.0, np.random.default_rng(path_seq))
    times = np.round(np.arange(0, 201) / 10.0, 3)
    pixels = np.zeros((len(times), len(world.objects) + 1), np.int32)
    for k, first in enumerate(np.random.default_rng(seen_seq).uniform(0.0, 18.0, len(world.objects))):
        pixels[times >= first, k + 1] = 1000
    visibility = Visibility(times, pixels, 20000)
    return generate_questions(world, trajectory, visibility, np.random.default_rng(question_seq))


@pytest.fixture(scope="module")
def question_sets() -> dict[int, list[Question]]:
    return {
        seed: [
            q for i in range(SCENES) for outdoor in (False, True) for q in scene_questions(seed, i, outdoor)
        ]
        for seed in SEEDS
    }


def as_records(questions: list[Question]) -> list[dict]:
    return [
        {"task": q.task, "options": list(q.options), "solution": q.answer} for q in questions if q.form == MC
    ]


def test_options_only_is_near_chance_on_every_seed(question_sets: dict[int, list[Question]]) -> None:
    for seed, questions in question_sets.items():
        records = as_records(questions)
        # Each task's rule chosen on another seed's questions (an honest reader), then over this seed's.
        calibration = as_records(question_sets[SEEDS[(SEEDS.index(seed) + 1) % len(SEEDS)]])
        assert overall(options_only(records, calibration)) <= 0.30, seed
        # Even each task's best rule on this very set (which flatters the reader) stays near chance.
        for task, score in options_only(records).items():
            if score.n >= 150:
                assert score.best <= 0.35, (seed, task, score.best_rule, score.best)


def test_the_truths_rank_among_numeric_options_is_uniform(question_sets: dict[int, list[Question]]) -> None:
    ranks: Counter[int] = Counter()
    for q in (q for questions in question_sets.values() for q in questions):
        if q.form != MC or q.task not in NUMERIC_MC:
            continue
        values = sorted(option_number(o) for o in q.options)
        assert len(values) == 4 and all(b >= 1.2 * a for a, b in zip(values, values[1:], strict=False)), q
        ranks[values.index(option_number(q.answer_text))] += 1
    total = sum(ranks.values())
    assert total > 1200
    assert all(0.21 <= ranks[r] / total <= 0.29 for r in range(4)), ranks
    letters = Counter(q.answer for questions in question_sets.values() for q in questions if q.form == MC)
    assert max(letters.values()) / min(letters[x] for x in "ABC") < 1.2  # letters balanced too


def test_the_rules_see_a_leak_when_there_is_one() -> None:
    # The old distractors: the truth always one of the two middle values.
    leaky = [
        {"task": "object_size", "options": [f"{v:.1f} m" for v in (1.8, 0.4, 0.9, 1.2)], "solution": "C"},
        {"task": "object_size", "options": [f"{v:.1f} m" for v in (2.0, 3.9, 1.0, 6.1)], "solution": "A"},
    ]
    scores = options_only(leaky)["object_size"]
    assert scores.rules["median_low"] == 1.0 and scores.best == 1.0 and scores.chance == 0.25
    assert scores.rules["smallest"] == 0.0 and scores.rules["typical"] == 0.25  # all tie: 1/4 expected
    # A rule chosen on other questions is scored, not the best one here.
    other = [{"task": "object_size", "options": ["1.0 m", "2.0 m", "3.0 m", "4.0 m"], "solution": "D"}]
    calibrated = options_only(leaky, other)["object_size"]
    assert calibrated.rule == "largest" and calibrated.score == 0.0
    assert set(RULES) == set(scores.rules)
    routes = ["turn left", "turn left, then turn right", "turn right", "turn around"]
    text = options_only([{"task": "route", "options": routes, "solution": "B"}])["route"]
    assert text.rules["longest"] == 1.0 and text.rules["geomean"] == 0.25  # no numbers: chance
    assert OPTION_LETTERS.startswith("ABCD") and option_number("left, about 90 degrees") == 90.0


def test_route_options_share_the_truths_length(question_sets: dict[int, list[Question]]) -> None:
    """A route's options all have as many turns as the truth: true routes are mostly one turn, so an option
    of another length would give the answer away (a blind reader picking the longest option got 39-46 %)."""
    routes = [q for questions in question_sets.values() for q in questions if q.task == "route"]
    assert routes
    for q in routes:
        turns = {o.count(", then ") for o in q.options}
        assert len(turns) == 1 and len(set(q.options)) == len(q.options), q.options
        assert len(q.options) == (3 if turns == {0} else 4)
    assert max(Counter(q.answer_text for q in routes if len(q.options) == 3).values()) <= 0.6 * len(routes)


# ----------------------------------------------------------------------------------------------------
# The best constant (eval/constant.py)


def _numeric(env: str, i: int, value: float, task: str = "abs_distance", unit: str = "m") -> dict:
    return {"id": f"{env}-seed1-scene_0000-{i:03d}", "task": task, "options": [], "solution": str(value),
            "unit": unit}  # fmt: skip


def test_a_record_s_environment_is_its_field_else_its_id_s_head() -> None:
    from embodied_r_training.eval.constant import record_environment

    assert record_environment({"id": "indoor/indoor-seed4001-scene_0000-000"}) == "indoor"  # joined sets
    assert record_environment({"id": "outdoor-seed4002-scene_0003-011"}) == "outdoor"  # one environment's
    assert record_environment({"id": "outdoor-seed1-x", "environment": "indoor"}) == "indoor"  # field first
    assert record_environment({"id": "scene0000_00-003"}) == "all"  # an imported video: not known
    assert record_environment({"id": "mission-seed7-5min-000"}) == "all" == record_environment({})


def test_the_constant_is_chosen_per_environment_where_pooling_fails() -> None:
    from embodied_r_training.eval.constant import constant_answers

    train = [_numeric("indoor", i, v) for i, v in enumerate((2.0, 3.0, 4.0))]
    train += [_numeric("outdoor", 10 + i, v) for i, v in enumerate((40.0, 50.0, 60.0))]
    test = [_numeric("indoor", 100, 3.0), _numeric("outdoor", 101, 50.0)]
    answers = constant_answers(test, train)
    # Per environment the mean (3 and 50, first of the tied mean and median) is exact on both.
    assert [(a.constant.environment, a.constant.statistic, a.constant.value, a.score) for a in answers] == [
        ("indoor", "mean", 3.0, 1.0), ("outdoor", "mean", 50.0, 1.0)
    ]  # fmt: skip
    # Pooled (ids that do not say the environment): mean 26.5 is near only 40 and 50 (0.4 + 0.1), median 22
    # only 40 (0.2); the mode (2.0, the smallest of the six once-seen values) scores (1 + 0.4 + 0.1) / 6
    # there, and on the test 0.4 (3 m is 33 % off) and 0 (50 m).
    pooled = constant_answers([{**r, "id": f"q{i}"} for i, r in enumerate(test)],
                              [{**r, "id": f"t{i}"} for i, r in enumerate(train)])  # fmt: skip
    chosen = pooled[0].constant
    assert (chosen.environment, chosen.statistic, chosen.value) == ("all", "mode", 2.0)
    assert chosen.score == pytest.approx(0.25)
    assert chosen.candidates["mean"] == {"value": 26.5, "score": pytest.approx(0.5 / 6)}
    assert chosen.candidates["median"] == {"value": 22.0, "score": pytest.approx(0.2 / 6)}
    assert [a.score for a in pooled] == [pytest.approx(0.4), 0.0]


def test_the_median_wins_on_skewed_solutions_and_the_mode_is_taken_as_options_show_values() -> None:
    from embodied_r_training.eval.constant import constant_answers, numeric_candidates

    values = (1.0, 1.9, 2.0, 2.1, 2.2, 9.0, 9.04)  # a long tail: the mean (3.89) is off for all
    train = [_numeric("indoor", i, v) for i, v in enumerate(values)]
    (answer,) = constant_answers([_numeric("indoor", 99, 2.0)], train)
    c = answer.constant
    assert c.statistic == "median" and c.value == 2.1 and c.n == 7
    # median 2.1: 1.9 is 10.5 % off (0.8), 2.0 and 2.2 within 5 % (1.0 each), 2.1 exact, the rest 0
    assert c.score == pytest.approx(3.8 / 7) and c.candidates["mean"]["score"] == 0.0
    assert c.candidates["mode"] == {"value": 9.0, "score": pytest.approx(2 / 7)}  # 9.0 and 9.04 show as 9.0
    assert answer.score == pytest.approx(1.0)  # 2.0 vs 2.1: 4.8 % off
    assert "the median, 2.1, of 7 indoor abs_distance solutions of the train split" == c.describe()
    assert numeric_candidates([12.4, 12.6, 13.4, 3.0], "m")["mode"] == 13.0  # whole metres above 10
    assert numeric_candidates([1.0, 2.0, 2.0, 7.0], "count") == {"mean": 3.0, "median": 2.0, "mode": 2.0}


def test_the_mode_rounds_as_the_options_are_written() -> None:
    from embodied_r_training.eval.constant import shown
    from embodied_r_training.tasks.amounts import shown_as

    for unit in ("m", "m^2", "count"):
        for value in (0.04, 0.25, 1.15, 3.333, 9.96, 10.5, 11.5, 47.49, 153.2, 2.0):
            assert shown(value, unit) == shown_as(unit)(value), (unit, value)


def test_multiple_choice_takes_the_most_frequent_letter_and_gaps_fall_back() -> None:
    from embodied_r_training.eval.constant import constant_answers, constants_used

    def mc(env: str, i: int, letter: str, task: str = "route") -> dict:
        return {"id": f"{env}-seed1-s-{i}", "task": task, "options": ["a", "b", "c", "d"], "solution": letter}

    train = [mc("indoor", i, x) for i, x in enumerate("BBCA")] + [mc("outdoor", 9, "D")]
    test = [mc("indoor", 20, "B"), mc("outdoor", 21, "B"), mc("x", 22, "C"), mc("indoor", 23, "C", "other")]
    test.append(mc("indoor", 24, "A", "other"))
    answers = constant_answers(test, train)
    assert [a.constant.value for a in answers] == ["B", "D", "B", "A", "A"]
    assert [a.score for a in answers] == [1.0, 0.0, 0.0, 0.0, 1.0]
    # "x-..." names no environment: all environments' training letters (B twice of five)
    assert answers[2].constant.environment == "all" and answers[2].constant.score == pytest.approx(0.4)
    # a task the training split lacks: chosen on the scored records themselves (A and C once: A), said so
    assert answers[3].constant.chosen_on.startswith("scored split (flattering")
    used = constants_used(answers)
    assert set(used["route"]["mc"]) == {"indoor", "outdoor", "all"}
    assert used["route"]["mc"]["indoor"]["n"] == 4 and used["route"]["mc"]["indoor"]["value"] == "B"
    assert constant_answers(test[:1], None)[0].constant.chosen_on.startswith("scored split")
