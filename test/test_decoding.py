"""The cheaper decoding step (embodied_r_ros/backends/decoding.py): attention of one query token per row as
two matrix products over the key/value heads, and a cache with room to write into, compute what transformers'
``sdpa`` attention and ``DynamicLayer`` compute; the decoding loop uses both and still writes ``generate``'s
tokens (test_backends.py and test_shared_prompt.py hold the rest of that)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AttentionInterface
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from embodied_r_ros.backends import decoding


class _Attention(torch.nn.Module):
    """What transformers' attention functions read of the module: its key/value groups and causality."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True


def _qkv(rows: int, heads: int, groups: int, query: int, length: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    shape = lambda h, n: (rows, h, n, 16)  # noqa: E731
    return [torch.randn(shape(h, n), generator=generator) for h, n in ((heads, query), (groups, length))] + [
        torch.randn(shape(groups, length), generator=generator)
    ]


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float"])
@pytest.mark.parametrize("heads, groups", [(8, 2), (4, 4), (6, 1)])
def test_one_token_attention_is_sdpa_s(heads: int, groups: int, mask_kind: str) -> None:
    query, key, value = _qkv(3, heads, groups, 1, 11)
    lengths = torch.tensor([11, 7, 2])  # left padding: the rows look at their last 11, 7 and 2 positions
    keep = (torch.arange(11)[None, :] >= 11 - lengths[:, None])[:, None, None, :]  # (rows, 1, 1, length)
    mask = {"none": None, "bool": keep, "float": torch.zeros(keep.shape).masked_fill(~keep, -1e9)}[mask_kind]
    module = _Attention(heads // groups)
    ours, _ = decoding.grouped_query_attention(module, query, key, value, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.3)
    assert ours.shape == theirs.shape == (3, 1, heads, 16)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    if mask_kind != "none":  # a masked position does not count: changing it changes nothing
        key[2, :, 0] += 100.0
        again, _ = decoding.grouped_query_attention(module, query, key, value, mask, scaling=0.3)
        torch.testing.assert_close(again, ours)


def test_longer_queries_and_special_cases_go_to_sdpa_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(decoding, "sdpa_attention_forward", lambda *a, **k: calls.append(k) or ("sdpa", None))
    module = _Attention(2)
    prefill = _qkv(2, 4, 2, 5, 5)
    assert decoding.grouped_query_attention(module, *prefill, None)[0] == "sdpa"
    one = _qkv(2, 4, 2, 1, 5)
    assert decoding.grouped_query_attention(module, *one, None, softcap=30.0)[0] == "sdpa"
    per_head = torch.ones(2, 4, 1, 5, dtype=torch.bool)
    assert decoding.grouped_query_attention(module, *one, per_head)[0] == "sdpa"
    assert decoding.grouped_query_attention(module, *one, None, dropout=0.1)[0] == "sdpa"
    assert len(calls) == 4 and calls[1]["softcap"] == 30.0
    assert decoding.grouped_query_attention(module, *one, None)[0] != "sdpa"


def test_a_cache_with_room_holds_what_a_dynamic_layer_holds() -> None:
    generator = torch.Generator().manual_seed(1)
    states = lambda rows, n: torch.randn(rows, 2, n, 4, generator=generator)  # noqa: E731
    plain = DynamicLayer()
    prompt_k, prompt_v = states(3, 6), states(3, 6)
    plain.update(prompt_k, prompt_v)
    roomy = decoding.RoomyLayer(plain, room=2)
    plain = DynamicLayer()
    plain.update(prompt_k, prompt_v)

    def same() -> None:
        assert roomy.get_seq_length() == plain.get_seq_length()
        torch.testing.assert_close(roomy.keys, plain.keys, rtol=0, atol=0)
        torch.testing.assert_close(roomy.values, plain.values, rtol=0, atol=0)

    for step in range(5):  # past its room of 2: it makes more
        k, v = states(roomy.keys.shape[0], 1), states(roomy.keys.shape[0], 1)
        returned = roomy.update(k, v)
        plain.update(k, v)
        torch.testing.assert_close(returned[0], plain.keys, rtol=0, atol=0)
        same()
        if step == 1:
            roomy.batch_select_indices(torch.tensor([0, 2]))
            plain.batch_select_indices(torch.tensor([0, 2]))
            same()
    roomy.batch_repeat_interleave(2)
    plain.batch_repeat_interleave(2)
    same()
    roomy.crop(-2)
    plain.crop(-2)
    same()
    for order in (torch.tensor([3, 1, 0, 2]), torch.tensor([0, 0, 1, 2, 3, 3])):  # reordered, then repeated
        roomy.reorder_cache(order)
        plain.reorder_cache(order)
        same()
    k, v = states(6, 1), states(6, 1)
    roomy.update(k, v)
    plain.update(k, v)
    same()


def test_decoding_attends_one_token_at_a_time_with_room_and_writes_generate_s_tokens(
    tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tiny LM (4 query heads over 2 key/value heads, ``sdpa``): greedy decoding of a left-padded batch
    runs every step after the prefill through the one-token attention, on a cache with room, and writes
    generate's tokens; the model's attention setting is back to ``sdpa`` after."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    model = AutoModelForCausalLM.from_pretrained(tiny_models_dir / "lm", dtype=torch.float32).eval()
    assert model.config._attn_implementation == "sdpa" and model.config.num_key_value_heads == 2
    seen: list[tuple[int, ...]] = []

    def counting(module, query, *args, **kwargs):
        seen.append(tuple(query.shape))
        return decoding.grouped_query_attention(module, query, *args, **kwargs)

    AttentionInterface.register(decoding.SINGLE_TOKEN_ATTENTION, counting)
    try:
        generator = torch.Generator().manual_seed(3)
        ids = torch.randint(3, model.config.vocab_size, (3, 9), generator=generator)
        mask = torch.ones_like(ids)
        mask[1, :4] = mask[2, :7] = 0  # left padding
        config = GenerationConfig(max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=0)
        rooms: list[type] = []
        with_room = decoding.with_room
        monkeypatch.setattr(
            decoding, "with_room", lambda c, r: rooms.extend(map(type, with_room(c, r).layers)) or c
        )
        ours = decoding.decode_batch(model, ids, mask, config)
        expected = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[
            :, ids.shape[1] :
        ]
    finally:
        AttentionInterface.register(decoding.SINGLE_TOKEN_ATTENTION, decoding.grouped_query_attention)
    assert torch.equal(ours, expected)
    assert rooms == [decoding.RoomyLayer] * model.config.num_hidden_layers
    layers = model.config.num_hidden_layers
    assert len(seen) == 10 * layers and all(shape[2] == 1 for shape in seen)  # no prefill: sdpa's
    assert model.config._attn_implementation == "sdpa"


def test_a_draw_follows_the_probabilities_and_never_picks_an_impossible_token() -> None:
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2], [0.0, 0.0, 0.0, 0.0, 1.0], [0.25] * 4 + [0.0]])
    torch.manual_seed(0)
    draws = torch.stack([decoding.draw(probs) for _ in range(20000)])  # 20000 x rows
    for row in range(probs.shape[0]):
        counts = torch.bincount(draws[:, row], minlength=probs.shape[1]).float() / len(draws)
        assert counts[probs[row] == 0].sum() == 0
        torch.testing.assert_close(counts, probs[row], rtol=0, atol=0.015)
