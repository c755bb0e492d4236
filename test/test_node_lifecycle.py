"""The node as a robot runs it, over real DDS: a managed (lifecycle) node driven through its lifecycle
services (questions to a node that is not active, questions queued at cleanup, the shutdown transition),
sim time without and with /clock, and a camera whose QoS the subscription cannot match."""

from __future__ import annotations

import gc
import subprocess
import time
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticStatus
from embodied_r_ros.msg import SpatialQuestion
from lifecycle_msgs.srv import ChangeState
from node_helpers import (
    WAIT_S,
    Harness,
    Spinning,
    embodied_r,
    gated_node,
    killed,
    node_process,
    result_of,
    wait_for,
)
from rclpy.lifecycle import LifecycleNode
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from test_pose_source import needs_tf2_msgs, transform

from embodied_r_ros.cli.parts import perceivers
from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.ros.messages import ns_to_time, rgb_image_message, stamp_to_ns
from embodied_r_ros.ros.node import EmbodiedRNode
from embodied_r_ros.ros.spatial_client import NodeNotFoundError, SpatialClient
from embodied_r_ros.testing.synthetic_clip import synthetic_clip


def tiny_model_parameters(tiny_models_dir: Path, **extra) -> list[Parameter]:
    values = {
        "vlm.model": str(tiny_models_dir / "vlm"),
        "lm.model": str(tiny_models_dir / "lm"),
        "vlm.transformers.device": "cpu",
        "lm.transformers.device": "cpu",
        "vlm.max_new_tokens": 8,
        "lm.max_new_tokens": 8,
        "pose.topic": "",
        "camera.qos": "reliable",  # every frame the test publishes arrives
        "camera.qos_depth": 100,
        "query.pre_encode_keyframes": False,
        "diagnostics_period_s": 0.2,
        **extra,
    }
    return [Parameter(name, value=value) for name, value in values.items()]


def test_a_managed_node_through_the_lifecycle_services(ros_context, tiny_models_dir):
    """configure loads the models; activate takes frames and questions; deactivate stops both; cleanup frees
    the models; configure + activate bring it back. ~/ask answers in every state, naming it."""
    node = EmbodiedRNode(
        perceivers=perceivers(),
        context=ros_context,
        namespace="managed",
        parameter_overrides=tiny_model_parameters(tiny_models_dir, autostart=False),
    )
    harness = Harness(ros_context, node, "managed")
    try:
        assert harness.state() == "unconfigured" and node.pipeline is None
        unconfigured = harness.ask()  # ~/ask in every state: the node says which and what to do
        assert not unconfigured.success and "/managed/embodied_r is unconfigured" in unconfigured.message
        assert "ros2 lifecycle set /managed/embodied_r configure" in unconfigured.message
        level, message, values = harness.last_status()  # /diagnostics in every state
        assert level == DiagnosticStatus.WARN and message.startswith("unconfigured")
        assert values["lifecycle_state"] == "unconfigured" and values["lm"].endswith("not loaded")

        assert harness.transition("configure") and harness.state() == "inactive"
        backends = [node.pipeline.perceiver.backend, node.pipeline.reasoner.backend]
        assert all(b.model is not None for b in backends)
        # What the models brought in is frozen: full collections (camera stalls) skip it.
        assert gc.get_freeze_count() > 100_000
        assert float(harness.last_status()[2]["gc_pause_max_ms"]) >= 0.0
        inactive = harness.ask()
        assert not inactive.success and "inactive" in inactive.message and "activate" in inactive.message
        assert harness.camera.get_subscription_count() == 0  # not taking frames yet

        assert harness.transition("activate") and harness.state() == "active"
        assert wait_for(lambda: harness.camera.get_subscription_count() == 1)
        harness.feed()
        answered = harness.ask()
        assert answered.success and answered.answer.query_id and answered.answer.completion

        assert harness.transition("deactivate") and harness.state() == "inactive"
        assert wait_for(lambda: harness.camera.get_subscription_count() == 0)
        refused = harness.ask()
        assert not refused.success and "inactive" in refused.message

        assert harness.transition("cleanup") and harness.state() == "unconfigured"
        assert node.pipeline is None and all(b.model is None for b in backends)  # the models are freed
        assert gc.get_freeze_count() == 0  # and may be collected
        after_cleanup = harness.ask()
        assert not after_cleanup.success and "unconfigured" in after_cleanup.message

        assert harness.transition("configure") and harness.transition("activate")
        assert wait_for(lambda: harness.camera.get_subscription_count() == 1)
        harness.feed()
        again = harness.ask()
        assert again.success and again.answer.query_id != answered.answer.query_id  # ids stay unique
    finally:
        harness.close()


def test_a_failed_configure_names_the_model_and_the_node_stays_up(ros_context, tiny_models_dir, tmp_path):
    missing = tmp_path / "no-such-model"
    node = EmbodiedRNode(
        perceivers=perceivers(),
        context=ros_context,
        namespace="unloadable",
        parameter_overrides=tiny_model_parameters(
            tiny_models_dir, autostart=False, **{"lm.model": str(missing)}
        ),
    )
    harness = Harness(ros_context, node, "unloadable")
    try:
        assert not harness.transition("configure") and harness.state() == "unconfigured"
        assert wait_for(lambda: "configure failed" in harness.last_status()[1])
        assert str(missing) in harness.last_status()[1]
    finally:
        harness.close()


