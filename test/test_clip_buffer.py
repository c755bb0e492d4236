"""ClipBuffer: memory budget, eviction, window queries, storage formats, out-of-order stamps, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from embodied_r_ros.clip_buffer import ENTRY_OVERHEAD_BYTES, ClipBuffer, ClipBufferError
from embodied_r_ros.config import BufferConfig
from embodied_r_ros.frames import NS_PER_S, Frame, Pose

MS = NS_PER_S // 1000


def noise_frame(stamp_ns: int, seed: int = 0, size: tuple[int, int] = (240, 320)) -> Frame:
    """A frame of random pixels (JPEG cannot compress it much)."""
    image = np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
    return Frame(image, stamp_ns, Pose((stamp_ns / NS_PER_S, 0.0, 0.0)))


def smooth_frame(stamp_ns: int) -> Frame:
    """A smooth colour gradient: red grows to the right, green downwards, blue constant."""
    y, x = np.mgrid[0:120, 0:160]
    image = np.stack([x * 255 // 159, y * 255 // 119, np.full_like(x, 40)], axis=-1).astype(np.uint8)
    return Frame(image, stamp_ns)


def filled(buffer: ClipBuffer, stamps_ns: list[int]) -> ClipBuffer:
    for i, stamp in enumerate(stamps_ns):
        buffer.push(noise_frame(stamp, i, (24, 32)))
    return buffer


def test_memory_stays_within_budget_and_evicts_oldest_first() -> None:
    buffer = ClipBuffer(BufferConfig(memory_mb=0.5, max_side=160, jpeg_quality=90))
    for i in range(120):
        buffer.push(noise_frame(i * 100 * MS, i))
        assert buffer.memory_bytes <= buffer.budget_bytes
    assert 0 < len(buffer) < 120
    # The newest frames survive, contiguous up to the last push.
    assert buffer.stamps() == [i * 100 * MS for i in range(120 - len(buffer), 120)]
    assert buffer.newest_ns == 119 * 100 * MS and buffer.oldest_ns == (120 - len(buffer)) * 100 * MS


def test_frames_are_downscaled_to_max_side() -> None:
    buffer = ClipBuffer(BufferConfig(max_side=64, jpeg_quality=0))
    buffer.push(noise_frame(0))
    frame = buffer.latest()
    assert frame is not None and frame.image.shape == (48, 64, 3)
    assert buffer.memory_bytes == 48 * 64 * 3 + ENTRY_OVERHEAD_BYTES


def test_history_limit_evicts_by_stamp() -> None:
    buffer = filled(ClipBuffer(BufferConfig(history_s=2.0)), [i * 250 * MS for i in range(41)])  # 0 .. 10 s
    assert buffer.oldest_ns == 8 * NS_PER_S and buffer.newest_ns == 10 * NS_PER_S
    assert len(buffer) == 9


def test_window_and_between_queries() -> None:
    buffer = filled(ClipBuffer(), [i * 100 * MS for i in range(51)])  # 10 Hz, 0 .. 5 s
    clip = buffer.window(1.0)
    assert [f.stamp_ns for f in clip.frames] == [i * 100 * MS for i in range(40, 51)]
    clip = buffer.window(1.0, end_ns=2050 * MS)
    assert [f.stamp_ns for f in clip.frames] == [i * 100 * MS for i in range(11, 21)]
    assert len(buffer.window(0.0)) == 1
    assert len(buffer.window(100.0)) == 51
    assert [f.stamp_ns for f in buffer.between(1000 * MS, 1300 * MS).frames] == [1000 * MS, 1100 * MS,
                                                                                 1200 * MS, 1300 * MS]
    assert len(buffer.between(6 * NS_PER_S, 7 * NS_PER_S)) == 0
    with pytest.raises(ClipBufferError, match="seconds"):
        buffer.window(-1.0)
    assert len(ClipBuffer().window(5.0)) == 0


def test_get_exact_nearest_and_tolerance() -> None:
    buffer = filled(ClipBuffer(), [0, 100 * MS, 200 * MS])
    assert buffer.get(100 * MS).stamp_ns == 100 * MS
    assert buffer.get(140 * MS).stamp_ns == 100 * MS
    assert buffer.get(160 * MS).stamp_ns == 200 * MS
    assert buffer.get(150 * MS).stamp_ns == 100 * MS  # a tie goes to the earlier frame
    assert buffer.get(10 * NS_PER_S).stamp_ns == 200 * MS
    assert buffer.get(140 * MS, tolerance_ns=0) is None
    assert buffer.get(140 * MS, tolerance_ns=50 * MS).stamp_ns == 100 * MS
    assert ClipBuffer().get(0) is None and ClipBuffer().latest() is None


def test_raw_storage_round_trips_exactly_and_is_read_only() -> None:
    buffer = ClipBuffer(BufferConfig(jpeg_quality=0))
    original = noise_frame(5, 3)
    buffer.push(original)
    original.image[:] = 0  # the buffer owns a copy
    stored = buffer.get(5)
    assert np.array_equal(stored.image, noise_frame(5, 3).image)
    assert stored.pose == original.pose
    with pytest.raises(ValueError):
        stored.image[0, 0, 0] = 1


def test_jpeg_storage_keeps_rgb_order_and_is_smaller() -> None:
    raw, jpeg = ClipBuffer(BufferConfig(jpeg_quality=0)), ClipBuffer(BufferConfig(jpeg_quality=90))
    frame = smooth_frame(7)
    raw.push(frame)
    jpeg.push(frame)
    decoded = jpeg.get(7)
    assert decoded.image.dtype == np.uint8 and decoded.image.shape == frame.image.shape
    error = np.abs(decoded.image.astype(int) - frame.image.astype(int))
    assert error.mean() < 3.0
    # Channel order survives: the right edge is red, the bottom edge green, blue stays low.
    assert decoded.image[60, 155, 0] > 230 and decoded.image[115, 5, 1] > 230
    assert decoded.image[..., 2].max() < 80
    assert jpeg.memory_bytes < raw.memory_bytes / 5


def test_out_of_order_stamps_are_inserted_and_stale_or_duplicate_dropped() -> None:
    buffer = ClipBuffer(BufferConfig(history_s=10.0))
    assert buffer.push(noise_frame(0, size=(24, 32)))
    assert buffer.push(noise_frame(2 * NS_PER_S, size=(24, 32)))
    assert buffer.push(noise_frame(1 * NS_PER_S, size=(24, 32)))  # late: inserted in order
    assert buffer.stamps() == [0, NS_PER_S, 2 * NS_PER_S] and buffer.late_frames == 1
    assert not buffer.push(noise_frame(NS_PER_S, size=(24, 32)))  # duplicate stamp
    assert buffer.push(noise_frame(20 * NS_PER_S, size=(24, 32)))  # evicts everything older than 10 s
    assert not buffer.push(noise_frame(5 * NS_PER_S, size=(24, 32)))  # older than the history: stale
    assert buffer.stamps() == [20 * NS_PER_S] and buffer.dropped_frames == 2
    assert [f.stamp_ns for f in buffer.window(30.0).frames] == [20 * NS_PER_S]


def test_frame_larger_than_budget_raises_with_the_fix() -> None:
    buffer = ClipBuffer(BufferConfig(memory_mb=0.01, jpeg_quality=0))
    with pytest.raises(ClipBufferError, match="memory_mb"):
        buffer.push(noise_frame(0))
    assert len(buffer) == 0


def test_clear_empties_the_buffer() -> None:
    buffer = filled(ClipBuffer(), [0, 1, 2])
    buffer.clear()
    assert len(buffer) == 0 and buffer.memory_bytes == 0
    assert buffer.oldest_ns is None and buffer.newest_ns is None


def test_concurrent_push_and_read() -> None:
    buffer = ClipBuffer(BufferConfig(memory_mb=0.3, max_side=64, jpeg_quality=80))
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(400):
                buffer.push(noise_frame(i * 50 * MS, i, (48, 64)))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                clip = buffer.window(2.0)  # Clip() itself checks the frames are ordered
                assert all(f.image.shape == (48, 64, 3) for f in clip.frames)
                newest = buffer.newest_ns
                if newest is not None:
                    buffer.get(newest // 2)
                assert buffer.memory_bytes <= buffer.budget_bytes
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert buffer.newest_ns == 399 * 50 * MS
    assert buffer.stamps() == sorted(buffer.stamps())
