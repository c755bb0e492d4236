"""A client of a running ``embodied_r`` node: ask it a question and get the answer and its key frames.

:class:`SpatialClient` asks through the node's ``~/ask`` service or its ``~/answer`` action (stages as they
come) and can collect the key-frame images the node publishes on ``~/keyframes``. It owns an rclpy context
and an executor thread, so a program (``embodied-r ask``, a benchmark, a test) uses it without spinning
anything itself. rclpy is imported when a client is made, not with this module.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

DEFAULT_NODE = "/embodied_r"


@dataclass
class AskResult:
    """The node's reply to one question, with the key-frame images received for it."""

    success: bool
    message: str
    answer: Any  # SpatialAnswer (empty when not success)
    round_trip_s: float
    images: dict[int, np.ndarray] = field(default_factory=dict)


class NodeNotFoundError(RuntimeError):
    """No embodied_r node answers on the expected service or action."""


class SpatialClient:
    """A client of the embodied_r node: the ``~/ask`` service or ``~/answer`` action, and optionally the
    ``~/keyframes`` images. Owns an rclpy context and an executor thread; call :meth:`close`."""

    def __init__(self, node: str = DEFAULT_NODE, *, collect_images: bool = False, args: Sequence[str] = ()):
        import rclpy
        from rclpy.action import ActionClient
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from sensor_msgs.msg import Image

        from embodied_r_ros.action import AnswerSpatial
        from embodied_r_ros.srv import AskSpatial

        self.node_name = node.rstrip("/")
        self._context = rclpy.Context()
        rclpy.init(args=list(args), context=self._context)
        self._node = rclpy.create_node(f"embodied_r_ask_{os.getpid()}", context=self._context)
        self._service = self._node.create_client(AskSpatial, f"{self.node_name}/ask")
        self._action = ActionClient(self._node, AnswerSpatial, f"{self.node_name}/answer")
        self._images: dict[int, np.ndarray] = {}
        self._images_lock = threading.Lock()
        if collect_images:
            qos = QoSProfile(depth=256, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self._node.create_subscription(Image, f"{self.node_name}/keyframes", self._on_keyframe, qos)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def _on_keyframe(self, message: Any) -> None:
        from ..image_conversion import ImageConversionError, image_to_rgb
        from .messages import stamp_to_ns

        try:
            image = np.array(image_to_rgb(message))  # own the pixels (the message buffer goes away)
        except ImageConversionError:
            return
        with self._images_lock:
            self._images[stamp_to_ns(message.header.stamp)] = image

    def wait_for_node(self, timeout_s: float, *, action: bool = False) -> None:
        """Wait until the node's service (or action) is there; raises :class:`NodeNotFoundError`."""
        ready = (
            self._action.wait_for_server(timeout_sec=timeout_s)
            if action
            else self._service.wait_for_service(timeout_sec=timeout_s)
        )
        if not ready:
            what = f"action {self.node_name}/answer" if action else f"service {self.node_name}/ask"
            raise NodeNotFoundError(
                f"no embodied_r node answers on the {what} within {timeout_s:g} s; start it (`embodied-r "
                "run`, `ros2 launch embodied_r_ros embodied_r.launch.py`) or pass --node with its name, and "
                "check ROS_DOMAIN_ID"
            )

    def ask(
        self,
        question: str,
        options: Sequence[str] = (),
        window_s: float = 0.0,
        *,
        use_action: bool = False,
        timeout_s: float = 600.0,
        on_feedback: Callable[[str, float], None] | None = None,
        image_wait_s: float = 0.0,
        interval_ns: tuple[int, int] = (0, 0),
        search_memory: bool = False,
    ) -> AskResult:
        """Ask one question; waits up to ``timeout_s`` (then success=false), and up to ``image_wait_s``
        more for the answer's key-frame images. ``interval_ns``: (start, end) camera stamps, 0 = unset.
        ``search_memory``: find the intervals to answer from in the node's memory by content (the window,
        when set, bounds the search)."""
        from .messages import keyframe_stamps_ns, ns_to_time

        fields = {
            "question": question,
            "options": list(options),
            "window_seconds": float(window_s),
            "start_stamp": ns_to_time(interval_ns[0]),
            "end_stamp": ns_to_time(interval_ns[1]),
            "search_memory": bool(search_memory),
        }
        start = time.monotonic()
        if use_action:
            success, message, answer = self._ask_action(fields, timeout_s, on_feedback)
        else:
            success, message, answer = self._ask_service(fields, timeout_s)
        round_trip = time.monotonic() - start
        images: dict[int, np.ndarray] = {}
        if success:
            wanted = keyframe_stamps_ns(answer)
            deadline = time.monotonic() + image_wait_s
            while True:
                with self._images_lock:
                    images = {s: self._images[s] for s in wanted if s in self._images}
                if len(images) == len(wanted) or time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
        return AskResult(success, message, answer, round_trip, images)

    def _ask_service(self, fields: dict[str, Any], timeout_s: float) -> tuple[bool, str, Any]:
        from embodied_r_ros.msg import SpatialAnswer
        from embodied_r_ros.srv import AskSpatial

        request = AskSpatial.Request(**fields)
        future = self._service.call_async(request)
        if not _wait(future, timeout_s):
            self._service.remove_pending_request(future)
            return False, f"no reply from {self.node_name}/ask within {timeout_s:g} s", SpatialAnswer()
        response = future.result()
        return response.success, response.message, response.answer

    def _ask_action(
        self, fields: dict[str, Any], timeout_s: float, on_feedback: Callable[[str, float], None] | None
    ) -> tuple[bool, str, Any]:
        from embodied_r_ros.action import AnswerSpatial
        from embodied_r_ros.msg import SpatialAnswer

        goal = AnswerSpatial.Goal(**fields)
        callback = None
        if on_feedback is not None:

            def callback(message: Any) -> None:
                on_feedback(message.feedback.stage, message.feedback.progress)

        deadline = time.monotonic() + timeout_s
        sent = self._action.send_goal_async(goal, feedback_callback=callback)
        if not _wait(sent, timeout_s) or not sent.result().accepted:
            return False, f"the goal was not accepted by {self.node_name}/answer", SpatialAnswer()
        result_future = sent.result().get_result_async()
        if not _wait(result_future, max(0.0, deadline - time.monotonic())):
            sent.result().cancel_goal_async()
            return False, f"no result from {self.node_name}/answer within {timeout_s:g} s", SpatialAnswer()
        result = result_future.result().result
        return result.success, result.message, result.answer

    def close(self) -> None:
        """Stop the executor and release the rclpy context."""
        import rclpy

        self._executor.shutdown(timeout_sec=1.0)
        self._thread.join(timeout=2.0)  # destroying what a spinning executor uses aborts the process
        self._action.destroy()
        self._node.destroy_node()
        rclpy.try_shutdown(context=self._context)


def _wait(future: Any, timeout_s: float) -> bool:
    """Wait for an rclpy future completed by the executor thread; False on timeout."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    return done.wait(timeout_s) or future.done()
