"""Memory questions about a whole mission, with the intervals that hold their evidence: the mission tasks'
drafts (:data:`embodied_r_training.tasks.registry.MISSION_TASKS`, each kind's generator, its rules in its
module under :mod:`embodied_r_training.tasks.mission`), their options placed and a few kept per kind.

Options never give the answer away: mission_first_seen's correct letter and mission_last_seen's rank
among its chronologically sorted options are balanced over the mission's questions
(:class:`~.questions.LetterBalancer`). Per kind, the candidates, the rules that dropped some and the
questions kept are counted (:class:`~embodied_r_training.tasks.mission.context.KindCount`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embodied_r_ros.question_file import MC, NUMERIC, Question
from embodied_r_ros.reasoning.options import OPTION_LETTERS

from ..tasks.amounts import format_amount
from ..tasks.mission.context import Evidence, KindCount, MissionContext, MissionDraft, MissionQuestionConfig
from ..tasks.registry import MISSION_TASKS
from .mission import MissionPlan
from .mission_sightings import MissionSightings
from .questions import LetterBalancer


@dataclass
class MissionQuestions:
    """The questions, their evidence by question id, and the counts per kind."""

    questions: list[Question]
    evidence: dict[str, Evidence]
    counts: dict[str, KindCount]


def generate_mission_questions(
    plan: MissionPlan,
    sightings: MissionSightings,
    rng: np.random.Generator,
    *,
    end_s: float,
    bag: str = "bag",
    mission_id: str = "mission",
    config: MissionQuestionConfig | None = None,
) -> MissionQuestions:
    """Up to ``config.per_kind`` questions of each kind about the mission (frames from 0 to ``end_s``
    seconds); ids ``<mission_id>-NNN``. Candidates are taken in random order, each name asked about at most
    once per kind and window. A question's window is the whole mission unless its draft names a part
    (``window_s``: a count "in the last 30 minutes of the mission")."""
    config = config or MissionQuestionConfig()
    counts = {task.name: KindCount() for task in MISSION_TASKS}
    mission = MissionContext(plan, sightings, config, end_s, rng, counts)
    balancer = LetterBalancer(rng)
    window = _window(plan, bag, 0.0, end_s)
    questions: list[Question] = []
    evidence: dict[str, Evidence] = {}
    for task in MISSION_TASKS:
        drafts = task.generate(mission)
        asked: set[str] = set()
        kept = 0
        for i in rng.permutation(len(drafts)).tolist():
            if kept >= config.per_kind:
                break
            draft = drafts[i]
            # A name is asked about once per kind and part of the mission (a count may ask about the
            # whole mission and about its last 30 minutes).
            names = {(mission.objects[o][1].name, draft.window_s) for o in draft.objects}
            if names & asked:
                continue
            options: tuple[str, ...] = ()
            position = 0
            if draft.options:  # a fixed order: asked only when its rank is the balancer's letter
                position = balancer.position(len(draft.options))
                if position != draft.rank:
                    continue
                options = draft.options
            elif draft.distractors:
                position = balancer.position(len(draft.distractors) + 1)
                rest = list(draft.distractors)
                options = (*rest[:position], str(draft.correct), *rest[position:])
            if options:
                balancer.take(len(options), position)
            question_id = f"{mission_id}-{len(questions):03d}"
            part = window if draft.window_s is None else _window(plan, bag, *draft.window_s)
            questions.append(_question(draft, options, position, question_id, part))
            evidence[question_id] = draft.evidence
            asked |= names
            kept += 1
        counts[task.name].kept = kept
    return MissionQuestions(questions, evidence, counts)


def _window(plan: MissionPlan, bag: str, start_s: float, end_s: float) -> dict:
    """A question's window fields: the bag, seconds from the mission start and the stamps."""
    return dict(
        bag=bag,
        start_s=round(start_s, 3),
        end_s=round(end_s, 3),
        start_ns=plan.config.stamp_ns(start_s),
        end_ns=plan.config.stamp_ns(end_s),
    )


def _question(
    draft: MissionDraft, options: tuple[str, ...], position: int, question_id: str, window: dict
) -> Question:
    common = dict(id=question_id, task=draft.task, question=draft.text, objects=draft.objects, **window)
    if not options:
        value = draft.correct
        text = str(value) if draft.unit == "count" else format_amount(float(value), draft.unit)
        return Question(form=NUMERIC, answer=value, unit=draft.unit, answer_text=text, **common)
    return Question(
        form=MC, options=options, answer=OPTION_LETTERS[position], answer_text=str(draft.correct), **common
    )
