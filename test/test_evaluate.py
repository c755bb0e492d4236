"""embodied-r eval: the reasoner, the untrained LM and the VLM alone on a tiny prepared data set (real
synthetic bags, tiny real models), the scoring against hand-written completions, plots and bad input."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from embodied_r_training.data.bag_reader import BagReader
from embodied_r_training.eval.evaluate import (
    _keyframe_images,
    check_consistency,
    grade_records,
    metrics_markdown,
    summarize,
    vlm_alone_request,
)
from embodied_r_training.eval.plots import load_log_history, plot_training_curves, reward_keys
from embodied_r_training.rl.rewards import ConsistencyReward
from embodied_r_training.synth.generate import SynthConfig, synthesize
from fake_openai import FixedReplyServer
from synth_helpers import decode_image, read_bag, stamp_ns

from embodied_r_ros.backends.adapter_off import AdapterOff
from embodied_r_ros.backends.base import ChatMessage
from embodied_r_ros.cli.main import main
from embodied_r_ros.config import ConfigError, model_config

PNG = b"\x89PNG\r\n\x1a\n"
FAST = ["--device", "cpu", "--max-new-tokens", "12", "--batch-size", "8", "--no-progress"]


@pytest.fixture(scope="module")
def dataset(tiny_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two synthetic scenes (160x120, 6 s) prepared with the tiny VLM: one scene train, one test."""
    root = tmp_path_factory.mktemp("eval_data")
    synthesize(
        SynthConfig(out=root / "world", scenes=2, width=160, height=120, duration_s=6.0, questions_per_task=1)
    )
    args = ["prepare", str(root / "world" / "questions.jsonl"), "--out", str(root / "ds"), "--cache"]
    args += [str(root / "cache"), "--vlm", str(tiny_models_dir / "vlm"), "--split", "0.5,0,0.5"]
    assert (
        main([*args, "--device", "cpu", "--max-new-tokens", "4", "--batch-size", "64", "--no-progress"]) == 0
    )
    return root / "ds"


@pytest.fixture(scope="module")
def adapter(tiny_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter on the tiny LM with random (non-zero) weights, so it changes the model's output."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    path = tmp_path_factory.mktemp("adapter")
    torch.manual_seed(0)  # the same adapter every run: what the tests see does not depend on the draw
    model = AutoModelForCausalLM.from_pretrained(tiny_models_dir / "lm")
    config = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(path)
    return path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _check_outputs(out: Path, records: list[dict]) -> dict:
    """Every output file is there and consistent with the records evaluated; returns the metrics."""
    metrics = json.loads((out / "metrics.json").read_text())
    predictions = _records(out / "predictions.jsonl")
    assert [p["id"] for p in predictions] == [r["id"] for r in records]
    assert metrics["overall"]["n"] == len(records)
    assert set(metrics["tasks"]) == {r["task"] for r in records}
    assert sum(s["n"] for forms in metrics["tasks"].values() for s in forms.values()) == len(records)
    for s in [metrics["overall"], *(s for forms in metrics["tasks"].values() for s in forms.values())]:
        for key in ("score", "format_rate"):
            assert 0.0 <= s[key] <= 1.0
        assert s["consistency_rate"] is None or 0.0 <= s["consistency_rate"] <= 1.0
        assert s["mean_length"] > 0
    for p in predictions:
        assert 0.0 <= p["score"] <= 1.0 and isinstance(p["completion"], str)
    markdown = (out / "metrics.md").read_text()
    assert all(f"| {task} |" in markdown for task in metrics["tasks"])
    assert (out / "per_task.png").read_bytes().startswith(PNG)
    return metrics


def _trainer_state(directory: Path, steps: int = 4) -> Path:
    """A trainer_state.json with the keys TRL 1.16's GRPOTrainer and our reward log."""
    history = [
        {
            "step": s, "loss": 0.1, "reward": 0.1 * s, "reward_std": 0.05,
            "rewards/total/mean": 0.1 * s, "rewards/total/std": 0.1,
            "rewards/format/mean": 0.2 * s, "rewards/accuracy/mean": 0.0, "weight/format": 0.7,
            "completions/mean_length": 200 - 20 * s, "completions/min_length": 100 - 10 * s,
            "completions/max_length": 300 - 20 * s, "completions/mean_terminated_length": 150.0,
        }
        for s in range(1, steps + 1)
    ]  # fmt: skip
    history.append({"step": steps, "eval_reward": 0.3, "eval_completions/mean_length": 120.0})
    history.append({"step": steps, "train_runtime": 12.0, "train_loss": 0.1})
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "trainer_state.json").write_text(json.dumps({"global_step": steps, "log_history": history}))
    return directory


