"""A robot's durable memory as a training source, without ROS: a store opened for reading only never changes
its file, and `embodied-r prepare` gives each window of a store the key frames a history holding that memory
answers it with (the same stamps, decisions, images and poses); a store that cannot be read is a named
failure and the other questions go on."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import ground_truth_scene as scene
import numpy as np
import pytest
from embodied_r_training.data.memory_source import is_memory_store, memory_keyframes
from embodied_r_training.data.prepare import PrepareConfig, iter_items

from embodied_r_ros.cli.main import main
from embodied_r_ros.config import BufferConfig, KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.history import RobotHistory
from embodied_r_ros.keyframes import REASON_SAMPLED
from embodied_r_ros.memory.read_only import ReadOnlyMemory
from embodied_r_ros.memory.records import MemoryStoreError
from embodied_r_ros.memory.store import MemoryStore
from embodied_r_ros.question_file import Question, bag_path, read_questions, write_questions
from embodied_r_ros.testing.synthetic_clip import synthetic_clip
from embodied_r_ros.windows import Window

MINUTE = 60 * NS_PER_S
RAM_S = 60.0


def robot(memory: MemoryStore | None = None, history_s: float = RAM_S) -> RobotHistory:
    buffer = BufferConfig(history_s=history_s, memory_mb=1024.0)
    return RobotHistory(buffer, KeyFrameConfig(), jump_back_reset_s=1.0, memory=memory)


def feed(history: RobotHistory, frames) -> None:
    for frame in frames:
        history.add_frame(frame, "camera")
        history.add_pose(frame.stamp_ns, frame.pose)


def described(keyframes) -> list[tuple]:
    """What a key frame is: stamp, index in its window, overlap, reason, pose (rounded: the robot's answers
    interpolate its RAM odometry, the store's its stored samples; they differ in the last bit at most)."""
    return [(k.frame.stamp_ns, k.index, k.overlap, k.reason, rounded(k.frame.pose)) for k in keyframes]


def rounded(pose) -> tuple | None:
    return None if pose is None else tuple(np.round([*pose.position, *pose.orientation], 9))


def untouched(directory: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of ``directory`` with its modification time and bytes."""
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def robot_memory(tmp_path_factory):
    """A robot that kept one minute in RAM and a memory of an hour (a frame every 5 s, synthetic stamps, so
    the hour need not pass), and one that stood still for ten minutes; each window's key frames as the
    robot answered it while its memory was open. Returns (stores, the answers by store and window)."""
    directory = tmp_path_factory.mktemp("robots")
    turning = synthetic_clip(seconds=3600.0, fps=0.2, size=(160, 120), yaw_rate_deg=3.0)
    still = synthetic_clip(seconds=600.0, fps=0.5, size=(160, 120), yaw_rate_deg=0.0, speed_m_s=0.0)
    end, still_end = turning.frames[-1].stamp_ns, still.frames[-1].stamp_ns
    windows = {
        "mission.sqlite": [
            (end - 50 * MINUTE, end - 49 * MINUTE),  # a minute, 50 minutes back
            (end - 55 * MINUTE, end - 5 * MINUTE),  # 50 minutes: clamped to 32
            (end - 40 * NS_PER_S, end),  # inside RAM: answered from RAM while the robot ran
        ],
        "still.sqlite": [(still_end - 8 * MINUTE, still_end - 7 * MINUTE)],  # one kept: topped up to 4
    }
    answers = {}
    for name, clip in (("mission.sqlite", turning), ("still.sqlite", still)):
        store = MemoryStore(directory / name, 256.0)
        history = robot(store)
        feed(history, clip.frames)
        answers[name] = [
            history.keyframes(Window(start_ns=a, end_ns=b), 60.0).keyframes for a, b in windows[name]
        ]
        store.close()
    return directory, windows, answers


def test_reading_a_closed_store_changes_nothing(robot_memory):
    directory, _, _ = robot_memory
    before = untouched(directory)
    assert not any(name.endswith(("-wal", "-shm")) for name in before)  # closed: no log left
    with ReadOnlyMemory(directory / "mission.sqlite") as memory:
        oldest, newest = memory.span()
        assert newest - oldest == 3595 * NS_PER_S  # a frame every 5 s for an hour, every one a candidate
        candidates = memory.candidates(oldest, newest)
        assert len(candidates) == 720 and memory.status().frames == 720
        assert memory.frame(candidates[10].stamp_ns).image.shape == (120, 160, 3)
        assert memory.pose_at(candidates[10].stamp_ns, 0.5) is not None
        assert memory.descriptions(oldest, newest) == []
        assert not memory.status().enabled  # it never writes
    assert untouched(directory) == before  # same files (no -wal, -shm, lock), same bytes, same times


def test_a_store_a_killed_node_left_is_read_with_its_log_and_the_log_kept(tmp_path):
    """A node killed before it closed its memory leaves the committed rows in NAME-sqlite-wal: they are
    read, and neither file changes."""
    clip = synthetic_clip(seconds=30.0, fps=1.0, size=(160, 120))
    live, killed = tmp_path / "live", tmp_path / "killed"
    store = MemoryStore(live / "robot.sqlite", 64.0)
    try:
        feed(robot(store), clip.frames)
        assert store.flush()
        killed.mkdir()
        for name in ("robot.sqlite", "robot.sqlite-wal"):  # what a kill -9 leaves (the lock goes with it)
            shutil.copy(live / name, killed / name)
        expected = store.candidates(*store.span())
    finally:
        store.close()
    assert (killed / "robot.sqlite-wal").stat().st_size > 0
    before = untouched(killed)
    with ReadOnlyMemory(killed / "robot.sqlite") as memory:
        assert memory.candidates(*memory.span()) == expected and len(expected) == 30
    after = untouched(killed)
    assert {name: after[name] for name in before} == before  # the file and its log as they were
    assert set(after) <= set(before) | {"robot.sqlite-shm"}  # at most SQLite's index of the log


def test_a_store_a_running_node_holds_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "robot.sqlite"
    store = MemoryStore(path, 16.0)
    try:
        with pytest.raises(MemoryStoreError) as refused:
            ReadOnlyMemory(path)
        message = str(refused.value)
        assert str(path) in message and "in use by a running node" in message
        assert "stop the node" in message and ".backup" in message
        assert store.enabled
    finally:
        store.close()
    with ReadOnlyMemory(path) as memory:  # the node stopped: readable
        assert memory.span() is None


def test_a_file_that_is_not_a_store_is_named_and_left_where_it_is(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"\x00not SQLite\x00" * 1000)
    notes = tmp_path / "notes.sqlite"
    db = sqlite3.connect(notes)
    db.execute("CREATE TABLE notes (text TEXT)")
    db.commit()
    db.close()
    before = untouched(tmp_path)
    for path, says in ((garbage, "unreadable"), (notes, "tables: notes")):
        with pytest.raises(MemoryStoreError, match="is not a memory store") as refused:
            ReadOnlyMemory(path)
        assert str(path) in str(refused.value) and says in str(refused.value)
    with pytest.raises(MemoryStoreError, match="does not exist"):
        ReadOnlyMemory(tmp_path / "missing.sqlite")
    assert untouched(tmp_path) == before  # nothing moved aside, nothing created


def test_a_sqlite_file_is_a_store_and_a_directory_a_bag(tmp_path, robot_memory):
    directory, _, _ = robot_memory
    copy = tmp_path / "robot.db"
    shutil.copy(directory / "mission.sqlite", copy)
    assert is_memory_store(copy) and is_memory_store(tmp_path / "missing.sqlite")
    assert not is_memory_store(tmp_path) and not is_memory_store(tmp_path / "bag")


def test_prepare_yields_the_key_frames_the_robot_answered_each_window_with(robot_memory, tmp_path):
    """Questions naming each store, by stamps and (the last) by seconds from the store's oldest frame:
    the key frames prepare yields are the ones the robot answered with, stamps, decisions, poses, pixels."""
    directory, windows, answers = robot_memory
    questions = []
    for name, spans in windows.items():
        for i, (start, end) in enumerate(spans):
            questions.append(Question("What did I see?", ("a", "b"), "A", f"{name}-{i}", name, start, end))
    with ReadOnlyMemory(directory / "mission.sqlite") as memory:
        oldest = memory.span()[0]
    start, end = windows["mission.sqlite"][0]
    by_seconds = Question(
        "What did I see?", ("a", "b"), "A", "seconds", "mission.sqlite",
        start_s=(start - oldest) / NS_PER_S, end_s=(end - oldest) / NS_PER_S,
    )  # fmt: skip
    questions_file = directory / "questions.jsonl"
    write_questions(questions_file, [*questions, by_seconds])
    before = untouched(directory)
    config = PrepareConfig(questions=[questions_file], out=tmp_path / "out", progress=False)
    loaded = [(q, bag_path(questions_file, q)) for q in read_questions(questions_file)]
    failures: list = []
    items = {item.question.id: item for item in iter_items(config, loaded, failures)}
    assert failures == [] and len(items) == 5
    for name, spans in windows.items():
        for i in range(len(spans)):
            got, expected = items[f"{name}-{i}"].keyframes, answers[name][i]
            assert described(got) == described(expected) and len(got) >= 4
            assert all(k.frame.pose is not None for k in got)  # poses from the store
            for a, b in zip(got, expected, strict=True):
                assert np.array_equal(a.frame.image, b.frame.image)  # the pixels the robot stored
    assert described(items["seconds"].keyframes) == described(answers["mission.sqlite"][0])
    assert len(items["mission.sqlite-1"].keyframes) == 32  # the long window, clamped
    assert REASON_SAMPLED in {k.reason for k in items["still.sqlite-0"].keyframes}  # topped up
    assert len(items["still.sqlite-0"].keyframes) == 4
    assert untouched(directory) == before


def test_a_window_outside_the_store_is_named_and_the_others_are_answered(robot_memory):
    directory, windows, answers = robot_memory
    with ReadOnlyMemory(directory / "mission.sqlite") as memory:
        oldest, newest = memory.span()
        found = memory_keyframes(
            memory,
            [
                (oldest - 10 * MINUTE, oldest + MINUTE),
                windows["mission.sqlite"][0],
                (newest + MINUTE, newest + 2 * MINUTE),
            ],
            KeyFrameConfig(),
        )
    before, inside, future = found
    assert isinstance(before, MemoryStoreError) and "starts before the oldest frame" in str(before)
    assert str(directory / "mission.sqlite") in str(before) and "choose an interval the store holds" in str(
        before
    )
    assert described(inside) == described(answers["mission.sqlite"][0])
    assert isinstance(future, MemoryStoreError) and "reaches into the future" in str(future)


def test_prepare_from_a_store_with_ground_truth_and_failures_by_name(tmp_path):
    """`embodied-r prepare --perceiver ground_truth`: a store beside its scene.json gives records whose key
    frames are the memory's; a corrupt store, another program's database and a missing store fail their
    questions by name (failures.jsonl) while the rest become records."""
    directory = tmp_path / "robot"
    scene.write_scene(directory)  # the scene the stamps walk through (ground truth reads the stamps)
    clip = synthetic_clip(seconds=4.0, fps=5.0, size=(160, 120), start_ns=scene.START_NS)
    store = MemoryStore(directory / "memory.sqlite", 64.0)
    feed(robot(store), clip.frames)
    store.close()
    (directory / "corrupt.sqlite").write_bytes(b"\x00garbage\x00" * 4096)
    db = sqlite3.connect(directory / "other.sqlite")
    db.execute("CREATE TABLE notes (text TEXT)")
    db.commit()
    db.close()
    start, end = clip.frames[0].stamp_ns, clip.frames[-1].stamp_ns
    ask = ("What is straight ahead?", ("red chair", "yellow lamp"), "A")
    questions = [
        Question(*ask, id=f"q-{bag}", bag=bag, start_ns=start, end_ns=end, task="t")
        for bag in ("memory.sqlite", "corrupt.sqlite", "other.sqlite", "missing.sqlite")
    ]
    questions.append(Question(*ask, id="q-seconds", bag="memory.sqlite", start_s=0.0, end_s=4.0, task="t"))
    questions_file = directory / "questions.jsonl"
    write_questions(questions_file, questions)
    out = tmp_path / "out"
    argv = ["prepare", str(questions_file), "--out", str(out), "--perceiver", "ground_truth", "--no-progress"]
    assert main(argv) == 1  # something failed
    records = []
    for split in ("train", "val", "test"):
        records += [json.loads(line) for line in (out / f"{split}.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in records) == ["q-memory.sqlite", "q-seconds"]
    with ReadOnlyMemory(directory / "memory.sqlite") as memory:
        (expected,) = memory_keyframes(memory, [(start, end)], KeyFrameConfig())
    for record in records:
        assert record["keyframe_stamps_ns"] == [k.frame.stamp_ns for k in expected]
        assert record["vlm"] == "ground-truth:scene.json" and record["bag"] == str(
            directory / "memory.sqlite"
        )
        assert "red chair" in record["prompt"][1]["content"]
    failures = {
        f["what"]: f["reason"] for f in map(json.loads, (out / "failures.jsonl").read_text().splitlines())
    }
    assert set(failures) == {"q-corrupt.sqlite", "q-other.sqlite", "q-missing.sqlite"}
    for bag in ("corrupt.sqlite", "other.sqlite", "missing.sqlite"):
        assert str(directory / bag) in failures[f"q-{bag}"]
    assert "is not a memory store" in failures["q-corrupt.sqlite"]
    assert "tables: notes" in failures["q-other.sqlite"] and "does not exist" in failures["q-missing.sqlite"]
