"""A transform tree like ROS's tf2 buffer, ROS-free: edges parent -> child, static or sampled in time, and
the pose of one frame in another at a stamp, interpolated.

Each child frame has one parent (a tree, as in tf2). A static edge (``/tf_static``) holds at every stamp; a
dynamic one (``/tf``) keeps its samples in a :class:`~embodied_r_ros.poses.pose_history.PoseHistory`, which
interpolates between the samples around a stamp and refuses a stamp farther than ``max_gap_s`` from any.
:meth:`TransformTree.lookup` walks from both frames up to their common ancestor and composes the edges.

Transforms arrive a little after the camera frames they belong to, so :class:`PendingLookups` holds camera
stamps until every dynamic edge on the way has a sample at or after them (then the pose is interpolated, not
extrapolated), or until ``wait_s`` of newer camera stamps passed (then the nearest samples count, within
``max_gap_s``, as for odometry). Thread-safe: the transform callbacks add while the camera thread asks.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from ..frames import NS_PER_S, Pose
from .pose_history import PoseHistory
from .transforms import IDENTITY, compose, invert, pose_problem

EDGE_CAPACITY = 4096  # samples per dynamic edge (256 kB): 40 s at 100 Hz; the older half goes when full
# A sample this far behind its edge's newest means the transforms restarted (a bag loops, a simulation
# restarts): the edge starts anew, as the camera's history does (camera.jump_back_reset_s's default).
RESTART_BACK_S = 1.0
PENDING_CAPACITY = 4096  # camera stamps waiting at most; past it the oldest is settled at once


@dataclass(frozen=True)
class Lookup:
    """The pose of a frame in another at a stamp, or why there is none (``problem``); ``wait``: not yet
    (a dynamic edge has no sample at or after the stamp, or a frame is not known yet)."""

    pose: Pose | None = None
    problem: str = ""
    wait: bool = False


class _Edge:
    """One parent -> child edge: a static pose, or the samples of a dynamic one."""

    def __init__(self, parent: str, static: Pose | None, samples: PoseHistory | None) -> None:
        self.parent = parent
        self.static = static
        self.samples = samples
        self.newest_ns: int | None = None


class TransformTree:
    """Edges parent -> child (static, or sampled in time) and lookups between frames at a stamp."""

    def __init__(self, max_gap_s: float = 0.5, capacity: int = EDGE_CAPACITY) -> None:
        if not max_gap_s > 0:
            raise ValueError(f"max_gap_s must be > 0 seconds, got {max_gap_s}")
        self.max_gap_s = max_gap_s
        self.capacity = capacity
        self._edges: dict[str, _Edge] = {}  # by child frame
        self._lock = threading.Lock()

    def add(self, parent: str, child: str, stamp_ns: int, pose: Pose, static: bool = False) -> str:
        """Take one transform (``pose``: the child in the parent); returns why it was refused ("" when
        taken). A child that changes parent, or between static and dynamic, starts anew."""
        parent, child = frame_name(parent), frame_name(child)
        if not parent or not child:
            return f"a transform needs both frame ids, got parent {parent!r} and child {child!r}"
        if parent == child:
            return f"a transform from frame {parent!r} to itself"
        problem = pose_problem(pose)
        if problem:
            return f"transform {parent} -> {child}: {problem}"
        with self._lock:
            edge = self._edges.get(child)
            if edge is None or edge.parent != parent or (edge.static is not None) != static:
                samples = None if static else PoseHistory(self.capacity, self.max_gap_s)
                edge = self._edges[child] = _Edge(parent, None, samples)
            if static:
                edge.static = pose
                return ""
            assert edge.samples is not None
            if edge.newest_ns is not None and stamp_ns < edge.newest_ns - RESTART_BACK_S * NS_PER_S:
                edge.samples.clear()
                edge.newest_ns = None
            if edge.samples.add(stamp_ns, pose):
                edge.newest_ns = stamp_ns
        return ""

    def clear(self) -> None:
        """Forget every edge."""
        with self._lock:
            self._edges.clear()

    def frames(self) -> list[str]:
        """Every frame the tree knows, sorted."""
        with self._lock:
            return sorted({*self._edges, *(edge.parent for edge in self._edges.values())})

    def lookup(self, target: str, source: str, stamp_ns: int, final: bool = True) -> Lookup:
        """The pose of frame ``source`` in frame ``target`` at ``stamp_ns``.

        ``final`` False answers ``wait`` while the tree may still come to cover the stamp (a frame not
        known yet, a dynamic edge without a sample at or after it); True settles with what there is.
        """
        target, source = frame_name(target), frame_name(source)
        with self._lock:
            up_source, up_target = self._chain(source), self._chain(target)
            common = next((frame for frame in up_source if frame in up_target), None)
            if common is None:
                if not final:
                    return Lookup(wait=True)
                return Lookup(problem=self._unconnected(target, source, up_source, up_target))
            edges = up_source[: up_source.index(common)] + up_target[: up_target.index(common)]
            if not final:
                behind = [c for c in edges if self._edges[c].static is None and self._behind(c, stamp_ns)]
                if behind:
                    return Lookup(wait=True)
            poses: dict[str, Pose] = {}
            for child in edges:
                pose = self._edge_pose(child, stamp_ns)
                if pose is None:
                    edge = self._edges[child]
                    return Lookup(
                        problem=f"transform {edge.parent} -> {child} has no sample within "
                        f"{self.max_gap_s:g} s of stamp {stamp_ns / NS_PER_S:.3f}"
                    )
                poses[child] = pose
        common_source = self._down(common, up_source, poses)
        common_target = self._down(common, up_target, poses)
        return Lookup(pose=compose(invert(common_target), common_source))

    def _chain(self, frame: str) -> list[str]:
        """``frame`` and its ancestors, up to the root (a loop in bad data ends the walk)."""
        chain = [frame]
        while chain[-1] in self._edges:
            parent = self._edges[chain[-1]].parent
            if parent in chain:
                break
            chain.append(parent)
        return chain

    def _behind(self, child: str, stamp_ns: int) -> bool:
        newest = self._edges[child].newest_ns
        return newest is None or newest < stamp_ns

    def _edge_pose(self, child: str, stamp_ns: int) -> Pose | None:
        edge = self._edges[child]
        if edge.static is not None:
            return edge.static
        assert edge.samples is not None
        return edge.samples.pose_at(stamp_ns)

    @staticmethod
    def _down(common: str, chain: list[str], poses: dict[str, Pose]) -> Pose:
        """The pose of ``chain[0]`` in ``common`` (one of its ancestors): the edges composed top down."""
        pose = IDENTITY
        for child in reversed(chain[: chain.index(common)]):
            pose = compose(pose, poses[child])
        return pose

    def _unconnected(self, target: str, source: str, up_source: list[str], up_target: list[str]) -> str:
        known = {*self._edges, *(edge.parent for edge in self._edges.values())}
        missing = [frame for frame in (target, source) if frame not in known]
        if missing:
            listed = ", ".join(sorted(known)[:12]) or "none yet"
            return f"no transform names frame(s) {', '.join(missing)} (frames known: {listed})"
        return (
            f"frames {target} and {source} are in different trees (roots {up_target[-1]} and "
            f"{up_source[-1]}): a transform between them is missing"
        )


def frame_name(frame: str) -> str:
    """A frame id as tf2 compares them: without a leading slash and surrounding spaces."""
    return frame.strip().lstrip("/")


@dataclass(frozen=True)
class SettledLookup:
    """A camera stamp whose pose lookup is settled: the pose, or why there is none."""

    stamp_ns: int
    frame: str
    lookup: Lookup


class PendingLookups:
    """Camera stamps waiting for ``tree`` to cover them (see the module docstring), settled in stamp order.

    ``target`` is the fixed frame the poses are wanted in (``odom``); each stamp comes with the camera frame
    to look up. ``wait_s``: how much newer the camera's stamps get before a waiting stamp settles with the
    nearest samples.
    """

    def __init__(self, tree: TransformTree, target: str, wait_s: float) -> None:
        self.tree = tree
        self.target = target
        self.wait_ns = round(wait_s * NS_PER_S)
        self._waiting: deque[tuple[int, str]] = deque()
        self._newest_ns: int | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)

    def add(self, stamp_ns: int, frame: str) -> list[SettledLookup]:
        """Queue a camera stamp with its frame; returns the lookups settled now, oldest first.

        A stamp not newer than the newest queued is skipped (the history drops such frames too), unless it
        is ``RESTART_BACK_S`` behind (a bag loops): then the queue starts anew from it.
        """
        with self._lock:
            newest = self._newest_ns
            if newest is not None and stamp_ns <= newest:
                if stamp_ns >= newest - RESTART_BACK_S * NS_PER_S:
                    return []
                self._waiting.clear()
            self._waiting.append((stamp_ns, frame))
            self._newest_ns = stamp_ns
        return self.settle()

    def settle(self) -> list[SettledLookup]:
        """Settle what can be settled now (after new transforms or a new camera stamp), oldest first."""
        settled: list[SettledLookup] = []
        with self._lock:
            while self._waiting:
                stamp, frame = self._waiting[0]
                final = (
                    len(self._waiting) > PENDING_CAPACITY
                    or self._newest_ns is not None
                    and self._newest_ns - stamp >= self.wait_ns
                )
                lookup = self.tree.lookup(self.target, frame, stamp, final=final)
                if lookup.wait:
                    break
                self._waiting.popleft()
                settled.append(SettledLookup(stamp, frame, lookup))
        return settled

    def clear(self) -> None:
        """Forget the waiting stamps."""
        with self._lock:
            self._waiting.clear()
            self._newest_ns = None
