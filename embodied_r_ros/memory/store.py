"""The robot's durable memory: every candidate frame of the key-frame selector, its decision, the poses and
the descriptions, in one SQLite file that outlives the process. :class:`MemoryStore` is the node's: it
opens the file, queues the writes and commits them on its writer thread.

Why SQLite (the standard library's ``sqlite3``): one file, no server, transactions that are all there or
not at all after a ``kill -9`` or a power cut (write-ahead log, ``synchronous=FULL``), readers that never
block the writer (WAL), and indexed range queries by stamp, which is what a question's window asks for.
A bag (MCAP/rosbag2) is append-only too but has no index for "the candidates between two stamps" or a
place for descriptions written later; we would build both ourselves.

The parts, one job each: :mod:`.schema` (the tables, what is stored, timelines), :mod:`.records` (the
rows, status and error handed to callers), :mod:`.reader` (the queries, :class:`~.reader.MemoryReader`),
:mod:`.commit` (the queued rows and their transaction), :mod:`.budget` (eviction), :mod:`.files` (paths,
the lock, a corrupt file set aside) and :mod:`.read_only` (:class:`~.read_only.ReadOnlyMemory`, the same
queries on a file opened read-only, for ``embodied-r prepare``).

Writes never wait on the disk: :meth:`MemoryStore.add_candidate` (the camera thread),
:meth:`~MemoryStore.add_pose` and :meth:`~MemoryStore.add_description` put a row on a bounded queue (full:
the row is dropped and counted) and a writer thread commits them in small transactions, every
:data:`COMMIT_S` seconds or :data:`COMMIT_ROWS` rows; what a commit wrote survives a kill. RAM stays
flat: nothing of the store is held in memory beyond the queue and counters. After each commit the writer
keeps the disk budget (:mod:`.budget`).

Failures are never fatal: a file that is not a readable store (corrupt, another program's) is named,
moved aside as ``NAME.corrupt-TIME`` and a fresh store starts; a path that cannot be written, or a full
disk, disables the store with a message naming the path and the fix (:attr:`MemoryStatus.problem`), and
the node answers from its RAM history alone.
"""

from __future__ import annotations

import math
import os
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..frames import NS_PER_S, Pose
from .budget import checkpoint, evict, give_back_pages
from .commit import QueuedCandidate, QueuedDescription, QueuedPose, QueuedRow, write_rows
from .files import (
    move_aside,
    size_on_disk,
    take_lock,
    unreadable,
)
from .reader import CONTROL_TIMEOUT_S, MemoryReader, read_status
from .records import MemoryStatus, MemoryStoreError
from .schema import initialise, row_counts, start_key, transaction

COMMIT_S = 0.5  # a row waits at most this long for its commit (what a kill -9 may lose)
COMMIT_ROWS = 64  # or this many rows, whichever comes first
QUEUE_ITEMS = 1024  # rows waiting for the writer: a stalled disk costs at most ~100 frames of RAM
POSE_PERIOD_NS = NS_PER_S // 10  # poses kept at 10 Hz: interpolation error at robot speeds is negligible
_FULL_CODE = 13  # SQLITE_FULL (sqlite3.Error.sqlite_errorcode & 0xFF)


@dataclass(frozen=True)
class _Control:
    """A command for the writer: "flush", "clear" or "close"; ``done`` is set when it ran."""

    kind: str
    done: threading.Event