def test_reasoner_with_adapter_and_training_curves(dataset, tiny_models_dir, adapter, tmp_path) -> None:
    out = tmp_path / "out"
    train_dir = tmp_path / "run"
    _trainer_state(train_dir / "checkpoint-4")
    lm = str(tiny_models_dir / "lm")
    args = ["eval", str(dataset), "--lm", lm, "--adapter", str(adapter), "--out", str(out)]
    assert main([*args, "--train-log", str(train_dir), *FAST]) == 0
    metrics = _check_outputs(out, _records(dataset / "test.jsonl"))
    assert metrics["system"] == "reasoner" and metrics["models"]["adapter"] == str(adapter)
    assert "adapter disabled" in metrics["models"]["reference"]
    assert metrics["length_unit"] == "tokens" and metrics["overall"]["mean_length"] <= 12
    assert metrics["generation"]["temperature"] == 0.0 and metrics["generation"]["max_new_tokens"] == 12
    for name in ("rewards.png", "length.png"):
        assert (out / name).read_bytes().startswith(PNG)


def test_untrained_baseline_refuses_an_adapter_and_runs_without(dataset, tiny_models_dir, capsys, tmp_path):
    lm = str(tiny_models_dir / "lm")
    out = tmp_path / "out"
    base = ["eval", str(dataset), "--system", "untrained", "--lm", lm, "--out", str(out), *FAST]
    assert main([*base, "--adapter", "some/adapter"]) == 2
    assert "--adapter some/adapter" in capsys.readouterr().err
    assert main([*base, "--limit", "3", "--no-consistency"]) == 0
    metrics = _check_outputs(out, _records(dataset / "test.jsonl")[:3])
    assert metrics["system"] == "untrained" and metrics["consistency"] == "off"
    assert metrics["overall"]["consistency_checked"] == 0 and not metrics["models"]["adapter"]
    from embodied_r_training.eval.lenient import lenient_summary

    completions = [p["completion"] for p in _records(out / "predictions.jsonl")]
    assert metrics["lenient"] == lenient_summary(_records(dataset / "test.jsonl")[:3], completions)
    assert metrics["lenient"]["n_mc"] + metrics["lenient"]["n_numeric"] == 3


def test_question_only_leaves_the_descriptions_out(dataset, tiny_models_dir, tmp_path) -> None:
    from embodied_r_training.eval.evaluate import _question_only_requests

    records = _records(dataset / "test.jsonl")
    (_, request), *_ = _question_only_requests(records)
    user = request[-1].joined_text
    assert records[0]["question"] in user and "Frame 0" not in user and "Frame 0" in str(records[0]["prompt"])
    out = tmp_path / "blind"
    args = ["eval", str(dataset), "--system", "question-only", "--lm", str(tiny_models_dir / "lm")]
    assert main([*args, "--out", str(out), "--no-consistency", *FAST]) == 0
    metrics = _check_outputs(out, records)
    assert metrics["system"] == "question-only" and "without the descriptions" in metrics["label"]


def test_vlm_alone_answers_from_the_key_frames(dataset, tiny_models_dir, tmp_path) -> None:
    out = tmp_path / "out"
    args = ["eval", str(dataset), "--system", "vlm", "--vlm", str(tiny_models_dir / "vlm")]
    assert main([*args, "--lm", str(tiny_models_dir / "lm"), "--limit", "4", "--out", str(out), *FAST]) == 0
    metrics = _check_outputs(out, _records(dataset / "test.jsonl")[:4])
    assert metrics["system"] == "vlm" and metrics["models"]["vlm"] == str(tiny_models_dir / "vlm")
    assert metrics["vlm_alone_prompt_version"] and metrics["skipped"] == []


