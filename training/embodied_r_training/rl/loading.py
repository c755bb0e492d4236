"""The policy a training run starts from: its weights, its tokenizer, its LoRA settings, and the split of
the data set it trains on (checked, over-long prompts left out). SFT and GRPO load alike."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embodied_r_ros.config import ConfigError

from .train_config import TrainConfig, required_columns

logger = logging.getLogger(__name__)


def resolve_policy(model: str) -> Path:
    """The local directory of the policy LM; ``tiny`` is the project's tiny random LM (built if missing)."""
    from embodied_r_ros.backends.loading import resolve_model_dir

    if model == "tiny":
        from embodied_r_ros.testing.tiny_models import LM_SUBDIR, ensure_tiny_models

        return ensure_tiny_models() / LM_SUBDIR
    return resolve_model_dir(model)


def load_split(config: TrainConfig, split: str, tokenizer: Any, columns: Sequence[str] | None = None) -> Any:
    """One split of the data set as a ``datasets.Dataset``, checked and with over-long prompts left out.

    Reads ``<data.path>/<split>.parquet`` or ``.jsonl`` (:func:`..data.schema.read_split`: missing columns
    raise :class:`ConfigError` naming them), checking for ``columns`` (by default those the config's rewards
    read). Prompts longer than ``data.max_prompt_tokens`` (chat template applied) are dropped and counted:
    truncating one would cut key-frame descriptions out of the evidence.
    """
    from ..data.schema import read_split

    root = Path(config.data.path)
    if not config.data.path or not root.is_dir():
        raise ConfigError(
            f"{config.source}: data.path {str(root)!r} is not a directory; build a data set with "
            "`embodied-r prepare QUESTIONS --out DIR` (or `embodied-r synth` first) and set data.path to DIR"
        )
    if columns is None:  # GRPO: what its rewards read
        columns = required_columns(config)
        needed_by = f"training with the rewards {', '.join(r.name for r in config.schedule.rewards())}"
    else:
        needed_by = f"method {config.method}"
    dataset = read_split(root, split, tuple(columns), needed_by)
    if config.data.limit and split == config.data.train_split:
        dataset = dataset.select(range(min(config.data.limit, len(dataset))))
    limit = config.data.max_prompt_tokens

    def fits(row: dict[str, Any]) -> bool:
        ids = tokenizer.apply_chat_template(row["prompt"], tokenize=True, add_generation_prompt=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        return len(ids) <= limit

    kept = dataset.filter(fits)
    if len(kept) < len(dataset):
        logger.warning(
            "split %s: left out %d of %d prompts longer than data.max_prompt_tokens=%d",
            split, len(dataset) - len(kept), len(dataset), limit,
        )  # fmt: skip
    if len(kept) == 0:
        raise ConfigError(f"split {split!r} of {root}: no prompt fits data.max_prompt_tokens={limit}")
    return kept


def load_tokenizer(config: TrainConfig, path: Path) -> Any:
    """The policy's tokenizer (it must have a chat template: the prompts are chats)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if not tokenizer.chat_template:
        raise ConfigError(
            f"model {config.model} ({path}) has no chat template; train an instruction-tuned LM"
        )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(config: TrainConfig, path: Path) -> Any:
    """The policy's weights from ``path``: bf16 when ``grpo.bf16`` is set on a GPU, else float32.

    On the CPU (``grpo.use_cpu``) ``bf16`` means bf16 autocast over float32 weights: the matrix products
    run at bf16 speed (about 2x on CPUs with AVX512-BF16), while updates of the size of a small learning
    rate are not rounded away, as they are in weights stored as bf16 (8 bits of mantissa).
    """
    import torch
    from transformers import AutoModelForCausalLM

    bf16_weights = config.grpo.get("bf16") and not config.grpo.get("use_cpu")
    dtype = torch.bfloat16 if bf16_weights else torch.float32
    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)


def lora_config(config: TrainConfig) -> Any:
    """peft's LoraConfig of the config's ``lora`` section."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora.r, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
        target_modules=config.lora.modules(), task_type="CAUSAL_LM",
    )  # fmt: skip
