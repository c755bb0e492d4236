"""`embodied-r prepare`: synthetic bags + questions -> data set, with the tiny VLM and real rosbags files."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from embodied_r_training.data.bag_reader import BagReader, BagReadError, BagTopics
from embodied_r_training.data.description_cache import DescriptionCache
from embodied_r_training.data.splits import fold_scenes, split_scenes
from embodied_r_training.synth.generate import SynthConfig, synthesize
from fake_openai import FixedReplyServer
from synth_helpers import decode_image, odom_pose, read_bag, stamp_ns

from embodied_r_ros.cli.main import main
from embodied_r_ros.frames import Frame
from embodied_r_ros.keyframes import StreamingKeyFrameSelector
from embodied_r_ros.perception import parse_descriptions
from embodied_r_ros.poses.pose_history import PoseHistory
from embodied_r_ros.question_file import read_questions, write_questions
from embodied_r_ros.reasoning.messages import reasoning_messages

IMAGE_TOPIC = "/camera/image_raw"


def _world(out: Path, storage: str) -> Path:
    synthesize(
        SynthConfig(
            out=out, scenes=3, width=160, height=120, duration_s=6.0, storage=storage, questions_per_task=1
        )
    )
    return out / "questions.jsonl"


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same three scenes (seed 0) as mcap and as sqlite3 bags."""
    root = tmp_path_factory.mktemp("worlds")
    return {storage: _world(root / storage, storage) for storage in ("mcap", "sqlite3")}


def _prepare(questions: list[Path], out: Path, cache: Path, vlm: Path, *extra: str) -> int:
    args = ["prepare", *map(str, questions), "--out", str(out), "--cache", str(cache), "--vlm", str(vlm)]
    args += ["--device", "cpu", "--max-new-tokens", "4", "--batch-size", "16", "--no-progress", *extra]
    return main(args)


def _records(out: Path) -> list[dict]:
    rows = []
    for split in ("train", "val", "test"):
        rows += [json.loads(line) for line in (out / f"{split}.jsonl").read_text().splitlines()]
    return sorted(rows, key=lambda r: r["id"])


