"""The robot's durable memory: every candidate frame of the key-frame selector, its decision, the poses and
the descriptions, in one SQLite file that outlives the process.

Why SQLite (the standard library's ``sqlite3``): one file, no server, transactions that are all there or
not at all after a ``kill -9`` or a power cut (write-ahead log, ``synchronous=FULL``), readers that never
block the writer (WAL), and indexed range queries by stamp, which is what a question's window asks for.
A bag (MCAP/rosbag2) is append-only too but has no index for "the candidates between two stamps" or a
place for descriptions written later; we would build both ourselves.

What is stored (tables, see :data:`SCHEMA`):

* ``frames``: every candidate of the selector's grid (``keyframes.candidate_fps``, the frames the RAM
  buffer stores), as the buffer stores it (downscaled JPEG bytes, or raw pixels with
  ``buffer.jpeg_quality`` 0), with its key-frame decision (kept, overlap, reason) and the camera's
  ``frame_id``. Storing the candidates and not only the kept frames lets a window answered from the store
  follow the very rule a window in RAM follows (first and last candidate, the clamp's sampled frames).
* ``poses``: the camera's poses, at most one sample per :data:`POSE_PERIOD_NS` (10 Hz).
* ``descriptions``: text a perceiver wrote for a stamp, with the model that wrote it, whether it was
  question-agnostic, the question it answered, and for question-agnostic ones the text's embedding and its
  model (:meth:`MemoryStore.search`: retrieval by content, see :mod:`.memory_search`).

Stamps live on *timelines*: a candidate stamped at or before the newest one of the current timeline (a
bag played again, a simulation restarted, a node restarted on an older bag) starts a new timeline, so
two runs over the same stamps never mix; questions are answered from the current timeline.

Writes never wait on the disk: :meth:`MemoryStore.add_candidate` (the camera thread),
:meth:`~MemoryStore.add_pose` and :meth:`~MemoryStore.add_description` put a row on a bounded queue (full:
the row is dropped and counted) and a writer thread commits them in small transactions, every
:data:`COMMIT_S` seconds or :data:`COMMIT_ROWS` rows; what a commit wrote survives a kill. RAM stays
flat: nothing of the store is held in memory beyond the queue and counters.

Disk budget: after each commit, when the pages in use exceed the budget, the oldest frames (insertion
order) are deleted in chunks down to :data:`LOW_WATER` of the budget, with the poses and descriptions
older than the oldest frame left; an incremental vacuum and a checkpoint then give the pages back, so the
file stops growing at the budget (plus the write-ahead log, at most :data:`WAL_LIMIT_BYTES` after a
checkpoint).

Failures are never fatal: a file that is not a readable store (corrupt, another program's) is named,
moved aside as ``NAME.corrupt-TIME`` and a fresh store starts; a path that cannot be written, or a full
disk, disables the store with a message naming the path and the fix (:attr:`MemoryStatus.problem`), and
the node answers from its RAM history alone.

Reading only (:class:`ReadOnlyMemory`, for ``embodied-r prepare``): the same queries
(:class:`MemoryReader`, one implementation each) on a file opened read-only, never changed, refused while
a node holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from ..clip_buffer import decode_payload
from ..frames import NS_PER_S, Pose
from ..poses.pose_history import PoseHistory

SCHEMA_VERSION = "1"
COMMIT_S = 0.5  # a row waits at most this long for its commit (what a kill -9 may lose)
COMMIT_ROWS = 64  # or this many rows, whichever comes first
QUEUE_ITEMS = 1024  # rows waiting for the writer: a stalled disk costs at most ~100 frames of RAM
POSE_PERIOD_NS = NS_PER_S // 10  # poses kept at 10 Hz: interpolation error at robot speeds is negligible
LOW_WATER = 0.9  # eviction frees down to this share of the budget, so it runs once per 10 % of it
EVICT_MIN_ROWS = 16  # and deletes at least this many frames at a time
WAL_LIMIT_BYTES = 8 * 2**20  # the write-ahead log is cut back to this after a checkpoint
CONTROL_TIMEOUT_S = 5.0  # flush, clear and close wait this long for the writer
SEARCH_CHUNK = 4096  # description vectors read at a time by a search (384-d float32: 6 MB)

_POSE_COLUMNS = "stamp_ns, x, y, z, qx, qy, qz, qw"
# SQLite's primary result codes (sqlite3.Error.sqlite_errorcode & 0xFF).
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_FULL_CODE = 13  # SQLITE_FULL

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frames (
    id INTEGER PRIMARY KEY,         -- insertion order: eviction goes by it
    timeline INTEGER NOT NULL,
    stamp_ns INTEGER NOT NULL,
    kept INTEGER NOT NULL,          -- 1: the selector kept it as a key frame
    overlap REAL,                   -- with the key frame it was judged against (NULL: first, match failed)
    reason TEXT NOT NULL,           -- why it was kept (keyframes.REASON_*), '' when it was not
    frame_id TEXT NOT NULL,         -- the camera's frame
    encoding TEXT NOT NULL,         -- jpeg, or rgb8 (raw pixels, height x width x 3)
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    image BLOB NOT NULL,
    UNIQUE (timeline, stamp_ns)
);
CREATE TABLE IF NOT EXISTS poses (
    timeline INTEGER NOT NULL,
    stamp_ns INTEGER NOT NULL,
    x REAL NOT NULL, y REAL NOT NULL, z REAL NOT NULL,
    qx REAL NOT NULL, qy REAL NOT NULL, qz REAL NOT NULL, qw REAL NOT NULL,
    PRIMARY KEY (timeline, stamp_ns)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS descriptions (
    id INTEGER PRIMARY KEY,
    timeline INTEGER NOT NULL,
    stamp_ns INTEGER NOT NULL,      -- the frame described
    text TEXT NOT NULL,
    model TEXT NOT NULL,            -- what wrote it (the perceiver and its model)
    question_agnostic INTEGER NOT NULL,
    question TEXT NOT NULL,         -- the question it was written for ('' when question-agnostic)
    written_ns INTEGER NOT NULL,    -- wall clock
    embedding BLOB,                 -- float32 vector, for retrieval by content (NULL until computed)
    embedding_model TEXT
);
CREATE INDEX IF NOT EXISTS descriptions_by_stamp ON descriptions (timeline, stamp_ns);
"""


