"""Where the node may take the robot's poses from (``pose.source``): the registry of pose sources.

One entry per source name says what the source listens to: a message type on ``pose.topic`` (named as
"package/Type": the core imports no ROS; the ROS layer resolves the name to the message class) and how one
such message becomes a core :class:`~embodied_r_ros.frames.Pose` of the body in the fixed frame (read
duck-typed, so rclpy's and rosbags' messages both work), or TF, or nothing. The parameter's choices and
description (:mod:`embodied_r_ros.node_config`), the node's subscription and its conversion
(:mod:`embodied_r_ros.ros.pose_source`) all read :data:`POSE_SOURCES`: a new message source is one entry
there. Plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..frames import Pose


def geometry_pose(pose: Any) -> Pose:
    """A geometry_msgs/Pose-like value (``position``, ``orientation``) as a core :class:`Pose`."""
    p, q = pose.position, pose.orientation
    return Pose(
        position=(float(p.x), float(p.y), float(p.z)),
        orientation=(float(q.x), float(q.y), float(q.z), float(q.w)),
    )


@dataclass(frozen=True)
class PoseSourceKind:
    """One value of ``pose.source``: a message source (``message_type`` and ``read``), TF, or nothing."""

    name: str
    message_type: str = ""  # a message source's type on pose.topic, "package/Type"
    read: Callable[[Any], Pose] | None = None  # the body pose one message of message_type carries
    tf: bool = False  # the transform pose.odom_frame -> camera frame from /tf and /tf_static
    note: str = ""  # said after the type in the parameter's description

    def __post_init__(self) -> None:
        if bool(self.message_type) != (self.read is not None):
            raise ValueError(f"pose source {self.name}: a message source needs message_type and read")

    @property
    def label(self) -> str:
        """The source as the parameter's description lists it: "pose (geometry_msgs/PoseStamped, ...)"."""
        detail = ", ".join(filter(None, (self.message_type, self.note)))
        return f"{self.name} ({detail})" if detail else self.name


# The registry, in the order the parameter lists them; its default (odometry) comes first.
POSE_SOURCES: dict[str, PoseSourceKind] = {
    kind.name: kind
    for kind in (
        PoseSourceKind("odometry", "nav_msgs/Odometry", lambda message: geometry_pose(message.pose.pose)),
        PoseSourceKind(
            "pose",
            "geometry_msgs/PoseStamped",
            lambda message: geometry_pose(message.pose),
            note="e.g. a flight stack's local position",
        ),
        PoseSourceKind(  # the covariance is not used
            "pose_with_covariance",
            "geometry_msgs/PoseWithCovarianceStamped",
            lambda message: geometry_pose(message.pose.pose),
        ),
        PoseSourceKind(
            "tf", tf=True, note="pose.odom_frame -> pose.camera_frame from /tf and /tf_static; needs tf2_msgs"
        ),
        PoseSourceKind("none"),
    )
}


def listed(names: list[str] | tuple[str, ...]) -> str:
    """Names as a sentence lists them: "a, b or c"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def described_sources() -> str:
    """Every source with what it listens to, for the parameter's description."""
    return ", ".join(kind.label for kind in POSE_SOURCES.values())


def sources_without_tf() -> str:
    """The sources that need no tf2_msgs, as a sentence lists them (the fix when tf cannot run)."""
    return listed([kind.name for kind in POSE_SOURCES.values() if not kind.tf])
