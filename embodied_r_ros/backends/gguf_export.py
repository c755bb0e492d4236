"""A checkpoint directory written as a GGUF file (llama.cpp's format): a trained reasoner as robots load it.

:func:`export_gguf` writes a llama or qwen2 checkpoint (config.json + safetensors, e.g. the output of
``embodied-r models merge``) the way llama.cpp's ``convert_hf_to_gguf.py`` lays it out, so that llama.cpp
and transformers' GGUF reader (and with it ``--lm FILE.gguf``, see :mod:`.gguf`) both read it:

- hyperparameters under ``<arch>.*`` keys;
- the byte-level BPE tokenizer: tokens padded to the embedding rows with ``[PADn]``, token types (added
  special tokens CONTROL, other added tokens USER_DEFINED), merges, special ids, the pre-tokenizer's
  llama.cpp name and the chat template;
- tensors under llama.cpp's names (the ``gguf`` package's name map); with tied embeddings there is no
  ``output.weight`` (llama.cpp then uses ``token_embd``). For llama, attn_q/attn_k rows are permuted as
  llama.cpp's ``LlamaModel.permute`` does (its rope pairs dimensions differently; transformers undoes it
  when it reads a llama GGUF);
- ``q8_0`` stores every 2-D weight as Q8_0 (blocks of 32 int8 and one f16 scale, 8.5 bits a weight) and
  the 1-D norms and biases as F32, like llama.cpp's ``--outtype q8_0``; ``f16`` and ``f32`` likewise.

The file is written next to its destination and renamed into place, so a reader never sees half of it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import BackendError
from .loading import check_model_dir

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

QUANTIZATIONS = ("q8_0", "f16", "f32")
ARCHITECTURES = ("llama", "qwen2")
GGUF_HINT = "pip install gguf==0.19.0 (pinned in requirements.txt)"
# llama.cpp's token types (gguf.TokenType), which transformers' reader turns into special / added tokens.
_NORMAL, _CONTROL, _USER_DEFINED, _UNUSED = 1, 3, 4, 5
# Buffers some older checkpoints save that are no weights: llama.cpp's converter drops them too.
_SKIPPED = re.compile(r"\.rotary_emb\.inv_freq$")


def _gguf() -> Any:
    try:
        import gguf
    except ImportError as exc:
        raise BackendError(f"writing a GGUF file needs the gguf package: {GGUF_HINT}") from exc
    return gguf


def _config(model_dir: Path) -> Any:
    """The checkpoint's transformers config; BackendError for a directory that is not a supported one."""
    if (model_dir / "adapter_config.json").is_file() and not (model_dir / "config.json").is_file():
        raise BackendError(
            f"{model_dir} is a LoRA adapter, not a model: export its base model with the adapter merged in "
            f"(`embodied-r models export BASE_DIR --adapter {model_dir} --out FILE.gguf`)"
        )
    if not model_dir.is_dir():
        raise BackendError(f"{model_dir} is not a directory; give a checkpoint directory (config.json)")
    check_model_dir(model_dir)
    if not next(model_dir.glob("*.safetensors"), None):
        raise BackendError(
            f"{model_dir} holds no *.safetensors weights (only pytorch_model*.bin?); save it again with "
            "save_pretrained(..., safe_serialization=True) and export that"
        )
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    if config.model_type not in ARCHITECTURES:
        raise BackendError(
            f"{model_dir} is a {config.model_type!r} model ({', '.join(config.architectures or [])}); GGUF "
            f"export supports {', '.join(ARCHITECTURES)} (e.g. SmolLM2, Qwen2.5). Use llama.cpp's "
            "convert_hf_to_gguf.py for other architectures"
        )
    return config


def _rope_theta(config: Any) -> float:
    rope = dict(getattr(config, "rope_parameters", None) or {})
    kind = rope.get("rope_type", "default")
    if kind != "default":
        raise BackendError(
            f"rope scaling {kind!r} is not supported by the GGUF export (only plain rope); use llama.cpp's "
            "convert_hf_to_gguf.py for this model"
        )
    return float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def _head_dim(config: Any) -> int:
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def _add_hyperparameters(writer: Any, config: Any, arch: str) -> None:
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(_rope_theta(config))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    head_dim = _head_dim(config)
    if head_dim != config.hidden_size // config.num_attention_heads:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    if arch == "llama":  # what llama.cpp's LlamaModel adds to the common keys
        writer.add_vocab_size(config.vocab_size)
        writer.add_rope_dimension_count(head_dim)


