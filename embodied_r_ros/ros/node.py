"""The ROS 2 node ``embodied_r``: camera in, spatial answers out (executable ``embodied_r_node``).

A thin ROS layer over the core. Interfaces (names relative to the node, ``~`` = /<namespace>/embodied_r):

- in: the camera (``camera.topic``, sensor_msgs/Image or CompressedImage), optionally odometry
  (``pose.topic``, nav_msgs/Odometry);
- service ``~/ask`` (AskSpatial), action ``~/answer`` (AnswerSpatial: feedback per stage, cancel), topic
  ``~/question`` (std_msgs/String, fire and forget; the whole string is the question, no options);
- out: ``~/answer`` (SpatialAnswer, every answer), ``~/keyframes`` (sensor_msgs/Image rgb8, one message
  per key frame of each answer, stamped with the frame's own stamp), ``/diagnostics``;
- ``~/reset`` (std_srvs/Trigger) clears the history.

Threads: the camera callback (its own mutually exclusive callback group) converts the image and hands it to
the :class:`~embodied_r_ros.history.RobotHistory` (key-frame decisions, stored frames, poses; ROS-free), which
gives a question the key frames of its window. The camera never waits on a model. Questions run one at a time
on the :class:`~embodied_r_ros.ros.query_worker.QueryWorker` thread; service and action callbacks (a reentrant
group) only wait for their job, up to ``query.timeout_s``. A question that times out inside a model call
cannot be interrupted (torch has no way to stop ``generate``): it finishes in the background, its answer is
dropped, and the LM stage is skipped when the timeout hits during perception; later questions run once the
worker is free. Key frames the selector keeps are encoded by the VLM's vision tower while the worker is idle
(``query.pre_encode_keyframes``), so questions find them in the image cache.

Time base: a question's window ends at the newest camera stamp, not at the wall clock, so bags and
simulations work without /clock; a silent camera shows as a warning on /diagnostics.

Poses: the odometry is kept for the history and each key frame of a question gets the pose interpolated
at its stamp (the camera is assumed rigidly on the body; extrinsics are not applied to the motion).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rclpy._rclpy_pybind11 import RCLError
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import String
from std_srvs.srv import Trigger

from embodied_r_ros.action import AnswerSpatial
from embodied_r_ros.msg import SpatialAnswer
from embodied_r_ros.srv import AskSpatial

from ..backends import BackendError
from ..config import ConfigError
from ..frames import Frame
from ..history import EmptyHistoryError, RobotHistory
from ..image_conversion import ImageConversionError, message_to_rgb
from ..keyframes import KeyFrame
from ..node_config import NodeConfig
from ..perceivers import PerceiverRegistry
from ..pipeline import EmbodiedR, NoFramesError
from ..stamp_guard import CONFIRM_FRAMES
from ..windows import WindowError, format_stamp
from .camera_thread import SubscriptionThread
from .frame_loss import SequenceGaps
from .messages import answer_to_message, odometry_pose, pose_problem, rgb_image_message, stamp_to_ns
from .params import NODE_NAME, NodeParameters
from .query_worker import CANCELLED, SHUTDOWN, TIMEOUT, QueryJob, QueryWorker, QueueFullError
from .questions import Outcome, QueryRequest, QueuedQuestion, RequestTooLargeError, check_size

WARN_THROTTLE_S = 5.0  # at most one warning per kind this often
SHUTDOWN_GRACE_S = 3.0  # for the replies of questions in flight, then for the executor
REPLY_FLUSH_S = 0.5  # after the last reply was handed to DDS, before the context goes
CAMERA_SILENT_S = 5.0  # /diagnostics warns when no frame came for this long
SIGNAL_POLL_S = 0.2  # the main thread wakes this often to run a SIGINT/SIGTERM handler


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message names the role, the parameter, the reason and the fix."""


@dataclass
class QueryResult:
    """What the worker hands back for one answered question."""

    message: Any  # SpatialAnswer
    keyframes: list[KeyFrame]
    keyframes_s: float  # assembling the key frames (fetching, decoding, poses)


