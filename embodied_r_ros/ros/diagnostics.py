"""The node's counters and its health as one DiagnosticStatus (what ``/diagnostics`` carries).

:class:`NodeStats` is written by the camera thread (frames), the question path (outcomes, timings) and the
garbage collector's callback; :func:`diagnostic_status` reads it together with a :class:`NodeView` (the
node's state as the diagnostics timer fires). The timer runs on wall time in every lifecycle state, so the
robot team hears why a node is unconfigured, or why under ``use_sim_time`` no /clock has come.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from ..history import HistorySize, RobotHistory
from ..node_config import NodeConfig
from .node_memory import NodeMemory, memory_values
from .query_worker import QueryWorker


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
    dropped: dict[str, int] = field(default_factory=dict)  # camera frames received but not taken, by reason
    # Pose messages or transforms that could not be used (bad_odometry, bad_tf, ...), by reason.
    poses_dropped: dict[str, int] = field(default_factory=dict)
    frames_without_pose: int = 0  # camera frames taken that TF gave no pose (pose.source tf)
    last_pose_wall: float | None = None  # monotonic time of the newest usable pose
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
        """A camera frame received but not taken, for ``reason``."""
        with self.lock:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def drop_pose(self, reason: str) -> None:
        """A pose message or a transform that could not be used, for ``reason``."""
        with self.lock:
            self.poses_dropped[reason] = self.poses_dropped.get(reason, 0) + 1

    def frame_without_pose(self) -> None:
        """A camera frame taken without a pose (TF had none at its stamp)."""
        with self.lock:
            self.frames_without_pose += 1

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


# The counters each camera of a node with several keeps for itself (the others are the node's).
CAMERA_COUNTERS = (
    "frames_received", "frames_stored", "frames_lost", "frames_before_first", "frames_without_pose",
    "ingest_s_total", "ingest_count", "qos_incompatible",
)  # fmt: skip


def combined_stats(node: NodeStats, cameras: Sequence[NodeStats]) -> NodeStats:
    """One NodeStats for /diagnostics of a node with several cameras: the node's own counters (questions,
    garbage collection) and the cameras' summed (frames, drops), their maxima and, for the newest frame,
    the camera that has been silent longest (None while one has sent nothing)."""
    with node.lock:
        combined = dataclasses.replace(
            node, dropped={}, poses_dropped={}, outcomes=dict(node.outcomes), lock=threading.Lock()
        )
    walls = []
    for stats in cameras:
        with stats.lock:
            for name in CAMERA_COUNTERS:
                setattr(combined, name, getattr(combined, name) + getattr(stats, name))
            for reason, count in stats.dropped.items():
                combined.dropped[reason] = combined.dropped.get(reason, 0) + count
            for reason, count in stats.poses_dropped.items():
                combined.poses_dropped[reason] = combined.poses_dropped.get(reason, 0) + count
            combined.ingest_s_max = max(combined.ingest_s_max, stats.ingest_s_max)
            combined.ingest_cpu_s_max = max(combined.ingest_cpu_s_max, stats.ingest_cpu_s_max)
            combined.qos_incompatible_policy = (
                combined.qos_incompatible_policy or stats.qos_incompatible_policy
            )
            walls.append(stats.last_frame_wall)
            if stats.last_pose_wall is not None:
                combined.last_pose_wall = max(combined.last_pose_wall or 0.0, stats.last_pose_wall)
    combined.last_frame_wall = None if None in walls else min(walls)  # type: ignore[type-var]
    return combined


@dataclass(frozen=True)
class CameraView:
    """One camera of a node with several, as /diagnostics reports it (``cameras.<name>.*``)."""

    name: str
    topic: str
    stats: NodeStats
    history: RobotHistory | None = None  # None: not configured
    memory: NodeMemory | None = None


@dataclass(frozen=True)
class NodeView:
    """The node's state as /diagnostics reports it beside the counters; the served parts are None while
    the node is not configured."""

    name: str  # the node's fully qualified name
    lifecycle_state: str
    failure: str  # why the last configure failed ("" when it did not)
    use_sim_time: bool
    clock_problem: str  # why the node's clock cannot stamp yet ("" when it can)
    camera_topic: str
    config: NodeConfig
    history: RobotHistory | None = None
    worker: QueryWorker | None = None
    perception: str | None = None  # the pipeline's perception, for "vlm"
    memory: NodeMemory | None = None
    # Per input (camera, poses): "ok", "off", "not subscribed" or what is wrong (input_watch)
    inputs: dict[str, str] = field(default_factory=dict)
    input_problems: dict[str, str] = field(default_factory=dict)  # the inputs that are wrong: their problem
    cameras: tuple[CameraView, ...] = ()  # a node with several cameras: each (one camera: empty)


def rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; the peak on other systems)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def diagnostic_status(view: NodeView, stats: NodeStats) -> DiagnosticStatus:
    """The node's health as one DiagnosticStatus: a level and a message saying what is wrong first, then
    every counter as a key/value."""
    config, served = view.config, view.history is not None
    with stats.lock:
        dropped = dict(stats.dropped)
        poses_dropped, without_pose = dict(stats.poses_dropped), stats.frames_without_pose
        outcomes = dict(stats.outcomes)
        mean_ms = 1e3 * stats.ingest_s_total / stats.ingest_count if stats.ingest_count else 0.0
        max_ms, last_wall, latency = 1e3 * stats.ingest_s_max, stats.last_frame_wall, stats.last_latency_s
        cpu_max_ms = 1e3 * stats.ingest_cpu_s_max
        breakdown = dataclasses.asdict(stats.last_timing) if stats.last_timing else {}
        qos_count, qos_policy = stats.qos_incompatible, stats.qos_incompatible_policy
    state = view.lifecycle_state
    camera_problems = [problem for key, problem in view.input_problems.items() if _is_camera(key)]
    level, message = DiagnosticStatus.OK, "ok"
    if state != "active":
        level = DiagnosticStatus.WARN
        message = f"{state}" + (f": configure failed: {view.failure}" if view.failure else "")
    elif camera_problems:
        level, message = DiagnosticStatus.WARN, "; ".join(camera_problems)
    elif last_wall is None:
        level, message = DiagnosticStatus.WARN, f"no camera frames on {view.camera_topic} yet"
    for key, problem in view.input_problems.items():
        if not _is_camera(key):
            level = max(level, DiagnosticStatus.WARN)
            message += f"; {problem}"
    if state == "active" and qos_count:
        level = DiagnosticStatus.ERROR
        message += (
            f"; {qos_count} camera publisher(s) offer a QoS incompatible with camera.qos="
            f"{config.camera.qos} (policy {qos_policy}): set camera.qos to match the camera"
            + (" (or its :reliable / :sensor_data in cameras)" if view.cameras else "")
        )
    if view.clock_problem:
        level = max(level, DiagnosticStatus.WARN)
        message += f"; {view.clock_problem}"
    memory_status = view.memory.status() if view.memory is not None else None
    if memory_status is not None and not memory_status.enabled:
        level = max(level, DiagnosticStatus.WARN)
        message += f"; memory off: {memory_status.problem}"
    for camera in view.cameras[1:]:  # the first camera's memory is the one above
        status = camera.memory.status() if camera.memory is not None else None
        if status is not None and not status.enabled:
            level = max(level, DiagnosticStatus.WARN)
            message += f"; memory of camera {camera.name} off: {status.problem}"
    held = _held(view)
    worker = view.worker
    running = worker.running if worker else None
    values = {
        "lifecycle_state": state,
        "use_sim_time": str(view.use_sim_time).lower(),
        "frames_received": stats.frames_received,
        "frames_stored": held.frames if held else 0,
        "frames_dropped": sum(dropped.values()),
        "frames_lost": stats.frames_lost,
        "frames_published_before_first_received": stats.frames_before_first,
        **{f"frames_dropped.{reason}": count for reason, count in sorted(dropped.items())},
        "frames_without_pose": without_pose,
        "poses_dropped": sum(poses_dropped.values()),
        **{f"poses_dropped.{reason}": count for reason, count in sorted(poses_dropped.items())},
        **{f"inputs.{key}": state for key, state in view.inputs.items()},
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
        "vlm": "not loaded" if view.perception is None else view.perception,
        "lm": f"{config.lm.model} ({config.lm.backend}) {'loaded' if served else 'not loaded'}",
        **memory_values(view.memory, memory_status, config),
        **{key: value for camera in view.cameras for key, value in _camera_values(camera).items()},
    }
    return DiagnosticStatus(
        level=level,
        name=f"{view.name}: embodied spatial reasoner",
        message=message,
        hardware_id=view.name,
        values=[KeyValue(key=key, value=str(value)) for key, value in values.items()],
    )


def _held(view: NodeView) -> HistorySize | None:
    """What the history holds (None: not configured); of a node with several cameras, all of them."""
    if view.history is None:
        return None
    sizes = [c.history.size() for c in view.cameras if c.history is not None] or [view.history.size()]
    columns = zip(*(dataclasses.astuple(size) for size in sizes), strict=True)
    return HistorySize(*(sum(column) for column in columns))


def _is_camera(key: str) -> bool:
    """Whether an input key is a camera's: "camera", or "camera.<name>" of a node with several."""
    return key.split(".")[0] == "camera"


