"""Key-frame selection: the few frames of a clip that the VLM describes (Embodied-R, pipeline step 2).

The rule (paper): candidates are sampled at ``candidate_fps`` (1 fps) and the last frame is always a
candidate. Candidate 0 is kept. Each later candidate is compared with the LAST KEPT frame: ORB features,
brute-force Hamming matching with cross-check and, with more than ``min_matches`` matches, a RANSAC
homography from the candidate to the reference; the candidate's four corners are projected into the
reference and the overlap is the area of that quad inside the reference rectangle over the reference area.
A candidate is kept (and becomes the new reference) when the overlap is below ``overlap_threshold`` or when
matching fails. The last candidate is always kept, and the count is clamped to
[``min_keyframes``, ``max_keyframes``] with :func:`evenly_spaced_indices`.

Speed: grey images are matched at ``match_width`` pixels wide; ORB features are computed once per
candidate and the reference's features are cached, so a candidate costs one ORB pass, one match against
one reference and one homography. At reduced width the ORB patch and the RANSAC threshold shrink with the
image (:func:`orb_patch_size`), so that both cover the same part of the scene as at full resolution,
while the feature budget stays ``orb_features`` (fewer features lost the matches under strong zoom), and
the homography is estimated with OpenCV's MAGSAC++ (``cv2.USAC_MAGSAC``, a RANSAC variant; several times
faster than plain RANSAC on pairs with few inliers), capped at 500 iterations, and the cross-checked
brute-force matching is one matrix product (:func:`cross_check_matches`, the same matches as OpenCV's
``BFMatcher``). ``bench/bench_keyframes.py`` measures the speed and the agreement of the decisions with the
paper's rule as written (full resolution, plain RANSAC with 2000 iterations).

Streaming design (memory): a robot must not re-run the rule over its history when a question arrives.
:class:`StreamingKeyFrameSelector` decides each candidate once, as the frame arrives, and stores a small
decision record per candidate (stamp, kept, overlap); the key frames of any time window are then assembled
from the stored decisions (:meth:`StreamingKeyFrameSelector.keyframes_in_window`). Only candidates are
recorded (``candidate_fps`` per second, not the camera rate), and records older than ``history_s`` before
the newest are dropped, so the history is bounded by ``history_s * candidate_fps + 1`` records. Images
are either held by the selector with the record (simple; memory = that many frames) or, for long
histories on a robot, left to the :class:`~embodied_r_ros.clip_buffer.ClipBuffer`: pass
``frame_source=lambda stamp: buffer.get(stamp, tolerance_ns=0)`` and the selector keeps stamps only and
fetches just the chosen frames at query time. Apart from the records it holds the reference's features
and the newest frame (which serves as the always-kept last frame when it is not itself a candidate).

One rule for the robot and its training data: the key frames of a window ``[start, end]`` of a stream are
what the node answers when it has watched the stream from its first frame: the candidates in the window,
judged as they arrived against the stream's last kept frame (the candidate grid is anchored at the
stream's first frame, not the window's), the window's first candidate (always kept: the question's
context starts there), the newest frame when the window reaches it (always kept: what the robot sees
now), then the clamp. The answer does not depend on when a past window is asked about. :class:`WindowReplay`
computes it for many windows of a recorded stream in one pass, as the node answers after the recording
has played; ``prepare`` (and so ``eval``) uses it, so the reasoner is trained on the key frames the robot
will show it. :func:`select_keyframes` is the same rule for a clip that IS the whole stream.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

import cv2
import numpy as np

from .config import KeyFrameConfig
from .frames import NS_PER_S, Frame

# Why a frame is a key frame.
REASON_FIRST = "first"  # the clip's first candidate
REASON_LOW_OVERLAP = "low_overlap"  # overlap with the reference below the threshold
REASON_MATCH_FAILED = "match_failed"  # no descriptors, too few matches or no usable homography
REASON_LAST = "last"  # the clip's last candidate (always kept)
REASON_SAMPLED = "sampled"  # added by the clamp when the rule kept fewer than min_keyframes

FrameSource = Callable[[int], "Frame | None"]


@dataclass(frozen=True)
class KeyFrame:
    """One selected frame.

    ``index`` is the frame's index among the clip's candidate frames; ``overlap`` is its overlap with the
    reference when the rule judged it (None for the first candidate and when matching failed);
    ``reason`` is one of the ``REASON_*`` constants.
    """

    frame: Frame
    index: int
    overlap: float | None = None
    reason: str = REASON_LOW_OVERLAP


@dataclass(frozen=True)
class Features:
    """ORB features of one grey match image.

    ``points`` (N, 2) float32 pixels and ``descriptors`` (N, 32) uint8 (None when there are none) of the
    ``width`` x ``height`` match image, which is the input scaled by ``scale``.
    """

    points: np.ndarray
    descriptors: np.ndarray | None
    width: int
    height: int
    scale: float = 1.0


# --------------------------------------------------------------------------------------------------
# Candidate sampling and clamping
# --------------------------------------------------------------------------------------------------


def candidate_period_ns(fps: float) -> int:
    """The candidate period in integer nanoseconds for ``fps`` candidates per second."""
    if not fps > 0:
        raise ValueError(f"candidate fps must be > 0, got {fps}")
    return max(1, round(NS_PER_S / fps))


def _grid_indices(stamps_ns: Sequence[int], fps: float) -> list[int]:
    """Indices of the first frame and of the first frame at or after each 1/fps step after it."""
    period = candidate_period_ns(fps)
    indices: list[int] = []
    t0 = next_ns = 0
    previous: int | None = None
    for i, stamp in enumerate(stamps_ns):
        stamp = int(stamp)
        if previous is not None and stamp < previous:
            raise ValueError(
                f"frame stamps must be non-decreasing, got {stamp} after {previous} at index {i}; "
                "sort the frames by stamp"
            )
        previous = stamp
        if not indices:
            t0, next_ns = stamp, stamp + period
            indices.append(i)
        elif stamp >= next_ns:
            indices.append(i)
            # A gap longer than one period collapses into this frame; the grid stays anchored at t0.
            next_ns = t0 + ((stamp - t0) // period + 1) * period
    return indices


def candidate_indices(stamps_ns: Sequence[int], fps: float) -> list[int]:
    """Indices of the candidate frames among frames with these (non-decreasing) stamps.

    The first frame, then the first frame at or after each ``1/fps`` step from the first stamp, and the
    last frame always. Raises ``ValueError`` when stamps decrease or ``fps <= 0``.
    """
    indices = _grid_indices(stamps_ns, fps)
    if indices and indices[-1] != len(stamps_ns) - 1:
        indices.append(len(stamps_ns) - 1)
    return indices


def evenly_spaced_indices(n: int, k: int) -> list[int]:
    """``k`` indices out of ``range(n)``: the first, the last and evenly spaced ones between.

    ``k >= n`` gives all ``n``; ``k <= 0`` or ``n <= 0`` gives ``[]``; ``k == 1`` gives ``[0]`` (the start
    of the span, as ``numpy.linspace`` does). Index ``i`` is ``round(i * (n - 1) / (k - 1))`` with halves
    rounded up, in integer arithmetic, so the result is strictly increasing.
    """
    if n <= 0 or k <= 0:
        return []
    if k >= n:
        return list(range(n))
    if k == 1:
        return [0]
    return [(2 * i * (n - 1) + (k - 1)) // (2 * (k - 1)) for i in range(k)]


def clamp_indices(kept: Sequence[int], n_candidates: int, lo: int = 4, hi: int = 32) -> list[int]:
    """Clamp the kept candidate indices to between ``lo`` and ``hi`` of them.

    Fewer than ``lo``: ``lo`` evenly spaced indices of ALL ``n_candidates`` (all when there are fewer).
    More than ``hi``: ``hi`` evenly spaced ones of ``kept``. Otherwise ``kept`` (sorted, unique).
    """
    if lo > hi:
        raise ValueError(f"clamp bounds must satisfy lo <= hi, got lo={lo} hi={hi}")
    kept = sorted(set(kept))
    if any(i < 0 or i >= n_candidates for i in kept):
        raise ValueError(f"kept indices must lie in [0, {n_candidates}), got {kept}")
    if len(kept) < lo:
        return evenly_spaced_indices(n_candidates, lo)
    if len(kept) > hi:
        return [kept[i] for i in evenly_spaced_indices(len(kept), hi)]
    return kept


def clamp_keyframes(
    keyframes: Sequence[KeyFrame], candidates: Sequence[Frame], lo: int = 4, hi: int = 32
) -> list[KeyFrame]:
    """Clamp key frames to [lo, hi] (see :func:`clamp_indices`); ``KeyFrame.index`` indexes ``candidates``.

    Key frames that stay keep their overlap and reason; frames added from the candidates get
    reason ``"sampled"``.
    """
    by_index = {kf.index: kf for kf in keyframes}
    chosen = clamp_indices(list(by_index), len(candidates), lo, hi)
    return [by_index.get(i) or KeyFrame(candidates[i], i, None, REASON_SAMPLED) for i in chosen]


# --------------------------------------------------------------------------------------------------
# Features and overlap
# --------------------------------------------------------------------------------------------------


def orb_patch_size(scale: float) -> int:
    """ORB patch (and edge) size for a match image at ``scale`` of the input: OpenCV's 31 px shrunk with it.

    The patch then covers the same part of the scene as at full resolution and the ignored image border
    stays as thin; 15 px is the floor below which the descriptors lose too much.
    """
    return max(15, min(31, round(31 * scale)))


class FrameMatcher:
    """ORB features of single images and the overlap of two feature sets, as the paper's rule defines it.

    One instance owns its ORB detectors and matcher (OpenCV objects are not shared across threads).
    ``full_resolution=True`` ignores ``match_width``. ``method`` is the robust homography estimator
    (``cv2.USAC_MAGSAC``; ``cv2.RANSAC`` is the paper's). ``ransac_max_iters`` caps it: OpenCV's default
    of 2000 is only reached on pairs with few inliers, which are low-overlap pairs that the rule keeps
    either way; 500 bounds the time such pairs take (the bench compares with the uncapped rule).
    """

    def __init__(
        self,
        config: KeyFrameConfig | None = None,
        *,
        full_resolution: bool = False,
        ransac_max_iters: int = 500,
        method: int = cv2.USAC_MAGSAC,
    ) -> None:
        if ransac_max_iters < 1:
            raise ValueError(f"ransac_max_iters must be >= 1, got {ransac_max_iters}")
        self.config = config or KeyFrameConfig()
        self.match_width = 0 if full_resolution else self.config.match_width
        self.ransac_max_iters = ransac_max_iters
        self.method = method
        self._orbs: dict[int, cv2.ORB] = {}

    def _orb(self, patch_size: int) -> cv2.ORB:
        orb = self._orbs.get(patch_size)
        if orb is None:
            orb = self._orbs[patch_size] = cv2.ORB_create(
                nfeatures=self.config.orb_features, edgeThreshold=patch_size, patchSize=patch_size
            )
        return orb

    def match_image(self, image: np.ndarray) -> tuple[np.ndarray, float]:
        """The grey image matched for ``image`` (RGB or grey uint8) and its scale relative to the input."""
        grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY) if image.ndim == 3 else image
        h, w = grey.shape[:2]
        if self.match_width and w > self.match_width:
            scale = self.match_width / w
            size = (self.match_width, max(1, round(h * scale)))
            return cv2.resize(grey, size, interpolation=cv2.INTER_AREA), scale
        return grey, 1.0

    def features(self, image: np.ndarray | Frame) -> Features:
        """ORB keypoints and descriptors of one image (Frame, HxWx3 RGB or HxW grey uint8)."""
        if isinstance(image, Frame):
            image = image.image
        grey, scale = self.match_image(image)
        h, w = grey.shape[:2]
        keypoints, descriptors = self._orb(orb_patch_size(scale)).detectAndCompute(grey, None)
        points = np.array([kp.pt for kp in keypoints], dtype=np.float32).reshape(-1, 2)
        if descriptors is None or len(descriptors) == 0:
            descriptors = None
        return Features(points, descriptors, w, h, scale)

    def overlap(self, current: Features, reference: Features) -> float | None:
        """Share of the reference covered by the current image, or None when matching fails."""
        if current.descriptors is None or reference.descriptors is None:
            return None
        query, train = cross_check_matches(current.descriptors, reference.descriptors)
        if len(query) <= self.config.min_matches:
            return None
        src = current.points[query]
        dst = reference.points[train]
        # The threshold is in input pixels; at reduced width it shrinks with the image (at least 1 px).
        threshold = max(1.0, self.config.ransac_reproj_threshold * reference.scale)
        homography, _ = cv2.findHomography(src, dst, self.method, threshold, maxIters=self.ransac_max_iters)
        if homography is None:
            return None
        return projected_overlap(homography, current.width, current.height, reference.width, reference.height)


def _signs(descriptors: np.ndarray) -> np.ndarray:
    """Binary descriptors as rows of +1/-1 (float32): the dot product of two rows is 256 - 2 * Hamming."""
    return np.unpackbits(descriptors, axis=1).astype(np.float32) * 2.0 - 1.0


def cross_check_matches(query: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force Hamming matching with cross-check: (query indices, train indices) of the mutual nearest.

    The same matches, in the same order, as ``cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True).match``
    (ties go to the lower index, as there), computed as one matrix product of +1/-1 bit rows, which is
    exact in float32 and ~6x faster than OpenCV's brute force on 500x500 ORB descriptors. The product is
    OpenCV's ``gemm``, not numpy's: numpy's OpenBLAS runs it on a thread pool of its own that ignores
    ``cv2.setNumThreads``, and with other processes on the cores that pool's waits made the selector fall
    to 60 % of its idle speed while the single-threaded rule kept 65 % (bench/bench_keyframes.py --busy).
    """
    # larger = closer; ties broken by argmax's first index
    scores = cv2.gemm(_signs(query), _signs(train), 1.0, None, 0.0, flags=cv2.GEMM_2_T)
    best_train = scores.argmax(axis=1)
    best_query = scores.argmax(axis=0)
    mutual = np.flatnonzero(best_query[best_train] == np.arange(len(query)))
    return mutual, best_train[mutual]


def overlap_ratio(
    current: np.ndarray | Frame, reference: np.ndarray | Frame, config: KeyFrameConfig | None = None
) -> float | None:
    """Overlap of ``current`` with ``reference`` under the paper's rule, or None when matching fails.

    Images are Frames, HxWx3 RGB or HxW grey uint8. For many frames use one :class:`FrameMatcher` and
    reuse the reference's :class:`Features`.
    """
    matcher = FrameMatcher(config)
    return matcher.overlap(matcher.features(current), matcher.features(reference))


def projected_overlap(
    homography: np.ndarray, width: int, height: int, ref_width: int, ref_height: int
) -> float | None:
    """Area of the current image's corners projected by ``homography`` inside the reference, over its area.

    Returns None for a degenerate projection (a corner at or behind infinity, a non-finite value, or a
    quad that is not convex with the source's orientation, which no real camera motion produces).
    """
    corners = np.array([[0, 0, 1], [width, 0, 1], [width, height, 1], [0, height, 1]], dtype=np.float64)
    projected = corners @ np.asarray(homography, dtype=np.float64).T
    if not np.all(np.isfinite(projected)) or np.any(projected[:, 2] <= 1e-12):
        return None
    quad = projected[:, :2] / projected[:, 2:3]
    edges = np.roll(quad, -1, axis=0) - quad
    turns = edges[:, 0] * np.roll(edges, -1, axis=0)[:, 1] - edges[:, 1] * np.roll(edges, -1, axis=0)[:, 0]
    if not np.all(turns > 0):
        return None
    area = _polygon_area(_clip_to_rect(quad.tolist(), float(ref_width), float(ref_height)))
    return min(1.0, area / float(ref_width * ref_height))


def _clip_to_rect(polygon: list[list[float]], width: float, height: float) -> list[list[float]]:
    """Sutherland-Hodgman clipping of a polygon to the rectangle [0, width] x [0, height]."""
    # Each boundary: (axis, limit, keep_greater).
    for axis, limit, greater in ((0, 0.0, True), (0, width, False), (1, 0.0, True), (1, height, False)):
        if not polygon:
            break
        clipped: list[list[float]] = []
        for i, p in enumerate(polygon):
            q = polygon[i - 1]
            p_in = p[axis] >= limit if greater else p[axis] <= limit
            q_in = q[axis] >= limit if greater else q[axis] <= limit
            if p_in != q_in:
                t = (limit - q[axis]) / (p[axis] - q[axis])
                clipped.append([q[0] + t * (p[0] - q[0]), q[1] + t * (p[1] - q[1])])
            if p_in:
                clipped.append(p)
        polygon = clipped
    return polygon


def _polygon_area(polygon: list[list[float]]) -> float:
    if len(polygon) < 3:
        return 0.0
    pts = np.asarray(polygon)
    x, y = pts[:, 0], pts[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2.0)


# --------------------------------------------------------------------------------------------------
# The rule: decisions per candidate, then assembly (first, last, clamp)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateDecision:
    """What the rule said about one candidate; ``reason`` is empty when it was not kept. ``frame``: the
    candidate itself where the caller keeps frames (None where they are stored elsewhere, e.g. the memory)."""

    stamp_ns: int
    kept: bool
    overlap: float | None
    reason: str
    frame: Frame | None


class _Rule:
    """The keep-or-drop rule with the reference's features cached."""

    def __init__(self, matcher: FrameMatcher, threshold: float) -> None:
        self.matcher = matcher
        self.threshold = threshold
        self.reference: Features | None = None

    def decide(self, frame: Frame) -> tuple[bool, float | None, str]:
        current = self.matcher.features(frame.image)
        if self.reference is None:
            self.reference = current
            return True, None, REASON_FIRST
        overlap = self.matcher.overlap(current, self.reference)
        if overlap is None or overlap < self.threshold:
            self.reference = current
            return True, overlap, REASON_MATCH_FAILED if overlap is None else REASON_LOW_OVERLAP
        return False, overlap, ""


def assemble_keyframes(
    decisions: Sequence[CandidateDecision], lo: int, hi: int
) -> list[tuple[int, float | None, str]]:
    """The key frames among ``decisions`` (one per candidate, in time order), as (candidate index, overlap,
    reason): those the rule kept, the first and the last, then clamped to [``lo``, ``hi``]. The one assembly
    the selectors here and the history's replay from the memory share."""
    n = len(decisions)
    if n == 0:
        return []
    reasons = {i: d.reason for i, d in enumerate(decisions) if d.kept}
    reasons.setdefault(0, REASON_FIRST)
    reasons.setdefault(n - 1, REASON_LAST)
    chosen = clamp_indices(list(reasons), n, lo, hi)
    return [(i, decisions[i].overlap, reasons.get(i, REASON_SAMPLED)) for i in chosen]


class ClipKeyFrameSelector:
    """:func:`select_keyframes` fed one frame at a time, so the rule can run while a clip is still read.

    Add the clip's frames in stamp order (:meth:`add`; each candidate is judged at once), then take
    :meth:`keyframes`. Frames that are not on the candidate grid may be left out, except the clip's last
    frame, which is always a key frame: the grid of the candidates alone is the grid of all frames. With
    """

    def __init__(self, config: KeyFrameConfig | None = None) -> None:
        self.config = config or KeyFrameConfig()
        self._period = candidate_period_ns(self.config.candidate_fps)
        self._rule = _Rule(FrameMatcher(self.config), self.config.overlap_threshold)
        self._candidates: list[Frame] = []
        self._decisions: list[CandidateDecision] = []
        self._t0: int | None = None
        self._next_ns = 0
        self._last: Frame | None = None
        self._added = 0

    def add(self, frame: Frame) -> None:
        """Feed the clip's next frame; raises ``ValueError`` when its stamp is older than the previous one."""
        stamp = int(frame.stamp_ns)
        if self._last is not None and stamp < self._last.stamp_ns:
            raise ValueError(
                f"frame stamps must be non-decreasing, got {stamp} after {self._last.stamp_ns} at index "
                f"{self._added}; sort the frames by stamp"
            )
        self._added += 1
        self._last = frame
        if self._t0 is None:
            self._t0, self._next_ns = stamp, stamp + self._period
        elif stamp >= self._next_ns:
            # A gap longer than one period collapses into this frame; the grid stays anchored at t0.
            self._next_ns = self._t0 + ((stamp - self._t0) // self._period + 1) * self._period
        else:
            return
        kept, overlap, reason = self._rule.decide(frame)
        self._candidates.append(frame)
        self._decisions.append(CandidateDecision(stamp, kept, overlap, reason, frame))

    def keyframes(self) -> list[KeyFrame]:
        """The clip's key frames (first, rule-kept, last, clamped), as :func:`select_keyframes` gives them."""
        candidates, decisions = list(self._candidates), list(self._decisions)
        last = self._last
        if candidates and last is not None and last.stamp_ns > candidates[-1].stamp_ns:
            # The last frame is off the grid: always kept, never judged (as in the streaming selector).
            candidates.append(last)
            decisions.append(CandidateDecision(last.stamp_ns, False, None, "", last))
        chosen = assemble_keyframes(decisions, self.config.min_keyframes, self.config.max_keyframes)
        return [KeyFrame(candidates[i], i, overlap, reason) for i, overlap, reason in chosen]


def select_keyframes(frames: Sequence[Frame], config: KeyFrameConfig | None = None) -> list[KeyFrame]:
    """Key frames of one clip (frames ordered by stamp): candidates, the rule, last frame, clamp.

    Gives the same key frames as pushing the clip through a fresh :class:`StreamingKeyFrameSelector`
    and calling :meth:`~StreamingKeyFrameSelector.finish`: the clip is the whole stream. For a window of
    a longer stream use :class:`WindowReplay` (the grid and the references come from the stream).
    """
    selector = ClipKeyFrameSelector(config)
    for frame in frames:
        selector.add(frame)
    return selector.keyframes()


class StreamingKeyFrameSelector:
    """Decides key frames as frames arrive, and answers "the key frames of this time window" from memory.

    Push every camera frame (:meth:`push`); the selector samples candidates by stamp, runs the rule on
    each candidate against the last kept frame, and stores one decision record per candidate for
    ``history_s`` seconds (see the module docstring for the memory design). Frames whose stamp is not
    newer than the previous frame's are ignored and counted in :attr:`dropped_out_of_order`.

    Thread-safe: one lock serialises pushes (the ORB work runs under it), a second, briefly held one
    guards the records, so queries from another thread never wait for a whole push.
    """

    def __init__(
        self,
        config: KeyFrameConfig | None = None,
        *,
        history_s: float = 600.0,
        frame_source: FrameSource | None = None,
    ) -> None:
        if not history_s > 0:
            raise ValueError(f"history_s must be > 0 seconds, got {history_s}")
        self.config = config or KeyFrameConfig()
        self.history_ns = int(history_s * NS_PER_S)
        self.frame_source = frame_source
        self._period = candidate_period_ns(self.config.candidate_fps)
        self._push_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._matcher = FrameMatcher(self.config)
        self.reset()

    def reset(self) -> None:
        """Forget everything: the next frame pushed starts a new stream (and is kept)."""
        with self._push_lock, self._state_lock:
            self._rule = _Rule(self._matcher, self.config.overlap_threshold)
            self._decisions: deque[CandidateDecision] = deque()
            self._t0: int | None = None
            self._next_ns = 0
            self._index = 0
            self._latest: Frame | None = None
            self.dropped_out_of_order = 0

    def __len__(self) -> int:
        """Number of candidate decisions held."""
        with self._state_lock:
            return len(self._decisions)

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest frame pushed (None before the first and after a reset)."""
        with self._state_lock:
            return None if self._latest is None else self._latest.stamp_ns

    @property
    def candidates_seen(self) -> int:
        """Candidates judged since the stream started (the next candidate's stream index)."""
        return self._index

    def push(self, frame: Frame) -> KeyFrame | None:
        """Feed one camera frame; returns a KeyFrame when it is a candidate the rule keeps, else None.

        The returned ``index`` counts candidates since the stream started. After the clock jumps
        backwards (a bag loops, a simulation restarts) every frame is "out of order": call :meth:`reset`.
        """
        with self._push_lock:
            stamp = int(frame.stamp_ns)
            latest = self._latest
            if latest is not None and stamp <= latest.stamp_ns:
                self.dropped_out_of_order += 1
                return None
            if self._t0 is not None and stamp < self._next_ns:
                with self._state_lock:
                    self._latest = frame
                return None
            if self._t0 is None:
                self._t0 = stamp
            self._next_ns = self._t0 + ((stamp - self._t0) // self._period + 1) * self._period
            kept, overlap, reason = self._rule.decide(frame)
            record = CandidateDecision(
                stamp, kept, overlap, reason, frame if self.frame_source is None else None
            )
            index = self._index
            self._index += 1
            with self._state_lock:
                self._latest = frame
                self._decisions.append(record)
                while self._decisions and self._decisions[0].stamp_ns < stamp - self.history_ns:
                    self._decisions.popleft()
            return KeyFrame(frame, index, overlap, reason) if kept else None

    def keyframes_in_window(self, start_ns: int | None = None, end_ns: int | None = None) -> list[KeyFrame]:
        """Key frames of the candidates stamped in [start_ns, end_ns] (None: open), from stored decisions.

        The window's first and last candidates are always included (the newest frame counts as the last
        candidate when the window reaches it), then the count is clamped; ``KeyFrame.index`` counts the
        window's candidates. Decisions were made against the stream's reference, which matches the batch
        rule on the same frames when the window starts where the stream started. With a ``frame_source``,
        frames it cannot return (evicted from the buffer) are left out.
        """
        lo_ns = -1 if start_ns is None else int(start_ns)
        hi_ns = 2**63 if end_ns is None else int(end_ns)
        with self._state_lock:
            records = [d for d in self._decisions if lo_ns <= d.stamp_ns <= hi_ns]
            latest = self._latest
        if latest is not None and lo_ns <= latest.stamp_ns <= hi_ns:
            if not records or records[-1].stamp_ns < latest.stamp_ns:
                records.append(CandidateDecision(latest.stamp_ns, False, None, "", latest))
        chosen = assemble_keyframes(records, self.config.min_keyframes, self.config.max_keyframes)
        keyframes = []
        for i, overlap, reason in chosen:
            frame = records[i].frame if records[i].frame is not None else self._fetch(records[i].stamp_ns)
            if frame is not None:
                keyframes.append(KeyFrame(frame, i, overlap, reason))
        return keyframes

    def finish(self) -> list[KeyFrame]:
        """Key frames of the whole held history, ending with the newest frame (the batch rule's answer)."""
        return self.keyframes_in_window()

    def _fetch(self, stamp_ns: int) -> Frame | None:
        if self.frame_source is None:
            return None
        frame = self.frame_source(stamp_ns)
        return frame if frame is not None and frame.stamp_ns == stamp_ns else None


class WindowReplay:
    """The key frames of several windows of ONE recorded stream, exactly as the node answers them.

    The node has watched the whole stream from its first frame and is asked afterwards (as after playing a
    bag): push the stream's frames in stamp order (:meth:`push`; frames off the candidate grid may be left
    out, except the stream's last frame), then :meth:`finish`. Only the candidates inside some window keep
    their images, so a long recording costs a small record per candidate, not a frame.
    """

    def __init__(self, windows: Sequence[tuple[int, int]], config: KeyFrameConfig | None = None) -> None:
        self.windows = [(int(start), int(end)) for start, end in windows]
        self._frames: dict[int, Frame] = {}
        # The whole stream stays in the history: no window may lose its start.
        self._selector = StreamingKeyFrameSelector(config, history_s=1e9, frame_source=self._frames.get)

    def push(self, frame: Frame) -> None:
        """Feed the stream's next frame (a repeated stamp, e.g. a frame handed out twice, is ignored)."""
        newest = self._selector.newest_ns
        stamp = int(frame.stamp_ns)
        if newest is not None and stamp <= newest:
            return
        seen = self._selector.candidates_seen
        self._selector.push(frame)
        if self._selector.candidates_seen != seen and any(lo <= stamp <= hi for lo, hi in self.windows):
            self._frames[stamp] = frame

    def finish(self) -> list[list[KeyFrame]]:
        """Per window (in the order given) its key frames; ``[]`` for a window without frames."""
        return [self._selector.keyframes_in_window(start, end) for start, end in self.windows]


def replay_windows(
    frames: Sequence[Frame], windows: Sequence[tuple[int, int]], config: KeyFrameConfig | None = None
) -> list[list[KeyFrame]]:
    """:class:`WindowReplay` over ``frames`` (the whole stream, stamp order): each window's key frames."""
    replay = WindowReplay(windows, config)
    for frame in frames:
        replay.push(frame)
    return replay.finish()
