"""The registered question tasks, in order: the one list synth generates from and the oracle answers by.

Adding a task is one module (its template, generator and solver in a :class:`~.task.QuestionTask`) and one
line here (docs/adding-a-task.md). The order is part of the data: synth draws every task's candidates from
one random stream, task after task in this order, so a task added (anywhere) or a reordering changes the
questions of every scene a seed gives; the oracle tries the templates in this order.
"""

from __future__ import annotations

from typing import Any

from . import (
    abs_distance,
    appearance_order,
    ego_motion,
    object_count,
    object_size,
    relative_direction,
    relative_distance,
    room_size,
    route,
)
from .mission import count, first_seen, last_place, last_seen
from .mission import route as mission_route
from .task import QuestionTask

# Questions about one short clip (embodied-r synth; synth/questions.py asks them).
TASKS: tuple[QuestionTask[Any, Any], ...] = (
    appearance_order.TASK,
    relative_direction.TASK,
    relative_distance.TASK,
    object_count.TASK,
    abs_distance.TASK,
    object_size.TASK,
    room_size.TASK,
    route.TASK,
    ego_motion.EGO_DISTANCE,
    ego_motion.EGO_TURN,
    ego_motion.EGO_ALTITUDE,
)
# Memory questions about a whole mission (embodied-r synth --mission; synth/mission_questions.py asks them).
MISSION_TASKS: tuple[QuestionTask[Any, Any], ...] = (
    first_seen.TASK,
    count.TASK,
    last_seen.TASK,
    mission_route.TASK,
    last_place.TASK,
)
TASK_NAMES = tuple(task.name for task in TASKS)
MISSION_TASK_NAMES = tuple(task.name for task in MISSION_TASKS)
