"""A small TF listener of our own: tf2_msgs/TFMessage on ``/tf`` and ``/tf_static`` into a
:class:`~embodied_r_ros.poses.transform_tree.TransformTree` (tf2_ros is not installable from PyPI; tf2_msgs
is a
plain interface package that ROS installs, and ``make build`` builds where it is missing).

QoS as tf2_ros's listener: ``/tf`` reliable, volatile, depth 100; ``/tf_static`` reliable, transient local,
depth 100, so a listener that starts late still gets every static transform once. Namespaced TF
(``/robot1/tf``) is a remap away, as for tf2_ros: ``--ros-args -r /tf:=tf -r /tf_static:=tf_static``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable

from ..poses.pose_sources import sources_without_tf
from ..poses.transform_tree import TransformTree
from .input_thread import close_input, subscribe_input
from .messages import stamp_to_ns, transform_pose

if TYPE_CHECKING:
    from rclpy.callback_groups import CallbackGroup
    from rclpy.node import Node

TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"
TF_DEPTH = 100
TF_MESSAGES = "tf2_msgs.msg"


def tf_messages_problem() -> str:
    """Why tf2_msgs/msg/TFMessage cannot be imported here ("" when it can), with the fix."""
    try:
        importlib.import_module(TF_MESSAGES).TFMessage  # noqa: B018 (the check is the import)
    except (ImportError, AttributeError) as exc:
        return (
            f"pose.source tf needs the ROS package tf2_msgs, which cannot be imported ({exc}): on a ROS "
            "install, `apt install ros-$ROS_DISTRO-tf2-msgs` and source /opt/ros/$ROS_DISTRO/setup.bash; "
            "in this repository's workspace, `make build` builds it (interfaces/tf2_msgs), then source "
            f"install/setup.bash; or set pose.source to {sources_without_tf()}"
        )
    return ""


class TfListener:
    """Subscribes to ``/tf`` and ``/tf_static`` on ``node`` and fills ``tree``.

    ``on_update()`` runs after each message's transforms are in the tree; ``on_refused(text)`` for each
    transform the tree refused (no frame id, a non-finite or zero rotation). Raises ``ImportError`` when
    tf2_msgs is missing (:func:`tf_messages_problem` says why and how to fix it).
    """

    def __init__(
        self,
        node: Node,
        tree: TransformTree,
        callback_group: CallbackGroup | None,
        on_update: Callable[[], None],
        on_refused: Callable[[str], None],
        own_threads: bool = False,
    ) -> None:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        problem = tf_messages_problem()
        if problem:
            raise ImportError(problem)
        message_type = importlib.import_module(TF_MESSAGES).TFMessage
        self._node = node
        self.tree = tree
        self._on_update = on_update
        self._on_refused = on_refused

        def qos(durability: DurabilityPolicy) -> QoSProfile:
            return QoSProfile(
                history=HistoryPolicy.KEEP_LAST,
                depth=TF_DEPTH,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=durability,
            )

        self._subscriptions = [
            subscribe_input(
                node,
                message_type,
                TF_TOPIC,
                lambda message: self._on_message(message, static=False),
                qos(DurabilityPolicy.VOLATILE),
                callback_group,
                own_threads,
                "tf",
            ),
            subscribe_input(
                node,
                message_type,
                TF_STATIC_TOPIC,
                lambda message: self._on_message(message, static=True),
                qos(DurabilityPolicy.TRANSIENT_LOCAL),
                callback_group,
                own_threads,
                "tf_static",
            ),
        ]

    def _on_message(self, message: Any, static: bool) -> None:
        for transform in message.transforms:
            refused = self.tree.add(
                transform.header.frame_id,
                transform.child_frame_id,
                stamp_to_ns(transform.header.stamp),
                transform_pose(transform.transform),
                static=static,
            )
            if refused:
                self._on_refused(f"{TF_STATIC_TOPIC if static else TF_TOPIC}: {refused}")
        self._on_update()

    @property
    def topics(self) -> tuple[str, ...]:
        """The resolved topics it listens to (remappings applied)."""
        return tuple(subscription.topic_name for subscription in self._subscriptions)

    def destroy(self) -> None:
        """Remove the subscriptions from the node."""
        for subscription in self._subscriptions:
            close_input(self._node, subscription)
        self._subscriptions.clear()
