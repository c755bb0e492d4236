"""The tiny offline models: deterministic, Qwen-shaped, and loadable like real checkpoints."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from embodied_r_ros.cli.main import main
from embodied_r_ros.testing.tiny_models import (
    ACTIONS,
    MARKER,
    REASONING_TOKENS,
    SPECIAL_TOKENS,
    build_tiny_models,
    tiny_models_complete,
)


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_same_seed_gives_identical_files_and_another_seed_other_weights(tmp_path, tiny_models_dir):
    again = tmp_path / "again"
    build_tiny_models(again, seed=0)
    first, second = _hashes(tiny_models_dir), _hashes(again)
    assert first == second
    assert {"vlm/model.safetensors", "lm/model.safetensors", "vlm/preprocessor_config.json"} <= set(first)

    other = tmp_path / "other"
    build_tiny_models(other, seed=1)
    third = _hashes(other)
    assert third["vlm/model.safetensors"] != first["vlm/model.safetensors"]
    assert third["lm/model.safetensors"] != first["lm/model.safetensors"]
    assert third["lm/tokenizer.json"] == first["lm/tokenizer.json"]  # the corpus is fixed


def test_tokenizer_has_qwen_layout_special_tokens_and_template(tiny_models_dir):
    from transformers import AutoTokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tokenizer = AutoTokenizer.from_pretrained(tiny_models_dir / "lm")
    assert type(tokenizer).__name__ == "Qwen2Tokenizer"
    assert 1000 < len(tokenizer) <= 4200

    layout = json.loads((tiny_models_dir / "lm" / "tokenizer.json").read_text())
    steps = layout["pre_tokenizer"]["pretokenizers"]
    assert [s["type"] for s in steps] == ["Split", "ByteLevel"]
    assert steps[0]["pattern"]["Regex"] == PRETOKENIZE_REGEX
    assert layout["model"]["type"] == "BPE" and layout["decoder"]["type"] == "ByteLevel"

    for token in (*SPECIAL_TOKENS, *REASONING_TOKENS):
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"

    # Byte-level BPE: any text round-trips, and domain words are single tokens.
    text = "Frame 3: After rotate left, Observe: a red chair is ahead-left. Ünïcode 東京 42"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
    for word in (" chair", " forward", " rotate", " left"):
        assert len(tokenizer.encode(word, add_special_tokens=False)) == 1, word
    assert all(tokenizer.encode(" " + a, add_special_tokens=False) for a in ACTIONS)
    completion = "<think>it is left</think><answer>A</answer><|im_end|>"
    ids = tokenizer.encode(completion, add_special_tokens=False)
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<think>it is left</think><answer>A</answer>"

    chat = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is here?"}]},
        {"role": "assistant", "content": "A chair."},
    ]
    rendered = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is here?<|im_end|>\n"
        "<|im_start|>assistant\nA chair.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_configs_load_through_auto_classes(tiny_models_dir):
    from transformers import AutoConfig, AutoImageProcessor

    vlm = AutoConfig.from_pretrained(tiny_models_dir / "vlm")
    assert vlm.model_type == "qwen2_5_vl"
    text = vlm.text_config
    head_dim = text.hidden_size // text.num_attention_heads
    assert sum(text.rope_parameters["mrope_section"]) == head_dim // 2
    assert vlm.vision_config.depth == 2 and vlm.vision_config.hidden_size == 32
    assert vlm.vision_config.out_hidden_size == text.hidden_size
    lm = AutoConfig.from_pretrained(tiny_models_dir / "lm")
    assert lm.model_type == "qwen2" and lm.hidden_size == 64 and lm.num_hidden_layers == 2

    processor = AutoImageProcessor.from_pretrained(tiny_models_dir / "vlm", backend="pil")
    for h, w in ((32, 32), (480, 640), (1080, 1920), (200, 90)):
        grid = processor(
            images=[np.zeros((h, w, 3), np.uint8)], return_tensors="pt", input_data_format="channels_last"
        )["image_grid_thw"]
        patches = int(grid.prod())
        assert 64 <= patches <= 256, (h, w, patches)


def test_completeness_check_and_command_line(tmp_path, capsys):
    out = tmp_path / "models"
    assert main(["tiny-models", str(out), "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert f"vlm: {out / 'vlm'}" in printed and f"lm: {out / 'lm'}" in printed
    assert tiny_models_complete(out) and tiny_models_complete(out, seed=3)
    assert not tiny_models_complete(out, seed=0)
    assert json.loads((out / MARKER).read_text())["seed"] == 3
    (out / "lm" / "model.safetensors").unlink()
    assert not tiny_models_complete(out)
    assert not tiny_models_complete(tmp_path / "missing")


def test_building_leaves_the_global_torch_random_state_alone(tmp_path):
    import torch
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_models(tmp_path, seed=5)
    assert torch.equal(torch.rand(3), expected)
