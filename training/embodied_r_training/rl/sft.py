"""Supervised fine-tuning (``method: sft``) and GRPO's optional warm start: :mod:`.warm_start`'s steps on
the policy :mod:`.loading` loads, saved as the run's final model (:mod:`.outputs`).

Apart from :mod:`.train` (GRPO) on purpose: an SFT run's result is kept by the code it runs
(``training/experiments/steps.py``), and a change to GRPO must not make a finished SFT run look stale.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from .loading import load_model, load_split, load_tokenizer, lora_config, resolve_policy
from .outputs import FINAL_DIR, TrainResult, write_config_copy, write_node_params
from .train_config import TrainConfig

# The columns SFT reads (GRPO's rewards need more: train_config.required_columns).
SFT_COLUMNS = ("prompt", "solution")


def run_warm_start(config: TrainConfig, out: Path | None = None, answers: str | None = None) -> Path:
    """The supervised warm start (:mod:`.warm_start`) into ``out`` (default ``output_dir/warm_start``),
    answering ``answers`` (default ``warm_start.answers``); returns that dir. With ``warm_start.lora`` it
    trains and saves a LoRA adapter of the config's ``lora`` section."""
    from .warm_start import WARM_START_DIR, warm_start

    path = resolve_policy(config.model)
    tokenizer = load_tokenizer(config, path)
    dataset = load_split(config, config.data.train_split, tokenizer, SFT_COLUMNS)
    model = load_model(config, path)
    out = out or Path(config.output_dir) / WARM_START_DIR
    cpu = bool(config.grpo.get("use_cpu"))
    section = replace(config.warm_start, answers=answers or config.warm_start.answers)
    peft_config = lora_config(config) if section.lora else None
    bf16 = bool(config.grpo.get("bf16"))  # on the CPU: bf16 autocast over float32 weights (load_model)
    return warm_start(model, tokenizer, dataset, section, out, config.seed, cpu, peft_config, bf16)


def train_sft(config: TrainConfig) -> TrainResult:
    """``method: sft``: ``warm_start.steps`` supervised steps on the true answers, or with
    ``warm_start.answers: trace`` on the oracle's reasoning traces (a cold start that teaches reasoning),
    saved as ``output_dir/final`` (the SFT baseline of the paper's SFT-vs-RL question; with
    ``warm_start.lora`` a LoRA adapter). A finished run is not repeated."""
    from .warm_start import DONE_MARKER

    output_dir = Path(config.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    answers = "trace" if config.warm_start.answers == "trace" else "solution"  # never format-only targets
    final = run_warm_start(config, output_dir / FINAL_DIR, answers=answers)
    write_config_copy(config, output_dir)
    losses = json.loads((final / DONE_MARKER).read_text(encoding="utf-8")).get("loss", [])
    result = TrainResult(
        output_dir=output_dir,
        final_dir=final,
        merged_dir=None,
        base_model=resolve_policy(config.model),
        global_step=config.warm_start.steps,
        log_history=[{"loss": loss} for loss in losses],
    )
    write_node_params(result)
    return result
