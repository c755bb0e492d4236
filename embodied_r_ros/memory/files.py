"""The memory store's files: where a node keeps its store, the lock that gives one process the file, its
size on disk, and the setting aside of a file that is not a readable store.

A file that is not a readable store (corrupt, another program's) is named and moved aside as
``NAME.corrupt-TIME`` (with its ``-wal`` and ``-shm``), so that a fresh store can start in its place.
``NAME.lock`` beside the store: the node holds an exclusive lock on it while the store is open, a reader
(:class:`~.read_only.ReadOnlyMemory`) a shared one.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Mapping

from .records import MemoryStoreError
from .schema import store_problem


def default_memory_path(node_name: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where the node ``node_name`` (fully qualified, e.g. ``/robot/embodied_r``) keeps its memory:
    ``$ROS_HOME/embodied_r/robot.embodied_r.sqlite`` (ROS_HOME defaults to ``~/.ros``), one file per
    node name, so that two nodes never share one (ROS names hold no dots)."""
    environ = os.environ if environ is None else environ
    home = Path(environ.get("ROS_HOME") or Path.home() / ".ros").expanduser()
    parts = [part for part in node_name.split("/") if part]
    return home / "embodied_r" / f"{'.'.join(parts) or 'embodied_r'}.sqlite"


def memory_path(configured: str, node_name: str, environ: Mapping[str, str] | None = None) -> Path:
    """``memory.path`` made absolute: empty -> :func:`default_memory_path`; ``~`` expanded; a relative path
    resolves beside the default (a launch file's working directory is anyone's guess)."""
    default = default_memory_path(node_name, environ)
    if not configured.strip():
        return default
    path = Path(configured).expanduser()
    return path if path.is_absolute() else default.parent / path


def camera_memory_path(path: Path, camera: str) -> Path:
    """The memory file of camera ``camera`` of a node with several cameras: ``path`` with the camera's
    name before its suffix (``robot.embodied_r.front.sqlite``), so that each camera's frames, key frames and
    descriptions stay apart; ``path`` itself for a node's one camera (``camera`` "")."""
    if not camera:
        return path
    return path.with_name(f"{path.stem}.{camera}{path.suffix or '.sqlite'}")


def size_on_disk(path: Path) -> int:
    """The file and its write-ahead log, in bytes."""
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.stat(str(path) + suffix).st_size
        except OSError:
            pass
    return total


def lock_path(path: Path) -> Path:
    """``NAME.lock``: the node holds an exclusive lock on it while the store is open."""
    return path.with_name(path.name + ".lock")


def _flock(fd: int, operation: int) -> bool:
    """Take ``operation`` (LOCK_EX, LOCK_SH) on ``fd`` without waiting; False, with ``fd`` closed, when
    another process holds a lock that conflicts."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    return True


def take_lock(path: Path) -> int:
    """An exclusive lock on ``NAME.lock`` (its file descriptor: closing it lets go) for the store's life: a
    second node (or process) on the same file is refused instead of interleaving its frames."""
    lock = lock_path(path)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    if not _flock(fd, fcntl.LOCK_EX):
        raise MemoryStoreError(
            f"memory store {path} is in use by another node or process ({lock} is locked); "
            "give each node its own memory.path (the default is one file per node name)"
        ) from None
    return fd


def share_lock(path: Path) -> int | None:
    """A shared lock on the node's ``NAME.lock`` (its file descriptor; None when there is none: a copied
    file); refused while a node holds it."""
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None  # none (a copied file, never opened by a node here), or another user's
    if not _flock(fd, fcntl.LOCK_SH):
        raise MemoryStoreError(
            f"memory store {path} is in use by a running node ({lock} is locked): stop the "
            "node (or clean it up: that closes its memory), or copy the store while it runs with "
            f'`sqlite3 {path} ".backup COPY.sqlite"` and read the copy'
        ) from None
    return fd


def unreadable(path: Path) -> str:
    """Why the existing file is not a readable store of ours ("" when it is, or when there is none); raises
    sqlite3.Error when it cannot be opened at all (permissions)."""
    if not path.exists() or path.stat().st_size == 0:
        return ""
    db = sqlite3.connect(path)
    try:
        return store_problem(db)
    finally:
        db.close()


def move_aside(path: Path, problem: str) -> str:
    """Rename the file (and its -wal, -shm) to ``NAME.corrupt-TIME``; returns the message to log."""
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return f"memory store {path} was set aside as {target} ({problem}); a fresh store starts"
