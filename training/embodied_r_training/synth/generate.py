"""``embodied-r synth``: synthetic egocentric rosbags with ground-truth spatial questions.

``embodied-r synth --out DIR --scenes N --seed S`` writes, for each scene i in 0..N-1::

    DIR/scene_0000/bag/               rosbag2 (bag.mcap or bag.db3, metadata.yaml); topics in bag_writer.py
    DIR/scene_0000/questions.jsonl    the scene's questions
    DIR/scene_0000/scene.json         the world (room, objects), trajectory segments, camera, timing
    DIR/scene_0000/preview.png        with --preview: top-down map + a strip of frames
    DIR/questions.jsonl               all scenes' questions in one file (``bag`` relative to DIR)
    DIR/generation.json               settings, and per task the questions kept and dropped (below)

Scene i depends only on (S, i): the same seed gives the same bags, questions and previews byte for byte
(message times start at ``--start-time``, never at the wall clock), and adding scenes leaves earlier ones
unchanged. Indoor scenes are rooms walked through at eye height; ``--outdoor`` gives drone flights over a
plaza.

Only answerable questions are written (:mod:`.answerable`): each candidate question is kept when the oracle
reasoner answers it correctly from the prompt ``embodied-r prepare --vlm-backend ground_truth
--max-keyframes N`` will build for it (its key frames read back from the written bag, ground-truth
descriptions); the others are dropped and counted per task (log, ``generation.json``). Pass prepare the
same ``--max-keyframes`` as synth (default: the core's 32), or the key frames, and the prompts, differ.

questions.jsonl (one JSON object per line, UTF-8; consumed by the data-set builder):

==============  =============================================================================================
key             meaning
==============  =============================================================================================
id              unique id, "indoor-seed7-scene_0000-007": environment, seed, scene, number, so that sets
                of other seeds or the other environment never share an id
bag             bag directory, relative to the directory of this questions file
start_s, end_s  the question's time window in seconds from the bag's first message (ms-rounded, inclusive)
start_ns,       the same window as absolute stamps in ns (bag time = header stamp); frame stamps are
end_ns          ``bag start + round(i / rate * 1e9)``; whole-clip windows end on the last frame's stamp
task            appearance_order, relative_direction, relative_distance, object_count, abs_distance,
                object_size, room_size, route, ego_distance, ego_turn, ego_altitude (see questions.py)
form            "mc" (multiple choice) or "numeric"
question        the question text (options are not in it)
options         option texts without letters, in letter order A, B, C, ...; empty for numeric questions
answer          the correct letter ("B") for mc; a number in SI units for numeric (metres, square metres,
                or an integer count)
unit            numeric: "m", "m^2" or "count"; "" for mc
answer_text     the correct option's text (mc) or the value with its unit (numeric), for reading
objects         ids of the objects the question is about (see scene.json)
==============  =============================================================================================
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from embodied_r_ros.config import REQUIRED, ConfigError, KeyFrameConfig, param
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.question_file import Question, write_questions

from ..tasks.scene import QuestionConfig
from .answerable import AnswerableScreen, ScreenCounts
from .bag_writer import BAG_DIR, DEFAULT_START_S, STORAGES, BagOptions, SceneBagWriter
from .questions import generate_questions
from .render import CameraModel, Renderer
from .trajectory import plan_trajectory
from .visibility import VisibilityRecorder
from .world import generate_world

logger = logging.getLogger(__name__)

PREVIEW_FRAMES = 6


@dataclass(frozen=True)
class SynthConfig:
    """Everything ``embodied-r synth`` needs; invalid values raise ConfigError naming the option.

    Each field's flag of ``embodied-r synth`` is declared with it (``param(..., flag=...)``); ``--size WxH``
    sets width and height.
    """

    out: Path = param(REQUIRED, "output directory (scene_NNNN/ are created in it)", flag="--out")
    scenes: int = param(1, "number of scenes (default 1)", flag="--scenes")
    seed: int = param(0, "seed; scene i depends only on (seed, i)", flag="--seed")
    width: int = 640
    height: int = 480
    rate_hz: float = param(10.0, "camera (and odometry) rate in Hz (10)", flag="--rate")
    duration_s: float = param(30.0, "seconds per scene (30)", flag="--duration")
    storage: str = param("mcap", "rosbag2 storage (mcap)", choices=STORAGES, flag="--storage")
    compressed: bool = param(
        False,
        "JPEG images on /camera/image_raw/compressed instead of raw rgb8 (bags ~20x smaller)",
        flag="--compressed",
    )
    jpeg_quality: int = param(90, "with --compressed (90)", flag="--jpeg-quality")
    outdoor: bool = param(False, "drone flights over a plaza instead of rooms", flag="--outdoor")
    preview: bool = param(False, "also write scene_NNNN/preview.png", flag="--preview")
    hfov_deg: float = param(70.0, "horizontal field of view in degrees (70)", flag="--hfov")
    questions_per_task: int = param(2, "per task and form, per scene (2)", flag="--questions-per-task")
    start_s: int = param(
        DEFAULT_START_S,
        f"stamp of each bag's first message, seconds since the epoch ({DEFAULT_START_S})",
        flag="--start-time",
    )
    jobs: int = param(1, "scenes rendered in parallel processes (1)", flag="--jobs")
    max_keyframes: int = param(
        KeyFrameConfig().max_keyframes,
        "key frames per question, as `embodied-r prepare --max-keyframes` will use: questions not "
        f"answerable from those key frames are dropped ({KeyFrameConfig().max_keyframes})",
        flag="--max-keyframes",
    )

    def __post_init__(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise ConfigError(message)

        check(1 <= self.scenes <= 100_000, f"--scenes must be in 1..100000, got {self.scenes}")
        check(0 <= self.seed < 2**63, f"--seed must be a non-negative integer, got {self.seed}")
        check(
            32 <= self.width <= 4096 and 32 <= self.height <= 4096,
            f"--size must be between 32x32 and 4096x4096 pixels, got {self.width}x{self.height}",
        )
        check(0 < self.rate_hz <= 120, f"--rate must be in (0, 120] Hz, got {self.rate_hz}")
        check(0 < self.duration_s <= 3600, f"--duration must be in (0, 3600] seconds, got {self.duration_s}")
        check(
            self.n_frames >= 2,
            f"--duration {self.duration_s} s at --rate {self.rate_hz} Hz gives {self.n_frames} frame(s); "
            "a clip needs at least 2: raise --duration or --rate",
        )
        check(
            self.storage in STORAGES, f"--storage must be one of {', '.join(STORAGES)}, got {self.storage!r}"
        )
        check(1 <= self.jpeg_quality <= 100, f"--jpeg-quality must be in 1..100, got {self.jpeg_quality}")
        check(20 <= self.hfov_deg <= 150, f"--hfov must be in [20, 150] degrees, got {self.hfov_deg}")
        check(
            self.questions_per_task >= 1, f"--questions-per-task must be >= 1, got {self.questions_per_task}"
        )
        check(0 <= self.start_s < 2**32, f"--start-time must be in [0, 2^32) seconds, got {self.start_s}")
        check(self.jobs >= 1, f"--jobs must be >= 1, got {self.jobs}")
        lowest = KeyFrameConfig().min_keyframes
        check(self.max_keyframes >= lowest, f"--max-keyframes must be >= {lowest}, got {self.max_keyframes}")

    @property
    def keyframes(self) -> KeyFrameConfig:
        """The key-frame settings of `embodied-r prepare --max-keyframes` (questions are screened on them)."""
        return KeyFrameConfig(max_keyframes=self.max_keyframes)

    @property
    def environment(self) -> str:
        """ "indoor" or "outdoor"."""
        return "outdoor" if self.outdoor else "indoor"

    @property
    def n_frames(self) -> int:
        """Frames per scene: duration x rate, rounded."""
        return int(round(self.duration_s * self.rate_hz))

    @property
    def start_ns(self) -> int:
        """Stamp of each bag's first message (ns)."""
        return self.start_s * NS_PER_S

    def scene_dir(self, index: int) -> Path:
        """Where scene ``index`` is written."""
        return self.out / f"scene_{index:04d}"


