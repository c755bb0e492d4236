"""Reasoning: the small LM reads the descriptions and answers with <think>...</think><answer>...</answer>.

The input follows the paper: a role line, "Frame 0: Observe: ...", "Frame j: After <action>, Observe: ...",
then the question with lettered choices. Training builds its prompts with :func:`reasoning_messages` too,
so what the policy learns on is exactly what the node asks.
"""

from __future__ import annotations

from typing import Sequence

from ..backends.base import ChatMessage, GenerationBackend
from ..perception import Description
from . import prompts
from .answers import Answer, answer_from_completion


def reasoning_messages(
    descriptions: Sequence[Description], question: str, options: Sequence[str] = ()
) -> list[ChatMessage]:
    """The LM chat (system + user turn) for one question."""
    observations = [(d.action, d.observation) for d in descriptions]
    return [
        ChatMessage.text("system", prompts.REASONING_SYSTEM),
        ChatMessage.text("user", prompts.reasoning_prompt(observations, question, options)),
    ]


class Reasoner:
    """Answers questions from descriptions with a text LM backend."""

    def __init__(self, backend: GenerationBackend) -> None:
        self.backend = backend

    def answer(
        self, descriptions: Sequence[Description], question: str, options: Sequence[str] = ()
    ) -> Answer:
        """Generate and parse the answer to one question."""
        return self.answer_batch([(descriptions, question, options)])[0]

    def answer_batch(
        self, queries: Sequence[tuple[Sequence[Description], str, Sequence[str]]]
    ) -> list[Answer]:
        """Answer several questions in one batched generate call (evaluation, training)."""
        chats = [reasoning_messages(d, q, o) for d, q, o in queries]
        completions = self.backend.generate(chats) if chats else []
        answers = []
        for (descriptions, question, options), completion in zip(queries, completions, strict=True):
            answer = answer_from_completion(completion, question, list(options))
            answer.descriptions = list(descriptions)
            answer.keyframe_stamps_ns = [d.stamp_ns for d in descriptions]
            answers.append(answer)
        return answers