class MemoryStoreError(RuntimeError):
    """The store cannot do what was asked (it is disabled or closed); the message says why."""


@dataclass(frozen=True)
class StoredCandidate:
    """One candidate's key-frame decision as stored (no image)."""

    stamp_ns: int
    kept: bool
    overlap: float | None
    reason: str


@dataclass(frozen=True)
class StoredFrame:
    """One stored candidate's image (RGB, decoded like the buffer's) and camera frame."""

    stamp_ns: int
    image: np.ndarray
    frame_id: str


@dataclass(frozen=True)
class StoredDescription:
    """A description of one frame, as stored."""

    stamp_ns: int
    text: str
    model: str
    question_agnostic: bool
    question: str


@dataclass(frozen=True)
class SearchHit:
    """A question-agnostic description that matched a search, with its cosine similarity to the query."""

    stamp_ns: int
    score: float
    text: str


@dataclass(frozen=True)
class MemoryStatus:
    """What the store holds and how it is doing (for /diagnostics); counts cover every timeline."""

    path: str
    budget_bytes: int
    enabled: bool = False  # open and writing
    problem: str = ""  # why it is disabled ("" while enabled)
    moved_aside: str = ""  # where an unreadable file found at open went
    timeline: int = 0
    oldest_ns: int | None = None  # the current timeline's committed span
    newest_ns: int | None = None
    frames: int = 0
    keyframes: int = 0
    poses: int = 0
    descriptions: int = 0
    size_bytes: int = 0  # the file and its write-ahead log on disk
    backlog: int = 0  # rows waiting for the writer
    dropped: int = 0  # rows dropped because the queue was full
    evicted_frames: int = 0  # frames deleted to stay within the budget (since open)


