"""The mission oracle: answers a long mission's memory questions from the reasoning prompt's text alone,
or says that the text does not determine the answer.

Like the scene oracle (:mod:`..oracle`, whose grammar of ground-truth descriptions it reads), it is a pure
function of the LM's user turn (:func:`embodied_r_ros.reasoning.prompts.reasoning_prompt`): key-frame
descriptions, question, lettered options. It never reads mission.json. It answers the mission tasks
(:data:`..registry.MISSION_TASKS`, each module says what it reads) as far as a prompt of ground-truth
descriptions (:mod:`embodied_r_training.synth.mission_ground_truth`, a measuring instrument) allows.

:func:`mission_oracle` gives the answer with a short reasoning that cites the frames, or the reason it
abstains; :func:`mission_oracle_trace` the pair (reasoning, answer) like :func:`..oracle.oracle_trace`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..registry import MISSION_TASKS
from ..task import Answer, Unanswerable
from .reading import read_mission_prompt


@dataclass(frozen=True)
class OracleResult:
    """The oracle's answer with its reasoning, or None and why it abstains."""

    answer: Answer | None
    reasoning: str = ""
    abstained: str = ""  # why the prompt does not determine the answer ("" when answered)


def mission_question_kind(question: str) -> str | None:
    """The mission kind whose template ``question`` follows, or None."""
    return next((task.name for task in MISSION_TASKS if task.template.match(question.strip())), None)


def mission_oracle(prompt: str) -> OracleResult:
    """The oracle's answer to the user turn ``prompt`` with its reasoning, or why it abstains."""
    reading = read_mission_prompt(prompt)
    if reading is None:
        return OracleResult(None, abstained="not a reasoning prompt")
    question = reading.question.strip()
    found = next(((task, match) for task in MISSION_TASKS if (match := task.template.match(question))), None)
    if found is None:
        return OracleResult(None, abstained="not a mission question")
    task, match = found
    try:
        text, answer = task.solve(reading, match)
    except Unanswerable as exc:
        return OracleResult(None, abstained=str(exc))
    return OracleResult(answer, text)


def mission_oracle_trace(prompt: str) -> tuple[str, Answer] | None:
    """(reasoning, answer) for the user turn ``prompt``, or None when the prompt does not determine it."""
    result = mission_oracle(prompt)
    return None if result.answer is None else (result.reasoning, result.answer)
