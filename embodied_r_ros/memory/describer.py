"""Question-agnostic descriptions of the memory's key frames, made in the background, for retrieval.

A question that names a time is answered from that window's key frames. One that names a thing ("where
did I last see the red backpack?") must first find where in the mission the thing was: for that every key
frame in the durable memory gets a description written for no question in particular, and its text
embedding, both stored beside the frame (:meth:`MemoryStore.add_description
<embodied_r_ros.memory.store.MemoryStore.add_description>`); :mod:`.search` then ranks them
against the question.

The perceiver is the one that answers questions (the VLM, or a measuring instrument), so the describer
must never run beside a question: the node hands :meth:`MemoryDescriber.describe_batch` to its query
worker as an idle task (run only when no question waits), a few frames at a time, newest first, so a
question waits at most one small batch. Each key frame is described alone, as a question's first key frame
is (the scene around the robot), with :data:`AGNOSTIC_QUESTION` in place of a question.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from ..frames import Frame
from ..keyframes import REASON_FIRST, KeyFrame
from ..perception import KeyFramePerceiver, PerceptionQuery, parse_descriptions
from .records import MemoryStoreError
from .store import MemoryStore
from .text_embedding import TextEmbedder

log = logging.getLogger(__name__)

# Stands in for the question in the perception prompt: it asks for every object, not the ones of a question,
# in the listing form the sightings index reads (memory/sightings.py: counts, first and last sightings).
AGNOSTIC_QUESTION = (
    "Which objects are around me? Name every one, nearest first, after 'I see', separated by semicolons, "
    "each as '<colour> <object> <left|ahead-left|ahead|ahead-right|right>, <near|far>, <distance> m'."
)
DEFAULT_BATCH = 4  # key frames per call: what a question may have to wait for
# Stamps written but perhaps not committed yet (the writer commits every 0.5 s), skipped when the backlog is
# read again; each read asks for this many more rows than a batch, so it stays small.
_RECENT = 256


@dataclass(frozen=True)
class DescriberStatus:
    """What the describer did since it started (for /diagnostics)."""

    described: int = 0  # key frames described and embedded
    failed: int = 0  # batches the perceiver or the embedder failed on
    last_error: str = ""


class MemoryDescriber:
    """Describes and embeds the memory's key frames that have no question-agnostic description yet.

    ``perception``: the perceiver's name as the memory records it (who wrote the descriptions);
    ``candidates``: describe every stored candidate (the selector's 1 fps grid), not only the key frames: a
    thing seen for a second between two key frames is then found too, for about twice the perceiver's time.
    """

    def __init__(
        self,
        memory: MemoryStore,
        perceiver: KeyFramePerceiver,
        embedder: TextEmbedder,
        perception: str,
        batch: int = DEFAULT_BATCH,
        candidates: bool = False,
    ) -> None:
        if batch < 1:
            raise ValueError(f"memory.describe_batch must be >= 1, got {batch}")
        self.memory = memory
        self.perceiver = perceiver
        self.embedder = embedder
        self.perception = perception
        self.batch = batch
        self.candidates = candidates  # every stored 1 fps candidate, not only the key frames
        self._recent: deque[tuple[int, int]] = deque(maxlen=_RECENT)
        self._lock = threading.Lock()
        self._scheduled = False
        self._status = DescriberStatus()

    def status(self) -> DescriberStatus:
        """Counts since the start."""
        with self._lock:
            return self._status

    def claim(self) -> bool:
        """True when no batch is scheduled yet (the caller now schedules one: :meth:`describe_batch` runs
        it and releases the claim); False when one is already on its way."""
        with self._lock:
            if self._scheduled:
                return False
            self._scheduled = True
            return True

    def release(self) -> None:
        """Give the claim back without describing (the scheduled batch was dropped before it ran), so
        that the next :meth:`claim` schedules one again."""
        with self._lock:
            self._scheduled = False

    def describe_batch(self) -> int:
        """Describe and embed up to ``batch`` undescribed key frames (newest first) and store them; the
        number described. Never raises: a failure is logged and counted, and the frames stay in the
        backlog for the next batch."""
        try:
            return self._describe_batch()
        except Exception as exc:  # the perceiver's or the embedder's: questions must go on
            log.warning("describing the memory's key frames failed: %s", exc)
            with self._lock:
                s = self._status
                self._status = DescriberStatus(s.described, s.failed + 1, str(exc))
            return 0
        finally:
            with self._lock:
                self._scheduled = False

    def _describe_batch(self) -> int:
        if not self.memory.enabled:
            return 0
        try:
            timeline, stamps = self.memory.undescribed_frames(self.batch + len(self._recent), self.candidates)
        except MemoryStoreError:
            return 0
        recent = set(self._recent)
        stamps = [s for s in stamps if (timeline, s) not in recent][: self.batch]
        keyframes = []
        for stamp in stamps:
            stored = self.memory.frame(stamp)
            if stored is not None:  # evicted meanwhile: nothing to describe
                keyframes.append(KeyFrame(Frame(stored.image, stamp), 0, None, REASON_FIRST))
        if not keyframes:
            return 0
        queries = [PerceptionQuery([k], AGNOSTIC_QUESTION) for k in keyframes]
        replies = self.perceiver.replies(queries)
        texts = [parse_descriptions([k], r)[0].observation for k, r in zip(keyframes, replies, strict=True)]
        vectors = self.embedder.passages(texts)
        for keyframe, text, vector in zip(keyframes, texts, vectors, strict=True):
            stamp = keyframe.frame.stamp_ns
            self.memory.add_description(
                stamp,
                text,
                self.perception,
                question_agnostic=True,
                timeline=timeline,
                embedding=vector,
                embedding_model=self.embedder.name,
            )
            self._recent.append((timeline, stamp))
        with self._lock:
            s = self._status
            self._status = DescriberStatus(s.described + len(keyframes), s.failed, s.last_error)
        return len(keyframes)

    def backlog(self) -> int:
        """Key frames (with ``candidates``: stored candidates) of the current timeline still without a
        committed question-agnostic description (a query; descriptions written in the last half second may
        still count)."""
        try:
            return self.memory.undescribed_count(self.candidates)
        except MemoryStoreError:
            return 0
