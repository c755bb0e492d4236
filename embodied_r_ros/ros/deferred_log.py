"""Log lines from threads that must not wait: the camera thread hands its warnings to a thread of their own.

rclpy's logger does much more than write a line: every call, even one a throttle then suppresses, looks up
its caller (``inspect.getframeinfo``, ``os.path.realpath``), dozens of file-system calls that each let go
of the GIL. While another thread runs Python (a generation, the background describer), taking the GIL
back costs up to the interpreter's switch interval each time: one warning held the camera callback for
60-250 ms (0.75 ms on an idle process; 32 ms median, 143 ms max beside one busy thread, measured), long
enough to overflow the camera's queue. A :class:`DeferredLogger` queues the line (a lock-free put) and a
daemon thread logs it, so the caller returns at once; lines keep their order and their severity.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

_STOP = object()


class DeferredLogger:
    """``warning``/``info``/``error`` put the line on a queue; a daemon thread named ``name`` logs it with
    ``logger`` (an rclpy logger, or anything with those methods). :meth:`close` logs what is queued and
    stops the thread; lines handed over after that are logged by the caller itself."""

    def __init__(self, logger: Any, name: str = "log") -> None:
        self._logger = logger
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()  # a line put as close() runs is either queued before the stop or logged
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def warning(self, text: str) -> None:
        """Log ``text`` as a warning, from the logging thread."""
        self._put("warning", text)

    def info(self, text: str) -> None:
        """Log ``text`` as information, from the logging thread."""
        self._put("info", text)

    def error(self, text: str) -> None:
        """Log ``text`` as an error, from the logging thread."""
        self._put("error", text)

    def close(self, timeout_s: float = 2.0) -> None:
        """Log the lines still queued (waiting up to ``timeout_s``) and stop the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    def _put(self, severity: str, text: str) -> None:
        with self._lock:
            if not self._closed:
                self._queue.put((severity, text))
                return
        getattr(self._logger, severity)(text)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            severity, text = item
            try:
                getattr(self._logger, severity)(text)
            except Exception:  # noqa: BLE001 - one line that cannot be logged must not end the others
                pass
