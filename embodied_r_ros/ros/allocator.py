"""The C allocator of the node's process (glibc malloc): memory the models freed goes back to the system.

Python objects, torch tensors on the CPU and image buffers all come from glibc's malloc, which keeps an arena
per thread (up to 8 per core) and keeps freed memory there for reuse. A cleanup frees the models, but their
memory stayed parked in the arenas of the threads that had loaded and run them, and the next cycle ran on
other threads (the executor's, a new query worker, a new camera thread) and filled other arenas: five
configure/cleanup cycles grew the node's anonymous memory by 13 MB a cycle with the tiny models, more with
large ones (``bench/bench_lifecycle_memory.py``). Two calls keep it where the first cycle left it:

- :func:`limit_arenas` (the node's process, first thing, before rclpy's import starts threads:
  ``embodied_r_ros.cli.parts.node_main``): few arenas, so every thread reuses what the last cycle freed;
- :func:`release_free_memory` (after a cleanup): ``malloc_trim`` returns the free pages of every arena to
  the system.

Both do nothing where the C library is not glibc (their functions are missing) or where the user set
``MALLOC_ARENA_MAX`` already.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)
# Arenas of the node's process. Two: the threads that allocate much (the camera's, the query worker, the
# executor's while a transition loads the models) take turns on a lock held for one malloc, instead of each
# keeping its own pool of freed memory.
ARENAS = 2


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def limit_arenas(count: int = ARENAS) -> bool:
    """At most ``count`` malloc arenas in this process from now on (call before threads start); False when
    the C library has no ``mallopt`` or ``MALLOC_ARENA_MAX`` is set (the user's choice stands)."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    mallopt = getattr(_libc(), "mallopt", None)
    return bool(mallopt is not None and mallopt(M_ARENA_MAX, int(count)))


def release_free_memory() -> bool:
    """Return the free memory of every malloc arena to the system (``malloc_trim(0)``); False when the C
    library has none (not glibc) or nothing was returned."""
    trim = getattr(_libc(), "malloc_trim", None)
    return bool(trim is not None and trim(0))
