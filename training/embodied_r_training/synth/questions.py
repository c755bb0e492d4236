"""Spatial questions with ground-truth answers for one rendered scene: the tasks' drafts
(:data:`embodied_r_training.tasks.registry.TASKS`, each task's generator), their options placed and a few
kept per task and form.

Rules that keep options from giving the answer away, over a scene's questions (the tasks keep their own,
:mod:`embodied_r_training.tasks`): the correct option's letter is chosen so that the letters stay
balanced; among a task's candidate questions each distinct answer is equally likely to be asked (e.g. the
four quadrants) where every candidate offers the same options or none.

An optional :class:`QuestionScreen` (``embodied-r synth`` passes one, see :mod:`.answerable`) sees every
question before it is kept and refuses the ones no reader of their prompt could answer; the next candidate
of the task is tried instead.

The questions are :class:`embodied_r_ros.question_file.Question` records; that module reads and writes
their file (``questions.jsonl``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np

from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.question_file import MC, NUMERIC, Question
from embodied_r_ros.reasoning.options import OPTION_LETTERS

from ..tasks.amounts import format_amount
from ..tasks.registry import TASKS
from ..tasks.scene import Draft, QuestionConfig, SceneContext
from .trajectory import Trajectory
from .visibility import Visibility
from .world import World


class QuestionScreen(Protocol):
    """Decides which questions are kept (``embodied-r synth``: the ones answerable from their prompt)."""

    def prepare(self, windows_ns: Sequence[tuple[int, int]]) -> None:
        """Called once, before any :meth:`accept`, with every window (bag stamps) a question may have."""
        ...

    def accept(self, question: Question) -> bool:
        """Whether ``question`` is kept."""
        ...


class LetterBalancer:
    """Puts each correct option where that letter has been correct least often so far (ties: random)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.counts: dict[int, np.ndarray] = {}

    def position(self, n_options: int) -> int:
        """The letter position for the next question's correct option (see :meth:`take`)."""
        counts = self.counts.setdefault(n_options, np.zeros(n_options, dtype=np.int64))
        least = np.flatnonzero(counts == counts.min())
        return int(least[int(self.rng.integers(0, len(least)))])

    def take(self, n_options: int, position: int) -> None:
        """Count ``position`` as used (the question was kept)."""
        self.counts[n_options][position] += 1


def _windows_ns(drafts: Sequence[Draft], start_ns: int) -> list[tuple[int, int]]:
    """The distinct windows of ``drafts`` in bag stamps (as :func:`_finish` writes them)."""
    return sorted({_window(d, start_ns) for d in drafts})


def generate_questions(
    world: World,
    trajectory: Trajectory,
    visibility: Visibility,
    rng: np.random.Generator,
    *,
    bag: str = "bag",
    scene_id: str = "scene",
    start_ns: int = 0,
    config: QuestionConfig | None = None,
    screen: QuestionScreen | None = None,
) -> list[Question]:
    """Questions about one rendered scene, ``config.per_task`` per task and form at most.

    The clip is the frames in ``visibility`` (seconds from the bag start, which is at ``start_ns``);
    ``bag`` is written as is into every record (the bag's path relative to the questions file); ids are
    ``<scene_id>-NNN``. Candidates are tried in random order (each distinct answer equally likely next
    where all candidates of a task share their options, or have none); a ``screen`` refuses the ones it
    does not accept (the next candidate is tried instead).
    """
    config = config or QuestionConfig()
    if len(visibility.times_s) == 0:
        return []
    end_s = float(visibility.times_s[-1])
    ctx = SceneContext(world, trajectory, visibility, end_s, config, rng, start_ns)
    drafts = {task.name: task.generate(ctx) for task in TASKS}
    if screen is not None:
        screen.prepare(_windows_ns([d for task_drafts in drafts.values() for d in task_drafts], start_ns))
    balancer = LetterBalancer(rng)
    questions: list[Question] = []
    for task in drafts:
        for form in (MC, NUMERIC):
            if form not in config.forms:
                continue
            pool = [
                drafts[task][i] for i in rng.permutation(len(drafts[task])) if drafts[task][i].form == form
            ]
            chosen: list[Question] = []
            asked: Counter[str] = Counter()  # how often each answer was kept
            # Balance the answers where every candidate offers the same options (the quadrants) or none
            # (numbers); elsewhere the options are drawn like the truth, which must stay as frequent as it is.
            balance = form == NUMERIC or len({frozenset([d.correct, *d.distractors]) for d in pool}) == 1
            while pool and len(chosen) < config.per_task:
                draft = pool.pop(_next_draft(pool, asked, rng) if balance else 0)
                window = _window(draft, start_ns)
                if any((draft.text, window) == (q.question, (q.start_ns, q.end_ns)) for q in chosen):
                    continue
                position = balancer.position(len(draft.distractors) + 1)
                question = _finish(draft, "", bag, start_ns, position, rng)
                if screen is not None and not screen.accept(question):
                    continue
                if draft.form == MC:
                    balancer.take(len(draft.distractors) + 1, position)
                asked[str(draft.correct)] += 1
                chosen.append(question)
            chosen.sort(key=lambda q: (q.start_ns, q.end_ns, q.question))
            questions += [replace(q, id=f"{scene_id}-{len(questions) + k:03d}") for k, q in enumerate(chosen)]
    return questions


def _window(draft: Draft, start_ns: int) -> tuple[int, int]:
    return start_ns + round(draft.window[0] * NS_PER_S), start_ns + round(draft.window[1] * NS_PER_S)


def _next_draft(pool: list[Draft], asked: Counter[str], rng: np.random.Generator) -> int:
    """Index into ``pool`` of the next candidate: an answer drawn uniformly among the least-asked distinct
    answers, then the first candidate (the pool is in random order) with it."""
    least = min(asked[str(d.correct)] for d in pool)
    answers = sorted({str(d.correct) for d in pool if asked[str(d.correct)] == least})
    answer = answers[int(rng.integers(0, len(answers)))]
    return next(i for i, d in enumerate(pool) if str(d.correct) == answer)


def _finish(
    draft: Draft,
    question_id: str,
    bag: str,
    start_ns: int,
    position: int,
    rng: np.random.Generator,
) -> Question:
    t0, t1 = draft.window
    start, end = _window(draft, start_ns)
    common = dict(
        id=question_id,
        bag=bag,
        start_s=round(t0, 3),
        end_s=round(t1, 3),
        # From the unrounded times, so that a window ending on a frame ends exactly on its stamp.
        start_ns=start,
        end_ns=end,
        task=draft.task,
        form=draft.form,
        question=draft.text,
        objects=draft.objects,
    )
    if draft.form == NUMERIC:
        value = draft.correct
        text = format_amount(float(value), draft.unit) if draft.unit != "count" else str(value)
        return Question(options=(), answer=value, unit=draft.unit, answer_text=text, **common)
    distractors = [draft.distractors[i] for i in rng.permutation(len(draft.distractors))]
    options = distractors[:position] + [str(draft.correct)] + distractors[position:]
    return Question(
        options=tuple(options),
        answer=OPTION_LETTERS[position],
        unit="",
        answer_text=str(draft.correct),
        **common,
    )
