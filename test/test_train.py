"""`embodied-r train`: config checks, real TRL GRPO steps on the CPU with the tiny LM (full and LoRA),
resume across a stage boundary, the in-process reference model, and the hand-over to the core pipeline."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from embodied_r_training.rl.outputs import NODE_PARAMS
from embodied_r_training.rl.rewards import completion_text, register_reward, unregister_reward
from embodied_r_training.rl.schedule import RewardSchedule
from embodied_r_training.rl.sft import run_warm_start
from embodied_r_training.rl.staged_reward import StagedReward
from embodied_r_training.rl.train import (
    PolicyReference,
    build_trainer,
    grpo_arguments,
    latest_checkpoint,
    train,
)
from embodied_r_training.rl.train_config import (
    build_train_config,
    check_batch_shape,
    load_train_config,
    required_columns,
)
from transformers import TrainerCallback

from embodied_r_ros.backends import load_backend
from embodied_r_ros.backends.base import ChatMessage
from embodied_r_ros.backends.transformers_backend import TransformersBackend
from embodied_r_ros.cli.main import main
from embodied_r_ros.config import ConfigError, model_config
from embodied_r_ros.perceivers import core_perceivers
from embodied_r_ros.pipeline import EmbodiedR
from embodied_r_ros.ros.params import config_from_parameters
from embodied_r_ros.testing.synthetic_clip import synthetic_clip

CONFIGS = Path(__file__).resolve().parents[1] / "training" / "configs"


@pytest.fixture(scope="module")
def warm_lm(tiny_models_dir: Path, tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny LM after a short supervised warm start: it now writes the tags some of the time, so the
    format reward varies within a group and GRPO has a gradient (a random LM gets 0 for everything)."""
    out = tmp_path_factory.mktemp("warm")
    data = _config(tiny_models_dir, tiny_dataset, out)
    data["warm_start"] = {"steps": 20, "learning_rate": 1e-2, "scheduler": "cosine", "warmup_ratio": 0.1}
    data["data"]["limit"] = 0
    path = run_warm_start(build_train_config(data))
    assert path == out / "warm_start" and (path / "model.safetensors").is_file()
    return path


def _config(tiny_models_dir: Path, data: Path, out: Path, **grpo: object) -> dict:
    """A small CPU config: 1 prompt x 4 completions per step, 1 training row -> 1 step per epoch (so a
    resumed run sees the same data order as an uninterrupted one; TRL's sampler restarts its shuffle)."""
    settings = dict(
        use_cpu=True, bf16=False, learning_rate=1e-3, beta=0.001, num_generations=4, temperature=1.0,
        per_device_train_batch_size=4, gradient_accumulation_steps=1, max_completion_length=32,
        max_steps=4, gradient_checkpointing=False, save_strategy="steps", save_steps=2,
    )  # fmt: skip
    settings.update(grpo)
    return {
        "model": str(tiny_models_dir / "lm"),
        "output_dir": str(out),
        "data": {"path": str(data), "limit": 1},
        "rewards": [
            {"start_epoch": 1, "format": 1, "accuracy": 0, "consistency": 0},
            {"start_epoch": 3, "format": 0, "accuracy": 1, "consistency": 0},
        ],
        "grpo": settings,
    }


# ----------------------------------------------------------------------------------------------------
# configs


