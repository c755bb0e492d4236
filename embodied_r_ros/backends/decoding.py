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

Two things make each decoding step cheaper on a CPU (together ~2.5-3x a step for 32 rows over ~550-token
caches; BENCHMARKS.md), computing the same attention:

* :func:`single_token_attention`: torch's CPU attention kernel spends ~9 ms a layer on a single query token
  per row (it is built for long queries); :func:`grouped_query_attention` is that attention as two matrix
  products, each key/value head read once by the query heads that share it (grouped-query attention
  without repeating the cache). Longer queries (a prefill) still go to ``sdpa``.
* :func:`with_room`: transformers' ``DynamicLayer`` copies the whole cache into a one-token-longer tensor
  at every step; :class:`RoomyLayer` writes each token into room kept after the prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

import torch
from transformers import AttentionInterface, GenerationConfig
from transformers.cache_utils import DynamicLayer
from transformers.generation import (
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

# Replaces a step's chosen tokens (the batch's rows by their place in the output, the chosen tokens), e.g.
# with the tools' (tool_decoding.ToolTokens).
Force = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

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
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    cache: Any,
    config: GenerationConfig,
    force: Force | None = None,
) -> torch.Tensor:
    """The completions of ``input_ids`` (rows × width, left-padded) under ``config``, each row decoded until
    it writes an end token or ``config.max_new_tokens``; ``cache`` holds every prompt token but each row's
    last (as ``generate`` continues a cache). Rows that ended leave the batch. Returns rows ×
    the longest completion, padded with ``config.pad_token_id`` after each row's end, as ``generate``.
    ``force``: called with each step's rows and chosen tokens, returns the tokens written (and fed back)."""
    room = with_room(cache, int(config.max_new_tokens))
    with single_token_attention(model):
        return _decode(model, input_ids, attention_mask, room, config, force)


def _decode(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    cache: Any,
    config: GenerationConfig,
    force: Force | None = None,
) -> torch.Tensor:
    """:func:`sample_dropping_finished`'s loop."""
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
            chosen = draw(torch.softmax(scores, dim=-1))
        else:
            chosen = scores.argmax(dim=-1)
        if force is not None:
            chosen = force(active, chosen)
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


def draw(probs: torch.Tensor) -> torch.Tensor:
    """One token per row of ``probs`` (rows × vocabulary), drawn with those probabilities: the first token
    whose cumulative probability exceeds a uniform draw. ``torch.multinomial`` draws the same distribution
    from an exponential variate per vocabulary entry (~30 ms a step for 32 rows of 49k here); this needs
    one uniform variate per row. A token of probability 0 is never drawn."""
    cumulative = probs.cumsum(dim=-1)
    uniform = torch.rand(probs.shape[0], 1, device=probs.device, dtype=cumulative.dtype) * cumulative[:, -1:]
    drawn = torch.searchsorted(cumulative, uniform, right=True).squeeze(1)
    # A draw rounded up to the total falls past the end: the likeliest token stands in (odds ~1e-7).
    return torch.where(drawn < probs.shape[1], drawn, probs.argmax(dim=-1))


@torch.no_grad()
def decode_batch(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    config: GenerationConfig,
    force: Force | None = None,
) -> torch.Tensor:
    """:func:`sample_dropping_finished` of a left-padded batch from scratch: every prompt token but the last
    run once into a fresh cache (no logits but the last position's), then decoded."""
    from transformers import DynamicCache

    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)  # as generate places left-padded prompts
    cache = DynamicCache(config=model.config)
    if input_ids.shape[1] > 1:
        model(input_ids=input_ids[:, :-1], attention_mask=attention_mask[:, :-1],
              position_ids=positions[:, :-1], cache=cache, use_cache=True, logits_to_keep=1)  # fmt: skip
    return sample_dropping_finished(model, input_ids, attention_mask, cache, config, force)


# ----------------------------------------------------------------------------------------------------
# A cheaper decoding step (module docstring)

SINGLE_TOKEN_ATTENTION = "embodied_r_single_token"  # the attention implementation's registered name


