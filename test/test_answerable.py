"""The yardstick end to end: `embodied-r synth` keeps only questions that the oracle answers from the prompt
`embodied-r prepare --perceiver ground_truth` builds (the bag read back), counts what it drops, and gives
ids that no other seed or environment repeats."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from embodied_r_training.synth.answerable import AnswerableScreen, is_correct
from embodied_r_training.synth.questions import generate_questions
from embodied_r_training.synth.trajectory import plan_trajectory
from embodied_r_training.synth.visibility import Visibility
from embodied_r_training.synth.world import generate_world
from embodied_r_training.tasks.oracle import oracle_answer, oracle_trace, question_task
from embodied_r_training.tasks.registry import TASK_NAMES as TASKS
from embodied_r_training.tasks.scene import QuestionConfig

from embodied_r_ros.cli.main import main
from embodied_r_ros.config import KeyFrameConfig
from embodied_r_ros.question_file import MC, Question, read_questions
from embodied_r_ros.reasoning.answers import mean_relative_accuracy

SMALL = ["--size", "160x120", "--rate", "5", "--duration", "16", "--max-keyframes", "8"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Indoor and outdoor scenes of seed 3 and indoor scenes of seed 4, synthesised and prepared."""
    root = tmp_path_factory.mktemp("yardstick")
    sets = {"indoor3": ["--seed", "3"], "outdoor3": ["--seed", "3", "--outdoor"], "indoor4": ["--seed", "4"]}
    for name, args in sets.items():
        synth, data = root / name / "synth", root / name / "data"
        assert main(["synth", "--out", str(synth), "--scenes", "2", *SMALL, *args]) == 0
        prepare = ["prepare", str(synth / "questions.jsonl"), "--out", str(data), "--no-progress"]
        assert main([*prepare, "--perceiver", "ground_truth", "--max-keyframes", "8"]) == 0
    return {name: root / name for name in sets}


def records(directory: Path) -> list[dict]:
    return [
        json.loads(line)
        for split in ("train", "val", "test")
        for line in (directory / "data" / f"{split}.jsonl").read_text().splitlines()
        if line.strip()
    ]


def test_the_oracle_answers_every_prepared_question_from_its_prompt(prepared: dict[str, Path]) -> None:
    scores: dict[str, list[float]] = defaultdict(list)
    for directory in prepared.values():
        for record in records(directory):
            prompt = record["prompt"][1]["content"]
            answer = oracle_answer(prompt)
            if record["form"] == MC:
                scores[record["task"]].append(float(answer == record["solution"]))
            else:
                scores[record["task"]].append(mean_relative_accuracy(answer, float(record["solution"])))
            assert question_task(record["question"]) == record["task"]
    assert {"appearance_order", "relative_direction", "abs_distance", "object_size", "ego_distance"} <= set(
        scores
    ), scores.keys()
    for task, values in scores.items():
        assert np.mean(values) >= 0.95, (task, values)


# sha256 of what the `prepared` sets hold: the questions and scenes synth wrote (questions.jsonl,
# scene.json, generation.json) and the oracle's reasoning and answer for every prepared prompt. Kept training
# results are keyed by these bytes (their data, and their SFT targets: the oracle's traces), so a change that
# alters them must do it on purpose: it updates these digests and says why (kept results are recomputed).
# Traces changed on purpose for issue 42: values copied first, one step a line, the letter last; then the
# option lookup a line per option and relative_distance's gaps and squared sums (the SFT reasoner copied
# the letter of another option's line, and a whole 3-D distance in one step was beyond it); then turns and
# altitude changes summed per side, and relative_direction one product a line (its signs slipped).
SYNTH_DIGEST = "1b2579fb2375dd973b16e8cf03518df82fa55539024142d6b1e30e8f6d6bc9d8"
TRACES_DIGEST = "d4495d79aef7098e6da0398632c685b2f52d1111a518771e45cdf87dd459157e"


def test_synth_output_and_oracle_traces_stay_the_same(prepared: dict[str, Path]) -> None:
    synth, traces = hashlib.sha256(), hashlib.sha256()
    for directory in prepared.values():
        for path in sorted((directory / "synth").rglob("*")):
            if path.name in ("questions.jsonl", "scene.json", "generation.json"):
                synth.update(f"{path.relative_to(directory.parent)}\0".encode() + path.read_bytes())
        for record in sorted(records(directory), key=lambda r: r["id"]):
            trace = oracle_trace(record["prompt"][1]["content"])
            traces.update((json.dumps([record["id"], trace], ensure_ascii=False) + "\n").encode())
    assert synth.hexdigest() == SYNTH_DIGEST, f"what synth writes changed: now {synth.hexdigest()}"
    assert traces.hexdigest() == TRACES_DIGEST, f"the oracle's traces changed: now {traces.hexdigest()}"