def test_vlm_request_holds_the_records_key_frames_from_the_bag(dataset) -> None:
    record = _records(dataset / "test.jsonl")[0]
    with BagReader(record["bag"]) as reader:
        images = _keyframe_images(reader, record)
    raw = {
        stamp_ns(m): decode_image(m) for _, m in read_bag(Path(record["bag"])).messages["/camera/image_raw"]
    }
    assert len(images) == len(record["keyframe_stamps_ns"]) >= 2
    for image, stamp in zip(images, record["keyframe_stamps_ns"], strict=True):
        assert np.array_equal(image, raw[stamp])
    request = vlm_alone_request(images, record["question"], record["options"])
    user = request[1]
    assert len(user.images) == len(images) and "<answer>" in request[0].joined_text
    assert record["question"] in user.joined_text and "Frame 1:" in user.joined_text


def test_unreadable_bags_are_skipped_and_missing_bags_fail(
    dataset, tiny_models_dir, tmp_path, capsys
) -> None:
    """Records read their bags under --bag-root; a truncated bag's records are skipped, reported, rc 1."""
    test, train = _records(dataset / "test.jsonl")[:2], _records(dataset / "train.jsonl")[:2]
    root = tmp_path / "bags"
    for record in test + train:
        if not (root / record["scene"]).exists():
            shutil.copytree(record["bag"], root / record["scene"])
    mcap = next((root / train[0]["scene"]).glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    moved = tmp_path / "ds"
    moved.mkdir()
    records = [{**r, "bag": f"/nowhere/{r['scene']}"} for r in test + train]
    (moved / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    args = ["eval", str(moved), "--system", "vlm", "--vlm", str(tiny_models_dir / "vlm"), "--no-consistency"]
    assert main([*args, "--out", str(tmp_path / "out"), *FAST]) == 2
    err = capsys.readouterr().err
    assert f"/nowhere/{test[0]['scene']}" in err and "--bag-root" in err
    assert main([*args, "--out", str(tmp_path / "out"), "--bag-root", str(root), *FAST]) == 1
    err = capsys.readouterr().err
    assert all(f"SKIPPED {r['id']}" in err for r in train) and "2 of 4 record(s) skipped" in err
    metrics = _check_outputs(tmp_path / "out", test)
    assert sorted(s["id"] for s in metrics["skipped"]) == sorted(r["id"] for r in train)


def test_missing_split_and_columns_are_named(dataset, tmp_path, capsys) -> None:
    assert main(["eval", str(dataset), "--split", "val", "--lm", "x", "--out", str(tmp_path)]) == 2
    assert "val.jsonl holds no records" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "none"), "--lm", "x"]) == 2
    err = capsys.readouterr().err
    assert "has no split 'test'" in err and "embodied-r prepare" in err
    record = {k: v for k, v in _records(dataset / "test.jsonl")[0].items() if k != "prompt"}
    (tmp_path / "test.jsonl").write_text(json.dumps(record) + "\n")
    assert main(["eval", str(tmp_path), "--lm", "x", "--out", str(tmp_path / "o")]) == 2
    assert "lacks column(s) prompt" in capsys.readouterr().err
    assert main(["eval", str(tmp_path), "--system", "vlm", "--out", str(tmp_path / "o")]) == 2
    assert "--system vlm needs --vlm" in capsys.readouterr().err


REPLY_B = "<think>The lamp is on my right, so B.</think><answer>B</answer>"


def test_served_lm_is_scored_with_the_consistency_check(dataset, tmp_path) -> None:
    """--lm-backend openai: lengths in characters; the correct answers go to the reference (the same
    served LM), which reads the reasoning and agrees."""
    with FixedReplyServer(REPLY_B) as server:
        args = ["eval", str(dataset), "--lm", "served-3b", "--lm-backend", "openai", "--base-url", server.url]
        assert main([*args, "--out", str(tmp_path), "--no-progress"]) == 0
    records = _records(dataset / "test.jsonl")
    metrics = _check_outputs(tmp_path, records)
    right = [r for r in records if r["options"] and r["solution"] == "B"]
    assert right, "the test split should hold a question whose answer is B"
    overall = metrics["overall"]
    assert overall["format_rate"] == 1.0 and overall["consistency_rate"] == 1.0
    assert overall["consistency_checked"] == len(right) and server.received == len(records) + len(right)
    assert overall["mc_accuracy"] == pytest.approx(len(right) / sum(1 for r in records if r["options"]))
    assert metrics["length_unit"] == "characters"
    assert overall["mean_length"] == len(REPLY_B)


