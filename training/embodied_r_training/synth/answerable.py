"""Keeps the questions a reader of their prompt can answer: the generator's filter (``embodied-r synth``).

A question is kept when the oracle reasoner (:mod:`embodied_r_training.tasks.oracle`) answers it correctly
from the prompt ``embodied-r prepare --perceiver ground_truth`` will build for it: the key frames of its
window as prepare reads them from the written bag (:func:`embodied_r_training.data.prepare.bag_keyframes`
on a :class:`~embodied_r_training.data.bag_reader.BagReader`: decoded images, JPEG included, 1 fps
candidates, the node's key-frame rule), described by ground truth (:mod:`.ground_truth`) and formatted by
:func:`embodied_r_ros.reasoning.messages.reasoning_messages`. Correct means the right letter, the exact
count, or a
number within 5 % of the truth (full marks under MRA). Questions whose key frames miss the evidence (an
object never in view at a key frame, two first appearances between the same two key frames, a count that
misses a member) are dropped, not re-windowed: the generator then tries the task's next candidate.

The key frames equal prepare's only when prepare runs with the same key-frame settings: ``embodied-r synth
--max-keyframes N`` for ``embodied-r prepare --max-keyframes N``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from embodied_r_ros.config import KeyFrameConfig
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.question_file import MC, Question
from embodied_r_ros.reasoning.answers import mean_relative_accuracy
from embodied_r_ros.reasoning.messages import reasoning_messages

from ..data.bag_reader import BagReader, BagReadError, BagTopics
from ..data.prepare import bag_keyframes
from ..tasks.oracle import oracle_answer
from ..tasks.task import Answer
from .ground_truth import GroundTruthPerceiver

logger = logging.getLogger(__name__)

KEPT = "kept"
NO_ANSWER = "no_answer"  # the oracle found the prompt does not determine the answer
WRONG = "wrong"  # the oracle answered, wrongly (the descriptions miss or mislead)


def is_correct(question: Question, answer: Answer | None) -> bool:
    """Whether ``answer`` is right: the letter (mc), the exact count, or within 5 % (full MRA)."""
    if answer is None or question.answer is None:
        return False
    if question.form == MC:
        return str(answer) == str(question.answer)
    if question.unit == "count":
        return float(answer) == float(question.answer)
    return mean_relative_accuracy(float(answer), float(question.answer)) >= 1.0


@dataclass
class ScreenCounts:
    """Per task: questions kept, and dropped because the oracle gave no answer or a wrong one."""

    tasks: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, task: str, outcome: str) -> None:
        """Count one question of ``task`` with ``outcome`` (kept, no_answer or wrong)."""
        self.tasks.setdefault(task, Counter())[outcome] += 1

    def merge(self, other: ScreenCounts) -> None:
        """Add ``other``'s counts to these."""
        for task, counts in other.tasks.items():
            self.tasks.setdefault(task, Counter()).update(counts)

    def as_dict(self) -> dict[str, dict[str, int]]:
        """Per task (sorted) kept, dropped, no_answer and wrong, for generation.json."""
        return {
            task: {
                KEPT: counts[KEPT],
                "dropped": counts[NO_ANSWER] + counts[WRONG],
                NO_ANSWER: counts[NO_ANSWER],
                WRONG: counts[WRONG],
            }
            for task, counts in sorted(self.tasks.items())
        }

    @property
    def dropped(self) -> int:
        """Questions dropped over all tasks."""
        return sum(c[NO_ANSWER] + c[WRONG] for c in self.tasks.values())


class AnswerableScreen:
    """A :class:`~.questions.QuestionScreen` for one written scene: ``bag`` its bag directory,
    ``scene_json`` its scene file, ``keyframes`` the settings prepare will use."""

    def __init__(
        self,
        bag: Path,
        scene_json: Path,
        keyframes: KeyFrameConfig | None = None,
        topics: BagTopics | None = None,
    ) -> None:
        self.bag = bag
        self.keyframes = keyframes or KeyFrameConfig()
        self.topics = topics or BagTopics()
        self.perceiver = GroundTruthPerceiver(scene_json)
        self.counts = ScreenCounts()
        self._found: dict[tuple[int, int], list[KeyFrame] | BagReadError] = {}

    def prepare(self, windows_ns: Sequence[tuple[int, int]]) -> None:
        """Key frames of every window, in one pass over the bag, exactly as prepare computes them."""
        with BagReader(self.bag, self.topics, self.keyframes.candidate_fps) as reader:
            found = bag_keyframes(reader, list(windows_ns), self.keyframes)
        self._found = dict(zip(windows_ns, found, strict=True))

    def prompt(self, question: Question) -> str | None:
        """The LM's user turn for ``question`` as prepare builds it (None: its window has no key frames)."""
        keyframes = self._found.get((question.start_ns, question.end_ns))
        if keyframes is None or isinstance(keyframes, BagReadError):
            return None
        descriptions = self.perceiver.describe(keyframes, question.question, question.options)
        return reasoning_messages(descriptions, question.question, question.options)[1].joined_text

    def accept(self, question: Question) -> bool:
        """Whether the oracle answers ``question`` correctly from its prompt (counted either way)."""
        prompt = self.prompt(question)
        answer = oracle_answer(prompt) if prompt is not None else None
        outcome = KEPT if is_correct(question, answer) else NO_ANSWER if answer is None else WRONG
        self.counts.add(question.task, outcome)
        return outcome == KEPT