def test_sim_time_without_clock_then_with_clock(ros_context, gated_pipeline, capfd):
    """Under use_sim_time with no /clock, /diagnostics still comes (wall-time timer) and says so, and answers
    are stamped with camera time; once /clock runs, answers carry its time."""
    overrides = {"pose.topic": "", "camera.qos": "reliable", "query.pre_encode_keyframes": False}
    node = gated_node(ros_context, gated_pipeline, "simulated", **overrides, use_sim_time=True)
    harness = Harness(ros_context, node, "simulated")
    clock = harness.client.create_publisher(Clock, "/clock", 10)
    try:
        assert node.get_clock().now().nanoseconds == 0
        assert wait_for(lambda: len(harness.diagnostics) >= 2, timeout=10.0)  # the timer runs on wall time
        level, message, values = harness.last_status()
        assert level == DiagnosticStatus.WARN and "no /clock message has come" in message
        assert values["use_sim_time"] == "true"
        assert "no /clock message has come" in capfd.readouterr().err  # and in the log
        stamps = harness.feed()
        early = harness.ask()
        assert early.success
        assert stamp_to_ns(early.answer.header.stamp) == stamp_to_ns(early.answer.keyframe_stamps[-1])
        assert stamp_to_ns(early.answer.header.stamp) in stamps

        sim_ns = 1_800_000_000 * NS_PER_S
        assert wait_for(lambda: clock.get_subscription_count() > 0)
        clock.publish(Clock(clock=ns_to_time(sim_ns)))
        assert wait_for(lambda: node.get_clock().now().nanoseconds == sim_ns)
        late = harness.ask()
        assert late.success and stamp_to_ns(late.answer.header.stamp) == sim_ns
        count = len(harness.diagnostics)
        assert wait_for(lambda: len(harness.diagnostics) > count + 1)
        assert "clock" not in harness.last_status()[1]
    finally:
        harness.close()


def test_a_camera_qos_mismatch_is_reported_with_the_fix(ros_context, gated_pipeline, capfd):
    """A best-effort camera and camera.qos=reliable: no frame can come; the node says why and how to fix it
    in its log, its diagnostics and the answer to a question."""
    overrides = {"camera.qos": "reliable", "pose.topic": ""}
    node = gated_node(ros_context, gated_pipeline, "mismatched", **overrides)
    best_effort = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    harness = Harness(ros_context, node, "mismatched", camera_qos=best_effort)
    try:
        assert wait_for(lambda: node.stats.qos_incompatible >= 1)
        assert wait_for(lambda: harness.last_status()[2].get("camera_qos_incompatible_publishers") == "1")
        level, message, _ = harness.last_status()
        assert level == DiagnosticStatus.ERROR and "camera.qos" in message and "RELIABILITY" in message
        reply = harness.ask()
        assert not reply.success and "incompatible with camera.qos=reliable" in reply.message
        logged = capfd.readouterr().err
        assert "offers a QoS incompatible with camera.qos=reliable" in logged
        assert "set camera.qos to sensor_data" in logged
    finally:
        harness.close()


def test_autostart_makes_an_active_node_and_cleanup_leaves_a_given_pipeline_open(ros_context, gated_pipeline):
    pipeline = gated_pipeline[0]
    node = gated_node(ros_context, gated_pipeline, "autostarted")
    try:
        assert node.lifecycle_state == "active" and node.pipeline is pipeline
    finally:
        node.destroy_node()
    assert pipeline.reasoner.backend.model is not None  # the caller's pipeline: theirs to close


