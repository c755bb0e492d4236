"""What the node tests share (test_node_*.py, test_pose_source.py, test_executor_wakeups.py): waiting for DDS,
a gate that holds the VLM inside a question, the node's parameters, nodes spun on a thread, a harness around
an in-process node, and the node as its own process (`embodied-r run`).

The fixtures built from them (``ros_context``, ``gated_pipeline``) are in conftest.py.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from embodied_r_ros.msg import SpatialAnswer
from embodied_r_ros.srv import AskSpatial
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from sensor_msgs.msg import Image

from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.node_config import NodeConfig
from embodied_r_ros.ros.messages import rgb_image_message
from embodied_r_ros.ros.node import EmbodiedRNode
from embodied_r_ros.testing.synthetic_clip import synthetic_clip

WAIT_S = 30.0


def wait_for(predicate, timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def result_of(future, timeout: float = WAIT_S):
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    assert done.wait(timeout) or future.done(), "no reply in time"
    return future.result()


# ------------------------------------------------------------------------------- a gate at the VLM


class Gate:
    """Holds the VLM's generate calls while closed; ``entered`` tells that a call is waiting at it."""

    def __init__(self):
        self._open = threading.Event()
        self._open.set()
        self.entered = threading.Event()

    def close(self):
        self.entered.clear()
        self._open.clear()

    def open(self):
        self._open.set()

    def wait(self):
        self.entered.set()
        assert self._open.wait(120), "gate never opened"


class GatedBackend:
    """A real backend whose generate waits at a gate; everything else is the backend's own."""

    def __init__(self, inner, gate: Gate):
        self.inner, self.gate = inner, gate
        self.config, self.supports_images = inner.config, inner.supports_images

    def generate(self, requests, **kwargs):
        self.gate.wait()
        return self.inner.generate(requests, **kwargs)

    def close(self):
        self.inner.close()

    def __getattr__(self, name):
        return getattr(self.inner, name)


# ---------------------------------------------------------------------------- in-process nodes


def node_parameters(config: NodeConfig, **extra) -> list[Parameter]:
    values = {
        "vlm.model": config.vlm.model,
        "lm.model": config.lm.model,
        "vlm.transformers.device": "cpu",
        "lm.transformers.device": "cpu",
        "query.timeout_s": 60.0,
        "query.queue_length": 1,
        "query.window_s": 600.0,
        "diagnostics_period_s": 0.2,
        **extra,
    }
    return [Parameter(name, value=value) for name, value in values.items()]


def gated_parameters(config: NodeConfig, **extra) -> list[Parameter]:
    """:func:`node_parameters` for a node on the gated pipeline: without the memory's background describer,
    which calls the same gated VLM while the node is idle. A describer batch that reached a closed gate
    first would set ``gate.entered`` for a question still queued behind it (CI saw a busy answer there)."""
    return node_parameters(config, **{"memory.describe": False, **extra})


def gated_node(context, gated_pipeline, namespace: str, **overrides) -> EmbodiedRNode:
    """A node in ``namespace`` on the module's gated pipeline, with :func:`gated_parameters` and
    ``overrides``."""
    pipeline, _, config = gated_pipeline
    return EmbodiedRNode(
        pipeline=pipeline,
        context=context,
        namespace=namespace,
        parameter_overrides=gated_parameters(config, **overrides),
    )