def test_the_generator_screens_the_prompts_prepare_builds(prepared: dict[str, Path]) -> None:
    # The key frames the generator read back from the bag (JPEG or raw, 1 fps candidates, the core's
    # rule) are prepare's: the same stamps, and the same prompt, question by question.
    for directory in prepared.values():
        by_id = {r["id"]: r for r in records(directory)}
        for scene in sorted((directory / "synth").glob("scene_*")):
            questions = read_questions(scene / "questions.jsonl")
            screen = AnswerableScreen(scene / "bag", scene / "scene.json", KeyFrameConfig(max_keyframes=8))
            screen.prepare(sorted({(q.start_ns, q.end_ns) for q in questions}))
            for question in questions:
                record = by_id[question.id]
                assert screen.prompt(question) == record["prompt"][1]["content"], question.id
                found = screen._found[(question.start_ns, question.end_ns)]
                assert [k.frame.stamp_ns for k in found] == record["keyframe_stamps_ns"]
                assert len(found) >= 2 or question.task not in ("ego_distance", "ego_turn", "route")


def test_generation_report_counts_kept_and_dropped_questions(prepared: dict[str, Path]) -> None:
    for name, directory in prepared.items():
        report = json.loads((directory / "synth" / "generation.json").read_text())
        questions = read_questions(directory / "synth" / "questions.jsonl")
        kept = Counter(q.task for q in questions)
        assert report["environment"] == name.rstrip("34") and report["keyframes"]["max_keyframes"] == 8
        assert report["kept"] == len(questions) and report["dropped"] >= 0
        for task, counts in report["tasks"].items():
            assert counts["kept"] == kept[task], task
            assert counts["dropped"] == counts["no_answer"] + counts["wrong"]
        assert report["dropped"] == sum(c["dropped"] for c in report["tasks"].values())


def test_ids_are_unique_across_seeds_and_environments(prepared: dict[str, Path]) -> None:
    ids = {
        name: {q.id for q in read_questions(d / "synth" / "questions.jsonl")} for name, d in prepared.items()
    }
    assert all(ids.values())
    assert not ids["indoor3"] & ids["outdoor3"] and not ids["indoor3"] & ids["indoor4"]
    assert all(i.startswith("indoor-seed3-scene_000") for i in ids["indoor3"])
    assert all(i.startswith("outdoor-seed3-scene_000") for i in ids["outdoor3"])


