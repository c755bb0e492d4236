"""The GRPO rewards of Embodied-R, as TRL reward functions, and their registry by name.

TRL's GRPOTrainer (1.16, ``_calculate_rewards``) calls every reward function as
``f(prompts=..., completions=..., completion_ids=..., trainer_state=..., log_extra=..., log_metric=...,
**columns)``, where each data-set column (all but prompt/completion/completion_ids) is a list with one
entry per completion, and expects one float (or None) per completion. Completions are plain strings, or
chat messages ``[{"role": "assistant", "content": "..."}]`` for conversational data sets; both are
accepted everywhere here.

Rewards, registered by name (:func:`register_reward`; a training config weights them by that name, and
training logs each one's batch mean as ``rewards/<name>/mean``):

* ``format``, :func:`format_reward`: 1.0 iff the whole completion is
  ``<think>...</think><answer>...</answer>`` and nothing else (``answers.parse_completion(...).well_formed``).
* ``accuracy``, :func:`accuracy_reward`: multiple choice: 1.0 iff the letter read from the answer part only
  equals the ``solution`` letter; numeric: VSI-Bench mean relative accuracy of the answer's number.
* ``consistency``, :class:`ConsistencyReward`: for correct answers only, a frozen reference model reads the
  question with its options and the policy's reasoning (not the video description) and answers; 1.0 when
  it agrees. Built per trainer from its reference model (:func:`build_consistency_reward`), and computed
  only while its weight is > 0.

A new reward is one function here (or in any module imported before training) decorated with
``@register_reward("name")``, plus its weight in the reward stages of a config (``name: 1``).
:class:`~.staged_reward.StagedReward` forms the weighted total by stage (:mod:`.schedule`).

Data-set columns (:mod:`embodied_r_training.data.schema` defines them all): ``solution`` (required) holds
the correct letter ("B") or the number (in SI units, as ``answers.extract_number`` reads answers);
``options`` (optional; required by the consistency reward) holds the option texts, lettered or not, in
letter order; ``question`` (consistency reward only) the question text without options. Each registered
reward names the columns it needs, and training checks the data set for them.

Multiple choice or numeric, per row: with an ``options`` column the row is multiple choice iff its
options list is non-empty; without one, iff ``solution`` is a single letter (a str like "B"). Anything
else is numeric and its ``solution`` must be a finite number (or a str of one). A solution that fits
neither raises ValueError naming the row: that is a data-set error to fix, not a zero reward.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from embodied_r_ros.backends.base import ChatMessage, GenerationBackend
from embodied_r_ros.config import ConfigError
from embodied_r_ros.reasoning.answers import (
    ParsedCompletion,
    extract_choice,
    extract_number,
    mean_relative_accuracy,
    parse_completion,
)
from embodied_r_ros.reasoning.prompts import question_block

from .restatements import hide_number_statements, hide_option_statements, reasons_left

# The reference model's prompt. Change REFERENCE_PROMPT_VERSION whenever a text below changes, so logged
# consistency rates from different prompts are not compared as if they were the same measurement.
# 2: explicit statements of the answer are hidden (mask_answer_statements). 3: every restatement is hidden
# (lower-case letters, positions, option texts, rounded numbers, number words): the reasoning the reference
# reads changed, so rates measured under 2 are not comparable.
REFERENCE_PROMPT_VERSION = "3"
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
# Rewards by name

RewardFunction = Callable[..., list[float | None]]  # TRL's reward-function signature (see above)


@dataclass(frozen=True)
class RewardContext:
    """What the trainer hands a reward's factory: parts built once, for every reward that needs them."""

    reference: GenerationBackend | None = None  # the frozen reference model, when a weighted reward needs it
    consistency: ConsistencyConfig | None = None  # the consistency check's settings (None: the defaults)


@dataclass(frozen=True)
class RegisteredReward:
    """A reward known by name (in configs, reward stages and logs) and what it needs."""

    name: str
    build: Callable[[RewardContext], RewardFunction]  # its reward function, for a trainer's context
    columns: tuple[str, ...] = ()  # data-set columns it reads (training checks the data set has them)
    needs_reference: bool = False  # ``build`` uses RewardContext.reference
    # Costly (e.g. it queries a model): computed only while its weight is > 0. Any other reward a schedule
    # names is computed and logged at every step, also at weight 0, so it can be watched before it counts.
    only_when_weighted: bool = False


