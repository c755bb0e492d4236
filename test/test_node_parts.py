"""The node's ROS-free parts: pose history, query worker, questions, parameters, launch file, report."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import os
import sys
import threading
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest
import yaml

from embodied_r_ros.cli.report import (
    ReportEntry,
    ReportKeyFrame,
    entry_from_answer,
    grade,
    render_report,
    write_report,
)
from embodied_r_ros.config import ConfigError, ModelConfig, PerceptionConfig, TransformersOptions
from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.node_config import NodeConfig, QueryConfig
from embodied_r_ros.poses.pose_history import PoseHistory
from embodied_r_ros.question_file import read_questions
from embodied_r_ros.ros.frame_loss import SequenceGaps
from embodied_r_ros.ros.params import (
    SPECS,
    YAML_NODE_KEY,
    check_specs,
    config_from_parameters,
    default_parameters,
    default_parameters_yaml,
    parameter_value,
    unknown_parameters_problem,
)
from embodied_r_ros.ros.query_worker import (
    ABANDONED,
    CANCELLED,
    DONE,
    SHUTDOWN,
    TIMEOUT,
    QueryAbandoned,
    QueryWorker,
    QueueFullError,
)
from embodied_r_ros.ros.questions import QueryRequest, RequestTooLargeError, check_size
from embodied_r_ros.windows import Window

ROOT = Path(__file__).resolve().parents[1]


def yaw_pose(x: float, yaw_deg: float) -> Pose:
    half = math.radians(yaw_deg) / 2
    return Pose((x, 0.0, 0.0), (0.0, 0.0, math.sin(half), math.cos(half)))


# ------------------------------------------------------------------------------------------ poses


def test_pose_history_interpolates_between_samples():
    history = PoseHistory(capacity=16, max_gap_s=0.5)
    history.add(0, yaw_pose(0.0, 0.0))
    history.add(NS_PER_S // 5, yaw_pose(1.0, 40.0))
    middle = history.pose_at(NS_PER_S // 10)
    assert middle.position[0] == pytest.approx(0.5)
    assert math.degrees(2 * math.atan2(middle.orientation[2], middle.orientation[3])) == pytest.approx(20.0)
    # Outside the samples: the nearest one, within max_gap_s; beyond it, no pose.
    assert history.pose_at(NS_PER_S // 5 + NS_PER_S // 10).position[0] == pytest.approx(1.0)
    assert history.pose_at(2 * NS_PER_S) is None
    assert PoseHistory().pose_at(0) is None


def test_pose_history_ignores_old_samples_and_does_not_bridge_gaps():
    history = PoseHistory(capacity=16, max_gap_s=0.5)
    history.add(10 * NS_PER_S, yaw_pose(0.0, 0.0))
    assert not history.add(9 * NS_PER_S, yaw_pose(5.0, 0.0)) and history.ignored == 1
    history.add(12 * NS_PER_S, yaw_pose(2.0, 0.0))
    # 10.4 s is within 0.5 s of the 10 s sample, but the 2 s odometry gap is not interpolated over.
    assert history.pose_at(int(10.4 * NS_PER_S)).position[0] == pytest.approx(0.0)
    history.clear()
    assert len(history) == 0 and history.pose_at(10 * NS_PER_S) is None


def test_pose_history_keeps_the_newer_half_when_full():
    history = PoseHistory(capacity=8, max_gap_s=0.5)
    for i in range(20):
        history.add(i * NS_PER_S // 10, yaw_pose(float(i), 0.0))
    assert len(history) <= 8
    assert history.pose_at(19 * NS_PER_S // 10).position[0] == pytest.approx(19.0)
    assert history.pose_at(0) is None  # dropped with the older half


# ------------------------------------------------------------------------------------ query worker


class Gate:
    """Lets a test hold the worker inside a job."""

    def __init__(self):
        self.open = threading.Event()
        self.entered = threading.Event()

    def handler(self, job):
        job.report("start", 0.1)
        self.entered.set()
        assert self.open.wait(10)
        job.report("after", 0.9)
        return job.payload.upper()


@pytest.fixture
def gated():
    gate = Gate()
    finished = []
    worker = QueryWorker(gate.handler, queue_length=1, on_finished=finished.append)
    yield gate, worker, finished
    gate.open.set()
    worker.close()


def test_worker_answers_in_order_and_reports_progress(gated):
    gate, worker, finished = gated
    gate.open.set()
    first = worker.submit("a", timeout_s=10)
    assert first.wait(10) and first.delivered and first.result == "A"
    assert first.next_event(0) == ("start", 0.1) and first.next_event(0) == ("after", 0.9)
    assert [job.id for job in finished] == [first.id]


def test_worker_queue_bound_gives_busy_at_once(gated):
    gate, worker, finished = gated
    running = worker.submit("a", timeout_s=10)
    assert gate.entered.wait(10)
    waiting = worker.submit("b", timeout_s=10)
    with pytest.raises(QueueFullError, match="busy"):
        worker.submit("c", timeout_s=10)
    # Abandoning the waiting job frees its place at once.
    assert worker.abandon(waiting, CANCELLED) and waiting.state == ABANDONED and worker.waiting == 0
    third = worker.submit("c", timeout_s=10)
    gate.open.set()
    assert running.wait(10) and third.wait(10)
    assert running.result == "A" and third.result == "C"
    assert waiting.id not in [job.id for job in finished]  # never ran


def test_worker_timeout_drops_the_running_result_and_stays_usable(gated):
    gate, worker, finished = gated
    job = worker.submit("slow", timeout_s=0.3)
    assert gate.entered.wait(10)
    assert not job.wait(0.5)
    assert worker.abandon(job, TIMEOUT) and job.state == ABANDONED
    gate.open.set()
    later = worker.submit("next", timeout_s=10)
    assert later.wait(10) and later.delivered and later.result == "NEXT"
    # The timed-out job ran on in the background; the stage after the gate saw it was abandoned.
    abandoned = next(j for j in finished if j.id == job.id)
    assert not abandoned.delivered and isinstance(abandoned.error, QueryAbandoned)


def test_worker_deadline_without_a_waiter_and_expiry_in_the_queue(gated):
    gate, worker, finished = gated
    fire_and_forget = worker.submit("a", timeout_s=0.2)
    assert gate.entered.wait(10)
    queued = worker.submit("b", timeout_s=0.2)
    time.sleep(0.4)
    gate.open.set()
    assert fire_and_forget.wait(10) and queued.wait(10)
    assert fire_and_forget.state == ABANDONED and fire_and_forget.abandon_reason == TIMEOUT
    assert queued.state == ABANDONED and queued.started is None  # expired while waiting
    assert {j.id for j in finished} == {fire_and_forget.id, queued.id}


def test_worker_close_reports_the_queued_and_the_running_job_once_at_once(gated):
    """close() hands every job it gives up to on_finished on the closing thread (so a topic asker hears
    "shutting down" before the publisher goes), and the running job is not reported again when its handler
    returns later."""
    gate, worker, finished = gated
    running = worker.submit("a", timeout_s=10)
    assert gate.entered.wait(10)
    queued = worker.submit("b", timeout_s=10)
    worker.close(timeout=0.1)  # the handler still holds the worker thread
    assert [job.id for job in finished] == [running.id, queued.id]
    assert all(job.state == ABANDONED and job.abandon_reason == SHUTDOWN for job in finished)
    gate.open.set()
    worker._thread.join(10)
    assert [job.id for job in finished] == [running.id, queued.id]  # once each


def test_worker_handler_errors_reach_the_caller_and_idle_tasks_run_between_jobs():
    ran = []

    def handler(job):
        if job.payload == "bad":
            raise ValueError("no frames")
        return "ok"

    worker = QueryWorker(handler, queue_length=0)
    try:
        bad = worker.submit("bad", timeout_s=5)
        assert bad.wait(5) and bad.state == DONE and isinstance(bad.error, ValueError) and not bad.delivered
        done = threading.Event()
        worker.submit_idle(lambda: ran.append("idle"))
        worker.submit_idle(done.set)
        assert done.wait(5) and ran == ["idle"]
        with pytest.raises(ValueError):
            worker.queue_length = -1
    finally:
        worker.close()
    with pytest.raises(QueueFullError, match="shut down"):
        worker.submit("late", timeout_s=1)


def test_a_dropped_idle_task_is_told_so_that_its_claim_is_not_held_forever():
    """Idle tasks dropped (beyond the bound, or cleared at a stamp jump) call their ``on_dropped``: the
    memory describer's batch gives its claim back there, else no batch would ever be scheduled again."""
    release = threading.Event()
    worker = QueryWorker(lambda job: release.wait(10), queue_length=1, max_idle_tasks=2)
    dropped, ran = [], []
    try:
        job = worker.submit("hold the worker", timeout_s=10)  # idle tasks wait behind it
        deadline = time.monotonic() + 10
        while worker.running is None and time.monotonic() < deadline:
            time.sleep(0.01)
        for name in "abc":
            worker.submit_idle(lambda n=name: ran.append(n), on_dropped=lambda n=name: dropped.append(n))
        assert dropped == ["a"]  # the oldest, beyond the bound of 2
        worker.clear_idle()
        assert dropped == ["a", "b", "c"]
        release.set()
        assert job.wait(10) and ran == []
    finally:
        release.set()
        worker.close()


