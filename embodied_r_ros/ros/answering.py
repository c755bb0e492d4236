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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..cameras import merge_keyframes
from ..history import EmptyHistoryError, RobotHistory, WindowKeyFrames
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


@dataclass(frozen=True)
class CameraServed:
    """One camera's part of a configured node: its name ("" for a node's one camera), the history and
    durable memory its frames go to, its inputs, and the idle task encoding its new key frames (None:
    nothing to encode)."""

    name: str
    history: RobotHistory
    memory: NodeMemory
    inputs: NodeInputs
    encode: Callable[[int], None] | None


@dataclass
class QueryResult:
    """What the worker hands back for one answered question."""

    message: Any  # SpatialAnswer
    keyframes: list[KeyFrame]
    keyframes_s: float  # assembling the key frames (fetching, decoding, poses)
    frame_ids: list[str] = field(default_factory=list)  # each key frame's camera frame (same order)


class Answerer:
    """The query worker's handler (see the module docstring) over the node's ``cameras`` (one, or several
    sharing the pipeline: a question names one or asks over all). ``params.config`` is read per question
    (``query.window_s`` and the memory search's settings may change while the node runs); ``clock()`` is
    the node's clock (it reads 0 under ``use_sim_time`` before /clock comes)."""

    def __init__(
        self,
        pipeline: EmbodiedR,
        cameras: Mapping[str, CameraServed],
        params: NodeParameters,
        clock: Callable[[], Clock],
    ) -> None:
        self._pipeline, self._cameras = pipeline, dict(cameras)
        self._params, self._clock = params, clock

    def __call__(self, job: QueryJob[QueuedQuestion]) -> QueryResult:
        """The window's key frames, then the pipeline (VLM, LM); raises NoFramesError when there are none."""
        start = time.perf_counter()
        job.report("keyframes", 0.05)
        request = job.payload.request
        asked = [c for c in self._cameras.values() if not request.camera or c.name == request.camera]
        found: dict[str, WindowKeyFrames] = {}
        reasons = []
        for camera in asked:
            try:
                found[camera.name] = self._keyframes(camera, job.payload)
            except NoFramesError as exc:
                reasons.append(f"{camera.name}: {exc}" if camera.name else str(exc))
        if not found:
            raise NoFramesError("; ".join(reasons))
        keyframes, camera_of = merge_keyframes({name: f.keyframes for name, f in found.items()})
        named = len(self._cameras) > 1  # the cameras are named in the prompt and the evidence
        keyframes_s = time.perf_counter() - start
        origins = [f.mission_origin_ns for f in found.values() if f.mission_origin_ns is not None]
        answer = self._pipeline.answer(
            request.question,
            request.options,
            keyframes=keyframes,
            on_progress=job.report,
            mission_origin_ns=min(origins) if origins else None,  # a search's key frames: time and place
            cameras=camera_of if named else None,
        )
        for name, window in found.items():
            own = {k.frame.stamp_ns for k in window.keyframes}
            described = [
                d for d in answer.descriptions if camera_of.get(d.stamp_ns) == name and d.stamp_ns in own
            ]
            self._cameras[name].memory.remember(described, self._pipeline.perception, request.question)
        # The key frames reasoned over: fewer than the window's when the prompt was fitted to the context.
        used = set(answer.keyframe_stamps_ns)
        keyframes = [k for k in keyframes if k.frame.stamp_ns in used] or keyframes
        # Under use_sim_time before /clock comes the node's clock reads 0: stamp with camera time instead.
        stamp = self._clock().now().nanoseconds or keyframes[-1].frame.stamp_ns
        last = self._cameras[camera_of[keyframes[-1].frame.stamp_ns]]
        spans = sorted({span for window in found.values() for span in window.spans()})
        message = answer_to_message(answer, job.id, stamp, last.inputs.frame_id, spans)
        if named:
            message.keyframe_cameras = [camera_of.get(s, "") for s in answer.keyframe_stamps_ns]
        if request.search_memory:
            message.notes.append(_searched_note(spans))
        frame_ids = [self._cameras[camera_of[k.frame.stamp_ns]].inputs.frame_id for k in keyframes]
        return QueryResult(message, keyframes, keyframes_s, frame_ids)

    def _keyframes(self, camera: CameraServed, question: QueuedQuestion) -> WindowKeyFrames:
        """The key frames of ``question``'s window (or of the memory's intervals that match it) in
        ``camera``'s history; raises NoFramesError saying why there are none."""
        request, config = question.request, self._params.config
        try:
            if request.search_memory:
                search = config.memory.search()
                found = camera.memory.search(camera.history, request, question.window, search)
            else:
                found = camera.history.keyframes(question.window, config.query.window_s)
        except EmptyHistoryError:
            raise NoFramesError(camera.inputs.no_frames_reason()) from None
        if not found.keyframes:
            raise NoFramesError(
                f"no camera frames in the window {format_stamp(found.start_ns)} - "
                f"{format_stamp(found.end_ns)} (the newest frame is at {format_stamp(found.newest_ns)})"
            )
        return found


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
