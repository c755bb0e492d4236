"""The reads of a memory store's file: :class:`MemoryReader`, the one implementation of each query a window,
a search or a description asks of the store, and :func:`read_status`, what the file holds.

:class:`~.store.MemoryStore` (the node's, with its writer thread) and :class:`~.read_only.ReadOnlyMemory`
(a file opened for reading only) both read through it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..clip_buffer import decode_payload
from ..frames import Pose
from ..poses.pose_history import PoseHistory
from .files import size_on_disk
from .records import (
    MemoryStatus,
    MemoryStoreError,
    SearchHit,
    StoredCandidate,
    StoredDescription,
    StoredFrame,
)
from .schema import POSE_COLUMNS, row_counts, start_key

CONTROL_TIMEOUT_S = 5.0  # flush, clear and close wait this long for the writer
SEARCH_CHUNK = 4096  # description vectors read at a time by a search (384-d float32: 6 MB)


def read_status(db: sqlite3.Connection, path: Path) -> dict[str, Any]:
    """The :class:`~.records.MemoryStatus` fields read from the file: the current timeline (the newest), its
    span and the counts over every timeline."""
    timeline = max(
        db.execute(f"SELECT COALESCE(MAX(timeline), 0) FROM {table}").fetchone()[0]
        for table in ("frames", "poses", "descriptions")
    )
    oldest, newest = db.execute(
        "SELECT MIN(stamp_ns), MAX(stamp_ns) FROM frames WHERE timeline = ?", (timeline,)
    ).fetchone()
    return dict(
        timeline=timeline, oldest_ns=oldest, newest_ns=newest, **row_counts(db), size_bytes=size_on_disk(path)
    )


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
        rows = self._read("SELECT value FROM meta WHERE key = ?", (start_key(self.status().timeline),))
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
            f"SELECT * FROM (SELECT {POSE_COLUMNS} FROM poses WHERE timeline = ? AND stamp_ns <= ? "
            "ORDER BY stamp_ns DESC LIMIT 1) UNION "
            f"SELECT * FROM (SELECT {POSE_COLUMNS} FROM poses WHERE timeline = ? AND stamp_ns >= ? "
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

    def agnostic_descriptions(
        self, after_id: int, limit: int = 4096
    ) -> tuple[int, list[tuple[int, int, str]]]:
        """(timeline, rows) of the current timeline's question-agnostic descriptions written after row
        ``after_id``: up to ``limit`` (id, stamp, text), in the order written (read them again from the last
        id for more)."""
        timeline = self.status().timeline
        rows = self._read(
            "SELECT id, stamp_ns, text FROM descriptions WHERE timeline = ? AND question_agnostic = 1 AND "
            "id > ? ORDER BY id LIMIT ?",
            (timeline, int(after_id), int(limit)),
        )
        return timeline, [(int(i), int(s), str(t)) for i, s, t in rows]

    def last_description_id(self) -> int:
        """The highest description row id (0 when none). Ids only grow while the file is not cleared: one
        below an id read before means the newest rows were deleted since (a clear, or the newest evicted),
        and later rows may take ids read before."""
        return int(self._read("SELECT COALESCE(MAX(id), 0) FROM descriptions", ())[0][0])

    def undescribed_frames(self, limit: int, candidates: bool = False) -> tuple[int, list[int]]:
        """(timeline, stamps) of up to ``limit`` key frames (``candidates``: stored candidates, key frames or
        not) of the current timeline that have no question-agnostic description yet, newest first (what a
        robot is asked about most)."""
        timeline = self.status().timeline
        query = f"SELECT stamp_ns {_undescribed(candidates)} ORDER BY stamp_ns DESC LIMIT ?"
        rows = self._read(query, (timeline, int(limit)))
        return timeline, [int(r[0]) for r in rows]

    def undescribed_count(self, candidates: bool = False) -> int:
        """How many key frames (``candidates``: stored candidates) of the current timeline wait for a
        question-agnostic description."""
        rows = self._read(f"SELECT COUNT(*) {_undescribed(candidates)}", (self.status().timeline,))
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


def _undescribed(candidates: bool) -> str:
    """FROM and WHERE of the describer's backlog (one parameter: the timeline): the stored frames of the
    timeline, key frames only unless ``candidates``, without a question-agnostic description."""
    kept = "" if candidates else "AND kept = 1"
    return (
        f"FROM frames f WHERE timeline = ? {kept} AND NOT EXISTS (SELECT 1 FROM descriptions d WHERE "
        "d.timeline = f.timeline AND d.stamp_ns = f.stamp_ns AND d.question_agnostic = 1)"
    )