def test_worker_hands_the_payload_to_the_handler_untouched():
    payload = object()  # the worker never looks inside (no question, no size)
    worker = QueryWorker(lambda job: job.payload)
    try:
        job = worker.submit(payload, timeout_s=5)
        assert job.wait(5) and job.delivered and job.payload is payload and job.result is payload
    finally:
        worker.close()


# ----------------------------------------------------------------------------------------- questions


SMALL_QUERY = QueryConfig(max_question_chars=10, max_options=2, max_option_chars=5)


def test_questions_at_the_size_bounds_pass():
    check_size(QueryRequest("x" * 10, ("a" * 5, "b")), SMALL_QUERY)


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (
            QueryRequest("x" * 11),
            "question too long: 11 characters, this node accepts at most 10 (query.max_question_chars)",
        ),
        (
            QueryRequest("x", ("a", "b", "c")),
            "too many options: 3, this node accepts at most 2 (query.max_options)",
        ),
        (
            QueryRequest("x", ("a", "b" * 6)),
            "option 2 too long: 6 characters, this node accepts at most 5 (query.max_option_chars)",
        ),
    ],
)
def test_questions_over_a_size_bound_name_it(request_: QueryRequest, words: str):
    with pytest.raises(RequestTooLargeError) as info:
        check_size(request_, SMALL_QUERY)
    assert words in str(info.value)