class _ScriptedReference:
    """A reference backend with hand-written replies (this scoring test only); records its calls."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.calls: list[list] = []

    def generate(self, requests, *, max_new_tokens=None, temperature=None) -> list[str]:
        self.calls.append(list(requests))
        return self.replies[: len(requests)]


def _row(task: str, solution: str, options: list[str]) -> dict:
    return {
        "id": f"{task}-{solution}",
        "task": task,
        "solution": solution,
        "options": options,
        "question": "Q?",
    }


def test_scores_of_hand_written_completions() -> None:
    options = ["front-left", "front-right", "back-left", "back-right"]
    records = [
        _row("relative_direction", "B", options),
        _row("relative_direction", "B", options),
        _row("relative_direction", "C", options),
        _row("abs_distance", "2.5", []),
        _row("abs_distance", "3", []),
    ]
    completions = [
        "<think>The lamp is ahead-right.</think><answer>B</answer>",  # right, well formed
        "<think>Option B is wrong.</think><answer>C</answer>",  # letter B only in think: wrong
        "C",  # right letter but no tags: not read, not well formed
        # Reasoning, not a restatement of the answer ("About two metres." would be hidden, issue 42).
        "<think>I walked 1.2 m, then 0.8 m.</think><answer>2.0 m</answer>",  # error 20 %: MRA 0.7
        "<think>Chairs: frames 1, 4, 6.</think><answer>3</answer> trailing",  # exact, text after </answer>
    ]
    predictions = grade_records(records, completions)
    assert [p.score for p in predictions] == [1.0, 0.0, 0.0, pytest.approx(0.7), 1.0]
    assert [p.format for p in predictions] == [True, True, False, True, False]
    assert [p.answer for p in predictions] == ["B", "C", None, 2.0, 3.0]
    assert [p.checkable for p in predictions] == [True, False, False, True, True]
    reference = _ScriptedReference(["B", "2 m", "<answer>5</answer>"])
    calls = check_consistency(predictions, records, ConsistencyReward(reference), batch_size=8)
    assert calls == 1 and len(reference.calls) == 1 and len(reference.calls[0]) == 3
    user = reference.calls[0][0][1].joined_text
    assert "The lamp is ahead-right." in user and "B. front-right" in user
    assert [p.consistency for p in predictions] == [1.0, None, None, 1.0, 0.0]
    metrics = summarize(predictions, system="test", length_unit="characters")
    direction, distance = (
        metrics["tasks"]["relative_direction"]["mc"],
        metrics["tasks"]["abs_distance"]["numeric"],
    )
    assert (
        direction["n"] == 3
        and direction["score"] == pytest.approx(1 / 3)
        and direction["metric"] == "accuracy"
    )
    assert direction["format_rate"] == pytest.approx(2 / 3) and direction["consistency_rate"] == 1.0
    assert distance["score"] == pytest.approx(0.85) and distance["metric"] == "mra"
    assert distance["consistency_rate"] == 0.5 and distance["consistency_checked"] == 2
    overall = metrics["overall"]
    assert overall["score"] == pytest.approx(2.7 / 5) and overall["task_mean"] == pytest.approx(
        (1 / 3 + 0.85) / 2
    )
    assert overall["mc_accuracy"] == pytest.approx(1 / 3) and overall["numeric_mra"] == pytest.approx(0.85)
    assert overall["format_rate"] == pytest.approx(0.6) and overall["consistency_rate"] == pytest.approx(
        2 / 3
    )
    assert overall["mean_length"] == pytest.approx(sum(map(len, completions)) / 5)
    assert "| relative_direction | mc | accuracy | 3 | 0.333 | 0.667 | 1.000 (1) |" in metrics_markdown(
        metrics
    )


def test_eval_checks_consistency_where_the_reward_would() -> None:
    """A right answer with empty reasoning is not checked, in training (the reward) or in eval."""
    records = [_row("route", "A", ["left", "right"])] * 2
    completions = ["<think> </think><answer>A</answer>", "<think>I turned left.</think><answer>A</answer>"]
    predictions = grade_records(records, completions)
    assert [p.checkable for p in predictions] == [False, True]
    reference = _ScriptedReference(["A"])
    assert check_consistency(predictions, records, ConsistencyReward(reference)) == 1
    assert [p.consistency for p in predictions] == [None, 1.0]


def test_no_reference_call_when_nothing_is_correct() -> None:
    records = [_row("route", "A", ["left", "right"])]
    predictions = grade_records(records, ["<think>x</think><answer>B</answer>"])
    reference = _ScriptedReference([])
    assert check_consistency(predictions, records, ConsistencyReward(reference)) == 0 and not reference.calls
    assert summarize(predictions)["overall"]["consistency_rate"] is None


def test_adapter_off_reference_is_the_base_model(tiny_models_dir, adapter) -> None:
    from embodied_r_ros.backends import load_backend

    config = model_config(str(tiny_models_dir / "lm"), device="cpu", max_new_tokens=8)
    request = [[ChatMessage.text("user", "Is the chair left or right of the lamp?")]]
    base = load_backend(config, vision=False)
    tuned = load_backend(config.with_adapter(str(adapter)), vision=False)
    try:
        assert not np.allclose(base.first_step_logits(request), tuned.first_step_logits(request), atol=1e-4)
        assert AdapterOff(tuned).generate(request) == base.generate(request)
    finally:
        base.close()
        tuned.close()


def test_training_curves_from_a_log_history(tmp_path) -> None:
    log = load_log_history(_trainer_state(tmp_path / "state"))
    assert reward_keys(log) == [  # the total and every reward by name (weights are not rewards)
        "reward", "rewards/total/mean", "rewards/format/mean", "rewards/accuracy/mean", "eval_reward"
    ]  # fmt: skip
    written = plot_training_curves(log, tmp_path / "plots")
    assert [p.name for p in written] == ["rewards.png", "length.png"]
    for path in written:
        data = path.read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
    assert plot_training_curves([{"step": 1, "loss": 0.5, "reward": math.nan}], tmp_path / "none") == []


def test_log_history_is_found_in_the_newest_checkpoint(tmp_path) -> None:
    _trainer_state(tmp_path / "run" / "checkpoint-2", steps=2)
    _trainer_state(tmp_path / "run" / "checkpoint-10", steps=10)
    assert max(e["step"] for e in load_log_history(tmp_path / "run")) == 10  # numeric, not by name
    with pytest.raises(ConfigError, match="no trainer_state.json"):
        load_log_history(tmp_path)
    (tmp_path / "bad.json").write_text('{"global_step": 3}')
    with pytest.raises(ConfigError, match="no log_history"):
        load_log_history(tmp_path / "bad.json")


def test_constant_program_chooses_on_the_train_split_and_programs_count_tokens_of_a_local_lm(
    dataset, tiny_models_dir, tmp_path, caplog
) -> None:
    records = _records(dataset / "test.jsonl")
    out = tmp_path / "constant"
    args = [
        "eval",
        str(dataset),
        "--system",
        "constant",
        "--lm",
        str(tiny_models_dir / "lm"),
        "--out",
        str(out),
    ]
    assert main([*args, "--no-progress"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    predictions = _records(out / "predictions.jsonl")
    train = _records(dataset / "train.jsonl")
    assert metrics["system"] == "constant" and metrics["overall"]["n"] == len(records)
    for p, record in zip(predictions, records, strict=True):
        chosen = metrics["constants"][record["task"]][p["form"]]["indoor"]  # synth's default environment
        assert p["answer"] == chosen["value"] and chosen["statistic"] in p["rule"]
        if any(r["task"] == record["task"] and bool(r["options"]) == bool(record["options"]) for r in train):
            assert chosen["chosen_on"] == "train split"
    assert metrics["length_unit"] == "tokens" and metrics["overall"]["mean_length"] == 0
    assert "| constant of task | form | environment |" in (out / "metrics.md").read_text()

    oracle = tmp_path / "oracle"
    base = ["eval", str(dataset), "--system", "oracle", "--no-progress"]
    assert main([*base, "--lm", str(tiny_models_dir / "lm"), "--out", str(oracle)]) == 0
    in_tokens = json.loads((oracle / "metrics.json").read_text())
    assert main([*base, "--out", str(tmp_path / "chars")]) == 0  # the default --lm: no local tokenizer
    in_characters = json.loads((tmp_path / "chars" / "metrics.json").read_text())
    assert in_tokens["length_unit"] == "tokens" and in_characters["length_unit"] == "characters"
    from embodied_r_training.eval.evaluate import EvalConfig, program_lengths

    config = EvalConfig(dataset, tmp_path, lm=model_config(str(tiny_models_dir / "lm")))
    text = "<think>The lamp is on my right.</think><answer>B</answer>"
    lengths, unit = program_lengths(config, [text, ""])
    assert unit == "tokens" and 0 < lengths[0] < len(text) and lengths[1] == 0
    assert program_lengths(EvalConfig(dataset, tmp_path), [text, ""]) == ([len(text), 0], "characters")


def test_a_lenient_reading_needs_no_answer_tags() -> None:
    from embodied_r_training.eval.lenient import lenient_choice, lenient_number, lenient_summary

    options = ["left", "right", "behind", "ahead"]
    assert lenient_choice("I think A is wrong; it is C. So the answer is B", options) == "B"  # the last one
    assert lenient_choice("B, or maybe A chair", options) == "B"  # "A chair" reads as English
    assert lenient_choice("<think>B</think><answer>D</answer> A", options) == "D"  # the tags first
    assert lenient_choice("It is E, or F", options) is None  # no such option
    assert lenient_number("Frame 3 is 2 m away; so about 250 cm") == pytest.approx(2.5)
    assert lenient_number("<think>4</think><answer>3 m</answer> 9") == 3.0
    assert lenient_number("no idea") is None
    records = [_row("route", "B", options), _row("route", "C", options), _row("abs_distance", "2.0", [])]
    summary = lenient_summary(records, ["so B", "<answer>A</answer>", "about 2 m"])
    assert summary == {"mc": 0.5, "numeric": 1.0, "n_mc": 2, "n_numeric": 1}
    predictions = grade_records(records, ["so B", "<answer>A</answer>", "about 2 m"])
    assert [p.score for p in predictions] == [0.0, 0.0, 0.0]  # the scores still read the tags only


def test_an_interrupted_model_row_resumes_with_what_it_had_generated(
    dataset, tiny_models_dir, tmp_path, monkeypatch
) -> None:
    import embodied_r_training.eval.evaluate as evaluate
    from embodied_r_training.eval.partial import PARTIAL_FILE

    generate, asked = evaluate._generate, []

    def counted(backend, requests):
        asked.append(len(requests))
        if fail_at is not None and len(asked) == fail_at:
            raise KeyboardInterrupt  # as a session's end cuts a run off
        return generate(backend, requests)

    monkeypatch.setattr(evaluate, "_generate", counted)
    base = ["eval", str(dataset), "--system", "untrained", "--lm", str(tiny_models_dir / "lm")]
    base.append("--no-consistency")
    flags = ["--device", "cpu", "--max-new-tokens", "12", "--batch-size", "2", "--no-progress"]
    records = _records(dataset / "test.jsonl")
    assert len(records) > 2
    fail_at = None
    assert main([*base, "--out", str(tmp_path / "whole"), *flags]) == 0
    whole = (tmp_path / "whole" / "predictions.jsonl").read_text()
    assert not (tmp_path / "whole" / PARTIAL_FILE).exists()  # a finished run leaves no partial file

    asked.clear()
    fail_at = 2  # the first batch of 2 is generated and kept, the second is cut off
    assert main([*base, "--out", str(tmp_path / "cut"), *flags]) == 130  # the CLI's exit on Ctrl-C
    assert (tmp_path / "cut" / PARTIAL_FILE).is_file()
    asked.clear()
    fail_at = None
    assert main([*base, "--out", str(tmp_path / "cut"), *flags]) == 0
    assert sum(asked) == len(records) - 2  # only what was missing
    assert (tmp_path / "cut" / "predictions.jsonl").read_text() == whole

    # Another evaluation into the same folder (another completion limit) does not take those completions.
    asked.clear()
    fail_at = 2
    assert main([*base, "--out", str(tmp_path / "other"), *flags]) == 130
    asked.clear()
    fail_at = None
    longer = [f if f != "12" else "13" for f in flags]
    assert main([*base, "--out", str(tmp_path / "other"), *longer]) == 0
    assert sum(asked) == len(records)
