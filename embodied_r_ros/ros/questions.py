"""A question as the node receives it, the size check it passes before it queues, and how it ends.

The path a question takes through the node (receive -> validate -> window -> queue -> answer -> reply) is
:meth:`embodied_r_ros.ros.question_path.QuestionPath.ask`; this module holds its data and the validation
step. Plain Python (no ROS), so it is tested without DDS.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..cameras import unknown_camera_problem
from ..node_config import QueryConfig
from ..windows import Window


class RequestTooLargeError(ValueError):
    """A question or its options exceed the node's ``query.max_*`` bounds; the message names the bound."""


@dataclass(frozen=True)
class QueryRequest:
    """One question as a caller asked it. ``window_s`` 0 means the node's default window; ``start_ns`` and
    ``end_ns`` (0 = unset) name an absolute interval (see :mod:`embodied_r_ros.windows`)."""

    question: str
    options: tuple[str, ...] = ()
    window_s: float = 0.0
    start_ns: int = 0
    end_ns: int = 0
    query_id: str = ""  # the asker's id for its answer (a SpatialQuestion's); "" = the node makes one
    search_memory: bool = False  # search the durable memory by content; the window only bounds the search
    camera: str = ""  # the camera asked about (a node with several: ``cameras``); "" = all of them

    @property
    def window(self) -> Window:
        """The window the question asked for (not checked yet)."""
        return Window(self.window_s, self.start_ns, self.end_ns)


def check_size(request: QueryRequest, query: QueryConfig) -> None:
    """The validation step: raise :class:`RequestTooLargeError` when the question, the number of options or
    one option is longer than the node accepts (``query.max_question_chars``, ``query.max_options``,
    ``query.max_option_chars``)."""
    if len(request.question) > query.max_question_chars:
        raise RequestTooLargeError(
            f"question too long: {len(request.question)} characters, this node accepts at most "
            f"{query.max_question_chars} (query.max_question_chars); shorten it"
        )
    if len(request.options) > query.max_options:
        raise RequestTooLargeError(
            f"too many options: {len(request.options)}, this node accepts at most {query.max_options} "
            "(query.max_options)"
        )
    for i, option in enumerate(request.options):
        if len(option) > query.max_option_chars:
            raise RequestTooLargeError(
                f"option {i + 1} too long: {len(option)} characters, this node accepts at most "
                f"{query.max_option_chars} (query.max_option_chars); shorten it"
            )


class UnknownCameraError(ValueError):
    """A question names a camera the node does not have; the message names the node's cameras."""


def check_camera(request: QueryRequest, cameras: Sequence[str]) -> None:
    """The validation step's camera part: raise :class:`UnknownCameraError` when ``request`` names a camera
    that is not among ``cameras`` (the node's camera names; [""] for a node with one camera)."""
    problem = unknown_camera_problem(request.camera, cameras)
    if problem:
        raise UnknownCameraError(problem)


@dataclass
class Outcome:
    """A question's end as the caller sees it."""

    success: bool
    message: str
    answer: Any = None  # SpatialAnswer when success
    status: str = "failed"  # "answered", "failed", "busy", "timeout", "cancelled", "shutdown"


class Reply:
    """Where one question's :class:`Outcome` goes, once: the first :meth:`settle` wins (the worker's
    completion, or a waiting caller that gave the question up). ``deliver``: a caller that does not wait
    (the ``~/question`` topic) gets the outcome there; a waiting one reads :attr:`outcome`."""

    def __init__(self, deliver: Callable[[Outcome], None] | None = None) -> None:
        self.deliver = deliver
        self.outcome: Outcome | None = None
        self._lock = threading.Lock()

    def settle(self, outcome: Outcome) -> bool:
        """Take ``outcome`` as the question's end; False (and nothing changes) when it had one already."""
        with self._lock:
            if self.outcome is not None:
                return False
            self.outcome = outcome
            return True


@dataclass(frozen=True)
class QueuedQuestion:
    """What the query worker's queue holds for one question, everything its answer needs: the request,
    the window it passed the check with, and the :class:`Reply` its outcome goes to."""

    request: QueryRequest
    window: Window
    reply: Reply