@dataclass(frozen=True)
class _Candidate:
    stamp_ns: int
    kept: bool
    overlap: float | None
    reason: str
    frame_id: str
    payload: np.ndarray


@dataclass(frozen=True)
class _Pose:
    stamp_ns: int
    pose: Pose


@dataclass(frozen=True)
class _Description:
    stamp_ns: int
    text: str
    model: str
    question_agnostic: bool
    question: str
    written_ns: int
    timeline: int | None  # the timeline of the frame described (None: the current one at commit)
    embedding: bytes | None
    embedding_model: str


@dataclass(frozen=True)
class _Control:
    """A command for the writer: "flush", "clear" or "close"; ``done`` is set when it ran."""

    kind: str
    done: threading.Event


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (taking the write lock at once), rolled back when it fails, unless SQLite
    rolled it back itself (as on a full disk)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


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


def _is_corrupt(exc: sqlite3.Error) -> bool:
    """Whether SQLite's error says the file is damaged or no database at all."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in _CORRUPT_CODES or "malformed" in str(exc)


def _store_problem(db: sqlite3.Connection) -> str:
    """Why the database on ``db`` is not a readable store of ours ("" when it is); raises sqlite3.Error
    when SQLite cannot read it at all."""
    check = db.execute("PRAGMA quick_check").fetchone()[0]
    if check != "ok":
        return f"integrity check failed: {check}"
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "meta" not in tables:
        return f"not an embodied_r memory store (tables: {', '.join(sorted(tables)) or 'none'})"
    row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        return f"schema version {row[0] if row else 'missing'}, this node writes {SCHEMA_VERSION}"
    return ""


def _counts(db: sqlite3.Connection, path: Path) -> dict[str, Any]:
    """The :class:`MemoryStatus` fields read from the file: the current timeline (the newest), its span and
    the counts over every timeline."""
    frames, keyframes = db.execute("SELECT COUNT(*), COALESCE(SUM(kept), 0) FROM frames").fetchone()
    timeline = max(
        db.execute(f"SELECT COALESCE(MAX(timeline), 0) FROM {table}").fetchone()[0]
        for table in ("frames", "poses", "descriptions")
    )
    oldest, newest = db.execute(
        "SELECT MIN(stamp_ns), MAX(stamp_ns) FROM frames WHERE timeline = ?", (timeline,)
    ).fetchone()
    return dict(
        timeline=timeline,
        oldest_ns=oldest,
        newest_ns=newest,
        frames=frames,
        keyframes=keyframes,
        poses=db.execute("SELECT COUNT(*) FROM poses").fetchone()[0],
        descriptions=db.execute("SELECT COUNT(*) FROM descriptions").fetchone()[0],
        size_bytes=_size_on_disk(path),
    )


def _start_key(timeline: int | str) -> str:
    """The meta key holding a timeline's first stamp."""
    return f"timeline_start.{timeline}"


def _lock_path(path: Path) -> Path:
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


def _size_on_disk(path: Path) -> int:
    """The file and its write-ahead log, in bytes."""
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.stat(str(path) + suffix).st_size
        except OSError:
            pass
    return total


