"""What wakes the node's executor: inputs on threads of their own (with their QoS event handlers) and, under
sim time, /clock must not, or the executor rebuilds its wait set in Python for every message and takes the
GIL from the camera thread and the models (issue 31). Counts of wake-ups over real DDS, not timings."""

from __future__ import annotations

import threading
import time

import pytest
import rclpy.executors as executors
from embodied_r_ros.action import AnswerSpatial
from node_helpers import wait_for
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String

from embodied_r_ros.ros.action_server import steady_action_server
from embodied_r_ros.ros.input_thread import SubscriptionThread
from embodied_r_ros.ros.messages import ns_to_time

MESSAGES = 150  # at 100 Hz: before the fixes each one woke the executor at least once


class _Wakeups:
    """rclpy's executors' wait sets, counting the waits of one thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real = executors._rclpy
        self.thread: threading.Thread | None = None
        self.count = 0
        counter = self

        class CountingWaitSet(real.WaitSet):
            def wait(self, *args):
                result = super().wait(*args)
                if threading.current_thread() is counter.thread:
                    counter.count += 1
                return result

        class Implementation:
            WaitSet = CountingWaitSet

            def __getattr__(self, name):
                return getattr(real, name)

        monkeypatch.setattr(executors, "_rclpy", Implementation())

    def spin(self, executor: SingleThreadedExecutor) -> None:
        self.thread = threading.Thread(target=executor.spin, daemon=True)
        self.thread.start()


def _publish(node: Node, msg_type, topic: str, make, count: int = MESSAGES, rate_hz: float = 100.0) -> None:
    publisher = node.create_publisher(msg_type, topic, QoSProfile(depth=10))
    assert wait_for(lambda: publisher.get_subscription_count() > 0)
    for i in range(count):
        publisher.publish(make(i))
        time.sleep(1.0 / rate_hz)


def test_a_subscription_on_its_own_thread_does_not_wake_the_executor(ros_context, monkeypatch):
    wakeups = _Wakeups(monkeypatch)
    node = Node("wakeups_input", context=ros_context)
    feeder = Node("wakeups_feeder", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    received: list[str] = []
    thread = SubscriptionThread(
        node, String, "/wakeups/input", lambda m, _info: received.append(m.data), QoSProfile(depth=10)
    )
    assert thread.subscription.event_handlers  # rclpy's default QoS event handlers ride on the thread
    try:
        wakeups.spin(executor)
        time.sleep(0.5)
        before = wakeups.count
        _publish(feeder, String, "/wakeups/input", lambda i: String(data=str(i)))
        assert wait_for(lambda: len(received) == MESSAGES)
        assert wakeups.count - before < MESSAGES // 10, wakeups.count - before
    finally:
        thread.close()
        executor.shutdown()
        node.destroy_node()
        feeder.destroy_node()


def test_under_sim_time_clock_messages_do_not_wake_the_action_servers_executor(
    ros_context,
    monkeypatch,
):
    wakeups = _Wakeups(monkeypatch)
    node = Node(
        "wakeups_action", context=ros_context, parameter_overrides=[Parameter("use_sim_time", value=True)]
    )
    feeder = Node("wakeups_clock", context=ros_context)
    server = steady_action_server(node, AnswerSpatial, "~/answer", execute_callback=lambda goal: None)
    # /clock off the executor, as the node takes it (its own thread): what is left is the server's timer.
    source = node._time_source
    node.destroy_subscription(source._clock_sub)
    clock = SubscriptionThread(
        node, Clock, "/clock", lambda m, _info: source.clock_callback(m), QoSProfile(depth=1), name="clock"
    )
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    try:
        wakeups.spin(executor)
        time.sleep(0.5)
        before = wakeups.count
        start_ns = 1_000_000 * 10**9
        _publish(feeder, Clock, "/clock", lambda i: Clock(clock=ns_to_time(start_ns + i * 10**7)))
        assert wait_for(lambda: node.get_clock().now().nanoseconds >= start_ns + (MESSAGES - 1) * 10**7)
        assert wakeups.count - before < MESSAGES // 10, wakeups.count - before
        assert server._node is node  # goals are stamped on the node's (sim) clock
    finally:
        clock.close()
        server.destroy()
        executor.shutdown()
        node.destroy_node()
        feeder.destroy_node()
