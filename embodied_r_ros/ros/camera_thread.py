"""A high-rate subscription on a hidden node and a single-threaded executor of its own.

The node's services, action server, timers and its other subscriptions share one
``MultiThreadedExecutor``. Every message wakes that executor: it rebuilds its wait set of all those
entities in Python and hands the callback to a thread pool, a few milliseconds of interpreter time per
wake-up. At 30 Hz of 921 KB frames that overhead, not the camera callback itself (~0.4 ms), set the node's
cost per frame (14.5 ms of CPU against 3.5 ms for a plain subscriber, bench/bench_node_ingest.py), and
while the executor was busy elsewhere best-effort frames were overwritten in the DDS queue. Here the
camera waits on a wait set that holds only it, in its own thread, as a plain subscriber does.

The hidden node (``_<node>_camera``: names starting with ``_`` are left out of ``ros2 node list``) is an
implementation detail: it takes the topic name already resolved by the owning node (remappings and
namespace applied there once) and has no parameters of its own.
"""

from __future__ import annotations

import threading
from typing import Callable

import rclpy
from rclpy._rclpy_pybind11 import RCLError
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile


class SubscriptionThread:
    """``callback`` for ``topic`` (an absolute, resolved name), served by a thread of its own."""

    def __init__(
        self, owner: Node, msg_type: type, topic: str, callback: Callable[..., None], qos: QoSProfile
    ) -> None:
        self.node = rclpy.create_node(
            f"_{owner.get_name()}_camera",
            namespace=owner.get_namespace(),
            context=owner.context,
            use_global_arguments=False,  # the owner applied the remappings to ``topic`` already
            start_parameter_services=False,
            enable_rosout=False,
        )
        self.subscription = self.node.create_subscription(msg_type, topic, callback, qos)
        self.executor = SingleThreadedExecutor(context=owner.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=f"{owner.get_name()}_camera", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException, RCLError):
            pass  # the context was shut down under the wait set: nothing more to take

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop taking messages, join the thread and destroy the hidden node (idempotent)."""
        if self.executor is None:
            return
        self.executor.shutdown(timeout_sec=timeout_s)
        self._thread.join(timeout=timeout_s)
        self.node.destroy_node()
        self.executor = None

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
