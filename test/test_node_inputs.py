"""Inputs that do not come, over real DDS: a camera or a pose source with nothing on its topic, a topic whose
publishers have another type, and TF that gives the camera frames no pose. The node says so once in its
log, and on every /diagnostics message, naming the topic and where the expected type IS published."""

from __future__ import annotations

import threading
import time

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from node_helpers import Harness, gated_node, wait_for
from rclpy.qos import QoSProfile
from sensor_msgs.msg import CompressedImage, Image
from test_pose_source import needs_tf2_msgs

from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.ros.messages import odometry_message, rgb_image_message

# Short thresholds for the tests; the waits below are generous (a loaded machine).
FAST = {"camera.warn_after_s": 1.0, "pose.warn_after_s": 1.0, "camera.qos": "reliable"}


class Stream:
    """Camera frames (and, while ``odometry`` is set, odometry at the same stamps) at ~10 Hz from a thread,
    until :meth:`close`."""

    def __init__(self, harness: Harness, odometry_topic: str = "") -> None:
        self.harness = harness
        client = harness.client
        self.odometry = client.create_publisher(Odometry, odometry_topic, 10) if odometry_topic else None
        self.with_odometry = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        image = np.zeros((120, 160, 3), np.uint8)
        stamp = self.harness.next_ns
        while not self._stop.is_set():
            stamp += NS_PER_S // 10
            if self.odometry is not None and self.with_odometry.is_set():
                self.odometry.publish(odometry_message(stamp, Pose()))
            self.harness.camera.publish(rgb_image_message(image, stamp, "camera"))
            time.sleep(0.1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


def ticks(harness: Harness, count: int) -> None:
    """Wait for ``count`` more /diagnostics messages of the node."""
    seen = len(harness.diagnostics)
    assert wait_for(lambda: len(harness.diagnostics) >= seen + count)


def test_a_camera_without_frames_is_warned_once_naming_the_image_topics_published(
    ros_context, gated_pipeline, capfd
):
    """The camera is on camera/image_raw and front/image_raw; the node listens to camera/color/image_raw."""
    overrides = {**FAST, "pose.topic": "", "camera.topic": "camera/color/image_raw"}
    node = gated_node(ros_context, gated_pipeline, "blind", **overrides)
    harness = Harness(ros_context, node, "blind")  # its camera publisher: /blind/camera/image_raw
    elsewhere = harness.client.create_publisher(Image, "/blind/front/image_raw", 10)
    try:
        missing = "no camera frames on /blind/camera/color/image_raw"
        assert wait_for(lambda: missing in harness.last_status()[1])
        level, message, values = harness.last_status()
        assert level == DiagnosticStatus.WARN and message.startswith(values["inputs.camera"])
        assert "nothing publishes there" in message
        assert "Image is published on /blind/camera/image_raw, /blind/front/image_raw" in message
        assert "/blind/embodied_r/keyframes" not in message  # the node's own Image publisher is no camera
        assert values["inputs.poses"] == "off"
        ticks(harness, 4)
        logged = capfd.readouterr().err
        assert logged.count(missing) == 1, logged  # once, not per tick
    finally:
        elsewhere.destroy()
        harness.close()


def test_a_missing_pose_source_is_warned_naming_the_published_odometry_and_again_after_a_recovery(
    ros_context, gated_pipeline, capfd
):
    """pose.source odometry on ``odom`` and nothing there, while the robot's odometry is on another topic:
    a WARN naming both (once), an INFO when poses come, and a WARN again when they stop again."""
    node = gated_node(ros_context, gated_pipeline, "lost", **FAST, **{"pose.topic": "odom"})
    harness = Harness(ros_context, node, "lost")
    other = harness.client.create_publisher(Odometry, "/lost/robot/odom", 10)
    stream = Stream(harness, "/lost/odom")
    try:
        assert wait_for(lambda: "no poses on /lost/odom" in harness.last_status()[2]["inputs.poses"])
        level, message, values = harness.last_status()
        assert level == DiagnosticStatus.WARN and "no poses on /lost/odom" in message
        assert "1 publisher there sent nothing usable" in values["inputs.poses"]  # the stream's, silent
        assert "nav_msgs/msg/Odometry is published on /lost/robot/odom" in values["inputs.poses"]
        assert values["inputs.camera"] == "ok"
        ticks(harness, 3)
        assert capfd.readouterr().err.count("no poses on /lost/odom") == 1

        stream.with_odometry.set()  # poses come: the warning clears and says so
        assert wait_for(lambda: harness.last_status()[2]["inputs.poses"] == "ok")
        assert int(harness.last_status()[2]["pose_samples_held"]) > 0
        stream.with_odometry.clear()  # and stop again: warned again
        assert wait_for(lambda: "no poses on /lost/odom" in harness.last_status()[2]["inputs.poses"])
        ticks(harness, 2)
        logged = capfd.readouterr().err
        assert "poses on /lost/odom again" in logged and logged.count("no poses on /lost/odom") == 1
    finally:
        stream.close()
        other.destroy()
        harness.close()


def test_topics_whose_publishers_have_another_type_are_warned_with_the_setting_that_takes_them(
    ros_context, gated_pipeline, capfd
):
    """CompressedImage where the node takes Image, PoseStamped where it takes Odometry: DDS never matches
    them; the node says so at once, with camera.compressed and pose.source as the fixes."""
    node = gated_node(
        ros_context, gated_pipeline, "mistyped", **FAST, **{"camera.topic": "jpeg", "pose.topic": "odom"}
    )
    harness = Harness(ros_context, node, "mistyped")
    # Another participant (one refuses a second type on a topic it knows), as a robot's drivers are.
    robot_context = rclpy.Context()
    rclpy.init(context=robot_context)
    robot = rclpy.create_node("drivers", context=robot_context)
    jpeg = robot.create_publisher(CompressedImage, "/mistyped/jpeg", QoSProfile(depth=5))
    poses = robot.create_publisher(PoseStamped, "/mistyped/odom", QoSProfile(depth=5))
    try:
        assert wait_for(lambda: "is published as" in harness.last_status()[2]["inputs.poses"])
        values = harness.last_status()[2]
        assert "/mistyped/odom is published as geometry_msgs/msg/PoseStamped (1 publisher)" in values[
            "inputs.poses"
        ]
        assert "not nav_msgs/msg/Odometry" in values["inputs.poses"]
        assert "set pose.source pose" in values["inputs.poses"]
        assert wait_for(lambda: "is published as" in harness.last_status()[2]["inputs.camera"])
        camera = harness.last_status()[2]["inputs.camera"]
        assert "/mistyped/jpeg is published as sensor_msgs/msg/CompressedImage" in camera
        assert "set camera.compressed true" in camera
        assert harness.last_status()[0] == DiagnosticStatus.WARN
        logged = capfd.readouterr().err
        assert "set pose.source pose" in logged and "set camera.compressed true" in logged
    finally:
        jpeg.destroy()
        poses.destroy()
        robot.destroy_node()
        rclpy.try_shutdown(context=robot_context)
        harness.close()


@needs_tf2_msgs
def test_tf_without_the_camera_frame_counts_frames_kept_without_a_pose_not_dropped(
    ros_context, gated_pipeline
):
    """pose.source tf with no transform to the camera: every frame is kept (frames_without_pose counts
    them, frames_dropped does not), and after pose.warn_after_s the node names the TF topics it listens to
    and the namespaced ones that are published (a missing remap)."""
    from tf2_msgs.msg import TFMessage

    node = gated_node(ros_context, gated_pipeline, "untransformed", **FAST, **{"pose.source": "tf"})
    harness = Harness(ros_context, node, "untransformed")
    namespaced = harness.client.create_publisher(TFMessage, "/untransformed/tf", 10)
    stream = Stream(harness)
    try:
        assert wait_for(lambda: node.stats.frames_without_pose >= 5)
        assert wait_for(lambda: "no camera poses from TF" in harness.last_status()[2]["inputs.poses"])
        values = harness.last_status()[2]
        assert "on /tf, /tf_static" in values["inputs.poses"]
        assert "tf2_msgs/msg/TFMessage is published on /untransformed/tf" in values["inputs.poses"]
        assert "check that /tf and /tf_static connect odom" in values["inputs.poses"]  # the lookup's reason
        assert int(values["frames_without_pose"]) >= 5
        assert "frames_dropped.no_tf_pose" not in values and int(values["frames_dropped"]) == 0
        assert node.stats.dropped == {} and int(values["frames_stored"]) > 0  # kept, without a pose
    finally:
        stream.close()
        namespaced.destroy()
        harness.close()
