"""Several cameras on one node, the ROS-free parts: the ``cameras`` parameter, key frames of several cameras
merged in time, observations that name their camera, one memory file per camera, and the launch file's
parameters for a node of another name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from embodied_r_ros.cameras import (
    CameraSpec,
    keep_measured_motion,
    label_cameras,
    merge_keyframes,
    parse_cameras,
    unknown_camera_problem,
    without_camera,
)
from embodied_r_ros.config import ConfigError
from embodied_r_ros.frames import Frame
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.memory.files import camera_memory_path
from embodied_r_ros.memory.mission_time import place_in_mission, without_place
from embodied_r_ros.node_config import NodeConfig, PoseConfig
from embodied_r_ros.perception import Description
from embodied_r_ros.ros.params import default_parameters

ROOT = Path(__file__).resolve().parents[1]


def keyframe(stamp_ns: int) -> KeyFrame:
    return KeyFrame(Frame(np.zeros((4, 4, 3), np.uint8), stamp_ns), index=0)


def description(stamp_ns: int, text: str = "a red chair") -> Description:
    return Description(index=0, stamp_ns=stamp_ns, action="move forward", observation=text, raw=text)


def test_the_cameras_parameter_reads_names_topics_transport_and_qos():
    cameras = parse_cameras(
        "front=/drone/front/image_raw, down=/drone/down/image_raw:compressed:reliable\n rear=rear/image",
        compressed=False,
        qos="sensor_data",
    )
    assert cameras == [
        CameraSpec("front", "/drone/front/image_raw", False, "sensor_data"),
        CameraSpec("down", "/drone/down/image_raw", True, "reliable"),
        CameraSpec("rear", "rear/image", False, "sensor_data"),
    ]
    # camera.compressed and camera.qos are each camera's defaults; :raw turns compressed off again.
    assert parse_cameras("a=/a:raw b=/b", compressed=True, qos="reliable") == [
        CameraSpec("a", "/a", False, "reliable"),
        CameraSpec("b", "/b", True, "reliable"),
    ]
    assert parse_cameras("  ") == []


@pytest.mark.parametrize(
    "text, says",
    [
        ("front", "needs the form NAME=TOPIC"),
        ("front=", "needs the form NAME=TOPIC"),
        ("Front=/a", "must start with a lower-case letter"),
        ("2nd=/a", "must start with a lower-case letter"),
        ("front=/a front=/b", "names 'front' twice"),
        ("front=/a:jpeg", "unknown option 'jpeg'"),
        ("front=/", "has no topic"),
    ],
)
def test_a_bad_cameras_entry_stops_the_config_naming_it(text, says):
    with pytest.raises(ConfigError, match=says):
        NodeConfig(cameras=text)


def test_node_config_lists_its_cameras_and_needs_a_body_frame_for_tf():
    assert NodeConfig().camera_specs() == [CameraSpec("", "camera/image_raw", False, "sensor_data")]
    two = NodeConfig(cameras="front=/f down=/d:compressed")
    assert [c.name for c in two.camera_specs()] == ["front", "down"]
    assert [c.label for c in two.camera_specs()] == ["camera front", "camera down"]
    # TF poses of two camera frames would put the static rotation between them into every motion.
    with pytest.raises(ConfigError, match="set pose.camera_frame to the robot's body frame"):
        NodeConfig(cameras="front=/f down=/d", pose=PoseConfig(source="tf"))
    NodeConfig(cameras="front=/f down=/d", pose=PoseConfig(source="tf", camera_frame="base_link"))


def test_merge_keyframes_orders_cameras_in_time_and_gives_every_key_frame_its_own_stamp():
    merged, sources = merge_keyframes(
        {"front": [keyframe(10), keyframe(30), keyframe(50)], "down": [keyframe(20), keyframe(30)]}
    )
    stamps = [k.frame.stamp_ns for k in merged]
    assert stamps == [10, 20, 30, 31, 50]  # the down camera's frame at 30 (same stamp) moves 1 ns later
    assert [sources[s].camera for s in stamps] == ["front", "down", "front", "down", "front"]
    # ... inside the pipeline only: its source keeps the stamp the camera gave it (evidence, memory)
    assert [sources[s].keyframe.frame.stamp_ns for s in stamps] == [10, 20, 30, 30, 50]
    assert sources[31].keyframe is not merged[3] and sources[30].keyframe is merged[2]
    # One camera: its key frames as they are.
    alone, found = merge_keyframes({"": [keyframe(5), keyframe(9)]})
    assert [k.frame.stamp_ns for k in alone] == [5, 9] and {s.camera for s in found.values()} == {""}


def test_the_vlm_s_motion_label_between_two_cameras_is_dropped_and_measured_motion_kept():
    def step(stamp, source):
        return Description(1, stamp, "turn left" if source == "vlm" else "I moved 1 m", "x", "x", source)

    described = [description(10), step(20, "vlm"), step(30, "vlm"), step(40, "odometry")]
    cameras = {10: "front", 20: "front", 30: "down", 40: "front"}
    kept = keep_measured_motion(described, cameras)
    # front -> front (VLM, same view) stays; front -> down (VLM compared two cameras) goes; poses stay.
    assert [d.action for d in kept] == ["move forward", "turn left", None, "I moved 1 m"]
    assert kept[2].action_source == "none" and kept[2].as_text() == "x"


def test_observations_name_their_camera_and_the_memory_gets_the_vlm_s_words_back():
    labelled = label_cameras([description(10), description(20, "a door")], {10: "front", 20: "down"})
    assert [d.observation for d in labelled] == [
        "Seen by the front camera: a red chair",
        "Seen by the down camera: a door",
    ]
    assert labelled[0].as_text() == "After move forward: Seen by the front camera: a red chair"
    # A camera named "" (a node's one camera) and a stamp without a camera change nothing.
    assert label_cameras([description(10)], {10: ""}) == [description(10)]
    assert label_cameras([description(11)], {10: "front"}) == [description(11)]
    # A memory search's answer puts the mission time first; the memory strips both.
    placed = place_in_mission(labelled, [keyframe(10), keyframe(20)], origin_ns=0)
    assert placed[0].observation.startswith("At 0:00 into the mission: Seen by the front camera: ")
    assert without_camera(without_place(placed[0].observation)) == "a red chair"
    assert without_camera("Seen by a front camera: x") == "Seen by a front camera: x"


def test_a_question_may_name_only_a_camera_the_node_has():
    assert unknown_camera_problem("", ["front", "down"]) is None
    assert unknown_camera_problem("down", ["front", "down"]) is None
    assert "its cameras: front, down" in unknown_camera_problem("rear", ["front", "down"])
    assert "this node has one camera" in unknown_camera_problem("front", [""])


def test_each_camera_has_its_own_memory_file():
    path = Path("/home/robot/.ros/embodied_r/drone1.embodied_r.sqlite")
    assert camera_memory_path(path, "") == path
    assert camera_memory_path(path, "down") == path.with_name("drone1.embodied_r.down.sqlite")
    assert camera_memory_path(Path("/data/memory"), "front") == Path("/data/memory.front.sqlite")


def test_the_launch_file_gives_the_config_file_to_a_node_of_any_name(tmp_path):
    path = ROOT / "launch" / "embodied_r.launch.py"
    spec = importlib.util.spec_from_file_location("embodied_r_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = tmp_path / "params.yaml"
    config.write_text(
        "/**:\n  ros__parameters:\n    use_sim_time: false\n"
        "/**/embodied_r:\n  ros__parameters:\n    camera: {topic: cam, qos: reliable}\n    cameras: ''\n"
        "/drone1/front_reasoner:\n  ros__parameters:\n    camera: {topic: front/image_raw}\n"
        "/drone2/front_reasoner:\n  ros__parameters:\n    camera: {topic: other/image_raw}\n"
        "other_node:\n  ros__parameters:\n    camera: {topic: wrong}\n"
    )
    # The default name's section first, then the node's own (matched with its namespace), name by name.
    assert module.file_parameters(str(config), "front_reasoner", "drone1") == {
        "use_sim_time": False, "camera.topic": "front/image_raw", "camera.qos": "reliable", "cameras": "",
    }  # fmt: skip
    def topic(name, namespace):
        return module.file_parameters(str(config), name, namespace)["camera.topic"]

    assert topic("front_reasoner", "/drone2") == "other/image_raw"
    assert topic("embodied_r", "") == "cam"
    assert topic("front_reasoner", "") == "cam"  # no section of its own at the root
    # The package's own file (every default, under /**/embodied_r) reaches a renamed node whole.
    shipped = module.file_parameters(str(ROOT / "config" / "embodied_r.yaml"), "down_reasoner", "drone1")
    assert shipped["camera.topic"] == "camera/image_raw" and shipped["cameras"] == ""
    assert set(shipped) >= set(default_parameters())