class MemoryReader:
    """The read queries of a memory store's file (the one implementation of each), on one read connection.

    :class:`MemoryStore` (the node's, with its writer thread) and :class:`ReadOnlyMemory` (a file opened for
    reading only) open the connection; :class:`~embodied_r_ros.history.RobotHistory` answers windows from
    either. ``budget_bytes``: the disk budget the file is kept within (0: unknown, read only).
    """

    def __init__(self, path: str | os.PathLike[str], budget_bytes: int) -> None:
        self.path = Path(path)
        self.budget_bytes = budget_bytes
        self._status_lock = threading.Lock()
        self._status = MemoryStatus(str(self.path), budget_bytes)
        self._read_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None

    @property
    def readable(self) -> bool:
        """Whether questions may be answered from it (open)."""
        with self._read_lock:
            return self._reader is not None

    def status(self) -> MemoryStatus:
        """What the store holds (cheap: counters, no query)."""
        with self._status_lock:
            return self._status

    def _update(self, **changes: Any) -> None:
        with self._status_lock:
            self._status = replace(self._status, **changes)

    def flush(self, timeout_s: float = CONTROL_TIMEOUT_S) -> bool:
        """Wait until every row queued so far is committed: a reader queues none (True while open)."""
        return self.readable

    # ------------------------------------------------------------------------------------------ reads

    def _read(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._read_lock:
            if self._reader is None:
                raise MemoryStoreError(f"memory store {self.path} is closed")
            try:
                return self._reader.execute(sql, parameters).fetchall()
            except sqlite3.Error as exc:
                raise MemoryStoreError(f"memory store {self.path} cannot be read: {exc}") from exc

    def span(self) -> tuple[int, int] | None:
        """(oldest, newest) committed candidate stamps of the current timeline; None when it has none."""
        status = self.status()
        if status.oldest_ns is None or status.newest_ns is None:
            return None
        return status.oldest_ns, status.newest_ns

    def timeline_start_ns(self) -> int | None:
        """The first stamp the current timeline ever held, still known when eviction has dropped its frame:
        the origin of mission times (the oldest frame held for stores written before it was kept)."""
        rows = self._read("SELECT value FROM meta WHERE key = ?", (_start_key(self.status().timeline),))
        if rows:
            return int(rows[0][0])
        span = self.span()
        return span[0] if span is not None else None

    def candidates(self, start_ns: int, end_ns: int) -> list[StoredCandidate]:
        """The current timeline's candidates stamped in [start_ns, end_ns], oldest first (no images)."""
        rows = self._read(
            "SELECT stamp_ns, kept, overlap, reason FROM frames "
            "WHERE timeline = ? AND stamp_ns BETWEEN ? AND ? ORDER BY stamp_ns",
            (self.status().timeline, int(start_ns), int(end_ns)),
        )
        return [StoredCandidate(stamp, bool(kept), overlap, reason) for stamp, kept, overlap, reason in rows]

    def frame(self, stamp_ns: int) -> StoredFrame | None:
        """The current timeline's candidate stamped exactly ``stamp_ns``, decoded (None when not stored)."""
        rows = self._read(
            "SELECT encoding, width, height, image, frame_id FROM frames WHERE timeline = ? AND stamp_ns = ?",
            (self.status().timeline, int(stamp_ns)),
        )
        if not rows:
            return None
        encoding, width, height, blob, frame_id = rows[0]
        payload = np.frombuffer(blob, dtype=np.uint8)
        if encoding == "rgb8":
            payload = payload.reshape(height, width, 3)
        return StoredFrame(int(stamp_ns), decode_payload(payload, int(stamp_ns)), frame_id)

    def pose_at(self, stamp_ns: int, max_gap_s: float) -> Pose | None:
        """The pose at ``stamp_ns`` interpolated between the stored samples around it, exactly as the RAM
        pose history does (:meth:`~embodied_r_ros.poses.pose_history.PoseHistory.pose_at`)."""
        timeline, stamp = self.status().timeline, int(stamp_ns)
        around = self._read(
            f"SELECT * FROM (SELECT {_POSE_COLUMNS} FROM poses WHERE timeline = ? AND stamp_ns <= ? "
            "ORDER BY stamp_ns DESC LIMIT 1) UNION "
            f"SELECT * FROM (SELECT {_POSE_COLUMNS} FROM poses WHERE timeline = ? AND stamp_ns >= ? "
            "ORDER BY stamp_ns LIMIT 1)",
            (timeline, stamp, timeline, stamp),
        )
        samples = PoseHistory(capacity=2, max_gap_s=max_gap_s)
        for row in sorted(around):
            samples.add(int(row[0]), Pose(position=tuple(row[1:4]), orientation=tuple(row[4:8])))
        return samples.pose_at(stamp)

    def descriptions(self, start_ns: int, end_ns: int) -> list[StoredDescription]:
        """The current timeline's descriptions of frames stamped in [start_ns, end_ns], oldest first."""
        rows = self._read(
            "SELECT stamp_ns, text, model, question_agnostic, question FROM descriptions WHERE timeline = ? "
            "AND stamp_ns BETWEEN ? AND ? ORDER BY stamp_ns, id",
            (self.status().timeline, int(start_ns), int(end_ns)),
        )
        return [StoredDescription(s, t, m, bool(a), q) for s, t, m, a, q in rows]

    def undescribed_keyframes(self, limit: int) -> tuple[int, list[int]]:
        """(timeline, stamps) of up to ``limit`` key frames of the current timeline that have no
        question-agnostic description yet, newest first (what a robot is asked about most)."""
        timeline = self.status().timeline
        rows = self._read(
            "SELECT stamp_ns FROM frames f WHERE timeline = ? AND kept = 1 AND NOT EXISTS (SELECT 1 FROM "
            "descriptions d WHERE d.timeline = f.timeline AND d.stamp_ns = f.stamp_ns AND "
            "d.question_agnostic = 1) ORDER BY stamp_ns DESC LIMIT ?",
            (timeline, int(limit)),
        )
        return timeline, [int(r[0]) for r in rows]

    def undescribed_count(self) -> int:
        """How many key frames of the current timeline wait for a question-agnostic description."""
        rows = self._read(
            "SELECT COUNT(*) FROM frames f WHERE timeline = ? AND kept = 1 AND NOT EXISTS (SELECT 1 FROM "
            "descriptions d WHERE d.timeline = f.timeline AND d.stamp_ns = f.stamp_ns AND "
            "d.question_agnostic = 1)",
            (self.status().timeline,),
        )
        return int(rows[0][0])

    def search(
        self, query: np.ndarray, embedding_model: str, start_ns: int, end_ns: int, k: int
    ) -> list[SearchHit]:
        """The ``k`` question-agnostic descriptions of the current timeline stamped in [start_ns, end_ns]
        whose embeddings (by ``embedding_model``, unit length) are closest to ``query`` (cosine), best first;
        one hit per frame. Scans the vectors in chunks, so RAM stays flat however long the mission."""
        query = np.asarray(query, dtype=np.float32).ravel()
        timeline = self.status().timeline
        best: dict[int, SearchHit] = {}
        last_id = 0
        while True:
            rows = self._read(
                "SELECT id, stamp_ns, text, embedding FROM descriptions WHERE timeline = ? AND stamp_ns "
                "BETWEEN ? AND ? AND question_agnostic = 1 AND embedding_model = ? AND id > ? "
                "ORDER BY id LIMIT ?",
                (timeline, int(start_ns), int(end_ns), embedding_model, last_id, SEARCH_CHUNK),
            )
            if not rows:
                break
            last_id = rows[-1][0]
            vectors = np.stack([np.frombuffer(r[3], dtype=np.float32) for r in rows])
            if vectors.shape[1] != query.size:
                raise MemoryStoreError(
                    f"memory store {self.path}: embeddings by {embedding_model!r} have {vectors.shape[1]} "
                    f"dimensions, the query {query.size}"
                )
            scores = vectors @ query
            for (_, stamp, text, _), score in zip(rows, scores, strict=True):
                if stamp not in best or score > best[stamp].score:
                    best[stamp] = SearchHit(int(stamp), float(score), text)
            if len(best) > 4 * k:  # keep the working set small
                best = {h.stamp_ns: h for h in sorted(best.values(), key=lambda h: -h.score)[:k]}
        return sorted(best.values(), key=lambda h: -h.score)[:k]


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
            self._lock_file = self._take_lock()
            moved = self._connect()
            assert self._writer is not None
            if max_page_count is not None:
                self._writer.execute(f"PRAGMA max_page_count = {int(max_page_count)}")
            self._reader = sqlite3.connect(self.path, check_same_thread=False)
            self._reader.execute("PRAGMA query_only = 1")
            self._update(moved_aside=moved, enabled=True, **_counts(self._writer, self.path))
        except (OSError, sqlite3.Error, MemoryStoreError) as exc:
            self._close_connections()
            self._update(enabled=False, problem=self._explain(exc))
            return
        self._thread = threading.Thread(target=self._run, name="embodied_r_memory", daemon=True)
        self._thread.start()

    def _take_lock(self) -> int:
        """An exclusive lock on ``NAME.lock`` for the store's life: a second node (or process) on the same
        file is refused instead of interleaving its frames."""
        lock_path = _lock_path(self.path)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _flock(fd, fcntl.LOCK_EX):
            raise MemoryStoreError(
                f"memory store {self.path} is in use by another node or process ({lock_path} is locked); "
                "give each node its own memory.path (the default is one file per node name)"
            ) from None
        return fd

    def _connect(self) -> str:
        """Open (or create) the file as a store; an unreadable one is moved aside first. Returns where it
        went ("" when none was)."""
        moved = ""
        problem = self._unreadable()
        if problem:
            moved = self._move_aside(problem)
        self._writer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db = self._writer
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect only on a new file: before the tables
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise MemoryStoreError(f"memory store {self.path}: SQLite refused WAL mode (journal_mode {mode})")
        db.execute("PRAGMA synchronous = FULL")
        db.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
        db.executescript(SCHEMA)
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,))
        return moved

    def _unreadable(self) -> str:
        """Why the existing file is not a readable store of ours ("" when it is, or when there is none)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return ""
        try:
            db = sqlite3.connect(self.path)
            try:
                return _store_problem(db)
            finally:
                db.close()
        except sqlite3.Error as exc:
            if _is_corrupt(exc):
                return f"unreadable: {exc}"
            raise  # cannot open it at all (permissions): the caller disables the store

    def _move_aside(self, problem: str) -> str:
        """Rename the file (and its -wal, -shm) to ``NAME.corrupt-TIME``; returns the message to log."""
        stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        self.path.rename(target)
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                side.rename(target.with_name(target.name + suffix))
        return f"memory store {self.path} was set aside as {target} ({problem}); a fresh store starts"

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
        return self._put(_Candidate(int(stamp_ns), bool(kept), overlap, reason, frame_id, payload))

    def add_pose(self, stamp_ns: int, pose: Pose) -> bool:
        """Queue a pose sample, unless one was queued less than :data:`POSE_PERIOD_NS` before it (one
        caller thread: the odometry's); never waits."""
        last = self._last_pose_ns
        if last is not None and 0 <= stamp_ns - last < POSE_PERIOD_NS:
            return False
        if self._put(_Pose(int(stamp_ns), pose)):
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
        row = _Description(
            int(stamp_ns), text, model, question_agnostic, question, time.time_ns(), timeline, vector,
            embedding_model,
        )  # fmt: skip
        return self._put(row)

    def _put(self, row: Any) -> bool:
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
        pending: list[Any] = []
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

    def _commit(self, rows: list[Any]) -> None:
        """Write ``rows`` in one transaction; then keep the budget. A failure disables the store."""
        if not self.enabled:
            return
        db = self._writer
        assert db is not None
        status = self.status()
        timeline, oldest, newest = status.timeline, status.oldest_ns, status.newest_ns
        frames, keyframes, poses, descriptions, starts = [], 0, [], [], []
        for row in rows:
            if isinstance(row, _Candidate):
                if newest is not None and row.stamp_ns <= newest:  # the stamps went back: a new timeline
                    timeline, oldest, newest = timeline + 1, None, None
                if oldest is None:  # the timeline's first frame (kept as its start when the frame is evicted)
                    starts.append((_start_key(timeline), str(row.stamp_ns)))
                encoding = "rgb8" if row.payload.ndim == 3 else "jpeg"
                height, width = row.payload.shape[:2] if row.payload.ndim == 3 else (0, 0)
                frames.append(
                    (timeline, row.stamp_ns, int(row.kept), row.overlap, row.reason, row.frame_id, encoding,
                     width, height, row.payload.tobytes())
                )  # fmt: skip
                keyframes += row.kept
                oldest = row.stamp_ns if oldest is None else oldest
                newest = row.stamp_ns
            elif isinstance(row, _Pose):
                p = row.pose
                poses.append((timeline, row.stamp_ns, *p.position, *p.orientation))
            else:
                descriptions.append(
                    (timeline if row.timeline is None else row.timeline, row.stamp_ns, row.text, row.model,
                     int(row.question_agnostic), row.question, row.written_ns, row.embedding,
                     row.embedding_model or None)
                )  # fmt: skip
        try:
            with _transaction(db):
                frames_added = db.executemany(
                    "INSERT OR IGNORE INTO frames (timeline, stamp_ns, kept, overlap, reason, frame_id, "
                    "encoding, width, height, image) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    frames,
                ).rowcount
                poses_added = db.executemany(
                    "INSERT OR IGNORE INTO poses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", poses
                ).rowcount
                db.executemany(
                    "INSERT INTO descriptions (timeline, stamp_ns, text, model, question_agnostic, question, "
                    "written_ns, embedding, embedding_model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    descriptions,
                )
                db.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", starts)
            with self._status_lock:
                s = self._status
                self._status = replace(
                    s,
                    timeline=timeline,
                    oldest_ns=oldest,
                    newest_ns=newest,
                    frames=s.frames + max(0, frames_added),
                    keyframes=s.keyframes + keyframes,
                    poses=s.poses + max(0, poses_added),
                    descriptions=s.descriptions + len(descriptions),
                )
            self._keep_budget()
            self._update(size_bytes=_size_on_disk(self.path))
        except sqlite3.Error as exc:
            self._disable(exc)

    def _used_bytes(self) -> int:
        db = self._writer
        assert db is not None
        pages = (
            db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
        )
        return pages * db.execute("PRAGMA page_size").fetchone()[0]

    def _keep_budget(self) -> None:
        """Over the budget: delete the oldest frames (then poses, then descriptions, when no frame is left)
        in chunks down to LOW_WATER of it, and give the pages back."""
        used = self._used_bytes()
        if used <= self.budget_bytes:
            return
        db = self._writer
        assert db is not None
        target = int(self.budget_bytes * LOW_WATER)
        evicted = 0
        while used > target:
            frames = db.execute("SELECT COUNT(*) FROM frames").fetchone()[0]
            if frames:
                # Rows of about equal size: the share of rows to delete is the share of bytes over target.
                count = max(EVICT_MIN_ROWS, math.ceil(frames * (used - target) / max(used, 1)))
                with _transaction(db):
                    deleted = db.execute(
                        "DELETE FROM frames WHERE id IN (SELECT id FROM frames ORDER BY id LIMIT ?)", (count,)
                    ).rowcount
                    self._delete_older_than_frames(db)
                evicted += deleted
            elif not self._delete_oldest_rows(db):
                break
            used = self._used_bytes()
        db.executescript("PRAGMA incremental_vacuum;")  # stepped to the end (execute frees one page)
        self._checkpoint()
        self._recount(evicted)

    @staticmethod
    def _delete_older_than_frames(db: sqlite3.Connection) -> None:
        """Poses and descriptions from before the oldest frame left go with the frames."""
        oldest = db.execute("SELECT timeline, stamp_ns FROM frames ORDER BY id LIMIT 1").fetchone()
        if oldest is None:
            return
        for table in ("poses", "descriptions"):
            db.execute(
                f"DELETE FROM {table} WHERE timeline < ? OR (timeline = ? AND stamp_ns < ?)",
                (oldest[0], oldest[0], oldest[1] - NS_PER_S),  # a second of poses before it: interpolation
            )

    @staticmethod
    def _delete_oldest_rows(db: sqlite3.Connection) -> bool:
        """No frame left: the oldest poses, else the oldest descriptions; False when nothing is left."""
        with _transaction(db):
            deleted = db.execute(
                "DELETE FROM poses WHERE (timeline, stamp_ns) IN "
                "(SELECT timeline, stamp_ns FROM poses ORDER BY timeline, stamp_ns LIMIT 1024)"
            ).rowcount
            if not deleted:
                oldest = "SELECT id FROM descriptions ORDER BY id LIMIT 1024"
                deleted = db.execute(f"DELETE FROM descriptions WHERE id IN ({oldest})").rowcount
        return deleted > 0

    def _recount(self, evicted: int) -> None:
        db = self._writer
        assert db is not None
        frames, keyframes = db.execute("SELECT COUNT(*), COALESCE(SUM(kept), 0) FROM frames").fetchone()
        timeline = self.status().timeline
        oldest = db.execute("SELECT MIN(stamp_ns) FROM frames WHERE timeline = ?", (timeline,)).fetchone()[0]
        with self._status_lock:
            s = self._status
            self._status = replace(
                s,
                frames=frames,
                keyframes=keyframes,
                oldest_ns=oldest,
                newest_ns=s.newest_ns if oldest is not None else None,
                poses=db.execute("SELECT COUNT(*) FROM poses").fetchone()[0],
                descriptions=db.execute("SELECT COUNT(*) FROM descriptions").fetchone()[0],
                evicted_frames=s.evicted_frames + evicted,
            )

    def _clear(self) -> None:
        db = self._writer
        assert db is not None
        try:
            with _transaction(db):
                for table in ("frames", "poses", "descriptions"):
                    db.execute(f"DELETE FROM {table}")
                db.execute("DELETE FROM meta WHERE key LIKE ?", (_start_key("%"),))
            db.executescript("PRAGMA incremental_vacuum;")  # stepped to the end (execute frees one page)
            self._checkpoint()
            self._last_pose_ns = None
            self._update(
                oldest_ns=None, newest_ns=None, frames=0, keyframes=0, poses=0, descriptions=0,
                size_bytes=_size_on_disk(self.path),
            )  # fmt: skip
        except sqlite3.Error as exc:
            self._disable(exc)

    def _checkpoint(self) -> None:
        """Copy the log into the file and cut it back (skipped while a reader holds an old snapshot)."""
        if self._writer is not None:
            try:
                self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass  # the next checkpoint does it


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
        self._lock_file = self._share_lock()
        try:
            self._reader = self._connect()
            self._update(**_counts(self._reader, self.path))
        except BaseException:
            self.close()
            raise

    def _share_lock(self) -> int | None:
        """A shared lock on the node's ``NAME.lock`` (None when there is none: a copied file); refused while
        a node holds it."""
        lock_path = _lock_path(self.path)
        try:
            fd = os.open(lock_path, os.O_RDONLY)
        except OSError:
            return None  # none (a copied file, never opened by a node here), or another user's
        if not _flock(fd, fcntl.LOCK_SH):
            raise MemoryStoreError(
                f"memory store {self.path} is in use by a running node ({lock_path} is locked): stop the "
                "node (or clean it up: that closes its memory), or copy the store while it runs with "
                f'`sqlite3 {self.path} ".backup COPY.sqlite"` and read the copy'
            ) from None
        return fd

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
            problem = _store_problem(db)
        except sqlite3.Error as exc:
            db.close()
            if not _is_corrupt(exc):
                raise MemoryStoreError(f"memory store {self.path} cannot be read: {exc}") from exc
            problem = f"unreadable: {exc}"
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
