"""The GRPO loss pass that runs each prompt once per group gives TRL's log-probabilities and gradients,
and the generation batch is shuffled a group at a time (rl/shared_prompt.py)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from embodied_r_training.rl.rewards import completion_text, register_reward, unregister_reward
from embodied_r_training.rl.shared_prompt import (
    SharedPromptGRPOTrainer,
    group_rows,
    merged_adapters,
    shuffle_groups,
)
from embodied_r_training.rl.train import build_trainer
from embodied_r_training.rl.train_config import build_train_config
from trl import GRPOTrainer


def _trainer(
    tiny_models_dir: Path, tiny_dataset: Path, out: Path, reward: str = "accuracy"
) -> SharedPromptGRPOTrainer:
    config = build_train_config({
        "model": str(tiny_models_dir / "lm"),
        "output_dir": str(out),
        "data": {"path": str(tiny_dataset)},
        "lora": {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0},
        "rewards": [{"start_step": 0, "format": 1, reward: 1}],
        "grpo": dict(use_cpu=True, bf16=False, num_generations=4, per_device_train_batch_size=8,
                     max_completion_length=8, max_steps=1, save_strategy="no", temperature=0.7,
                     gradient_checkpointing=False, steps_per_generation=2, logging_steps=1),
    })  # fmt: skip
    trainer = build_trainer(config)
    torch.manual_seed(0)
    with torch.no_grad():  # LoRA starts as a no-op (B = 0): make the adapters matter to the gradient
        for name, parameter in trainer.model.named_parameters():
            if "lora_" in name:
                parameter.normal_(0.0, 0.2)
    return trainer


def _batch(vocab: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Two prompts (5 and 3 tokens, left-padded) with three and five completions (right-padded), the rows
    of both groups interleaved as a shuffled micro-batch holds them."""
    generator = torch.Generator().manual_seed(1)
    prompts = [
        torch.randint(3, vocab, (5,), generator=generator),
        torch.randint(3, vocab, (3,), generator=generator),
    ]
    owners = [0, 1, 1, 0, 1, 0, 1, 1]
    lengths = [6, 2, 6, 4, 1, 6, 3, 5]
    prompt_ids = torch.zeros(8, 5, dtype=torch.long)
    prompt_mask = torch.zeros(8, 5, dtype=torch.long)
    completion_ids = torch.zeros(8, 6, dtype=torch.long)
    completion_mask = torch.zeros(8, 6, dtype=torch.long)
    for row, (owner, length) in enumerate(zip(owners, lengths, strict=True)):
        prompt = prompts[owner]
        prompt_ids[row, -len(prompt) :], prompt_mask[row, -len(prompt) :] = prompt, 1
        completion_ids[row, :length] = torch.randint(3, vocab, (length,), generator=generator)
        completion_mask[row, :length] = 1
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    return input_ids, torch.cat([prompt_mask, completion_mask], dim=1), completion_ids.size(1)


def _pass(trainer: GRPOTrainer, method, batch) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    input_ids, attention_mask, keep = batch
    trainer.model.zero_grad()
    logps, entropies, _ = method(
        trainer, trainer.model, input_ids, attention_mask, keep, compute_entropy=True
    )
    mask = attention_mask[:, -keep:].float()
    (logps * mask).sum().backward()  # every kept token's log-probability, as the GRPO loss weighs them
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return logps.detach() * mask, entropies * mask, grads


