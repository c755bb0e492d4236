"""GPU check (issue 13): real model sizes, query latency and memory, one GRPO step, in one command.

What it measures, with architecture-true models built from their configs (``bench/gpu_configs/``: the
public config.json, generation_config.json and preprocessor_config.json of Qwen2.5-VL-7B-Instruct,
Qwen2.5-VL-72B-Instruct and Qwen2.5-3B-Instruct) and RANDOM weights made on the GPU, nothing downloaded
and nothing written to disk:

1. ``model_sizes``: parameters, bf16 weight GiB and KV-cache bytes per token of each config (meta device).
2. ``query_robot``: the robot configuration, 7B VLM + 3B LM in bf16, one end-to-end query through the
   project's own pipeline (:class:`~embodied_r_ros.pipeline.EmbodiedR`) with 8, 16 and 32 key frames of
   640x480: perception, reasoning and total seconds, peak GPU memory; then, for 8 key frames, one VLM
   call per key frame (the paper's way) against the pipeline's one batched call, as a ratio.
3. ``grpo``: GRPO steps of the 3B reasoner with LoRA through ``embodied-r train``'s own trainer code
   (``training/configs/embodied_r_lora.yaml``: 32 completions per step, 8 rollouts x 4 prompts), without
   and with the consistency reward's in-process reference (the base weights, adapter switched off).
4. ``query_72b``: the paper's 72B VLM shape, perception of 8 key frames, reported separately. Its bf16
   weights (137 GiB) are built whole only if they and ``--large-margin-gib`` fit in free memory; else (or
   on OOM) it is reported as OOM and measured with half its text layers (labelled, and extrapolated to
   all layers as an upper bound).
5. ``grpo_max_length``: one GRPO step with the paper's maximum completion length (2048), if time is left.

Token counts are forced, since random weights never stop on their own: every description is exactly
``--description-tokens`` (128) new tokens and every answer ``--reasoning-tokens`` (512); GRPO completions
are exactly ``--grpo-completion-tokens`` (256, the paper's early response length; it falls to ~100 as
training goes on). Text goes through the project's tiny offline tokenizer (Qwen's special tokens and chat
template, a small vocabulary); the configs' special-token ids are mapped onto it, and generated ids
beyond its vocabulary are folded into it for decoding, so descriptions read back at about their real
token count. Images go through the real Qwen2.5-VL image processor settings: a 640x480 frame becomes
644x476 pixels, 34x46 patches, 391 tokens, as with the real checkpoint.

Every section has a rough time estimate for one H200; a section that no longer fits in ``--budget-s`` is
skipped and reported as such, an out-of-memory error is reported as OOM, and the JSON and Markdown are
rewritten after every figure, so a run cut short still leaves what it measured.

``--tiny`` runs the same code on the project's tiny models (configs of ``embodied-r tiny-models``, random
weights) on the CPU in seconds: the test of this script. Its figures are no measurement.

Run (repository root; needs no ROS and no rosbags, only the core and the training package):
    python bench/gpu_check.py --out out/gpu_check            # on a GPU machine, <= 8 minutes on one H200
    python bench/gpu_check.py --tiny --out out/gpu_check_tiny  # anywhere, seconds
On the lent GPU machine (no TRL, no datasets there): ``make gpu-wheels`` here, carry bench/wheels, and
    python3 -m pip install -q --no-index --no-deps --target /tmp/site bench/wheels/*.whl
    PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 python3 bench/gpu_check.py --out $OUT
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import logging
import os
import platform
import random
import resource
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
# The core and the training package straight from the checkout when they are not installed (GPU machine).
for _path in (REPO, REPO / "training"):
    if str(_path) not in sys.path:
        sys.path.append(str(_path))

import torch  # noqa: E402

from embodied_r_ros.config import ModelConfig  # noqa: E402
from embodied_r_ros.testing.tiny_models import (  # noqa: E402
    LM_SUBDIR,
    SPECIAL_TOKENS,
    VLM_SUBDIR,
    ensure_tiny_models,
)

CONFIGS = REPO / "bench" / "gpu_configs"
VLM_7B, VLM_72B, LM_3B = "qwen2.5-vl-7b-instruct", "qwen2.5-vl-72b-instruct", "qwen2.5-3b-instruct"
GRPO_CONFIG = REPO / "training" / "configs" / "embodied_r_lora.yaml"
WHEELS = REPO / "bench" / "wheels"
# Qwen2/2.5 give their special tokens consecutive ids from <|endoftext|> = 151643, in SPECIAL_TOKENS order.
QWEN_SPECIAL_IDS = {151643 + i: token for i, token in enumerate(SPECIAL_TOKENS)}
QUESTION = "Which object did I pass first on my way to the door?"
OPTIONS = ("the red chair", "the lamp", "the door", "the sofa")
FRAME_SIZE = (640, 480)  # (width, height) of the key frames
GIB = 2**30

# Goals of issue 13 (recorded with the figures, met or not).
GOALS = {
    "query_8_keyframes_total_s": 2.0,  # 7B VLM + 3B LM on one H200, end to end
    "batched_vs_per_frame_ratio": 3.0,  # batched perception at least this much faster
    "robot_peak_gib": 24.0,  # 7B + 3B in bf16 within a 24 GB card
    "paper_sequential_72b_query_s": 157.6,  # the paper's pipeline on its hardware (for comparison only)
}
SECTIONS = ("model_sizes", "query_robot", "grpo", "query_72b", "grpo_max_length")
# Rough seconds on one H200, to decide what still fits in the budget (the tiny run ignores them).
ESTIMATE_S = {
    "model_sizes": 15,
    "query_robot": 60,  # model build + warm-up; each query has its own estimate below
    "query": {8: 25, 16: 30, 32: 40, "per_frame": 35},
    "grpo": 60,  # per run (two runs), two steps each
    "query_72b": 90,
    "grpo_max_length": 150,
}


@dataclasses.dataclass(frozen=True)
class Profile:
    """Sizes and devices of one run: the real GPU check, or the tiny CPU dry run of the same code."""

    tiny: bool
    device: torch.device
    dtype: torch.dtype
    attn: str
    vlm: Path  # a directory with config.json (+ generation_config.json, preprocessor_config.json)
    lm: Path
    vlm_large: Path
    keyframes: tuple[int, ...]
    per_frame_keyframes: int
    description_tokens: int
    reasoning_tokens: int
    grpo_prompt_keyframes: int  # the paper's data averages 20.7 key frames per question
    grpo_completion_tokens: int
    grpo_max_completion_tokens: int
    grpo_steps: int
    large_fallback_layers: int
    large_margin_gib: float  # activations and workspace the large VLM needs beyond its weights

    def estimate(self, key: str, sub: Any = None) -> float:
        """The H200 time estimate of a section (0 for the tiny run, which always fits)."""
        if self.tiny:
            return 0.0
        value = ESTIMATE_S[key]
        if isinstance(value, dict):  # a key-frame count without its own estimate gets the largest
            return float(value.get(sub, max(value.values())))
        return float(value)


class Budget:
    """Wall-clock budget of the whole run; sections that no longer fit are skipped."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def allows(self, estimate: float) -> bool:
        return self.left() >= estimate

    def skip_reason(self, estimate: float) -> str:
        return f"skipped: budget (needs ~{estimate:.0f} s, {max(self.left(), 0):.0f} s left)"


