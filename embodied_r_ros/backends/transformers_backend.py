"""In-process generation with Hugging Face transformers: Qwen2/2.5-VL for images, any causal LM for text.

Qwen2.5-VL inputs are built here from AutoImageProcessor (the PIL backend) and AutoTokenizer instead of
AutoProcessor, because in transformers 5.x the Qwen2.5-VL processor needs torchvision for its video
processor. The chat template renders one ``<|vision_start|><|image_pad|><|vision_end|>`` per image; each
``<|image_pad|>`` is expanded to the image's token count (grid_t*grid_h*grid_w / merge_size**2), and
``mm_token_type_ids`` marks those tokens: without it the model silently uses text (1D) positions for
image tokens instead of its 3D rotary positions. Batches are left-padded so generation continues every
row from its last real token. Decoding is greedy at temperature 0, else plain temperature sampling.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from transformers.modeling_outputs import BaseModelOutputWithPooling

from ..config import ModelConfig
from ..frames import FrameError, validate_image
from ..reasoning.prompts import stated_options
from .base import BackendError, ChatRequest, PromptRoom, PromptTooLongError
from .decoding import decode_batch, supports
from .image_cache import EncodedImageCache, image_key
from .loading import read_model_config, resolve_adapter_dir, resolve_model_dir
from .segment_tokenizer import SegmentTokenizer
from .tool_decoding import ToolTokens

logger = logging.getLogger(__name__)

# Checkpoints whose image inputs this module knows how to build (image_grid_thw + mm_token_type_ids).
VISION_MODEL_TYPES = ("qwen2_5_vl", "qwen2_vl")
IMAGE_TOKEN = "<|image_pad|>"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(device: str) -> torch.device:
    """``"auto"`` -> cuda when available, else cpu; an unavailable cuda device raises BackendError."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise BackendError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise BackendError(
            f"device {device!r} was asked for but torch sees no CUDA GPU (torch {torch.__version__}); "
            "set device: cpu or auto, or install a CUDA build of torch"
        )
    return resolved


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``"auto"`` -> bfloat16 on a GPU, float32 on the CPU; otherwise the named dtype."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in _DTYPES:
        raise BackendError(f"unknown dtype {dtype!r}; use auto, {', '.join(_DTYPES)}")
    return _DTYPES[dtype]


def _processor_chat_template(path: Path) -> str | None:
    """The chat template some VL checkpoints keep only in the processor's chat_template.json."""
    try:
        return json.loads((path / "chat_template.json").read_text()).get("chat_template")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass
class GenerationOutput:
    """Generated token ids per request (prompt, padding and end-of-sequence removed), in request order.

    ``logits`` holds, per request, the raw logits of each generated step (steps x vocab, float32) when
    they were asked for, else it is empty.
    """

    token_ids: list[list[int]]
    logits: list[torch.Tensor] = field(default_factory=list)