def test_one_pass_per_prompt_gives_trl_log_probs_entropies_and_gradients(
    tiny_models_dir: Path, tiny_dataset: Path, tmp_path: Path
) -> None:
    trainer = _trainer(tiny_models_dir, tiny_dataset, tmp_path / "run")
    batch = _batch(trainer.model.config.vocab_size)
    assert trainer._shared_pass_applies(trainer.model.get_base_model(), {}, False)
    ours = _pass(trainer, SharedPromptGRPOTrainer._get_per_token_logps_and_entropies, batch)
    trls = _pass(trainer, GRPOTrainer._get_per_token_logps_and_entropies, batch)
    torch.testing.assert_close(ours[0], trls[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours[1], trls[1], rtol=1e-4, atol=1e-4)
    assert set(ours[2]) == set(trls[2]) and any("lora_A" in n for n in ours[2])
    for name, grad in trls[2].items():
        assert grad.abs().sum() > 0, name  # the comparison below means something for every adapter
        torch.testing.assert_close(ours[2][name], grad, rtol=1e-3, atol=1e-5, msg=name)


def test_one_token_completions_are_predicted_from_the_prompt_alone(
    tiny_models_dir: Path, tiny_dataset: Path, tmp_path: Path
) -> None:
    # A micro-batch whose completions are one token long (an answer cut at once) has no completion
    # tokens to run after the prompt: the pass must still give TRL's log-probabilities and gradients.
    trainer = _trainer(tiny_models_dir, tiny_dataset, tmp_path / "run")
    input_ids, attention_mask, keep = _batch(trainer.model.config.vocab_size)
    cut = input_ids.size(1) - keep + 1
    batch = (input_ids[:, :cut], attention_mask[:, :cut], 1)
    ours = _pass(trainer, SharedPromptGRPOTrainer._get_per_token_logps_and_entropies, batch)
    trls = _pass(trainer, GRPOTrainer._get_per_token_logps_and_entropies, batch)
    torch.testing.assert_close(ours[0], trls[0], rtol=1e-4, atol=1e-4)
    for name, grad in trls[2].items():
        torch.testing.assert_close(ours[2][name], grad, rtol=1e-3, atol=1e-5, msg=name)


def test_rows_are_grouped_by_their_prompt_without_padding() -> None:
    prompt_ids = torch.tensor([[0, 7, 8], [5, 7, 8], [9, 7, 8], [0, 0, 4]])
    prompt_mask = torch.tensor([[0, 1, 1], [0, 1, 1], [1, 1, 1], [0, 0, 1]])
    assert group_rows(prompt_ids, prompt_mask) == {(7, 8): [0, 1], (9, 7, 8): [2], (4,): [3]}


def test_the_generation_batch_is_shuffled_a_group_at_a_time() -> None:
    torch.manual_seed(3)
    rows = torch.arange(12)
    batch = {"ids": rows.unsqueeze(1).repeat(1, 2), "texts": [f"r{i}" for i in range(12)],
             "scale": torch.tensor(2.0), "absent": None}  # fmt: skip
    orders = set()
    for _ in range(20):
        shuffled = shuffle_groups(batch, 4)
        ids = shuffled["ids"][:, 0]
        assert shuffled["texts"] == [f"r{i}" for i in ids.tolist()]  # every sequence in unison
        assert shuffled["scale"] is batch["scale"] and shuffled["absent"] is None
        groups = ids.reshape(3, 4)
        # rows stay together, in their order
        assert torch.equal(groups - groups[:, :1], torch.arange(4).expand(3, 4))
        orders.add(tuple(groups[:, 0].tolist()))
    assert len(orders) > 1  # and the groups do move
    with pytest.raises(ValueError, match="not whole groups of 5"):
        shuffle_groups(batch, 5)


@pytest.fixture
def length_reward() -> Iterator[str]:
    """A reward that differs within a group (the tiny LM's completions rarely score on format or accuracy,
    and an all-equal group has no gradient): the completion's length in characters / 100."""

    @register_reward("length")
    def length(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return [len(completion_text(c)) / 100 for c in completions]

    yield "length"
    unregister_reward("length")


def test_a_real_step_trains_on_micro_batches_of_whole_groups(
    tiny_models_dir: Path, tiny_dataset: Path, tmp_path: Path, length_reward: str
) -> None:
    trainer = _trainer(tiny_models_dir, tiny_dataset, tmp_path / "run", length_reward)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    # 16 rows a generation (2 micro-batches of 8 = 2 groups of 4 each), every micro-batch whole groups
    for micro_batch in trainer._buffered_inputs:
        groups = group_rows(micro_batch["prompt_ids"], micro_batch["prompt_mask"])
        assert sorted(len(rows) for rows in groups.values()) == [4, 4]
    assert any("loss" in entry for entry in trainer.state.log_history)
    moved = [
        n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])
    ]
    assert moved  # the adapters took the step