def test_question_window_is_the_one_it_asked_for():
    assert QueryRequest("q").window == Window()  # 0: the node's default window
    request = QueryRequest("q", window_s=5.0, start_ns=3 * NS_PER_S, end_ns=4 * NS_PER_S)
    assert request.window == Window(5.0, 3 * NS_PER_S, 4 * NS_PER_S)


# ------------------------------------------------------------------------------------- parameters


def test_every_config_field_is_a_described_parameter_with_a_valid_range():
    check_specs()
    defaults = default_parameters()
    assert (
        "camera.topic" in defaults and "vlm.model" in defaults and "keyframes.overlap_threshold" in defaults
    )
    for name, default in defaults.items():
        spec = SPECS[name]
        assert spec.description, name
        if spec.lo is not None:
            assert spec.lo <= default <= spec.hi, name
        if spec.choices:
            assert default in spec.choices, name
    assert {n for n, s in SPECS.items() if s.dynamic} == {n for n in defaults if n.startswith("query.")}


def test_config_yaml_holds_every_default():
    text = (ROOT / "config" / "embodied_r.yaml").read_text()
    assert text == default_parameters_yaml(), "regenerate: python -m embodied_r_ros.ros.params > config/..."
    parameters = yaml.safe_load(text)[YAML_NODE_KEY]["ros__parameters"]

    def flat_items(values, prefix=""):  # sections nest (vlm.transformers.device)
        for key, value in values.items():
            yield from (
                flat_items(value, f"{prefix}{key}.") if isinstance(value, dict) else [(prefix + key, value)]
            )

    flat = dict(flat_items(parameters))
    assert flat == default_parameters()
    assert all(type(flat[name]) is type(value) for name, value in default_parameters().items())


