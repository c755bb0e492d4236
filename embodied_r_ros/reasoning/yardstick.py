"""The yardstick beside a model's answer: what it holds, and the prompt it reads rebuilt from an answer.

``embodied-r ask`` shows, beside each graded answer, what the oracle (a program that reads only the prompt
the LM was given) and a blind reader (the options only) answer to the same question. Both are programs of
another package, added through the entry-point group ``embodied_r_ros.yardstick`` (the training package's
``embodied_r_training.eval.yardstick``): :func:`installed_yardstick` finds it, without it there is none.
This module holds what crosses between them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable

from .. import plugins
from .prompts import reasoning_prompt

log = logging.getLogger(__name__)

# Description.as_text(): "After <action>: <observation>" for key frame j >= 1, the observation alone for 0.
_AFTER = re.compile(r"^After (.*?): (.*)$", re.DOTALL)


@dataclass(frozen=True)
class YardstickAnswers:
    """The oracle's answer and reasoning (None: the prompt does not determine it) and the blind reader's."""

    oracle: str | None
    oracle_reasoning: str
    options_only: str | None


# The yardstick's entry point: (key-frame descriptions, question, options) -> its answers.
Yardstick = Callable[[Sequence[str], str, Sequence[str]], YardstickAnswers]


def prompt_from_descriptions(descriptions: Sequence[str], question: str, options: Sequence[str]) -> str:
    """The reasoning LM's user turn for ``question``, rebuilt from an answer's key-frame descriptions (in
    :meth:`~embodied_r_ros.perception.Description.as_text` form, as SpatialAnswer carries them)."""
    observations: list[tuple[str | None, str]] = []
    for j, text in enumerate(descriptions):
        match = _AFTER.match(text) if j else None
        observations.append((match.group(1), match.group(2)) if match else (None, text))
    return reasoning_prompt(observations, question, options)


def installed_yardstick() -> Yardstick | None:
    """The yardstick of the installed packages (the first importable one by entry-point name), or None."""
    for entry in sorted(plugins.entry_points(plugins.YARDSTICK_GROUP), key=lambda e: e.name):
        try:
            return plugins.load(entry)
        except plugins.PluginUnavailable as exc:
            log.debug("yardstick %s", exc)
    return None
