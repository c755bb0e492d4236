"""What a question task is: its template, its generator and its solver, in one registered object.

The generator writes questions from a scene's ground truth with the template's text; the oracle
recognises a question by the same template and answers it with the solver from the prompt alone. One
object holds all three, so the question text is written once and the two sides cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Answer = str | float | int
Scene = TypeVar("Scene")  # what a generator reads (a rendered scene, a mission)
Reading = TypeVar("Reading")  # what a solver reads (a parsed prompt)


class Unanswerable(Exception):
    """The prompt does not determine the answer (the message says why, for debugging)."""


class Template:
    """A task's question text: one text per variant (e.g. one per form, or "walked" / "flew"), with ``{}``
    where the generator puts a name or a list of names. The oracle recognises a question that reads as one
    of the variants, each ``{}`` matching any text (as little as fits: ``(.+?)``, group 1, 2, ...)."""

    def __init__(self, *texts: str) -> None:
        if not texts:
            raise ValueError("a template needs at least one text")
        self.texts = texts
        fields = "(.+?)"
        self._patterns = tuple(
            re.compile("^" + fields.join(re.escape(part) for part in text.split("{}")) + "$")
            for text in texts
        )

    def format(self, *fields: str, variant: int = 0) -> str:
        """The question text of ``variant`` with ``fields`` in its ``{}`` places, in order."""
        return self.texts[variant].format(*fields)

    def match(self, question: str) -> re.Match[str] | None:
        """The first variant's match of the whole ``question`` (its groups: the fields), or None."""
        return next((found for pattern in self._patterns if (found := pattern.match(question))), None)


@dataclass(frozen=True)
class QuestionTask(Generic[Scene, Reading]):
    """One kind of question: ``name`` (the records' ``task``), the ``template`` of its text, ``generate``
    (scene -> draft questions, the generator's side: :mod:`embodied_r_training.synth.questions` places their
    options and keeps some) and ``solve`` (the prompt as read, the template's match -> the reasoning that
    cites the evidence and the answer; raises :class:`Unanswerable` when the prompt does not determine it)."""

    name: str
    template: Template
    generate: Callable[[Scene], list[Any]]
    solve: Callable[[Reading, re.Match[str]], tuple[str, Answer]]
