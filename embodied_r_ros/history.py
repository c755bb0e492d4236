"""The robot's history: the frames and poses it was given, and the key frames of any past window.

ROS-free, so it is tested without DDS: the node's camera and odometry callbacks hand it frames and poses
(:meth:`RobotHistory.add_frame`, :meth:`RobotHistory.add_pose`) and a question asks it for the key frames
of its window (:meth:`RobotHistory.keyframes`). It owns the parts that must stay consistent with each
other: the :class:`~embodied_r_ros.keyframes.StreamingKeyFrameSelector` (which frames are key frames), the
:class:`~embodied_r_ros.clip_buffer.ClipBuffer` (the stored copies of the selector's candidates), the
:class:`~embodied_r_ros.poses.pose_history.PoseHistory` (odometry), the
:class:`~embodied_r_ros.stamp_guard.StampGuard` (a bag that loops clears the history) and the stamps of
the oldest and newest frame since the start or the last :meth:`RobotHistory.clear`.

With a durable memory (:class:`~embodied_r_ros.memory.store.MemoryStore`), every candidate the buffer
stores goes there too, with its decision, and so do the poses; a window that reaches before what RAM holds
(``buffer.history_s``, a reset that kept the memory, a restart) is answered from the memory (see
:meth:`RobotHistory.keyframes`). ``clear`` forgets RAM only: clearing the memory is the caller's choice.
A history over a memory opened for reading only (:class:`~embodied_r_ros.memory.read_only.ReadOnlyMemory`)
answers from it as a restarted node does, and writes nothing to it (``embodied-r prepare``).

Threads: one camera thread calls ``add_frame``, one odometry thread ``add_pose``; ``keyframes`` and
``clear`` may come from others. ``keyframes`` and ``clear`` hold the history's lock; ``add_frame`` does
not, so the camera never waits for a question (the selector and the buffer lock themselves). ``search``
reads the memory's new descriptions into its sightings index one search at a time, outside the history's
lock, and keeps the index only when no ``clear`` came meanwhile (a reset must not leave the old memory's).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from .clip_buffer import ClipBuffer, ClipBufferError
from .config import BufferConfig, KeyFrameConfig
from .frames import NS_PER_S, Frame, Pose
from .keyframes import (
    REASON_FIRST,
    REASON_LAST,
    REASON_SAMPLED,
    CandidateDecision,
    KeyFrame,
    StreamingKeyFrameSelector,
    assemble_keyframes,
)
from .memory.reader import MemoryReader
from .memory.records import MemoryStoreError, StoredCandidate
from .memory.search import (
    REASON_RETRIEVED,
    Interval,
    SearchSettings,
    group_hits,
    search_intervals,
    settings_for,
    spread_indices,
)
from .memory.sightings import Sighting, SightingAnswer, SightingIndex, catch_up, sighting_answer
from .memory.store import MemoryStore
from .memory.text_embedding import TextEmbedder
from .poses.pose_history import PoseHistory
from .stamp_guard import RESTART, SUSPECT, StampGuard
from .windows import Window, format_stamp

POSE_CAPACITY = 131072  # odometry samples kept: 8 MB, over 10 minutes at 100 Hz
MEMORY_FLUSH_S = 2.0  # a question over the memory waits this long for the rows still queued


class EmptyHistoryError(LookupError):
    """No camera frame since the start or the last clear: there is nothing to answer from."""


class MemorySearchError(LookupError):
    """A search of the memory found nothing to answer from; the message says why and what to do."""


@dataclass(frozen=True)
class FrameDecision:
    """What became of one camera frame given to :meth:`RobotHistory.add_frame`."""

    dropped: str = ""  # "" (taken), "stamp_jump" (a jump not confirmed yet) or "out_of_order"
    jump_s: float = 0.0  # the frame's stamp minus the newest one before it, for a jump
    restarted: bool = False  # the stamps jumped and stayed: the history was cleared before this frame
    stored: bool = False  # a candidate of the selector's grid, stored in the buffer
    store_error: str = ""  # the buffer refused the candidate (too large); the frame still counts
    keyframe: bool = False  # the selector kept it as a key frame

    @property
    def taken(self) -> bool:
        """Whether the frame entered the history (it was not dropped)."""
        return not self.dropped


@dataclass(frozen=True)
class HistorySize:
    """How much the history holds (for /diagnostics)."""

    frames: int  # stored candidate frames
    keyframes: int  # key frames still inside the buffer's span
    candidates: int  # key-frame decisions the selector holds
    poses: int  # odometry samples
    memory_bytes: int  # the buffer's stored frames


@dataclass(frozen=True)
class WindowKeyFrames:
    """The key frames of one question's window, with the window and the newest stamp it was cut from;
    ``intervals``: the intervals they came from (the window alone, or a memory search's intervals);
    ``mission_origin_ns``: for a memory search, the stamp its mission times count from
    (:mod:`~embodied_r_ros.memory.mission_time`), else None; ``summary``: for a count, the memory's tally
    of every sighting (:func:`~embodied_r_ros.memory.sightings.tally`), else ""; ``counted``: the
    sightings it counted (several cameras' are tallied together:
    :func:`~embodied_r_ros.memory.sightings.merged_tally`)."""

    start_ns: int
    end_ns: int
    newest_ns: int
    keyframes: list[KeyFrame]
    intervals: tuple[tuple[int, int], ...] = ()
    mission_origin_ns: int | None = None
    summary: str = ""
    counted: tuple[Sighting, ...] = ()

    def spans(self) -> tuple[tuple[int, int], ...]:
        """The intervals reasoned over: ``intervals``, else the window."""
        return self.intervals or ((self.start_ns, self.end_ns),)


class DecisionReportingSelector(StreamingKeyFrameSelector):
    """The streaming selector, telling also what it decided about the last candidate: the durable memory
    stores every decision, the overlap of the candidates it did not keep too (the prompt fitting drops
    the most overlapping key frames first, so a window answered from the memory needs them)."""

    def last_decision(self) -> CandidateDecision | None:
        """The decision about the newest candidate (None before the first and after a reset)."""
        with self._state_lock:
            return self._decisions[-1] if self._decisions else None


class RobotHistory:
    """Frames, key-frame decisions and poses of one camera stream (see the module docstring).

    ``memory``: the durable memory the candidates and poses also go to (None: RAM only; a reader that is
    not a :class:`MemoryStore`: answered from, never written to); its owner opens, clears and closes it.
    """

    def __init__(
        self,
        buffer: BufferConfig,
        keyframes: KeyFrameConfig,
        jump_back_reset_s: float = 0.0,
        odometry_max_gap_s: float = 0.5,
        pose_capacity: int = POSE_CAPACITY,
        memory: MemoryReader | None = None,
    ) -> None:
        self.history_s = buffer.history_s
        self.keyframe_config = keyframes
        self.buffer = ClipBuffer(buffer)
        self.selector = DecisionReportingSelector(
            keyframes,
            history_s=buffer.history_s,
            frame_source=functools.partial(self.buffer.get, tolerance_ns=0),
        )
        self.poses = PoseHistory(pose_capacity, odometry_max_gap_s)
        self.memory = memory
        self._stamp_guard = StampGuard(jump_back_reset_s)
        self._kept_stamps: deque[int] = deque()
        self._latest: Frame | None = None  # the newest frame taken (the always-kept last of a window)
        self._newest_ns: int | None = None
        self._oldest_ns: int | None = None  # the first frame since the start or the last clear
        self._newest_pose_ns: int | None = None
        self._sightings: SightingIndex | None = None  # the memory's sightings (searches keep it current)
        self._clears = 0  # clears so far: a search keeps the index it read only when none came meanwhile
        self._sightings_lock = threading.Lock()  # one search reads new rows into the index at a time
        self._lock = threading.Lock()

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest frame taken (None before the first and after a clear)."""
        return self._newest_ns

    # ---------------------------------------------------------------------------------------- inputs

    def add_frame(self, frame: Frame, frame_id: str = "") -> FrameDecision:
        """Take one camera frame: judge its stamp, let the selector decide, store a candidate (in the
        memory too, with its decision and the camera's ``frame_id``; that only queues it)."""
        stamp, newest = frame.stamp_ns, self._newest_ns
        jump_s = 0.0 if newest is None else (stamp - newest) / NS_PER_S
        verdict = self._stamp_guard.check(stamp, newest)
        if verdict == SUSPECT:
            return FrameDecision("stamp_jump", jump_s=jump_s)
        restarted = verdict == RESTART and newest is not None
        if restarted:
            self.clear()
        candidates, out_of_order = self.selector.candidates_seen, self.selector.dropped_out_of_order
        kept = self.selector.push(frame)
        if self.selector.dropped_out_of_order > out_of_order:
            return FrameDecision("out_of_order", restarted=restarted)
        stored, store_error = False, ""
        if self.selector.candidates_seen != candidates:
            try:
                self.buffer.push(frame)
                stored = True
            except ClipBufferError as exc:
                store_error = str(exc)
            if stored and isinstance(self.memory, MemoryStore):
                self._remember(stamp, frame_id)
        self._latest = frame
        self._newest_ns = stamp
        if self._oldest_ns is None:
            self._oldest_ns = stamp
        if kept is not None:
            self._kept_stamps.append(stamp)
        return FrameDecision(
            jump_s=jump_s if restarted else 0.0,
            restarted=restarted,
            stored=stored,
            store_error=store_error,
            keyframe=kept is not None,
        )

    def add_pose(self, stamp_ns: int, pose: Pose) -> bool:
        """Take one odometry pose (already checked); False when it is not newer than the newest kept.

        A stamp ``jump_back_reset_s`` behind the newest pose means the odometry restarted with the bag or
        the simulation: the poses are forgotten and this one starts anew."""
        newest, back_ns = self._newest_pose_ns, self._stamp_guard.back_ns  # the camera's jump rule
        if newest is not None and back_ns and stamp_ns < newest - back_ns:
            self.poses.clear()
            newest = None
        added = self.poses.add(stamp_ns, pose)
        if newest is None or stamp_ns > newest:
            self._newest_pose_ns = stamp_ns
        if added and isinstance(self.memory, MemoryStore):
            self.memory.add_pose(stamp_ns, pose)
        return added

    def _remember(self, stamp_ns: int, frame_id: str) -> None:
        """Queue the candidate just stored, as the buffer stores it, with its decision, for the memory."""
        memory, decision = self.memory, self.selector.last_decision()
        payload = self.buffer.payload(stamp_ns)
        if not isinstance(memory, MemoryStore) or decision is None or decision.stamp_ns != stamp_ns:
            return
        if payload is not None:
            kept, overlap, reason = decision.kept, decision.overlap, decision.reason
            memory.add_candidate(stamp_ns, kept, overlap, reason, payload, frame_id)

    def clear(self) -> tuple[int, int]:
        """Forget frames, key-frame decisions and poses; returns (frames, decisions) dropped."""
        with self._lock:
            frames, decisions = len(self.buffer), len(self.selector)
            self.selector.reset()
            self.buffer.clear()
            self.poses.clear()
            self._kept_stamps.clear()
            self._latest = None
            self._newest_ns = None
            self._oldest_ns = None
            self._newest_pose_ns = None
            self._stamp_guard.reset()
            self._sightings = None  # read again from the memory (a reset may have cleared it)
            self._clears += 1
        return frames, decisions

    # --------------------------------------------------------------------------------------- queries

    def keyframes(self, window: Window, default_s: float) -> WindowKeyFrames:
        """The key frames of ``window`` (``default_s`` seconds back from the newest frame when it gives
        no length), as stored (downscaled, JPEG) and with the pose at each stamp where odometry has one.

        A window inside what RAM holds is answered from RAM (the selector's
        :meth:`~embodied_r_ros.keyframes.StreamingKeyFrameSelector.keyframes_in_window`). One that starts
        before it, when the memory holds older frames of the same timeline, is answered from the memory by
        the same rule (:meth:`_keyframes_from_memory`); so is an interval asked about before the first
        frame since a restart.

        Raises :class:`EmptyHistoryError` before the first frame (unless the memory answers), and
        :class:`~embodied_r_ros.windows.WindowError` for a window outside the history; the list is empty
        when the window holds no frame."""
        memory = self.memory
        if memory is not None and memory.readable and self._reaches_before_ram(window, default_s):
            memory.flush(MEMORY_FLUSH_S)  # the newest candidates and poses, still queued, belong to it
            try:
                found = self._keyframes_from_memory(window, default_s, memory)
            except MemoryStoreError:
                found = None  # closed or unreadable meanwhile: RAM answers what it can
            if found is not None:
                return found
        with self._lock:
            newest, oldest = self._newest_ns, self._oldest_ns
            if newest is None or oldest is None:
                raise EmptyHistoryError("no camera frames since the start or the last reset")
            oldest = max(oldest, newest - round(self.history_s * NS_PER_S))
            start, end = window.resolve(default_s, oldest, newest, self.history_s)
            keyframes = self.selector.keyframes_in_window(start, end)
            if keyframes and keyframes[-1].frame.stamp_ns == newest:
                keyframes[-1] = self._stored(keyframes[-1])
        return WindowKeyFrames(start, end, newest, [self._with_pose(k) for k in keyframes])

    def _ram_span(self) -> tuple[int, int] | None:
        """(oldest, newest) stamps RAM answers for (None before the first frame); caller holds the lock."""
        newest, oldest = self._newest_ns, self._oldest_ns
        if newest is None or oldest is None:
            return None
        return max(oldest, newest - round(self.history_s * NS_PER_S)), newest

    def _reaches_before_ram(self, window: Window, default_s: float) -> bool:
        """Whether ``window`` starts before what RAM holds (an interval, when RAM holds nothing)."""
        window.check()
        with self._lock:
            ram = self._ram_span()
        if ram is None:
            return window.absolute
        return window.bounds(default_s, ram[1])[0] < ram[0]

    def _keyframes_from_memory(
        self, window: Window, default_s: float, memory: MemoryReader
    ) -> WindowKeyFrames | None:
        """The key frames of ``window`` from the memory; None when it holds nothing older than RAM.

        The rule is the selector's, on the stored decisions: the window's candidates (every candidate is
        stored with its decision, judged as it arrived against the stream's last kept frame), the first
        and the last of them always (the newest frame too when the window reaches it, from RAM), then the
        paper's clamp to [``keyframes.min_keyframes``, ``keyframes.max_keyframes``]: fewer kept frames than
        the minimum are topped up with evenly spaced candidates of the window, more than the maximum are
        thinned to evenly spaced ones among the kept, the first and the last included
        (:func:`~embodied_r_ros.keyframes.clamp_indices`). So the chosen frames spread over the whole
        window however long it is, and a window gets the same key frames from the memory as from RAM."""
        config = self.keyframe_config
        # The RAM state is read under the lock; the memory's reads and JPEG decodes run outside it, so the
        # camera thread (add_frame takes the same lock) never waits for a question about the past.
        with self._lock:
            ram, latest = self._ram_span(), self._latest
        span = memory.span()
        if span is None or (ram is not None and span[0] >= ram[0]):
            return None
        newest = span[1] if ram is None else ram[1]
        start, end = window.resolve(default_s, span[0], newest, self.history_s, **_memory_bounds(memory))
        records = [
            CandidateDecision(c.stamp_ns, c.kept, c.overlap, c.reason, None)
            for c in memory.candidates(start, end)
        ]
        if latest is not None and start <= latest.stamp_ns <= end:
            if not records or records[-1].stamp_ns < latest.stamp_ns:
                records.append(CandidateDecision(latest.stamp_ns, False, None, "", latest))
        keyframes = []
        for i, overlap, reason in assemble_keyframes(records, config.min_keyframes, config.max_keyframes):
            record = records[i]
            if record.frame is not None:  # the newest frame, not a candidate: as the buffer stores it
                with self._lock:
                    keyframes.append(self._stored(KeyFrame(record.frame, i, overlap, reason)))
                continue
            stored = memory.frame(record.stamp_ns)
            if stored is not None:
                keyframes.append(KeyFrame(Frame(stored.image, record.stamp_ns), i, overlap, reason))
        with_poses = [self._with_pose(k, memory) for k in keyframes]
        return WindowKeyFrames(start, end, newest, with_poses)

    def search(
        self,
        question: str,
        options: Sequence[str],
        window: Window,
        embedder: TextEmbedder,
        settings: SearchSettings,
    ) -> WindowKeyFrames:
        """The key frames of the memory's intervals that best match ``question`` (a question that names
        things, not times; see :mod:`~embodied_r_ros.memory.search`), searched within ``window`` when it
        names one (seconds or stamps), else over the whole memory of the current timeline.

        A count, a first or a last sighting is answered from the memory's sightings
        (:mod:`~embodied_r_ros.memory.sightings`) when they name what it asks about; a count also gets the
        memory's tally (``summary``) and the sightings it counted (``counted``).

        Raises :class:`MemorySearchError` when the memory is off, holds no frame, or none of its key
        frames is described yet, and :class:`~embodied_r_ros.windows.WindowError` for a window outside it."""
        memory = self.memory
        if memory is None or not memory.readable:
            problem = memory.status().problem if memory is not None else "memory.enabled is false"
            raise MemorySearchError(f"cannot search the memory: it is off ({problem}); ask about a window")
        memory.flush(MEMORY_FLUSH_S)
        span = memory.span()
        if span is None:
            raise MemorySearchError("cannot search the memory: it holds no camera frame yet")
        start, end = span
        if window.absolute or window.seconds:
            start, end = window.resolve(0.0, span[0], span[1], self.history_s, fix="search a later interval")
            start = max(start, span[0])
        try:
            settings = settings_for(question, settings, self.keyframe_config.max_keyframes)
            # A count, a first or a last sighting: from every sighting the memory holds, in time order.
            sighted = SightingAnswer()
            if settings.sightings:
                sighted = self._sighting_answer(memory, question, options, start, end, settings.k)
            if sighted.hits:
                intervals = group_hits(sighted.hits, settings, start, end)
            else:
                intervals = search_intervals(memory, embedder, question, options, start, end, settings)
            found = self.keyframes_in_intervals(intervals) if intervals else None
        except MemoryStoreError as exc:
            raise MemorySearchError(f"cannot search the memory: {exc}") from exc
        if found is None or not found.keyframes:
            raise MemorySearchError(
                f"the memory holds no described key frame between {format_stamp(start)} and "
                f"{format_stamp(end)}: the background describer (memory.describe) has not reached them yet, "
                "or it is off; ask again later, or ask about a window"
            )
        if not sighted.counted:
            return found
        return dataclasses.replace(found, summary=sighted.summary, counted=sighted.counted)

    def _sighting_answer(
        self, memory: MemoryReader, question: str, options: Sequence[str], start_ns: int, end_ns: int, k: int
    ) -> SightingAnswer:
        """:func:`~embodied_r_ros.memory.sightings.sighting_answer` over the memory's sightings, the index
        first brought up to date (:func:`~embodied_r_ros.memory.sightings.catch_up`). The index is kept for
        the next search only when no clear came while it was read: a reset (which may clear the memory)
        between reading the index and keeping it would leave the old memory's sightings."""
        with self._sightings_lock:  # the index grows in place: one search reads into it at a time
            with self._lock:
                index, clears = self._sightings, self._clears
            index = catch_up(index, memory, self.poses.max_gap_ns / NS_PER_S)
            with self._lock:
                if self._clears == clears:
                    self._sightings = index
            return sighting_answer(index, question, options, start_ns, end_ns, k)

    def keyframes_in_intervals(self, intervals: Sequence[Interval]) -> WindowKeyFrames:
        """The key frames of a memory search's ``intervals`` (disjoint, in time order), from the memory.

        Inside each interval the rule is the selector's (its stored decisions, the interval's first and
        last candidate); every hit is kept (reason ``retrieved``); over all intervals together the paper's
        clamp to [``keyframes.min_keyframes``, ``keyframes.max_keyframes``] (:func:`spread_indices`).
        Raises :class:`~embodied_r_ros.memory.records.MemoryStoreError` when the memory is off or closed."""
        memory = self.memory
        if memory is None or not memory.readable:
            raise MemoryStoreError("the durable memory is off (memory.enabled false, or it failed to open)")
        config = self.keyframe_config
        records: list[StoredCandidate] = []
        reasons: dict[int, str] = {}
        hits: dict[int, float] = {}  # candidate index -> its interval's score (best intervals first)
        spans = []
        for interval in intervals:
            found = memory.candidates(interval.start_ns, interval.end_ns)
            if not found:
                continue
            base = len(records)
            records.extend(found)
            spans.append((interval.start_ns, interval.end_ns))
            reasons.update({base + i: c.reason for i, c in enumerate(found) if c.kept})
            reasons.setdefault(base, REASON_FIRST)
            reasons.setdefault(base + len(found) - 1, REASON_LAST)
            wanted = set(interval.hits)
            hits.update({base + i: interval.score for i, c in enumerate(found) if c.stamp_ns in wanted})
        must = sorted(hits, key=lambda i: -hits[i])
        chosen = spread_indices(list(reasons), must, len(records), config.min_keyframes, config.max_keyframes)
        keyframes = []
        for i in chosen:
            stored = memory.frame(records[i].stamp_ns)
            if stored is None:  # evicted since the search
                continue
            reason = REASON_RETRIEVED if i in hits else reasons.get(i, REASON_SAMPLED)
            frame = Frame(stored.image, records[i].stamp_ns)
            keyframes.append(self._with_pose(KeyFrame(frame, i, records[i].overlap, reason), memory))
        span = memory.span()
        newest = span[1] if span is not None else (spans[-1][1] if spans else 0)
        start, end = (spans[0][0], spans[-1][1]) if spans else (0, 0)
        return WindowKeyFrames(start, end, newest, keyframes, tuple(spans), memory.timeline_start_ns())

    def stored_frame(self, stamp_ns: int) -> Frame | None:
        """The stored copy of the frame stamped exactly ``stamp_ns`` (the pixels a question will send)."""
        return self.buffer.get(stamp_ns, tolerance_ns=0)

    def size(self) -> HistorySize:
        """What the history holds now; key frames older than the buffer's span are let go here."""
        oldest = self.buffer.oldest_ns
        while self._kept_stamps and oldest is not None and self._kept_stamps[0] < oldest:
            self._kept_stamps.popleft()
        return HistorySize(
            frames=len(self.buffer),
            keyframes=len(self._kept_stamps),
            candidates=len(self.selector),
            poses=len(self.poses),
            memory_bytes=self.buffer.memory_bytes,
        )

    def _stored(self, keyframe: KeyFrame) -> KeyFrame:
        """The key frame as the buffer stores it: the newest frame comes raw from the selector, and the VLM
        should see every key frame the same way (downscaled, JPEG) so its encoding cache keys match."""
        stored = self.stored_frame(keyframe.frame.stamp_ns)
        if stored is None:
            self.buffer.push(keyframe.frame)
            stored = self.stored_frame(keyframe.frame.stamp_ns)
        return keyframe if stored is None else dataclasses.replace(keyframe, frame=stored)

    def _with_pose(self, keyframe: KeyFrame, memory: MemoryReader | None = None) -> KeyFrame:
        """The key frame with the pose at its stamp: from RAM, else (given ``memory``) from the memory."""
        pose = self.poses.pose_at(keyframe.frame.stamp_ns)
        if pose is None and memory is not None:
            pose = memory.pose_at(keyframe.frame.stamp_ns, self.poses.max_gap_ns / NS_PER_S)
        if pose is None:
            return keyframe
        return dataclasses.replace(keyframe, frame=dataclasses.replace(keyframe.frame, pose=pose))


def _memory_bounds(memory: MemoryReader) -> dict[str, str]:
    """What bounds the memory's history and how to reach further back (for a window before it)."""
    if isinstance(memory, MemoryStore):
        return dict(
            held=f"its memory holds the stream since its stamps last jumped back, within memory."
            f"disk_budget_mb = {memory.budget_bytes / 2**20:g} MB, and a reset clears it unless "
            "memory.keep_on_reset",
            fix="raise memory.disk_budget_mb",
        )
    return dict(
        held=f"memory store {memory.path} holds the stream since its stamps last jumped back",
        fix="choose an interval the store holds",
    )
