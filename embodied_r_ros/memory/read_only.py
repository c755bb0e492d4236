"""A memory store's file opened for reading only (``embodied-r prepare`` trains from it):
:class:`ReadOnlyMemory`, the same queries as the node's store (:class:`~.reader.MemoryReader`) on a file
that is never changed, refused while a node holds it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .files import share_lock
from .reader import MemoryReader, read_status
from .records import MemoryStoreError
from .schema import store_problem


class ReadOnlyMemory(MemoryReader):
    """A memory store's file opened for reading only (``embodied-r prepare`` trains from it): no writer, no
    eviction, nothing moved aside, and the file and its directory left as they were.

    A store the node closed has no write-ahead log: it is read as an immutable file (SQLite creates no
    ``-wal``/``-shm`` beside it). One a node left behind without closing it (``kill -9``) still has its
    ``-wal``, which holds committed rows: it is read with the log, which stays as it was (SQLite may add
    its index file ``NAME-shm``). While reading, a shared lock on the node's ``NAME.lock`` (when there is
    one) keeps a node from opening the file for writing.

    Raises :class:`MemoryStoreError` naming the file and the fix when it does not exist, a running node
    holds it, or it is not a readable memory store. Use as a context manager, or :meth:`close` it.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, 0)
        if not self.path.is_file():
            raise MemoryStoreError(
                f"memory store {self.path} does not exist (or is not a file); a node keeps its memory in "
                "$ROS_HOME/embodied_r/<node name>.sqlite (memory.path)"
            )
        self._lock_file = share_lock(self.path)
        try:
            self._reader = self._connect()
            self._update(**read_status(self._reader, self.path))
        except BaseException:
            self.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        log = Path(str(self.path) + "-wal")
        has_log = log.exists() and log.stat().st_size > 0
        # immutable: no locks, no -wal/-shm created; only right when no log holds rows the file lacks.
        mode = "mode=ro" if has_log else "mode=ro&immutable=1"
        try:
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?{mode}", uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise MemoryStoreError(f"memory store {self.path} cannot be opened for reading: {exc}") from exc
        try:
            problem = store_problem(db)
        except sqlite3.Error as exc:
            db.close()
            raise MemoryStoreError(f"memory store {self.path} cannot be read: {exc}") from exc
        if problem:
            db.close()
            raise MemoryStoreError(
                f"{self.path} is not a memory store an embodied_r node wrote ({problem}); give the .sqlite "
                "file of a node's memory ($ROS_HOME/embodied_r/<node name>.sqlite)"
            )
        return db

    def close(self) -> None:
        """Close the file and let go of the lock (idempotent)."""
        with self._read_lock:
            reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
        if self._lock_file is not None:
            os.close(self._lock_file)
            self._lock_file = None

    def __enter__(self) -> ReadOnlyMemory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
