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
