"""A client of a running ``embodied_r`` node: ask it a question and get the answer and its key frames.

:class:`SpatialClient` asks through the node's ``~/ask`` service, its ``~/answer`` action (stages as they
come) or its ``~/question`` topic (the answer comes on ``~/answers`` under the client's query id), and can
collect the key-frame images the node publishes on ``~/keyframes``. It owns an rclpy context and an executor
thread, so a program (``embodied-r ask``, a benchmark, a test) uses it without spinning anything itself.
rclpy is imported when a client is made, not with this module.

The node's three transports exist in every lifecycle state, and a node that is not active answers with its
state ("the node /embodied_r is unconfigured ...: configure and activate it"). Where they are missing but
the node's lifecycle services answer (an older node, another managed node of that name),
:meth:`SpatialClient.wait_for_node` says which state it is in instead of "no node".
"""

from __future__ import annotations

import itertools
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
    """No embodied_r node answers on the expected service, action or topic (the message says whether a
    node of that name is there in another lifecycle state)."""


GET_STATE_WAIT_S = 4.0  # for the node's ~/get_state, once its question transport did not appear
# A request sent before the server has matched our reply reader gets a reply that is lost (DDS discovery is
# per endpoint): ask again after this long rather than wait the whole time for a reply that will not come.
GET_STATE_RESEND_S = 0.5


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
        # The topic asker, made on first use: ~/question out, ~/answers in (by query id).
        self._question_pub: Any = None
        self._answers_sub: Any = None
        self._answers: dict[str, Any] = {}  # query id -> its SpatialAnswer (None: still waited for)
        self._answers_cond = threading.Condition()
        self._query_ids = itertools.count(1)
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

    def wait_for_node(self, timeout_s: float, *, action: bool = False, topic: bool = False) -> None:
        """Wait until the node's service (or action, or ``~/question`` topic with ``~/answers``) is there;
        raises :class:`NodeNotFoundError`, naming the node's lifecycle state when it answers on
        ``~/get_state`` but not there."""
        if topic:
            ready = self._wait_for_topic(timeout_s)
            what = f"topic {self.node_name}/question"
        elif action:
            ready = self._action.wait_for_server(timeout_sec=timeout_s)
            what = f"action {self.node_name}/answer"
        else:
            ready = self._service.wait_for_service(timeout_sec=timeout_s)
            what = f"service {self.node_name}/ask"
        if ready:
            return
        state = self.lifecycle_state(GET_STATE_WAIT_S)
        if state:
            command = f"ros2 lifecycle set {self.node_name}"
            fix = {
                "unconfigured": f": configure and activate it ({command} configure, then activate)",
                "inactive": f": activate it ({command} activate)",
            }.get(state, "")
            raise NodeNotFoundError(
                f"the node {self.node_name} is {state}{fix}; it offers no {what} (within {timeout_s:g} s): "
                "is it an embodied_r node of this version?"
            )
        raise NodeNotFoundError(
            f"no embodied_r node answers on the {what} within {timeout_s:g} s; start it (`embodied-r "
            "run`, `ros2 launch embodied_r_ros embodied_r.launch.py`) or pass --node with its name, and "
            "check ROS_DOMAIN_ID"
        )

    def lifecycle_state(self, timeout_s: float) -> str:
        """The node's lifecycle state from its ``~/get_state`` ("unconfigured", "inactive", "active",
        ...); "" when nothing answers within ``timeout_s``."""
        from lifecycle_msgs.srv import GetState

        client = self._node.create_client(GetState, f"{self.node_name}/get_state")
        try:
            deadline = time.monotonic() + timeout_s
            if not client.wait_for_service(timeout_sec=timeout_s):
                return ""
            while (left := deadline - time.monotonic()) > 0:
                future = client.call_async(GetState.Request())
                if _wait(future, min(left, GET_STATE_RESEND_S)):
                    return str(future.result().current_state.label)
                client.remove_pending_request(future)
            return ""
        finally:
            self._node.destroy_client(client)

    def _wait_for_topic(self, timeout_s: float) -> bool:
        """Make the topic asker and wait until the node takes ``~/question`` and our ``~/answers``
        subscription is matched (an answer published before would be lost)."""
        from embodied_r_ros.msg import SpatialAnswer, SpatialQuestion

        if self._question_pub is None:
            self._question_pub = self._node.create_publisher(
                SpatialQuestion, f"{self.node_name}/question", 10
            )
            self._answers_sub = self._node.create_subscription(
                SpatialAnswer, f"{self.node_name}/answers", self._on_answer, 10
            )
        deadline = time.monotonic() + timeout_s
        while not (self._question_pub.get_subscription_count() and self._answers_sub.get_publisher_count()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def _on_answer(self, message: Any) -> None:
        with self._answers_cond:
            if message.query_id in self._answers:
                self._answers[message.query_id] = message
                self._answers_cond.notify_all()

    def ask(
        self,
        question: str,
        options: Sequence[str] = (),
        window_s: float = 0.0,
        *,
        use_action: bool = False,
        use_topic: bool = False,
        timeout_s: float = 600.0,
        on_feedback: Callable[[str, float], None] | None = None,
        image_wait_s: float = 0.0,
        interval_ns: tuple[int, int] = (0, 0),
        search_memory: bool = False,
        camera: str = "",
    ) -> AskResult:
        """Ask one question (the service; ``use_action``: the action; ``use_topic``: ``~/question``, the
        answer from ``~/answers``); waits up to ``timeout_s`` (then success=false), and up to ``image_wait_s``
        more for the answer's key-frame images. ``interval_ns``: (start, end) camera stamps, 0 = unset.
        ``search_memory``: find the intervals to answer from in the node's memory by content (the window,
        when set, bounds the search). ``camera``: on a node with several cameras, the one to answer from
        ("" = all of them)."""
        from .messages import keyframe_stamps_ns, ns_to_time

        fields = {
            "question": question,
            "options": list(options),
            "window_seconds": float(window_s),
            "start_stamp": ns_to_time(interval_ns[0]),
            "end_stamp": ns_to_time(interval_ns[1]),
            "search_memory": bool(search_memory),
            "camera": camera,
        }
        start = time.monotonic()
        if use_action:
            success, message, answer = self._ask_action(fields, timeout_s, on_feedback)
        elif use_topic:
            success, message, answer = self._ask_topic(fields, timeout_s)
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

    def _ask_topic(self, fields: dict[str, Any], timeout_s: float) -> tuple[bool, str, Any]:
        from embodied_r_ros.msg import SpatialAnswer, SpatialQuestion

        deadline = time.monotonic() + timeout_s
        if not self._wait_for_topic(timeout_s):
            return False, f"no node takes {self.node_name}/question within {timeout_s:g} s", SpatialAnswer()
        query_id = f"{self._node.get_name()}-{next(self._query_ids)}"
        with self._answers_cond:
            self._answers[query_id] = None
        self._question_pub.publish(SpatialQuestion(query_id=query_id, **fields))
        with self._answers_cond:
            answered = self._answers_cond.wait_for(
                lambda: self._answers[query_id] is not None, max(0.0, deadline - time.monotonic())
            )
            answer = self._answers.pop(query_id)
        if not answered:
            return False, f"no answer on {self.node_name}/answers within {timeout_s:g} s", SpatialAnswer()
        return answer.success, answer.message, answer

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
