"""The oracle reasoner: answers a reasoning prompt from its text alone, or says that the text does not
determine the answer.

A pure function of the LM's user turn (:func:`embodied_r_ros.reasoning.prompts.reasoning_prompt`: the key
frames' descriptions, the question, the lettered options): it never reads a scene, a questions file or
anything else. On prompts whose descriptions come from ground-truth perception
(:mod:`embodied_r_training.synth.ground_truth`) it answers every task of ``embodied-r synth`` by reading the
evidence the descriptions give: the question's template (:data:`.registry.TASKS`, tried in order) names the
task, whose solver reads the prompt (each task's module says what it reads).

:func:`oracle_trace` also writes the reasoning as a short text that cites the frames, objects, sizes and
motions step by step (for supervised traces); :func:`oracle_answer` gives the answer alone. Both give None
when the prompt lacks the evidence (an object never described, two objects first seen at the same key
frame, a turn too near a label's limit, no option that fits), so the synthetic generator can drop the
questions that no reader of their prompt could answer.
"""

from __future__ import annotations

from .reading import read_prompt
from .registry import TASKS
from .task import Answer, Unanswerable


def question_task(question: str) -> str | None:
    """The synth task whose template ``question`` follows, or None."""
    return next((task.name for task in TASKS if task.template.match(question)), None)


def oracle_trace(prompt: str) -> tuple[str, Answer] | None:
    """The oracle's reasoning (a think text citing frames, objects, sizes and motions) and its answer (a
    letter for a multiple-choice question, a number otherwise) for the user turn ``prompt``; None when
    the prompt does not determine the answer."""
    reading = read_prompt(prompt)
    if reading is None:
        return None
    for task in TASKS:
        match = task.template.match(reading.question)
        if match is None:
            continue
        try:
            return task.solve(reading, match)
        except Unanswerable:
            return None
    return None


def oracle_answer(prompt: str) -> Answer | None:
    """The oracle's answer to the user turn ``prompt`` (see :func:`oracle_trace`), or None."""
    trace = oracle_trace(prompt)
    return None if trace is None else trace[1]
