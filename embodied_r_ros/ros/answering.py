"""What the query worker does, on its thread: answer one question, and encode new key frames while idle.

:class:`Answerer` is the worker's handler, made at configure with every part an answer needs (the history,
the pipeline, the memory, the inputs' frame id and no-frames reason, the clock): given a queued question it
takes the key frames of the question's window (or of the memory's intervals that match it), runs the
pipeline (VLM, LM) and returns the SpatialAnswer; the question path publishes and replies. It never calls
back into the node. :func:`pre_encoder` is the idle task that encodes a new key frame with the VLM's vision
tower, so questions find it in the image cache.

Time base: a question's window ends at the newest camera stamp, not at the clock, so bags and simulations
work without /clock (a silent camera shows as a warning on /diagnostics); an answer made under
``use_sim_time`` before /clock comes is stamped with its newest key frame's stamp.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..history import EmptyHistoryError, RobotHistory
from ..keyframes import KeyFrame
from ..pipeline import EmbodiedR, NoFramesError
from ..windows import format_stamp
from .messages import answer_to_message
from .params import NodeParameters
from .query_worker import QueryJob
from .questions import QueuedQuestion

if TYPE_CHECKING:
    from rclpy.clock import Clock

    from .node_inputs import NodeInputs
    from .node_memory import NodeMemory


@dataclass
class QueryResult:
    """What the worker hands back for one answered question."""

    message: Any  # SpatialAnswer
    keyframes: list[KeyFrame]
    keyframes_s: float  # assembling the key frames (fetching, decoding, poses)


class Answerer:
    """The query worker's handler (see the module docstring). ``params.config`` is read per question
    (``query.window_s`` and the memory search's settings may change while the node runs); ``clock()`` is
    the node's clock (it reads 0 under ``use_sim_time`` before /clock comes)."""

    def __init__(
        self,
        pipeline: EmbodiedR,
        history: RobotHistory,
        memory: NodeMemory,
        inputs: NodeInputs,
        params: NodeParameters,
        clock: Callable[[], Clock],
    ) -> None:
        self._pipeline, self._history, self._memory, self._inputs = pipeline, history, memory, inputs
        self._params, self._clock = params, clock

    def __call__(self, job: QueryJob[QueuedQuestion]) -> QueryResult:
        """The window's key frames, then the pipeline (VLM, LM); raises NoFramesError when there are none."""
        start = time.perf_counter()
        job.report("keyframes", 0.05)
        question, config = job.payload, self._params.config
        request = question.request
        try:
            if request.search_memory:
                found = self._memory.search(self._history, request, question.window, config.memory.search())
            else:
                found = self._history.keyframes(question.window, config.query.window_s)
        except EmptyHistoryError:
            raise NoFramesError(self._inputs.no_frames_reason()) from None
        keyframes = found.keyframes
        if not keyframes:
            raise NoFramesError(
                f"no camera frames in the window {format_stamp(found.start_ns)} - "
                f"{format_stamp(found.end_ns)} (the newest frame is at {format_stamp(found.newest_ns)})"
            )
        keyframes_s = time.perf_counter() - start
        answer = self._pipeline.answer(
            request.question,
            request.options,
            keyframes=keyframes,
            on_progress=job.report,
            mission_origin_ns=found.mission_origin_ns,  # a search's key frames get their time and place
        )
        self._memory.remember(answer.descriptions, self._pipeline.perception, request.question)
        # The key frames reasoned over: fewer than the window's when the prompt was fitted to the context.
        used = set(answer.keyframe_stamps_ns)
        keyframes = [k for k in keyframes if k.frame.stamp_ns in used] or keyframes
        # Under use_sim_time before /clock comes the node's clock reads 0: stamp with camera time instead.
        stamp = self._clock().now().nanoseconds or keyframes[-1].frame.stamp_ns
        message = answer_to_message(answer, job.id, stamp, self._inputs.frame_id, found.spans())
        if request.search_memory:
            message.notes.append(_searched_note(found.spans()))
        return QueryResult(message, keyframes, keyframes_s)


def pre_encoder(pipeline: EmbodiedR, history: RobotHistory) -> Callable[[int], None] | None:
    """The idle task encoding a new key frame, when the pipeline's perceiver has something to encode."""
    encode = pipeline.pre_encoder()
    if encode is None:
        return None

    def pre_encode(stamp_ns: int) -> None:
        # The stored (downscaled, JPEG) copy: the very pixels a question will send, so the cache hits.
        frame = history.stored_frame(stamp_ns)
        if frame is not None:
            encode([frame.image])

    return pre_encode


def _searched_note(spans: Sequence[tuple[int, int]]) -> str:
    """The note of an answer made from a memory search: the intervals it used."""
    listed = ", ".join(f"{format_stamp(a)} - {format_stamp(b)}" for a, b in spans)
    return f"searched the memory: answered from {len(spans)} interval{'s' * (len(spans) != 1)} ({listed})"
