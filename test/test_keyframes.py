"""Key-frame selection on synthetic camera motion over a random texture with known shifts."""

from __future__ import annotations

import threading
from itertools import pairwise

import cv2
import numpy as np
import pytest

from embodied_r_ros.clip_buffer import ClipBuffer
from embodied_r_ros.config import BufferConfig, KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S, Frame
from embodied_r_ros.keyframes import (
    REASON_FIRST,
    REASON_LAST,
    REASON_LOW_OVERLAP,
    REASON_MATCH_FAILED,
    REASON_SAMPLED,
    FrameMatcher,
    KeyFrame,
    StreamingKeyFrameSelector,
    WindowReplay,
    candidate_indices,
    clamp_indices,
    clamp_keyframes,
    evenly_spaced_indices,
    overlap_ratio,
    projected_overlap,
    replay_windows,
    select_keyframes,
)
from embodied_r_ros.testing.synthetic_clip import synthetic_clip

W, H = 320, 240


@pytest.fixture(scope="module")
def texture() -> np.ndarray:
    """A wide RGB texture rich in ORB corners: random rectangles and discs over smooth shading."""
    rng = np.random.default_rng(7)
    width, height = 3200, H + 20
    shading = rng.integers(40, 220, (height // 16, width // 16, 3), dtype=np.uint8)
    tex = cv2.resize(shading, (width, height), interpolation=cv2.INTER_CUBIC)
    for _ in range(width * height // 500):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        if rng.random() < 0.5:
            corner = (x + int(rng.integers(4, 30)), y + int(rng.integers(4, 30)))
            cv2.rectangle(tex, (x, y), corner, colour, -1)
        else:
            cv2.circle(tex, (x, y), int(rng.integers(3, 15)), colour, -1)
    return tex


def view(texture: np.ndarray, x: int, seed: int) -> np.ndarray:
    """The W x H crop at horizontal offset ``x``, with a little sensor noise."""
    noise = np.random.default_rng(seed).normal(0, 2, (H, W, 3))
    return np.clip(texture[10 : 10 + H, x : x + W] + noise, 0, 255).astype(np.uint8)


def sequence(texture: np.ndarray, offsets: list[int], step_s: float = 1.0) -> list[Frame]:
    return [Frame(view(texture, x, i), round(i * step_s * NS_PER_S)) for i, x in enumerate(offsets)]


def blank(stamp_s: float, value: int = 128) -> Frame:
    return Frame(np.full((H, W, 3), value, np.uint8), round(stamp_s * NS_PER_S))


def summary(keyframes: list[KeyFrame]) -> list[tuple[int, int, str, float | None]]:
    return [(k.index, k.frame.stamp_ns, k.reason, k.overlap) for k in keyframes]


# ----------------------------------------------------------------------------- candidates, sampler, clamp


def test_candidates_at_1fps_from_10hz_stamps_keep_the_last_frame() -> None:
    stamps = [i * NS_PER_S // 10 for i in range(36)]  # 0.0 .. 3.5 s at 10 Hz
    assert candidate_indices(stamps, 1.0) == [0, 10, 20, 30, 35]
    assert candidate_indices(stamps[:31], 1.0) == [0, 10, 20, 30]
    assert candidate_indices(stamps, 2.0) == [0, 5, 10, 15, 20, 25, 30, 35]


def test_candidates_with_jitter_and_gaps() -> None:
    # The first frame at or after each whole second after the first stamp (5 ms jitter).
    jittered = [round((i * 0.1 + (0.005 if i % 2 else -0.005) + 0.01) * NS_PER_S) for i in range(25)]
    assert candidate_indices(jittered, 1.0) == [0, 10, 20, 24]
    # A gap covering several steps yields one candidate; the grid stays anchored at the first stamp.
    stamps = [round(s * NS_PER_S) for s in (0.0, 0.5, 2.7, 2.9, 3.1, 3.2)]
    assert candidate_indices(stamps, 1.0) == [0, 2, 4, 5]


def test_candidates_edge_cases() -> None:
    assert candidate_indices([], 1.0) == []
    assert candidate_indices([5], 1.0) == [0]
    with pytest.raises(ValueError, match="non-decreasing"):
        candidate_indices([0, 2 * NS_PER_S, NS_PER_S], 1.0)
    with pytest.raises(ValueError, match="fps"):
        candidate_indices([0], 0.0)


def test_evenly_spaced_indices_edge_cases() -> None:
    assert evenly_spaced_indices(0, 4) == []
    assert evenly_spaced_indices(1, 4) == [0]
    assert evenly_spaced_indices(2, 4) == [0, 1]
    assert evenly_spaced_indices(2, 2) == [0, 1]
    assert evenly_spaced_indices(2, 1) == [0]
    assert evenly_spaced_indices(5, 0) == []
    assert evenly_spaced_indices(5, 1) == [0]
    assert evenly_spaced_indices(10, 4) == [0, 3, 6, 9]
    assert evenly_spaced_indices(5, 3) == [0, 2, 4]


def test_evenly_spaced_indices_properties() -> None:
    for n in range(0, 60):
        for k in range(0, 40):
            got = evenly_spaced_indices(n, k)
            assert len(got) == min(n, k), (n, k)
            assert all(b > a for a, b in pairwise(got)), (n, k, got)
            assert all(0 <= i < n for i in got)
            if k >= 2 and n >= 2:
                assert got[0] == 0 and got[-1] == n - 1, (n, k, got)
            if 2 <= k < n:
                # Evenly spaced: neighbouring gaps differ by at most one.
                gaps = [b - a for a, b in pairwise(got)]
                assert max(gaps) - min(gaps) <= 1, (n, k, gaps)


def test_clamp_indices() -> None:
    assert clamp_indices([0, 9], 10, lo=4, hi=32) == [0, 3, 6, 9]  # too few: sample from ALL candidates
    assert clamp_indices([0, 4, 9], 3 + 7, lo=2, hi=3) == [0, 4, 9]  # in range: unchanged
    assert clamp_indices([0, 2], 3, lo=4, hi=32) == [0, 1, 2]  # fewer candidates than lo: all of them
    many = list(range(0, 80, 2))  # 40 kept
    clamped = clamp_indices(many, 80, lo=4, hi=32)
    assert len(clamped) == 32 and clamped[0] == 0 and clamped[-1] == 78 and set(clamped) <= set(many)
    assert clamp_indices([], 0) == []
    with pytest.raises(ValueError):
        clamp_indices([10], 5)


def test_clamp_keyframes_keeps_known_and_marks_sampled() -> None:
    frames = [blank(i) for i in range(10)]
    kept = [KeyFrame(frames[0], 0, None, REASON_FIRST), KeyFrame(frames[9], 9, 0.3, REASON_LOW_OVERLAP)]
    clamped = clamp_keyframes(kept, frames, lo=4, hi=32)
    assert [k.index for k in clamped] == [0, 3, 6, 9]
    assert clamped[0] is kept[0] and clamped[3] is kept[1]
    assert [k.reason for k in clamped[1:3]] == [REASON_SAMPLED, REASON_SAMPLED]
    assert clamped[1].frame is frames[3]


# ----------------------------------------------------------------------------- overlap


def test_projected_overlap_geometry() -> None:
    assert projected_overlap(np.eye(3), W, H, W, H) == pytest.approx(1.0)
    half = np.array([[1.0, 0, W / 2], [0, 1, 0], [0, 0, 1]])
    assert projected_overlap(half, W, H, W, H) == pytest.approx(0.5)
    outside = np.array([[1.0, 0, 2 * W], [0, 1, 0], [0, 0, 1]])
    assert projected_overlap(outside, W, H, W, H) == pytest.approx(0.0)
    zoom_in = np.array([[0.5, 0, W / 4], [0, 0.5, H / 4], [0, 0, 1]])  # current shows the centre quarter
    assert projected_overlap(zoom_in, W, H, W, H) == pytest.approx(0.25)
    mirror = np.array([[-1.0, 0, W], [0, 1, 0], [0, 0, 1]])
    assert projected_overlap(mirror, W, H, W, H) is None
    behind = np.array([[1.0, 0, 0], [0, 1, 0], [-0.01, 0, 1]])  # a corner maps through infinity
    assert projected_overlap(behind, W, H, W, H) is None
    assert projected_overlap(np.full((3, 3), np.nan), W, H, W, H) is None


def test_overlap_ratio_follows_known_shifts(texture: np.ndarray) -> None:
    base = view(texture, 400, 0)
    assert overlap_ratio(view(texture, 400, 1), base) == pytest.approx(1.0, abs=0.03)
    assert overlap_ratio(view(texture, 400 + W // 4, 2), base) == pytest.approx(0.75, abs=0.04)
    assert overlap_ratio(view(texture, 400 + int(0.6 * W), 3), base) == pytest.approx(0.4, abs=0.05)
    full = KeyFrameConfig(match_width=0)
    assert overlap_ratio(view(texture, 400 + W // 4, 2), base, full) == pytest.approx(0.75, abs=0.04)


def test_overlap_fails_without_features(texture: np.ndarray) -> None:
    empty = np.full((H, W, 3), 90, np.uint8)
    assert overlap_ratio(empty, empty) is None
    assert overlap_ratio(empty, view(texture, 0, 0)) is None
    # Unrelated textured views: matches exist but no consistent homography over the threshold.
    other = cv2.flip(view(texture, 2000, 1), -1)
    result = overlap_ratio(other, view(texture, 0, 0))
    assert result is None or result < 0.5


def test_matcher_downscales_to_match_width() -> None:
    matcher = FrameMatcher(KeyFrameConfig(match_width=160))
    features = matcher.features(np.zeros((480, 640, 3), np.uint8))
    assert (features.width, features.height, features.scale) == (160, 120, 0.25)
    assert features.descriptors is None and features.points.shape == (0, 2)
    full = FrameMatcher(KeyFrameConfig(match_width=160), full_resolution=True)
    assert full.features(np.zeros((480, 640, 3), np.uint8)).width == 640


# ----------------------------------------------------------------------------- the rule (batch)


def test_pan_past_half_the_width_makes_a_keyframe(texture: np.ndarray) -> None:
    # Still for 5 s, then a jump of 60 % of the width, then still again.
    offsets = [300] * 5 + [300 + int(0.6 * W)] * 5
    keyframes = select_keyframes(sequence(texture, offsets), KeyFrameConfig(min_keyframes=2))
    assert [k.index for k in keyframes] == [0, 5, 9]
    assert [k.reason for k in keyframes] == [REASON_FIRST, REASON_LOW_OVERLAP, REASON_LAST]
    assert keyframes[1].overlap == pytest.approx(0.4, abs=0.05)
    assert keyframes[2].overlap == pytest.approx(1.0, abs=0.03)  # last: judged against frame 5, kept anyway


def test_small_pans_accumulate_until_overlap_halves(texture: np.ndarray) -> None:
    # 20 % of the width per second: overlap with the reference 0.8, 0.6, 0.4 -> keep, then again.
    offsets = [100 + i * W // 5 for i in range(7)]
    keyframes = select_keyframes(sequence(texture, offsets), KeyFrameConfig(min_keyframes=2))
    assert [k.index for k in keyframes] == [0, 3, 6]
    assert [k.reason for k in keyframes] == [REASON_FIRST, REASON_LOW_OVERLAP, REASON_LOW_OVERLAP]


def test_still_camera_keeps_only_first_last_and_clamp(texture: np.ndarray) -> None:
    keyframes = select_keyframes(sequence(texture, [500] * 12))
    assert [k.index for k in keyframes] == [0, 4, 7, 11]  # 4 sampled from all 12 candidates
    assert [k.reason for k in keyframes] == [REASON_FIRST, REASON_SAMPLED, REASON_SAMPLED, REASON_LAST]
    assert all(k.overlap is None or k.overlap > 0.9 for k in keyframes)


def test_matching_failure_keeps_every_candidate() -> None:
    frames = [blank(i, 100 + i) for i in range(6)]
    keyframes = select_keyframes(frames)
    assert [k.index for k in keyframes] == list(range(6))
    assert [k.reason for k in keyframes] == [REASON_FIRST] + [REASON_MATCH_FAILED] * 5


def test_keyframes_are_clamped_to_max() -> None:
    frames = [blank(i, 60 + i) for i in range(40)]
    keyframes = select_keyframes(frames, KeyFrameConfig(max_keyframes=32))
    assert len(keyframes) == 32
    assert keyframes[0].index == 0 and keyframes[-1].index == 39


def test_batch_samples_candidates_from_camera_rate(texture: np.ndarray) -> None:
    # 10 Hz for 3.45 s, the camera moving 4 px per frame: candidates at 0, 1, 2, 3 s and the last frame.
    frames = sequence(texture, [4 * i for i in range(35)], step_s=0.1)
    keyframes = select_keyframes(frames, KeyFrameConfig(min_keyframes=2))
    assert [k.frame.stamp_ns for k in keyframes] == [0, frames[-1].stamp_ns]
    clamped = [k.frame.stamp_ns for k in select_keyframes(frames)]  # 4 of the 5 candidates
    assert clamped == [0, NS_PER_S, 3 * NS_PER_S, frames[-1].stamp_ns]


# ----------------------------------------------------------------------------- streaming


def moving_camera(texture: np.ndarray, jitter: bool = False) -> list[Frame]:
    """5 Hz for 14.4 s: still, slow pan, fast pan, still, a jump back; the last frame is off the grid.

    ``jitter`` moves each stamp by up to 5 ms (after a 10 ms start), as camera drivers do.
    """
    offsets, x = [], 100
    for i in range(73):
        t = i / 5
        x += 0 if t < 3 else 12 if t < 7 else 45 if t < 10 else 0
        if i == 66:
            x -= 500
        offsets.append(x)
    frames = sequence(texture, offsets, step_s=0.2)
    if jitter:
        ms = NS_PER_S // 1000
        frames = [Frame(f.image, f.stamp_ns + (10 + (i * 37) % 11 - 5) * ms) for i, f in enumerate(frames)]
    return frames


def test_streaming_and_batch_agree(texture: np.ndarray) -> None:
    frames = moving_camera(texture, jitter=True)
    config = KeyFrameConfig(min_keyframes=2)
    selector = StreamingKeyFrameSelector(config)
    pushed = [selector.push(f) for f in frames]
    batch = select_keyframes(frames, config)
    streamed = selector.finish()
    assert summary(streamed) == summary(batch)
    assert len(batch) >= 5  # the motion made real key frames, not just the clamp
    assert any(k.reason == REASON_LOW_OVERLAP for k in batch)
    # push() returned the rule's decisions as they happened, with stream candidate indices.
    decided = [k for k in pushed if k is not None]
    assert [k.frame.stamp_ns for k in decided] == [k.frame.stamp_ns for k in batch if k.reason != REASON_LAST]
    assert selector.candidates_seen == 15  # 0 .. 14 s; the frame at 14.4 s is the off-grid last frame
    # Default config (clamp to [4, 32]) agrees too.
    other = StreamingKeyFrameSelector()
    for f in frames:
        other.push(f)
    assert summary(other.finish()) == summary(select_keyframes(frames))


def test_streaming_with_clip_buffer_as_frame_source(texture: np.ndarray) -> None:
    frames = moving_camera(texture)
    buffer = ClipBuffer(BufferConfig(jpeg_quality=0))
    selector = StreamingKeyFrameSelector(
        KeyFrameConfig(min_keyframes=2), frame_source=lambda s: buffer.get(s, tolerance_ns=0)
    )
    for f in frames:
        buffer.push(f)
        selector.push(f)
    batch = select_keyframes(frames, KeyFrameConfig(min_keyframes=2))
    streamed = selector.finish()
    assert summary(streamed) == summary(batch)
    assert all(np.array_equal(a.frame.image, b.frame.image) for a, b in zip(streamed, batch, strict=True))
    # Once the buffer has lost a frame, the selector leaves it out rather than substituting another.
    buffer.clear()
    assert [k.frame.stamp_ns for k in selector.finish()] == [frames[-1].stamp_ns]


def test_keyframes_in_window_come_from_stored_decisions(texture: np.ndarray) -> None:
    frames = moving_camera(texture)
    config = KeyFrameConfig(min_keyframes=2)
    selector = StreamingKeyFrameSelector(config)
    for f in frames:
        selector.push(f)
    everything = selector.finish()
    start, end = 4 * NS_PER_S, 11 * NS_PER_S + NS_PER_S // 2
    window = selector.keyframes_in_window(start, end)
    stamps = [k.frame.stamp_ns for k in window]
    assert stamps[0] == 4 * NS_PER_S and stamps[-1] == 11 * NS_PER_S  # the window's first and last candidate
    assert [k.index for k in window] == [(s - start) // NS_PER_S for s in stamps]  # indexed within the window
    inside = {k.frame.stamp_ns for k in everything if start <= k.frame.stamp_ns <= end}
    assert inside <= set(stamps)  # the rule's key frames in the window are all there
    assert selector.keyframes_in_window(100 * NS_PER_S, 200 * NS_PER_S) == []
    # A window ending at the newest frame uses it as the last candidate.
    assert selector.keyframes_in_window(start)[-1].frame.stamp_ns == frames[-1].stamp_ns


def test_streaming_history_is_bounded_and_ignores_old_stamps() -> None:
    selector = StreamingKeyFrameSelector(KeyFrameConfig(), history_s=5.0)
    for i in range(100):  # 10 Hz for 10 s of blank frames: every candidate is kept (matching fails)
        selector.push(blank(i / 10))
    assert len(selector) == 6  # candidates at 4 .. 9 s
    assert selector.candidates_seen == 10
    assert selector.push(blank(2.0)) is None
    assert selector.dropped_out_of_order == 1
    assert [k.frame.stamp_ns for k in selector.finish()][0] == 4 * NS_PER_S
    selector.reset()
    assert len(selector) == 0 and selector.finish() == []
    assert selector.push(blank(1.0)).reason == REASON_FIRST


def test_streaming_push_returns_keyframes_only_for_kept_candidates(texture: np.ndarray) -> None:
    selector = StreamingKeyFrameSelector()
    first = selector.push(Frame(view(texture, 0, 0), 0))
    assert first is not None and first.index == 0 and first.reason == REASON_FIRST
    assert selector.push(Frame(view(texture, 0, 1), NS_PER_S // 2)) is None  # not a candidate
    assert selector.push(Frame(view(texture, 10, 2), NS_PER_S)) is None  # candidate, overlap high
    jump = selector.push(Frame(view(texture, 190, 3), 2 * NS_PER_S))  # overlap 0.44
    assert jump is not None and jump.index == 2 and jump.reason == REASON_LOW_OVERLAP


def test_streaming_queries_while_pushing(texture: np.ndarray) -> None:
    frames = moving_camera(texture)
    selector = StreamingKeyFrameSelector(KeyFrameConfig(min_keyframes=2))
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                keyframes = selector.finish()
                assert all(b.frame.stamp_ns > a.frame.stamp_ns for a, b in pairwise(keyframes))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    for f in frames:
        selector.push(f)
    done.set()
    thread.join()
    assert not errors
    assert summary(selector.finish()) == summary(select_keyframes(frames, KeyFrameConfig(min_keyframes=2)))


def test_selector_rejects_bad_history() -> None:
    with pytest.raises(ValueError, match="history_s"):
        StreamingKeyFrameSelector(history_s=0)


def test_replayed_windows_are_the_nodes_key_frames_mid_stream() -> None:
    """One rule (issue 11): a window of a recorded stream gets the key frames the node answers after
    watching the stream from its first frame, not the rule restarted at the window's first frame."""
    frames = synthetic_clip(seconds=40, fps=4).frames
    pairs = [(3, 159), (13, 90), (41, 121), (0, 159), (70, 101)]
    windows = [(frames[i].stamp_ns, frames[j].stamp_ns) for i, j in pairs]
    windows.append((frames[70].stamp_ns + 1, frames[100].stamp_ns + 1))  # edges between frames
    found = replay_windows(frames, windows)
    node = StreamingKeyFrameSelector(history_s=3600.0)  # the node: every frame, then the questions
    for frame in frames:
        node.push(frame)
    restarted = 0
    for (start, end), keyframes in zip(windows, found, strict=True):
        summary = [(k.frame.stamp_ns, k.index, k.reason) for k in keyframes]
        expected = node.keyframes_in_window(start, end)
        assert summary == [(k.frame.stamp_ns, k.index, k.reason) for k in expected]
        assert all(k.frame is not None and k.frame.image.size for k in keyframes)
        window = [f for f in frames if start <= f.stamp_ns <= end]
        restarted += summary != [(k.frame.stamp_ns, k.index, k.reason) for k in select_keyframes(window)]
    assert restarted >= 2  # the old per-window rule gave other key frames mid-stream (1.0, 3.0 vs 0.75 ...)
    # The newest frame (off the 1 fps grid here) ends a window that reaches it, and no earlier window.
    assert found[0][-1].frame.stamp_ns == frames[159].stamp_ns
    grid = {frames[i].stamp_ns for i in candidate_indices([f.stamp_ns for f in frames], 1.0)}
    assert frames[101].stamp_ns not in grid and found[4][-1].frame.stamp_ns < frames[101].stamp_ns
    assert replay_windows(frames, [(frames[-1].stamp_ns + 1, frames[-1].stamp_ns + 9)]) == [[]]
    # Only the candidates and the stream's last frame are needed: the same answer from far fewer frames.
    replay = WindowReplay(windows)
    for frame in frames:
        if frame.stamp_ns in grid:
            replay.push(frame)
            replay.push(frame)  # a frame handed out twice is pushed once
    again = replay.finish()
    assert [[k.frame.stamp_ns for k in w] for w in again] == [[k.frame.stamp_ns for k in w] for w in found]
