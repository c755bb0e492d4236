"""What the memory store's writer thread commits: the rows its callers queue (:class:`QueuedCandidate`,
:class:`QueuedPose`, :class:`QueuedDescription`) and :func:`write_rows`, the one transaction that writes a
batch of them, starting a new timeline where the stamps go back.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..frames import Pose
from .schema import start_key, transaction


@dataclass(frozen=True)
class QueuedCandidate:
    """A candidate frame and its key-frame decision; ``payload``: 1-D JPEG bytes or HxWx3 RGB pixels."""

    stamp_ns: int
    kept: bool
    overlap: float | None
    reason: str
    frame_id: str
    payload: np.ndarray


@dataclass(frozen=True)
class QueuedPose:
    """A pose sample of the camera."""

    stamp_ns: int
    pose: Pose


@dataclass(frozen=True)
class QueuedDescription:
    """A description of the frame at ``stamp_ns``; ``embedding``: float32 bytes (None: none)."""

    stamp_ns: int
    text: str
    model: str
    question_agnostic: bool
    question: str
    written_ns: int
    timeline: int | None  # the timeline of the frame described (None: the current one at commit)
    embedding: bytes | None
    embedding_model: str


QueuedRow = QueuedCandidate | QueuedPose | QueuedDescription


@dataclass(frozen=True)
class Committed:
    """What a commit wrote: the current timeline and its span after it, and the rows it added."""

    timeline: int
    oldest_ns: int | None
    newest_ns: int | None
    frames: int  # new rows (a candidate already stored is ignored)
    keyframes: int  # kept candidates among the rows given
    poses: int
    descriptions: int


def write_rows(
    db: sqlite3.Connection,
    rows: Sequence[QueuedRow],
    timeline: int,
    oldest_ns: int | None,
    newest_ns: int | None,
) -> Committed:
    """Write ``rows`` in one transaction on ``db``, after the committed ``timeline`` spanning [oldest_ns,
    newest_ns]; a candidate stamped at or before the newest one starts a new timeline. Raises
    sqlite3.Error when the transaction fails (then nothing was written)."""
    oldest, newest = oldest_ns, newest_ns
    frames, keyframes, poses, descriptions, starts = [], 0, [], [], []
    for row in rows:
        if isinstance(row, QueuedCandidate):
            if newest is not None and row.stamp_ns <= newest:  # the stamps went back: a new timeline
                timeline, oldest, newest = timeline + 1, None, None
            if oldest is None:  # the timeline's first frame (kept as its start when the frame is evicted)
                starts.append((start_key(timeline), str(row.stamp_ns)))
            encoding = "rgb8" if row.payload.ndim == 3 else "jpeg"
            height, width = row.payload.shape[:2] if row.payload.ndim == 3 else (0, 0)
            frames.append(
                (timeline, row.stamp_ns, int(row.kept), row.overlap, row.reason, row.frame_id, encoding,
                 width, height, row.payload.tobytes())
            )  # fmt: skip
            keyframes += row.kept
            oldest = row.stamp_ns if oldest is None else oldest
            newest = row.stamp_ns
        elif isinstance(row, QueuedPose):
            p = row.pose
            poses.append((timeline, row.stamp_ns, *p.position, *p.orientation))
        else:
            descriptions.append(
                (timeline if row.timeline is None else row.timeline, row.stamp_ns, row.text, row.model,
                 int(row.question_agnostic), row.question, row.written_ns, row.embedding,
                 row.embedding_model or None)
            )  # fmt: skip
    with transaction(db):
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
    return Committed(
        timeline, oldest, newest, max(0, frames_added), keyframes, max(0, poses_added), len(descriptions)
    )
