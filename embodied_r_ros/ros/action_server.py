"""The node's action server, its goal-expiry timer on the steady clock instead of the node's clock.

rcl's action server expires the results of finished goals with a timer on the clock it is given, and rclpy
gives it the node's clock. Under ``use_sim_time`` that is ROS time, and every /clock message then
triggered the timer's guard condition with no goal at all: the node's executor woke at the simulator's
clock rate (100 Hz, measured: 497 wake-ups in 5 s with the action server against 51 without it or on the
steady clock), each one a rebuild of its wait set in Python that took the GIL from the models' threads.
Upstream has fixed several faults of this timer under sim time (ros2/rcl#1303); the wheels of
ROS 2 Kilted installed here still wake.

On the steady clock a result is kept ``result_timeout`` seconds of wall time after its goal finishes
(900 s by default), whatever the simulation's rate; goals are still stamped with the node's clock.
"""

from __future__ import annotations

from typing import Any

from rclpy.action import ActionServer
from rclpy.clock import Clock, ClockType
from rclpy.node import Node


class _SteadyClockView:
    """``node`` as the action server's constructor sees it: the same node, with a steady clock."""

    def __init__(self, node: Node, clock: Clock) -> None:
        self._node, self._clock = node, clock

    def get_clock(self) -> Clock:
        return self._clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)


def steady_action_server(node: Node, action_type: Any, action_name: str, **kwargs: Any) -> ActionServer:
    """``ActionServer(node, action_type, action_name, **kwargs)`` whose goal-expiry timer runs on the steady
    clock (see the module docstring)."""
    clock = Clock(clock_type=ClockType.STEADY_TIME)
    server = ActionServer(_SteadyClockView(node, clock), action_type, action_name, **kwargs)  # type: ignore[arg-type]
    server._node = node  # after construction (goal stamps, logging, destruction): the node itself
    server._expiry_clock = clock  # type: ignore[attr-defined]  # rcl keeps a pointer to it: keep it alive
    return server