@pytest.fixture(scope="module")
def prepared(worlds: dict[str, Path], tiny_models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """One run on the mcap world: (output dir, cache dir)."""
    root = tmp_path_factory.mktemp("prepared")
    assert (
        _prepare([worlds["mcap"]], root / "ds", root / "cache", tiny_models_dir / "vlm", "--folds", "3") == 0
    )
    return root / "ds", root / "cache"


def test_dataset_has_every_question_with_prompt_solution_and_scene_splits(worlds, prepared) -> None:
    from datasets import load_dataset

    out, _ = prepared
    questions = read_questions(worlds["mcap"])
    records = _records(out)
    assert [r["id"] for r in records] == sorted(q.id for q in questions)
    by_id = {q.id: q for q in questions}
    for record in records:
        q = by_id[record["id"]]
        assert record["task"] == q.task and record["question"] == q.question
        assert record["solution"] == str(q.answer).removesuffix(".0")
        assert [m["role"] for m in record["prompt"]] == ["system", "user"]
        assert q.question in record["prompt"][1]["content"]
        assert record["start_ns"] == q.start_ns and record["end_ns"] == q.end_ns
        assert 2 <= len(record["keyframe_stamps_ns"]) <= 32
        assert all(q.start_ns <= s <= q.end_ns for s in record["keyframe_stamps_ns"])
    # Splits by scene: a scene's questions are all in one split, and each split has a scene (3 scenes).
    split_of = {}
    for record in records:
        assert split_of.setdefault(record["scene"], record["split"]) == record["split"]
        assert record["fold"] in (0, 1, 2)
    assert sorted(split_of.values()) == ["test", "train", "val"]
    # The parquet files hold the same rows as the jsonl files.
    parquet = load_dataset("parquet", data_files=str(out / "train.parquet"), split="train")
    train = [r for r in records if r["split"] == "train"]
    assert sorted(parquet["id"]) == [r["id"] for r in train]
    assert parquet[0]["prompt"] == next(r for r in train if r["id"] == parquet[0]["id"])["prompt"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == len(records) and summary["failures"] == 0 and summary["vlm_calls"] >= 1


def test_rerun_hits_the_cache_and_calls_no_vlm(worlds, prepared, tiny_models_dir, tmp_path) -> None:
    out, cache = prepared
    again = tmp_path / "again"
    assert _prepare([worlds["mcap"]], again, cache, tiny_models_dir / "vlm", "--folds", "3") == 0
    summary = json.loads((again / "summary.json").read_text())
    assert summary["vlm_calls"] == 0 and summary["cache_hits"] == summary["records"]
    assert _records(again) == _records(out)


def node_keyframes(every: list[Frame], start: int, end: int, config=None) -> list:
    """What the node answers for [start, end] after the bag played into it: its selector fed every frame
    of the stream, as the camera delivers them, then asked."""
    selector = StreamingKeyFrameSelector(config, history_s=3600.0)
    for frame in every:
        selector.push(frame)
    return selector.keyframes_in_window(start, end)


def test_prompts_equal_the_nodes_prompts_for_the_same_frames(worlds, prepared) -> None:
    """Every frame of each bag read with plain rosbags, the node's streaming key-frame rule (the stream from
    the bag's first frame, asked at the window's end) and its prompt builder."""
    from embodied_r_training.data.description_cache import cache_key

    out, cache_dir = prepared
    records = _records(out)
    assert any(r["start_ns"] > min(q["start_ns"] for q in records) for r in records)  # not only whole bags
    for bag in sorted({r["bag"] for r in records}):
        contents = read_bag(Path(bag))
        poses = PoseHistory()
        for _, message in contents.messages["/odom"]:
            poses.add(stamp_ns(message), odom_pose(message))
        every = [
            Frame(decode_image(m), stamp_ns(m), poses.pose_at(stamp_ns(m)))
            for _, m in contents.messages[IMAGE_TOPIC]
        ]
        for record in (r for r in records if r["bag"] == bag):
            keyframes = node_keyframes(every, record["start_ns"], record["end_ns"])
            assert [k.frame.stamp_ns for k in keyframes] == record["keyframe_stamps_ns"], record["id"]
            generation = {"max_new_tokens": 4, "temperature": 0.0, "adapter": ""}  # as _prepare runs it
            key = cache_key(
                record["vlm"], [k.frame for k in keyframes], record["question"], record["options"], generation
            )
            replies = DescriptionCache(cache_dir).get(key)
            assert replies is not None and len(replies) == len(keyframes)
            messages = reasoning_messages(
                parse_descriptions(keyframes, replies), record["question"], record["options"]
            )
            assert [{"role": m.role, "content": m.joined_text} for m in messages] == record["prompt"]


def test_questions_labelled_by_stamps_alone_give_the_same_records(
    worlds, prepared, tiny_models_dir, tmp_path
) -> None:
    """A user labelling a robot's bag writes the window once, as camera stamps: start_s/end_s are optional."""
    from dataclasses import replace

    dataset, cache = prepared
    two = worlds["mcap"].parent / "stamps_only.jsonl"
    questions = [replace(q, start_s=None, end_s=None) for q in read_questions(worlds["mcap"])[:2]]
    write_questions(two, questions)
    assert all("start_s" not in line for line in two.read_text().splitlines())
    out = tmp_path / "stamps"
    assert _prepare([two], out, cache, tiny_models_dir / "vlm") == 0
    made = {r["id"]: r for r in _all_records(out)}
    before = {r["id"]: r for r in _all_records(dataset)}
    assert sorted(made) == sorted(q.id for q in questions)
    for key, record in made.items():
        for column in ("prompt", "solution", "keyframe_stamps_ns", "start_ns", "end_ns"):
            assert record[column] == before[key][column], column
    bad = worlds["mcap"].parent / "no_window.jsonl"
    write_questions(bad, [replace(questions[0], start_ns=0, end_ns=0), questions[1]])
    lost = tmp_path / "lost"
    assert _prepare([bad], lost, cache, tiny_models_dir / "vlm") == 1  # one question failed, named
    failures = (lost / "failures.jsonl").read_text()
    assert questions[0].id in failures and "start_ns/end_ns" in failures
    assert json.loads((lost / "summary.json").read_text())["records"] == 1


def _all_records(dataset: Path) -> list[dict]:
    lines = [line for split in ("train", "val", "test") for line in (dataset / f"{split}.jsonl").open()]
    return [json.loads(line) for line in lines if line.strip()]


def test_other_generation_settings_miss_the_cache(worlds, prepared, tiny_models_dir, tmp_path) -> None:
    """A reply cut at 4 new tokens is not reused for a run that asks for 5 (the same settings hit)."""
    _, cache = prepared
    two = worlds["mcap"].parent / "two_questions.jsonl"  # bags are relative to the questions file
    write_questions(two, read_questions(worlds["mcap"])[:2])
    same = tmp_path / "same"
    assert _prepare([two], same, cache, tiny_models_dir / "vlm") == 0
    assert json.loads((same / "summary.json").read_text())["cache_hits"] == 2
    longer = tmp_path / "longer"
    assert _prepare([two], longer, cache, tiny_models_dir / "vlm", "--max-new-tokens", "5") == 0  # last wins
    summary = json.loads((longer / "summary.json").read_text())
    assert summary["cache_hits"] == 0 and summary["vlm_calls"] >= 1 and summary["records"] == 2


@pytest.mark.parametrize("indexed", [True, False])
def test_one_pass_over_many_windows_gives_each_windows_key_frames(worlds, monkeypatch, indexed) -> None:
    """bag_keyframes (one read) == the node's answer for each window after the stream from the bag's
    first frame, reading by the bag's index (only the candidates) and without it (every image message)."""
    from embodied_r_training.data.prepare import bag_keyframes

    from embodied_r_ros.config import KeyFrameConfig

    question = read_questions(worlds["mcap"])[0]
    bag = worlds["mcap"].parent / question.bag
    contents = read_bag(bag)
    every = [Frame(decode_image(m), stamp_ns(m)) for _, m in contents.messages[IMAGE_TOPIC]]
    stamps = [f.stamp_ns for f in every]
    first, last = stamps[0], stamps[-1]
    between = (stamps[3] + stamps[4]) // 2  # a window edge between two frames
    windows = [
        (first, last), (stamps[7], last), (between, stamps[40]), (first, last), (stamps[12], stamps[12]),
        (between, between + 1), (last + 10**9, last + 2 * 10**9), (stamps[20], stamps[-2]),
    ]  # fmt: skip
    config = KeyFrameConfig(min_keyframes=2)
    if not indexed:
        monkeypatch.setattr(BagReader, "_indexed_stamps", lambda self: None)
    with BagReader(bag, BagTopics(odometry="")) as reader:
        found = bag_keyframes(reader, windows, config)
    for (start, end), keyframes in zip(windows, found, strict=True):
        expected = node_keyframes(every, start, end, config)
        if not expected:  # no frame there, or only frames the node did not keep (off the 1 fps grid)
            assert isinstance(keyframes, BagReadError), (start, end)
            continue
        assert [(k.frame.stamp_ns, k.index, k.reason) for k in keyframes] == [
            (k.frame.stamp_ns, k.index, k.reason) for k in expected
        ]
        pairs = zip(keyframes, expected, strict=True)
        assert all(np.array_equal(k.frame.image, e.frame.image) for k, e in pairs)
    assert "outside" in str(found[6]) and "holds no frames" in str(found[5])


def test_mcap_and_sqlite3_bags_give_the_same_dataset(worlds, prepared, tiny_models_dir, tmp_path) -> None:
    out, cache = prepared
    assert _prepare([worlds["sqlite3"]], tmp_path / "sq", cache, tiny_models_dir / "vlm", "--folds", "3") == 0
    summary = json.loads((tmp_path / "sq" / "summary.json").read_text())
    assert summary["vlm_calls"] == 0  # same pixels, poses and questions: the same cache keys

    def strip(rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "bag"} for r in rows]

    assert strip(_records(tmp_path / "sq")) == strip(_records(out))


def test_errors_are_reported_by_name_and_the_rest_is_processed(worlds, tiny_models_dir, tmp_path) -> None:
    source = worlds["mcap"].parent
    shutil.copytree(source / "scene_0000", tmp_path / "scene_0000")
    shutil.copytree(source / "scene_0001", tmp_path / "scene_0001")
    questions = [q for q in read_questions(worlds["mcap"]) if not q.bag.startswith("scene_0002/")]
    good = [q for q in questions if q.bag.startswith("scene_0000/")]
    from dataclasses import replace

    outside = replace(
        good[0], id="outside", start_ns=good[0].end_ns + 10**10, end_ns=good[0].end_ns + 2 * 10**10
    )
    missing = replace(good[0], id="missing-bag", bag="scene_9999/bag")
    write_questions(tmp_path / "questions.jsonl", [*questions, outside, missing])
    mcap = next((tmp_path / "scene_0001" / "bag").glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])  # truncated mid-recording
    out = tmp_path / "ds"
    rc = _prepare([tmp_path / "questions.jsonl"], out, tmp_path / "cache", tiny_models_dir / "vlm")
    assert rc == 1
    failures = {
        json.loads(line)["what"]: json.loads(line)["reason"] for line in (out / "failures.jsonl").open()
    }
    assert "outside" in failures["outside"] or "lies outside" in failures["outside"]
    assert "scene_9999" in failures["missing-bag"] and "does not exist" in failures["missing-bag"]
    scene1 = [q.id for q in questions if q.bag.startswith("scene_0001/")]
    assert set(scene1) <= set(failures) and all("scene_0001" in failures[i] for i in scene1)
    assert [r["id"] for r in _records(out)] == sorted(q.id for q in good)