def grouped_query_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """A transformers attention function (``AttentionInterface``): for one query token per row, softmax(q k^T
    * scaling + mask) v as two matrix products, the query heads of each key/value head stacked on it (no copy
    of the cache per query head); anything else (a longer query, dropout, soft-capping, attention sinks,
    position biases, per-head masks) goes to transformers' ``sdpa`` function unchanged."""
    rows, heads, length, dim = query.shape
    groups = key.shape[1]
    special = dropout or any(kwargs.get(k) is not None for k in ("softcap", "s_aux", "position_bias"))
    per_head_mask = attention_mask is not None and attention_mask.shape[1] != 1
    if length != 1 or special or per_head_mask or heads % groups:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    stacked = query.reshape(rows, groups, heads // groups, dim).to(key.dtype)
    scores = torch.matmul(stacked, key.transpose(-1, -2)) * (scaling if scaling is not None else dim**-0.5)
    if attention_mask is not None:  # (rows or 1, 1, 1, cache length): True or 0 where a row may look
        mask = attention_mask[..., -1:, : key.shape[-2]]
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    out = torch.matmul(weights, value).reshape(rows, heads, 1, dim)
    return out.transpose(1, 2).contiguous().to(query.dtype), None  # (rows, 1, heads, dim), as sdpa's


AttentionInterface.register(SINGLE_TOKEN_ATTENTION, grouped_query_attention)
AttentionMaskInterface.register(SINGLE_TOKEN_ATTENTION, sdpa_mask)  # the masks sdpa gets


@contextmanager
def single_token_attention(model: Any) -> Iterator[None]:
    """``model`` (a language model with ``sdpa`` attention, or a PEFT model around one) attends with
    :func:`grouped_query_attention` for the duration; other models are left as they are."""
    config = getattr(model, "config", None)
    plain = config is not None and config.get_text_config() is config  # not a composite (vision) model
    if not plain or getattr(config, "_attn_implementation", None) != "sdpa":
        yield
        return
    config._attn_implementation = SINGLE_TOKEN_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"


class RoomyLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are views of buffers with room for ``room`` more tokens: a
    decoding step writes its token in place (``DynamicLayer`` concatenates, copying the whole cache every
    step). Out of room, it makes as much room again."""

    def __init__(self, layer: DynamicLayer, room: int) -> None:
        super().__init__()
        self.device, self.is_initialized = layer.device, True
        self._length = layer.keys.shape[-2]
        self._keys, self._values = self._roomy(layer.keys, room), self._roomy(layer.values, room)
        self._expose()

    def _roomy(self, states: torch.Tensor, room: int) -> torch.Tensor:
        rows, heads, length, dim = states.shape
        buffer = states.new_empty(rows, heads, length + max(room, 1), dim)
        buffer[:, :, :length] = states
        return buffer

    def _expose(self) -> None:
        self.keys, self.values = self._keys[:, :, : self._length], self._values[:, :, : self._length]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new tokens' keys and values after the ones held; returns all of them, as ``DynamicLayer``
        does."""
        end = self._length + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            self._keys, self._values = self._roomy(self.keys, end), self._roomy(self.values, end)
        self._keys[:, :, self._length : end] = key_states
        self._values[:, :, self._length : end] = value_states
        self._length = end
        self._expose()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Only keep the rows ``indices``: their filled part moved to the front of the same buffers (rows end
        often in a batch; copying their room each time would cost more than the copies the room saves)."""
        rows = len(indices)
        if rows > self._keys.shape[0]:  # more rows than held (a reordering that repeats rows): new buffers
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._expose()
            return
        for buffer in (self._keys, self._values):
            buffer[:rows, :, : self._length] = buffer[indices, :, : self._length]
        self._keys, self._values = self._keys[:rows], self._values[:rows]
        self._expose()

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Each row ``repeats`` times (their room too)."""
        self._keys = self._keys.repeat_interleave(repeats, dim=0)
        self._values = self._values.repeat_interleave(repeats, dim=0)
        self._expose()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """The rows in the order ``beam_idx`` (their room too)."""
        self.batch_select_indices(beam_idx.to(self._keys.device))

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` tokens, as ``DynamicLayer.crop``."""
        super().crop(tokens_to_remove)
        self._length = self.keys.shape[-2]


def with_room(cache: Any, room: int) -> Any:
    """``cache`` with each filled plain ``DynamicLayer`` swapped, in place, for a :class:`RoomyLayer` with
    ``room`` more tokens (a cache of another kind is returned as it is)."""
    layers = getattr(cache, "layers", None)
    for i, layer in enumerate(layers or []):
        filled = layer.is_initialized and layer.keys is not None and layer.keys.numel() > 0
        if type(layer) is DynamicLayer and filled:
            layers[i] = RoomyLayer(layer, room)
    return cache