@dataclass(frozen=True)
class QueryTiming:
    """Where one answered question's time went, in seconds (``total_s``: arrival to answer published)."""

    queued_s: float
    keyframes_s: float
    perception_s: float
    reasoning_s: float
    publish_s: float
    total_s: float
    keyframes: int


@dataclass
class NodeStats:
    """Counters for /diagnostics (written by several threads; each update is one locked step)."""

    frames_received: int = 0
    frames_stored: int = 0
    frames_lost: int = 0  # published but never received (gaps in the publisher's sequence numbers)
    dropped: dict[str, int] = field(default_factory=dict)
    ingest_s_total: float = 0.0
    ingest_count: int = 0
    ingest_s_max: float = 0.0
    last_frame_wall: float | None = None
    outcomes: dict[str, int] = field(default_factory=dict)
    last_latency_s: float | None = None
    last_timing: QueryTiming | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def drop(self, reason: str) -> None:
        with self.lock:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def ingested(self, seconds: float) -> None:
        with self.lock:
            self.ingest_s_total += seconds
            self.ingest_count += 1
            self.ingest_s_max = max(self.ingest_s_max, seconds)
            self.last_frame_wall = time.monotonic()

    def finished(self, status: str, latency_s: float | None) -> None:
        with self.lock:
            self.outcomes[status] = self.outcomes.get(status, 0) + 1
            if latency_s is not None:
                self.last_latency_s = latency_s


def set_torch_threads(config: NodeConfig) -> int | None:
    """Apply ``torch_threads`` when a model runs in-process; returns the thread count set (None: no torch)."""
    if "transformers" not in (config.vlm.backend, config.lm.backend):
        return None
    import torch

    threads = config.torch_threads or max(1, (os.cpu_count() or 2) - 1)
    torch.set_num_threads(threads)
    return threads


def load_pipeline(config: NodeConfig, perceivers: PerceiverRegistry) -> EmbodiedR:
    """Make the perceiver (``perception.perceiver``, from ``perceivers``) and load the LM; raises
    :class:`ModelLoadError` naming the role and parameter that failed (ConfigError: an unknown perceiver)."""
    try:
        return EmbodiedR.from_config(config.pipeline(), perceivers=perceivers)
    except BackendError as exc:
        raise ModelLoadError(str(exc)) from exc


def rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; the peak on other systems)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _request_of(message: Any) -> QueryRequest:
    """The question an AskSpatial request or an AnswerSpatial goal carries (their fields are the same)."""
    return QueryRequest(
        message.question,
        tuple(message.options),
        float(message.window_seconds),
        stamp_to_ns(message.start_stamp),
        stamp_to_ns(message.end_stamp),
    )