def test_parameters_that_moved_into_a_section_name_where_they_are_now():
    # A key of an older parameters file would be dropped silently by ROS; the node names the new one.
    problem = unknown_parameters_problem(["lm.adapter", "vlm.base_url", "camera.topic", "use_sim_time"])
    assert problem is not None
    assert "lm.adapter (did you mean lm.transformers.adapter?)" in problem
    assert "vlm.base_url (did you mean vlm.openai.base_url?)" in problem
    assert "camera.topic" not in problem and "use_sim_time" not in problem  # declared / not the node's own
    assert unknown_parameters_problem(["camera.topic", "qos_overrides./x.depth"]) is None
    with pytest.raises(ConfigError, match="did you mean vlm.transformers.device"):
        parameter_value("vlm.device", "cpu")
    # The odometry section became pose (pose.source chooses the message type): its keys name their new ones.
    problem = unknown_parameters_problem(["odometry.topic", "odometry.max_gap_s"])
    assert problem is not None
    assert "odometry.topic (did you mean pose.topic?)" in problem
    assert "odometry.max_gap_s (did you mean pose.max_gap_s?)" in problem
    with pytest.raises(ConfigError, match="did you mean pose.topic"):
        parameter_value("odometry.topic", "/odom")


def test_parameter_values_are_typed_and_checked():
    assert parameter_value("buffer.memory_mb", "512") == 512.0
    assert parameter_value("query.queue_length", "4") == 4
    assert parameter_value("camera.compressed", "True") is True
    assert parameter_value("vlm.model", "/models/vlm") == "/models/vlm"
    with pytest.raises(ConfigError, match="did you mean buffer.memory_mb"):
        parameter_value("bufer.memory_mb", "1")
    with pytest.raises(ConfigError, match="must be a int"):
        parameter_value("query.queue_length", "many")
    config = config_from_parameters({"query.timeout_s": 5.0, "vlm.transformers.device": "cuda:1"})
    assert (
        isinstance(config, NodeConfig)
        and config.query.timeout_s == 5.0
        and config.vlm.transformers.device == "cuda:1"
    )
    assert config.pipeline().vlm.transformers.device == "cuda:1"
    with pytest.raises(ConfigError, match="camera.qos must be one of"):
        config_from_parameters({"camera.qos": "fast"})
    with pytest.raises(ConfigError, match="max_keyframes must be >="):
        config_from_parameters({"keyframes.min_keyframes": 40})


def test_table_ranges_and_choices_are_the_configs_checks_too():
    # Where the node's range or choices are also the rule for every user, the config checks the table's.
    with pytest.raises(ConfigError, match=r"^query.queue_length must be in 0\.\.64$"):
        config_from_parameters({"query.queue_length": 65})
    with pytest.raises(
        ConfigError, match=r"^query.max_options must be in 0\.\.26 \(option letters A\.\.Z\)$"
    ):
        config_from_parameters({"query.max_options": 27})
    with pytest.raises(ConfigError, match=r"^query.max_question_chars must be in 1\.\.100000$"):
        config_from_parameters({"query.max_question_chars": 0})
    with pytest.raises(
        ConfigError, match=r"^model dtype must be one of auto, float32, bfloat16, float16, got 'x'$"
    ):
        TransformersOptions(dtype="x")
    # Both models run on the same backends; ground truth is no backend but a perceiver, and the value it
    # took once names the parameters that replace it.
    assert SPECS["vlm.backend"].choices == ("transformers", "openai")
    assert SPECS["lm.backend"].choices == ("transformers", "openai")
    with pytest.raises(ConfigError, match="parameter lm.backend must be one of transformers, openai, got"):
        config_from_parameters({"lm.backend": "onnx"})
    with pytest.raises(
        ConfigError,
        match=r"^parameter vlm.backend 'ground_truth' is no longer accepted: .* set perception.perceiver: "
        r"ground_truth and perception.scene: ",
    ):
        config_from_parameters({"vlm.backend": "ground_truth"})
    ground_truth = {"perception.perceiver": "ground_truth", "perception.scene": "/s/scene.json"}
    assert config_from_parameters(ground_truth).pipeline().perception == PerceptionConfig(
        "ground_truth", "/s/scene.json"
    )