def tokenizer_pre(tokenizer_json: dict[str, Any]) -> str:
    """llama.cpp's name (``tokenizer.ggml.pre``) for the pre-tokenizer of a ``tokenizer.json``.

    A Split regex + ByteLevel is named by the regex, from transformers' table of the names it reads (the
    same names llama.cpp uses: "qwen2", "llama3", ...). Plain GPT-2 ByteLevel, or individual digits +
    ByteLevel (SmolLM's own tokenizer.json), is "smollm" when no token joins a digit to anything (the
    vocabulary was learnt on digits split one by one, as llama.cpp's "smollm" splits them: with such a
    vocabulary both give the same tokens), else "gpt-2". Anything else: BackendError.
    """
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    pre = tokenizer_json.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    kinds = [p.get("type") for p in parts]
    if kinds == ["Split", "ByteLevel"]:
        regex = parts[0].get("pattern", {}).get("Regex")
        for name, split in GGUF_PRE_TOKENIZER_SPLITS.items():
            if split == regex:
                return name
    digits_alone = all(len(t) == 1 for t in tokenizer_json["model"]["vocab"] if re.search(r"\d", t))
    if kinds == ["ByteLevel"] and parts[0].get("use_regex", True):
        return "smollm" if digits_alone else "gpt-2"
    if kinds == ["Digits", "ByteLevel"] and parts[0].get("individual_digits") and digits_alone:
        return "smollm"
    raise BackendError(
        f"the GGUF export cannot name this pre-tokenizer for llama.cpp ({json.dumps(pre)[:200]}); "
        f"it knows GPT-2/SmolLM byte-level and the Split regexes of {', '.join(GGUF_PRE_TOKENIZER_SPLITS)}"
    )


