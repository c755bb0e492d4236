"""The node's poses: camera poses in the fixed frame from the source ``pose.source`` names.

What each source listens to is the registry's (:data:`~embodied_r_ros.poses.pose_sources.POSE_SOURCES`):

- a message source (``odometry``, ``pose``, ``pose_with_covariance``: nav_msgs/Odometry,
  geometry_msgs/PoseStamped or PoseWithCovarianceStamped on ``pose.topic``; drones: the flight stack's local
  position): its type is resolved to the rclpy class here (:func:`message_class`) and the registry reads the
  body pose in the fixed frame out of each message; the camera pose is that pose composed with
  ``pose.camera_offset``.
- ``tf``: the transform ``pose.odom_frame`` -> the camera frame (``pose.camera_frame``, or the images'
  frame_id) from ``/tf`` and ``/tf_static`` (:mod:`.tf_listener`), looked up at each camera frame's stamp
  once the transforms around it arrived (:class:`~embodied_r_ros.poses.transform_tree.PendingLookups`), then
  composed with ``pose.camera_offset`` (identity when the TF tree already reaches the camera). The node
  tells it the stamp and frame_id of each camera frame it takes: :meth:`PoseSource.frame_seen`.
- ``none``, or a message source with an empty ``pose.topic``: nothing.

Each good pose goes to ``on_pose(stamp_ns, pose)`` (the node's history interpolates at key-frame stamps);
a message that cannot give one (non-finite numbers, a zero quaternion, no transform) goes to
``on_problem(PoseProblem)`` and is dropped. The lifecycle node makes one on activate and destroys it on
deactivate.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..config import ConfigError
from ..frames import NS_PER_S, Pose
from ..node_config import PoseConfig
from ..poses.pose_sources import POSE_SOURCES, PoseSourceKind
from ..poses.transform_tree import PendingLookups, SettledLookup, TransformTree, frame_name
from ..poses.transforms import IDENTITY, compose, pose_problem
from .input_thread import close_input, subscribe_input
from .messages import stamp_to_ns
from .tf_listener import TF_STATIC_TOPIC, TF_TOPIC, TfListener, tf_messages_problem

if TYPE_CHECKING:
    from rclpy.callback_groups import CallbackGroup
    from rclpy.node import Node

# Queue depth of a pose-message subscription (best effort: takes reliable publishers too).
POSE_QOS_DEPTH = 50
NO_TF_POSE = "no_tf_pose"  # a camera frame TF gave no pose (kept without one: frames_without_pose)


@dataclass(frozen=True)
class PoseProblem:
    """A pose input that could not be used: ``kind`` says which (bad_odometry, bad_pose,
    bad_pose_with_covariance, bad_tf: a message or transform dropped; no_tf_pose: a camera frame TF gave no
    pose, kept without one), ``text`` says what and how to fix it."""

    kind: str
    text: str


def pose_source_problem(config: PoseConfig) -> str:
    """Why a :class:`PoseSource` for ``config`` cannot start here ("" when it can): tf without tf2_msgs."""
    return tf_messages_problem() if POSE_SOURCES[config.active_source].tf else ""


def message_class(type_name: str) -> type:
    """The rclpy message class a registry entry names ("nav_msgs/Odometry" -> nav_msgs.msg.Odometry)."""
    import importlib

    package, name = type_name.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


class PoseSource:
    """Camera poses from the source ``config.source`` names, into ``on_pose(stamp_ns, pose)``.

    Subscribes on ``node`` in ``callback_group``; :meth:`destroy` removes what it made. Raises
    :class:`~embodied_r_ros.config.ConfigError` when the source cannot run here (tf without tf2_msgs:
    :func:`pose_source_problem`).
    """

    def __init__(
        self,
        node: Node,
        config: PoseConfig,
        callback_group: CallbackGroup | None,
        on_pose: Callable[[int, Pose], Any],
        on_problem: Callable[[PoseProblem], Any],
        own_threads: bool = False,
    ) -> None:
        problem = pose_source_problem(config)
        if problem:
            raise ConfigError(problem)
        self.config = config
        self.source = config.active_source
        self.kind: PoseSourceKind = POSE_SOURCES[self.source]
        self._node = node
        self._on_pose = on_pose
        self._on_problem = on_problem
        self._offset = config.camera_offset.pose()
        self._subscription: Any = None
        self._tf: TfListener | None = None
        self._pending: PendingLookups | None = None
        self._settling = threading.Lock()  # one thread settles at a time, so poses reach on_pose in order
        self._warned_optical: set[str] = set()
        if self.kind.message_type:
            from rclpy.qos import QoSProfile, ReliabilityPolicy

            self._subscription = subscribe_input(
                node,
                message_class(self.kind.message_type),
                config.topic,
                self._on_message,
                QoSProfile(depth=POSE_QOS_DEPTH, reliability=ReliabilityPolicy.BEST_EFFORT),
                callback_group,
                own_threads,
                "poses",
            )
        elif self.kind.tf:
            tree = TransformTree(config.max_gap_s)
            self._pending = PendingLookups(tree, frame_name(config.odom_frame), config.max_gap_s)
            self._tf = TfListener(
                node, tree, callback_group, self._settle, self._on_refused_transform, own_threads=own_threads
            )

    @property
    def description(self) -> str:
        """What it listens to, for the node's log ("nav_msgs/Odometry on /odom", "off", ...)."""
        if self._subscription is not None:
            return f"{self.kind.message_type} on {self._subscription.topic_name}"
        if self._tf is not None:
            camera = self.config.camera_frame or "the images' frame"
            return f"TF {self.config.odom_frame} -> {camera} from {TF_TOPIC} and {TF_STATIC_TOPIC}"
        return "off"

    @property
    def topics(self) -> tuple[str, ...]:
        """The resolved topics it listens to (none for ``none``)."""
        if self._subscription is not None:
            return (self._subscription.topic_name,)
        return self._tf.topics if self._tf is not None else ()

    # ------------------------------------------------------------------------------ message sources

    def _on_message(self, message: Any) -> None:
        assert self.kind.read is not None  # a message source
        body = self.kind.read(message)
        problem = pose_problem(body)
        if problem:
            self._on_problem(
                PoseProblem(
                    f"bad_{self.source}",
                    f"dropped a {self.kind.message_type} message on {self.config.topic}: {problem}; "
                    "check the pose source",
                )
            )
            return
        self._on_pose(stamp_to_ns(message.header.stamp), self._camera(body))

    def _camera(self, body: Pose) -> Pose:
        return body if self._offset == IDENTITY else compose(body, self._offset)

    # ----------------------------------------------------------------------------------------- tf

    def frame_seen(self, stamp_ns: int, frame_id: str) -> None:
        """A camera frame the node took (its stamp and header frame_id): with tf, its pose goes to
        ``on_pose`` once the transforms around its stamp are in; nothing to do for the other sources."""
        if self._pending is None:
            return
        camera = frame_name(self.config.camera_frame or frame_id)
        if not camera:
            self._on_problem(
                PoseProblem(
                    NO_TF_POSE,
                    "the camera images carry no frame_id, so TF cannot place them: set pose.camera_frame",
                )
            )
            return
        self._warn_optical(camera)
        with self._settling:
            self._report(self._pending.add(stamp_ns, camera))

    def _settle(self) -> None:
        assert self._pending is not None
        with self._settling:
            self._report(self._pending.settle())

    def _report(self, settled: list[SettledLookup]) -> None:
        for item in settled:
            if item.lookup.pose is not None:
                self._on_pose(item.stamp_ns, self._camera(item.lookup.pose))
                continue
            self._on_problem(
                PoseProblem(
                    NO_TF_POSE,
                    f"no pose for the camera frame stamped {item.stamp_ns / NS_PER_S:.3f}: "
                    f"{item.lookup.problem}; check that {TF_TOPIC} and {TF_STATIC_TOPIC} connect "
                    f"{self.config.odom_frame} (pose.odom_frame) to {item.frame}",
                )
            )

    def _on_refused_transform(self, text: str) -> None:
        self._on_problem(PoseProblem("bad_tf", f"dropped a transform on {text}; check its publisher"))

    def _warn_optical(self, camera: str) -> None:
        """An optical frame (z forward) would turn every motion into the wrong words; say so once."""
        if "optical" not in camera or self._offset != IDENTITY or camera in self._warned_optical:
            return
        self._warned_optical.add(camera)
        self._node.get_logger().warning(
            f"pose.source tf: camera frame {camera!r} looks like an optical frame (z forward, x right), but "
            "poses need REP-103 body axes (x forward, z up): set pose.camera_frame to the camera's body "
            "frame (e.g. camera_link), or pose.camera_offset to the optical -> body rotation "
            "(qx 0.5, qy -0.5, qz 0.5, qw 0.5)"
        )

    # ----------------------------------------------------------------------------------- lifecycle

    def clear(self) -> None:
        """Forget camera stamps still waiting for transforms (the node's history was cleared); the
        transforms themselves stay true."""
        if self._pending is not None:
            self._pending.clear()

    def destroy(self) -> None:
        """Remove the subscriptions from the node; nothing is reported after this."""
        if self._subscription is not None:
            close_input(self._node, self._subscription)
            self._subscription = None
        if self._tf is not None:
            self._tf.destroy()
            self._tf = None
        self.clear()
