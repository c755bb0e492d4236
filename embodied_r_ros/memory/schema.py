"""The memory store's on-disk format: its tables, the pragmas a writer sets, the check that a file is a store
of ours, and the SQLite helpers the store's modules share.

What is stored (tables, see :data:`SCHEMA`):

* ``frames``: every candidate of the selector's grid (``keyframes.candidate_fps``, the frames the RAM
  buffer stores), as the buffer stores it (downscaled JPEG bytes, or raw pixels with
  ``buffer.jpeg_quality`` 0), with its key-frame decision (kept, overlap, reason) and the camera's
  ``frame_id``. Storing the candidates and not only the kept frames lets a window answered from the store
  follow the very rule a window in RAM follows (first and last candidate, the clamp's sampled frames).
* ``poses``: the camera's poses, at most one sample per :data:`~.store.POSE_PERIOD_NS` (10 Hz).
* ``descriptions``: text a perceiver wrote for a stamp, with the model that wrote it, whether it was
  question-agnostic, the question it answered, and for question-agnostic ones the text's embedding and its
  model (:meth:`~.reader.MemoryReader.search`: retrieval by content, see :mod:`.search`).
* ``meta``: the schema version, and the first stamp of each timeline (:func:`start_key`).

Stamps live on *timelines*: a candidate stamped at or before the newest one of the current timeline (a
bag played again, a simulation restarted, a node restarted on an older bag) starts a new timeline, so
two runs over the same stamps never mix; questions are answered from the current timeline.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Iterator

from .records import MemoryStoreError

SCHEMA_VERSION = "1"
WAL_LIMIT_BYTES = 8 * 2**20  # the write-ahead log is cut back to this after a checkpoint
POSE_COLUMNS = "stamp_ns, x, y, z, qx, qy, qz, qw"
# SQLite's primary result codes (sqlite3.Error.sqlite_errorcode & 0xFF).
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB

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


def initialise(db: sqlite3.Connection, path: Path) -> None:
    """Set the writer's pragmas on ``db`` (the file at ``path``: write-ahead log, ``synchronous=FULL``,
    incremental vacuum) and create the tables when the file is new."""
    db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect only on a new file: before the tables
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise MemoryStoreError(f"memory store {path}: SQLite refused WAL mode (journal_mode {mode})")
    db.execute("PRAGMA synchronous = FULL")
    db.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
    db.executescript(SCHEMA)
    db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,))


def store_problem(db: sqlite3.Connection) -> str:
    """Why the database on ``db`` is not a readable store of ours ("" when it is; ``unreadable: ...`` when
    SQLite finds it damaged or no database at all); raises sqlite3.Error when SQLite cannot read it for
    another reason (permissions)."""
    try:
        check = db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            return f"integrity check failed: {check}"
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:
            return f"not an embodied_r memory store (tables: {', '.join(sorted(tables)) or 'none'})"
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.Error as exc:
        if _is_corrupt(exc):
            return f"unreadable: {exc}"
        raise
    if row is None or row[0] != SCHEMA_VERSION:
        return f"schema version {row[0] if row else 'missing'}, this node writes {SCHEMA_VERSION}"
    return ""


def _is_corrupt(exc: sqlite3.Error) -> bool:
    """Whether SQLite's error says the file is damaged or no database at all."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in _CORRUPT_CODES or "malformed" in str(exc)


def start_key(timeline: int | str) -> str:
    """The meta key holding a timeline's first stamp."""
    return f"timeline_start.{timeline}"


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
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


def row_counts(db: sqlite3.Connection) -> dict[str, int]:
    """The :class:`~.records.MemoryStatus` counts over every timeline: frames, keyframes, poses,
    descriptions."""
    frames, keyframes = db.execute("SELECT COUNT(*), COALESCE(SUM(kept), 0) FROM frames").fetchone()
    return dict(
        frames=frames,
        keyframes=keyframes,
        poses=db.execute("SELECT COUNT(*) FROM poses").fetchone()[0],
        descriptions=db.execute("SELECT COUNT(*) FROM descriptions").fetchone()[0],
    )
