"""Decoding a batch with finished rows dropped from it: what ``generate`` samples, for less work.

``generate`` keeps every row of a batch to the end: completions of one batch end anywhere between ~30 and
400 tokens, and each decoding step still runs the rows that ended long ago (as padding). On a CPU a step's
cost grows with the rows it runs, so a batch costs about its size times its longest completion.
:func:`sample_dropping_finished` decodes the same way (the same logits, the same warpers, one token a step)
but removes a row from the batch, its cache included, once it has written an end token: the batch then
costs about the tokens actually written. What it returns is laid out as ``generate`` lays it out (padding
after the end). Used by the transformers backend for text-only batches (the held-out evaluations) and by
GRPO's rollouts (``embodied_r_training.rl.shared_prompt``).

It does what ``generate`` does for plain decoding settings (greedy, or sampling at a temperature with
top-k, top-p or min-p; several end tokens; a token limit); :func:`supports` says whether a generation config
holds anything else, and the caller then uses ``generate``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import GenerationConfig
from transformers.generation import (
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

# What a config may set, beyond its defaults, for this loop to sample as ``generate`` would.
HANDLED = {
    "max_new_tokens", "do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty",
    "pad_token_id", "bos_token_id", "eos_token_id", "cache_implementation", "disable_compile",
    "transformers_version", "return_dict_in_generate", "output_logits",
}  # fmt: skip


def supports(config: GenerationConfig) -> bool:
    """Whether :func:`sample_dropping_finished` samples as ``generate`` does under ``config``."""
    changed = {k for k, v in config.to_diff_dict().items() if v is not None}
    penalty = config.repetition_penalty in (None, 1.0)
    single = (config.num_return_sequences or 1) == 1 and (config.num_beams or 1) == 1
    plain = not config.output_logits and config.cache_implementation in (None, "dynamic")
    return changed <= HANDLED and penalty and single and plain


def warpers(config: GenerationConfig) -> LogitsProcessorList:
    """The logits warpers ``generate`` applies when sampling under ``config``, in its order."""
    found = LogitsProcessorList()
    if not config.do_sample:
        return found
    if config.temperature is not None and config.temperature != 1.0:
        found.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k is not None and config.top_k != 0:
        found.append(TopKLogitsWarper(top_k=config.top_k))
    if config.top_p is not None and config.top_p < 1.0:
        found.append(TopPLogitsWarper(top_p=config.top_p))
    if config.min_p is not None:
        found.append(MinPLogitsWarper(min_p=config.min_p))
    return found


@torch.no_grad()
def sample_dropping_finished(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, cache: Any, config: GenerationConfig
) -> torch.Tensor:
    """The completions of ``input_ids`` (rows × width, left-padded) under ``config``, each row decoded until
    it writes an end token or ``config.max_new_tokens``; ``cache`` holds every prompt token but each row's
    last (as ``generate`` continues a cache). Rows that ended leave the batch. Returns rows ×
    the longest completion, padded with ``config.pad_token_id`` after each row's end, as ``generate``."""
    rows, limit = input_ids.shape[0], int(config.max_new_tokens)
    ends = config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id]
    ends = torch.tensor([e for e in ends if e is not None], device=input_ids.device)
    pad = config.pad_token_id if config.pad_token_id is not None else int(ends[0]) if len(ends) else 0
    out = torch.full((rows, limit), pad, dtype=torch.long, device=input_ids.device)
    warp = warpers(config)
    active = torch.arange(rows, device=input_ids.device)  # the batch's rows, by their place in ``out``
    mask = attention_mask
    positions = (attention_mask.sum(-1, keepdim=True) - 1).clamp(min=0)  # each row's last prompt token
    step_ids = input_ids[:, -1:]
    length = 0
    for step in range(limit):
        logits = model(input_ids=step_ids, attention_mask=mask, position_ids=positions, cache=cache,
                       use_cache=True, logits_to_keep=1).logits[:, -1, :].float()  # fmt: skip
        scores = warp(step_ids, logits)  # the warpers supports() allows read the scores alone
        if config.do_sample:
            chosen = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        else:
            chosen = scores.argmax(dim=-1)
        out[active, step] = chosen
        length = step + 1
        going = ~torch.isin(chosen, ends)
        if not going.any():
            break
        if not going.all():  # the rows that ended leave the batch, their cache with them
            keep = going.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            active, chosen, mask, positions = active[keep], chosen[keep], mask[keep], positions[keep]
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        positions, step_ids = positions + 1, chosen[:, None]
    return out[:, :length]


@torch.no_grad()
def decode_batch(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, config: GenerationConfig
) -> torch.Tensor:
    """:func:`sample_dropping_finished` of a left-padded batch from scratch: every prompt token but the last
    run once into a fresh cache (no logits but the last position's), then decoded."""
    from transformers import DynamicCache

    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)  # as generate places left-padded prompts
    cache = DynamicCache(config=model.config)
    if input_ids.shape[1] > 1:
        model(input_ids=input_ids[:, :-1], attention_mask=attention_mask[:, :-1],
              position_ids=positions[:, :-1], cache=cache, use_cache=True, logits_to_keep=1)  # fmt: skip
    return sample_dropping_finished(model, input_ids, attention_mask, cache, config)
