"""Freed memory goes back to the system once the trainer fixes glibc's thresholds (rl/allocator.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# In a fresh process: glibc's dynamic threshold raised by freeing a 4 MB mmapped block (as a trainer's
# freed logits raise it), then a 256 kB block: on the heap (kept when freed), or with the threshold
# fixed, in a mapping of its own (returned when freed). mallinfo2's hblks counts those mappings.
PROBE = """
import ctypes, sys
from embodied_r_training.rl.allocator import return_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
libc.free(libc.malloc(4 << 20))
if sys.argv[1] == "fixed":
    assert return_freed_memory()
before = libc.mallinfo2().hblks
block = libc.malloc(256 << 10)
print(libc.mallinfo2().hblks - before)
libc.free(block)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_fixed_threshold_maps_large_blocks_on_their_own() -> None:
    def mapped(mode: str) -> int:
        run = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
        return int(run.stdout.strip())

    assert mapped("dynamic") == 0  # the raised threshold: the block lands on the heap
    assert mapped("fixed") == 1