class MemoryStore(MemoryReader):
    """The durable memory in one SQLite file (see the module docstring), written and read.

    Opening never raises for the file's sake: check :attr:`enabled` and :meth:`status` (``problem``,
    ``moved_aside``). ``on_problem`` hears, once, from the writer thread, why a store that was writing
    stopped (a full disk). ``max_page_count`` caps the file in pages (SQLite's own limit: a full disk for
    tests).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        disk_budget_mb: float,
        *,
        on_problem: Callable[[str], None] | None = None,
        commit_s: float = COMMIT_S,
        commit_rows: int = COMMIT_ROWS,
        queue_items: int = QUEUE_ITEMS,
        max_page_count: int | None = None,
    ) -> None:
        if not disk_budget_mb > 0:
            raise ValueError(f"memory.disk_budget_mb must be > 0, got {disk_budget_mb}")
        super().__init__(path, int(disk_budget_mb * 2**20))
        self.commit_s, self.commit_rows = commit_s, commit_rows
        self._on_problem = on_problem
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_items)
        self._writer: sqlite3.Connection | None = None
        self._lock_file: int | None = None
        self._thread: threading.Thread | None = None
        self._last_pose_ns: int | None = None  # the odometry thread's downsampling
        self._open(max_page_count)

    # ---------------------------------------------------------------------------------------- opening

    def _open(self, max_page_count: int | None) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_file = take_lock(self.path)
            moved = self._connect()
            assert self._writer is not None
            if max_page_count is not None:
                self._writer.execute(f"PRAGMA max_page_count = {int(max_page_count)}")
            self._reader = sqlite3.connect(self.path, check_same_thread=False)
            self._reader.execute("PRAGMA query_only = 1")
            self._update(moved_aside=moved, enabled=True, **read_status(self._writer, self.path))
        except (OSError, sqlite3.Error, MemoryStoreError) as exc:
            self._close_connections()
            self._update(enabled=False, problem=self._explain(exc))
            return
        self._thread = threading.Thread(target=self._run, name="embodied_r_memory", daemon=True)
        self._thread.start()

    def _connect(self) -> str:
        """Open (or create) the file as a store; an unreadable one is moved aside first. Returns where it
        went ("" when none was)."""
        moved = ""
        problem = unreadable(self.path)
        if problem:
            moved = move_aside(self.path, problem)
        self._writer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        initialise(self._writer, self.path)
        return moved

    def _explain(self, exc: BaseException) -> str:
        """The message for a store that cannot write: what happened, the path, the fix."""
        if isinstance(exc, MemoryStoreError):
            return str(exc)
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code == _FULL_CODE:
            return (
                f"memory store {self.path}: the disk (or the file's size limit) is full ({exc}); free space "
                "there or lower memory.disk_budget_mb; answering from RAM only (buffer.history_s)"
            )
        return (
            f"memory store {self.path} cannot be written ({type(exc).__name__}: {exc}); set memory.path to a "
            "file in a writable directory (or fix its permissions), or memory.enabled false to run without "
            "a memory; answering from RAM only (buffer.history_s)"
        )

    # ----------------------------------------------------------------------------------------- status

    @property
    def enabled(self) -> bool:
        """Whether the store is open and writing."""
        with self._status_lock:
            return self._status.enabled

    @property
    def readable(self) -> bool:
        """Whether questions may be answered from it: while it is open and writing (:attr:`enabled`)."""
        return self.enabled

    def status(self) -> MemoryStatus:
        """What the store holds now (cheap: counters kept by the writer, no query)."""
        with self._status_lock:
            return replace(self._status, backlog=self._queue.qsize())

    def _disable(self, exc: BaseException) -> None:
        """Stop writing for good (from the writer thread); say why once."""
        problem = self._explain(exc)
        self._update(enabled=False, problem=problem)
        if self._on_problem is not None:
            self._on_problem(problem)

    # ----------------------------------------------------------------------------------------- writes

    def add_candidate(
        self,
        stamp_ns: int,
        kept: bool,
        overlap: float | None,
        reason: str,
        payload: np.ndarray,
        frame_id: str = "",
    ) -> bool:
        """Queue one candidate frame (its stored payload: 1-D JPEG bytes or HxWx3 RGB pixels, not to be
        changed afterwards) and its decision; never waits. False when disabled or the queue is full."""
        overlap = None if overlap is None or not math.isfinite(overlap) else float(overlap)
        return self._put(QueuedCandidate(int(stamp_ns), bool(kept), overlap, reason, frame_id, payload))

    def add_pose(self, stamp_ns: int, pose: Pose) -> bool:
        """Queue a pose sample, unless one was queued less than :data:`POSE_PERIOD_NS` before it (one
        caller thread: the odometry's); never waits."""
        last = self._last_pose_ns
        if last is not None and 0 <= stamp_ns - last < POSE_PERIOD_NS:
            return False
        if self._put(QueuedPose(int(stamp_ns), pose)):
            self._last_pose_ns = int(stamp_ns)
            return True
        return False

    def add_description(
        self,
        stamp_ns: int,
        text: str,
        model: str,
        *,
        question_agnostic: bool,
        question: str = "",
        timeline: int | None = None,
        embedding: np.ndarray | None = None,
        embedding_model: str = "",
    ) -> bool:
        """Queue a description of the frame at ``stamp_ns`` written by ``model``; never waits.

        ``timeline``: the timeline the frame was read from (None: the current one when it commits), so a
        description written while the stamps jump back stays with its frame. ``embedding``: the text's
        vector for :meth:`search` (stored as float32), made by ``embedding_model``."""
        vector = None if embedding is None else np.asarray(embedding, dtype=np.float32).ravel().tobytes()
        row = QueuedDescription(
            int(stamp_ns), text, model, question_agnostic, question, time.time_ns(), timeline, vector,
            embedding_model,
        )  # fmt: skip
        return self._put(row)

    def _put(self, row: QueuedRow) -> bool:
        if not self.enabled:
            return False
        try:
            self._queue.put_nowait(row)
        except queue.Full:
            with self._status_lock:
                self._status = replace(self._status, dropped=self._status.dropped + 1)
            return False
        return True

    def flush(self, timeout_s: float = CONTROL_TIMEOUT_S) -> bool:
        """Wait until every row queued so far is committed; False when disabled or past ``timeout_s``."""
        return self._control("flush", timeout_s)

    def clear(self, timeout_s: float = CONTROL_TIMEOUT_S) -> bool:
        """Delete everything stored (rows queued before this call too) and give the pages back; False when
        disabled or past ``timeout_s``."""
        return self._control("clear", timeout_s)

    def close(self, timeout_s: float = CONTROL_TIMEOUT_S) -> None:
        """Commit what is queued, stop the writer and close the file (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            done = threading.Event()
            try:
                self._queue.put(_Control("close", done), timeout=timeout_s)
                done.wait(timeout_s)
            except queue.Full:
                pass
            thread.join(timeout_s)
        self._update(enabled=False, problem=self.status().problem or "closed")
        self._close_connections()

    def _control(self, kind: str, timeout_s: float) -> bool:
        if not self.enabled or self._thread is None:
            return False
        done = threading.Event()
        try:
            self._queue.put(_Control(kind, done), timeout=timeout_s)
        except queue.Full:
            return False
        return done.wait(timeout_s)

    def _close_connections(self) -> None:
        with self._read_lock:
            reader, self._reader = self._reader, None
        for db in (reader, self._writer):
            if db is not None:
                db.close()
        self._writer = None
        if self._lock_file is not None:
            os.close(self._lock_file)  # releases the flock
            self._lock_file = None

    # ------------------------------------------------------------------------------- the writer thread

    def _run(self) -> None:
        pending: list[QueuedRow] = []
        deadline = math.inf
        while True:
            timeout = None if not pending else max(0.0, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            if item is not None and not isinstance(item, _Control):
                if not pending:
                    deadline = time.monotonic() + self.commit_s
                pending.append(item)
                if len(pending) < self.commit_rows and time.monotonic() < deadline:
                    continue
            if pending:
                self._commit(pending)
                pending = []
            if isinstance(item, _Control):
                if item.kind == "clear" and self.enabled:
                    self._clear()
                if item.kind == "close":
                    self._checkpoint()
                    item.done.set()
                    return
                item.done.set()

    def _commit(self, rows: list[QueuedRow]) -> None:
        """Write ``rows`` in one transaction; then keep the budget. A failure disables the store."""
        if not self.enabled:
            return
        db = self._writer
        assert db is not None
        status = self.status()
        try:
            done = write_rows(db, rows, status.timeline, status.oldest_ns, status.newest_ns)
            with self._status_lock:
                s = self._status
                self._status = replace(
                    s,
                    timeline=done.timeline,
                    oldest_ns=done.oldest_ns,
                    newest_ns=done.newest_ns,
                    frames=s.frames + done.frames,
                    keyframes=s.keyframes + done.keyframes,
                    poses=s.poses + done.poses,
                    descriptions=s.descriptions + done.descriptions,
                )
            self._keep_budget()
            self._update(size_bytes=size_on_disk(self.path))
        except sqlite3.Error as exc:
            self._disable(exc)

    def _keep_budget(self) -> None:
        """Over the budget: evict the oldest rows (:func:`~.budget.evict`) and count what is left."""
        db = self._writer
        assert db is not None
        evicted = evict(db, self.budget_bytes)
        if evicted is None:
            return
        timeline = self.status().timeline
        oldest = db.execute("SELECT MIN(stamp_ns) FROM frames WHERE timeline = ?", (timeline,)).fetchone()[0]
        counts = row_counts(db)
        with self._status_lock:
            s = self._status
            self._status = replace(
                s,
                **counts,
                oldest_ns=oldest,
                newest_ns=s.newest_ns if oldest is not None else None,
                evicted_frames=s.evicted_frames + evicted,
            )

    def _clear(self) -> None:
        db = self._writer
        assert db is not None
        try:
            with transaction(db):
                for table in ("frames", "poses", "descriptions"):
                    db.execute(f"DELETE FROM {table}")
                db.execute("DELETE FROM meta WHERE key LIKE ?", (start_key("%"),))
            give_back_pages(db)
            self._last_pose_ns = None
            self._update(
                oldest_ns=None, newest_ns=None, frames=0, keyframes=0, poses=0, descriptions=0,
                size_bytes=size_on_disk(self.path),
            )  # fmt: skip
        except sqlite3.Error as exc:
            self._disable(exc)

    def _checkpoint(self) -> None:
        """Copy the log into the file and cut it back (skipped while a reader holds an old snapshot)."""
        if self._writer is not None:
            checkpoint(self._writer)
