"""The durable memory without ROS: rows committed by the writer thread, survive a reopen and a kill -9, stay
within the disk budget, and a corrupt, locked, unwritable or full store is never fatal."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from embodied_r_ros.clip_buffer import decode_payload
from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.memory.files import default_memory_path, memory_path
from embodied_r_ros.memory.store import COMMIT_S, MemoryStore

T0 = 1_700_000_000 * NS_PER_S


def jpeg(seed: int, size: tuple[int, int] = (160, 120)) -> np.ndarray:
    """A noisy image's JPEG bytes (about 20 kB at 160x120: the budget tests fill megabytes fast)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return cv2.imencode(".jpg", pixels)[1]


def fill(store: MemoryStore, count: int, start: int = 0, step_s: float = 1.0) -> list[int]:
    """``count`` candidates (every third kept) and a pose each; returns their stamps."""
    stamps = []
    for i in range(start, start + count):
        stamp = T0 + round(i * step_s * NS_PER_S)
        kept = i % 3 == 0
        assert store.add_candidate(
            stamp, kept, 0.25 if kept else 0.75, "low_overlap" if kept else "", jpeg(i)
        )
        store.add_pose(stamp, Pose(position=(float(i), 0.0, 0.0)))
        stamps.append(stamp)
    return stamps


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "memory" / "robot.sqlite"


def rows(path: Path, sql: str) -> list[tuple]:
    """What another connection (another process, after a restart) reads from the file."""
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_the_default_path_is_one_file_per_node_under_ros_home(tmp_path):
    env = {"ROS_HOME": str(tmp_path)}
    assert default_memory_path("/embodied_r", env) == tmp_path / "embodied_r" / "embodied_r.sqlite"
    assert (
        default_memory_path("/robot/embodied_r", env) == tmp_path / "embodied_r" / "robot.embodied_r.sqlite"
    )
    assert default_memory_path("/a/b/embodied_r", env) != default_memory_path("/a_b/embodied_r", env)
    assert default_memory_path("/embodied_r", {}) == Path.home() / ".ros" / "embodied_r" / "embodied_r.sqlite"
    assert memory_path("", "/embodied_r", env) == default_memory_path("/embodied_r", env)
    assert memory_path("mission.sqlite", "/embodied_r", env) == tmp_path / "embodied_r" / "mission.sqlite"
    assert memory_path("/data/m.sqlite", "/embodied_r", env) == Path("/data/m.sqlite")


