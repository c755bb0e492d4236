"""The node's inputs: the camera, the poses, /clock and TF, into the history; and what they are missing.

The camera subscription is taken by a thread of its own (:mod:`.input_thread`), which converts the image
and hands it to the :class:`~embodied_r_ros.history.RobotHistory` (key-frame decisions, stored frames,
poses; ROS-free). The camera never waits on a model: a new key frame only queues idle work
(``on_keyframe``), and warnings go out through a logging thread (:mod:`.deferred_log`). Camera poses come
from :class:`.pose_source.PoseSource` (``pose.source``: a pose message or TF), also on threads of their own.
Under ``use_sim_time``, /clock is taken by a thread of its own too.

Bookkeeping of what is missing, for the log and /diagnostics: frames dropped (malformed, stamp jumps; one
throttled warning per reason), pose messages dropped (bad numbers) and frames kept without a pose (TF had
none), frames lost in transport (gaps in the publisher's sequence numbers), camera publishers whose QoS
cannot match ``camera.qos`` (the fix is logged), a sim-time clock that has not come, and inputs that do not
come at all or come with another type (:mod:`.input_watch`, checked on the diagnostics timer: :meth:`check`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.event_handler import QoSRequestedIncompatibleQoSInfo, SubscriptionEventCallbacks
from rclpy.lifecycle import LifecycleNode
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_policy_name_from_kind
from rclpy.subscription import Subscription
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CompressedImage, Image

from ..cameras import CameraSpec
from ..frames import Frame, Pose
from ..history import RobotHistory
from ..image_conversion import ImageConversionError, message_to_rgb
from ..poses.pose_sources import POSE_SOURCES
from ..stamp_guard import CONFIRM_FRAMES
from .deferred_log import DeferredLogger
from .diagnostics import NodeStats
from .frame_loss import SequenceGaps
from .input_thread import SubscriptionThread, close_input, subscribe_input
from .input_watch import InputCheck, InputWatch, graph_type
from .messages import stamp_to_ns
from .params import NodeParameters
from .pose_source import NO_TF_POSE, PoseProblem, PoseSource

WARN_THROTTLE_S = 5.0  # at most one warning per kind this often


@dataclass(frozen=True)
class _Target:
    """Where an active node's frames go: the history, and the node's hooks for what a frame decided."""

    history: RobotHistory
    on_keyframe: Callable[[int], None]  # a new key frame's stamp (camera thread: only queue work)
    on_restart: Callable[[], None]  # the stamps jumped and the history was cleared


class NodeInputs:
    """The inputs of ``node`` for one camera (see the module docstring): ``camera`` (default: the node's
    one camera, ``camera.*``) and the poses. ``own_threads`` False serves the camera and the poses from the
    node's executor like every other callback (the benchmark's baseline). A node with several cameras
    (:mod:`embodied_r_ros.cameras`) has one NodeInputs per camera, each with its frame counters
    (``stats``); the first takes /clock and the poses (the body's, one source for all): the others name it
    as ``shared_poses``, and its pose source feeds their histories too."""

    def __init__(
        self,
        node: LifecycleNode,
        params: NodeParameters,
        stats: NodeStats,
        own_threads: bool,
        camera: CameraSpec | None = None,
        shared_poses: NodeInputs | None = None,
    ) -> None:
        self._node, self._params, self._stats, self._own_threads = node, params, stats, own_threads
        config = params.config
        self.spec = camera or config.camera_specs()[0]
        # /diagnostics keys (inputs.<key>) and names in the log: "camera", or "camera.front" of several.
        suffix = f".{self.spec.name}" if self.spec.name else ""
        self.camera_key, self.poses_key = f"camera{suffix}", "poses"
        self.camera_topic = self.spec.topic
        self.camera_type: type = Image
        if self.spec.compressed:
            self.camera_type = CompressedImage
            if not self.camera_topic.rstrip("/").endswith("/compressed"):
                self.camera_topic = self.camera_topic.rstrip("/") + "/compressed"
        self.frame_id = ""  # the newest camera frame's
        self.camera: Subscription | SubscriptionThread | None = None  # active
        self.poses: PoseSource | None = None  # active: camera poses from pose.source
        self._target: _Target | None = None  # active
        self._camera_group = MutuallyExclusiveCallbackGroup()
        self._pose_group = MutuallyExclusiveCallbackGroup()
        self._gaps = SequenceGaps()
        self._warned: dict[str, float] = {}  # drop reason -> when it was last warned about
        self.watch = InputWatch(node)  # inputs missing or of another type (checked on the diagnostics timer)
        self._active_since: float | None = None  # monotonic time of the activation (None: inactive)
        self._first_frame: float | None = None  # of the first frame taken since then
        self._received_at_start = 0  # frames_received at the activation
        self._no_pose_reason = ""  # why TF gave the newest camera frame without a pose none
        # Warnings from the camera and pose paths: logged by a thread of their own (see deferred_log).
        log_name = f"{node.get_name()}_log" + (f"_{self.spec.name}" if self.spec.name else "")
        self._log = DeferredLogger(node.get_logger(), name=log_name)
        self._shared = shared_poses  # the first camera's inputs, whose pose source this camera uses
        self._pose_histories: tuple[RobotHistory, ...] = ()  # where this pose source's poses go (active)
        self._clock = self._take_clock_on_own_thread() if shared_poses is None else None

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
        node = self._node
        source = getattr(node, "_time_source", None)
        subscription = getattr(source, "_clock_sub", None)
        if subscription is None or not hasattr(source, "clock_callback"):
            return None
        qos, topic = subscription.qos_profile, subscription.topic_name
        node.destroy_subscription(subscription)
        thread = SubscriptionThread(
            node, Clock, topic, lambda message, _info: source.clock_callback(message), qos, name="clock"
        )
        source._clock_sub = thread.subscription  # TimeSource destroys it if use_sim_time is turned off
        return thread

    # ---------------------------------------------------------------------------------- lifecycle

    def start(
        self, history: RobotHistory, on_keyframe: Callable[[int], None], on_restart: Callable[[], None]
    ) -> None:
        """Activate: subscribe to the camera and the poses; frames go to ``history``."""
        node, config = self._node, self._params.config
        camera_qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=config.camera.qos_depth,
            reliability=(
                ReliabilityPolicy.BEST_EFFORT
                if self.spec.qos == "sensor_data"
                else ReliabilityPolicy.RELIABLE
            ),
        )
        self.camera = subscribe_input(
            node,
            self.camera_type,
            self.camera_topic,
            self.on_image,
            camera_qos,
            self._camera_group,
            own_thread=self._own_threads,
            name=self.camera_key.replace(".", "_"),
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=self._on_camera_qos_mismatch),
            with_info=True,  # the publisher's sequence numbers: frames lost in transport
        )
        if self._shared is not None:  # the first camera's pose source feeds this history too
            self._shared._pose_histories = (*self._shared._pose_histories, history)
        else:
            self._start_poses(history)
        self._active_since, self._first_frame = time.monotonic(), None
        self._received_at_start, self._no_pose_reason = self._stats.frames_received, ""
        self._target = _Target(history, on_keyframe, on_restart)  # last: frames are taken from here on

    def _start_poses(self, history: RobotHistory) -> None:
        """Subscribe to the poses (``pose.source``); they go to ``history`` and to every camera's history
        added to :attr:`_pose_histories` later."""
        stats = self._stats
        self._pose_histories = (history,)

        def on_pose(stamp_ns: int, pose: Pose) -> None:
            stats.last_pose_wall = time.monotonic()  # one writer: the pose thread
            for each in self._pose_histories:
                each.add_pose(stamp_ns, pose)

        self.poses = PoseSource(
            self._node,
            self._params.config.pose,
            self._pose_group,
            on_pose=on_pose,
            on_problem=self._on_pose_problem,
            own_threads=self._own_threads,  # off the executor too: see input_thread
        )

    def _pose_source(self) -> PoseSource | None:
        """The pose source this camera's frames ask for their poses (tf): its own, or the first camera's."""
        return self.poses if self._shared is None else self._shared.poses

    @property
    def description(self) -> str:
        """What an active node listens to, for its log."""
        poses = self.poses.description if self.poses is not None else "off"
        if self._shared is not None:
            poses = f"as {self._shared.spec.label}"
        topic = self._node.resolve_topic_name(self.camera_topic)
        return f"{self.spec.label} {topic} ({self.camera_type.__name__}), poses {poses}"

    @property
    def stats(self) -> NodeStats:
        """The counters this camera's frames and poses go to."""
        return self._stats

    @property
    def active(self) -> bool:
        return self._target is not None

    def stop(self) -> None:
        """Deactivate: stop taking frames and poses (joining the input threads)."""
        self._target, self._active_since = None, None
        self.watch.clear()
        camera, poses, self.camera, self.poses = self.camera, self.poses, None, None
        self._pose_histories = ()
        if camera is not None:
            close_input(self._node, camera)
        if poses is not None:
            poses.destroy()

    def clear(self) -> None:
        """Forget camera stamps still waiting for their poses (the history was cleared)."""
        if self.poses is not None:
            self.poses.clear()

    def close(self) -> None:
        """Stop everything, /clock and the logging thread too (the node is destroyed)."""
        self.stop()
        if self._clock is not None:
            self._clock.close()
        self._log.close()

    # ------------------------------------------------------------------------------------- camera

    def on_image(self, message: Any, info: Mapping[str, Any] | None = None) -> None:
        """The camera subscription's callback: one frame into the history (fast: see the module docstring)."""
        target = self._target
        if target is None:
            return  # a frame still in the queue as the node deactivated
        start, start_cpu = time.perf_counter(), time.thread_time()
        self._stats.frames_received += 1  # one camera thread writes this counter
        self._count_lost(info)
        try:
            image = message_to_rgb(message)
        except ImageConversionError as exc:
            self._stats.drop(exc.reason)
            self._warn_drop(exc.reason, f"dropped a camera frame on {self.camera_topic}: {exc}")
            return
        stamp = stamp_to_ns(message.header.stamp) or self._node.get_clock().now().nanoseconds
        self.frame_id = message.header.frame_id
        decision = target.history.add_frame(Frame(image, stamp), message.header.frame_id)
        if decision.restarted:
            target.on_restart()
            self._log.info(
                f"camera stamps jumped {decision.jump_s:+.1f} s and stayed there (a bag loop or a simulation "
                "restart): history cleared"
            )
        if not decision.taken:
            self._stats.drop(decision.dropped)
            if decision.dropped == "stamp_jump":
                self._warn_drop(
                    "stamp_jump",
                    f"dropped a camera frame stamped {decision.jump_s:+.1f} s from the newest; the history is"
                    f" cleared only if {CONFIRM_FRAMES} frames in a row agree (a bag loop, a simulation"
                    " restart)",
                )
            return
        if self._first_frame is None:
            self._first_frame = time.monotonic()  # poses are judged from here (input_watch)
        poses = self._pose_source()
        if poses is not None:
            poses.frame_seen(stamp, message.header.frame_id)  # tf: the camera's pose at this stamp
        if decision.stored:
            self._stats.frames_stored += 1
        if decision.store_error:
            self._stats.drop("too_large")
            self._warn_drop("too_large", decision.store_error)
        if decision.keyframe:
            target.on_keyframe(stamp)
        self._stats.ingested(time.perf_counter() - start, time.thread_time() - start_cpu)

    def _count_lost(self, info: Mapping[str, Any] | None) -> None:
        """Frames the publisher numbered but that never arrived (rclpy's MessageInfo, where given)."""
        if not info:
            return
        gid = info.get("publisher_gid") or {}
        lost = self._gaps.observe(bytes(gid.get("data") or b""), info.get("publication_sequence_number"))
        self._stats.frames_before_first = self._gaps.before_first
        if lost:
            self._stats.frames_lost = self._gaps.missed
            self._warn_drop(
                "lost",
                f"{self._gaps.missed} camera frame(s) on {self.camera_topic} never reached the node (gaps "
                "in the publisher's sequence numbers): the middleware dropped them; see docs/robot.md, "
                "'Large raw images over Fast DDS' (a Fast DDS profile for large images, camera.qos, a free "
                "core)",
            )

    def _on_camera_qos_mismatch(self, event: QoSRequestedIncompatibleQoSInfo) -> None:
        """A camera publisher the subscription cannot match: say which policy and the fix, and count it."""
        policy = qos_policy_name_from_kind(event.last_policy_kind)
        with self._stats.lock:
            self._stats.qos_incompatible = event.total_count
            self._stats.qos_incompatible_policy = policy
        qos = self.spec.qos
        setting = f"the QoS of {self.spec.name} in cameras" if self.spec.name else "camera.qos"
        fix = (
            f"the camera publishes best effort: set {setting} to sensor_data"
            if policy == "RELIABILITY" and qos == "reliable"
            else f"make {setting} match the camera's QoS (ros2 topic info -v shows it)"
        )
        self._node.get_logger().error(
            f"a publisher on {self._node.resolve_topic_name(self.camera_topic)} offers a QoS incompatible "
            f"with {setting}={qos} (policy {policy}): no frames come from it; {fix}"
        )

    def no_frames_reason(self) -> str:
        """Why a question finds no frames in an empty history: what the camera sent, what was dropped."""
        dropped = sum(self._stats.dropped.values())
        topic = self._node.resolve_topic_name(self.camera_topic)
        with self._stats.lock:
            count, policy = self._stats.qos_incompatible, self._stats.qos_incompatible_policy
        hint = (
            f"; {count} publisher(s) there offer a QoS incompatible with camera.qos="
            f"{self.spec.qos} (policy {policy})"
            if count
            else ""
        )
        return (
            f"no camera frames to answer from: none received on {topic} since the start or the last "
            f"reset ({self._stats.frames_received} received, {dropped} dropped as malformed or out of "
            f"order){hint}; check that the camera publishes there"
        )

    # ------------------------------------------------------------------------- poses, clock, warnings

    def _on_pose_problem(self, problem: PoseProblem) -> None:
        """A pose input that cannot be used: dropped and counted, never a failed question later. A camera
        frame TF gave no pose is kept without one: counted, and said by the input watch if no pose comes
        for ``pose.warn_after_s`` (one frame without a pose among many with one is no news)."""
        if problem.kind == NO_TF_POSE:
            self._stats.frame_without_pose()
            self._no_pose_reason = problem.text
            return
        self._stats.drop_pose(problem.kind)
        self._warn_drop(problem.kind, problem.text)

    # -------------------------------------------------------------------------- inputs that do not come

    def check(self) -> dict[str, str]:
        """Judge the inputs now (the diagnostics timer calls it: graph queries stay off the input
        threads): log what went missing or came back; returns {input: problem}."""
        if self._active_since is None or self.camera is None:
            self.watch.clear()
            return {}
        return self.watch.check(self._checks(time.monotonic()))

    def _checks(self, now: float) -> list[InputCheck]:
        """The active inputs as the watch judges them: the camera, and the poses while frames come."""
        assert self.camera is not None
        config, stats = self._params.config, self._stats
        since = self._active_since if self._active_since is not None else now
        last_frame = max(since, stats.last_frame_wall or since)
        received = stats.frames_received - self._received_at_start
        taken = stats.last_frame_wall is not None and stats.last_frame_wall >= since
        compressed = self.camera_type is CompressedImage
        camera = InputCheck(
            self.camera_key,
            f"{self.spec.label} frames",
            (self.camera.topic_name,),
            graph_type(f"sensor_msgs/{self.camera_type.__name__}"),
            "cameras" if self.spec.name else "camera.topic",
            now - last_frame,
            config.camera.warn_after_s,
            detail=f"{received} received, none usable (see frames_dropped)" if received and not taken else "",
            also=(
                (
                    graph_type("sensor_msgs/Image" if compressed else "sensor_msgs/CompressedImage"),
                    f"{':raw' if compressed else ':compressed'} after the topic in cameras"
                    if self.spec.name
                    else f"camera.compressed {'false' if compressed else 'true'}",
                ),
            ),
        )
        checks = [camera]
        poses = self.poses
        if poses is not None and poses.topics:
            camera_fresh = self._first_frame is not None and camera.silent_s < config.camera.warn_after_s
            start = self._first_frame or now
            silent = now - max(start, stats.last_pose_wall or start) if camera_fresh else None
            if poses.kind.tf:
                what, type_name, parameter = "camera poses from TF", "tf2_msgs/msg/TFMessage", ""
                also: tuple[tuple[str, str], ...] = ()
                detail = self._no_pose_reason
            else:
                what, type_name, parameter = "poses", graph_type(poses.kind.message_type), "pose.topic"
                also = tuple(
                    (graph_type(kind.message_type), f"pose.source {kind.name}")
                    for kind in POSE_SOURCES.values()
                    if kind.message_type and kind.name != poses.source
                )
                detail = ""
            checks.append(
                InputCheck(
                    self.poses_key, what, poses.topics, type_name, parameter, silent,
                    config.pose.warn_after_s, detail=detail, also=also,
                )
            )  # fmt: skip
        return checks

    def input_states(self) -> dict[str, str]:
        """Per input, for /diagnostics: "ok", its problem, "off" (no pose source) or "not subscribed"."""
        camera, poses_key = self.camera_key, self.poses_key
        if self._shared is not None:  # the poses are the first camera's to report
            return {camera: problems_or(self.watch.problems, camera, self._active_since)}
        if self._active_since is None:
            return {camera: "not subscribed", poses_key: "not subscribed"}
        problems = self.watch.problems
        poses = "off" if self.poses is None or not self.poses.topics else problems.get(poses_key, "ok")
        return {camera: problems.get(camera, "ok"), poses_key: poses}

    def clock_problem(self) -> str:
        """Why the node's clock cannot stamp yet ("" when it can): sim time on and no /clock so far."""
        if not self._node.get_parameter("use_sim_time").value:
            return ""
        if self._node.get_clock().now().nanoseconds:
            return ""
        return "use_sim_time is true and no /clock message has come: answers are stamped with camera time"

    def warn_if_no_clock(self) -> None:
        """A throttled warning while sim time has no /clock (the diagnostics timer calls it)."""
        problem = self.clock_problem()
        if problem:
            self._warn_drop(
                "no_clock", f"{problem}; check that the simulator (or `ros2 bag play --clock`) runs"
            )

    def _warn_drop(self, reason: str, text: str) -> None:
        """A throttled warning per drop reason (one shared throttle would hide all reasons but one), logged
        by the input log's thread: the camera thread never waits for rclpy's logger."""
        now = time.monotonic()
        if now - self._warned.get(reason, -math.inf) >= WARN_THROTTLE_S:
            self._warned[reason] = now
            self._log.warning(text)


def problems_or(problems: Mapping[str, str], key: str, active_since: float | None) -> str:
    """An input's state for /diagnostics: "not subscribed" while inactive, its problem, or "ok"."""
    return "not subscribed" if active_since is None else problems.get(key, "ok")
