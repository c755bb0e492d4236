"""Between ROS messages and the core's types: stamps, transforms, answers and key-frame images (the pose
messages of each pose source are read by the registry, :mod:`embodied_r_ros.poses.pose_sources`).

Used by the node, ``embodied-r ask`` and the report. Reading functions are duck-typed (rclpy messages and
rosbags' objects both work); building functions return rclpy messages.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..frames import NS_PER_S, Pose
from ..image_conversion import rgb8_fields
from ..poses.transforms import (
    pose_problem as pose_problem,  # re-exported: the readers' check lives in the core
)
from ..reasoning.answers import Answer


def stamp_to_ns(stamp: Any) -> int:
    """A builtin_interfaces/Time-like stamp (``sec``, ``nanosec``) in integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def ns_to_time(stamp_ns: int) -> Any:
    """Integer nanoseconds as a builtin_interfaces/Time."""
    from builtin_interfaces.msg import Time

    sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
    return Time(sec=sec, nanosec=nanosec)


def transform_pose(transform: Any) -> Pose:
    """A geometry_msgs/Transform-like value (``translation``, ``rotation``: the child frame in the parent)
    as a core :class:`Pose`."""
    t, q = transform.translation, transform.rotation
    return Pose(
        position=(float(t.x), float(t.y), float(t.z)),
        orientation=(float(q.x), float(q.y), float(q.z), float(q.w)),
    )


def odometry_message(stamp_ns: int, pose: Pose, frame_id: str = "odom") -> Any:
    """A nav_msgs/Odometry stamped ``stamp_ns`` carrying ``pose`` (the body in ``frame_id``): what a robot's
    odometry publishes, for the programs that feed the node (benchmarks, tests)."""
    from nav_msgs.msg import Odometry

    message = Odometry()
    message.header.stamp = ns_to_time(stamp_ns)
    message.header.frame_id = frame_id
    p, q = message.pose.pose.position, message.pose.pose.orientation
    p.x, p.y, p.z = pose.position
    q.x, q.y, q.z, q.w = pose.orientation
    return message


def answer_to_message(
    answer: Answer,
    query_id: str,
    stamp_ns: int,
    frame_id: str = "",
    intervals: Sequence[tuple[int, int]] = (),
) -> Any:
    """The SpatialAnswer of a core :class:`Answer` (NaN value and empty choice when there is none) and the
    ``intervals`` of camera time it was made from; its ``message`` is set by the node when the answer goes
    out."""
    from embodied_r_ros.msg import SpatialAnswer

    message = SpatialAnswer(
        query_id=query_id,
        success=True,
        question=answer.question,
        options=list(answer.options),
        answer=answer.text,
        choice=answer.choice or "",
        value=math.nan if answer.value is None else float(answer.value),
        reasoning=answer.think,
        well_formed=bool(answer.well_formed),
        completion=answer.completion,
        notes=list(answer.notes),
        interval_starts=[ns_to_time(start) for start, _ in intervals],
        interval_ends=[ns_to_time(end) for _, end in intervals],
        keyframe_stamps=[ns_to_time(s) for s in answer.keyframe_stamps_ns],
        keyframe_descriptions=[d.as_text() for d in answer.descriptions],
        perception_seconds=float(answer.perception_s),
        reasoning_seconds=float(answer.reasoning_s),
    )
    message.header.stamp = ns_to_time(stamp_ns)
    message.header.frame_id = frame_id
    return message


def failure_message(query_id: str, question: str, options: Sequence[str], reason: str, stamp_ns: int) -> Any:
    """The SpatialAnswer that tells a ~/question asker why its question got no answer."""
    from embodied_r_ros.msg import SpatialAnswer

    message = SpatialAnswer(
        query_id=query_id, success=False, message=reason, question=question, options=list(options)
    )
    message.value = math.nan
    message.header.stamp = ns_to_time(stamp_ns)
    return message


def keyframe_stamps_ns(message: Any) -> list[int]:
    """The key-frame stamps of a SpatialAnswer-like message, in nanoseconds."""
    return [stamp_to_ns(s) for s in message.keyframe_stamps]


def rgb_image_message(image: np.ndarray, stamp_ns: int, frame_id: str = "") -> Any:
    """A sensor_msgs/Image (rgb8) holding ``image``, stamped ``stamp_ns``."""
    from sensor_msgs.msg import Image

    message = Image(**rgb8_fields(image))
    message.header.stamp = ns_to_time(stamp_ns)
    message.header.frame_id = frame_id
    return message


def format_stamps(stamps_ns: Sequence[int]) -> str:
    """Stamps as "sec.nanosec" text, comma-separated (for printing)."""
    return ", ".join(f"{s // NS_PER_S}.{s % NS_PER_S:09d}" for s in stamps_ns)