def test_shipped_configs_load_and_make_32_completions_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    paper = load_train_config(CONFIGS / "embodied_r.yaml")
    assert paper.model == "Qwen/Qwen2.5-3B-Instruct" and not paper.lora.enabled
    grpo = paper.grpo
    assert (grpo["learning_rate"], grpo["beta"], grpo["num_generations"], grpo["temperature"]) == (
        5e-7, 0.001, 8, 1.0,
    )  # fmt: skip
    assert (grpo["max_completion_length"], paper.data.max_prompt_tokens, grpo["num_train_epochs"]) == (
        2048, 6144, 12,
    )  # fmt: skip
    assert grpo["bf16"] and grpo["warmup_steps"] == 0.05
    assert check_batch_shape(paper, processes=1) == 32
    assert paper.schedule == RewardSchedule()  # the paper's 7:3:0 / 3:7:0 / 1:7:2

    lora = load_train_config(CONFIGS / "embodied_r_lora.yaml")  # base: embodied_r.yaml, overridden
    assert lora.lora.enabled and lora.grpo["learning_rate"] == 1e-5 and lora.grpo["beta"] == 0.001
    vllm = load_train_config(CONFIGS / "embodied_r_vllm.yaml")
    assert vllm.grpo["use_vllm"] and vllm.grpo["num_train_epochs"] == 12
    monkeypatch.setenv("WORLD_SIZE", "8")
    zero3 = load_train_config(CONFIGS / "embodied_r_zero3.yaml")
    assert check_batch_shape(zero3) == 32 and zero3.grpo["use_vllm"]
    smoke = load_train_config(CONFIGS / "cpu_smoke.yaml", ["grpo.max_steps=2", "data.path=/x"])
    assert smoke.grpo["max_steps"] == 2 and smoke.data.path == "/x" and smoke.model == "tiny"


@pytest.mark.parametrize("name", ["embodied_r", "embodied_r_lora", "embodied_r_vllm"])
def test_gpu_configs_are_valid_trl_settings(name: str, tmp_path: Path) -> None:
    """TRL accepts every value (only bf16 is switched off: this machine has no GPU); 4 questions x 8."""
    overrides = [f"output_dir={tmp_path}", "grpo.bf16=false", "grpo.use_cpu=true"]
    args = grpo_arguments(load_train_config(CONFIGS / f"{name}.yaml", overrides))
    assert (args.generation_batch_size, args.num_generations, args.warmup_steps) == (32, 8, 0.05)
    assert args.save_strategy == "epoch" and args.use_vllm == (name == "embodied_r_vllm")
    if not torch.cuda.is_available():  # bf16 without a GPU: TRL's message, as a one-line config error
        with pytest.raises(ConfigError, match="rejected by TRL"):
            grpo_arguments(load_train_config(CONFIGS / f"{name}.yaml", [f"output_dir={tmp_path}"]))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"epochs": 3}, "unknown key.*epochs.*known top-level keys"),
        ({"grpo": {"learnig_rate": 1e-6}}, "unknown grpo key.*learnig_rate"),
        ({"lora": {"rank": 8}}, "unknown config key.*lora.rank"),
        ({"grpo": {"num_generations": 3}}, "num_generations=3 does not divide the generation batch of 4"),
        ({"grpo": {"output_dir": "x"}}, "grpo.output_dir is set by the trainer"),
        ({"rewards": [{"start_epoch": 2, "format": 1}]}, "first stage must start at epoch 1"),
        ({"reference": {"backend": "openai"}}, "reference.backend openai needs reference.model"),
        ({"model": ""}, "model must name the policy LM"),
        ({"grpo": {"beta": 0.0}, "rewards": [{"start_epoch": 1, "consistency": 1}]}, "needs grpo.beta > 0"),
        (
            {"rewards": [{"start_epoch": 1, "format": 1, "fromat": 1}]},
            r"unknown key\(s\) \['fromat'\].*registered rewards: format, accuracy, consistency",
        ),
    ],
)
def test_bad_configs_fail_before_any_model_loads(tmp_path: Path, change: dict, message: str) -> None:
    data = _config(tmp_path, tmp_path, tmp_path / "out")
    for key, value in change.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key in data else value
    with pytest.raises(ConfigError, match=message):
        build_train_config(data, source="test.yaml")