@dataclass
class SceneResult:
    """What one scene produced."""

    index: int
    directory: Path
    frames: int
    questions: list[Question] = field(default_factory=list)
    seconds: float = 0.0
    bag_bytes: int = 0
    screened: ScreenCounts = field(default_factory=ScreenCounts)


def frame_times(config: SynthConfig) -> np.ndarray:
    """Frame times in seconds from the bag start: i / rate."""
    return np.arange(config.n_frames, dtype=np.float64) / config.rate_hz


def synthesize_scene(config: SynthConfig, index: int) -> SceneResult:
    """Generate, render and write scene ``index`` (see the module docstring for what is written)."""
    started = time.perf_counter()
    world_seq, path_seq, question_seq = np.random.SeedSequence([config.seed, index]).spawn(3)
    world = generate_world(np.random.default_rng(world_seq), outdoor=config.outdoor)
    times = frame_times(config)
    end_s = float(times[-1])
    trajectory = plan_trajectory(world, end_s, np.random.default_rng(path_seq))
    camera = CameraModel.from_fov(config.width, config.height, config.hfov_deg)
    renderer = Renderer(world, camera)
    directory = config.scene_dir(index)
    directory.mkdir(parents=True, exist_ok=False)
    recorder = VisibilityRecorder(len(world.objects), camera.width * camera.height)
    keep = set(np.linspace(0, len(times) - 1, PREVIEW_FRAMES).round().astype(int).tolist())
    strip: list[tuple[float, np.ndarray]] = []
    options = BagOptions(
        storage=config.storage, compressed=config.compressed, jpeg_quality=config.jpeg_quality
    )
    with SceneBagWriter(directory / BAG_DIR, camera, options) as bag:
        for i, t in enumerate(times):
            stamp_ns = config.start_ns + round(float(t) * NS_PER_S)
            pose = trajectory.pose(float(t))
            frame = renderer.render(pose)
            bag.write_frame(stamp_ns, frame.image)
            linear, angular = trajectory.twist(float(t))
            bag.write_odometry(stamp_ns, pose, linear, angular)
            recorder.add(float(t), frame.ids)
            if config.preview and i in keep:
                strip.append((float(t), frame.image))
        bag_bytes = bag.bytes
    name = directory.name
    scene = {
        "scene": name,
        "seed": config.seed,
        "index": index,
        "bag": BAG_DIR,
        "storage": config.storage,
        "image_topic": options.image_topic,
        "start_ns": config.start_ns,
        "rate_hz": config.rate_hz,
        "frames": len(times),
        "camera": {"width": camera.width, "height": camera.height, "k": [round(v, 6) for v in camera.k]},
        "world": world.to_dict(),
        "trajectory": trajectory.to_dict(),
    }
    (directory / "scene.json").write_text(json.dumps(scene, indent=1) + "\n", encoding="utf-8")
    # Questions are screened on the prompts prepare will build from the bag just written.
    screen = AnswerableScreen(directory / BAG_DIR, directory / "scene.json", config.keyframes)
    questions = generate_questions(
        world,
        trajectory,
        recorder.result(),
        np.random.default_rng(question_seq),
        bag=BAG_DIR,
        scene_id=f"{world.kind}-seed{config.seed}-{name}",
        start_ns=config.start_ns,
        config=QuestionConfig(
            per_task=config.questions_per_task, candidate_fps=config.keyframes.candidate_fps
        ),
        screen=screen,
    )
    write_questions(directory / "questions.jsonl", questions)
    if config.preview:
        from .preview import write_preview

        title = (
            f"{name}  seed {config.seed}  {world.kind}, {len(world.objects)} objects, {len(times)} frames "
            f"at {config.rate_hz:g} Hz, {len(questions)} questions"
        )
        write_preview(directory / "preview.png", world, trajectory, strip, end_s, title)
    seconds = time.perf_counter() - started
    logger.info(
        "%s: %d frames, %d questions (%d dropped: not answerable from their prompt), %.1f MB of messages "
        "in %.1f s",
        name,
        len(times),
        len(questions),
        screen.counts.dropped,
        bag_bytes / 1e6,
        seconds,
    )
    return SceneResult(index, directory, len(times), questions, seconds, bag_bytes, screen.counts)


