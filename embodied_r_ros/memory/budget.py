"""The memory store's disk budget, kept by its writer thread after each commit.

When the pages in use exceed the budget, the oldest frames (insertion order) are deleted in chunks down to
:data:`LOW_WATER` of the budget, with the poses and descriptions older than the oldest frame left; an
incremental vacuum and a checkpoint then give the pages back, so the file stops growing at the budget
(plus the write-ahead log, at most :data:`~.schema.WAL_LIMIT_BYTES` after a checkpoint).
"""

from __future__ import annotations

import math
import sqlite3

from ..frames import NS_PER_S
from .schema import transaction

LOW_WATER = 0.9  # eviction frees down to this share of the budget, so it runs once per 10 % of it
EVICT_MIN_ROWS = 16  # and deletes at least this many frames at a time


def used_bytes(db: sqlite3.Connection) -> int:
    """The bytes of the pages in use (the file less its free pages)."""
    pages = db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
    return pages * db.execute("PRAGMA page_size").fetchone()[0]


def evict(db: sqlite3.Connection, budget_bytes: int) -> int | None:
    """Over the budget: delete the oldest frames (then poses, then descriptions, when no frame is left) in
    chunks down to LOW_WATER of it, and give the pages back. Returns the frames deleted; None when the
    store was within the budget (nothing done)."""
    used = used_bytes(db)
    if used <= budget_bytes:
        return None
    target = int(budget_bytes * LOW_WATER)
    evicted = 0
    while used > target:
        frames = db.execute("SELECT COUNT(*) FROM frames").fetchone()[0]
        if frames:
            # Rows of about equal size: the share of rows to delete is the share of bytes over target.
            count = max(EVICT_MIN_ROWS, math.ceil(frames * (used - target) / max(used, 1)))
            with transaction(db):
                deleted = db.execute(
                    "DELETE FROM frames WHERE id IN (SELECT id FROM frames ORDER BY id LIMIT ?)", (count,)
                ).rowcount
                _delete_older_than_frames(db)
            evicted += deleted
        elif not _delete_oldest_rows(db):
            break
        used = used_bytes(db)
    give_back_pages(db)
    return evicted


def give_back_pages(db: sqlite3.Connection) -> None:
    """Return the free pages to the file system and cut the log back (after rows were deleted)."""
    db.executescript("PRAGMA incremental_vacuum;")  # stepped to the end (execute frees one page)
    checkpoint(db)


def checkpoint(db: sqlite3.Connection) -> None:
    """Copy the log into the file and cut it back (skipped while a reader holds an old snapshot)."""
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass  # the next checkpoint does it


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


def _delete_oldest_rows(db: sqlite3.Connection) -> bool:
    """No frame left: the oldest poses, else the oldest descriptions; False when nothing is left."""
    with transaction(db):
        deleted = db.execute(
            "DELETE FROM poses WHERE (timeline, stamp_ns) IN "
            "(SELECT timeline, stamp_ns FROM poses ORDER BY timeline, stamp_ns LIMIT 1024)"
        ).rowcount
        if not deleted:
            oldest = "SELECT id FROM descriptions ORDER BY id LIMIT 1024"
            deleted = db.execute(f"DELETE FROM descriptions WHERE id IN ({oldest})").rowcount
    return deleted > 0
