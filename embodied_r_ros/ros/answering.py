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

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..cameras import merge_keyframes
from ..frames import NS_PER_S
from ..history import EmptyHistoryError, RobotHistory, WindowKeyFrames
from ..keyframes import KeyFrame
from ..memory.records import MemoryStoreError
from ..memory.sightings import merged_tally
from ..pipeline import EmbodiedR, NoFramesError
from ..windows import WindowError, format_stamp
from .messages import answer_to_message, ns_to_time
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
        """The window's key frames, then the pipeline (VLM, LM); raises NoFramesError when there are none
        (and WindowError for a window outside the history of the one camera asked)."""
        start = time.perf_counter()
        job.report("keyframes", 0.05)
        request = job.payload.request
        asked = [c for c in self._cameras.values() if not request.camera or c.name == request.camera]
        found = self._found(asked, job.payload)
        keyframes, sources = merge_keyframes({name: f.keyframes for name, f in found.items()})
        named = len(self._cameras) > 1  # the cameras are named in the prompt and the evidence
        keyframes_s = time.perf_counter() - start
        answer = self._pipeline.answer(
            request.question,
            request.options,
            keyframes=keyframes,
            on_progress=job.report,
            mission_origin_ns=self._mission_origin(asked, found),  # a search's key frames: time and place
            cameras={stamp: source.camera for stamp, source in sources.items()} if named else None,
            summary=_summary(found),
        )
        for name in found:  # each camera's memory keeps its own frames' descriptions, by their own stamps
            own = [
                dataclasses.replace(d, stamp_ns=sources[d.stamp_ns].keyframe.frame.stamp_ns)
                for d in answer.descriptions
                if d.stamp_ns in sources and sources[d.stamp_ns].camera == name
            ]
            self._cameras[name].memory.remember(own, self._pipeline.perception, request.question)
        # The key frames reasoned over (fewer than the window's when the prompt was fitted to the context),
        # as their cameras gave them.
        used = [sources[s] for s in answer.keyframe_stamps_ns if s in sources] or list(sources.values())
        keyframes = [source.keyframe for source in used]
        # Under use_sim_time before /clock comes the node's clock reads 0: stamp with camera time instead.
        stamp = self._clock().now().nanoseconds or keyframes[-1].frame.stamp_ns
        frame_ids = [self._cameras[source.camera].inputs.frame_id for source in used]
        spans = sorted({span for window in found.values() for span in window.spans()})
        message = answer_to_message(answer, job.id, stamp, frame_ids[-1], spans)
        if named:
            message.keyframe_stamps = [ns_to_time(k.frame.stamp_ns) for k in keyframes]
            message.keyframe_cameras = [source.camera for source in used]
        if request.search_memory:
            message.notes.append(_searched_note(spans))
        return QueryResult(message, keyframes, keyframes_s, frame_ids)

    def _found(self, asked: Sequence[CameraServed], question: QueuedQuestion) -> dict[str, WindowKeyFrames]:
        """Each asked camera's key frames of the question's window, by camera; raises NoFramesError (or,
        for one camera, WindowError) when no camera has any. Over several cameras, "the last N seconds"
        end at the newest frame of any of them (a camera that stalled adds nothing old), and a camera whose
        history cannot answer the window only says why, beside the others' key frames."""
        if len(asked) == 1:
            return {asked[0].name: self._keyframes(asked[0], question)}
        found: dict[str, WindowKeyFrames] = {}
        reasons = []
        for camera in asked:
            try:
                found[camera.name] = self._keyframes(camera, question)
            except (NoFramesError, WindowError) as exc:
                reasons.append(f"camera {camera.name}: {exc}")
        window, config = question.window, self._params.config
        if found and not window.absolute and not question.request.search_memory:
            cutoff = max(f.newest_ns for f in found.values()) - round(
                (window.seconds or config.query.window_s) * NS_PER_S
            )
            for name, f in list(found.items()):
                recent = [k for k in f.keyframes if k.frame.stamp_ns >= cutoff]
                if recent:
                    found[name] = dataclasses.replace(f, start_ns=max(f.start_ns, cutoff), keyframes=recent)
                else:
                    del found[name]
                    reasons.append(f"camera {name}: no frames in the window (its newest: "
                                   f"{format_stamp(f.newest_ns)})")  # fmt: skip
        if not found:
            raise NoFramesError("; ".join(reasons))
        return found

    def _mission_origin(
        self, asked: Sequence[CameraServed], found: Mapping[str, WindowKeyFrames]
    ) -> int | None:
        """Where a memory search's mission times count from: the earliest timeline start of every camera
        asked (not only those with hits, so that the clock stays put from one question to the next)."""
        origins = [f.mission_origin_ns for f in found.values() if f.mission_origin_ns is not None]
        if not origins:
            return None
        for camera in asked:
            reader = camera.history.memory
            try:
                start = reader.timeline_start_ns() if reader is not None and reader.readable else None
            except MemoryStoreError:
                start = None
            if start is not None:
                origins.append(start)
        return min(origins)

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


def _summary(found: Mapping[str, WindowKeyFrames]) -> str:
    """A count's tally from the memory: one camera's own; over several cameras, one tally of the sightings
    each counted (:func:`~embodied_r_ros.memory.sightings.merged_tally`: the cameras share one pose source,
    so an object two of them saw counts once, not once per camera's memory)."""
    if len(found) == 1:
        return next(iter(found.values())).summary
    return merged_tally({name: f.counted for name, f in found.items()})


def _searched_note(spans: Sequence[tuple[int, int]]) -> str:
    """The note of an answer made from a memory search: the intervals it used."""
    listed = ", ".join(f"{format_stamp(a)} - {format_stamp(b)}" for a, b in spans)
    return f"searched the memory: answered from {len(spans)} interval{'s' * (len(spans) != 1)} ({listed})"
