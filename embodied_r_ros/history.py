"""The robot's history: the frames and poses it was given, and the key frames of any past window.

ROS-free, so it is tested without DDS: the node's camera and odometry callbacks hand it frames and poses
(:meth:`RobotHistory.add_frame`, :meth:`RobotHistory.add_pose`) and a question asks it for the key frames
of its window (:meth:`RobotHistory.keyframes`). It owns the parts that must stay consistent with each
other: the :class:`~embodied_r_ros.keyframes.StreamingKeyFrameSelector` (which frames are key frames), the
:class:`~embodied_r_ros.clip_buffer.ClipBuffer` (the stored copies of the selector's candidates), the
:class:`~embodied_r_ros.pose_history.PoseHistory` (odometry), the
:class:`~embodied_r_ros.stamp_guard.StampGuard` (a bag that loops clears the history) and the stamps of
the oldest and newest frame since the start or the last :meth:`RobotHistory.clear`.

Threads: one camera thread calls ``add_frame``, one odometry thread ``add_pose``; ``keyframes`` and
``clear`` may come from others. ``keyframes`` and ``clear`` hold the history's lock; ``add_frame`` does
not, so the camera never waits for a question (the selector and the buffer lock themselves).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections import deque
from dataclasses import dataclass

from .clip_buffer import ClipBuffer, ClipBufferError
from .config import BufferConfig, KeyFrameConfig
from .frames import NS_PER_S, Frame, Pose
from .keyframes import KeyFrame, StreamingKeyFrameSelector
from .pose_history import PoseHistory
from .stamp_guard import RESTART, SUSPECT, StampGuard
from .windows import Window

POSE_CAPACITY = 131072  # odometry samples kept: 8 MB, over 10 minutes at 100 Hz


class EmptyHistoryError(LookupError):
    """No camera frame since the start or the last clear: there is nothing to answer from."""


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
    """The key frames of one question's window, with the window and the newest stamp it was cut from."""

    start_ns: int
    end_ns: int
    newest_ns: int
    keyframes: list[KeyFrame]


class RobotHistory:
    """Frames, key-frame decisions and poses of one camera stream (see the module docstring)."""

    def __init__(
        self,
        buffer: BufferConfig,
        keyframes: KeyFrameConfig,
        jump_back_reset_s: float = 0.0,
        odometry_max_gap_s: float = 0.5,
        pose_capacity: int = POSE_CAPACITY,
    ) -> None:
        self.history_s = buffer.history_s
        self.buffer = ClipBuffer(buffer)
        self.selector = StreamingKeyFrameSelector(
            keyframes,
            history_s=buffer.history_s,
            frame_source=functools.partial(self.buffer.get, tolerance_ns=0),
        )
        self.poses = PoseHistory(pose_capacity, odometry_max_gap_s)
        self._stamp_guard = StampGuard(jump_back_reset_s)
        self._kept_stamps: deque[int] = deque()
        self._newest_ns: int | None = None
        self._oldest_ns: int | None = None  # the first frame since the start or the last clear
        self._newest_pose_ns: int | None = None
        self._lock = threading.Lock()

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest frame taken (None before the first and after a clear)."""
        return self._newest_ns

    # ---------------------------------------------------------------------------------------- inputs

    def add_frame(self, frame: Frame) -> FrameDecision:
        """Take one camera frame: judge its stamp, let the selector decide, store a candidate."""
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
        return added

    def clear(self) -> tuple[int, int]:
        """Forget frames, key-frame decisions and poses; returns (frames, decisions) dropped."""
        with self._lock:
            frames, decisions = len(self.buffer), len(self.selector)
            self.selector.reset()
            self.buffer.clear()
            self.poses.clear()
            self._kept_stamps.clear()
            self._newest_ns = None
            self._oldest_ns = None
            self._newest_pose_ns = None
            self._stamp_guard.reset()
        return frames, decisions

    # --------------------------------------------------------------------------------------- queries

    def keyframes(self, window: Window, default_s: float) -> WindowKeyFrames:
        """The key frames of ``window`` (``default_s`` seconds back from the newest frame when it gives
        no length), as stored (downscaled, JPEG) and with the pose at each stamp where odometry has one.

        Raises :class:`EmptyHistoryError` before the first frame, and
        :class:`~embodied_r_ros.windows.WindowError` for a window outside the history; the list is empty
        when the window holds no frame."""
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

    def _with_pose(self, keyframe: KeyFrame) -> KeyFrame:
        pose = self.poses.pose_at(keyframe.frame.stamp_ns)
        if pose is None:
            return keyframe
        return dataclasses.replace(keyframe, frame=dataclasses.replace(keyframe.frame, pose=pose))