def test_run_flags_come_from_the_parameter_table():
    from embodied_r_ros.cli import run

    assert {flag: shortcut.parameters for flag, shortcut in run.FLAGS.items()} == {
        "--camera-topic": ("camera.topic",),
        "--compressed": ("camera.compressed",),
        "--cameras": ("cameras",),
        "--pose-source": ("pose.source",),
        "--odometry-topic": ("pose.topic",),
        "--window": ("query.window_s",),
        "--timeout": ("query.timeout_s",),
        "--vlm": ("vlm.model",),
        "--backend": ("vlm.backend", "lm.backend"),
        "--device": ("vlm.transformers.device", "lm.transformers.device"),
        "--dtype": ("vlm.transformers.dtype", "lm.transformers.dtype"),
        "--max-new-tokens": ("vlm.max_new_tokens", "lm.max_new_tokens"),
        "--lm": ("lm.model",),
    }
    parser = argparse.ArgumentParser()
    run.register(parser.add_subparsers())
    args = parser.parse_args(
        ["run", "--window", "5", "--max-new-tokens", "7", "--compressed", "--backend", "openai"]
        + [
            "--vlm",
            "/m/vlm",
            "--odometry-topic",
            "",
            "--pose-source",
            "pose_with_covariance",
            "--set",
            "query.queue_length=4",
            "--set",
            "lm.model=/m/lm",
        ]
    )
    assert run.parameter_overrides(args) == {
        "query.window_s": 5.0,
        "vlm.max_new_tokens": 7,
        "lm.max_new_tokens": 7,
        "camera.compressed": True,
        "vlm.backend": "openai",
        "lm.backend": "openai",
        "vlm.model": "/m/vlm",
        "pose.topic": "",
        "pose.source": "pose_with_covariance",
        "query.queue_length": 4,
        "lm.model": "/m/lm",
    }
    assert type(run.parameter_overrides(args)["query.window_s"]) is float
    assert config_from_parameters(run.parameter_overrides(args)).lm.max_new_tokens == 7
    # Only values the parameters a flag sets accept (ground truth is no backend); dtype's choices.
    for bad in (
        ["--backend", "ground_truth"],
        ["--dtype", "int8"],
        ["--max-new-tokens", "many"],
        ["--pose-source", "gps"],
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(["run", *bad])
    defaults = parser.parse_args(["run"])
    assert run.parameter_overrides(defaults) == {}


# ------------------------------------------------------------------------------------ launch file


def _launch_module():
    path = ROOT / "launch" / "embodied_r.launch.py"
    spec = importlib.util.spec_from_file_location("embodied_r_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports os and embodied_r_ros.config: no launch package needed
    return module, ast.parse(path.read_text())


def _declared_launch_arguments(module, monkeypatch):
    """{name: keywords} of the DeclareLaunchArgument calls that generate_launch_description makes.

    Stand-ins replace the ROS ``launch`` package and the ament index, which these tests do not need.
    """
    declared = {}

    def declare(name, **keywords):
        declared[name] = keywords

    fakes = {name: ModuleType(name) for name in ("launch", "launch.actions", "ament_index_python")}
    fakes["ament_index_python.packages"] = ModuleType("ament_index_python.packages")
    fakes["launch"].LaunchDescription = list
    fakes["launch.actions"].DeclareLaunchArgument = declare
    fakes["launch.actions"].OpaqueFunction = lambda function: function
    fakes["ament_index_python.packages"].get_package_share_directory = lambda package: f"/share/{package}"
    for name, fake in fakes.items():
        monkeypatch.setitem(sys.modules, name, fake)
    module.generate_launch_description()
    return declared


def _calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == name]


def test_launch_arguments_map_to_declared_node_parameters(monkeypatch):
    module, tree = _launch_module()
    arguments = _declared_launch_arguments(module, monkeypatch)
    declared = set(arguments)
    assert declared == {
        "config_file", "namespace", "name", "log_level", "use_sim_time", *module.ARGUMENT_PARAMETERS
    }  # fmt: skip
    assert {"camera_topic", "compressed", "pose_source", "odometry_topic", "vlm", "lm", "device"} <= declared
    parameters = default_parameters()
    for argument, names in module.ARGUMENT_PARAMETERS.items():
        assert names and all(name in parameters for name in names), argument
    # The arguments come from the parameter table (config.py); these are what users type and read.
    assert module.ARGUMENT_PARAMETERS == {
        "camera_topic": ["camera.topic"],
        "compressed": ["camera.compressed"],
        "cameras": ["cameras"],
        "pose_source": ["pose.source"],
        "odometry_topic": ["pose.topic"],
        "vlm": ["vlm.model"],
        "device": ["vlm.transformers.device", "lm.transformers.device"],
        "lm": ["lm.model"],
        "autostart": ["autostart"],
    }
    keep = "; empty keeps the config file's value"
    assert {name: arguments[name]["description"] for name in module.ARGUMENT_PARAMETERS} == {
        "camera_topic": "camera topic (sensor_msgs/Image)" + keep,
        "compressed": "true: subscribe to <camera_topic>/compressed (CompressedImage)" + keep,
        "cameras": "several cameras: NAME=TOPIC[:compressed][:reliable] ... (parameter cameras)" + keep,
        "pose_source": "odometry, pose, pose_with_covariance, tf or none" + keep,
        "odometry_topic": "topic of the pose messages (pose.topic), or none" + keep,
        "vlm": "VLM: repo id or checkpoint directory" + keep,
        "lm": "LM: repo id or checkpoint directory" + keep,
        "device": "both models: auto, cpu, cuda, cuda:N" + keep,
        "autostart": "true: the node configures and activates itself at start" + keep,
    }
    assert all(arguments[name]["default_value"] == "" for name in module.ARGUMENT_PARAMETERS)
    assert {name: a["choices"] for name, a in arguments.items() if "choices" in a} == {
        "compressed": ["", "true", "false"],
        "pose_source": ["", "odometry", "pose", "pose_with_covariance", "tf", "none"],
        "autostart": ["", "true", "false"],
        "use_sim_time": ["true", "false"],
    }
    assert arguments["use_sim_time"]["default_value"] == "false"
    assert arguments["config_file"]["default_value"] == "/share/embodied_r_ros/config/embodied_r.yaml"
    assert arguments["log_level"]["default_value"] == "info" and arguments["namespace"]["default_value"] == ""
    assert arguments["name"]["default_value"] == module.NODE_NAME  # one node per camera: a name each
    # The node the launch file starts is the executable CMake installs, with the YAML this package ships.
    (node,) = _calls(tree, "Node")
    keywords = {k.arg: k.value for k in node.keywords}
    assert keywords["package"].value == "embodied_r_ros"
    assert keywords["executable"].value == "embodied_r_node"
    assert module.NODE_NAME == YAML_NODE_KEY.rsplit("/", 1)[-1]
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert "install(PROGRAMS scripts/embodied_r_node DESTINATION lib/${PROJECT_NAME})" in cmake
    assert "install(DIRECTORY launch config DESTINATION share/${PROJECT_NAME})" in cmake
    assert (
        any(isinstance(n, ast.Constant) and n.value == "embodied_r.yaml" for n in ast.walk(tree))
        and (ROOT / "config" / "embodied_r.yaml").is_file()
    )


def test_launch_overrides_only_the_arguments_given():
    module, _ = _launch_module()
    empty = {name: "" for name in module.ARGUMENT_PARAMETERS}
    assert module.parameter_overrides(empty) == {}
    overrides = module.parameter_overrides(
        {
            **empty,
            "compressed": "True",
            "device": "cuda:1",
            "vlm": "/models/vlm",
            "odometry_topic": "none",
            "pose_source": "pose",
        }
    )
    assert overrides == {
        "camera.compressed": True,
        "pose.source": "pose",
        "vlm.transformers.device": "cuda:1",
        "lm.transformers.device": "cuda:1",
        "vlm.model": "/models/vlm",
        "pose.topic": "",
    }
    # The values it makes are valid node parameters.
    assert config_from_parameters(overrides).camera.compressed is True
    with pytest.raises(ValueError, match="true or false"):
        module.parameter_overrides({"compressed": "yes"})
    # use_sim_time is rclpy's parameter, not the node's table: the launch file passes it on as a bool.
    assert module.sim_time_parameters("True") == {"use_sim_time": True}
    assert module.sim_time_parameters("false") == {"use_sim_time": False}
    with pytest.raises(ValueError, match="use_sim_time must be true or false"):
        module.sim_time_parameters("1")


# ----------------------------------------------------------------------------------- report, ask


def test_grade_choices_and_numbers():
    assert grade(["left", "right"], "B", None, "B") == 1.0
    assert grade(["left", "right"], "A", None, "right") == 0.0  # the truth given as option text
    assert grade([], "", 2.0, "2.0") == 1.0
    assert grade([], "", 4.0, "2 m") == pytest.approx(0.0)
    assert grade([], "", 3.0, "2 m") == pytest.approx(0.1)  # 50 % off passes only the 0.50 threshold
    assert grade([], "", 2.2, "2") == pytest.approx(0.9)
    assert grade(["a", "b"], "A", None, None) is None


def test_report_is_self_contained_and_escaped(tmp_path):
    from builtin_interfaces.msg import Time
    from embodied_r_ros.msg import SpatialAnswer

    image = np.zeros((480, 640, 3), np.uint8)
    image[:, :320] = (255, 0, 0)
    answer = SpatialAnswer(
        query_id="q7",
        question="Which <b>way</b>?",
        options=["left", "right"],
        answer="B",
        choice="B",
        value=math.nan,
        reasoning="I turned & walked",
        well_formed=True,
        keyframe_stamps=[Time(sec=1, nanosec=0), Time(sec=2, nanosec=5)],
        keyframe_descriptions=["a hall", "After I turned right: a door"],
        perception_seconds=0.5,
        reasoning_seconds=0.25,
    )
    entry = entry_from_answer(answer, images={NS_PER_S: image}, ground_truth="B", round_trip_s=1.0)
    assert [k.stamp_ns for k in entry.keyframes] == [NS_PER_S, 2 * NS_PER_S + 5]
    assert entry.keyframes[1].image is None and entry.value is None
    failed = ReportEntry(
        question="How far?", success=False, message="busy: ask again later", ground_truth="3 m"
    )
    html = render_report([entry, failed], banner="smoke models")
    assert html.count("data:image/jpeg;base64,") == 1 and "image not received" in html
    assert "Which &lt;b&gt;way&lt;/b&gt;?" in html and "I turned &amp; walked" in html
    assert "correct" in html and "busy: ask again later" in html and "smoke models" in html
    assert "1.000000000" in html and "2.000000005" in html and "After I turned right: a door" in html
    assert "http" not in html.replace("http-equiv", "")  # nothing fetched from elsewhere
    path = write_report(tmp_path / "out" / "report.html", [entry], title="Demo")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert ReportKeyFrame(1, None).description == ""


def test_questions_files(tmp_path):
    lines = [
        {
            "id": "s0-001",
            "question": "Which way?",
            "options": ["left", "right"],
            "answer": "B",
            "window_s": 20,
        },
        {"question": "How far?", "ground_truth": 2.5, "start_s": 4.0, "end_s": 34.5},
    ]
    jsonl = tmp_path / "questions.jsonl"
    jsonl.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    questions = read_questions(jsonl)
    assert [q.question for q in questions] == ["Which way?", "How far?"]
    assert questions[0].options == ("left", "right") and questions[0].ground_truth == "B"
    assert (
        questions[0].window_s == 20.0 and questions[0].id == "s0-001" and questions[1].ground_truth == "2.5"
    )
    assert questions[1].window_s == 0.0  # the node's default window, whatever start_s/end_s say
    as_yaml = tmp_path / "questions.yaml"
    as_yaml.write_text(yaml.safe_dump({"questions": lines}))
    assert [q.question for q in read_questions(as_yaml)] == ["Which way?", "How far?"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"options": []}\n')
    with pytest.raises(ValueError, match="no 'question'"):
        read_questions(broken)
    with pytest.raises(FileNotFoundError):
        read_questions(tmp_path / "missing.jsonl")


def test_answer_message_round_trip_through_ros_messages():
    from embodied_r_ros.perception import Description
    from embodied_r_ros.poses.pose_sources import POSE_SOURCES
    from embodied_r_ros.reasoning.answers import answer_from_completion
    from embodied_r_ros.ros.messages import answer_to_message, keyframe_stamps_ns

    answer = answer_from_completion("<think>far</think><answer>2.5 m</answer>", "How far?", [])
    answer.keyframe_stamps_ns = [5, NS_PER_S + 7]
    answer.descriptions = [
        Description(0, 5, None, "a hall", ""),
        Description(1, NS_PER_S + 7, "move forward", "x", ""),
    ]
    message = answer_to_message(answer, "q3", 3 * NS_PER_S + 1, "cam")
    assert message.value == pytest.approx(2.5) and message.choice == "" and message.well_formed
    assert keyframe_stamps_ns(message) == [5, NS_PER_S + 7]
    assert message.keyframe_descriptions == ["a hall", "After move forward: x"]
    assert message.header.stamp.sec == 3 and message.header.frame_id == "cam" and message.query_id == "q3"
    odometry = SimpleNamespace(
        pose=SimpleNamespace(
            pose=SimpleNamespace(
                position=SimpleNamespace(x=1, y=2, z=3), orientation=SimpleNamespace(x=0, y=0, z=0, w=1)
            )
        )
    )
    assert POSE_SOURCES["odometry"].read(odometry) == Pose((1.0, 2.0, 3.0), (0.0, 0.0, 0.0, 1.0))


def test_torch_threads_leave_a_core_for_the_camera():
    import torch

    from embodied_r_ros.ros.models import set_torch_threads

    before = torch.get_num_threads()
    try:
        assert set_torch_threads(NodeConfig(torch_threads=1)) == 1 and torch.get_num_threads() == 1
        expected = max(1, (os.cpu_count() or 2) - 1)
        assert set_torch_threads(NodeConfig()) == expected and torch.get_num_threads() == expected
        remote = NodeConfig(
            vlm=ModelConfig(model="m", backend="openai"), lm=ModelConfig(model="m", backend="openai")
        )
        assert set_torch_threads(remote) is None  # no in-process model: torch is left alone
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ConfigError, match="torch_threads"):
        NodeConfig(torch_threads=-1)