def _camera_values(camera: CameraView) -> dict[str, str]:
    """One camera's own figures (``cameras.<name>.*``) beside the node's summed ones."""
    with camera.stats.lock:
        received, dropped = camera.stats.frames_received, sum(camera.stats.dropped.values())
    held = camera.history.size() if camera.history is not None else None
    status = camera.memory.status() if camera.memory is not None else None
    prefix = f"cameras.{camera.name}."
    return {
        prefix + "topic": camera.topic,
        prefix + "frames_received": str(received),
        prefix + "frames_dropped": str(dropped),
        prefix + "keyframes_held": str(held.keyframes if held else 0),
        prefix + "memory_path": status.path if status is not None else "",
        prefix + "memory_frames": str(status.frames if status is not None else 0),
    }


class DiagnosticsPublisher:
    """Publishes ``status()`` on /diagnostics every ``period_s`` of wall time, in every lifecycle state:
    under use_sim_time a timer on the node's clock would not fire before /clock comes, exactly when the
    robot team needs to hear why. ``on_tick()`` runs first (the node's periodic chores)."""

    def __init__(
        self,
        node: Node,
        period_s: float,
        status: Callable[[], DiagnosticStatus],
        on_tick: Callable[[], None] = lambda: None,
    ) -> None:
        self._node, self._status, self._on_tick = node, status, on_tick
        self.publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        node.create_timer(
            period_s,
            self._publish,
            callback_group=MutuallyExclusiveCallbackGroup(),
            clock=Clock(clock_type=ClockType.STEADY_TIME),
        )

    def _publish(self) -> None:
        self._on_tick()
        array = DiagnosticArray(status=[self._status()])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self.publisher.publish(array)


def _gpu_memory() -> dict[str, str]:
    torch = sys.modules.get("torch")  # only when the models brought torch in
    cuda = getattr(torch, "cuda", None)  # None too while another thread still imports torch (configure)
    if cuda is None or not cuda.is_available():
        return {}
    return {"gpu_memory_mb": f"{torch.cuda.memory_allocated() / 2**20:.1f}"}
