"""The node's camera subscription (and its other busy inputs), taken by a thread of its own instead of the
node's executor.

The node's services, action server, timers and its other subscriptions share one
``MultiThreadedExecutor``. Every message wakes that executor: it rebuilds its wait set of all those
entities in Python and hands the callback to a thread pool, a few milliseconds of interpreter time per
wake-up. At 30 Hz of 921 KB frames that overhead, not the camera callback itself (~0.4 ms), set the node's
cost per frame (14.5 ms of CPU against 3.5 ms for a plain subscriber, bench/bench_node_ingest.py), and
while the executor was busy elsewhere best-effort frames were overwritten in the DDS queue. Here the
camera waits on a wait set that holds only it, in its own thread, as a plain subscriber does.

The node's /clock subscription under sim time is taken the same way (100 Hz of wake-ups of the executor
doubled the idle node's CPU), and so are its pose inputs (odometry or /tf, often at the camera's rate):
with them on the executor, its spin thread ran Python for every pose message (120 ms of its CPU within one
200 ms camera callback, measured in a soak), and the camera thread waited for the GIL each time it let go
of it (a JPEG encode, an OpenCV call).

Each subscription still belongs to the node (``ros2 node info`` lists it,
remappings and the namespace apply, a QoS mismatch is reported by the node): it sits in a callback group
that no executor takes from (:class:`OwnThreadGroup`), and its QoS event handlers (incompatible QoS,
message lost, ...) are served by the same thread. They used to run on the node's executor, and with Fast DDS
a wait on them returned whenever messages flowed on the subscription (bench/executor_wakeups.py, idle node:
446 wake-ups a second for a 30 Hz camera, 279 for 30 Hz odometry, 925 for /clock at 100 Hz, ~2.4 once the
events moved), each a rebuild of the executor's wait set in Python under the GIL. The thread
uses the same wait-set calls as rclpy's executors (``rclpy._rclpy_pybind11``: WaitSet, GuardCondition,
``take_message``; EventHandler's ``add_to_wait_set``/``is_ready``/``take_data``/``execute``), stable from
Humble to Kilted.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable

from rclpy._rclpy_pybind11 import RCLError
from rclpy.callback_groups import CallbackGroup
from rclpy.event_handler import EventHandler, SubscriptionEventCallbacks
from rclpy.exceptions import InvalidHandle
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.subscription import Subscription

WAIT_TIMEOUT_NS = 500_000_000  # the thread also wakes this often to notice a context shut down from outside


class OwnThreadGroup(CallbackGroup):
    """A callback group no executor takes from: its subscription and the subscription's QoS event handlers
    are served by a thread of their own (:class:`SubscriptionThread`)."""

    def can_execute(self, entity: Any) -> bool:
        return False

    def beginning_execution(self, entity: Any) -> bool:
        return False

    def ending_execution(self, entity: Any) -> None:
        pass


class SubscriptionThread:
    """``callback(message, info)`` for ``topic`` on ``node``, served by a thread of its own.

    ``event_callbacks``: the subscription's QoS event callbacks (run on the same thread, before the messages
    of the same wake-up); ``name``: the thread's, after the node's ("embodied_r_camera").
    """

    def __init__(
        self,
        node: Node,
        msg_type: type,
        topic: str,
        callback: Callable[[Any, Any], None],
        qos: QoSProfile,
        event_callbacks: SubscriptionEventCallbacks | None = None,
        name: str = "camera",
    ) -> None:
        self._node = node
        self._callback = callback
        self._stop = threading.Event()
        self.subscription = node.create_subscription(
            msg_type,
            topic,
            lambda *_: None,  # never called: no executor takes this subscription's messages
            qos,
            callback_group=OwnThreadGroup(),
            event_callbacks=event_callbacks,
        )
        self._wake = _rclpy.GuardCondition(node.context.handle)
        self._thread = threading.Thread(target=self._spin, name=f"{node.get_name()}_{name}", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        subscription, context = self.subscription, self._node.context
        handlers = list(subscription.event_handlers)
        try:
            with context.handle:
                wait_set = _rclpy.WaitSet(1, 1, 0, 0, 0, len(handlers), context.handle)
            while not self._stop.is_set() and context.ok():
                with subscription.handle, self._wake, contextlib.ExitStack() as held:
                    for handler in handlers:
                        held.enter_context(handler)
                    wait_set.clear_entities()
                    wait_set.add_subscription(subscription.handle)
                    wait_set.add_guard_condition(self._wake)
                    for handler in handlers:
                        handler.add_to_wait_set(wait_set)
                    wait_set.wait(WAIT_TIMEOUT_NS)
                    ready = wait_set.get_ready_entities("subscription")
                    events = [handler for handler in handlers if handler.is_ready(wait_set)]
                for handler in events:
                    self._handle_event(handler)
                if ready:
                    self._take_all()
        except (InvalidHandle, RCLError):
            pass  # the subscription or the context was destroyed under the wait: nothing more to take

    def _handle_event(self, handler: EventHandler) -> None:
        """Take a QoS event and run its callback (EventHandler.execute awaits nothing: one step runs it)."""
        data = handler.take_data()
        if data is None:
            return
        step = handler.execute(data)
        try:
            step.send(None)
        except StopIteration:
            pass
        except Exception as exc:  # a callback's fault must not end the subscription's thread
            self._node.get_logger().error(f"QoS event callback of {self.topic_name} failed: {exc!r}")
        else:
            step.close()

    def _take_all(self) -> None:
        """Take every message waiting in the subscription's queue (a wake-up may find several)."""
        subscription = self.subscription
        while not self._stop.is_set():
            with subscription.handle:
                taken = subscription.handle.take_message(subscription.msg_type, subscription.raw)
            if taken is None:
                return
            self._callback(*taken)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop taking messages, join the thread and destroy the subscription (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        try:
            self._wake.trigger_guard_condition()
        except (InvalidHandle, RCLError):
            pass
        self._thread.join(timeout=timeout_s)
        self._node.destroy_subscription(self.subscription)
        self._wake.destroy_when_not_in_use()

    @property
    def topic_name(self) -> str:
        """The subscription's resolved topic."""
        return self.subscription.topic_name

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


def subscribe_input(
    node: Node,
    msg_type: type,
    topic: str,
    callback: Callable[..., None],
    qos: QoSProfile,
    callback_group: CallbackGroup | None,
    own_thread: bool,
    name: str,
    *,
    event_callbacks: SubscriptionEventCallbacks | None = None,
    with_info: bool = False,
) -> Subscription | SubscriptionThread:
    """A subscription of ``node`` calling ``callback(message)``, or ``callback(message, info)`` with the
    message's MessageInfo (``with_info``): served by a thread of its own named after ``name`` with its
    QoS ``event_callbacks`` (``own_thread``, see the module docstring), else by the node's executor in
    ``callback_group``. Remove it with :func:`close_input`."""
    if own_thread:
        call = callback if with_info else (lambda message, _info: callback(message))
        return SubscriptionThread(node, msg_type, topic, call, qos, event_callbacks, name=name)
    return node.create_subscription(
        msg_type, topic, callback, qos, callback_group=callback_group, event_callbacks=event_callbacks
    )


def close_input(node: Node, subscription: Subscription | SubscriptionThread) -> None:
    """Remove a subscription :func:`subscribe_input` made (its thread stopped and joined first)."""
    if isinstance(subscription, SubscriptionThread):
        subscription.close()
    else:
        node.destroy_subscription(subscription)
