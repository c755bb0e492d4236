"""The node as a process (executable ``embodied_r_node``): run :class:`~.node.EmbodiedRNode` until SIGINT,
SIGTERM or its lifecycle shutdown transition, on a multi-threaded executor, and shut it down so that
questions in flight still get their reply."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Sequence

import rclpy
from rclpy._rclpy_pybind11 import RCLError
from rclpy.exceptions import InvalidHandle
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from ..config import ConfigError
from ..perceivers import PerceiverRegistry
from .models import ModelLoadError
from .node import EmbodiedRNode
from .params import NODE_NAME

SHUTDOWN_GRACE_S = 3.0  # for the replies of questions in flight, then for the executor
REPLY_FLUSH_S = 0.5  # after the last reply was handed to DDS, before the context goes
SIGNAL_POLL_S = 0.2  # the main thread wakes this often to run a SIGINT/SIGTERM handler
# Python's thread switch interval in the node's process (default 5 ms). A thread that lets go of the GIL
# (a JPEG encode, a file-system call) waits up to this long to get it back while another thread runs
# Python (a generation, the background describer): the camera callback does that a few times per frame.
SWITCH_INTERVAL_S = 0.001


def main(args: Sequence[str] | None = None, *, perceivers: PerceiverRegistry) -> int:
    """Run the node until SIGINT or SIGTERM, its shutdown transition (``ros2 lifecycle set /embodied_r
    shutdown``) or the context's shutdown; returns the exit code (0; 1: bad parameters or models).
    ``perceivers``: what ``perception.perceiver`` may name (the application's registry, see
    ``embodied_r_ros.cli.parts``).

    A launch system stops a node with SIGINT, then SIGTERM: either ends the node within seconds, exit 0, no
    traceback. Questions in flight are answered ``success=false, "shutting down"`` while the node can
    still reply, then the executor and the context are shut down (rclpy's own handlers would invalidate
    the context first, and a service callback waiting for the models would hold the executor up to
    ``query.timeout_s``).
    """
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            node = EmbodiedRNode(perceivers=perceivers)
        except (ConfigError, ModelLoadError) as exc:
            # One line saying what to fix, not a traceback.
            rclpy.logging.get_logger(NODE_NAME).fatal(" ".join(str(exc).split()))
            return 1
        executor = MultiThreadedExecutor(num_threads=node.executor_threads)
        executor.add_node(node)
        spinner = threading.Thread(target=_spin, args=(executor, stop), name="embodied_r_spin", daemon=True)
        spinner.start()
        # A timed wait: the signal may reach another thread (DDS, the camera), and an untimed wait on the
        # main thread is then not interrupted; Python runs the handler only when this thread wakes.
        while not stop.wait(SIGNAL_POLL_S):
            if node.finalized:  # the shutdown transition: its reply goes out while the context lives
                break
        node.get_logger().info("shutting down")
        worker = node.worker
        if worker is not None:
            worker.close(timeout=0.0)  # in-flight questions get "shutting down" now, while replies work
        if node.questions.wait_for_callbacks(timeout_s=SHUTDOWN_GRACE_S):
            time.sleep(REPLY_FLUSH_S)
        executor.shutdown(timeout_sec=SHUTDOWN_GRACE_S)
        spinner.join(timeout=SHUTDOWN_GRACE_S)
        generating = worker is not None and worker.alive
        node.destroy_node()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        rclpy.try_shutdown()
    if generating:
        # A generation still runs in C++ on the worker thread: interpreter finalization would abort the
        # process under it ("terminate called ..."). Everything ROS is closed; leave now.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def _spin(executor: MultiThreadedExecutor, stop: threading.Event) -> None:
    """Spin until the executor or the context shuts down; then end :func:`main`'s wait."""
    try:
        while True:
            try:
                executor.spin()
                return
            except InvalidHandle:
                # An entity destroyed while the executor built its wait set (a lifecycle transition
                # destroying a publisher's QoS event handler: rclpy adds a waitable to the wait set even
                # when entering it failed). The executor starts a new wait set on the next spin.
                continue
    except (KeyboardInterrupt, ExternalShutdownException, RCLError):
        pass  # a context shut down from outside, or a wait set torn down by the shutdown itself
    finally:
        stop.set()