def test_missing_topic_names_the_topics_the_bag_has(worlds) -> None:
    bag = worlds["mcap"].parent / "scene_0000" / "bag"
    with pytest.raises(BagReadError, match="no topic '/front/image'.*/camera/image_raw"):
        BagReader(bag, BagTopics(image="/front/image"))


def _cache_entries(cache: Path) -> int:
    """Stored descriptions in a cache directory (not the writers' hidden temporary files)."""
    return len(list(cache.glob("??/[!.]*.json")))


def test_kill_mid_run_loses_at_most_the_batch_in_flight(worlds, tiny_models_dir, tmp_path) -> None:
    cache = tmp_path / "cache"
    command = [
        sys.executable, "-m", "embodied_r_ros.cli.main", "prepare", str(worlds["mcap"]), "--out",
        str(tmp_path / "ds"), "--cache", str(cache), "--vlm", str(tiny_models_dir / "vlm"), "--device", "cpu",
        "--max-new-tokens", "4", "--batch-size", "1", "--no-progress",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while _cache_entries(cache) < 2 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, "the run ended before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    kept = _cache_entries(cache)  # whole entries only: a rename is atomic
    total = len(read_questions(worlds["mcap"]))
    assert 2 <= kept < total
    # A kill between a write and its rename can leave a temporary file; the next run removes it.
    orphan = cache / "00" / ".tmp-999999999-x.json"  # no such process
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_text("{")
    out = tmp_path / "resumed"
    assert _prepare([worlds["mcap"]], out, cache, tiny_models_dir / "vlm") == 0
    assert not list(cache.glob("??/.tmp-*"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cache_hits"] >= kept and summary["records"] == total


def test_splits_are_by_scene_seeded_and_folds_balanced() -> None:
    scenes = [f"s{i}" for i in range(10)]
    a, b = split_scenes(scenes, seed=1), split_scenes(scenes, seed=1)
    assert a == b and sorted(a) == scenes
    assert sorted(a.values()).count("train") == 8
    assert split_scenes(scenes, seed=2) != a
    folds = fold_scenes(scenes, 5, seed=0)
    assert sorted(list(folds.values()).count(f) for f in range(5)) == [2] * 5
    with pytest.raises(ValueError, match="need at least"):
        fold_scenes(["a"], 2)


def test_compressed_bag_gives_the_frames_of_the_raw_bag(worlds, tmp_path) -> None:
    """The same scene stored as JPEG decodes to nearly the raw pixels at the same stamps, with poses."""
    synthesize(
        SynthConfig(
            out=tmp_path, width=160, height=120, duration_s=6.0, compressed=True, questions_per_task=1
        )
    )
    question = read_questions(tmp_path / "questions.jsonl")[0]
    raw_bag = worlds["mcap"].parent / "scene_0000" / "bag"
    with BagReader(tmp_path / question.bag) as jpeg, BagReader(raw_bag) as raw:
        a, b = jpeg.window(question.start_ns, question.end_ns), raw.window(question.start_ns, question.end_ns)
    assert [f.stamp_ns for f in a] == [f.stamp_ns for f in b] and len(a) >= 4
    for x, y in zip(a, b, strict=True):
        assert abs(x.image.astype(int) - y.image.astype(int)).mean() < 8
        assert x.pose == y.pose and x.pose is not None


def test_openai_server_gets_several_requests_in_flight(worlds, tmp_path) -> None:
    with FixedReplyServer("A red chair.", delay_s=0.05) as server:
        args = ["prepare", str(worlds["mcap"]), "--out", str(tmp_path / "ds"), "--cache", str(tmp_path / "c")]
        args += ["--vlm", "served-72b", "--vlm-backend", "openai", "--base-url", server.url]
        args += ["--concurrency", "4"]
        assert main([*args, "--batch-size", "64", "--no-progress"]) == 0
    summary = json.loads((tmp_path / "ds" / "summary.json").read_text())
    assert server.received == summary["vlm_requests"] > 0
    assert 1 < server.most_in_flight <= 4
    record = _records(tmp_path / "ds")[0]
    assert record["vlm"] == "served-72b" and "Observe: A red chair." in record["prompt"][1]["content"]


def test_max_keyframes_caps_every_record_keeping_first_and_last(worlds, prepared, tmp_path) -> None:
    out = tmp_path / "capped"
    args = ["prepare", str(worlds["mcap"]), "--out", str(out), "--perceiver", "ground_truth"]
    assert main([*args, "--max-keyframes", "4", "--no-progress"]) == 0
    full = {r["id"]: r["keyframe_stamps_ns"] for r in _records(prepared[0])}
    capped = {r["id"]: r["keyframe_stamps_ns"] for r in _records(out)}
    assert capped.keys() == full.keys() and any(len(s) > 4 for s in full.values())
    for key, stamps in capped.items():
        assert len(stamps) == min(4, len(full[key])) and set(stamps) <= set(full[key])
        assert (stamps[0], stamps[-1]) == (full[key][0], full[key][-1])
    assert main([*args, "--max-keyframes", "1", "--no-progress"]) == 2  # below min_keyframes: one clear error


def test_the_bag_index_rosbags_hides_is_still_reachable(worlds) -> None:
    """rosbag_index reads rosbags' private reader state (rosbags 0.11.9). If a rosbags release moves it,
    BagReader silently falls back to reading whole chunks: this test makes that change loud instead."""
    from embodied_r_training.data.rosbag_index import channel_id, mcap_index, sqlite_stamps
    from rosbags.rosbag2 import Reader

    for storage in ("mcap", "sqlite3"):
        bag = worlds[storage].parent / read_questions(worlds[storage])[0].bag
        images = [stamp_ns(m) for _, m in read_bag(bag).messages[IMAGE_TOPIC]]
        with Reader(bag) as reader:
            channel = channel_id(reader, IMAGE_TOPIC)
            assert channel is not None, f"rosbags no longer exposes the {storage} file's connections"
            if storage == "mcap":
                index = mcap_index(reader, "mcap", bag)
                assert index is not None and index.readable, "rosbags no longer exposes the mcap chunk index"
                entries = index.entries(channel)
                assert entries is not None and len(entries) == len(images)
                raw = index.read(entries[0][1])  # one record, read directly: the first image message
                image = next(raw for c, _, raw in reader.messages() if c.topic == IMAGE_TOPIC)
                assert raw == image
            else:
                assert mcap_index(reader, "sqlite3", bag) is None
                stamps = sqlite_stamps(reader, IMAGE_TOPIC)
                assert stamps is not None and len(stamps) == len(images)
