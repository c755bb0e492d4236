"""Every pose source of the node (embodied_r_ros/ros/pose_source.py) over real DDS, in an isolated domain:
nav_msgs/Odometry, geometry_msgs/PoseStamped and PoseWithCovarianceStamped on a topic, and TF (a dynamic
odom -> base_link on /tf, a static base_link -> camera_link on /tf_static, as tf2_msgs/TFMessage: ROS's
package where installed, else the same definition that `make build` builds from interfaces/tf2_msgs).

A publisher node and a host node (on which the PoseSource under test subscribes) spin in one executor; the
camera poses that come out are checked against numbers worked out by hand, with the camera offset applied.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from dataclasses import replace

import pytest
import rclpy
from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped, TransformStamped
from nav_msgs.msg import Odometry
from node_helpers import Spinning, wait_for
from rclpy.qos import DurabilityPolicy, QoSProfile

from embodied_r_ros.config import ConfigError
from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.node_config import CameraOffsetConfig, NodeConfig, PoseConfig
from embodied_r_ros.ros.messages import ns_to_time
from embodied_r_ros.ros.params import config_from_parameters
from embodied_r_ros.ros.pose_source import PoseProblem, PoseSource, pose_source_problem
from embodied_r_ros.ros.tf_listener import tf_messages_problem

S = NS_PER_S
S45 = math.sqrt(0.5)
S15, C15 = math.sin(math.radians(15)), math.cos(math.radians(15))
YAW_90 = (0.0, 0.0, S45, S45)
# The camera 20 cm ahead of the body and 10 cm up, pitched down 30 deg: qy = sin 15 deg, qw = cos 15 deg.
OFFSET = CameraOffsetConfig(x=0.2, y=0.0, z=0.1, qx=0.0, qy=S15, qz=0.0, qw=C15)
# A body at (1, 2, 0) facing +y carries that camera to (1, 2.2, 0.1); yaw 90 * pitch 30 expanded by hand:
# (-s45 s15, c45 s15, s45 c15, c45 c15).
BODY = Pose((1.0, 2.0, 0.0), YAW_90)
CAMERA = Pose((1.0, 2.2, 0.1), (-0.1830127, 0.1830127, 0.6830127, 0.6830127))
# The type hash of ROS's tf2_msgs/msg/TFMessage (Jazzy, Kilted): the same type travels on /tf.
TF_MESSAGE_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"

# make build builds tf2_msgs where ROS does not bring it; in CI (make test) a missing one is a failure.
needs_tf2_msgs = pytest.mark.skipif(
    bool(tf_messages_problem()) and not os.environ.get("CI"),
    reason="tf2_msgs is not built: make build (interfaces/tf2_msgs), then source install/setup.bash",
)


def assert_pose(actual: Pose, expected: Pose, tol: float = 1e-6) -> None:
    assert actual.position == pytest.approx(expected.position, abs=tol)
    assert actual.orientation == pytest.approx(expected.orientation, abs=tol)


class Received:
    """What a PoseSource reports: poses by stamp, problems in order."""

    def __init__(self) -> None:
        self.poses: list[tuple[int, Pose]] = []
        self.problems: list[PoseProblem] = []
        self._lock = threading.Lock()

    def pose(self, stamp_ns: int, pose: Pose) -> None:
        with self._lock:
            self.poses.append((stamp_ns, pose))

    def problem(self, problem: PoseProblem) -> None:
        with self._lock:
            self.problems.append(problem)


@pytest.fixture(scope="module")
def ros(ros_domain):
    """A publisher node and a host node spinning in one executor, in the module's DDS domain."""
    context = rclpy.Context()
    rclpy.init(context=context)
    publisher = rclpy.create_node("pose_publisher", context=context)
    host = rclpy.create_node("pose_host", context=context)
    spinning = Spinning(context, publisher, host, threads=4)
    yield publisher, host
    spinning.close()
    publisher.destroy_node()
    host.destroy_node()
    rclpy.try_shutdown(context=context)


