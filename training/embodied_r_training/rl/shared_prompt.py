"""GRPO with each prompt run once per group, in sampling and in the loss pass (issue 42: a step's cost).

A GRPO group is one prompt and its G sampled completions. TRL's loss pass runs the model over prompt +
completion for every row, so here a ~530-token prompt went forward and backward G = 8 times under
completions of ~110 tokens: about 80 % of a step's model work. :class:`SharedPromptGRPOTrainer` runs each
distinct prompt of a micro-batch once, repeats its key/value cache for the rows that share it and runs those
rows' completions on top. The gradient is the same: repeating the cache sums the rows' gradients into the
prompt's one pass (``test_shared_prompt.py`` checks log-probabilities and gradients against TRL's pass).

Sampling the same way: TRL's generate call repeats each prompt G times before the model reads it, so the
prompt's forward pass (the prefill) ran G times. Here each distinct prompt is prefilled once, its cache
repeated for the group, and decoding continues from that cache with the LoRA adapters merged into the
weights meanwhile: :mod:`embodied_r_ros.backends.decoding` samples as ``generate`` does from the same
logits but drops each row from the batch once it has ended (``generate`` itself where the generation
config asks for more).

It also keeps each group's rows together when TRL splits a generation batch into micro-batches (TRL shuffles
rows across them). All micro-batches of a generation batch are accumulated into one update, and the loss is
normalised by the batch's token count, so which rows share a micro-batch changes nothing but the work.

Where the shortcut does not apply (several processes: DDP's hooks live in the wrapper's forward; images or
other model inputs; MoE auxiliary losses; gradient checkpointing, under which transformers keeps no cache;
micro-batches that are not whole groups) the trainer does what TRL does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.trainer.utils import split_pixel_values_by_grid, split_tensor_dict, unsplit_pixel_values_by_grid

from embodied_r_ros.backends.decoding import sample_dropping_finished, supports


def causal_lm_of(model: Any) -> Any:
    """The causal LM inside ``model`` (a PEFT model's base model carries the adapters, injected)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def group_rows(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> dict[tuple[int, ...], list[int]]:
    """Rows by their prompt's tokens (left padding dropped), in first-seen order."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for row in range(prompt_ids.size(0)):
        tokens = tuple(prompt_ids[row][prompt_mask[row].bool()].tolist())
        groups.setdefault(tokens, []).append(row)
    return groups


def shared_prompt_logps(
    causal_lm: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_length: int,
    temperature: float = 1.0,
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probabilities (and entropies) of the last ``completion_length`` tokens of each row of
    ``input_ids`` (left-padded prompt + right-padded completion, as TRL lays them out), each distinct prompt
    run once. ``causal_lm``: the unwrapped model (a PEFT model's base model carries its adapters).
    Positions after a completion's end hold values the caller masks, as in TRL's pass."""
    prompt_ids, prompt_mask = input_ids[:, :-completion_length], attention_mask[:, :-completion_length]
    completions = input_ids[:, -completion_length:]
    backbone, head = causal_lm.base_model, causal_lm.get_output_embeddings()
    logps = torch.empty(completions.shape, dtype=torch.float32, device=input_ids.device)
    entropies = torch.empty_like(logps) if compute_entropy else None
    for prompt, rows in group_rows(prompt_ids, prompt_mask).items():
        if not prompt:
            raise ValueError("a GRPO row with an empty prompt: the loss pass needs at least one prompt token")
        prefix = backbone(input_ids=torch.tensor([prompt], device=input_ids.device), use_cache=True)
        # Completion token j is predicted from position j - 1: the prompt's last state, then the completion's.
        hidden = prefix.last_hidden_state[:, -1:].expand(len(rows), -1, -1)
        if completion_length > 1:  # a one-token completion is predicted from the prompt alone
            cache = prefix.cache
            # Differentiable: the rows' gradients sum into the prompt.
            cache.batch_repeat_interleave(len(rows))
            body = backbone(input_ids=completions[rows, :-1], cache=cache, use_cache=True)
            hidden = torch.cat([hidden, body.last_hidden_state], dim=1)
        group_logps, group_entropies = [], []
        for i, row in enumerate(rows):  # one row's logits at a time: (completion, vocabulary) floats
            log_probs = (head(hidden[i]).float() / temperature).log_softmax(-1)
            group_logps.append(log_probs.gather(-1, completions[row].unsqueeze(-1)).squeeze(-1))
            if compute_entropy:  # a metric and a mask only, as in TRL: no gradient
                with torch.no_grad():
                    group_entropies.append(-(log_probs.exp() * log_probs).sum(-1))
        # Back into row order (the out-of-place index_put keeps each group's autograd graph).
        index = torch.tensor(rows, device=input_ids.device)
        logps = logps.index_put((index,), torch.stack(group_logps))
        if entropies is not None:
            entropies = entropies.index_put((index,), torch.stack(group_entropies))
    return logps, entropies


class SharedPromptGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` whose loss pass runs each prompt once per micro-batch (module docstring)."""

    def _shared_pass_applies(self, causal_lm: Any, extra: dict[str, Any], compute_aux_loss: bool) -> bool:
        return (
            self.accelerator.num_processes == 1
            and not compute_aux_loss
            and all(value is None for value in extra.values())
            # transformers keeps no cache under gradient checkpointing (it recomputes the layers instead)
            and not (
                getattr(causal_lm.base_model, "gradient_checkpointing", False) and torch.is_grad_enabled()
            )
        )

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        causal_lm = causal_lm_of(self.accelerator.unwrap_model(model))
        if not self._shared_pass_applies(causal_lm, extra, compute_aux_loss):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy,
                compute_aux_loss, **extra,
            )  # fmt: skip
        with self.accelerator.autocast():
            logps, entropies = shared_prompt_logps(
                causal_lm, input_ids, attention_mask, logits_to_keep, self.temperature, compute_entropy
            )
        return logps, entropies, None

    def _generate_single_turn(
        self, prompt_ids: list[list[int]], images: Any, multimodal_fields: dict[str, Any],
        num_generations: int, has_tool_images: bool = False,
    ) -> tuple[list[list[int]], Any]:  # fmt: skip
        """TRL's plain ``generate`` path, each distinct prompt prefilled once (module docstring)."""
        plain = self.use_vllm or self.use_transformers_continuous_batching or images or multimodal_fields
        plain = plain or self.accelerator.num_processes > 1  # FSDP/DeepSpeed gather weights in TRL's path
        if plain or len({tuple(p) for p in prompt_ids}) == len(prompt_ids):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        with (
            unwrap_model_for_generation(
                self.model_wrapped, self.accelerator, generation_kwargs=self.generation_kwargs,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
            self.accelerator.autocast(),  # the prefill too (it calls the backbone, past the wrapped forward)
            merged_adapters(model),
        ):  # fmt: skip
            completions = generate_from_shared_prompts(
                model,
                prompt_ids,
                self._tokenizer.pad_token_id,
                self.generation_config,
                self.accelerator.device,
            )
        # As TRL: each completion up to and including its first end-of-sequence token.
        ends = set(self.eos_token_ids)
        cut = [next((i + 1 for i, t in enumerate(c) if t in ends), len(c)) for c in completions]
        return [c[:n] for c, n in zip(completions, cut, strict=True)], None

    def _prepare_inputs(self, generation_batch: dict[str, Any]) -> dict[str, Any]:
        """TRL's, with the generation batch shuffled a group at a time (its rows stay in one micro-batch)."""
        generate_every = self.args.steps_per_generation * self.num_iterations
        aligned = self.args.per_device_train_batch_size % self.num_generations == 0
        if not (self.model.training and aligned and self.accelerator.num_processes == 1):
            return super()._prepare_inputs(generation_batch)
        if self._step % generate_every == 0 or self._buffered_inputs is None:
            batch = self._generate_and_score_completions(generation_batch)
            batch = split_pixel_values_by_grid(batch)
            batch = shuffle_groups(batch, self.num_generations)
            parts = split_tensor_dict(batch, self.args.steps_per_generation)
            self._buffered_inputs = [unsplit_pixel_values_by_grid(part) for part in parts]
        return self._buffered_inputs[self._step % self.args.steps_per_generation]


@contextmanager
def merged_adapters(model: Any) -> Iterator[None]:
    """A PEFT model's LoRA adapters merged into its weights for the duration (sampling then runs one matrix
    product per layer instead of three: ~1.3x faster decoding on the CPU here), unmerged after. Without
    dropout the merged model computes the same function; with dropout, or for other models, nothing
    changes."""
    config = getattr(model, "peft_config", {}).get(getattr(model, "active_adapter", ""), None)
    if config is None or getattr(config, "lora_dropout", 1.0) != 0.0 or not hasattr(model, "merge_adapter"):
        yield
        return
    model.merge_adapter()
    try:
        yield
    finally:
        model.unmerge_adapter()


def generate_from_shared_prompts(
    model: Any, prompt_ids: list[list[int]], pad_token_id: int, generation_config: Any, device: Any
) -> list[list[int]]:
    """What ``model.generate`` samples for every row of ``prompt_ids`` (rows may repeat a prompt), each
    distinct prompt prefilled once: the distinct prompts, left-padded, run up to their last token; the cache
    is gathered to the rows, and decoding reads only each row's last prompt token before sampling (finished
    rows leave the batch: :func:`~embodied_r_ros.backends.decoding.sample_dropping_finished`). Returns
    each row's generated tokens (padding after an end included, as ``generate`` writes them)."""
    distinct = list(dict.fromkeys(tuple(p) for p in prompt_ids))
    which = {prompt: i for i, prompt in enumerate(distinct)}
    rows = torch.tensor([which[tuple(p)] for p in prompt_ids], device=device)
    width = max(map(len, distinct))
    ids = torch.full((len(distinct), width), pad_token_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for i, prompt in enumerate(distinct):
        ids[i, width - len(prompt) :], mask[i, width - len(prompt) :] = torch.tensor(prompt), 1
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # as generate places left-padded prompts
    backbone = causal_lm_of(model).base_model  # no LM head: only the cache is wanted
    cache = backbone(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
                     use_cache=True).cache  # fmt: skip
    cache.reorder_cache(rows)  # row r gets its prompt's cache
    if supports(generation_config):  # finished rows leave the batch (backends/decoding.py)
        return sample_dropping_finished(model, ids[rows], mask[rows], cache, generation_config).tolist()
    output = model.generate(
        input_ids=ids[rows], attention_mask=mask[rows], cache=cache, generation_config=generation_config
    )
    return output[:, width:].tolist()


def shuffle_groups(batch: dict[str, Any], group_size: int) -> dict[str, Any]:
    """``batch`` (rows laid out a group after another, as TRL's sampler repeats each prompt) with its groups
    in a random order, each group's rows kept together; like TRL's ``shuffle_sequence_dict`` otherwise
    (every sequence permuted in unison, None and 0-d tensors passed through)."""
    rows = len(next(v for v in batch.values() if v is not None))
    if rows % group_size:
        raise ValueError(f"a generation batch of {rows} rows is not whole groups of {group_size}")
    order = torch.randperm(rows // group_size)
    permutation = (order[:, None] * group_size + torch.arange(group_size)[None, :]).reshape(-1)

    def reorder(value: Any) -> Any:
        if value is None or (isinstance(value, torch.Tensor) and value.dim() == 0):
            return value
        if isinstance(value, torch.Tensor):
            return value[permutation]
        return [value[i] for i in permutation.tolist()]

    return {key: reorder(value) for key, value in batch.items()}
