"""Stall trace for the node's camera callback (``bench_node_soak.py --trace-stalls``): a diagnostic only.

Python imports ``sitecustomize`` at start from ``PYTHONPATH``; the soak puts this directory there for the
node's process only, with ``EMBODIED_R_STALL_TRACE=PATH`` and ``EMBODIED_R_STALL_MS``. Once the node's
inputs module is imported, its camera callback is wrapped: each call arms
:func:`faulthandler.dump_traceback_later`, so a call still running after the threshold gets every thread's
Python stack written to PATH, by faulthandler's C thread, which needs no GIL (a Python watchdog would wait
for the GIL the stall is about). The thread busy in Python or in a C call holding the GIL at that moment is
the one to look at.
"""

from __future__ import annotations

import os
import sys
import threading
import time

_PATH = os.environ.get("EMBODIED_R_STALL_TRACE")
_INPUTS_MODULE = "embodied_r_ros.ros.node_inputs"
_WAIT_FOR_NODE_S = 120.0


def _wrap_camera_callback(path: str, threshold_s: float) -> None:
    import faulthandler

    deadline = time.monotonic() + _WAIT_FOR_NODE_S
    # The module shows in sys.modules as its import starts: wait until it defines the inputs' class.
    while not hasattr(sys.modules.get(_INPUTS_MODULE), "NodeInputs"):
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
    module = sys.modules[_INPUTS_MODULE]
    dump = open(path, "a", buffering=1)  # noqa: SIM115 - kept open for faulthandler's C thread
    dump.write(f"stall trace armed at {time.time():.3f}: camera callbacks over {threshold_s * 1000:.0f} ms\n")
    on_image = module.NodeInputs.on_image

    def traced(self, message, info=None):
        faulthandler.dump_traceback_later(threshold_s, file=dump)
        try:
            return on_image(self, message, info)
        finally:
            faulthandler.cancel_dump_traceback_later()

    module.NodeInputs.on_image = traced  # before activation binds it to the camera subscription


if _PATH and sys.argv and sys.argv[0].endswith("embodied_r_node"):
    threshold = float(os.environ.get("EMBODIED_R_STALL_MS", "100")) / 1000.0
    threading.Thread(target=_wrap_camera_callback, args=(_PATH, threshold), daemon=True).start()