# The one registry: filled at import time by @register_reward (the built-ins below, and any module that
# adds a reward); tests that add a reward remove it again with unregister_reward.
_REGISTRY: dict[str, RegisteredReward] = {}
# Not reward names: the stage keys of a config's reward stages, and the name TRL logs the total under.
RESERVED_NAMES = ("start_epoch", "start_step", "total")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register_reward(
    name: str,
    *,
    columns: Sequence[str] = (),
    factory: bool = False,
    needs_reference: bool = False,
    only_when_weighted: bool = False,
) -> Callable[[Any], Any]:
    """Decorator: register a reward under ``name``; the decorated object is returned unchanged.

    The decorated object is a reward function with TRL's signature, or, with ``factory=True``, a callable
    taking a :class:`RewardContext` and returning one (for a reward built from what the trainer holds,
    such as the reference model: set ``needs_reference``). ``columns``: the data-set columns it reads.
    ``only_when_weighted``: compute it only while its weight is > 0. A config then weights it by ``name``
    in its reward stages; training logs ``rewards/<name>/mean`` and ``weight/<name>``. Raises ValueError
    for a malformed, reserved or taken name.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in RESERVED_NAMES:
        raise ValueError(
            f"reward name {name!r} must be lower-case letters, digits and _ (a letter first), and not one of "
            f"{', '.join(RESERVED_NAMES)}"
        )
    if name in _REGISTRY:
        raise ValueError(f"reward {name!r} is already registered; choose another name")

    def decorator(target: Any) -> Any:
        if not callable(target):
            raise TypeError(f"register_reward({name!r}) decorates a function, got {target!r}")
        build = target if factory else (lambda context: target)
        _REGISTRY[name] = RegisteredReward(
            name, build, tuple(columns), needs_reference=needs_reference,
            only_when_weighted=only_when_weighted,
        )  # fmt: skip
        return target

    return decorator


def unregister_reward(name: str) -> None:
    """Remove the reward registered as ``name`` (tests that add a reward restore the registry with it)."""
    if _REGISTRY.pop(name, None) is None:
        raise ValueError(f"no reward {name!r} is registered; registered: {', '.join(registered_rewards())}")


def registered_rewards() -> tuple[str, ...]:
    """The names of the registered rewards, in the order they were registered."""
    return tuple(_REGISTRY)


def registered_reward(name: str) -> RegisteredReward:
    """The reward registered as ``name``; :class:`ConfigError` listing the registered ones if none is."""
    reward = _REGISTRY.get(name) if isinstance(name, str) else None
    if reward is None:
        raise ConfigError(
            f"unknown reward {name!r}; registered rewards: {', '.join(registered_rewards())} (a new one is a "
            "function decorated with @register_reward in embodied_r_training.rl.rewards)"
        )
    return reward


# ----------------------------------------------------------------------------------------------------
# Rule rewards


@register_reward("format")
def format_reward(completions: Sequence[Completion], **kwargs: Any) -> list[float]:
    """1.0 per completion that is exactly ``<think>...</think><answer>...</answer>``, else 0.0."""
    return [1.0 if parse_completion(completion_text(c)).well_formed else 0.0 for c in completions]


@register_reward("accuracy", columns=("solution",))
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


def mask_answer_statements(think: str, graded: Graded, options: Sequence[str]) -> str:
    """The reasoning as the consistency reference reads it: every restatement of a final answer hidden
    (:data:`~.restatements.ANSWER_MASK`), so that only reasoning that IMPLIES the answer leads the
    reference to it, and restating the answer ("B", "the second option", "two") earns nothing.

    Multiple choice: every option's letter, position and text, the policy's and the others alike (hiding
    only the policy's would point at it); a plain-name option text only in conclusions, so that evidence
    naming objects with their measured values stays readable (:func:`~.restatements.hide_option_statements`).
    Numeric: every number, in digits or words, that rounds the policy's answer and lies within 5 % of it;
    the numbers it was derived from stay (:func:`~.restatements.hide_number_statements`). The rules and
    their reasons: :mod:`embodied_r_training.rl.restatements`.
    """
    if graded.multiple_choice:
        return hide_option_statements(think, options)
    if graded.value is None:
        return think
    return hide_number_statements(think, graded.value)


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

    The reference reads the reasoning with every restatement of the answer hidden
    (:func:`mask_answer_statements`): a think that only restates the answer ("B", "the answer is b", "the
    second option", "two") has no reasoning left and scores 0.0 without a reference call; reasoning that
    implies the answer ("the lamp in frame 1, the chair in frame 3", option B being "lamp", for "what
    did I see first?") still leads the reference to it.

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
        masked = {
            i: mask_answer_statements(g.parsed.think, g, option_lists[i])
            for i, g in enumerate(graded)
            if consistency_eligible(g, self.config)
        }
        # Reasoning that was nothing but a statement of the answer ("B") has nothing left to check: 0.
        rows = [i for i, think in masked.items() if reasons_left(think)]
        scores = [0.0] * n
        if not rows:
            if getattr(self.backend, "collective", False):
                # Join the other ranks' reference call: a rank that skipped it would hang them.
                self.backend.generate([PLACEHOLDER_REQUEST], max_new_tokens=1, temperature=0.0)
            return scores
        requests = [reference_request(str(questions[i]), option_lists[i], masked[i]) for i in rows]
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


@register_reward(
    "consistency",
    columns=("solution", "question", "options"),
    factory=True,
    needs_reference=True,
    only_when_weighted=True,
)
def build_consistency_reward(context: RewardContext) -> ConsistencyReward:
    """The registered ``consistency`` reward: :class:`ConsistencyReward` on the trainer's reference model."""
    if context.reference is None:
        raise ValueError(
            "the consistency reward needs a reference model (RewardContext.reference); build one from the "
            "config's reference section, or give consistency weight 0 in every reward stage"
        )
    return ConsistencyReward(context.reference, context.consistency)
