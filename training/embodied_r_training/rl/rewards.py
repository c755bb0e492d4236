"""The GRPO rewards of Embodied-R, as TRL reward functions.

TRL's GRPOTrainer (1.16, ``_calculate_rewards``) calls every reward function as
``f(prompts=..., completions=..., completion_ids=..., trainer_state=..., log_extra=..., log_metric=...,
**columns)``, where each data-set column (all but prompt/completion/completion_ids) is a list with one
entry per completion, and expects one float (or None) per completion. Completions are plain strings, or
chat messages ``[{"role": "assistant", "content": "..."}]`` for conversational data sets; both are
accepted everywhere here.

Rewards:

* :func:`format_reward`: 1.0 iff the whole completion is ``<think>...</think><answer>...</answer>`` and
  nothing else (``answers.parse_completion(...).well_formed``).
* :func:`accuracy_reward`: multiple choice: 1.0 iff the letter read from the answer part only equals the
  ``solution`` letter; numeric: VSI-Bench mean relative accuracy of the answer's number.
* :class:`ConsistencyReward`: for correct answers only, a frozen reference model reads the question with
  its options and the policy's reasoning (not the video description) and answers; 1.0 when it agrees.
* :class:`StagedReward`: the weighted total with the staged weights of :mod:`.schedule`, logging every
  reward and the total per step. This is the one function the trainer hands to TRL.

Data-set columns (:mod:`embodied_r_training.data.schema` defines them all): ``solution`` (required) holds
the correct letter ("B") or the number (in SI units, as ``answers.extract_number`` reads answers);
``options`` (optional; required by the consistency reward) holds the option texts, lettered or not, in
letter order; ``question`` (consistency reward only) the question text without options.

Multiple choice or numeric, per row: with an ``options`` column the row is multiple choice iff its
options list is non-empty; without one, iff ``solution`` is a single letter (a str like "B"). Anything
else is numeric and its ``solution`` must be a finite number (or a str of one). A solution that fits
neither raises ValueError naming the row: that is a data-set error to fix, not a zero reward.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from embodied_r_ros.answers import (
    ParsedCompletion,
    extract_choice,
    extract_number,
    mean_relative_accuracy,
    parse_completion,
)
from embodied_r_ros.backends.base import ChatMessage, GenerationBackend
from embodied_r_ros.prompts import question_block

from .schedule import RewardSchedule, RewardWeights, epoch_from_state

logger = logging.getLogger(__name__)

# The reference model's prompt. Change REFERENCE_PROMPT_VERSION whenever a text below changes, so logged
# consistency rates from different prompts are not compared as if they were the same measurement.
REFERENCE_PROMPT_VERSION = "1"
REFERENCE_SYSTEM = (
    "You check reasoning. You get a question and someone's reasoning about it. Give the answer that this "
    "reasoning leads to, whether or not you agree with it. Reply with the answer only, nothing else."
)
REFERENCE_USER = "{question}\n\nReasoning:\n{think}\n\nThe answer this reasoning leads to:"

Completion = str | Sequence[dict[str, Any]]


# ----------------------------------------------------------------------------------------------------
# Reading completions and rows


def completion_text(completion: Completion) -> str:
    """The text of one completion: a str as is; chat messages joined in order (their text content).

    A message's ``content`` may be a str or a list of parts ``{"type": "text", "text": ...}`` (VLM
    style); non-text parts are skipped. Anything unreadable is ``""`` (scores 0, never raises).
    """
    if isinstance(completion, str):
        return completion
    if not isinstance(completion, Sequence):
        return ""
    texts = []
    for message in completion:
        content = message.get("content", "") if isinstance(message, dict) else ""
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, Sequence):
            texts.extend(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "".join(texts)


@dataclass(frozen=True)
class Graded:
    """One completion read against its row: the parse, the policy's answer and its accuracy."""

    parsed: ParsedCompletion
    multiple_choice: bool
    choice: str | None  # the letter read from the answer part (multiple choice)
    value: float | None  # the number read from the answer part, SI units (numeric)
    accuracy: float  # 1/0 for multiple choice, MRA in [0, 1] for numeric