def start_source(host, config: PoseConfig, own_threads: bool = False) -> tuple[PoseSource, Received]:
    received = Received()
    return PoseSource(host, config, None, received.pose, received.problem, own_threads), received


def input_threads(host) -> set[str]:
    """The names of the host's input threads alive (input_thread.subscribe_input with own_thread)."""
    return {t.name for t in threading.enumerate() if t.name.startswith(f"{host.get_name()}_")}


def body_message(kind: type, stamp_ns: int, pose: Pose):
    message = kind()
    message.header.stamp = ns_to_time(stamp_ns)
    message.header.frame_id = "odom"
    target = message.pose if kind is PoseStamped else message.pose.pose
    target.position.x, target.position.y, target.position.z = pose.position
    q = target.orientation
    q.x, q.y, q.z, q.w = pose.orientation
    return message


@pytest.mark.parametrize("own_threads", [False, True], ids=["executor", "own_thread"])
@pytest.mark.parametrize(
    ("source", "kind"),
    [("odometry", Odometry), ("pose", PoseStamped), ("pose_with_covariance", PoseWithCovarianceStamped)],
)
def test_message_sources_give_camera_poses_and_drop_bad_messages(ros, source, kind, own_threads):
    publisher_node, host = ros
    topic = f"/robot/{source}"
    config = PoseConfig(source=source, topic=topic, camera_offset=OFFSET)
    pose_source, received = start_source(host, config, own_threads)
    publisher = publisher_node.create_publisher(kind, topic, 10)
    try:
        # Served by a thread of its own (the node's choice), or by the executor: the same behaviour.
        assert input_threads(host) == ({"pose_host_poses"} if own_threads else set())
        assert pose_source.description == f"{kind.__module__.split('.')[0]}/{kind.__name__} on {topic}"
        assert wait_for(lambda: publisher.get_subscription_count() > 0)
        publisher.publish(body_message(kind, 5 * S, BODY))
        publisher.publish(body_message(kind, 6 * S, Pose((math.nan, 0.0, 0.0))))  # dropped, with why
        publisher.publish(body_message(kind, 7 * S, Pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))))
        publisher.publish(body_message(kind, 8 * S, Pose()))
        assert wait_for(lambda: len(received.poses) >= 2 and len(received.problems) >= 2)
        assert [stamp for stamp, _ in received.poses] == [5 * S, 8 * S]
        assert_pose(received.poses[0][1], CAMERA)
        assert_pose(received.poses[1][1], Pose((0.2, 0.0, 0.1), (0.0, S15, 0.0, C15)))  # the offset alone
        assert [p.kind for p in received.problems] == [f"bad_{source}"] * 2
        assert received.problems[0].text.startswith(
            f"dropped a {config_type_name(source)} message on {topic}"
        )
        assert "non-finite pose" in received.problems[0].text
        assert "zero length" in received.problems[1].text
    finally:
        pose_source.destroy()
        publisher_node.destroy_publisher(publisher)
    # Destroyed: the subscription is gone (the lifecycle node makes and destroys one per activation), and
    # its thread with it.
    assert wait_for(
        lambda: host.count_publishers(topic) == 0 and not host.get_subscriptions_info_by_topic(topic)
    )
    assert input_threads(host) == set()


def config_type_name(source: str) -> str:
    return {
        "odometry": "nav_msgs/Odometry",
        "pose": "geometry_msgs/PoseStamped",
        "pose_with_covariance": "geometry_msgs/PoseWithCovarianceStamped",
    }[source]


def transform(parent: str, child: str, stamp_ns: int, pose: Pose) -> TransformStamped:
    message = TransformStamped()
    message.header.stamp = ns_to_time(stamp_ns)
    message.header.frame_id = parent
    message.child_frame_id = child
    t, q = message.transform.translation, message.transform.rotation
    t.x, t.y, t.z = pose.position
    q.x, q.y, q.z, q.w = pose.orientation
    return message