# ----------------------------------------------------------------------------------------------------
# Memory and time


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: torch.device) -> dict[str, Any]:
    """Peak memory since :func:`reset_peak`: the CUDA caching allocator's reserved and allocated bytes
    (the CUDA context, ~0.5 GiB, comes on top), or on the CPU the process's max RSS (never reset)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return {
            "peak_gib": torch.cuda.max_memory_reserved(device) / GIB,
            "peak_allocated_gib": torch.cuda.max_memory_allocated(device) / GIB,
            "peak_kind": "cuda max_memory_reserved",
        }
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak_gib": rss_kib / 2**20, "peak_allocated_gib": None, "peak_kind": "process max RSS (CPU)"}


def release(device: torch.device) -> None:
    """Give freed model memory back (after a section's objects went out of scope)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def free_memory_gib(device: torch.device) -> float:
    """Memory free for new tensors: on a GPU the driver's free bytes, on the CPU the available RAM."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0] / GIB
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / GIB


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


# ----------------------------------------------------------------------------------------------------
# Models: configs staged with the stand-in tokenizer, random weights made on the device


def remap_token_ids(value: Any, ids: dict[str, int]) -> Any:
    """``value`` (a config mapping) with every Qwen special-token id replaced by the stand-in tokenizer's id
    of the same token, in ``*_token_id`` / ``*_token_ids`` entries at any depth."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key.endswith(("token_id", "token_ids")):
                out[key] = remap_token_ids(item, ids) if isinstance(item, list) else _remap_one(item, ids)
            else:
                out[key] = remap_token_ids(item, ids) if isinstance(item, (dict, list)) else item
        return out
    if isinstance(value, list):
        return [
            _remap_one(item, ids) if isinstance(item, int) else remap_token_ids(item, ids) for item in value
        ]
    return value


def _remap_one(item: Any, ids: dict[str, int]) -> Any:
    if isinstance(item, int) and item in QWEN_SPECIAL_IDS:
        return ids[QWEN_SPECIAL_IDS[item]]
    return item


def stage_checkpoint(source: Path, tokenizer: Any, out: Path, text_layers: int | None = None) -> Path:
    """A checkpoint folder without weights: ``source``'s configs with the stand-in tokenizer's token ids,
    optionally ``text_layers`` language layers, and the tokenizer itself. Returns ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    ids = dict(zip(SPECIAL_TOKENS, tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS)), strict=True))
    for name in ("config.json", "generation_config.json", "preprocessor_config.json"):
        path = source / name
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        if name == "config.json" and text_layers is not None:
            text = data.get("text_config", data)
            text["num_hidden_layers"] = text_layers
            text["max_window_layers"] = min(int(text.get("max_window_layers", text_layers)), text_layers)
            if isinstance(text.get("layer_types"), list):
                text["layer_types"] = text["layer_types"][:text_layers]
        (out / name).write_text(json.dumps(remap_token_ids(data, ids), indent=1) + "\n")
    tokenizer.save_pretrained(out)
    return out


def model_class(config: Any) -> Any:
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    return AutoModelForImageTextToText if hasattr(config, "vision_config") else AutoModelForCausalLM


def build_model(checkpoint: Path, device: torch.device, dtype: torch.dtype, attn: str, seed: int = 0) -> Any:
    """The model of ``checkpoint``'s config with random weights, made directly on ``device`` in ``dtype``
    (no copy in CPU memory, nothing on disk), with the checkpoint's generation config."""
    from transformers import AutoConfig, GenerationConfig

    config = AutoConfig.from_pretrained(checkpoint)
    torch.manual_seed(seed)
    with torch.device(device):
        model = model_class(config).from_config(config, dtype=dtype, attn_implementation=attn)
    if next(model.parameters()).device != device:  # a transformers version that ignores the device context
        model.to(device)
    if (checkpoint / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(checkpoint)
    return model.eval()


def weight_gib(model: Any) -> float:
    return sum(p.numel() * p.element_size() for p in model.parameters()) / GIB


def model_size(config_dir: Path) -> dict[str, Any]:
    """Parameters, bf16 weight size and KV-cache bytes per token of a config (built on the meta device)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(config_dir)
    with torch.device("meta"):
        model = model_class(config).from_config(config, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    text = getattr(config, "text_config", config)
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    size = {
        "architecture": type(model).__name__,
        "params": params,
        "params_b": params / 1e9,
        "bf16_weights_gib": params * 2 / GIB,
        "text_layers": text.num_hidden_layers,
        "hidden_size": text.hidden_size,
        "vocab_size": text.vocab_size,
        "kv_cache_bytes_per_token_bf16": 2 * text.num_hidden_layers * text.num_key_value_heads * head_dim * 2,
    }
    if hasattr(config, "vision_config"):
        vision = config.vision_config
        size["vision"] = {"depth": vision.depth, "hidden_size": vision.hidden_size}
        size["image_tokens_per_keyframe"] = image_tokens(config_dir)
    return size


def image_tokens(config_dir: Path) -> int:
    """LM tokens of one key frame (``FRAME_SIZE``) after the checkpoint's image processor and 2x2 merge."""
    import numpy as np
    from transformers import AutoImageProcessor

    processor = AutoImageProcessor.from_pretrained(config_dir, backend="pil")
    image = np.zeros((FRAME_SIZE[1], FRAME_SIZE[0], 3), dtype=np.uint8)
    grid = processor(images=[image], return_tensors="pt", input_data_format="channels_last")["image_grid_thw"]
    return int(grid.prod()) // processor.merge_size**2


# ----------------------------------------------------------------------------------------------------
# Backends over models in memory


class TokenCounter:
    """Counts what a backend's model sees and writes: prompt tokens (image tokens included) and new tokens.

    Wraps the backend's ``prepare`` and ``generate_ids`` on the instance; :meth:`take` returns and resets.
    """

    def __init__(self, backend: Any, image_token_id: int | None = None) -> None:
        self.image_token_id = image_token_id
        self.calls = 0
        self.prompt_tokens = self.max_prompt_tokens = self.image_tokens = self.new_tokens = 0
        prepare, generate_ids = backend.prepare, backend.generate_ids

        def counted_prepare(*args: Any, **kwargs: Any) -> dict[str, Any]:
            inputs = prepare(*args, **kwargs)
            mask = inputs["attention_mask"]
            self.calls += 1
            self.prompt_tokens += int(mask.sum())
            self.max_prompt_tokens = max(self.max_prompt_tokens, int(mask.sum(-1).max()))
            if self.image_token_id is not None:
                self.image_tokens += int((inputs["input_ids"] == self.image_token_id).sum())
            return inputs

        def counted_generate_ids(*args: Any, **kwargs: Any) -> Any:
            output = generate_ids(*args, **kwargs)
            self.new_tokens += sum(len(ids) for ids in output.token_ids)
            return output

        backend.prepare, backend.generate_ids = counted_prepare, counted_generate_ids

    def take(self) -> dict[str, int]:
        counts = {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "max_prompt_tokens": self.max_prompt_tokens,
            "new_tokens": self.new_tokens,
        }
        if self.image_token_id is not None:
            counts["image_tokens"] = self.image_tokens
        self.calls = self.prompt_tokens = self.max_prompt_tokens = self.image_tokens = self.new_tokens = 0
        return counts


def fold_decoding(backend: Any, vocab: int) -> None:
    """Decode generated ids modulo the stand-in tokenizer's base vocabulary (random weights draw from all
    ~152k ids; unknown ids would decode to nothing and shorten every description)."""
    decode = backend.decode
    backend.decode = lambda token_ids: decode([[t % vocab for t in row] for row in token_ids])


def text_backend(name: str, model: Any, tokenizer: Any, new_tokens: int) -> Any:
    """A text-only :class:`TransformersBackend` over ``model``, forced to write ``new_tokens`` tokens."""
    from embodied_r_ros.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend.from_model(
        ModelConfig(model=name, max_new_tokens=new_tokens), model, tokenizer
    )
    force_length(backend, new_tokens)
    fold_decoding(backend, tokenizer.vocab_size)
    return backend


def vision_backend(name: str, model: Any, tokenizer: Any, checkpoint: Path, new_tokens: int) -> Any:
    """A VLM :class:`TransformersBackend` over ``model`` with ``checkpoint``'s image processor.

    ``from_model`` makes text-only backends; the vision parts are set as ``TransformersBackend.__init__``
    sets them when it loads a checkpoint (PIL image processor, image-token check, encoded-image cache).
    """
    from transformers import AutoImageProcessor

    from embodied_r_ros.backends.image_cache import EncodedImageCache
    from embodied_r_ros.backends.transformers_backend import IMAGE_TOKEN

    backend = text_backend(name, model, tokenizer, new_tokens)
    image_token_id = backend.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    if image_token_id != model.config.image_token_id:
        raise RuntimeError(
            f"{name}: {IMAGE_TOKEN} is {image_token_id}, config says {model.config.image_token_id}"
        )
    backend.path = checkpoint
    backend.supports_images = backend.is_vision_language = True
    backend.image_processor = AutoImageProcessor.from_pretrained(checkpoint, backend="pil")
    backend.image_cache = EncodedImageCache(int(backend.config.transformers.image_cache_mb * 2**20))
    return backend


def force_length(backend: Any, new_tokens: int) -> None:
    """Make every reply exactly ``new_tokens`` long (end-of-sequence suppressed until then)."""
    backend.config = dataclasses.replace(backend.config, max_new_tokens=new_tokens)
    backend.model.generation_config.min_new_tokens = new_tokens


@contextlib.contextmanager
def short_replies(*backends: Any, new_tokens: int = 4) -> Iterator[None]:
    """Warm-up calls with ``new_tokens`` tokens, the forced lengths restored afterwards."""
    saved = [backend.config.max_new_tokens for backend in backends]
    for backend in backends:
        force_length(backend, new_tokens)
    try:
        yield
    finally:
        for backend, length in zip(backends, saved, strict=True):
            force_length(backend, length)


def make_keyframes(count: int) -> list[Any]:
    """``count`` distinct 640x480 key frames (with poses) of the synthetic robot clip, one per second."""
    from embodied_r_ros.keyframes import KeyFrame
    from embodied_r_ros.testing.synthetic_clip import synthetic_clip

    clip = synthetic_clip(seconds=float(count), fps=1.0, size=FRAME_SIZE)
    return [KeyFrame(frame=frame, index=i) for i, frame in enumerate(clip.frames[:count])]


# ----------------------------------------------------------------------------------------------------
# Sections


def section_model_sizes(profile: Profile, ctx: RunContext) -> dict[str, Any]:
    """Sizes of the shipped real configs (always the real ones, also in the tiny run)."""
    models = {name: model_size(CONFIGS / name) for name in (VLM_7B, LM_3B, VLM_72B)}
    robot = models[VLM_7B]["bf16_weights_gib"] + models[LM_3B]["bf16_weights_gib"]
    return {"status": "ok", "models": models, "robot_bf16_weights_gib": robot}


def run_query(
    pipeline: Any, vlm: Any, counters: dict[str, TokenCounter], keyframes: list[Any], device: Any
) -> dict:
    """One end-to-end query, cold (no key frame encoded before), then the vision tower alone on its frames."""
    vlm.image_cache.clear()
    for counter in counters.values():
        counter.take()
    reset_peak(device)
    start = time.perf_counter()
    answer = pipeline.answer(QUESTION, OPTIONS, keyframes=keyframes)
    total = time.perf_counter() - start
    memory = peak_memory(device)
    vlm.image_cache.clear()
    synchronize(device)
    start = time.perf_counter()
    vlm.encode_images([k.frame.image for k in keyframes])
    synchronize(device)
    encode = time.perf_counter() - start
    vlm.image_cache.clear()
    return {
        "keyframes": len(keyframes),
        "status": "ok",
        "perception_s": answer.perception_s,
        "reasoning_s": answer.reasoning_s,
        "total_s": total,
        "vision_encode_s": encode,  # part of perception_s; the node does it while idle (pre-encoding)
        **memory,
        "perception_tokens": counters["vlm"].take(),
        "reasoning_tokens": counters["lm"].take(),
    }


def run_per_frame(perceiver: Any, vlm: Any, keyframes: list[Any], device: Any) -> float:
    """Seconds to describe ``keyframes`` with one VLM call per key frame (the paper's way), cold cache."""
    requests = perceiver.requests(keyframes, QUESTION, OPTIONS)
    vlm.image_cache.clear()
    synchronize(device)
    start = time.perf_counter()
    for request in requests:
        vlm.generate([request])
    seconds = time.perf_counter() - start
    vlm.image_cache.clear()
    return seconds


def section_query_robot(profile: Profile, ctx: RunContext) -> dict[str, Any]:
    """7B VLM + 3B LM through EmbodiedR: 8/16/32 key frames, and per-frame calls vs one batched call."""
    from embodied_r_ros.perception import Perceiver
    from embodied_r_ros.pipeline import EmbodiedR
    from embodied_r_ros.reasoning.messages import Reasoner

    result: dict[str, Any] = {"status": "running", "vlm": profile.vlm.name, "lm": profile.lm.name, "runs": []}
    ctx.publish("query_robot", result)
    start = time.perf_counter()
    vlm_dir = stage_checkpoint(profile.vlm, ctx.tokenizer, ctx.scratch / "vlm")
    lm_dir = stage_checkpoint(profile.lm, ctx.tokenizer, ctx.scratch / "lm")
    vlm_model = build_model(vlm_dir, profile.device, profile.dtype, profile.attn)
    lm_model = build_model(lm_dir, profile.device, profile.dtype, profile.attn, seed=1)
    vlm = vision_backend(profile.vlm.name, vlm_model, ctx.tokenizer, vlm_dir, profile.description_tokens)
    lm = text_backend(profile.lm.name, lm_model, ctx.tokenizer, profile.reasoning_tokens)
    counters = {"vlm": TokenCounter(vlm, vlm_model.config.image_token_id), "lm": TokenCounter(lm)}
    perceiver = Perceiver(vlm)
    pipeline = EmbodiedR(perceiver, Reasoner(lm))
    synchronize(profile.device)
    result["build_s"] = time.perf_counter() - start
    result["weights_gib"] = weight_gib(vlm_model) + weight_gib(lm_model)
    start = time.perf_counter()
    with short_replies(vlm, lm):  # CUDA context, kernels and the allocator warm up here, not in a figure
        pipeline.answer(QUESTION, OPTIONS, keyframes=make_keyframes(2))
    result["warmup_s"] = time.perf_counter() - start
    ctx.publish("query_robot", result)

    for count in profile.keyframes:
        if not ctx.budget.allows(profile.estimate("query", count)):
            result["runs"].append(
                {"keyframes": count, "status": ctx.budget.skip_reason(profile.estimate("query", count))}
            )
            continue
        run = ctx.guarded(
            lambda count=count: run_query(pipeline, vlm, counters, make_keyframes(count), profile.device)
        )
        run.setdefault("keyframes", count)
        result["runs"].append(run)
        ctx.publish("query_robot", result)
        ctx.say(f"query_robot {count} key frames: {summarize_run(run)}")
        if count == profile.per_frame_keyframes:
            result["per_frame"] = per_frame_comparison(profile, ctx, perceiver, vlm, run)
            ctx.publish("query_robot", result)
    result["status"] = "ok"
    return result


def per_frame_comparison(profile: Profile, ctx: RunContext, perceiver: Any, vlm: Any, batched: dict) -> dict:
    """The pipeline's batched perception of a query against one VLM call per key frame, same key frames."""
    count = profile.per_frame_keyframes
    if batched.get("status") != "ok":
        return {"keyframes": count, "status": "skipped: the batched query did not run"}
    if not ctx.budget.allows(profile.estimate("query", "per_frame")):
        return {"keyframes": count, "status": ctx.budget.skip_reason(profile.estimate("query", "per_frame"))}

    def measure() -> dict[str, Any]:
        seconds = run_per_frame(perceiver, vlm, make_keyframes(count), profile.device)
        return {
            "status": "ok",
            "batched_s": batched["perception_s"],
            "per_frame_s": seconds,
            "ratio": seconds / batched["perception_s"],
        }

    comparison = {"keyframes": count, **ctx.guarded(measure)}
    ctx.say(f"per-frame vs batched perception, {count} key frames: {comparison}")
    return comparison


def section_query_72b(profile: Profile, ctx: RunContext) -> dict[str, Any]:
    """The 72B VLM's perception of 8 key frames alone; with half its text layers if the whole does not fit."""
    result: dict[str, Any] = {"status": "running", "vlm": profile.vlm_large.name}
    # Building 137 GiB of weights only to run out of memory in the first forward pass would cost a minute.
    weights = (
        model_size(profile.vlm_large)["params"] * torch.tensor([], dtype=profile.dtype).element_size() / GIB
    )
    free = free_memory_gib(profile.device)
    if weights + profile.large_margin_gib > free:
        full = {
            "status": "OOM (predicted: weights + margin > free memory)",
            "weights_gib": weights,
            "margin_gib": profile.large_margin_gib,
            "free_gib": free,
        }
    else:
        full = ctx.guarded(lambda: measure_large_vlm(profile, ctx, None))
    result["full"] = full
    ctx.publish("query_72b", result)
    if full.get("status", "").startswith("OOM") and profile.large_fallback_layers:
        release(profile.device)
        layers = profile.large_fallback_layers
        if ctx.budget.allows(profile.estimate("query_72b") / 2):
            reduced = ctx.guarded(lambda: measure_large_vlm(profile, ctx, layers))
            result["reduced"] = reduced
        else:
            result["reduced"] = {"status": ctx.budget.skip_reason(profile.estimate("query_72b") / 2)}
    result["status"] = "ok"
    return result


def measure_large_vlm(profile: Profile, ctx: RunContext, text_layers: int | None) -> dict[str, Any]:
    """Perception of ``per_frame_keyframes`` key frames by the large VLM (``text_layers`` of them, or all)."""
    from embodied_r_ros.perception import Perceiver

    name = "vlm_large" if text_layers is None else f"vlm_large_{text_layers}"
    checkpoint = stage_checkpoint(profile.vlm_large, ctx.tokenizer, ctx.scratch / name, text_layers)
    reset_peak(profile.device)
    start = time.perf_counter()
    model = build_model(checkpoint, profile.device, profile.dtype, profile.attn)
    synchronize(profile.device)
    build_s = time.perf_counter() - start
    total_layers = json.loads((profile.vlm_large / "config.json").read_text())
    total_layers = total_layers.get("text_config", total_layers)["num_hidden_layers"]
    vlm = vision_backend(profile.vlm_large.name, model, ctx.tokenizer, checkpoint, profile.description_tokens)
    counter = TokenCounter(vlm, model.config.image_token_id)
    perceiver = Perceiver(vlm)
    with short_replies(vlm):
        perceiver.describe(make_keyframes(2), QUESTION, OPTIONS)
    keyframes = make_keyframes(profile.per_frame_keyframes)
    vlm.image_cache.clear()
    counter.take()
    start = time.perf_counter()
    perceiver.describe(keyframes, QUESTION, OPTIONS)
    seconds = time.perf_counter() - start
    out = {
        "status": "ok",
        "keyframes": len(keyframes),
        "text_layers": text_layers or total_layers,
        "of_text_layers": total_layers,
        "build_s": build_s,
        "weights_gib": weight_gib(model),
        "perception_s": seconds,
        **peak_memory(profile.device),
        "perception_tokens": counter.take(),
    }
    if text_layers:
        # Decoding is dominated by the text layers; scaling the whole time by the layer ratio also scales
        # the vision tower and fixed costs, so this is an upper bound.
        out["perception_s_extrapolated_upper_bound"] = seconds * total_layers / text_layers
    ctx.say(f"query_72b ({out['text_layers']} of {total_layers} text layers): {seconds:.2f} s perception")
    return out


# ----------------------------------------------------------------------------------------------------
# GRPO through embodied-r train's trainer code


def step_timer(device: torch.device) -> Any:
    """A transformers ``TrainerCallback`` recording the wall time of every optimizer step in ``.steps``
    (the device synchronized at both ends)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[float] = []
            self._start = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            synchronize(device)
            self._start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            synchronize(device)
            self.steps.append(time.perf_counter() - self._start)

    return StepTimer()


class ForcedCorrect:
    """Wraps the trainer's reward so that every completion counts as well formed and correct.

    Random weights never write the tags nor the right letter, so the consistency reward would never ask its
    reference. Here each completion becomes ``<think>TEXT</think><answer>SOLUTION</answer>``, TEXT being its
    generated ids decoded (folded into the stand-in vocabulary): the reward code runs as in training and the
    reference answers all 32 completions' reasoning, the worst case of a step.
    """

    def __init__(self, reward: Any, tokenizer: Any) -> None:
        self.reward = reward
        self.tokenizer = tokenizer
        self.__name__ = getattr(reward, "__name__", type(reward).__name__)  # TRL logs rewards by name

    def __call__(
        self, completions: Sequence[Any], completion_ids: Sequence[Sequence[int]], solution: Any, **kwargs
    ):
        vocab = self.tokenizer.vocab_size
        texts = self.tokenizer.batch_decode(
            [[t % vocab for t in ids] for ids in completion_ids], skip_special_tokens=True
        )
        forced = [
            f"<think>{text}</think><answer>{answer}</answer>"
            for text, answer in zip(texts, solution, strict=True)
        ]
        return self.reward(completions=forced, completion_ids=completion_ids, solution=solution, **kwargs)


def write_grpo_data(
    out: Path, tokenizer: Any, keyframes: int, description_tokens: int, rows: int = 8
) -> Path:
    """A data set in ``embodied-r prepare``'s layout (``train.jsonl``): reasoning prompts exactly as the node
    builds them (:func:`~embodied_r_ros.reasoning.messages.reasoning_messages`), ``keyframes`` descriptions of
    ``description_tokens`` tokens each, four options, solution A."""
    from embodied_r_ros.perception import Description
    from embodied_r_ros.reasoning.messages import reasoning_messages
    from embodied_r_ros.reasoning.prompts import ACTIONS

    rng = random.Random(0)
    vocab = tokenizer.vocab_size

    def text(tokens: int) -> str:
        ids = tokenizer(
            [tokenizer.decode([rng.randrange(vocab) for _ in range(tokens)])], add_special_tokens=False
        )
        return tokenizer.decode(ids["input_ids"][0][:tokens], skip_special_tokens=True)

    out.mkdir(parents=True, exist_ok=True)
    with (out / "train.jsonl").open("w", encoding="utf-8") as handle:
        for row in range(rows):
            descriptions = [
                Description(
                    j, j, None if j == 0 else ACTIONS[j % len(ACTIONS)], text(description_tokens), "", "vlm"
                )
                for j in range(keyframes)
            ]
            messages = reasoning_messages(descriptions, QUESTION, OPTIONS)
            record = {
                "id": f"gpu_check_{row}",
                "prompt": [{"role": m.role, "content": m.joined_text} for m in messages],
                "solution": "A",
                "question": QUESTION,
                "options": list(OPTIONS),
            }
            handle.write(json.dumps(record) + "\n")
    return out


def grpo_overrides(
    profile: Profile, checkpoint: Path, data: Path, out: Path, reference: bool, length: int, steps: int
) -> list[str]:
    """``--set`` overrides of ``embodied_r_lora.yaml`` for a short measured run."""
    stage = (
        "{start_epoch: 1, format: 1, accuracy: 7, consistency: 2}"
        if reference
        else ("{start_epoch: 1, format: 7, accuracy: 3, consistency: 0}")
    )
    overrides = [
        f"model={checkpoint}", f"output_dir={out}", f"data.path={data}", f"rewards=[{stage}]",
        f"grpo.max_steps={steps}", "grpo.save_strategy='no'", "grpo.log_completions=false",
        "grpo.disable_tqdm=true", f"grpo.max_completion_length={length}",
        f"grpo.generation_kwargs={{min_new_tokens: {length}}}",
    ]  # fmt: skip
    if profile.tiny:
        overrides += ["grpo.use_cpu=true", "grpo.bf16=false"]  # gradient checkpointing stays on, as on a GPU
    return overrides


def run_grpo(profile: Profile, ctx: RunContext, reference: bool, length: int, steps: int) -> dict[str, Any]:
    """``steps`` GRPO steps of the reasoner (random weights, LoRA) with ``embodied-r train``'s
    ``build_trainer``; the policy is made on the device instead of loaded from disk."""
    from datasets.utils.logging import disable_progress_bar
    from embodied_r_training.rl import train
    from embodied_r_training.rl.train_config import check_batch_shape, load_train_config
    from transformers import PrinterCallback

    disable_progress_bar()

    checkpoint = stage_checkpoint(profile.lm, ctx.tokenizer, ctx.scratch / "grpo_lm")
    data = ctx.grpo_data
    tag = f"{'ref' if reference else 'noref'}_{length}"
    config = load_train_config(
        GRPO_CONFIG,
        grpo_overrides(profile, checkpoint, data, ctx.scratch / f"train_{tag}", reference, length, steps),
    )
    # The trainer's own rule: bf16 weights on a GPU with grpo.bf16, float32 on the CPU.
    bf16 = bool(config.grpo.get("bf16")) and not config.grpo.get("use_cpu")
    dtype = torch.bfloat16 if bf16 else torch.float32
    model = build_model(checkpoint, profile.device, dtype, profile.attn, seed=1)
    timer = step_timer(profile.device)
    # build_trainer loads the policy with load_model(config, path); hand it the model made on the device.
    patches: dict[str, Any] = {"load_model": lambda config, path, model=model: model}
    with mock.patch.multiple(train, **patches):
        trainer = train.build_trainer(config, callbacks=[timer], start=checkpoint)
    patches.clear()
    del model
    trainer.remove_callback(PrinterCallback)  # a dict per step on stdout; the figures are in log_history
    trainer.reward_funcs[0] = ForcedCorrect(trainer.reward_funcs[0], ctx.tokenizer)
    reset_peak(profile.device)
    start = time.perf_counter()
    try:
        trainer.train()
    finally:
        wall = time.perf_counter() - start
        ref_backend = trainer.embodied_r_reference
        reference_calls = ref_backend.calls if ref_backend is not None else 0
        if ref_backend is not None:
            ref_backend.close()  # it holds the trainer (and the model)
        history = trainer.state.log_history
        memory = peak_memory(profile.device)
        trainer.accelerator.free_memory()
        del trainer

    def logged(key: str) -> list[Any]:
        return [row[key] for row in history if key in row]

    first_prompt = json.loads((data / "train.jsonl").read_text().splitlines()[0])["prompt"]
    prompt_ids = ctx.tokenizer.apply_chat_template(first_prompt, tokenize=True, add_generation_prompt=True)
    prompt_ids = prompt_ids["input_ids"] if hasattr(prompt_ids, "keys") else prompt_ids
    return {
        "status": "ok",
        "reference": reference,
        "completions_per_step": check_batch_shape(config),
        "lora": {
            "r": config.lora.r,
            "alpha": config.lora.alpha,
            "target_modules": config.lora.target_modules,
        },
        "gradient_checkpointing": bool(config.grpo.get("gradient_checkpointing")),
        "dtype": str(dtype).replace("torch.", ""),
        "prompt_tokens": len(prompt_ids),
        # The trainer's own loader: it reads through data.schema, which needs no rosbags (absent there).
        "data_loader": "embodied_r_training.rl.loading.load_split",
        "completion_tokens_forced": length,
        "completion_mean_length_logged": logged("completions/mean_length"),
        "loss_logged": logged("loss"),
        "grad_norm_logged": logged("grad_norm"),  # > 0: the LoRA weights get gradients
        "steps": len(timer.steps),
        "step_s": timer.steps,
        "step_s_last": timer.steps[-1] if timer.steps else None,
        "train_wall_s": wall,
        "reference_calls": reference_calls,
        **memory,
    }


def section_grpo(profile: Profile, ctx: RunContext) -> dict[str, Any]:
    """GRPO steps with LoRA, without and with the in-process consistency reference."""
    result: dict[str, Any] = {
        "status": "running",
        "lm": profile.lm.name,
        "config": str(GRPO_CONFIG.relative_to(REPO)),
    }
    for key, reference in (("without_reference", False), ("with_reference", True)):
        if not ctx.budget.allows(profile.estimate("grpo")):
            result[key] = {"status": ctx.budget.skip_reason(profile.estimate("grpo"))}
            continue
        run = ctx.guarded(
            lambda reference=reference: run_grpo(
                profile, ctx, reference, profile.grpo_completion_tokens, profile.grpo_steps
            )
        )
        release(profile.device)
        result[key] = run
        ctx.publish("grpo", result)
        ctx.say(f"grpo {key}: {summarize_run(run)}")
    result["status"] = "ok"
    return result


def section_grpo_max_length(profile: Profile, ctx: RunContext) -> dict[str, Any]:
    """One GRPO step with the paper's maximum completion length, no reference."""
    run = ctx.guarded(lambda: run_grpo(profile, ctx, False, profile.grpo_max_completion_tokens, 1))
    ctx.say(f"grpo_max_length: {summarize_run(run)}")
    return {"lm": profile.lm.name, "run": run, "status": "ok"}


# ----------------------------------------------------------------------------------------------------
# The run


class RunContext:
    """What the sections share: the budget, the stand-in tokenizer, scratch space and the result file."""

    def __init__(
        self, profile: Profile, budget: Budget, out: Path, results: dict[str, Any], scratch: Path
    ) -> None:
        from transformers import AutoTokenizer

        self.profile = profile
        self.budget = budget
        self.out = out
        self.results = results
        self.scratch = scratch
        self.tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_models() / LM_SUBDIR)
        self._grpo_data: Path | None = None

    @property
    def grpo_data(self) -> Path:
        if self._grpo_data is None:
            p = self.profile
            self._grpo_data = write_grpo_data(
                self.scratch / "grpo_data", self.tokenizer, p.grpo_prompt_keyframes, p.description_tokens
            )
        return self._grpo_data

    def say(self, text: str) -> None:
        print(f"[{self.budget.elapsed():6.1f} s] {text}", flush=True)

    def publish(self, section: str, value: dict[str, Any]) -> None:
        """Record ``value`` as ``section``'s result and rewrite the JSON and Markdown files."""
        self.results["sections"][section] = value
        self.results["elapsed_s"] = self.budget.elapsed()
        write_outputs(self.results, self.out)

    def guarded(self, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``measure()``, or ``{"status": "OOM"|"error: ..."}``: one failure never stops the run."""
        try:
            return measure()
        except Exception as exc:  # a measurement that fails is a result; the next one still runs
            status = "OOM" if is_oom(exc) else f"error: {type(exc).__name__}: {str(exc)[:400]}"
            detail = "".join(traceback.format_exception(exc)[-6:])
        self.say(f"{status}\n{detail}")
        release(self.profile.device)
        return {"status": status, "traceback_tail": detail[-2000:]}


def summarize_run(run: dict[str, Any]) -> str:
    if run.get("status") != "ok":
        return str(run.get("status"))
    keys = ("perception_s", "reasoning_s", "total_s", "step_s_last", "peak_gib")
    return ", ".join(f"{k} {run[k]:.2f}" for k in keys if isinstance(run.get(k), (int, float)))


SECTION_FUNCTIONS: dict[str, Callable[[Profile, RunContext], dict[str, Any]]] = {
    "model_sizes": section_model_sizes,
    "query_robot": section_query_robot,
    "grpo": section_grpo,
    "query_72b": section_query_72b,
    "grpo_max_length": section_grpo_max_length,
}


def package_versions() -> dict[str, str | None]:
    """Versions of what the check imports (None: missing; see the wheels hint)."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "pyarrow", "tokenizers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def pinned_versions() -> dict[str, str]:
    """The versions requirements.txt pins (``name==version`` lines)."""
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[name.strip().lower()] = version.strip()
    return pins


def wheels_hint(versions: dict[str, str | None]) -> str | None:
    """How to install the carried wheels, when a package the GRPO sections need is missing or differs."""
    pins = pinned_versions()
    off = [
        f"{name} {versions.get(name) or 'missing'} (pinned {pins[name]})"
        for name in ("trl", "datasets", "transformers", "peft")
        if name in pins and versions.get(name) != pins[name]
    ]
    if not off:
        return None
    have = sorted(p.name for p in WHEELS.glob("*.whl")) if WHEELS.is_dir() else []
    where = (
        f"{len(have)} wheel(s) in {WHEELS.relative_to(REPO)}"
        if have
        else "no wheels here: run `make gpu-wheels`"
    )
    return (
        f"packages differ from requirements.txt: {'; '.join(off)}. {where}; install them with: "
        "python3 -m pip install -q --no-index --no-deps --target /tmp/site bench/wheels/*.whl && "
        "export PYTHONPATH=/tmp/site"
    )


def machine(profile: Profile) -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "device": str(profile.device),
        "dtype": str(profile.dtype).replace("torch.", ""),
        "attention": profile.attn,
        "torch_cuda": torch.version.cuda,
    }
    if profile.device.type == "cuda":
        props = torch.cuda.get_device_properties(profile.device)
        info.update(
            gpu=props.name, gpu_memory_gib=props.total_memory / GIB, capability=f"{props.major}.{props.minor}"
        )
    return info


def make_profile(args: argparse.Namespace) -> Profile:
    """The run's sizes: the real configs on the GPU, or the tiny models on the CPU (``--tiny``)."""
    tiny = args.tiny
    if args.device == "auto":
        device = torch.device("cpu" if tiny or not torch.cuda.is_available() else "cuda")
    else:
        device = torch.device(args.device)
    if not tiny and device.type != "cuda":
        raise SystemExit(
            "no CUDA GPU here: the real-size check needs one (--tiny runs the same code on the CPU)"
        )
    attn = args.attn
    if attn == "auto":
        import importlib.util

        attn = (
            "flash_attention_2"
            if device.type == "cuda" and importlib.util.find_spec("flash_attn")
            else "sdpa"
        )
    keyframes = tuple(int(k) for k in args.keyframes.split(","))
    common = dict(tiny=tiny, device=device, attn=attn, keyframes=keyframes, per_frame_keyframes=keyframes[0])
    if tiny:
        models = ensure_tiny_models()
        return Profile(
            **common, dtype=torch.float32, vlm=models / VLM_SUBDIR, lm=models / LM_SUBDIR,
            vlm_large=models / VLM_SUBDIR,
            description_tokens=args.description_tokens or 8, reasoning_tokens=args.reasoning_tokens or 16,
            grpo_prompt_keyframes=4, grpo_completion_tokens=args.grpo_completion_tokens or 8,
            grpo_max_completion_tokens=16, grpo_steps=2, large_fallback_layers=1,
            large_margin_gib=args.large_margin_gib,
        )  # fmt: skip
    return Profile(
        **common, dtype=torch.bfloat16, vlm=CONFIGS / VLM_7B, lm=CONFIGS / LM_3B, vlm_large=CONFIGS / VLM_72B,
        description_tokens=args.description_tokens or 128, reasoning_tokens=args.reasoning_tokens or 512,
        grpo_prompt_keyframes=21, grpo_completion_tokens=args.grpo_completion_tokens or 256,
        grpo_max_completion_tokens=2048, grpo_steps=2, large_fallback_layers=40,
        large_margin_gib=args.large_margin_gib,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_check.json and gpu_check.md")
    parser.add_argument(
        "--tiny", action="store_true", help="the tiny models on the CPU (a dry run, no figures)"
    )
    parser.add_argument(
        "--budget-s", type=float, default=None, help="wall-clock budget (default 450; tiny 300)"
    )
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}"
    )
    parser.add_argument(
        "--keyframes", default="8,16,32", help="key-frame counts; the first is also per-frame"
    )
    parser.add_argument("--description-tokens", type=int, default=0, help="new tokens per description (128)")
    parser.add_argument("--reasoning-tokens", type=int, default=0, help="new tokens per answer (512)")
    parser.add_argument(
        "--grpo-completion-tokens", type=int, default=0, help="forced GRPO completion length (256)"
    )
    parser.add_argument("--device", default="auto", help="auto (cuda, or cpu with --tiny), cuda, cuda:1, cpu")
    parser.add_argument(
        "--attn", default="auto", help="auto (flash_attention_2 if installed, else sdpa), sdpa, eager"
    )
    parser.add_argument(
        "--large-margin-gib", type=float, default=4.0,
        help="build the large VLM whole only if its weights + this fit in free memory (else fewer layers)",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TQDM_DISABLE", "1")
    if args.threads:
        torch.set_num_threads(args.threads)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    profile = make_profile(args)
    budget = Budget(args.budget_s if args.budget_s is not None else (300.0 if args.tiny else 450.0))
    versions = package_versions()
    results: dict[str, Any] = {
        "issue": 13,
        "tiny": profile.tiny,
        "note": "tiny random models on the CPU: a dry run of the code, not a measurement"
        if profile.tiny
        else "architecture-true configs with random weights (latency and memory only)",
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine(profile),
        "packages": versions,
        "budget_s": budget.seconds,
        "goals": GOALS,
        "sizes": {
            "frame": f"{FRAME_SIZE[0]}x{FRAME_SIZE[1]}",
            "description_tokens": profile.description_tokens,
            "reasoning_tokens": profile.reasoning_tokens,
            "grpo_prompt_keyframes": profile.grpo_prompt_keyframes,
            "grpo_completion_tokens": profile.grpo_completion_tokens,
            "grpo_max_completion_tokens": profile.grpo_max_completion_tokens,
        },  # fmt: skip
        "sections": {
            name: {"status": "not run (not in --sections)"} for name in SECTIONS if name not in sections
        },
    }
    hint = wheels_hint(versions)
    if hint:
        results["wheels_hint"] = hint
        print(f"NOTE: {hint}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        ctx = RunContext(profile, budget, args.out, results, Path(tmp))
        ctx.say(f"gpu check: {json.dumps(results['machine'])}")
        for name in SECTIONS:
            if name not in sections:
                continue
            estimate = profile.estimate(name)
            if not budget.allows(estimate):
                ctx.publish(name, {"status": budget.skip_reason(estimate)})
                ctx.say(f"{name}: {results['sections'][name]['status']}")
                continue
            ctx.say(f"{name} ...")
            start = time.perf_counter()
            outcome = ctx.guarded(lambda name=name: SECTION_FUNCTIONS[name](profile, ctx))
            outcome["section_s"] = time.perf_counter() - start
            release(profile.device)
            ctx.publish(name, outcome)
    results["finished"] = True
    results["elapsed_s"] = budget.elapsed()
    write_outputs(results, args.out)
    print(markdown(results), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------------
# Output


def write_outputs(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (out / "gpu_check.md").write_text(markdown(results))


def _fmt(value: Any, unit: str = "", digits: int = 2) -> str:
    return f"{value:.{digits}f}{unit}" if isinstance(value, (int, float)) else "-"


def _met(value: Any, goal: float, at_most: bool, tiny: bool = False) -> str:
    if tiny:
        return "(tiny dry run: no verdict)"
    if not isinstance(value, (int, float)):
        return "not measured"
    return "met" if (value <= goal if at_most else value >= goal) else "missed"


def markdown(results: dict[str, Any]) -> str:
    """The figures as a Markdown table (one row per figure; status instead of a value where none)."""
    sections = results["sections"]
    goals = results["goals"]
    lines = [
        f"GPU check (issue 13): {results['note']}.",
        f"Machine: {results['machine'].get('gpu', results['machine']['device'])}, "
        f"{results['machine']['dtype']}, attention {results['machine']['attention']}; "
        f"elapsed {_fmt(results.get('elapsed_s'), ' s', 0)} of {results['budget_s']:.0f} s.",
        "",
        "| figure | value | goal | |",
        "|---|---|---|---|",
    ]

    def row(figure: str, value: str, goal: str = "", met: str = "") -> None:
        lines.append(f"| {figure} | {value} | {goal} | {met} |")

    sizes = sections.get("model_sizes", {})
    for name, size in sizes.get("models", {}).items():
        row(
            f"{name}: parameters, bf16 weights",
            f"{size['params_b']:.2f} B, {size['bf16_weights_gib']:.1f} GiB",
        )
    if sizes.get("status") not in (None, "ok"):
        row("model sizes", sizes["status"])

    robot = sections.get("query_robot", {})
    pair = f"{robot.get('vlm', 'VLM')} + {robot.get('lm', 'LM')}"
    for run in robot.get("runs", []):
        count = run["keyframes"]
        figure = f"query, {count} key frames, {pair}: perception / reasoning / total"
        if run.get("status") != "ok":
            row(figure, run.get("status", "-"))
            continue
        value = (
            f"{_fmt(run['perception_s'])} / {_fmt(run['reasoning_s'])} / **{_fmt(run['total_s'], ' s')}**, "
            f"peak {_fmt(run['peak_gib'], ' GiB', 1)}"
        )
        if count == 8:
            goal = goals["query_8_keyframes_total_s"]
            row(figure, value, f"<= {goal} s", _met(run["total_s"], goal, True, results["tiny"]))
            limit = goals["robot_peak_gib"]
            met = _met(run["peak_gib"], limit, True, results["tiny"])
            row(
                f"peak memory, {pair}, 8 key frames",
                _fmt(run["peak_gib"], " GiB", 1),
                f"<= {limit:.0f} GiB",
                met,
            )
        else:
            row(figure, value)
    if robot.get("status") not in (None, "ok", "running") or (robot and not robot.get("runs")):
        row(f"query, {pair}", robot.get("status", "-"))
    per_frame = robot.get("per_frame")
    if per_frame:
        figure = f"perception, {per_frame['keyframes']} key frames: one call per key frame / one batched call"
        if per_frame.get("status") == "ok":
            value = f"**{per_frame['ratio']:.1f}x** ({_fmt(per_frame['per_frame_s'])} s vs "
            value += f"{_fmt(per_frame['batched_s'])} s)"
            goal = goals["batched_vs_per_frame_ratio"]
            row(figure, value, f">= {goal:.0f}x", _met(per_frame["ratio"], goal, False, results["tiny"]))
        else:
            row(figure, per_frame.get("status", "-"))

    grpo = sections.get("grpo", {})
    for key in ("without_reference", "with_reference"):
        run = grpo.get(key)
        if run is None:
            continue
        figure = f"GRPO step, {grpo.get('lm', 'LM')} + LoRA, {key.replace('_', ' ')}"
        if run.get("status") != "ok":
            row(figure, run.get("status", "-"))
            continue
        row(
            f"{figure} ({run['completions_per_step']} completions x {run['completion_tokens_forced']} "
            f"tokens, prompt {run['prompt_tokens']} tokens)",
            f"**{_fmt(run['step_s_last'], ' s')}** per step (steps: "
            f"{', '.join(_fmt(s) for s in run['step_s'])}), "
            f"peak {_fmt(run['peak_gib'], ' GiB', 1)}, reference calls {run['reference_calls']} in "
            f"{run['steps']} steps",
        )
    if grpo.get("status") not in (None, "ok", "running"):
        row("GRPO step", grpo.get("status", "-"))

    large = sections.get("query_72b", {})
    for key in ("full", "reduced"):
        run = large.get(key)
        if run is None:
            continue
        figure = f"perception only, 8 key frames, {large.get('vlm', 'large VLM')}"
        if run.get("status") != "ok":
            row(f"{figure} ({key})", run.get("status", "-"))
            continue
        value = f"{_fmt(run['perception_s'], ' s')}, peak {_fmt(run['peak_gib'], ' GiB', 1)}"
        if run["text_layers"] != run["of_text_layers"]:
            figure += f" with {run['text_layers']} of {run['of_text_layers']} text layers"
            value += f"; x{run['of_text_layers'] / run['text_layers']:.0f} layers: <= "
            value += _fmt(run["perception_s_extrapolated_upper_bound"], " s")
        row(figure, value, f"paper's whole sequential query: {goals['paper_sequential_72b_query_s']} s")
    if large.get("status") not in (None, "ok", "running"):
        row("perception, large VLM", large.get("status", "-"))

    longest = sections.get("grpo_max_length", {})
    run = longest.get("run", longest if longest.get("status") not in (None, "ok") else None)
    if run is not None:
        if run.get("status") == "ok":
            row(
                f"GRPO step, {longest.get('lm', 'LM')} + LoRA, {run['completion_tokens_forced']}-token "
                f"completions ({'stand-in for ' if results['tiny'] else ''}the paper's maximum), "
                "no reference, first step",
                f"{_fmt(run['step_s_last'], ' s')}, peak {_fmt(run['peak_gib'], ' GiB', 1)}",
            )
        else:
            row("GRPO step at the paper's maximum completion length", run.get("status", "-"))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
