"""What the memory store hands its callers: the rows it reads back, its status, and its one error.

These cross modules (the history, the search, the describer, the node, ``embodied-r prepare``); the
store's file and its queries are in :mod:`.schema`, :mod:`.reader` and :mod:`.store`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