@needs_tf2_msgs
def test_tf_gives_the_camera_pose_at_each_frame_stamp(ros):
    from tf2_msgs.msg import TFMessage

    publisher_node, host = ros
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    static_publisher = publisher_node.create_publisher(TFMessage, "/tf_static", latched)
    tf_publisher = publisher_node.create_publisher(TFMessage, "/tf", 100)
    # The static camera mount is published once, before the listener exists (robot_state_publisher does
    # so at start): transient local brings it to the late subscriber.
    camera_on_base = Pose(OFFSET.pose().position, OFFSET.pose().orientation)
    static_publisher.publish(TFMessage(transforms=[transform("base_link", "camera_link", 0, camera_on_base)]))
    # One source takes the camera frame from the images; another names base_link and carries the same mount
    # as pose.camera_offset: both give the same camera pose. The second takes /tf and /tf_static on threads
    # of its own (as the node does), the first on the executor.
    by_image_frame, from_images = start_source(host, PoseConfig(source="tf", max_gap_s=0.5))
    by_offset, from_offset = start_source(
        host,
        PoseConfig(source="tf", camera_frame="base_link", camera_offset=OFFSET, max_gap_s=0.5),
        own_threads=True,
    )
    try:
        assert input_threads(host) == {"pose_host_tf", "pose_host_tf_static"}
        assert by_image_frame.description == "TF odom -> the images' frame from /tf and /tf_static"
        assert wait_for(lambda: tf_publisher.get_subscription_count() >= 2)
        (info,) = {(i.topic_type, str(i.topic_type_hash)) for i in host.get_publishers_info_by_topic("/tf")}
        assert info == ("tf2_msgs/msg/TFMessage", TF_MESSAGE_HASH)
        # The camera frame at 10.5 s arrives before the transforms around it: it waits for them.
        for source in (by_image_frame, by_offset):
            source.frame_seen(10 * S + S // 2, "camera_link")
        tf_publisher.publish(TFMessage(transforms=[transform("odom", "base_link", 10 * S, Pose())]))
        time.sleep(0.3)
        assert from_images.poses == [] and from_offset.poses == []
        tf_publisher.publish(TFMessage(transforms=[transform("odom", "base_link", 11 * S, BODY)]))
        assert wait_for(lambda: len(from_images.poses) == 1 and len(from_offset.poses) == 1)
        # At 10.5 s the base is halfway from the origin to (1, 2, 0), turned 45 deg left; the camera 0.2 m
        # ahead of it and 0.1 m up, pitched down 30 deg: yaw 45 * pitch 30 =
        # (-s22.5 s15, c22.5 s15, s22.5 c15, c22.5 c15).
        s225, c225 = math.sin(math.radians(22.5)), math.cos(math.radians(22.5))
        expected = Pose(
            (0.5 + 0.2 * S45, 1.0 + 0.2 * S45, 0.1), (-s225 * S15, c225 * S15, s225 * C15, c225 * C15)
        )
        for received in (from_images, from_offset):
            stamp, pose = received.poses[0]
            assert stamp == 10 * S + S // 2
            assert_pose(pose, expected)
        # A frame at a transform's stamp: exactly the body composed with the mount (the messages' CAMERA).
        by_image_frame.frame_seen(11 * S, "camera_link")
        assert wait_for(lambda: len(from_images.poses) == 2)
        assert_pose(from_images.poses[1][1], CAMERA)
        # A frame long after the last transform settles once the camera is max_gap_s further: no pose, why.
        by_image_frame.frame_seen(13 * S, "camera_link")
        by_image_frame.frame_seen(13 * S + 6 * S // 10, "camera_link")
        assert wait_for(lambda: len(from_images.problems) == 1)
        (problem,) = from_images.problems
        assert problem.kind == "no_tf_pose"
        assert problem.text.startswith(
            "no pose for the camera frame stamped 13.000: transform odom -> base_link"
        )
        # A bad transform is dropped with a reason; images without a frame_id cannot be placed.
        zero = Pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))
        tf_publisher.publish(TFMessage(transforms=[transform("odom", "base_link", 14 * S, zero)]))
        assert wait_for(lambda: any(p.kind == "bad_tf" for p in from_images.problems))
        bad = next(p for p in from_images.problems if p.kind == "bad_tf")
        assert bad.text == (
            "dropped a transform on /tf: transform odom -> base_link: its orientation quaternion has zero "
            "length; check its publisher"
        )
        by_image_frame.frame_seen(15 * S, "")
        assert from_images.problems[-1] == PoseProblem(
            "no_tf_pose",
            "the camera images carry no frame_id, so TF cannot place them: set pose.camera_frame",
        )
    finally:
        by_image_frame.destroy()
        by_offset.destroy()
        publisher_node.destroy_publisher(static_publisher)
        publisher_node.destroy_publisher(tf_publisher)
    assert input_threads(host) == set()  # destroyed: the threads are joined