class RefuseTask:
    """A screen that refuses every question of one task and accepts the others (it sees them all)."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.windows: list[tuple[int, int]] = []
        self.seen: Counter[str] = Counter()

    def prepare(self, windows_ns: list[tuple[int, int]]) -> None:
        self.windows = list(windows_ns)

    def accept(self, question: Question) -> bool:
        assert (question.start_ns, question.end_ns) in self.windows
        self.seen[question.task] += 1
        return question.task != self.task


def test_refused_questions_are_replaced_by_the_next_candidates() -> None:
    rng = np.random.default_rng(5)
    world = generate_world(rng)
    trajectory = plan_trajectory(world, 20.0, rng)
    times = np.round(np.arange(0, 201) / 10.0, 3)
    pixels = np.zeros((len(times), len(world.objects) + 1), np.int32)
    for k, first in enumerate(rng.uniform(0, 18, len(world.objects))):
        pixels[times >= first, k + 1] = 1000
    visibility = Visibility(times, pixels, 20000)

    def generate(screen: RefuseTask | None) -> list[Question]:
        return generate_questions(
            world, trajectory, visibility, np.random.default_rng(9), config=QuestionConfig(), screen=screen
        )

    screen = RefuseTask("object_size")
    questions = generate(screen)
    assert not [q for q in questions if q.task == "object_size"]
    assert screen.seen["object_size"] >= 4  # every candidate was tried
    # The other tasks keep their quota; ids still run 000.. in order.
    kept = Counter(q.task for q in questions)
    assert kept["abs_distance"] == 4 and kept["relative_direction"] == 2
    assert [q.id for q in questions] == [f"scene-{i:03d}" for i in range(len(questions))]
    assert set(kept) < set(TASKS)
    assert all(question_task(q.question) == q.task for q in generate(None))  # the oracle knows every template


def test_correct_answers_by_form() -> None:
    mc = Question("q", ("1.0 m", "2.0 m"), "B", task="abs_distance", form=MC)
    assert is_correct(mc, "B") and not is_correct(mc, "A") and not is_correct(mc, None)
    count = Question("q", (), 3, unit="count", form="numeric")
    assert is_correct(count, 3) and not is_correct(count, 3.1)
    metres = Question("q", (), 2.0, unit="m", form="numeric")
    assert is_correct(metres, 2.09) and not is_correct(metres, 2.2)  # within 5 %: full marks under MRA


def test_eval_scores_the_oracle_and_the_blind_options_reader(prepared: dict[str, Path], tmp_path: Path):
    """`embodied-r eval --system oracle` reads only each record's prompt and reaches what the prompt allows;
    `--system options-only` reads only the options, so it cannot."""
    data = prepared["indoor3"] / "data"
    split = next(s for s in ("test", "val", "train") if (data / f"{s}.jsonl").read_text().strip())
    scores = {}
    for system in ("oracle", "options-only", "chance"):
        out = tmp_path / system
        assert main(["eval", str(data), "--system", system, "--split", split, "--out", str(out)]) == 0
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["system"] == system and metrics["models"]["lm"] == ""
        scores[system] = metrics["overall"]
        predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
        assert len(predictions) == len((data / f"{split}.jsonl").read_text().splitlines())
        if system == "oracle":  # a reasoning, then the answer: the trace a reasoner could be taught
            assert all(p["format"] and p["completion"].startswith("<think>") for p in predictions)
    assert scores["oracle"]["mc_accuracy"] == 1.0 and scores["oracle"]["numeric_mra"] >= 0.95
    assert 0.0 <= scores["options-only"]["mc_accuracy"] < scores["oracle"]["mc_accuracy"]
    # Numeric questions have no options: the blind reader scores them as chance does.
    assert scores["options-only"]["numeric_mra"] == scores["chance"]["numeric_mra"]


def test_oracle_traces_teach_reasoning_that_ends_in_the_right_answer(prepared: dict[str, Path]) -> None:
    from embodied_r_training.rl.warm_start import trace_completion

    from embodied_r_ros.reasoning.answers import parse_completion

    rows = records(prepared["indoor3"])
    completions = [trace_completion(row) for row in rows]
    assert all(c is not None for c in completions)  # the generator kept only what the oracle answers
    for row, completion in zip(rows, completions, strict=True):
        parsed = parse_completion(completion)
        # The reasoning cites the evidence: a number read from the descriptions, or an option it checked.
        cites = re.search(r"\d", parsed.think) or any(o in parsed.think for o in row["options"])
        assert parsed.well_formed and len(parsed.think.split()) >= 5 and cites, completion
        if row["options"]:
            assert parsed.answer == row["solution"]
    wrong = {**rows[0], "solution": "Z" if rows[0]["options"] else "1e6"}
    assert trace_completion(wrong) is None  # a trace that reaches another answer is not taught


def test_sft_on_oracle_traces_trains_a_lora_adapter_and_resumes(
    prepared: dict[str, Path], tiny_models_dir: Path, tmp_path: Path
) -> None:
    from embodied_r_training.rl.outputs import NODE_PARAMS
    from embodied_r_training.rl.train import train
    from embodied_r_training.rl.train_config import build_train_config

    config = {
        "model": str(tiny_models_dir / "lm"),
        "output_dir": str(tmp_path / "sft"),
        "method": "sft",
        "data": {"path": str(prepared["indoor3"] / "data"), "limit": 4},
        "warm_start": {"steps": 2, "batch_size": 2, "learning_rate": 1e-3, "answers": "trace", "lora": True,
                       "save_steps": 1},  # fmt: skip
        "lora": {"enabled": True, "r": 4, "alpha": 8},
        "grpo": {"use_cpu": True, "bf16": False},
    }
    result = train(build_train_config(config))
    assert (result.final_dir / "adapter_config.json").is_file()
    assert not (result.final_dir / "model.safetensors").is_file()  # the adapter only: a few MB to keep
    assert sorted(p.name for p in (tmp_path / "sft" / "final" / "run").glob("checkpoint-*")) == [
        "checkpoint-1", "checkpoint-2",
    ]  # fmt: skip
    params = (result.final_dir / NODE_PARAMS).read_text()
    assert str(tiny_models_dir / "lm") in params and str(result.final_dir) in params
