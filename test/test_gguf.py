"""GGUF files as models: SmolLM2-135M-Instruct from its PyPI package, and a GGUF written from the tiny LM.

Everything runs the real code paths: transformers' GGUF reader, the conversion, the model cache and the
project's own backend loader. The SmolLM2 conversion (~20-40 s) happens once per session (or never, when
$EMBODIED_R_SMOLLM2 points at ``make``'s converted directory).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from embodied_r_ros.backends import BackendError, ChatMessage, load_backend, resolve_model_dir
from embodied_r_ros.backends.gguf import MARKER, convert_gguf, read_marker
from embodied_r_ros.backends.gguf_export import export_gguf
from embodied_r_ros.config import model_config
from embodied_r_ros.testing.tiny_models import LM_SUBDIR

gguf = pytest.importorskip("gguf", reason="pip install gguf==0.19.0 (requirements.txt)")

CHAT = [ChatMessage.text("user", "What is the capital of France? Answer in one word.")]


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory, tiny_models_dir: Path) -> Path:
    """The tiny Qwen2 LM written as ``tiny-qwen2.gguf`` (F32, by the project's own GGUF export)."""
    out = tmp_path_factory.mktemp("tiny_gguf") / "tiny-qwen2.gguf"
    return export_gguf(tiny_models_dir / LM_SUBDIR, out, quantization="f32")


@pytest.fixture
def gguf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh GGUF conversion cache ($EMBODIED_R_CACHE) for one test."""
    monkeypatch.setenv("EMBODIED_R_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gguf"


def _logits(backend, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return backend.model(torch.tensor([ids])).logits[0]


def test_smollm2_loads_through_the_backend_and_answers(smollm2_dir: Path):
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["vocab_size"] == 49152 and config["num_hidden_layers"] == 30
    generation = json.loads((smollm2_dir / "generation_config.json").read_text())
    assert not {"temperature", "top_p", "top_k", "do_sample"} & set(generation)  # greedy means greedy

    backend = load_backend(model_config(str(smollm2_dir), device="cpu"), vision=False)
    try:
        assert backend.tokenizer.convert_ids_to_tokens(generation["eos_token_id"]) == "<|im_end|>"
        assert "<|im_start|>" in backend.tokenizer.chat_template
        (reply,) = backend.generate([CHAT], max_new_tokens=12, temperature=0.0)
    finally:
        backend.close()
    # A wrongly converted model (permuted q/k, wrong tokenizer) babbles; the real one knows this.
    assert "Paris" in reply, reply


def test_a_gguf_file_is_a_model_name_and_matches_its_source(tiny_models_dir, tiny_gguf: Path, gguf_cache):
    source = load_backend(model_config(str(tiny_models_dir / LM_SUBDIR), device="cpu"), vision=False)
    converted = load_backend(model_config(str(tiny_gguf), device="cpu"), vision=False)
    try:
        assert converted.path.parent == gguf_cache and converted.path.name.endswith("-tiny-qwen2")
        # The tokenizer survived: the same chat renders to the same ids, special tokens included.
        prompt = [{"role": "user", "content": "<think>Is the red chair to the left?</think>"}]
        render = {"add_generation_prompt": True, "tokenize": False}
        text = source.tokenizer.apply_chat_template(prompt, **render)
        assert converted.tokenizer.apply_chat_template(prompt, **render) == text
        token_ids = source.tokenizer(text)["input_ids"]
        assert converted.tokenizer(text)["input_ids"] == token_ids
        torch.testing.assert_close(_logits(converted, token_ids), _logits(source, token_ids))
        # llama.cpp pads the token list to the embedding rows with [PADn]; the random model emits some,
        # which the source tokenizer decodes to nothing.
        (expected,) = source.generate([CHAT], max_new_tokens=12, temperature=0.0)
        (reply,) = converted.generate([CHAT], max_new_tokens=12, temperature=0.0)
        assert expected and re.sub(r"\[PAD\d+\]", "", reply) == expected
    finally:
        source.close()
        converted.close()


def test_the_second_resolve_is_a_cache_hit(tiny_gguf: Path, gguf_cache):
    first = resolve_model_dir(str(tiny_gguf))
    stamp = (first / MARKER).stat().st_mtime_ns
    weights = (first / "model.safetensors").stat().st_mtime_ns
    assert resolve_model_dir(str(tiny_gguf)) == first
    assert (first / MARKER).stat().st_mtime_ns == stamp
    assert (first / "model.safetensors").stat().st_mtime_ns == weights
    marker = read_marker(first)
    assert marker["source_name"] == tiny_gguf.name and marker["source_size"] == tiny_gguf.stat().st_size


def test_conversion_is_reproducible_and_redone_when_the_source_changes(tiny_gguf: Path, tmp_path: Path):
    a, b = convert_gguf(tiny_gguf, tmp_path / "a"), convert_gguf(tiny_gguf, tmp_path / "b")
    files = sorted(p.name for p in a.iterdir())
    assert files == sorted(p.name for p in b.iterdir()) and "model.safetensors" in files
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert len({(a / f).stat().st_mode for f in files}) == 1  # the weights are not left 0600

    changed = tmp_path / "changed.gguf"
    changed.write_bytes(tiny_gguf.read_bytes() + b"\0" * 32)  # same model, different file
    before = read_marker(a)["source_sha256"]
    convert_gguf(changed, a)
    assert read_marker(a)["source_sha256"] != before
    assert not list(tmp_path.glob(".a.tmp-*")) and not list(tmp_path.glob(".a.old-*"))  # no leftovers


def test_a_file_that_is_not_gguf_is_a_clear_error(tmp_path: Path, gguf_cache):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(BackendError, match=r"model\.gguf is not a GGUF file"):
        resolve_model_dir(str(fake))
    with pytest.raises(BackendError, match="does not exist"):
        resolve_model_dir(str(tmp_path / "missing.gguf"))


def test_an_architecture_transformers_cannot_read_names_the_supported_ones(tmp_path: Path, gguf_cache):
    path = tmp_path / "rwkv.gguf"
    writer = gguf.GGUFWriter(str(path), "rwkv6")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    expected = r"rwkv\.gguf holds architecture 'rwkv6'.*supported: .*llama.*qwen2"
    with pytest.raises(BackendError, match=expected):
        resolve_model_dir(str(path))


def test_a_directory_in_the_way_is_left_alone(tiny_gguf: Path, tmp_path: Path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(BackendError, match="not a GGUF conversion"):
        convert_gguf(tiny_gguf, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_training_takes_a_gguf_policy(tiny_gguf: Path, gguf_cache):
    from embodied_r_training.rl.loading import resolve_policy

    path = resolve_policy(str(tiny_gguf))
    assert path.parent == gguf_cache and (path / "config.json").is_file()