def test_tf_without_tf2_msgs_is_refused_with_the_fix_and_other_sources_still_start(ros, monkeypatch):
    _, host = ros
    # As on a machine without tf2_msgs: the import fails.
    monkeypatch.setitem(sys.modules, "tf2_msgs", None)
    monkeypatch.setitem(sys.modules, "tf2_msgs.msg", None)
    problem = tf_messages_problem()
    assert "pose.source tf needs the ROS package tf2_msgs" in problem
    assert "apt install ros-$ROS_DISTRO-tf2-msgs" in problem and "`make build`" in problem
    tf_config = PoseConfig(source="tf")
    assert pose_source_problem(tf_config) == problem
    with pytest.raises(ConfigError, match="needs the ROS package tf2_msgs"):
        PoseSource(host, tf_config, None, lambda *_: None, lambda _: None)
    for config in (PoseConfig(), PoseConfig(source="pose", topic="/drone/pose"), PoseConfig(source="none")):
        assert pose_source_problem(config) == ""
        source = PoseSource(host, config, None, lambda *_: None, lambda _: None)
        source.frame_seen(1, "camera")  # nothing to do without tf
        source.destroy()


def test_pose_parameters_choose_the_source_and_check_the_offset(ros):
    _, host = ros
    config = config_from_parameters({"pose.source": "pose_with_covariance", "pose.topic": "/drone/pose"}).pose
    assert (config.source, config.topic, config.active_source) == (
        "pose_with_covariance",
        "/drone/pose",
        "pose_with_covariance",
    )
    # An empty topic turns a message source off (odometry_topic:=none, --odometry-topic ''), as before.
    off = replace(NodeConfig().pose, topic="")
    assert off.active_source == "none"
    source = PoseSource(host, off, None, lambda *_: None, lambda _: None)
    assert source.description == "off"
    source.destroy()
    assert NodeConfig().pose == PoseConfig(source="odometry", topic="odom", max_gap_s=0.5)
    assert NodeConfig().pose.camera_offset.pose() == Pose()
    with pytest.raises(
        ConfigError,
        match="parameter pose.source must be one of odometry, pose, pose_with_covariance, tf, none, got 'g",
    ):
        config_from_parameters({"pose.source": "gps"})
    with pytest.raises(
        ConfigError, match=r"must be a unit quaternion, got length 0\.0000; \(0, 0, 0, 1\) is no rotation"
    ):
        config_from_parameters({"pose.camera_offset.qw": 0.0})
    # Hand-typed numbers within 1 % of unit length are normalised.
    nearly = config_from_parameters({"pose.camera_offset.qz": 0.707, "pose.camera_offset.qw": 0.707}).pose
    assert nearly.camera_offset.pose().orientation == pytest.approx((0.0, 0.0, S45, S45))
    with pytest.raises(ConfigError, match="pose.odom_frame must not be empty with pose.source tf"):
        config_from_parameters({"pose.source": "tf", "pose.odom_frame": " "})