class Spinning:
    """``nodes`` spun on a thread of their own by one executor (``threads`` > 1: a multi-threaded one)
    until :meth:`close`; the nodes stay (destroy them after)."""

    def __init__(self, context, *nodes, threads: int = 1):
        self.executor = (
            SingleThreadedExecutor(context=context)
            if threads == 1
            else MultiThreadedExecutor(num_threads=threads, context=context)
        )
        for node in nodes:
            self.executor.add_node(node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.thread.join(timeout=5.0)  # destroying what a spinning executor uses aborts the process


class Harness:
    """A node under test, a client node on the same executor, and helpers (camera, questions, lifecycle)."""

    def __init__(self, context, node: EmbodiedRNode, namespace: str, camera_qos: QoSProfile | None = None):
        self.node, self.namespace = node, namespace
        self.client = rclpy.create_node(f"client_{namespace}", context=context)
        base = f"/{namespace}/embodied_r"
        self.camera = self.client.create_publisher(
            Image, f"/{namespace}/camera/image_raw", camera_qos or QoSProfile(depth=50)
        )
        self.ask_client = self.client.create_client(AskSpatial, f"{base}/ask")
        self.change_state = self.client.create_client(ChangeState, f"{base}/change_state")
        self.get_state = self.client.create_client(GetState, f"{base}/get_state")
        self.answers: list = []
        self.diagnostics: list = []
        self.client.create_subscription(SpatialAnswer, f"{base}/answers", self.answers.append, 20)
        self.client.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 20)
        self.spinning = Spinning(context, node, self.client, threads=8)
        self.next_ns = 1_700_000_000 * NS_PER_S

    def _on_diagnostics(self, array) -> None:
        self.diagnostics.extend(s for s in array.status if s.hardware_id.startswith(f"/{self.namespace}/"))

    def close(self) -> None:
        self.spinning.close()
        self.node.destroy_node()
        self.client.destroy_node()

    def transition(self, label: str) -> bool:
        assert self.change_state.wait_for_service(timeout_sec=WAIT_S)
        request = ChangeState.Request()
        request.transition.label = label
        return result_of(self.change_state.call_async(request), timeout=120.0).success

    def state(self) -> str:
        assert self.get_state.wait_for_service(timeout_sec=WAIT_S)
        return result_of(self.get_state.call_async(GetState.Request())).current_state.label

    def feed(self, seconds: float = 2.0) -> list[int]:
        """Publish a clip and wait until the node has taken every frame; returns the stamps."""
        clip = synthetic_clip(seconds=seconds, fps=5.0, size=(160, 120), start_ns=self.next_ns)
        self.next_ns = clip.frames[-1].stamp_ns + NS_PER_S
        received = self.node.stats.frames_received
        for frame in clip.frames:
            self.camera.publish(rgb_image_message(frame.image, frame.stamp_ns, "camera"))
            time.sleep(0.003)
        assert wait_for(lambda: self.node.stats.frames_received >= received + len(clip.frames))
        return [f.stamp_ns for f in clip.frames]

    def ask(self, question: str = "What did I see last?", timeout: float = 120.0):
        assert self.ask_client.wait_for_service(timeout_sec=WAIT_S)
        request = AskSpatial.Request(question=question, window_seconds=600.0)
        return result_of(self.ask_client.call_async(request), timeout=timeout)

    def last_status(self) -> tuple[int, str, dict[str, str]]:
        assert wait_for(lambda: bool(self.diagnostics))
        status: DiagnosticStatus = self.diagnostics[-1]
        return status.level, status.message, {kv.key: kv.value for kv in status.values}


# ------------------------------------------------------------------------------ the node's process


def embodied_r() -> str:
    command = shutil.which("embodied-r")
    assert command, "embodied-r is not on PATH: build with `make build` and source install/setup.bash"
    return command


def node_process(tiny_models_dir: Path, namespace: str, camera: str, **overrides: str) -> subprocess.Popen:
    """`embodied-r run` with the tiny models under ``namespace``, camera on ``camera`` (output captured)."""
    command = [embodied_r(), "run", "--tiny-models", str(tiny_models_dir), "--device", "cpu"]
    command += ["--namespace", namespace, "--set", f"camera.topic={camera}"]
    command += ["--set", "pose.topic=", "--set", "camera.qos=reliable"]
    for name, value in overrides.items():
        command += ["--set", f"{name}={value}"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stopped(node: subprocess.Popen, sig: int, within_s: float) -> tuple[int, str, float]:
    """Send ``sig``; (exit code, output, seconds to exit); kills and fails past ``within_s``."""
    start = time.monotonic()
    node.send_signal(sig)
    try:
        output, _ = node.communicate(timeout=within_s)
    except subprocess.TimeoutExpired:
        node.kill()
        output, _ = node.communicate()
        pytest.fail(f"the node did not exit within {within_s} s of signal {sig}:\n{output[-3000:]}")
    return node.returncode, output, time.monotonic() - start


def killed(node: subprocess.Popen) -> None:
    """Kill the node's process if it still runs (a test's cleanup)."""
    if node.poll() is None:
        node.kill()
        node.communicate()