def test_missing_dataset_columns_and_paths_name_the_fix(tiny_models_dir, tiny_dataset, tmp_path) -> None:
    from datasets import Dataset

    broken = tmp_path / "broken"
    broken.mkdir()
    rows = [json.loads(line) for line in (tiny_dataset / "train.jsonl").read_text().splitlines()]
    Dataset.from_list([{k: v for k, v in r.items() if k != "solution"} for r in rows]).to_parquet(
        str(broken / "train.parquet")
    )
    config = build_train_config(_config(tiny_models_dir, broken, tmp_path / "a"))
    with pytest.raises(ConfigError, match=r"lacks column\(s\) solution"):
        build_trainer(config)
    config = build_train_config(_config(tiny_models_dir, tmp_path / "nowhere", tmp_path / "b"))
    with pytest.raises(ConfigError, match="embodied-r prepare"):
        build_trainer(config)
    # The CLI prints the same message as one line and exits 2.
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: tiny\nepochs: 3\n")
    assert main(["train", "--config", str(bad)]) == 2


# ----------------------------------------------------------------------------------------------------
# training runs


class StopAt(TrainerCallback):
    """Ends training after ``step`` optimizer steps, as if the job had been killed after a checkpoint."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_training_stop = True
        return control


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def _logged(history: list[dict], key: str) -> list[tuple[int, float]]:
    return [(row["step"], row[key]) for row in history if key in row]


def test_full_training_resumes_across_a_stage_boundary_to_the_same_weights(
    tiny_models_dir, warm_lm, tiny_dataset, tmp_path
) -> None:
    data = _config(tiny_models_dir, tiny_dataset, tmp_path / "straight")
    data["model"] = str(warm_lm)
    straight = train(build_train_config(data))
    assert straight.global_step == 4
    # Every step logs every reward and the stage's weights: epochs 1-2 (steps 1-2) format only, then accuracy.
    history = straight.log_history
    assert [w for _, w in _logged(history, "weight/format")] == [1.0, 1.0, 0.0, 0.0]
    assert [w for _, w in _logged(history, "weight/accuracy")] == [0.0, 0.0, 1.0, 1.0]
    assert (
        len(_logged(history, "rewards/format/mean")) == 4 and len(_logged(history, "rewards/total/mean")) == 4
    )
    assert any(r > 0 for _, r in _logged(history, "rewards/format/mean"))  # the warm start writes the tags
    before, after = _weights(warm_lm), _weights(straight.final_dir)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the steps changed the weights

    # Interrupted after step 2 (the end of epoch 2), then resumed: the optimizer, scheduler, RNG and the
    # epoch come back, so it trains epochs 3-4 with their reward weights and ends with the same model.
    data["output_dir"] = str(tmp_path / "interrupted")
    first = train(build_train_config(data), callbacks=[StopAt(2)])
    assert first.global_step == 2 and latest_checkpoint(first.output_dir).name == "checkpoint-2"
    assert (latest_checkpoint(first.output_dir) / "optimizer.pt").is_file()
    with pytest.raises(ConfigError, match="pass --resume"):
        train(build_train_config(data))
    resumed = train(build_train_config(data), resume=True)
    assert resumed.global_step == 4
    weights = _logged(resumed.log_history, "weight/accuracy")
    assert [w for step, w in weights if step > 2] == [1.0, 1.0]
    resumed_weights = _weights(resumed.final_dir)
    for name, value in after.items():
        torch.testing.assert_close(resumed_weights[name], value, rtol=1e-5, atol=1e-6)
    # The hand-over file for the node names the full model.
    assert f"model: {resumed.final_dir}" in (resumed.final_dir / NODE_PARAMS).read_text()


@pytest.fixture
def brevity_reward() -> Iterator[list[list[float]]]:
    """A reward defined by the test, registered as ``brevity`` (1 / (1 + words) per completion; it reads
    the ``unit`` column) and unregistered after the test; yields the scores of every call."""
    returned: list[list[float]] = []

    @register_reward("brevity", columns=("unit",))
    def brevity(completions: Sequence[Any], unit: Sequence[str], **kwargs: Any) -> list[float]:
        assert len(unit) == len(completions)  # TRL passes the data-set column it names
        scores = [1.0 / (1 + len(completion_text(c).split())) for c in completions]
        returned.append(scores)
        return scores

    yield returned
    unregister_reward("brevity")


def test_a_new_reward_is_one_function_and_one_line_of_config(
    tiny_models_dir, warm_lm, tiny_dataset, tmp_path, brevity_reward
) -> None:
    data = _config(tiny_models_dir, tiny_dataset, tmp_path / "out", max_steps=2)
    data["model"] = str(warm_lm)
    del data["rewards"]
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(data))
    plain = "base: base.yaml\nrewards:\n  - start_epoch: 1\n    format: 1\n"
    with_brevity = plain + "    brevity: 1\n"  # the one line: brevity weighs as much as format
    (tmp_path / "brevity.yaml").write_text(with_brevity)
    config = load_train_config(tmp_path / "brevity.yaml")
    assert config.schedule.weights_for_epoch(1) == {"format": 0.5, "brevity": 0.5}
    assert required_columns(config) == ("prompt", "solution", "unit")

    result = train(config)  # two real GRPO steps of TRL with the tiny LM
    history = result.log_history
    assert result.global_step == 2 and len(brevity_reward) == 2  # one reward call of 4 completions per step
    brevity = [value for _, value in _logged(history, "rewards/brevity/mean")]
    assert brevity == pytest.approx([sum(s) / len(s) for s in brevity_reward], rel=1e-6)
    assert [w for _, w in _logged(history, "weight/brevity")] == [0.5, 0.5]
    assert [w for _, w in _logged(history, "weight/format")] == [0.5, 0.5]
    # It entered the total TRL trained on (and logs as rewards/total/mean and reward): half of each mean.
    fmt = [value for _, value in _logged(history, "rewards/format/mean")]
    total = [value for _, value in _logged(history, "rewards/total/mean")]
    assert total == pytest.approx([0.5 * f + 0.5 * b for f, b in zip(fmt, brevity, strict=True)], rel=1e-5)
    assert [value for _, value in _logged(history, "reward")] == pytest.approx(total)
    assert all(b > 0 for b in brevity)  # so the total is not format's alone


def test_required_columns_follow_the_rewards_in_use(tiny_models_dir, tmp_path) -> None:
    data = _config(tiny_models_dir, tmp_path, tmp_path / "out")
    assert required_columns(build_train_config(data)) == ("prompt", "solution")  # consistency 0 throughout
    data["rewards"] = [{"start_epoch": 1, "format": 1}, {"start_epoch": 2, "accuracy": 1, "consistency": 1}]
    config = build_train_config(data)
    assert config.needs_reference
    assert required_columns(config) == ("prompt", "solution", "question", "options")


def _messages(text: str) -> list[list[ChatMessage]]:
    return [[ChatMessage.text("user", text)]]


def test_lora_run_hands_an_adapter_to_the_core_pipeline(
    tiny_models_dir, warm_lm, tiny_dataset, tmp_path
) -> None:
    data = _config(tiny_models_dir, tiny_dataset, tmp_path / "lora", learning_rate=5e-2, max_steps=2)
    data["model"] = str(warm_lm)
    data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "q_proj,v_proj"}
    result = train(build_train_config(data))
    assert (result.final_dir / "adapter_config.json").is_file()
    assert result.node_params == {"model": str(warm_lm), "transformers": {"adapter": str(result.final_dir)}}

    # final/node_params.yaml, read as the node reads its parameters, loads base + adapter through the
    # node's model loader (the same code path as a real checkpoint).
    file = yaml.safe_load((result.final_dir / NODE_PARAMS).read_text())
    lm = file["/**/embodied_r"]["ros__parameters"]["lm"]
    common = dict(device="cpu", dtype="float32", max_new_tokens=12)
    running = {"transformers.device": "cpu", "transformers.dtype": "float32", "max_new_tokens": 12}
    values = {"lm.model": lm["model"], "lm.transformers.adapter": lm["transformers"]["adapter"]}
    values |= {f"lm.{k}": v for k, v in running.items()}
    values |= {f"vlm.{k}": v for k, v in {"model": str(tiny_models_dir / "vlm"), **running}.items()}
    node_config = config_from_parameters(values)
    assert (node_config.lm.model, node_config.lm.transformers.adapter) == (
        str(warm_lm),
        str(result.final_dir),
    )
    pipeline = EmbodiedR.from_config(node_config.pipeline(), perceivers=core_perceivers())
    try:
        clip = synthetic_clip(seconds=6.0, fps=5.0, size=(160, 120))
        answer = pipeline.answer("Which way did I turn?", ["left", "right"], frames=clip.frames)
        assert answer.completion and answer.choice in (None, "A", "B")
        trained = pipeline.reasoner.backend.first_step_logits(_messages("Which way?"))
    finally:
        pipeline.close()
    base = load_backend(model_config(str(warm_lm), **common), vision=False)
    try:
        untrained = base.first_step_logits(_messages("Which way?"))
    finally:
        base.close()
    assert not torch.allclose(trained, untrained, atol=1e-4)  # the adapter is applied


def test_in_process_reference_is_the_base_model_with_the_adapter_off(
    tiny_models_dir, warm_lm, tiny_dataset, tmp_path
) -> None:
    data = _config(tiny_models_dir, tiny_dataset, tmp_path / "ref", learning_rate=5e-2, max_steps=2)
    data["model"] = str(warm_lm)
    data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "q_proj,v_proj"}
    data["rewards"] = [{"start_epoch": 1, "format": 1, "accuracy": 1, "consistency": 1}]
    trainer = build_trainer(build_train_config(data))
    reference = trainer.embodied_r_reference
    assert isinstance(reference, PolicyReference)
    trainer.train()
    config = model_config("policy", device="cpu")
    requests = _messages("Which object did I pass first?")
    with reference._model() as (model, adapter_off):
        assert adapter_off  # LoRA: the starting weights are the policy's own with the adapter off
        with model.disable_adapter():
            with_adapter_off = TransformersBackend.from_model(config, model, trainer.processing_class)
            reference_logits = with_adapter_off.first_step_logits(requests)
    policy_logits = TransformersBackend.from_model(config, trainer.model, trainer.processing_class)
    trained_logits = policy_logits.first_step_logits(requests)
    base = load_backend(model_config(str(warm_lm), device="cpu", dtype="float32"), vision=False)
    try:
        torch.testing.assert_close(reference_logits, base.first_step_logits(requests), rtol=1e-4, atol=1e-5)
        # What the consistency reward gets (generate, through AdapterOff) is the base model's answer.
        greedy = {"max_new_tokens": 8, "temperature": 0.0}
        assert reference.generate(requests, **greedy) == base.generate(requests, **greedy)
    finally:
        base.close()
    assert not torch.allclose(trained_logits, reference_logits, atol=1e-4)  # the adapter did train

    # The staged reward asks the in-process reference in one batched call, only for correct answers.
    reward = trainer.reward_funcs[0]
    assert isinstance(reward, StagedReward)
    calls = reference.calls
    right = "<think>I passed the chair first.</think><answer>B</answer>"
    wrong = "<think>The door.</think><answer>A</answer>"
    scores = reward(
        completions=[right, wrong, right],
        solution=["B", "B", "B"],
        question=["Which did I pass first?"] * 3,
        options=[["door", "chair"]] * 3,
        trainer_state=trainer.state,
    )
    assert reference.calls == calls + 1 and len(scores) == 3
    assert scores[1] == pytest.approx(1 / 3)  # format only: wrong answers are never checked


def test_cli_trains_from_the_shipped_smoke_config(warm_lm, tiny_dataset, tmp_path, capsys) -> None:
    out = tmp_path / "cli"
    args = ["train", "--config", str(CONFIGS / "cpu_smoke.yaml"), "--set", f"model={warm_lm}"]
    args += ["--set", f"data.path={tiny_dataset}", "--set", f"output_dir={out}"]
    args += ["--set", "warm_start.steps=0"]
    assert main([*args, "--set", "grpo.max_steps=2"]) == 0
    assert "trained 2 steps" in capsys.readouterr().out
    assert (out / "final" / NODE_PARAMS).is_file() and latest_checkpoint(out).name == "checkpoint-2"
    # Asked again with --resume, it continues from checkpoint-2 to the new max_steps.
    assert main([*args, "--set", "grpo.max_steps=3", "--resume"]) == 0
    assert "trained 3 steps" in capsys.readouterr().out


def test_sft_method_trains_on_the_answers_and_hands_over_a_full_model(
    tiny_models_dir, tiny_dataset, tmp_path
) -> None:
    data = _config(tiny_models_dir, tiny_dataset, tmp_path / "sft")
    data.update(method="sft", warm_start={"steps": 3, "learning_rate": 1e-2, "batch_size": 2})
    result = train(build_train_config(data))
    assert result.final_dir == tmp_path / "sft" / "final" and result.global_step == 3
    assert (result.final_dir / "model.safetensors").is_file() and latest_checkpoint(tmp_path / "sft") is None
    assert len(result.log_history) >= 1 and all(math.isfinite(r["loss"]) for r in result.log_history)
    params = yaml.safe_load((result.final_dir / NODE_PARAMS).read_text())
    lm_params = params["/**/embodied_r"]["ros__parameters"]["lm"]
    assert lm_params == {"model": str(result.final_dir), "transformers": {"adapter": ""}}
    # The weights moved away from the start: the supervised steps really ran.
    from safetensors.torch import load_file

    start = load_file(str(tiny_models_dir / "lm" / "model.safetensors"))
    trained = load_file(str(result.final_dir / "model.safetensors"))
    assert any(not torch.equal(start[k], trained[k]) for k in start if k in trained)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"method": "rl"}, "method must be one of grpo, sft"),
        ({"method": "sft"}, "warm_start.steps >= 1"),
        ({"warm_start": {"steps": 2, "answers": "random"}}, "warm_start.answers must be one of"),
        ({"warm_start": {"steps": 2, "scheduler": "exponential"}}, "warm_start.scheduler must be one of"),
        ({"warm_start": {"steps": 2, "warmup_ratio": 1.5}}, r"warm_start.warmup_ratio must be in \[0, 1\)"),
    ],
)
def test_sft_method_is_checked_at_load(tiny_models_dir, tmp_path, change: dict, message: str) -> None:
    data = {**_config(tiny_models_dir, tmp_path, tmp_path / "x"), **change}
    with pytest.raises(ConfigError, match=message):
        build_train_config(data)


def test_the_sft_lm_head_projects_only_labelled_positions_with_the_same_loss_and_gradients() -> None:
    """Under lm_head_on_labelled_positions, TRL's fused LM head (as SFTTrainer adds it) projects only the
    positions with a label on the CPU, and the loss and every gradient equal those of scoring every
    position."""
    import trl.trainer.utils as trl_utils
    from embodied_r_training.rl.warm_start import lm_head_on_labelled_positions
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    ids = torch.randint(0, 300, (3, 40))
    labels = ids.clone()
    labels[:, :25] = -100  # the prompt
    labels[1, 35:] = -100  # padding
    projected: list[int] = []
    kernel = trl_utils._ChunkedLogProbFunction

    class Spy:
        @staticmethod
        def apply(hidden: torch.Tensor, *args: Any) -> Any:
            projected.append(hidden.shape[0])
            return kernel.apply(hidden, *args)

    def loss_and_grads() -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss = model(input_ids=ids, labels=labels, fused_lm_head=True).loss
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    trl_utils._ChunkedLogProbFunction = Spy
    try:
        every_loss, every_grads = loss_and_grads()
        with lm_head_on_labelled_positions():
            compact_loss, compact_grads = loss_and_grads()
        after_loss, _ = loss_and_grads()
    finally:
        trl_utils._ChunkedLogProbFunction = kernel
    labelled = int((labels[:, 1:] != -100).sum())
    assert projected == [3 * 39, labelled, 3 * 39]  # every position; the labelled ones; restored after
    assert torch.allclose(compact_loss, every_loss, atol=1e-6) and torch.equal(after_loss, every_loss)
    for compact, every in zip(compact_grads, every_grads, strict=True):
        assert torch.allclose(compact, every, atol=1e-6)


def test_shuffled_warm_start_answers_carry_no_information() -> None:
    from datasets import Dataset
    from embodied_r_training.rl.warm_start import shuffled_answers, warm_start_rows

    mc = [{"task": "route", "solution": "B", "options": ["a", "b", "c"]} for _ in range(300)]
    numeric = [{"task": t, "solution": f"{t}{i}", "options": []} for t in ("size", "count") for i in range(5)]
    lonely = [{"task": "room", "solution": "12.0", "options": []}]
    rows = mc + numeric + lonely
    answers = shuffled_answers(rows, seed=3)
    assert answers == shuffled_answers(rows, seed=3)  # reproducible
    letters = answers[:300]
    assert set(letters) == {"A", "B", "C"} and max(letters.count(x) for x in "ABC") < 140  # ~uniform
    for task in ("size", "count"):  # another row's solution of the same task, never the row's own
        pairs = [(r["solution"], a) for r, a in zip(rows, answers, strict=True) if r["task"] == task]
        assert all(a != own and a.startswith(task) for own, a in pairs)
        assert sorted(a for _, a in pairs) == sorted(own for own, _ in pairs)
    assert answers[-1] == "12.0"  # a task with one row has nothing to swap with
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "q"}], **r} for r in numeric])
    completions = warm_start_rows(data, "shuffled", seed=3)["completion"]
    assert [c[0]["content"] for c in completions][:2] == [
        f"<think>I check the key frames in order.</think><answer>{a}</answer>"
        for a in shuffled_answers(numeric, seed=3)[:2]
    ]
    truth = warm_start_rows(data)["completion"][0][0]["content"]
    assert truth.endswith("<answer>size0</answer>")


def test_masked_warm_start_teaches_the_tags_but_not_the_answer(
    tiny_models_dir: Path, tiny_dataset: Path, tmp_path: Path
) -> None:
    from datasets import Dataset
    from embodied_r_training.rl.warm_start import answer_masked_rows, warm_start_rows
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_models_dir / "lm")
    prompt = [{"role": "user", "content": "Which came first? A. chair B. sofa"}]
    data = Dataset.from_list([{"prompt": prompt, "solution": "B", "options": ["chair", "sofa"], "task": "t"}])
    rows = warm_start_rows(data, "masked", seed=0)
    answer = rows[0]["completion"][0]["content"].split("<answer>")[1].split("</answer>")[0]
    tokens = answer_masked_rows(rows, tokenizer)[0]
    # The same tokens TRL trains on: the chat template over prompt + completion.
    whole = tokenizer.apply_chat_template([*prompt, *rows[0]["completion"]], tokenize=False)
    assert tokens["input_ids"] == tokenizer(whole, add_special_tokens=False)["input_ids"]
    taught = tokenizer.decode([t for t in tokens["labels"] if t != -100])
    assert "<think>I check the key frames in order.</think><answer>" in taught and "</answer>" in taught
    assert f"<answer>{answer}</answer>" not in taught and "Which came first" not in taught
    prompt_text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    prompt_length = len(tokenizer(prompt_text, add_special_tokens=False)["input_ids"])
    assert all(t == -100 for t in tokens["labels"][:prompt_length])

    # And through the trainer: a masked warm start runs on the real data set and saves a model.
    data = _config(tiny_models_dir, tiny_dataset, tmp_path / "run")
    data["warm_start"] = {"steps": 2, "learning_rate": 1e-3, "batch_size": 2, "answers": "masked"}
    path = run_warm_start(build_train_config(data))
    assert (path / "model.safetensors").is_file() and (path / "warm_start_done.json").is_file()