def _preview(text: str, limit: int = 80) -> str:
    """``text`` quoted for a log line, cut at ``limit`` characters (a refused question may be 100 kB)."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


class EmbodiedRNode(Node):
    """The ``embodied_r`` node (see the module docstring).

    ``perceivers`` are the perceivers ``perception.perceiver`` may name (the application's registry);
    ``pipeline`` skips loading the models (tests and benchmarks share one); ``camera_thread`` False serves
    the camera from the node's own executor like every other callback (the benchmark's baseline: see
    :mod:`.camera_thread` for why it is True); ``node_kwargs`` go to
    :class:`rclpy.node.Node` (``context``, ``namespace``, ``parameter_overrides``, ...). Raises
    :class:`ConfigError` for unusable parameters and :class:`ModelLoadError` when a model cannot be loaded.
    """

    def __init__(
        self,
        *,
        perceivers: PerceiverRegistry | None = None,
        pipeline: EmbodiedR | None = None,
        node_name: str = NODE_NAME,
        camera_thread: bool = True,
        **node_kwargs: Any,
    ):
        super().__init__(node_name, **node_kwargs)
        try:
            self.params = NodeParameters(self, on_change=self._on_config_change)
            config = self.params.config
            if pipeline is None:
                if perceivers is None:
                    raise TypeError("EmbodiedRNode needs perceivers= to load its pipeline with, or pipeline=")
                threads = set_torch_threads(config)
                self.get_logger().info(
                    f"loading the {perceivers.describe(config.pipeline())} and the LM {config.lm.model!r}"
                    f"{f' ({threads} torch CPU threads)' if threads else ''} ..."
                )
                pipeline = load_pipeline(config, perceivers)
        except Exception:
            super().destroy_node()
            raise
        self.pipeline = pipeline
        log = self.get_logger()
        self.stats = NodeStats()
        self.history = RobotHistory(
            config.buffer, config.keyframes, config.camera.jump_back_reset_s, config.pose.max_gap_s
        )
        self._gaps = SequenceGaps()
        self._warned: dict[str, float] = {}  # drop reason -> when it was last warned about
        self._callbacks = threading.Condition()  # ask() calls in flight, waited for at shutdown
        self._callbacks_in_flight = 0
        self._frame_id = ""
        self._encode = self._pre_encoder()
        self.worker: QueryWorker[QueuedQuestion] = QueryWorker(
            self._answer, queue_length=config.query.queue_length, on_finished=self._on_job_finished
        )
        # More executor threads than questions that can wait at once, so the camera never starves.
        self.executor_threads = max(8, config.query.queue_length + 6)

        camera_group = MutuallyExclusiveCallbackGroup()
        odometry_group = MutuallyExclusiveCallbackGroup()
        query_group = ReentrantCallbackGroup()
        timer_group = MutuallyExclusiveCallbackGroup()

        camera_qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=config.camera.qos_depth,
            reliability=(
                ReliabilityPolicy.BEST_EFFORT
                if config.camera.qos == "sensor_data"
                else ReliabilityPolicy.RELIABLE
            ),
        )
        self.camera_topic = config.camera.topic
        camera_type: type = Image
        if config.camera.compressed:
            camera_type = CompressedImage
            if not self.camera_topic.rstrip("/").endswith("/compressed"):
                self.camera_topic = self.camera_topic.rstrip("/") + "/compressed"
        self._camera: SubscriptionThread | None = None
        if camera_thread:
            topic = self.resolve_topic_name(self.camera_topic)
            self._camera = SubscriptionThread(self, camera_type, topic, self._on_image, camera_qos)
        else:
            self.create_subscription(
                camera_type, self.camera_topic, self._on_image, camera_qos, callback_group=camera_group
            )
        odometry_topic = config.pose.topic if config.pose.active_source == "odometry" else ""
        if odometry_topic:
            best_effort = QoSProfile(depth=50, reliability=ReliabilityPolicy.BEST_EFFORT)
            self.create_subscription(
                Odometry, odometry_topic, self._on_odometry, best_effort, callback_group=odometry_group
            )
        self.create_subscription(String, "~/question", self._on_question, 10, callback_group=query_group)
        self.answer_publisher = self.create_publisher(SpatialAnswer, "~/answer", 10)
        # Transient local: a viewer (or `embodied-r ask --report`) subscribing late still gets the evidence.
        self.keyframe_publisher = self.create_publisher(
            Image,
            "~/keyframes",
            QoSProfile(depth=config.keyframes.max_keyframes, durability=DurabilityPolicy.TRANSIENT_LOCAL),
        )
        self.diagnostics_publisher = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_service(AskSpatial, "~/ask", self._on_ask, callback_group=query_group)
        self.create_service(Trigger, "~/reset", self._on_reset, callback_group=query_group)
        self.action_server = ActionServer(
            self,
            AnswerSpatial,
            "~/answer",
            execute_callback=self._on_goal,
            goal_callback=lambda goal: GoalResponse.ACCEPT,
            cancel_callback=lambda goal_handle: CancelResponse.ACCEPT,
            callback_group=query_group,
        )
        self.create_timer(config.diagnostics_period_s, self._publish_diagnostics, callback_group=timer_group)
        log.info(
            f"ready: camera {self.resolve_topic_name(self.camera_topic)} ({camera_type.__name__}), odometry "
            f"{self.resolve_topic_name(odometry_topic) if odometry_topic else 'off'}; ask on "
            f"{self.resolve_service_name('~/ask')}"
        )

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest camera frame taken (None before the first and after a reset)."""
        return self.history.newest_ns

    # ------------------------------------------------------------------------------------ inputs

    def _on_image(self, message: Any, info: Mapping[str, Any] | None) -> None:
        start = time.perf_counter()
        self.stats.frames_received += 1  # one camera thread writes this counter
        self._count_lost(info)
        try:
            image = message_to_rgb(message)
        except ImageConversionError as exc:
            self.stats.drop(exc.reason)
            self._warn_drop(exc.reason, f"dropped a camera frame on {self.camera_topic}: {exc}")
            return
        stamp = stamp_to_ns(message.header.stamp) or self.get_clock().now().nanoseconds
        self._frame_id = message.header.frame_id
        decision = self.history.add_frame(Frame(image, stamp))
        if decision.restarted:
            self.worker.clear_idle()
            self.get_logger().info(
                f"camera stamps jumped {decision.jump_s:+.1f} s and stayed there (a bag loop or a simulation "
                "restart): history cleared"
            )
        if not decision.taken:
            self.stats.drop(decision.dropped)
            if decision.dropped == "stamp_jump":
                self._warn_drop(
                    "stamp_jump",
                    f"dropped a camera frame stamped {decision.jump_s:+.1f} s from the newest; the history is"
                    f" cleared only if {CONFIRM_FRAMES} frames in a row agree (a bag loop, a simulation"
                    " restart)",
                )
            return
        if decision.stored:
            self.stats.frames_stored += 1
        if decision.store_error:
            self.stats.drop("too_large")
            self.get_logger().warning(decision.store_error, throttle_duration_sec=WARN_THROTTLE_S)
        if decision.keyframe and self._encode is not None and self.params.config.query.pre_encode_keyframes:
            self.worker.submit_idle(functools.partial(self._encode, stamp))
        self.stats.ingested(time.perf_counter() - start)

    def _count_lost(self, info: Mapping[str, Any] | None) -> None:
        """Frames the publisher numbered but that never arrived (rclpy's MessageInfo, where given)."""
        if not info:
            return
        gid = info.get("publisher_gid") or {}
        lost = self._gaps.observe(bytes(gid.get("data") or b""), info.get("publication_sequence_number"))
        if lost:
            self.stats.frames_lost = self._gaps.missed
            self._warn_drop(
                "lost",
                f"{self._gaps.missed} camera frame(s) on {self.camera_topic} never reached the node (gaps "
                "in the publisher's sequence numbers): the middleware dropped them; see the README's camera "
                "ingest notes (Fast DDS profile for large images, camera.qos, a free core)",
            )

    def _warn_drop(self, reason: str, text: str) -> None:
        """A throttled warning per drop reason (one shared throttle would hide all reasons but one)."""
        now = time.monotonic()
        if now - self._warned.get(reason, -math.inf) >= WARN_THROTTLE_S:
            self._warned[reason] = now
            self.get_logger().warning(text)

    def _on_odometry(self, message: Any) -> None:
        stamp = stamp_to_ns(message.header.stamp)
        pose = odometry_pose(message)
        problem = pose_problem(pose)
        if problem:  # input like a malformed image: dropped and counted, never a failed question later
            self.stats.drop("bad_odometry")
            self._warn_drop(
                "bad_odometry",
                f"dropped an odometry message on {self.params.config.pose.topic}: {problem}; check the "
                "odometry source",
            )
            return
        self.history.add_pose(stamp, pose)

    def clear_history(self) -> tuple[int, int]:
        """Forget frames, key-frame decisions and poses; returns (frames, decisions) dropped."""
        frames, decisions = self.history.clear()
        self.worker.clear_idle()
        return frames, decisions

    def _on_reset(self, request: Any, response: Any) -> Any:
        frames, decisions = self.clear_history()
        response.success = True
        response.message = f"history cleared: {frames} stored frames, {decisions} key-frame decisions"
        self.get_logger().info(response.message)
        return response

    def _pre_encoder(self) -> Callable[[int], None] | None:
        """The idle task encoding a new key frame, when the pipeline's perceiver has something to encode."""
        encode = self.pipeline.pre_encoder()
        if encode is None:
            return None

        def pre_encode(stamp_ns: int) -> None:
            # The stored (downscaled, JPEG) copy: the very pixels a question will send, so the cache hits.
            frame = self.history.stored_frame(stamp_ns)
            if frame is not None:
                encode([frame.image])

        return pre_encode

    # ---------------------------------------------------------------------------------- questions

    def _on_config_change(self, config: NodeConfig) -> None:
        self.worker.queue_length = config.query.queue_length

    def ask(
        self,
        request: QueryRequest,
        on_event: Callable[[str, float], None] | None = None,
        cancelled: Callable[[], bool] = lambda: False,
        reply: Callable[[Outcome], None] | None = None,
    ) -> Outcome | None:
        """A question's path, top to bottom; the service, the action and the topic differ only in 1 and 6.

        1. receive:  the transport's callback turns its message into ``request`` (:meth:`_on_ask`,
           :meth:`_on_goal`, :meth:`_on_question`);
        2. validate: the question and its options within ``query.max_*`` (:func:`.questions.check_size`);
        3. window:   the window it names, checked now; it is resolved against the history when the answer
           starts, so a question that waited in the queue still ends at the newest frame;
        4. queue:    on the :class:`.QueryWorker`, deadline ``query.timeout_s`` from now, or "busy" at once
           beyond ``query.queue_length``; a waiting caller gives it up on a cancel or at the deadline;
        5. answer:   on the worker thread (:meth:`_answer`): the window's key frames, then the pipeline (VLM,
           LM); a delivered answer goes out on ``~/answer`` with its key frames (:meth:`_on_job_finished`);
        6. reply:    the :class:`.Outcome`, counted for /diagnostics (:meth:`_reply`), is returned to a caller
           that waits (the service's response, the action's result); a caller that does not (the topic)
           passes ``reply``, which gets it on the worker thread when the question ends.

        ``on_event(stage, progress)`` hears a waiting caller's stages (the action's feedback); ``cancelled()``
        True gives the question up. Returns the outcome, or None once a question with ``reply`` is queued.
        """
        query = self.params.config.query
        with self._in_flight():
            try:
                check_size(request, query)  # 2. validate
                window = request.window  # 3. window
                window.check()
                job = self.worker.submit(QueuedQuestion(request, window, reply), query.timeout_s)  # 4. queue
            except (RequestTooLargeError, WindowError) as exc:
                return self._reply(Outcome(False, str(exc)), None, reply)
            except QueueFullError as exc:
                return self._reply(Outcome(False, str(exc), status="busy"), None, reply)
            if reply is not None:
                return None  # 5. and 6. follow on the worker thread
            self._wait_for_answer(job, on_event, cancelled)  # 5. answer (on the worker thread)
            return self._reply(self._outcome(job), job, None)  # 6. reply

    # Steps 1 and 6 of each transport.

    def _on_ask(self, request: Any, response: Any) -> Any:
        outcome = self.ask(_request_of(request))
        response.success, response.message = outcome.success, outcome.message
        if outcome.answer is not None:
            response.answer = outcome.answer
        return response

    def _on_goal(self, goal_handle: Any) -> Any:
        def feedback(stage: str, progress: float) -> None:
            goal_handle.publish_feedback(AnswerSpatial.Feedback(stage=stage, progress=progress))

        outcome = self.ask(
            _request_of(goal_handle.request),
            on_event=feedback,
            cancelled=lambda: goal_handle.is_cancel_requested,
        )
        result = AnswerSpatial.Result(success=outcome.success, message=outcome.message)
        if outcome.answer is not None:
            result.answer = outcome.answer
        if outcome.status == CANCELLED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif outcome.success:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _on_question(self, message: Any) -> None:
        request = QueryRequest(message.data)  # the whole string is the question: no options, default window

        def reply(outcome: Outcome) -> None:  # nobody waits: the answer is on ~/answer, a failure in the log
            if not outcome.success:
                self.get_logger().warning(
                    f"question {_preview(request.question)} from ~/question not answered: {outcome.message}"
                )

        self.ask(request, reply=reply)

    # The steps behind ask().

    def _wait_for_answer(
        self,
        job: QueryJob[QueuedQuestion],
        on_event: Callable[[str, float], None] | None,
        cancelled: Callable[[], bool],
    ) -> None:
        """Wait until the worker ends ``job``, passing its stages to ``on_event``; give it up on a cancel or
        at its deadline (the worker drops an answer that comes later)."""
        if on_event is not None:
            on_event("queued", 0.0)
        while not job.wait(0):
            # Wake on each stage (feedback goes out at once), on the job's end, or every 0.1 s to check
            # for a cancel and the deadline.
            step = min(0.1, max(0.0, job.remaining_s()))
            if on_event is None:
                job.wait(step)
            elif (event := job.next_event(step)) is not None:
                on_event(*event)
                continue
            if cancelled() and self.worker.abandon(job, CANCELLED):
                break
            if job.remaining_s() <= 0 and self.worker.abandon(job, TIMEOUT):
                break
        while on_event is not None and (event := job.next_event(0.0)) is not None:
            on_event(*event)

    def _answer(self, job: QueryJob[QueuedQuestion]) -> QueryResult:
        """The worker's handler: key frames of the window, then the pipeline (VLM, LM)."""
        start = time.perf_counter()
        job.report("keyframes", 0.05)
        question, config = job.payload, self.params.config
        try:
            found = self.history.keyframes(question.window, config.query.window_s)
        except EmptyHistoryError:
            dropped = sum(self.stats.dropped.values())
            topic = self.resolve_topic_name(self.camera_topic)
            raise NoFramesError(
                f"no camera frames to answer from: none received on {topic} since the start or the last "
                f"reset ({self.stats.frames_received} received, {dropped} dropped as malformed or out of "
                "order); check that the camera publishes there"
            ) from None
        keyframes = found.keyframes
        if not keyframes:
            raise NoFramesError(
                f"no camera frames in the window {format_stamp(found.start_ns)} - "
                f"{format_stamp(found.end_ns)} (the newest frame is at {format_stamp(found.newest_ns)})"
            )
        keyframes_s = time.perf_counter() - start
        request = question.request
        answer = self.pipeline.answer(
            request.question, request.options, keyframes=keyframes, on_progress=job.report
        )
        message = answer_to_message(answer, job.id, self.get_clock().now().nanoseconds, self._frame_id)
        return QueryResult(message, keyframes, keyframes_s)

    def _on_job_finished(self, job: QueryJob[QueuedQuestion]) -> None:
        """On the worker thread, before a waiting caller is woken: publish a delivered answer and its
        evidence; reply to a caller that does not wait."""
        if job.delivered:
            result: QueryResult = job.result
            start = time.monotonic()
            if self.params.config.query.publish_keyframes:
                for keyframe in result.keyframes:
                    self.keyframe_publisher.publish(
                        rgb_image_message(keyframe.frame.image, keyframe.frame.stamp_ns, self._frame_id)
                    )
            self.answer_publisher.publish(result.message)
            end = time.monotonic()
            timing = QueryTiming(
                queued_s=(job.started or job.submitted) - job.submitted,
                keyframes_s=result.keyframes_s,
                perception_s=result.message.perception_seconds,
                reasoning_s=result.message.reasoning_seconds,
                publish_s=end - start,
                total_s=end - job.submitted,
                keyframes=len(result.keyframes),
            )
            with self.stats.lock:
                self.stats.last_timing = timing
        if job.payload.reply is not None:
            self._reply(self._outcome(job), job, job.payload.reply)

    def _outcome(self, job: QueryJob[QueuedQuestion]) -> Outcome:
        """How a question the worker took ended, as its caller sees it."""
        if job.delivered:
            result: QueryResult = job.result
            seconds = (job.finished or time.monotonic()) - job.submitted
            return Outcome(
                True,
                f"answered from {len(result.keyframes)} key frame{'s' * (len(result.keyframes) != 1)} in "
                f"{seconds:.2f} s",
                result.message,
                "answered",
            )
        if job.abandon_reason == CANCELLED:
            return Outcome(False, f"query {job.id} cancelled", status=CANCELLED)
        if job.abandon_reason == SHUTDOWN:
            return Outcome(False, "shutting down: the node is stopping; ask when it is back", status=SHUTDOWN)
        if job.abandon_reason == TIMEOUT:
            where = (
                "while waiting behind another question"
                if job.started is None
                else "while the models worked on it; they finish it in the background and drop the answer"
            )
            return Outcome(
                False,
                f"timed out after {job.timeout_s:g} s (query.timeout_s) {where}; the node keeps answering",
                status=TIMEOUT,
            )
        error = job.error
        if isinstance(error, (NoFramesError, ValueError)):
            return Outcome(False, str(error))
        self.get_logger().error(
            f"query {job.id} ({job.payload.request.question!r}) failed: {type(error).__name__}: {error}"
        )
        return Outcome(False, f"failed: {type(error).__name__}: {error}")

    def _reply(
        self, outcome: Outcome, job: QueryJob[QueuedQuestion] | None, reply: Callable[[Outcome], None] | None
    ) -> Outcome:
        """Step 6: count ``outcome`` for /diagnostics (an answered job's latency too), then hand it to
        ``reply`` where the caller gave one; returns it."""
        latency = None
        if job is not None and job.finished is not None and outcome.success:
            latency = job.finished - job.submitted
        self.stats.finished(outcome.status, latency)
        if reply is not None:
            reply(outcome)
        return outcome

    @contextlib.contextmanager
    def _in_flight(self) -> Iterator[None]:
        """Count an :meth:`ask` in flight (at shutdown :meth:`wait_for_callbacks` lets their replies out)."""
        with self._callbacks:
            self._callbacks_in_flight += 1
        try:
            yield
        finally:
            with self._callbacks:
                self._callbacks_in_flight -= 1
                self._callbacks.notify_all()

    def wait_for_callbacks(self, timeout_s: float) -> bool:
        """Wait until no :meth:`ask` is in flight (at shutdown, after the worker closed); False on timeout."""
        with self._callbacks:
            return self._callbacks.wait_for(lambda: self._callbacks_in_flight == 0, timeout_s)

    # -------------------------------------------------------------------------------- diagnostics

    def diagnostics(self) -> DiagnosticStatus:
        """The node's health as one DiagnosticStatus (what /diagnostics carries)."""
        stats, config = self.stats, self.params.config
        with stats.lock:
            dropped = dict(stats.dropped)
            outcomes = dict(stats.outcomes)
            mean_ms = 1e3 * stats.ingest_s_total / stats.ingest_count if stats.ingest_count else 0.0
            max_ms, last_wall, latency = 1e3 * stats.ingest_s_max, stats.last_frame_wall, stats.last_latency_s
            breakdown = dataclasses.asdict(stats.last_timing) if stats.last_timing else {}
        held = self.history.size()
        level, message = DiagnosticStatus.OK, "ok"
        if last_wall is None:
            level, message = DiagnosticStatus.WARN, f"no camera frames on {self.camera_topic} yet"
        elif time.monotonic() - last_wall > CAMERA_SILENT_S:
            level, message = DiagnosticStatus.WARN, f"camera silent for {time.monotonic() - last_wall:.0f} s"
        running = self.worker.running
        values = {
            "frames_received": stats.frames_received,
            "frames_stored": held.frames,
            "frames_dropped": sum(dropped.values()),
            "frames_lost": stats.frames_lost,
            **{f"frames_dropped.{reason}": count for reason, count in sorted(dropped.items())},
            "camera_callback_mean_ms": f"{mean_ms:.3f}",
            "camera_callback_max_ms": f"{max_ms:.3f}",
            "keyframes_held": held.keyframes,
            "keyframe_candidates_held": held.candidates,
            "odometry_samples_held": held.poses,
            "buffer_memory_mb": f"{held.memory_bytes / 2**20:.2f}",
            "process_memory_mb": f"{rss_bytes() / 2**20:.1f}",
            **_gpu_memory(),
            "queries_running": 0 if running is None else 1,
            "queries_waiting": self.worker.waiting,
            **{f"queries_{status}": count for status, count in sorted(outcomes.items())},
            "last_query_latency_s": "" if latency is None else f"{latency:.3f}",
            **{f"last_query.{k}": f"{v:.3f}" for k, v in breakdown.items() if k != "keyframes"},
            "vlm": self.pipeline.perception,
            "lm": f"{config.lm.model} ({config.lm.backend}) loaded",
        }
        return DiagnosticStatus(
            level=level,
            name=f"{self.get_fully_qualified_name()}: embodied spatial reasoner",
            message=message,
            hardware_id=self.get_fully_qualified_name(),
            values=[KeyValue(key=key, value=str(value)) for key, value in values.items()],
        )

    def _publish_diagnostics(self) -> None:
        array = DiagnosticArray(status=[self.diagnostics()])
        array.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics_publisher.publish(array)

    def destroy_node(self) -> None:
        """Stop the query worker (a generation in flight is left to finish on its daemon thread)."""
        # getattr: a node whose construction failed is still destroyed by its context.
        if getattr(self, "_camera", None) is not None:
            self._camera.close()
        if getattr(self, "worker", None) is not None:
            self.worker.close(timeout=1.0)
        if getattr(self, "action_server", None) is not None:
            self.action_server.destroy()
        super().destroy_node()