def _add_tokenizer(writer: Any, model_dir: Path, config: Any) -> None:
    """The byte-level BPE tokenizer as llama.cpp's converter writes it (``get_vocab_base``)."""
    from transformers import AutoTokenizer

    tokenizer_file = model_dir / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise BackendError(f"{model_dir} has no tokenizer.json; save the tokenizer with the model")
    tokenizer_json = json.loads(tokenizer_file.read_text(encoding="utf-8"))
    if tokenizer_json["model"].get("type") != "BPE":
        raise BackendError(
            f"{model_dir}'s tokenizer is {tokenizer_json['model'].get('type')}, not byte-level BPE; the GGUF "
            "export writes only GPT-2-style tokenizers (those of SmolLM2, Qwen2, Llama 3)"
        )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    by_id = {i: t for t, i in tokenizer.get_vocab().items()}
    added = tokenizer.added_tokens_decoder
    tokens, types = [], []
    for i in range(config.vocab_size):
        token = by_id.get(i)
        if token is None:  # embedding rows beyond the tokenizer (Qwen pads them)
            tokens.append(f"[PAD{i}]")
            types.append(_UNUSED)
        else:
            tokens.append(token)
            types.append(_NORMAL if i not in added else _CONTROL if added[i].special else _USER_DEFINED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer_json["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(tokenizer_pre(tokenizer_json))
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    # The model's own ids first (config.json), then the tokenizer's.
    for add, key in (
        (writer.add_bos_token_id, "bos_token_id"),
        (writer.add_eos_token_id, "eos_token_id"),
        (writer.add_unk_token_id, "unk_token_id"),
        (writer.add_pad_token_id, "pad_token_id"),
    ):
        value = getattr(config, key, None)
        value = getattr(tokenizer, key, None) if value is None else value
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            add(int(value))
    bos = tokenizer.bos_token_id
    plain, marked = (tokenizer("a", add_special_tokens=s)["input_ids"] for s in (False, True))
    writer.add_add_bos_token(bool(bos is not None and marked[:1] == [bos] and plain[:1] != [bos]))
    writer.add_add_space_prefix(False)
    if tokenizer.chat_template:
        writer.add_chat_template(tokenizer.chat_template)
    else:
        logger.warning("%s has no chat template; the node refuses a GGUF without one as its LM", model_dir)


def _permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute`` of q/k rows: each head's rotary halves interleaved in pairs."""
    pairs = weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
    return pairs.swapaxes(1, 2).reshape(weights.shape)


def _tensors(model_dir: Path, config: Any, arch: str) -> Iterator[tuple[str, np.ndarray]]:
    """(llama.cpp name, float32 array) of every weight, in the checkpoint's order."""
    from safetensors import safe_open

    gguf = _gguf()
    model_arch = gguf.MODEL_ARCH.LLAMA if arch == "llama" else gguf.MODEL_ARCH.QWEN2
    names = gguf.get_tensor_name_map(model_arch, config.num_hidden_layers)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    seen = set()
    for file in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as weights:
            for name in weights.keys():
                if _SKIPPED.search(name) or (tied and name == "lm_head.weight"):
                    continue
                stem, suffix = name.rsplit(".", 1)
                gguf_name = names.get_name(stem)
                if gguf_name is None:
                    raise BackendError(f"{file.name}: no llama.cpp name for tensor {name!r} ({arch})")
                data = weights.get_tensor(name).float().numpy()
                if arch == "llama" and gguf_name.endswith(".attn_q"):
                    data = _permute(data, config.num_attention_heads)
                elif arch == "llama" and gguf_name.endswith(".attn_k"):
                    data = _permute(data, config.num_key_value_heads)
                seen.add(gguf_name)
                yield f"{gguf_name}.{suffix}", data
    if not tied and "output" not in seen:
        raise BackendError(f"{model_dir}: the embeddings are not tied but there is no lm_head.weight")


def _encoded(gguf: Any, name: str, data: np.ndarray, quantization: str) -> tuple[np.ndarray, Any]:
    """(data, ggml type) of one tensor: 1-D in F32, 2-D in the chosen type."""
    import numpy as np

    types = gguf.GGMLQuantizationType
    if data.ndim == 1 or quantization == "f32":
        return data.astype(np.float32), types.F32
    if quantization == "q8_0":
        try:
            return gguf.quants.quantize(data, types.Q8_0), types.Q8_0
        except gguf.quants.QuantError as exc:  # rows not a multiple of the 32-weight block: as llama.cpp does
            logger.warning("%s: %s; stored as F16", name, exc)
    return data.astype(np.float16), types.F16


def _write(model_dir: Path, out_file: Path, quantization: str, name: str) -> None:
    gguf = _gguf()
    config = _config(model_dir)
    arch = config.model_type
    writer = gguf.GGUFWriter(str(out_file), arch)
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(name)
    _add_hyperparameters(writer, config, arch)
    file_type = {"q8_0": "MOSTLY_Q8_0", "f16": "MOSTLY_F16", "f32": "ALL_F32"}[quantization]
    writer.add_file_type(getattr(gguf.LlamaFileType, file_type))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    _add_tokenizer(writer, model_dir, config)
    for tensor_name, data in _tensors(model_dir, config, arch):
        encoded, ggml_type = _encoded(gguf, tensor_name, data, quantization)
        writer.add_tensor(tensor_name, encoded, raw_dtype=ggml_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def export_gguf(model_dir: Path | str, out_file: Path | str, quantization: str = "q8_0") -> Path:
    """Write the checkpoint directory ``model_dir`` (llama or qwen2) as the GGUF file ``out_file``.

    ``quantization``: ``q8_0`` (2-D weights Q8_0, ~1.06 bytes a weight: SmolLM2-135M in ~145 MB), ``f16``
    or ``f32``; 1-D tensors (norms, biases) are F32 in all three. Returns ``out_file``, replaced atomically
    if it exists. Raises :class:`BackendError` for a directory that is no checkpoint, an architecture,
    rope scaling or tokenizer the export does not write, and a missing ``gguf`` package, naming the fix.
    """
    model_dir, out_file = Path(model_dir).expanduser(), Path(out_file).expanduser()
    if quantization not in QUANTIZATIONS:
        raise BackendError(f"unknown quantization {quantization!r}; choose one of {', '.join(QUANTIZATIONS)}")
    if out_file.is_dir():
        raise BackendError(f"{out_file} is a directory; give the path of the .gguf file to write")
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.parent / f".{out_file.name}.tmp-{os.getpid()}"
    try:
        _write(model_dir, tmp, quantization, out_file.stem)
        os.replace(tmp, out_file)
    finally:
        tmp.unlink(missing_ok=True)
    return out_file
