"""Questions about any past time, without ROS: a RobotHistory that keeps one minute in RAM and a durable
memory answers windows an hour back with the key frames a history holding the whole hour in RAM gives,
spread over the window and clamped to [4, 32]; windows inside RAM are untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embodied_r_ros.config import BufferConfig, KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.history import EmptyHistoryError, RobotHistory
from embodied_r_ros.keyframes import REASON_SAMPLED
from embodied_r_ros.memory.store import MemoryStore
from embodied_r_ros.testing.synthetic_clip import synthetic_clip
from embodied_r_ros.windows import Window, WindowError

HOUR_S = 3600.0
RAM_S = 60.0
MINUTE = 60 * NS_PER_S


def robot(history_s: float, memory: MemoryStore | None = None) -> RobotHistory:
    buffer = BufferConfig(history_s=history_s, memory_mb=1024.0)
    return RobotHistory(
        buffer, KeyFrameConfig(), jump_back_reset_s=1.0, odometry_max_gap_s=0.5, memory=memory
    )


def feed(history: RobotHistory, frames) -> None:
    for frame in frames:
        history.add_frame(frame, "camera")
        history.add_pose(frame.stamp_ns, frame.pose)


def described(found) -> list[tuple]:
    return [(k.frame.stamp_ns, k.index, k.overlap, k.reason, k.frame.pose) for k in found.keyframes]


@pytest.fixture(scope="module")
def mission():
    """An hour at one frame every 5 s (synthetic stamps: the hour need not pass), turning slowly: hundreds
    of key frames, more than the clamp allows in any long window."""
    return synthetic_clip(seconds=HOUR_S, fps=0.2, size=(160, 120), yaw_rate_deg=3.0)


@pytest.fixture(scope="module")
def remembered(mission, tmp_path_factory):
    """The robot (one minute of RAM and a memory) and a reference that holds the whole hour in RAM."""
    store = MemoryStore(tmp_path_factory.mktemp("memory") / "mission.sqlite", 256.0)
    short, whole = robot(RAM_S, store), robot(2 * HOUR_S)
    feed(short, mission.frames)
    feed(whole, mission.frames)
    yield short, whole, store
    store.close()


def test_an_interval_50_minutes_back_is_answered_as_the_last_minute_is(mission, remembered):
    short, whole, store = remembered
    end = mission.frames[-1].stamp_ns
    assert store.status().frames == len(mission.frames)  # every frame is a candidate at 0.2 fps
    for window in (
        Window(start_ns=end - 50 * MINUTE, end_ns=end - 49 * MINUTE),  # a minute, 50 minutes back
        Window(start_ns=end - 59 * MINUTE, end_ns=end - 55 * MINUTE),
        Window(seconds=30.0),  # inside RAM
        Window(seconds=50 * 60.0),  # the last 50 minutes: from the memory up to the newest frame
    ):
        from_memory, from_ram = short.keyframes(window, default_s=60.0), whole.keyframes(window, 60.0)
        assert (from_memory.start_ns, from_memory.end_ns) == (from_ram.start_ns, from_ram.end_ns)
        assert described(from_memory) == described(from_ram) and len(from_memory.keyframes) >= 4
        assert all(k.frame.pose is not None for k in from_memory.keyframes)  # poses from the memory
        for a, b in zip(from_memory.keyframes, from_ram.keyframes, strict=True):
            assert np.array_equal(a.frame.image, b.frame.image)  # the very pixels the buffer held
    old = short.keyframes(Window(start_ns=end - 50 * MINUTE, end_ns=end - 49 * MINUTE), 60.0)
    assert {k.frame.stamp_ns for k in old.keyframes} <= {f.stamp_ns for f in mission.frames}
    assert (
        end - 50 * MINUTE <= old.keyframes[0].frame.stamp_ns
        and old.keyframes[-1].frame.stamp_ns <= end - 49 * MINUTE
    )


def test_a_long_window_is_clamped_to_32_key_frames_spread_over_all_of_it(mission, remembered):
    short, _, _ = remembered
    end = mission.frames[-1].stamp_ns
    start, stop = end - 55 * MINUTE, end - 5 * MINUTE
    found = short.keyframes(Window(start_ns=start, end_ns=stop), default_s=60.0)
    stamps = [k.frame.stamp_ns for k in found.keyframes]
    window_frames = [f.stamp_ns for f in mission.frames if start <= f.stamp_ns <= stop]
    assert len(stamps) == 32 and stamps == sorted(stamps)
    assert stamps[0] == window_frames[0] and stamps[-1] == window_frames[-1]  # first and last candidate
    gaps = np.diff(stamps) / NS_PER_S
    assert gaps.max() < 4 * (stop - start) / NS_PER_S / 31  # spread over the window, not bunched at its start
    assert REASON_SAMPLED not in {k.reason for k in found.keyframes}  # all were kept by the rule


def test_a_quiet_window_is_topped_up_to_four_from_the_memory(tmp_path):
    """A robot standing still: the rule keeps one frame, the clamp adds evenly spaced candidates (which only
    the memory still has the images of)."""
    still = synthetic_clip(seconds=600.0, fps=0.5, size=(160, 120), yaw_rate_deg=0.0, speed_m_s=0.0)
    store = MemoryStore(tmp_path / "still.sqlite", 64.0)
    try:
        short, whole = robot(RAM_S, store), robot(HOUR_S)
        feed(short, still.frames)
        feed(whole, still.frames)
        end = still.frames[-1].stamp_ns
        window = Window(start_ns=end - 8 * MINUTE, end_ns=end - 7 * MINUTE)
        found = short.keyframes(window, default_s=60.0)
        assert len(found.keyframes) == 4 and REASON_SAMPLED in {k.reason for k in found.keyframes}
        assert described(found) == described(whole.keyframes(window, 60.0))
    finally:
        store.close()


def test_windows_inside_ram_do_not_touch_the_memory(mission, remembered, tmp_path):
    """A history with a memory and one without give the same key frames for windows RAM holds."""
    short, _, store = remembered
    ram_only = robot(RAM_S)  # as the node was before it had a memory
    feed(ram_only, mission.frames)
    before = store.status()
    for window in (Window(), Window(seconds=12.0), Window(start_ns=mission.frames[-5].stamp_ns)):
        assert described(short.keyframes(window, 60.0)) == described(ram_only.keyframes(window, 60.0))
    assert store.status() == before


def test_a_restart_answers_from_the_memory_before_its_first_frame(mission, remembered):
    """A new history on the same memory (the node restarted): an interval the first run saw is answered,
    "the last minute" has nothing to answer from until frames come."""
    _, whole, store = remembered
    restarted = robot(RAM_S, store)
    end = mission.frames[-1].stamp_ns
    window = Window(start_ns=end - 30 * MINUTE, end_ns=end - 29 * MINUTE)
    found = restarted.keyframes(window, default_s=60.0)
    assert described(found) == described(whole.keyframes(window, 60.0)) and found.newest_ns == end
    with pytest.raises(EmptyHistoryError):
        restarted.keyframes(Window(seconds=60.0), default_s=60.0)
    with pytest.raises(WindowError, match="reaches into the future"):
        restarted.keyframes(Window(start_ns=end + 10 * NS_PER_S), default_s=60.0)


def test_an_interval_before_the_memory_names_its_budget(mission, remembered):
    short, _, _ = remembered
    first = mission.frames[0].stamp_ns
    with pytest.raises(WindowError, match="memory.disk_budget_mb"):
        short.keyframes(Window(start_ns=first - 10 * MINUTE, end_ns=first + MINUTE), default_s=60.0)


def test_a_stream_that_restarts_answers_from_its_own_timeline_only(tmp_path: Path):
    """A bag played again over the same memory: its old run is not mixed in; a window before the new run's
    first frame is refused, saying why."""
    clip = synthetic_clip(seconds=300.0, fps=0.5, size=(160, 120))
    store = MemoryStore(tmp_path / "loop.sqlite", 64.0)
    try:
        history = robot(RAM_S, store)
        feed(history, clip.frames)
        again = clip.frames[:60]  # the first two minutes again: the stamps jump back and stay there
        feed(history, again)
        store.flush()
        assert store.status().timeline == 1
        found = history.keyframes(Window(seconds=600.0), default_s=60.0)
        assert {k.frame.stamp_ns for k in found.keyframes} <= {f.stamp_ns for f in again}
        with pytest.raises(WindowError, match="memory holds the stream since its stamps last jumped back"):
            history.keyframes(Window(start_ns=again[0].stamp_ns - MINUTE, end_ns=again[5].stamp_ns), 60.0)
    finally:
        store.close()


def test_a_disabled_memory_leaves_the_history_as_it_was(mission, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    store = MemoryStore(blocker / "m.sqlite", 16.0)
    history = robot(RAM_S, store)
    feed(history, mission.frames[-100:])
    end = mission.frames[-1].stamp_ns
    with pytest.raises(WindowError, match="buffer.history_s"):
        history.keyframes(Window(start_ns=end - 5 * MINUTE, end_ns=end - 4 * MINUTE), default_s=60.0)
    assert history.keyframes(Window(seconds=30.0), 60.0).keyframes
    store.close()


def test_a_reset_that_keeps_the_memory_still_answers_the_past(mission, tmp_path):
    store = MemoryStore(tmp_path / "kept.sqlite", 64.0)
    try:
        history, whole = robot(RAM_S, store), robot(HOUR_S)
        feed(history, mission.frames[:200])
        feed(whole, mission.frames[:200])
        history.clear()  # RAM only: clearing the memory is the node's choice (memory.keep_on_reset)
        feed(history, mission.frames[200:220])
        window = Window(start_ns=mission.frames[50].stamp_ns, end_ns=mission.frames[80].stamp_ns)
        found = history.keyframes(window, default_s=60.0)
        assert len(found.keyframes) >= 4 and found.newest_ns == mission.frames[219].stamp_ns
        assert [k.frame.stamp_ns for k in found.keyframes] == [
            k.frame.stamp_ns for k in whole.keyframes(window, 60.0).keyframes
        ]
    finally:
        store.close()