@needs_tf2_msgs
def test_a_node_on_tf_gets_its_key_frames_poses_from_the_tree(ros_context, gated_pipeline):
    """pose.source tf: odom -> base_link on /tf, a static base_link -> camera on /tf_static; the node looks
    the camera up at each frame's stamp, so the actions between key frames come from the robot's motion."""
    from tf2_msgs.msg import TFMessage

    node = gated_node(
        ros_context,
        gated_pipeline,
        "ground_robot",
        **{"pose.source": "tf", "camera.qos": "reliable", "camera.qos_depth": 100},
    )
    harness = Harness(ros_context, node, "ground_robot")
    latched = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    static = harness.client.create_publisher(TFMessage, "/tf_static", latched)
    dynamic = harness.client.create_publisher(TFMessage, "/tf", 100)
    static.publish(TFMessage(transforms=[transform("base_link", "camera", 0, Pose())]))
    try:
        assert wait_for(lambda: dynamic.get_subscription_count() > 0)
        clip = synthetic_clip(seconds=4.0, fps=5.0, size=(160, 120), start_ns=harness.next_ns)
        for frame in clip.frames:
            moved = transform("odom", "base_link", frame.stamp_ns, frame.pose)
            dynamic.publish(TFMessage(transforms=[moved]))
            harness.camera.publish(rgb_image_message(frame.image, frame.stamp_ns, "camera"))
            time.sleep(0.01)
        # one more transform past the last frame: TF lookups wait for the transforms around a stamp
        last = clip.frames[-1]
        dynamic.publish(
            TFMessage(transforms=[transform("odom", "base_link", last.stamp_ns + NS_PER_S // 10, last.pose)])
        )
        assert wait_for(lambda: node.history.poses.received >= len(clip.frames) - 1)
        reply = harness.ask("Which way did I turn?")
        assert reply.success, reply.message
        assert all(d.startswith("After I ") for d in reply.answer.keyframe_descriptions[1:])
    finally:
        harness.close()


def test_an_unconfigured_or_inactive_node_is_told_apart_from_an_absent_one(ros_context, gated_pipeline):
    """Every asker (service, action, topic; SpatialClient and `embodied-r ask`) hears the node's state and
    the transition to make; a managed node without ~/ask is named with its state; an absent one is absent."""
    node = gated_node(ros_context, gated_pipeline, "dormant", autostart=False)
    harness = Harness(ros_context, node, "dormant")
    bare = LifecycleNode("bare", context=ros_context)  # a managed node without the question transports
    spinning = Spinning(ros_context, bare)
    client = SpatialClient("/dormant/embodied_r")
    try:
        fix = "ros2 lifecycle set /dormant/embodied_r configure, then activate"
        client.wait_for_node(WAIT_S)
        for transport in ({}, {"use_action": True}, {"use_topic": True}):
            reply = client.ask("Which way did I turn?", timeout_s=WAIT_S, **transport)
            assert not reply.success and "the node /dormant/embodied_r is unconfigured" in reply.message
            assert fix in reply.message, (transport, reply.message)
        asked = subprocess.run(
            [embodied_r(), "ask", "Which way did I turn?", "--node", "/dormant/embodied_r", "--topic"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert asked.returncode == 1, asked.stdout + asked.stderr
        assert "NO ANSWER: the node /dormant/embodied_r is unconfigured" in asked.stdout

        assert harness.transition("configure")
        inactive = client.ask("Which way did I turn?", timeout_s=WAIT_S, use_topic=True)
        assert not inactive.success and "is inactive" in inactive.message
        assert "ros2 lifecycle set /dormant/embodied_r activate" in inactive.message
        assert inactive.answer.query_id.startswith("embodied_r_ask_")  # on ~/answers, under the asker's id

        with pytest.raises(NodeNotFoundError, match="the node /bare is unconfigured: configure and activate"):
            SpatialClient("/bare").wait_for_node(1.0)
        with pytest.raises(NodeNotFoundError, match="no embodied_r node answers"):
            SpatialClient("/nobody").wait_for_node(1.0)
    finally:
        client.close()
        spinning.close()
        bare.destroy_node()
        harness.close()


def test_questions_still_queued_at_cleanup_are_answered_on_answers(ros_context, gated_pipeline):
    """Two topic questions (one in the models, one waiting) when the node is cleaned up: both get
    success=false "shutting down" on ~/answers before cleanup returns."""
    pipeline, gate, _ = gated_pipeline
    node = gated_node(ros_context, gated_pipeline, "draining", **{"pose.topic": "", "camera.qos": "reliable"})
    harness = Harness(ros_context, node, "draining")
    questions = harness.client.create_publisher(SpatialQuestion, "/draining/embodied_r/question", 10)
    try:
        harness.feed()
        assert wait_for(lambda: questions.get_subscription_count() > 0)
        gate.close()
        questions.publish(SpatialQuestion(query_id="running", question="Which way did I turn?"))
        assert gate.entered.wait(WAIT_S)
        questions.publish(SpatialQuestion(query_id="waiting", question="What did I see last?"))
        assert wait_for(lambda: node.worker.waiting == 1)
        assert harness.transition("deactivate") and harness.transition("cleanup")
        assert wait_for(lambda: {a.query_id for a in harness.answers} >= {"running", "waiting"})
        for answer in harness.answers:
            assert not answer.success and "shutting down" in answer.message, answer.message
    finally:
        gate.open()
        harness.close()


def test_the_shutdown_transition_ends_the_process(ros_context, tiny_models_dir):
    """`ros2 lifecycle set /x shutdown` answers success, and the process exits 0 (no more /diagnostics)."""
    process = node_process(tiny_models_dir, "ending", "/ending/camera/image_raw")
    client = rclpy.create_node("ending_client", context=ros_context)
    spinning = Spinning(ros_context, client)
    try:
        change_state = client.create_client(ChangeState, "/ending/embodied_r/change_state")
        assert change_state.wait_for_service(timeout_sec=120), "the node did not come up"
        request = ChangeState.Request()
        request.transition.label = "shutdown"
        assert result_of(change_state.call_async(request), timeout=60).success
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 0, output[-3000:]
        assert "Traceback" not in output and "finalized" in output, output[-3000:]
    finally:
        killed(process)
        spinning.close()
        client.destroy_node()