def _column(kwargs: dict[str, Any], name: str, n: int) -> list[Any] | None:
    """Column ``name`` as a list of ``n`` entries, None when absent; a wrong length raises."""
    values = kwargs.get(name)
    if values is None:
        return None
    values = list(values)
    if len(values) != n:
        raise ValueError(
            f"column {name!r} has {len(values)} entries for {n} completions; pass one per completion"
        )
    return values


def _is_letter(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value.strip()) == 1
        and value.strip().isascii()
        and value.strip().isalpha()
    )


def _numeric_solution(solution: Any, row: int) -> float:
    try:
        value = float(solution) if not isinstance(solution, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(
            f"row {row}: solution {solution!r} is neither a choice letter nor a finite number; fix the "
            "data set's solution column (a letter for multiple choice, a number in SI units otherwise)"
        )
    return value


def grade(
    completion: Completion, solution: Any, options: Sequence[str] | None = None, row: int = 0
) -> Graded:
    """Read ``completion`` against its row's ``solution`` (and ``options``, None when there is no column).

    Raises ValueError for a ``solution`` that fits the row's kind neither as a letter nor as a number.
    """
    parsed = parse_completion(completion_text(completion))
    multiple_choice = bool(options) if options is not None else _is_letter(solution)
    if multiple_choice:
        if not _is_letter(solution):
            raise ValueError(
                f"row {row}: multiple-choice solution must be one option letter, got {solution!r}; fix the "
                "data set's solution column"
            )
        choice = extract_choice(parsed.answer, list(options) if options else None)
        accuracy = 1.0 if choice is not None and choice == solution.strip().upper() else 0.0
        return Graded(parsed, True, choice, None, accuracy)
    value = extract_number(parsed.answer)
    accuracy = mean_relative_accuracy(value, _numeric_solution(solution, row))
    return Graded(parsed, False, None, value, accuracy)


def grade_batch(completions: Sequence[Completion], solution: Sequence[Any], **kwargs: Any) -> list[Graded]:
    """:func:`grade` for a TRL batch (uses the ``options`` column when present)."""
    n = len(completions)
    solutions = _column({"solution": solution}, "solution", n)
    if solutions is None:
        raise ValueError(
            "the accuracy rewards need the data-set column 'solution' (letter or number per row)"
        )
    options = _column(kwargs, "options", n)
    return [
        grade(c, s, None if options is None else (options[i] or ()), i)
        for i, (c, s) in enumerate(zip(completions, solutions, strict=True))
    ]


# ----------------------------------------------------------------------------------------------------
# Rule rewards


def format_reward(completions: Sequence[Completion], **kwargs: Any) -> list[float]:
    """1.0 per completion that is exactly ``<think>...</think><answer>...</answer>``, else 0.0."""
    return [1.0 if parse_completion(completion_text(c)).well_formed else 0.0 for c in completions]


def accuracy_reward(completions: Sequence[Completion], solution: Sequence[Any], **kwargs: Any) -> list[float]:
    """Per completion: multiple choice 1.0/0.0 (letter from the answer part only), numeric MRA in [0, 1]."""
    return [g.accuracy for g in grade_batch(completions, solution, **kwargs)]


# ----------------------------------------------------------------------------------------------------
# Logical consistency


@dataclass(frozen=True)
class ConsistencyConfig:
    """How the reference model is queried and when a numeric answer counts as correct."""

    temperature: float = 0.1  # paper: low temperature
    max_new_tokens: int = 16  # a letter or a number with its unit
    numeric_correct_mra: float = 0.5  # numeric answers with MRA >= this (error < 30 %) are checked

    def __post_init__(self) -> None:
        if self.temperature < 0 or self.max_new_tokens < 1 or not 0 < self.numeric_correct_mra <= 1:
            raise ValueError(
                f"ConsistencyConfig needs temperature >= 0, max_new_tokens >= 1 and numeric_correct_mra in "
                f"(0, 1]; got {self}"
            )


def reference_request(question: str, options: Sequence[str], think: str) -> list[ChatMessage]:
    """The reference model's chat: the question with its options and the policy's reasoning only."""
    user = REFERENCE_USER.format(question=question_block(question, options), think=think or "(none)")
    return [ChatMessage.text("system", REFERENCE_SYSTEM), ChatMessage.text("user", user)]


# What a rank with nothing to check sends a collective reference (its reply is discarded).
PLACEHOLDER_REQUEST = reference_request("(nothing to check on this rank)", [], "")


def consistency_eligible(graded: Graded, config: ConsistencyConfig) -> bool:
    """Whether the consistency check applies to a graded completion: it has reasoning and its answer is
    right (the letter, or a numeric MRA of at least ``config.numeric_correct_mra``). Training's reward and
    ``embodied-r eval`` both use this rule."""
    if not graded.parsed.think.strip():
        return False
    if graded.multiple_choice:
        return graded.accuracy == 1.0
    return graded.accuracy >= config.numeric_correct_mra


class ConsistencyReward:
    """Logical consistency: does a frozen reference model, given only the question and the reasoning, reach
    the policy's answer?

    Only completions whose answer is correct and whose ``<think>`` holds reasoning are checked (multiple
    choice: right letter; numeric: MRA >= ``config.numeric_correct_mra``); the others score 0.0: without
    reasoning there is nothing to be consistent with, and the reference guessing from the question alone
    must not reward skipping the reasoning. All of a call's reference queries go to
    ``backend.generate`` in ONE batched call, and none when no answer is correct, except on a backend
    whose ``collective`` is true (the in-process reference in a multi-process run: its generate enters
    collectives such as ZeRO-3's parameter gather, which every rank must join): it gets exactly one call
    per reward call on every rank, a placeholder request where this rank has nothing to check. The
    reference's reply is read like a policy answer (inside ``<answer>`` tags if it uses them, else the
    whole reply). Scores: multiple choice 1.0 when its letter equals the policy's, else 0.0; numeric the
    MRA of its number against the policy's number (1.0 within 5 %).

    ``backend`` is any :class:`~embodied_r_ros.backends.GenerationBackend`: an OpenAI-compatible endpoint,
    a second in-process model, or (with LoRA, the trainer's default) the policy's own base model: the
    trainer then passes a backend whose ``generate`` runs under peft's ``disable_adapter()``, so no second
    copy of the weights is loaded. Columns needed: ``solution``, ``question``, ``options``.
    """

    __name__ = "consistency_reward"  # TRL names reward functions by __name__ in its logs

    def __init__(self, backend: GenerationBackend, config: ConsistencyConfig | None = None) -> None:
        if not callable(getattr(backend, "generate", None)):
            raise TypeError(f"ConsistencyReward needs a backend with generate(requests), got {backend!r}")
        self.backend = backend
        self.config = config or ConsistencyConfig()

    def __call__(
        self,
        completions: Sequence[Completion],
        solution: Sequence[Any],
        question: Sequence[str] | None = None,
        options: Sequence[Sequence[str]] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        """One score per completion; see the class docstring."""
        n = len(completions)
        if question is None or options is None:
            raise ValueError(
                "the consistency reward needs the data-set columns 'question' and 'options' (option texts, "
                "[] for numeric questions); add them to the training data set"
            )
        questions = _column({"question": question}, "question", n) or []
        option_lists = [list(o or ()) for o in _column({"options": options}, "options", n) or []]
        graded = grade_batch(completions, solution, options=option_lists)
        rows = [i for i, g in enumerate(graded) if consistency_eligible(g, self.config)]
        scores = [0.0] * n
        if not rows:
            if getattr(self.backend, "collective", False):
                # Join the other ranks' reference call: a rank that skipped it would hang them.
                self.backend.generate([PLACEHOLDER_REQUEST], max_new_tokens=1, temperature=0.0)
            return scores
        requests = [
            reference_request(str(questions[i]), option_lists[i], graded[i].parsed.think) for i in rows
        ]
        replies = self.backend.generate(
            requests, max_new_tokens=self.config.max_new_tokens, temperature=self.config.temperature
        )
        if len(replies) != len(requests):
            raise RuntimeError(
                f"reference backend returned {len(replies)} replies for {len(requests)} requests; it must "
                "return one completion per request"
            )
        for i, reply in zip(rows, replies, strict=True):
            parsed = parse_completion(reply)
            text = parsed.answer or str(reply)
            if graded[i].multiple_choice:
                scores[i] = 1.0 if extract_choice(text, option_lists[i]) == graded[i].choice else 0.0
            else:
                policy_value = graded[i].value
                scores[i] = mean_relative_accuracy(extract_number(text), policy_value or 0.0)
        return scores


# ----------------------------------------------------------------------------------------------------
# Weighted total with the staged schedule


class StagedReward:
    """The total reward ``w_f * format + w_a * accuracy + w_c * consistency`` with weights by epoch.

    The weights come from ``schedule`` for TRL's ``trainer_state``: its epoch (schedule.epoch_from_state), or
    its optimizer step for a schedule by steps.
    The consistency reward is queried only while its weight is > 0 (the paper's epochs 1-4 need no
    reference model); ``consistency`` may be None for schedules that never weight it. Each call logs the
    epoch, the weights, every reward's batch mean and the total's (``logging`` at INFO), and passes them to
    TRL's ``log_metric`` when given, under ``reward/format``, ``reward/accuracy``, ``reward/consistency``
    and ``reward/total``, and the stage's weights under ``weight/format``, ``weight/accuracy`` and
    ``weight/consistency``. Hand TRL only this function (reward_weights unset): the weights are inside.
    """

    __name__ = "embodied_r_reward"

    def __init__(
        self, schedule: RewardSchedule | None = None, consistency: ConsistencyReward | None = None
    ) -> None:
        self.schedule = schedule or RewardSchedule()
        self.consistency = consistency
        if consistency is None and any(s.consistency > 0 for s in self.schedule.stages):
            raise ValueError(
                "the reward schedule weights consistency but no ConsistencyReward was given; pass one built "
                "from a reference backend, or set consistency: 0 in every stage"
            )

    def __call__(
        self,
        completions: Sequence[Completion],
        solution: Sequence[Any],
        trainer_state: Any = None,
        log_metric: Callable[[str, float], None] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        """One total reward per completion; see the class docstring."""
        epoch = epoch_from_state(trainer_state)
        weights = self.schedule.weights_for_state(trainer_state)
        fmt = format_reward(completions)
        acc = accuracy_reward(completions, solution, **kwargs)
        cons: list[float] | None = None
        if weights.consistency > 0 and self.consistency is not None:
            cons = self.consistency(completions, solution, **kwargs)
        total = [
            weights.format * f + weights.accuracy * a + weights.consistency * c
            for f, a, c in zip(fmt, acc, cons or [0.0] * len(fmt), strict=True)
        ]
        self._log(epoch, weights, fmt, acc, cons, total, log_metric)
        return total

    @staticmethod
    def _log(
        epoch: int,
        weights: RewardWeights,
        fmt: list[float],
        acc: list[float],
        cons: list[float] | None,
        total: list[float],
        log_metric: Callable[[str, float], None] | None,
    ) -> None:
        means = {"format": _mean(fmt), "accuracy": _mean(acc), "total": _mean(total)}
        if cons is not None:
            means["consistency"] = _mean(cons)
        logger.info(
            "rewards epoch %d weights f/a/c %.3f/%.3f/%.3f n=%d: format %.4f accuracy %.4f consistency %s "
            "total %.4f",
            epoch, weights.format, weights.accuracy, weights.consistency, len(total), means["format"],
            means["accuracy"], f"{means['consistency']:.4f}" if cons is not None else "skipped (weight 0)",
            means["total"],
        )  # fmt: skip
        if log_metric is not None:
            for name, value in means.items():
                log_metric(f"reward/{name}", value)
            for name in ("format", "accuracy", "consistency"):
                log_metric(f"weight/{name}", getattr(weights, name))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