def test_rows_are_committed_within_the_commit_period_and_read_back_after_a_reopen(store_path):
    store = MemoryStore(store_path, 64)
    try:
        assert store.enabled and store.status().problem == ""
        stamps = fill(store, 10)
        store.add_description(stamps[3], "a red chair", "vlm (tiny)", question_agnostic=True)
        store.add_description(
            stamps[3], "the chair is left", "vlm (tiny)", question_agnostic=False, question="q?"
        )
        # Without a flush: the writer commits on its own, within the commit period.
        deadline = time.monotonic() + 10 * COMMIT_S
        while time.monotonic() < deadline and rows(store_path, "SELECT COUNT(*) FROM frames")[0][0] < 10:
            time.sleep(0.05)
        assert rows(store_path, "SELECT COUNT(*) FROM frames")[0][0] == 10
        assert store.flush()
        status = store.status()
        assert (status.frames, status.keyframes, status.poses, status.descriptions) == (10, 4, 10, 2)
        assert (status.oldest_ns, status.newest_ns) == (stamps[0], stamps[-1]) and status.backlog == 0
    finally:
        store.close()
    assert not store.enabled

    again = MemoryStore(store_path, 64)
    try:
        status = again.status()
        assert status.enabled and (status.frames, status.keyframes, status.poses) == (10, 4, 10)
        assert again.span() == (stamps[0], stamps[-1])
        found = again.candidates(stamps[2], stamps[6])
        assert [c.stamp_ns for c in found] == stamps[2:7]
        assert [(c.kept, c.overlap, c.reason) for c in found[:2]] == [
            (False, 0.75, ""),
            (True, 0.25, "low_overlap"),
        ]
        frame = again.frame(stamps[4])
        assert np.array_equal(frame.image, decode_payload(jpeg(4), 0))  # decoded like the buffer's
        assert again.frame(stamps[4] + 1) is None
        pose = again.pose_at(stamps[4] + NS_PER_S // 2, max_gap_s=0.6)  # halfway: interpolated
        assert pose is not None and pose.position[0] == pytest.approx(4.5)
        assert again.pose_at(stamps[-1] + 5 * NS_PER_S, max_gap_s=0.5) is None
        described = again.descriptions(stamps[0], stamps[-1])
        assert [(d.text, d.question_agnostic, d.question) for d in described] == [
            ("a red chair", True, ""),
            ("the chair is left", False, "q?"),
        ]
        assert described[0].model == "vlm (tiny)"
    finally:
        again.close()


def test_raw_frames_are_stored_as_the_buffer_holds_them(store_path):
    store = MemoryStore(store_path, 16)
    pixels = np.arange(24 * 32 * 3, dtype=np.uint8).reshape(24, 32, 3)
    try:
        store.add_candidate(T0, True, None, "first", pixels, "camera_optical")
        assert store.flush()
        frame = store.frame(T0)
        assert np.array_equal(frame.image, pixels) and frame.frame_id == "camera_optical"
        assert store.candidates(T0, T0)[0].overlap is None
    finally:
        store.close()


def test_poses_are_kept_at_ten_hertz(store_path):
    store = MemoryStore(store_path, 16)
    try:
        for i in range(100):  # 100 Hz for one second
            store.add_pose(T0 + i * NS_PER_S // 100, Pose())
        assert store.flush() and store.status().poses == 10
    finally:
        store.close()


def test_stamps_that_go_back_start_a_new_timeline(store_path):
    """A bag played again: the same stamps again never mix with the first run's; questions see the newest."""
    store = MemoryStore(store_path, 64)
    try:
        first = fill(store, 6)
        assert store.flush() and store.status().timeline == 0
        second = fill(store, 4, start=2)  # from the third stamp again
        assert store.flush()
        assert store.status().timeline == 1 and store.span() == (second[0], second[-1])
        assert [c.stamp_ns for c in store.candidates(first[0], first[-1])] == second
        assert store.timeline_start_ns() == second[0]  # mission times count from the new run's start
    finally:
        store.close()
    assert rows(store_path, "SELECT COUNT(*) FROM frames") == [(10,)]  # both runs are kept
    reopened = MemoryStore(store_path, 64)
    try:
        assert reopened.status().timeline == 1 and reopened.span() == (second[0], second[-1])
        assert reopened.timeline_start_ns() == second[0]
    finally:
        reopened.close()


def test_the_disk_budget_evicts_the_oldest_frames_and_the_file_stops_growing(store_path):
    budget_mb = 1.0
    store = MemoryStore(store_path, budget_mb)
    try:
        sizes = []
        stamps = []
        for chunk in range(6):
            stamps += fill(store, 40, start=chunk * 40)
            assert store.flush()
            sizes.append(store.path.stat().st_size)
        status = store.status()
        assert status.enabled and status.evicted_frames > 0
        assert max(sizes) <= budget_mb * 2**20 + 64 * 1024  # the budget, a few pages of slack
        assert status.size_bytes <= budget_mb * 2**20 + 8 * 2**20  # with the write-ahead log
        held = [c.stamp_ns for c in store.candidates(0, 2**62)]
        assert held == stamps[-len(held) :] and status.frames == len(held) < 240  # the newest, in order
        assert store.span() == (held[0], stamps[-1])
        assert store.timeline_start_ns() == stamps[0] < held[0]  # the start outlives its evicted frame
        # Poses older than the oldest frame (less a second for interpolation) went with the frames.
        assert rows(store_path, "SELECT MIN(stamp_ns) FROM poses")[0][0] >= held[0] - NS_PER_S
    finally:
        store.close()
    pages, free = rows(store_path, "PRAGMA page_count")[0][0], rows(store_path, "PRAGMA freelist_count")[0][0]
    assert free < pages // 4  # the incremental vacuum gave the evicted pages back


def test_with_no_frame_left_the_oldest_poses_go(store_path):
    """Odometry running for hours with the camera off: the poses alone are kept within the budget."""
    store = MemoryStore(store_path, 1.0, queue_items=50_000)
    try:
        count = 40_000
        for i in range(count):
            assert store.add_pose(T0 + i * NS_PER_S // 10, Pose(position=(float(i), 0.0, 0.0)))
        assert store.flush(timeout_s=60.0)
        status = store.status()
        assert status.enabled and 0 < status.poses < count and status.size_bytes < 1.0 * 2**20 + 8 * 2**20
        newest = rows(store_path, "SELECT MAX(stamp_ns), MIN(stamp_ns) FROM poses")[0]
        assert newest[0] == T0 + (count - 1) * NS_PER_S // 10 and newest[1] > T0  # the oldest went
    finally:
        store.close()


def test_clear_empties_the_store_and_gives_the_pages_back(store_path):
    store = MemoryStore(store_path, 64)
    try:
        fill(store, 60)
        assert store.flush()
        before = store.status().size_bytes  # the file and its log
        assert before > 60 * 10_000
        assert store.clear()
        status = store.status()
        assert (status.frames, status.poses, status.oldest_ns) == (0, 0, None) and store.span() is None
        assert status.size_bytes < before // 4 and store.timeline_start_ns() is None
        again = fill(store, 3, start=100)  # it keeps writing afterwards, a mission starting anew
        assert store.flush() and store.status().frames == 3 and store.timeline_start_ns() == again[0]
    finally:
        store.close()


def test_a_corrupt_file_is_named_and_set_aside_and_a_fresh_store_starts(store_path):
    store_path.parent.mkdir(parents=True)
    store_path.write_bytes(b"this is not a database " * 1000)
    store = MemoryStore(store_path, 16)
    try:
        status = store.status()
        assert status.enabled and status.frames == 0
        (aside,) = store_path.parent.glob("robot.sqlite.corrupt-*")
        assert str(store_path) in status.moved_aside and str(aside) in status.moved_aside
        assert aside.read_bytes().startswith(b"this is not a database")
        fill(store, 2)
        assert store.flush() and store.status().frames == 2
    finally:
        store.close()


def test_a_damaged_store_fails_its_integrity_check_and_is_set_aside(store_path):
    store = MemoryStore(store_path, 16)
    fill(store, 30)
    store.close()
    data = bytearray(store_path.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data), 3 * page):  # scribble over every third page's header
        data[offset : offset + 64] = b"\xff" * 64  # not a page type SQLite knows
    store_path.write_bytes(bytes(data))
    store = MemoryStore(store_path, 16)
    try:
        assert store.enabled and "set aside" in store.status().moved_aside
        assert store.status().frames == 0
    finally:
        store.close()


def test_another_programs_database_is_set_aside(store_path):
    store_path.parent.mkdir(parents=True)
    db = sqlite3.connect(store_path)
    db.execute("CREATE TABLE notes (text TEXT)")
    db.commit()
    db.close()
    store = MemoryStore(store_path, 16)
    try:
        assert (
            store.enabled and "not an embodied_r memory store (tables: notes)" in store.status().moved_aside
        )
    finally:
        store.close()


def test_a_path_that_cannot_be_written_disables_the_store_with_the_fix(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    store = MemoryStore(blocker / "robot.sqlite", 16)  # its directory would have to be a file
    try:
        status = store.status()
        assert not store.enabled and not store.flush() and not store.clear()
        assert str(blocker / "robot.sqlite") in status.problem
        assert "memory.path" in status.problem and "memory.enabled false" in status.problem
        assert not store.add_candidate(T0, True, None, "first", jpeg(0))  # never waits, never raises
        assert store.status().backlog == 0
    finally:
        store.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_disables_the_store(tmp_path):
    directory = tmp_path / "read_only"
    directory.mkdir()
    directory.chmod(0o555)
    try:
        store = MemoryStore(directory / "robot.sqlite", 16)
        assert not store.enabled and str(directory / "robot.sqlite") in store.status().problem
        store.close()
    finally:
        directory.chmod(0o755)


def test_a_full_disk_disables_the_store_once_and_keeps_what_was_committed(store_path):
    problems: list[str] = []
    # SQLite's own size cap stands in for a full disk: the same SQLITE_FULL error on the next write.
    store = MemoryStore(store_path, 64, on_problem=problems.append, max_page_count=60)
    try:
        fill(store, 2)
        assert store.flush()
        for i in range(2, 40):
            store.add_candidate(T0 + i * NS_PER_S, False, 0.9, "", jpeg(i))
        store.flush()
        deadline = time.monotonic() + 10
        while store.enabled and time.monotonic() < deadline:
            time.sleep(0.05)
        status = store.status()
        assert not status.enabled and len(problems) == 1 and problems[0] == status.problem
        assert "full" in status.problem and str(store_path) in status.problem
        assert "memory.disk_budget_mb" in status.problem
        assert not store.add_candidate(T0 + 99 * NS_PER_S, True, None, "first", jpeg(99))
    finally:
        store.close()
    assert rows(store_path, "PRAGMA integrity_check") == [("ok",)]
    assert rows(store_path, "SELECT COUNT(*) FROM frames")[0][0] >= 2


def test_a_second_store_on_the_same_file_is_refused(store_path):
    first = MemoryStore(store_path, 16)
    try:
        second = MemoryStore(store_path, 16)
        assert not second.enabled and "in use by another node or process" in second.status().problem
        second.close()
        assert first.enabled
    finally:
        first.close()
    third = MemoryStore(store_path, 16)  # the lock went with the first
    assert third.enabled
    third.close()


def test_a_full_queue_drops_rows_and_counts_them_without_waiting(store_path):
    # The writer holds at most commit_rows rows itself, the queue queue_items: RAM is bounded.
    store = MemoryStore(store_path, 16, queue_items=4, commit_rows=2)
    blocker = sqlite3.connect(store_path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # holds the write lock: the writer waits on its first commit
        start = time.monotonic()
        accepted = [store.add_candidate(T0 + i * NS_PER_S, False, 0.9, "", jpeg(i)) for i in range(20)]
        assert time.monotonic() - start < 1.0  # the camera thread never waits
        assert not all(accepted) and store.status().dropped == accepted.count(False)
        blocker.execute("ROLLBACK")
        assert store.flush() and store.status().frames == accepted.count(True)
    finally:
        blocker.close()
        store.close()


KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from embodied_r_ros.memory.store import MemoryStore
    store = MemoryStore(sys.argv[1], 64)
    payload = np.frombuffer(os.urandom(5000), dtype=np.uint8)
    for i in range(50):
        store.add_candidate(1_700_000_000_000_000_000 + i * 10**9, i % 2 == 0, 0.3, "x", payload)
    assert store.flush()
    for i in range(50, 80):  # queued, not committed
        store.add_candidate(1_700_000_000_000_000_000 + i * 10**9, False, 0.9, "", payload)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_kill_9_loses_at_most_what_was_not_committed(store_path):
    result = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(store_path)], timeout=120)
    assert result.returncode == -signal.SIGKILL
    store = MemoryStore(store_path, 64)  # a restart: the committed rows are all there
    try:
        assert store.enabled and store.status().moved_aside == ""
        stamps = [c.stamp_ns for c in store.candidates(0, 2**62)]
        assert len(stamps) >= 50 and stamps == [T0 + i * NS_PER_S for i in range(len(stamps))]
    finally:
        store.close()


def test_writes_from_several_threads_while_reading(store_path):
    store = MemoryStore(store_path, 64)
    try:

        def describe() -> None:  # the worker thread, while the camera's and the odometry's write
            for i in range(200):
                store.add_description(T0 + i * NS_PER_S, f"view {i}", "vlm", question_agnostic=True)

        describer = threading.Thread(target=describe)
        describer.start()
        stamps = fill(store, 50)
        seen = [len(store.candidates(0, 2**62)) for _ in range(20)]
        describer.join()
        assert store.flush() and seen == sorted(seen)
        assert len(store.candidates(stamps[0], stamps[-1])) == 50 and store.status().descriptions == 200
    finally:
        store.close()
