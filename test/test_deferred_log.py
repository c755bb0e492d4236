"""The deferred logger (embodied_r_ros.ros.deferred_log): the caller never waits for the logger, lines keep
their order and severity, and nothing is lost at close."""

from __future__ import annotations

import threading

import rclpy.logging

from embodied_r_ros.ros.deferred_log import DeferredLogger


class HeldLogger:
    """A logger that cannot log until ``release`` is set: a caller that waited for it would never return."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lines: list[tuple[str, str, str]] = []  # (severity, text, thread name)

    def _log(self, severity: str, text: str) -> None:
        self.release.wait(10.0)
        self.lines.append((severity, text, threading.current_thread().name))

    def warning(self, text: str) -> None:
        self._log("warning", text)

    def info(self, text: str) -> None:
        self._log("info", text)

    def error(self, text: str) -> None:
        self._log("error", text)


def test_the_caller_returns_while_the_logger_is_held_and_the_lines_come_in_order() -> None:
    held = HeldLogger()
    log = DeferredLogger(held, name="test_log")
    log.warning("one")
    log.info("two")
    log.error("three")
    assert held.lines == []  # the caller got here although the logger cannot log yet
    held.release.set()
    log.close()
    expected = [("warning", "one"), ("info", "two"), ("error", "three")]
    assert held.lines == [(severity, text, "test_log") for severity, text in expected]


def test_lines_after_close_are_logged_by_the_caller() -> None:
    held = HeldLogger()
    held.release.set()
    log = DeferredLogger(held, name="test_log")
    log.close()
    log.warning("late")
    assert held.lines == [("warning", "late", threading.current_thread().name)]


def test_the_rclpy_logger_writes_the_deferred_lines(capfd) -> None:
    log = DeferredLogger(rclpy.logging.get_logger("deferred_log_test"))
    log.warning("camera frame dropped: too large")
    log.close()
    err = capfd.readouterr().err
    assert "[WARN]" in err and "[deferred_log_test]: camera frame dropped: too large" in err
