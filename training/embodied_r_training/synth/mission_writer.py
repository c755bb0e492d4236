"""Render a mission (:mod:`.mission`) and write it: the bag, its questions and what they are about.

``write_mission(config, out)`` writes::

    out/bag/                 rosbag2, the topics of ``embodied-r synth`` (bag_writer.py): camera images and
                             camera infos at ``fps``, odometry (the mission frame) at ``odom_hz``
    out/questions.jsonl      the questions (embodied_r_ros.question_file; kinds in mission_questions.py),
                             every window the whole mission
    out/mission.json         settings; rooms (offset, size, world, visits); the pieces (room visits and
                             the halls between) in time order; every object with its mission-frame
                             position and its sightings; the mission trajectory; per question id its
                             evidence; per kind the questions kept and dropped
    out/pieces/piece_NNNN.json  each piece as a ``scene.json`` of ``embodied-r synth`` (world and
                             trajectory in the piece's own frame): the ground-truth perceiver loads it
                             for key frames inside that piece (there is no single scene.json: see
                             mission.py)

Stamps: frame i at ``start + round(i / fps * 1e9)`` ns, odometry j at ``start + round(j / odom_hz * 1e9)``,
up to the last frame. Intervals in mission.json are ``[start_ns, end_ns]`` of frame stamps, inclusive.
Deterministic: the same config gives the same files (no wall-clock times in them).
"""

from __future__ import annotations

import heapq
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from embodied_r_ros.config import ConfigError
from embodied_r_ros.question_file import write_questions

from ..tasks.mission.context import KindCount, MissionQuestionConfig
from .bag_writer import BAG_DIR, BagOptions, SceneBagWriter
from .mission import (
    QUESTION_STREAM,
    ROOM,
    MissionConfig,
    MissionPlan,
    mission_objects,
    plan_mission,
    scene_dict,
)
from .mission_questions import MissionQuestions, generate_mission_questions
from .mission_sightings import MissionSightings
from .render import CameraModel, Renderer
from .visibility import VisibilityRecorder

logger = logging.getLogger(__name__)

PIECES_DIR = "pieces"
LOG_EVERY_S = 300.0  # progress in the log every this many seconds of mission time


@dataclass
class MissionResult:
    """What one mission produced (``seconds``: wall time to write it; ``bag_bytes``: the bag on disk)."""

    directory: Path
    frames: int
    messages: int
    bag_bytes: int
    seconds: float
    questions: int
    counts: dict[str, KindCount] = field(default_factory=dict)


def mission_id(config: MissionConfig) -> str:
    """The prefix of the mission's question ids: "mission-seed7-5min"."""
    return f"mission-seed{config.seed}-{config.minutes:g}min"


def _events(config: MissionConfig, end_s: float) -> list[tuple[int, int, float]]:
    """(stamp, kind, t) of every message time in stamp order: kind 0 a frame, 1 odometry."""
    frames = [(config.stamp_ns(t), 0, float(t)) for t in config.frame_times()]
    n_odom = int(np.floor(end_s * config.odom_hz + 1e-9)) + 1
    odom = [(config.stamp_ns(j / config.odom_hz), 1, j / config.odom_hz) for j in range(n_odom)]
    return list(heapq.merge(frames, odom))


def _id_maps(plan: MissionPlan) -> dict[int, np.ndarray]:
    """Per room: local object id -> mission object id (index 0, no object, stays 0)."""
    maps = {r: np.zeros(len(w.objects) + 1, dtype=np.int64) for r, w in enumerate(plan.rooms)}
    for mission_id_, room, obj in mission_objects(plan):
        maps[room][obj.id] = mission_id_
    return maps


def render_mission(
    plan: MissionPlan, camera: CameraModel, bag: SceneBagWriter, end_s: float
) -> MissionSightings:
    """Render every frame into ``bag`` with the odometry between, and return the objects' sightings."""
    config = plan.config
    maps = _id_maps(plan)
    no_objects = np.zeros(1, dtype=np.int64)
    n_objects = sum(len(w.objects) for w in plan.rooms)
    recorder = VisibilityRecorder(n_objects, camera.width * camera.height)
    renderer, current = None, None
    next_log = LOG_EVERY_S
    for stamp, kind, t in _events(config, end_s):
        pose = plan.trajectory.pose(t)
        if kind == 1:
            linear, angular = plan.trajectory.twist(t)
            bag.write_odometry(stamp, pose, linear, angular)
            continue
        piece = plan.piece_at(t)
        if piece is not current:
            renderer, current = Renderer(piece.world, camera), piece
        frame = renderer.render(piece.to_local(pose))
        bag.write_frame(stamp, frame.image)
        ids = maps[piece.room] if piece.kind == ROOM else no_objects
        recorder.add(t, ids[frame.ids])
        if t >= next_log:
            logger.info("mission %s: %.0f of %.0f s rendered", mission_id(config), t, end_s)
            next_log += LOG_EVERY_S
    return MissionSightings.from_visibility(recorder.result(), config.min_fraction, config.merge_gap_s)


