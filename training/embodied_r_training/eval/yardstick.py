"""The yardstick beside a model's answer (``embodied-r ask``): what the oracle and a blind reader answer.

- the oracle (:mod:`.oracle`) reads only the prompt the LM was given, rebuilt from the answer's key-frame
  descriptions, and answers with its reasoning: what the prompt allows;
- the options-only reader (:mod:`.baselines`) sees only the option texts and picks by a fixed rule (the
  option nearest the geometric mean of the options' numbers, else the option sharing the most words with
  the others): what a reader gets without looking.

:func:`yardstick_answers` is this package's entry point of group ``embodied_r_ros.yardstick``
(training/setup.cfg), so ``embodied-r ask`` finds it where this package is installed.
"""

from __future__ import annotations

from collections.abc import Sequence

from embodied_r_ros.reasoning.options import option_letter
from embodied_r_ros.reasoning.yardstick import YardstickAnswers, prompt_from_descriptions

from ..tasks.oracle import oracle_trace
from .baselines import RULES, option_number


def yardstick_answers(descriptions: Sequence[str], question: str, options: Sequence[str]) -> YardstickAnswers:
    """The oracle's and the options-only reader's answers to one answered question."""
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
