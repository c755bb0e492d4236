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

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from embodied_r_ros.config import ConfigError
from embodied_r_ros.options import OPTION_LETTERS

logger = logging.getLogger(__name__)

WARM_START_DIR = "warm_start"
DONE_MARKER = "warm_start_done.json"
THINK_TEMPLATE = "I check the key frames in order."
ANSWER_SOURCES = ("solution", "shuffled", "masked")


@dataclass(frozen=True)
class WarmStartSection:
    """Supervised steps before GRPO (0 = none, as in the paper)."""

    steps: int = 0
    learning_rate: float = 1e-4
    batch_size: int = 4
    answers: str = "solution"  # what the targets answer: "solution", "shuffled" or "masked" (format only)

    def __post_init__(self) -> None:
        if self.steps < 0 or self.learning_rate <= 0 or self.batch_size < 1:
            raise ConfigError(
                f"warm_start needs steps >= 0, learning_rate > 0 and batch_size >= 1; got {self}"
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


def warm_start_rows(dataset: Any, answers: str = "solution", seed: int = 0) -> Any:
    """``dataset`` (prompt, solution, ...) as TRL prompt-completion rows (conversational), answering
    ``answers`` (see :class:`WarmStartSection`)."""
    if answers in ("shuffled", "masked"):  # masked: placeholders, taken out of the loss by answer_masked_rows
        targets = shuffled_answers([dataset[i] for i in range(len(dataset))], seed)
    else:
        targets = [str(s) for s in dataset["solution"]]
    return dataset.map(
        lambda row, i: {"completion": [{"role": "assistant", "content": target_completion(targets[i])}]},
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


def warm_start(
    model: Any, tokenizer: Any, dataset: Any, section: WarmStartSection, out_dir: Path, seed: int, cpu: bool
) -> Path:
    """Run ``section.steps`` SFT steps of ``model`` on ``dataset`` and save it to ``out_dir``.

    A finished warm start (``out_dir`` holds its marker) is not run again, so a resumed job skips it.
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
        lr_scheduler_type="constant",
        logging_steps=max(1, section.steps // 10),
        save_strategy="no",
        report_to="none",
        seed=seed,
        use_cpu=cpu,
        bf16=False if cpu else None,
        max_length=None,  # the data set's prompts were already checked against max_prompt_tokens
    )
    rows = warm_start_rows(dataset, section.answers, seed)
    if section.answers == "masked":
        rows = answer_masked_rows(rows, tokenizer)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=rows,
        processing_class=tokenizer,
    )
    logger.info("warm start: %d supervised steps on the answer format (answers: %s)", section.steps,
                section.answers)  # fmt: skip
    trainer.train()
    trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    (out_dir / DONE_MARKER).write_text(json.dumps({"steps": section.steps, "loss": losses}) + "\n")
    return out_dir