def mission_dict(
    plan: MissionPlan,
    sightings: MissionSightings,
    made: MissionQuestions,
    camera: dict,
    image_topic: str,
    end_s: float,
) -> dict:
    """What mission.json holds (see the module docstring); plain data, deterministic."""
    config = plan.config

    def clip(t0: float, t1: float) -> list[int]:
        return [config.stamp_ns(min(t0, end_s)), config.stamp_ns(min(t1, end_s))]

    objects = []
    for oid, room, obj in mission_objects(plan):
        ox, oy = plan.offsets[room]
        x, y, z = obj.position
        objects.append(
            {
                "id": oid,
                "room": room,
                "local_id": obj.id,
                "name": obj.name,
                "category": obj.category,
                "colour": obj.colour,
                "position": [round(x + ox, 4), round(y + oy, 4), round(z, 4)],
                "size": list(obj.size),
                "max_fraction": round(sightings.max_fraction[oid], 5),
                "sightings": [clip(a, b) for a, b in sightings.sightings[oid]],
            }
        )
    rooms = []
    for r, world in enumerate(plan.rooms):
        rooms.append(
            {
                "room": r,
                "offset": list(plan.offsets[r]),
                "size": list(world.room.size),
                "visits": [clip(p.t0, p.t1) for p in plan.room_pieces(r)],
                "objects": [oid for oid, room, _ in mission_objects(plan) if room == r],
                "world": world.to_dict(),
            }
        )
    pieces = [
        {
            "piece": i,
            "kind": p.kind,
            "room": p.room,
            "interval": clip(p.t0, p.t1),
            "scene": f"{PIECES_DIR}/piece_{i:04d}.json",
        }
        for i, p in enumerate(plan.pieces)
    ]
    settings = asdict(config)
    return {
        "mission": mission_id(config),
        "config": settings,
        "bag": BAG_DIR,
        "image_topic": image_topic,
        "start_ns": config.start_ns,
        "end_ns": config.stamp_ns(end_s),
        "frames": config.n_frames,
        "camera": camera,
        "layout": "rooms along a corridor (x axis), room r centred at its offset; odometry = mission frame",
        "rooms": rooms,
        "recurring": [{"room": r, "local_id": o, "copies_room": src} for r, o, src in plan.recurring],
        "pieces": pieces,
        "objects": objects,
        "questions": {q.id: made.evidence[q.id].to_dict(q.task) for q in made.questions},
        "question_counts": {kind: c.to_dict() for kind, c in made.counts.items()},
        "trajectory": plan.trajectory.to_dict(),
    }


def write_mission(config: MissionConfig, out: str | Path) -> MissionResult:
    """Plan, render and write one mission into ``out`` (see the module docstring for the files)."""
    started = time.perf_counter()
    out = Path(out)
    if (out / BAG_DIR).exists() or (out / "mission.json").exists():
        raise ConfigError(f"{out} holds a mission already; remove it or choose another output directory")
    out.mkdir(parents=True, exist_ok=True)
    plan = plan_mission(config)
    end_s = float(config.frame_times()[-1])
    camera = CameraModel.from_fov(config.width, config.height, config.hfov_deg)
    camera_dict = {"width": camera.width, "height": camera.height, "k": [round(v, 6) for v in camera.k]}
    options = BagOptions(
        storage=config.storage, compressed=config.compressed, jpeg_quality=config.jpeg_quality
    )
    with SceneBagWriter(out / BAG_DIR, camera, options) as bag:
        sightings = render_mission(plan, camera, bag, end_s)
        messages = bag.messages
    made = generate_mission_questions(
        plan,
        sightings,
        np.random.default_rng(config.seed_sequence(QUESTION_STREAM)),
        end_s=end_s,
        bag=BAG_DIR,
        mission_id=mission_id(config),
        config=MissionQuestionConfig(per_kind=config.questions_per_kind),
    )
    write_questions(out / "questions.jsonl", made.questions)
    (out / PIECES_DIR).mkdir(exist_ok=True)
    for i in range(len(plan.pieces)):
        scene = scene_dict(plan, i, camera_dict, f"../{BAG_DIR}")
        (out / PIECES_DIR / f"piece_{i:04d}.json").write_text(
            json.dumps(scene, indent=1) + "\n", encoding="utf-8"
        )
    data = mission_dict(plan, sightings, made, camera_dict, options.image_topic, end_s)
    (out / "mission.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    bag_bytes = sum(f.stat().st_size for f in (out / BAG_DIR).iterdir() if f.is_file())
    seconds = time.perf_counter() - started
    logger.info(
        "mission %s: %d frames, %d rooms, %d questions (%s), %.1f MB bag, %.1f s",
        mission_id(config),
        config.n_frames,
        len(plan.rooms),
        len(made.questions),
        ", ".join(f"{k} {c.kept}" for k, c in made.counts.items()),
        bag_bytes / 1e6,
        seconds,
    )
    return MissionResult(out, config.n_frames, messages, bag_bytes, seconds, len(made.questions), made.counts)
