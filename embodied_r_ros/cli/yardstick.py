"""The yardstick beside a model's answer: what the oracle and a blind reader answer to the same question.

- the oracle (``embodied_r_training.eval.oracle``) reads only the prompt the LM was given, rebuilt here
  from the answer's key-frame descriptions, and answers with its reasoning: what the prompt allows;
- the options-only reader (``embodied_r_training.eval.baselines``) sees only the option texts and picks
  by a fixed rule (the option nearest the geometric mean of the options' numbers, else the option sharing
  the most words with the others): what a reader gets without looking.

Both are programs of the training package, imported here (the application layer) when it is installed;
without it :func:`yardstick_answers` gives nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..reasoning.options import option_letter
from ..reasoning.prompts import reasoning_prompt

# Description.as_text(): "After <action>: <observation>" for key frame j >= 1, the observation alone for 0.
_AFTER = re.compile(r"^After (.*?): (.*)$", re.DOTALL)


@dataclass(frozen=True)
class YardstickAnswers:
    """The oracle's answer and reasoning (None: the prompt does not determine it) and the blind reader's."""

    oracle: str | None
    oracle_reasoning: str
    options_only: str | None


def prompt_from_descriptions(descriptions: Sequence[str], question: str, options: Sequence[str]) -> str:
    """The reasoning LM's user turn for ``question``, rebuilt from an answer's key-frame descriptions (in
    :meth:`~embodied_r_ros.perception.Description.as_text` form, as SpatialAnswer carries them)."""
    observations: list[tuple[str | None, str]] = []
    for j, text in enumerate(descriptions):
        match = _AFTER.match(text) if j else None
        observations.append((match.group(1), match.group(2)) if match else (None, text))
    return reasoning_prompt(observations, question, options)


def yardstick_answers(
    descriptions: Sequence[str], question: str, options: Sequence[str]
) -> YardstickAnswers | None:
    """The oracle's and the options-only reader's answers to one answered question; None without the
    training package."""
    try:
        from embodied_r_training.eval.baselines import RULES, option_number
        from embodied_r_training.eval.oracle import oracle_trace
    except ImportError:
        return None
    trace = oracle_trace(prompt_from_descriptions(descriptions, question, options)) if descriptions else None
    blind = None
    if options:
        numbers = [option_number(o) for o in options]
        rule = RULES["geomean" if all(n is not None and n > 0 for n in numbers) else "typical"]
        chances = rule(list(options), None)
        blind = option_letter(max(range(len(options)), key=lambda i: chances[i]))
    return YardstickAnswers(
        oracle=None if trace is None else str(trace[1]),
        oracle_reasoning="" if trace is None else trace[0],
        options_only=blind,
    )