def synthesize(config: SynthConfig) -> list[SceneResult]:
    """Write all scenes of ``config`` and the combined ``questions.jsonl``; returns the scenes in order."""
    taken = [config.scene_dir(i) for i in range(config.scenes) if config.scene_dir(i).exists()]
    if taken:
        raise ConfigError(
            f"{taken[0]} exists already ({len(taken)} scene director{'y' if len(taken) == 1 else 'ies'} "
            "in the way); remove them or choose another --out"
        )
    config.out.mkdir(parents=True, exist_ok=True)
    if config.jobs == 1:
        results = [synthesize_scene(config, i) for i in range(config.scenes)]
    else:
        with ProcessPoolExecutor(max_workers=config.jobs) as pool:
            results = list(pool.map(synthesize_scene, [config] * config.scenes, range(config.scenes)))
    combined = [replace(q, bag=f"{r.directory.name}/{q.bag}") for r in results for q in r.questions]
    write_questions(config.out / "questions.jsonl", combined)
    report = generation_report(config, results)
    (config.out / "generation.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    logger.info(
        "%d questions kept, %d dropped (not answerable from their prompt): %s",
        report["kept"],
        report["dropped"],
        ", ".join(f"{task} {c['kept']}/{c['kept'] + c['dropped']}" for task, c in report["tasks"].items()),
    )
    return results


def generation_report(config: SynthConfig, results: list[SceneResult]) -> dict:
    """What ``generation.json`` holds: the settings that shaped the questions and, per task, the questions
    kept and dropped (no_answer: the oracle found the prompt does not determine it; wrong: it answered
    wrongly). Deterministic: no times, no paths."""
    counts = ScreenCounts()
    for result in results:
        counts.merge(result.screened)
    tasks = counts.as_dict()
    return {
        "environment": config.environment,
        "seed": config.seed,
        "scenes": config.scenes,
        "questions_per_task": config.questions_per_task,
        "keyframes": {"candidate_fps": config.keyframes.candidate_fps, "max_keyframes": config.max_keyframes},
        "kept": sum(c["kept"] for c in tasks.values()),
        "dropped": counts.dropped,
        "tasks": tasks,
    }


def parse_size(text: str) -> tuple[int, int]:
    """``"640x480"`` -> (640, 480); ValueError naming the expected form otherwise."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"expected WIDTHxHEIGHT such as 640x480, got {text!r}") from None
    return width, height