def _gpu_memory() -> dict[str, str]:
    torch = sys.modules.get("torch")  # only when the models brought torch in
    if torch is None or not torch.cuda.is_available():
        return {}
    return {"gpu_memory_mb": f"{torch.cuda.memory_allocated() / 2**20:.1f}"}


def main(args: Sequence[str] | None = None, *, perceivers: PerceiverRegistry) -> int:
    """Run the node until SIGINT or SIGTERM (or the context's shutdown); returns the exit code (0; 1: bad
    parameters or models). ``perceivers``: what ``perception.perceiver`` may name (the application's
    registry, see ``embodied_r_ros.cli.parts``).

    A launch system stops a node with SIGINT, then SIGTERM: either ends the node within seconds, exit 0, no
    traceback. Questions in flight are answered ``success=false, "shutting down"`` while the node can
    still reply, then the executor and the context are shut down (rclpy's own handlers would invalidate
    the context first, and a service callback waiting for the models would hold the executor up to
    ``query.timeout_s``).
    """
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            node = EmbodiedRNode(perceivers=perceivers)
        except (ConfigError, ModelLoadError) as exc:
            # One line saying what to fix, not a traceback.
            rclpy.logging.get_logger(NODE_NAME).fatal(" ".join(str(exc).split()))
            return 1
        executor = MultiThreadedExecutor(num_threads=node.executor_threads)
        executor.add_node(node)
        spinner = threading.Thread(target=_spin, args=(executor, stop), name="embodied_r_spin", daemon=True)
        spinner.start()
        # A timed wait: the signal may reach another thread (DDS, the camera), and an untimed wait on the
        # main thread is then not interrupted; Python runs the handler only when this thread wakes.
        while not stop.wait(SIGNAL_POLL_S):
            pass
        node.get_logger().info("shutting down")
        node.worker.close(timeout=0.0)  # in-flight questions get "shutting down" now, while replies work
        if node.wait_for_callbacks(timeout_s=SHUTDOWN_GRACE_S):
            time.sleep(REPLY_FLUSH_S)
        executor.shutdown(timeout_sec=SHUTDOWN_GRACE_S)
        spinner.join(timeout=SHUTDOWN_GRACE_S)
        generating = node.worker.alive
        node.destroy_node()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        rclpy.try_shutdown()
    if generating:
        # A generation still runs in C++ on the worker thread: interpreter finalization would abort the
        # process under it ("terminate called ..."). Everything ROS is closed; leave now.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def _spin(executor: MultiThreadedExecutor, stop: threading.Event) -> None:
    """Spin until the executor or the context shuts down; then end :func:`main`'s wait."""
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException, RCLError):
        pass  # a context shut down from outside, or a wait set torn down by the shutdown itself
    finally:
        stop.set()
