"""A lenient reading of model completions: what a model answered when it never wrote ``<answer>`` tags.

Scores (and the node) read an answer only from the answer tags, so a model that has not learned the format
(the untrained LM) scores 0 however often its text names the right option. This reading says how much of
that 0 is format: the tagged answer when there is one, else

* multiple choice: the LAST standalone option letter anywhere in the completion (a capital letter of one of
  the options, not part of a word; "A" or "I" followed by a lower-case word reads as English, as
  :func:`~embodied_r_ros.reasoning.answers.extract_choice` reads it);
* numeric: the LAST number anywhere in the completion, with its unit
  (:func:`~embodied_r_ros.reasoning.answers.extract_number` from there on).

It is reported beside the scores (metrics.json ``lenient``), never instead of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embodied_r_ros.reasoning.answers import (
    _NUMBER,
    _STANDALONE_LETTER,
    _WORD_LIKE_LETTER,
    extract_choice,
    extract_number,
    mean_relative_accuracy,
    parse_completion,
)
from embodied_r_ros.reasoning.options import OPTION_LETTERS


def lenient_choice(completion: str, options: Sequence[str]) -> str | None:
    """The letter the tagged answer gives, else the last standalone option letter of ``completion``."""
    tagged = parse_completion(completion).answer
    choice = extract_choice(tagged, options) if tagged else None
    if choice is not None:
        return choice
    valid = OPTION_LETTERS[: len(options)]
    for match in reversed(list(_STANDALONE_LETTER.finditer(completion))):
        letter = match.group(1)
        english = letter in "AI" and _WORD_LIKE_LETTER.match(completion, match.end()) is not None
        if letter in valid and not english:
            return letter
    return None


def lenient_number(completion: str) -> float | None:
    """The number the tagged answer gives, else the last number of ``completion`` (with its unit)."""
    tagged = parse_completion(completion).answer
    value = extract_number(tagged) if tagged else None
    if value is not None:
        return value
    numbers = list(_NUMBER.finditer(completion))
    return extract_number(completion[numbers[-1].start() :]) if numbers else None


def lenient_summary(records: Sequence[Mapping[str, Any]], completions: Sequence[str]) -> dict[str, Any]:
    """Multiple-choice accuracy (``mc``) and numeric MRA (``numeric``) of ``completions`` read leniently,
    None for a form without records; ``n_mc``, ``n_numeric``: the records of each form."""
    mc: list[float] = []
    numeric: list[float] = []
    for record, completion in zip(records, completions, strict=True):
        options = list(record.get("options") or [])
        if options:
            mc.append(float(lenient_choice(completion, options) == str(record["solution"]).strip().upper()))
        else:
            numeric.append(mean_relative_accuracy(lenient_number(completion), float(record["solution"])))
    return {
        "mc": sum(mc) / len(mc) if mc else None,
        "numeric": sum(numeric) / len(numeric) if numeric else None,
        "n_mc": len(mc),
        "n_numeric": len(numeric),
    }