def test_sampling_prefills_each_prompt_once_and_generates_what_trl_does(
    tiny_models_dir: Path, tiny_dataset: Path, tmp_path: Path
) -> None:
    trainer = _trainer(tiny_models_dir, tiny_dataset, tmp_path / "run")
    trainer.generation_config.do_sample = False  # greedy: the same logits give the same tokens
    trainer.generation_config.max_new_tokens = 6
    generator = torch.Generator().manual_seed(5)
    vocab = trainer.model.config.vocab_size
    prompts = [torch.randint(3, vocab, (n,), generator=generator).tolist() for n in (7, 3, 5)]
    rows = [prompts[i] for i in (0, 1, 1, 2, 0, 1, 2, 2)]
    calls = []
    model = trainer.model.get_base_model().base_model  # the decoder stack: every pass runs through it
    forward = model.forward

    @functools.wraps(forward)  # generate reads the forward's signature to choose what it passes
    def counting(*args, **kwargs):
        calls.append(kwargs.get("input_ids", args[0] if args else None).shape)
        return forward(*args, **kwargs)

    weights = {n: w.detach().clone() for n, w in trainer.model.named_parameters()}
    model.forward = counting
    ours, _ = trainer._generate_single_turn(rows, None, {}, 1)
    model.forward = forward
    with merged_adapters(trainer.model):
        layers = [m for m in trainer.model.modules() if hasattr(m, "lora_A") and hasattr(m, "merged")]
        assert layers and all(m.merged for m in layers)
    for name, weight in trainer.model.named_parameters():  # the adapters were merged for sampling, and back
        torch.testing.assert_close(weight, weights[name], rtol=0, atol=1e-6, msg=name)
    trls, _ = GRPOTrainer._generate_single_turn(trainer, rows, None, {}, 1)
    assert ours == trls
    assert calls[0] == (3, 6)  # the three distinct prompts, once each, up to their last token
    assert len(calls) > 1 and all(shape == (8, 1) for shape in calls[1:])  # then a token a row at a time

    # Rows that end leave the batch: with an end token the greedy rows write at different steps, each
    # row stops there, and the completions are still TRL's.
    common = {}
    for place, token in ((r, t) for completion in trls for r, t in enumerate(completion[1:5], 1)):
        common.setdefault(token, set()).add(place)
    end = max(common, key=lambda t: len(common[t]))  # a token the rows write at several steps
    assert len(common[end]) > 1
    trainer.eos_token_ids = [end]
    trainer.generation_config.eos_token_id = [end]
    calls.clear()
    model.forward = counting
    ours, _ = trainer._generate_single_turn(rows, None, {}, 1)
    model.forward = forward
    trls, _ = GRPOTrainer._generate_single_turn(trainer, rows, None, {}, 1)
    assert ours == trls and any(c[-1] == end for c in ours) and any(c[-1] != end for c in ours)
    decoded = [shape[0] for shape in calls[1:]]  # rows decoded at each step: fewer once some ended
    assert decoded[0] == 8 and decoded == sorted(decoded, reverse=True) and decoded[-1] < 8
    assert sum(decoded) == sum(map(len, ours))  # one pass a row per token it wrote, none after its end


def test_sampling_drops_finished_rows_only_where_it_samples_as_generate_does() -> None:
    """The loop takes GRPO's settings (sampling at a temperature, top-k/top-p/min-p, several end tokens) and
    leaves anything else to ``generate``: a repetition penalty, beams, several returns, a static cache."""
    from transformers import GenerationConfig

    from embodied_r_ros.backends.decoding import supports, warpers

    grpo = dict(max_new_tokens=400, do_sample=True, pad_token_id=2, bos_token_id=1, eos_token_id=[2, 7],
                temperature=0.9, top_k=0, top_p=1.0, min_p=None, repetition_penalty=1.0)  # fmt: skip
    assert supports(GenerationConfig(**grpo))
    assert [type(w).__name__ for w in warpers(GenerationConfig(**grpo))] == ["TemperatureLogitsWarper"]
    both = GenerationConfig(**{**grpo, "top_k": 20, "top_p": 0.9, "min_p": 0.05})
    assert [type(w).__name__ for w in warpers(both)] == [
        "TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper"
    ]  # fmt: skip
    for other in ({"repetition_penalty": 1.2}, {"num_beams": 2}, {"num_return_sequences": 2},
                  {"cache_implementation": "static"}, {"no_repeat_ngram_size": 3}):  # fmt: skip
        assert not supports(GenerationConfig(**{**grpo, **other})), other
