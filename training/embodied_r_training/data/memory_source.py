"""A robot's durable memory as a training source: the key frames a node answers a window with from it.

A node with ``memory.enabled`` keeps every candidate frame, its key-frame decision and the poses in one
SQLite file (:mod:`embodied_r_ros.memory.store`, ``$ROS_HOME/embodied_r/<node name>.sqlite``).
``embodied-r prepare`` reads such a file where a bag goes: the file is opened for reading only
(:class:`~embodied_r_ros.memory.read_only.ReadOnlyMemory`: never changed, refused while a node holds it) and
each window is answered by :meth:`RobotHistory.keyframes <embodied_r_ros.history.RobotHistory.keyframes>`
over it, the very code a node runs when a question reaches before its RAM (a restarted node: everything
from the memory): the stored decisions of the window's candidates, its first and last candidate, the clamp
to [``keyframes.min_keyframes``, ``keyframes.max_keyframes``], the stored images and the stored poses.
Only the store's current timeline (its newest run of stamps) is answered from, as the node does.

A node still running answers a window that reaches its newest frame with that frame (from RAM), which the
store holds only when it was a candidate; every other window gets the same key frames from both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from embodied_r_ros.config import BufferConfig, KeyFrameConfig
from embodied_r_ros.history import EmptyHistoryError, RobotHistory
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.memory.reader import MemoryReader
from embodied_r_ros.memory.records import MemoryStoreError
from embodied_r_ros.node_config import PoseConfig
from embodied_r_ros.windows import Window, WindowError, format_stamp

MEMORY_SUFFIX = ".sqlite"  # what the node names its memory files
_SQLITE_HEADER = b"SQLite format 3\x00"


def is_memory_store(path: str | Path) -> bool:
    """Whether a question's ``bag`` names a memory store (a file named ``*.sqlite``, or any SQLite file)
    and not a rosbag2 bag (a directory)."""
    path = Path(path)
    if path.suffix == MEMORY_SUFFIX:
        return True
    if not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            return handle.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False


def memory_keyframes(
    memory: MemoryReader,
    windows: Sequence[tuple[int, int]],
    config: KeyFrameConfig,
    max_gap_s: float = PoseConfig.max_gap_s,
) -> list[list[KeyFrame] | MemoryStoreError]:
    """Key frames of each window [start_ns, end_ns] (camera stamps) as a node holding ``memory`` answers it
    from the memory, with ``config`` its ``keyframes`` parameters and ``max_gap_s`` its ``pose.max_gap_s``
    (a key frame farther than that from a stored pose gets none).

    Returns per window its key frames or the error that ended it, naming the store: outside what it holds,
    or no frame in it."""
    history = RobotHistory(BufferConfig(), config, odometry_max_gap_s=max_gap_s, memory=memory)
    results: list[list[KeyFrame] | MemoryStoreError] = []
    for start, end in windows:
        where = f"window {format_stamp(start)} - {format_stamp(end)} of memory store {memory.path}"
        try:
            found = history.keyframes(Window(start_ns=start, end_ns=end), default_s=0.0)
        except WindowError as exc:
            results.append(MemoryStoreError(f"{where}: {exc}"))
            continue
        except EmptyHistoryError:  # the memory did not answer: it holds nothing, or a read failed
            results.append(MemoryStoreError(f"{where}: the store could not be read or holds no frames"))
            continue
        if not found.keyframes:
            results.append(MemoryStoreError(f"{where} holds no frames"))
        else:
            results.append(found.keyframes)
    return results
