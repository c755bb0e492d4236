"""Counts the waits of rclpy executors in the node's process (``bench/executor_wakeups.py``): a diagnostic.

Python imports ``sitecustomize`` at start from ``PYTHONPATH``; the bench puts this directory there for the
node's process only, with ``EMBODIED_R_WAKEUP_COUNT=PATH``. rclpy's executors build their wait sets from
``rclpy.executors._rclpy.WaitSet``; here that class is a subclass whose ``wait`` counts, per thread, how
often it returned and what it found ready. Every second the totals are appended to PATH as a JSON line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter

_PATH = os.environ.get("EMBODIED_R_WAKEUP_COUNT")
_KINDS = ("subscription", "guard_condition", "timer", "client", "service")


def _install(path: str) -> None:
    import rclpy.executors as executors

    real = executors._rclpy
    waits: Counter[str] = Counter()
    ready: Counter[str] = Counter()

    class CountingWaitSet(real.WaitSet):
        def wait(self, *args):
            result = super().wait(*args)
            waits[threading.current_thread().name] += 1
            for kind in _KINDS:
                found = len(self.get_ready_entities(kind))
                if found:
                    ready[kind] += found
            return result

    class Implementation:
        WaitSet = CountingWaitSet

        def __getattr__(self, name):
            return getattr(real, name)

    executors._rclpy = Implementation()

    def write() -> None:
        while True:
            time.sleep(1.0)
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"t": time.time(), "waits": dict(waits), "ready": dict(ready)}) + "\n")

    threading.Thread(target=write, name="wakeup_count", daemon=True).start()


if _PATH:
    try:
        _install(_PATH)
    except ImportError:
        pass  # not a ROS process
