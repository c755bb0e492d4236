"""An optional supervised warm start before GRPO: teach the answer format, not the answers' reasoning.

The paper starts GRPO from Qwen2.5-3B-Instruct, which already follows the ``<think>/<answer>`` format
often enough for the format reward to vary within a group. A model that never produces the tags (a small
or random model) gets the same reward for every completion, so every GRPO advantage is 0 and nothing
is learned. A few supervised steps on completions of the form ``<think>{generic reasoning}</think>
<answer>{solution}</answer>`` fix that (a "cold start", as in DeepSeek-R1). The reasoning text is a
fixed template on purpose: the warm start must not teach spatial reasoning the RL is meant to find.

What goes in ``<answer>`` is ``warm_start.answers``:

* ``solution``: the row's ground-truth answer. The warm start is then also a little SFT on the answers
  (and ``method: sft`` is exactly this, longer).
* ``shuffled``: an answer that carries no information about the row: a multiple-choice row gets a letter
  drawn uniformly from its options, a numeric row the solution of another training row of the same task
  (right unit and scale, wrong question). It teaches the format only and keeps the answers spread out, so
  the GRPO groups that follow disagree and carry an advantage. Measured with SmolLM2-135M: 16 steps on
  true answers collapsed its answers onto two letters, and GRPO then had nothing to compare (BENCHMARKS.md).
* ``masked``: as ``shuffled``, but the tokens between ``<answer>`` and ``</answer>`` carry no loss. The
  model learns the tags and the template and keeps its own answer distribution, untouched by the warm
  start's targets. Measured with SmolLM2-135M: 16 steps on shuffled letters still left one letter for
  nearly every question (the last batches' letters win at a high learning rate), so 8 sampled completions
  mostly agreed and GRPO groups had no advantage (BENCHMARKS.md, run 3).

Runs TRL's ``SFTTrainer`` on the prompt-completion form of the training split (loss on the completion
only) and saves a full model to ``output_dir/warm_start``, which GRPO then starts from. Off by default
(``warm_start.steps: 0``), as in the paper.
"""

from __future__ import annotations

import contextlib
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from embodied_r_ros.config import ConfigError
from embodied_r_ros.reasoning.options import OPTION_LETTERS

logger = logging.getLogger(__name__)

WARM_START_DIR = "warm_start"
DONE_MARKER = "warm_start_done.json"
THINK_TEMPLATE = "I check the key frames in order."
ANSWER_SOURCES = ("solution", "shuffled", "masked", "trace")
# A trace is taught only where the oracle's answer is right: a numeric one within this MRA of the solution.
TRACE_MIN_MRA = 0.95
# Learning-rate schedules a warm start may use (transformers' names; the ones that need no more settings).
SCHEDULERS = ("constant", "constant_with_warmup", "linear", "cosine")