def test_fastdds_profile_carries_raw_images_in_shared_memory():
    import xml.etree.ElementTree as ElementTree

    root = ElementTree.parse(ROOT / "config" / "fastdds_large_images.xml").getroot()
    namespace = {"f": "http://www.eprosima.com"}
    segment = root.find(".//f:transport_descriptor[f:type='SHM']/f:segment_size", namespace)
    assert int(segment.text) >= 4 * 640 * 480 * 3  # several raw 640x480 rgb8 frames
    assert root.find(".//f:participant", namespace).get("is_default_profile") == "true"


def test_sequence_gaps_count_what_each_publisher_numbered_but_never_sent():
    gaps = SequenceGaps()
    assert [gaps.observe(b"cam", n) for n in (1, 2, 5, 6, 10)] == [0, 0, 2, 0, 3]
    assert gaps.observe(b"cam", 4) == 0 and gaps.observe(b"cam", 10) == 0  # late or repeated: no loss
    assert gaps.observe(b"other", 100) == 0 and gaps.observe(b"other", 102) == 1  # per publisher
    assert gaps.observe(b"cam", None) == 0 and gaps.observe(b"cam", 0) == 0  # no number: nothing known
    assert gaps.missed == 6
    assert gaps.before_first == 99  # "other" had numbered 99 samples before its first one arrived
    gaps.clear()
    assert gaps.observe(b"cam", 50) == 0 and gaps.missed == 6  # a restart is not a loss