class TransformersBackend:
    """A :class:`~embodied_r_ros.backends.base.GenerationBackend` running a transformers model in-process.

    ``vision=True`` needs a Qwen2/2.5-VL checkpoint and accepts images; ``vision=False`` runs any causal
    LM (or the language side of a VL checkpoint) on text and rejects images.
    ``config.transformers.adapter`` applies a PEFT LoRA adapter. Calls are serialised by a lock (the VL
    model keeps rotary state between steps).
    """

    def __init__(self, config: ModelConfig, *, vision: bool) -> None:
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer

        self.config = config
        self.supports_images = vision
        self._lock = threading.Lock()
        self.path = resolve_model_dir(
            config.model,
            allow_download=config.transformers.allow_download,
            trust_remote_code=config.transformers.trust_remote_code,
        )
        raw = read_model_config(self.path)
        model_type = str(raw.get("model_type", "?"))
        self.is_vision_language = "vision_config" in raw
        if vision and not self.is_vision_language:
            raise BackendError(
                f"model {config.model!r} (model_type {model_type}) is a text-only model, but the VLM needs "
                "images; use it as the reasoning LM, and set the VLM to a vision-language checkpoint such as "
                "Qwen/Qwen2.5-VL-7B-Instruct"
            )
        if vision and model_type not in VISION_MODEL_TYPES:
            raise BackendError(
                f"model {config.model!r} has model_type {model_type}; the transformers backend builds image "
                f"inputs for {', '.join(VISION_MODEL_TYPES)} only. Serve other VLMs with vLLM or SGLang and "
                "use backend: openai"
            )
        self.device = resolve_device(config.transformers.device)
        self.dtype = resolve_dtype(config.transformers.dtype, self.device)
        remote = config.transformers.trust_remote_code
        hint = "" if remote else " (custom code needs trust_remote_code: true)"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path, trust_remote_code=remote)
        except (OSError, ValueError, KeyError, ImportError) as exc:
            raise BackendError(
                f"cannot load the tokenizer of model {config.model!r} from {self.path}: {exc}{hint}"
            ) from exc
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if not self.tokenizer.chat_template:
            self.tokenizer.chat_template = _processor_chat_template(self.path)
        if not self.tokenizer.chat_template:
            raise BackendError(
                f"the tokenizer of model {config.model!r} ({self.path}) has no chat template; use an "
                "instruction-tuned (chat) checkpoint"
            )
        self.tokenize = SegmentTokenizer(self.tokenizer)
        model_cls = AutoModelForImageTextToText if self.is_vision_language else AutoModelForCausalLM
        try:
            # device_map loads the weights straight onto the device (no full copy in CPU memory first).
            model = model_cls.from_pretrained(
                self.path, dtype=self.dtype, device_map=str(self.device), trust_remote_code=remote
            )
        except (OSError, ValueError, KeyError, RuntimeError, ImportError) as exc:
            raise BackendError(
                f"cannot load model {config.model!r} from {self.path}: {exc}; check that the folder is a "
                f"complete checkpoint for this transformers version{hint}"
            ) from exc
        if config.transformers.adapter:
            model = self._with_adapter(model, config.transformers.adapter)
        self.model = model.eval()
        self.image_processor = self._load_image_processor() if vision else None
        self.image_cache = EncodedImageCache(int(config.transformers.image_cache_mb * 2**20))
        logger.info(
            "loaded %s from %s on %s (%s)%s",
            config.model,
            self.path,
            self.device,
            self.dtype,
            f" with adapter {config.transformers.adapter}" if config.transformers.adapter else "",
        )

    @classmethod
    def from_model(cls, config: ModelConfig, model: Any, tokenizer: Any) -> TransformersBackend:
        """A text-only backend over a model and tokenizer already in memory (nothing is loaded or copied).

        The trainer uses it to let the policy's own weights answer the consistency reward's reference
        queries. The model is used as it is (its train/eval mode is left alone); the tokenizer is copied so
        that left padding does not change the caller's.
        """
        backend = cls.__new__(cls)
        backend.config = config
        backend.supports_images = False
        backend._lock = threading.Lock()
        backend.path = Path(str(getattr(model.config, "_name_or_path", "") or config.model))
        backend.is_vision_language = False
        backend.device = next(model.parameters()).device
        backend.dtype = next(model.parameters()).dtype
        backend.tokenizer = copy.copy(tokenizer)
        backend.tokenizer.padding_side = "left"
        if backend.tokenizer.pad_token_id is None:
            backend.tokenizer.pad_token = backend.tokenizer.eos_token
        if not backend.tokenizer.chat_template:
            raise BackendError(f"the tokenizer of model {config.model!r} has no chat template")
        backend.tokenize = SegmentTokenizer(backend.tokenizer)
        backend.model = model
        backend.image_processor = None
        backend.image_cache = EncodedImageCache(0)
        return backend

    def __repr__(self) -> str:
        return (
            f"TransformersBackend(model={self.config.model!r}, device={self.device}, "
            f"vision={self.supports_images})"
        )

    def _with_adapter(self, model: Any, adapter: str) -> Any:
        from peft import PeftModel

        path = resolve_adapter_dir(adapter)
        try:
            return PeftModel.from_pretrained(model, str(path))
        except (OSError, ValueError, RuntimeError, KeyError) as exc:
            raise BackendError(
                f"cannot apply LoRA adapter {path} to model {self.config.model!r}: {exc}; the adapter must "
                "have been trained on this base model"
            ) from exc

    def _load_image_processor(self) -> Any:
        from transformers import AutoImageProcessor

        try:
            # The PIL backend: the torchvision one is not importable everywhere and differs slightly.
            processor = AutoImageProcessor.from_pretrained(self.path, backend="pil")
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"cannot load the image processor of model {self.config.model!r} ({self.path}): {exc}; "
                "the folder needs preprocessor_config.json"
            ) from exc
        image_token_id = self.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
        if image_token_id != self.model.config.image_token_id:
            raise BackendError(
                f"model {self.config.model!r}: tokenizer id of {IMAGE_TOKEN} ({image_token_id}) differs "
                f"from config.image_token_id ({self.model.config.image_token_id}); tokenizer and weights "
                "do not match"
            )
        return processor

    # --- building inputs -------------------------------------------------------------------------

    def _render(self, request: ChatRequest, index: int) -> tuple[str, list[np.ndarray]]:
        """The chat-template text of one request (one image placeholder per image) and its images."""
        messages: list[dict[str, Any]] = []
        images: list[np.ndarray] = []
        for message in request:
            parts = message.content
            if not any(isinstance(p, np.ndarray) for p in parts):
                # Plain strings: the form every chat template (text-only ones too) understands.
                messages.append({"role": message.role, "content": message.joined_text})
                continue
            if not self.supports_images:
                raise BackendError(
                    f"request {index} holds {len(message.images)} image(s), but model "
                    f"{self.config.model!r} is loaded as a text-only LM; images go to the VLM backend "
                    "(vision=True)"
                )
            items: list[dict[str, Any]] = []
            for part in parts:
                if isinstance(part, str):
                    items.append({"type": "text", "text": part})
                else:
                    try:
                        validate_image(part)
                    except FrameError as exc:
                        raise BackendError(f"request {index}: {exc}") from exc
                    items.append({"type": "image"})
                    images.append(part)
            messages.append({"role": message.role, "content": items})
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text, images

    def prepare(self, requests: Sequence[ChatRequest], *, encoded: bool = False) -> dict[str, Any]:
        """Model inputs for a batch, on the device: left-padded ``input_ids`` and ``attention_mask``; with
        images also ``image_grid_thw`` and ``mm_token_type_ids`` (1 on image tokens), and either
        ``pixel_values`` (every image occurrence, as the processor gives them) or, with ``encoded=True``,
        ``mm_encoder_outputs`` holding the vision embeddings of each distinct image, encoded once and
        cached (see :meth:`encode_images`). Both give the same model inputs.
        """
        rendered = [self._render(request, i) for i, request in enumerate(requests)]
        rows = self.tokenize([text for text, _ in rendered])
        all_images = [image for _, images in rendered for image in images]
        inputs: dict[str, Any] = {}
        if all_images:
            if encoded:
                embeddings, grid = self.encode_images(all_images)
                inputs["mm_encoder_outputs"] = {"image": BaseModelOutputWithPooling(pooler_output=embeddings)}
            else:
                pixel_values, grid = self.process_images(all_images)
                inputs["pixel_values"] = pixel_values.to(self.device, self.dtype)
            inputs["image_grid_thw"] = grid.to(self.device)
            rows = self._expand_image_tokens(rows, [len(images) for _, images in rendered], grid)
        inputs["input_ids"], inputs["attention_mask"] = self._left_pad(rows)
        if all_images:
            inputs["mm_token_type_ids"] = (inputs["input_ids"] == self.model.config.image_token_id).to(
                torch.int32
            )
        return inputs

    def _expand_image_tokens(
        self, rows: list[list[int]], counts: list[int], grid: torch.Tensor
    ) -> list[np.ndarray]:
        """Repeat each row's image placeholder token as often as its image needs tokens.

        Expanding token ids, not text, spares the tokenizer thousands of placeholder tokens per query.
        """
        image_token_id = self.model.config.image_token_id
        tokens_per_image = (grid.prod(-1) // self.image_processor.merge_size**2).numpy()
        expanded: list[np.ndarray] = []
        start = 0
        for index, (row, count) in enumerate(zip(rows, counts, strict=True)):
            ids = np.asarray(row, dtype=np.int64)
            placeholders = ids == image_token_id
            if int(placeholders.sum()) != count:
                raise BackendError(
                    f"request {index} to model {self.config.model!r}: the prompt holds "
                    f"{int(placeholders.sum())} image placeholder(s) for {count} image(s); the chat template "
                    f"must render each image as {IMAGE_TOKEN} and the text must not contain it"
                )
            repeats = np.ones_like(ids)
            repeats[placeholders] = tokens_per_image[start : start + count]
            expanded.append(np.repeat(ids, repeats))
            start += count
        return expanded

    def _left_pad(self, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded ``input_ids`` and ``attention_mask`` on the device (generation continues every row
        from its last real token)."""
        length = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), length), self.tokenizer.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
        for i, row in enumerate(rows):
            if len(row):
                input_ids[i, length - len(row) :] = torch.as_tensor(row, dtype=torch.long)
                attention_mask[i, length - len(row) :] = 1
        return input_ids.to(self.device), attention_mask.to(self.device)

    def process_images(self, images: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Patches (``pixel_values``) and ``image_grid_thw`` of ``images`` from the image processor."""
        try:
            processed = self.image_processor(
                images=list(images), return_tensors="pt", input_data_format="channels_last"
            )
        except ValueError as exc:  # e.g. an image smaller than a patch or thinner than 1:200
            shapes = ", ".join(str(image.shape) for image in images)
            raise BackendError(
                f"model {self.config.model!r} cannot take images of shapes {shapes}: {exc}"
            ) from exc
        return processed["pixel_values"], processed["image_grid_thw"]

    def encode_images(self, images: Sequence[np.ndarray]) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Vision-tower embeddings (one tensor per image, in order) and ``image_grid_thw`` of ``images``.

        Each distinct image is preprocessed and encoded once: consecutive key-frame pairs share a frame,
        and repeated questions over a window share all of them. Embeddings are kept in a content-keyed
        LRU cache (``config.transformers.image_cache_mb``); calling this as key frames arrive moves the work
        off the query path.
        """
        keys = [image_key(image) for image in images]
        found: dict[bytes, tuple[torch.Tensor, torch.Tensor]] = {}
        missing: dict[bytes, np.ndarray] = {}
        for key, image in zip(keys, images, strict=True):
            if key in found or key in missing:
                continue
            entry = self.image_cache.get(key)
            if entry is None:
                missing[key] = image
            else:
                found[key] = entry
        if missing:
            pixel_values, grids = self.process_images(list(missing.values()))
            with torch.no_grad():
                encoded = self._require_open().get_image_features(
                    pixel_values.to(self.device, self.dtype), grids.to(self.device), return_dict=True
                )
            for key, embedding, grid in zip(missing, encoded.pooler_output, grids, strict=True):
                found[key] = (embedding, grid)
                self.image_cache.put(key, embedding, grid)
        return [found[key][0] for key in keys], torch.stack([found[key][1] for key in keys])

    # --- running the model -----------------------------------------------------------------------

    def _require_open(self) -> Any:
        if self.model is None:
            raise BackendError(f"backend for model {self.config.model!r} was closed; load it again")
        return self.model

    def first_step_logits(self, requests: Sequence[ChatRequest]) -> torch.Tensor:
        """Logits (batch x vocab, float32, on the CPU) of the first token each request would generate."""
        with self._lock, torch.no_grad():
            model = self._require_open()
            outputs = model(**self.prepare(requests), use_cache=False)
            return outputs.logits[:, -1, :].float().cpu()

    def _generation_config(
        self, max_new_tokens: int | None, temperature: float | None, return_logits: bool
    ) -> Any:
        config = copy.deepcopy(self.model.generation_config)
        config.max_new_tokens = max_new_tokens or self.config.max_new_tokens
        temperature = self.config.temperature if temperature is None else temperature
        # The checkpoint's own settings (e.g. repetition_penalty) stay; top-k/top-p are cleared so that a
        # temperature means plain sampling (Qwen ships top_k=1, which would make sampling greedy).
        config.top_p = config.top_k = None
        config.do_sample = temperature > 0
        config.temperature = temperature if temperature > 0 else None
        eos = config.eos_token_id
        eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in eos:
            eos.append(self.tokenizer.eos_token_id)
        config.eos_token_id = eos
        config.pad_token_id = self.tokenizer.pad_token_id
        config.return_dict_in_generate = True
        config.output_logits = return_logits
        return config

    def generate_ids(
        self,
        requests: Sequence[ChatRequest],
        *,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        return_logits: bool = False,
    ) -> GenerationOutput:
        """Generate for a batch; returns the new token ids (and per-step logits if ``return_logits``)."""
        if not requests:
            return GenerationOutput([], [])
        with self._lock, torch.no_grad():
            model = self._require_open()
            inputs = self.prepare(requests, encoded=True)
            config = self._generation_config(max_new_tokens, temperature, return_logits)
            self._check_context(inputs["input_ids"].shape[1], config.max_new_tokens)
            text_only = set(inputs) == {"input_ids", "attention_mask"} and supports(config)
            options = self.config.transformers
            tools = (options.calculator or options.lookup) and text_only and not return_logits
            if tools or (len(requests) > 1 and text_only):
                # text only: rows that ended leave the batch (backends/decoding.py), as generate samples
                force = self._tools(requests) if tools else None
                ids, mask = inputs["input_ids"], inputs["attention_mask"]
                new_tokens = decode_batch(model, ids, mask, config, force).cpu()
            else:
                out = model.generate(**inputs, generation_config=config)
                new_tokens = out.sequences[:, inputs["input_ids"].shape[1] :].cpu()
        stops = set(config.eos_token_id)
        token_ids: list[list[int]] = []
        for row in new_tokens.tolist():
            end = next((i for i, token in enumerate(row) if token in stops), len(row))
            token_ids.append(row[:end])
        logits: list[torch.Tensor] = []
        if return_logits:
            steps = torch.stack([step.float().cpu() for step in out.logits], dim=1)  # batch x steps x vocab
            logits = [steps[i, : len(ids)] for i, ids in enumerate(token_ids)]
        return GenerationOutput(token_ids, logits)

    def _tools(self, requests: Sequence[ChatRequest]) -> ToolTokens:
        """The tools that write into this batch's completions: the calculator, and the option lookup over
        the options each request's prompt states (reasoning/conclusion.py)."""
        options = self.config.transformers
        stated = [stated_options(request[-1].joined_text) if request else [] for request in requests]
        lookup = stated if options.lookup else None
        return ToolTokens(self.tokenizer, len(requests), options.calculator, lookup)

    def context_tokens(self) -> int | None:
        """The model's context length in tokens (``max_position_embeddings``); None when it does not say."""
        config = self._require_open().config
        context = getattr(getattr(config, "text_config", None), "max_position_embeddings", None)
        context = context or getattr(config, "max_position_embeddings", None)
        return context if isinstance(context, int) else None

    def prompt_room(self, request: ChatRequest, max_new_tokens: int | None = None) -> PromptRoom | None:
        """``request``'s tokens (images expanded) and the context's room for a prompt once
        ``max_new_tokens`` (None: the config's) are reserved; None when the context is unknown."""
        context = self.context_tokens()
        if context is None:
            return None
        with self._lock:
            tokens = int(self.prepare([request], encoded=False)["input_ids"].shape[1])
        return PromptRoom(tokens, context - (max_new_tokens or self.config.max_new_tokens))

    def _check_context(self, prompt_tokens: int, new_tokens: int) -> None:
        """Refuse a batch whose longest prompt plus ``new_tokens`` exceeds the model's context."""
        context = self.context_tokens()
        if context is not None and prompt_tokens + new_tokens > context:
            raise PromptTooLongError(
                f"prompt of {prompt_tokens} tokens + {new_tokens} new tokens exceeds the {context}-token "
                f"context of model {self.config.model!r}; ask about a shorter window or fewer key frames"
            )

    def generate(
        self,
        requests: Sequence[ChatRequest],
        *,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
    ) -> list[str]:
        """One completion per request, in order (greedy when the temperature is 0)."""
        output = self.generate_ids(requests, max_new_tokens=max_new_tokens, temperature=temperature)
        return self.decode(output.token_ids)

    def decode(self, token_ids: Sequence[Sequence[int]]) -> list[str]:
        """The completions' text from their generated token ids (special tokens dropped, stripped)."""
        if not token_ids:  # transformers < 5.24 decodes an empty batch as one empty text
            return []
        texts = self.tokenizer.batch_decode(token_ids, skip_special_tokens=True)
        return [text.strip() for text in texts]

    def close(self) -> None:
        """Drop the model and free GPU memory; later calls raise :class:`BackendError`."""
        with self._lock:
            on_gpu = self.device.type == "cuda"
            self.model = None
            self.image_cache.clear()
            if on_gpu:
                torch.cuda.empty_cache()