@dataclass(frozen=True)
class WarmStartSection:
    """Supervised steps before GRPO (0 = none, as in the paper)."""

    steps: int = 0
    learning_rate: float = 1e-4
    batch_size: int = 4
    answers: str = "solution"  # "solution", "shuffled", "masked" (format only) or "trace" (oracle reasoning)
    lora: bool = False  # train a LoRA adapter (the config's lora section) instead of every weight
    save_steps: int = 0  # a checkpoint every this many steps, resumed from after an interruption; 0 = none
    # The learning rate over the run: any transformers scheduler name ("constant", "cosine", ...), after
    # a linear warm-up over that share of the steps. Long full fine-tunes end better with a decay.
    scheduler: str = "constant"
    warmup_ratio: float = 0.0
    # Batches of prompts of like length (transformers' LengthGroupedSampler over 50 batches at a time):
    # less padding where lengths differ, as mission prompts (~2000 tokens) beside scene prompts (~550) do.
    group_by_length: bool = False
    # Recompute activations in the backward pass (TRL's default): a third more compute for far less memory.
    # Off pays where the batches fit in RAM (8 scene prompts with traces: ~12 GB at peak, rl/allocator.py).
    gradient_checkpointing: bool = True

    def __post_init__(self) -> None:
        if self.steps < 0 or self.learning_rate <= 0 or self.batch_size < 1 or self.save_steps < 0:
            raise ConfigError(
                f"warm_start needs steps >= 0, learning_rate > 0 and batch_size >= 1; got {self}"
            )
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ConfigError(f"warm_start.warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.scheduler not in SCHEDULERS:
            raise ConfigError(
                f"warm_start.scheduler must be one of {', '.join(SCHEDULERS)}, got {self.scheduler!r}"
            )
        if self.answers not in ANSWER_SOURCES:
            raise ConfigError(
                f"warm_start.answers must be one of {', '.join(ANSWER_SOURCES)}, got {self.answers!r}"
            )


def target_completion(solution: Any) -> str:
    """The supervised completion for a row: fixed reasoning, then the row's solution as the answer."""
    return f"<think>{THINK_TEMPLATE}</think><answer>{solution}</answer>"


def shuffled_answers(rows: Sequence[Mapping[str, Any]], seed: int) -> list[str]:
    """Answers that say nothing about their rows (``answers: shuffled``): per multiple-choice row a letter
    drawn uniformly from its options; per numeric row the solution of another row of the same task (a
    derangement where the task has two or more rows), so unit and scale stay right."""
    rng = random.Random(seed)
    answers = [str(row["solution"]) for row in rows]
    by_task: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row.get("options"):
            answers[i] = OPTION_LETTERS[rng.randrange(len(row["options"]))]
        else:
            by_task.setdefault(str(row.get("task", "")), []).append(i)
    for indices in by_task.values():
        if len(indices) > 1:
            shift = rng.randrange(1, len(indices))  # a rotation: no row keeps its own solution
            for k, i in enumerate(indices):
                answers[i] = str(rows[indices[(k + shift) % len(indices)]]["solution"])
    return answers


def trace_completion(row: Mapping[str, Any]) -> str | None:
    """The oracle's reasoning and answer for a row (``answers: trace``), as a completion:
    ``<think>{reasoning that cites frames, objects, sizes, motions}</think><answer>{answer}</answer>``.

    The oracle (:mod:`embodied_r_training.tasks.oracle`, or for a mission question
    :mod:`embodied_r_training.tasks.mission.oracle`) reads only the row's prompt. None where it cannot
    answer from it, or answers wrongly (a multiple-choice letter other than the solution, a number with an
    MRA below :data:`TRACE_MIN_MRA`): such a row has no reasoning worth teaching.
    """
    from embodied_r_ros.reasoning.answers import mean_relative_accuracy

    from ..tasks.mission.oracle import mission_oracle_trace
    from ..tasks.oracle import oracle_trace

    user = next((m["content"] for m in row["prompt"] if m["role"] == "user"), "")
    user = user if isinstance(user, str) else str(user)
    trace = oracle_trace(user) or mission_oracle_trace(user)
    if trace is None:
        return None
    think, answer = trace
    solution = str(row["solution"]).strip()
    if row.get("options"):
        right = str(answer) == solution
    else:
        right = mean_relative_accuracy(float(answer), float(solution)) >= TRACE_MIN_MRA
    return f"<think>{think}</think><answer>{answer}</answer>" if right else None


def warm_start_rows(dataset: Any, answers: str = "solution", seed: int = 0) -> Any:
    """``dataset`` (prompt, solution, ...) as TRL prompt-completion rows (conversational), answering
    ``answers`` (see :class:`WarmStartSection`). With ``trace``, rows without a right oracle trace are left
    out (counted in the log)."""
    if answers == "trace":
        completions = [trace_completion(dataset[i]) for i in range(len(dataset))]
        keep = [i for i, c in enumerate(completions) if c is not None]
        logger.info("warm start on oracle traces: %d of %d rows have one (the others are left out)",
                    len(keep), len(dataset))  # fmt: skip
        if not keep:
            raise ConfigError(
                "warm_start.answers trace: the oracle answers none of the training rows from their prompts; "
                "traces need prompts from ground-truth perception (`embodied-r prepare --perceiver "
                "ground_truth`)"
            )
        dataset = dataset.select(keep)
        completions = [completions[i] for i in keep]
    elif answers in ("shuffled", "masked"):  # masked: placeholders, taken out of the loss later
        rows = [dataset[i] for i in range(len(dataset))]
        completions = [target_completion(a) for a in shuffled_answers(rows, seed)]
    else:
        completions = [target_completion(s) for s in dataset["solution"]]
    return dataset.map(
        lambda row, i: {"completion": [{"role": "assistant", "content": completions[i]}]},
        with_indices=True,
        remove_columns=[c for c in dataset.column_names if c not in ("prompt",)],
    )


def answer_masked_tokens(
    prompt: list[dict[str, str]], completion: list[dict[str, str]], tokenizer: Any
) -> dict[str, list[int]]:
    """One prompt-completion row tokenized as TRL does (the chat template over the whole conversation), with
    ``labels`` -100 on the prompt and on every token that touches the text inside ``<answer>...</answer>``."""
    prompt_text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    full_text = tokenizer.apply_chat_template([*prompt, *completion], tokenize=False)
    if not full_text.startswith(prompt_text):
        raise ValueError("the chat template renders the prompt differently inside the conversation")
    content = completion[0]["content"]
    at = full_text.index(content, len(prompt_text))
    start = at + content.index("<answer>") + len("<answer>")
    end = at + content.index("</answer>")
    encoded = tokenizer(full_text, add_special_tokens=False, return_offsets_mapping=True)
    spans = encoded["offset_mapping"]
    labels = [
        -100 if token_end <= len(prompt_text) or (token_start < end and token_end > start) else token
        for token, (token_start, token_end) in zip(encoded["input_ids"], spans, strict=True)
    ]
    return {"input_ids": list(encoded["input_ids"]), "labels": labels}


def answer_masked_rows(rows: Any, tokenizer: Any) -> Any:
    """``rows`` (prompt, completion) pre-tokenized as ``input_ids``/``labels``, the answer out of the loss."""
    return rows.map(
        lambda row: answer_masked_tokens(row["prompt"], row["completion"], tokenizer),
        remove_columns=rows.column_names,
    )


@contextlib.contextmanager
def lm_head_on_labelled_positions() -> Iterator[None]:
    """Within it, TRL's fused LM head (which ``SFTTrainer`` adds) projects only the positions with a label,
    on every device: TRL 1.16 does so only where Triton runs and on the CPU scores every position, prompt
    included, then zeroes the prompt's. The loss and its gradients are the same (a test checks them); an SFT
    step over 8 scene prompts with traces, where ~2/3 of the tokens are prompt, takes ~1.5x less time with
    this and the fused AdamW (BENCHMARKS.md). The kernel itself stays TRL's CPU one."""
    import trl.trainer.utils as trl_utils

    chosen = trl_utils._use_triton  # read by the fused forward at each call: compact or every position

    def compact(device: Any) -> bool:
        return True if device.type == "cpu" else chosen(device)

    trl_utils._use_triton = compact
    try:
        yield
    finally:
        trl_utils._use_triton = chosen


def warm_start(
    model: Any,
    tokenizer: Any,
    dataset: Any,
    section: WarmStartSection,
    out_dir: Path,
    seed: int,
    cpu: bool,
    peft_config: Any = None,
    bf16: bool = False,
) -> Path:
    """Run ``section.steps`` SFT steps of ``model`` on ``dataset`` and save it to ``out_dir`` (the whole
    model, or with ``peft_config`` the LoRA adapter only). ``bf16`` on the CPU: the matrix products in bf16
    autocast over float32 weights.

    A finished warm start (``out_dir`` holds its marker) is not run again, so a resumed job skips it; an
    interrupted one with ``section.save_steps`` continues from its last checkpoint.
    """
    import json

    from trl import SFTConfig, SFTTrainer

    if (out_dir / DONE_MARKER).is_file():
        logger.info("warm start already done: %s", out_dir)
        return out_dir
    args = SFTConfig(
        output_dir=str(out_dir / "run"),
        max_steps=section.steps,
        learning_rate=section.learning_rate,
        per_device_train_batch_size=section.batch_size,
        lr_scheduler_type=section.scheduler,
        warmup_steps=section.warmup_ratio,  # transformers reads a value below 1 as a share of the steps
        logging_steps=max(1, section.steps // 10),
        save_strategy="steps" if section.save_steps else "no",
        save_steps=section.save_steps or 500,
        save_total_limit=2,
        report_to="none",
        seed=seed,
        use_cpu=cpu,
        bf16=bf16 if cpu else None,  # on the CPU: bf16 autocast, ~2x faster with AVX512-BF16
        optim="adamw_torch_fused",  # one kernel over every parameter (CPU too): ~4x less time than foreach
        max_length=None,  # the data set's prompts were already checked against max_prompt_tokens
        train_sampling_strategy="group_by_length" if section.group_by_length else "random",
        gradient_checkpointing=section.gradient_checkpointing,
    )
    rows = warm_start_rows(dataset, section.answers, seed)
    if section.answers == "masked":
        rows = answer_masked_rows(rows, tokenizer)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=rows,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    logger.info("warm start: %d supervised steps (answers: %s%s)", section.steps, section.answers,
                ", LoRA" if peft_config is not None else "")  # fmt: skip
    checkpoints = sorted((out_dir / "run").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    with lm_head_on_labelled_positions():
        trainer.train(resume_from_checkpoint=str(checkpoints[-1]) if checkpoints else None)
    trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    (out_dir / DONE_MARKER).write_text(json.dumps({"steps": section.steps, "loss": losses}) + "\n")
    return out_dir
