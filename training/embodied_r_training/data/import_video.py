"""``embodied-r import-video``: benchmark videos + question tables -> bags + questions.jsonl.

The paper's data (VSI-Bench, UrbanVideo-Bench) are videos with question tables. Importing them as rosbags
plus a ``questions.jsonl`` in the format ``embodied-r synth`` writes lets them train through the same path
as recorded robot data: ``embodied-r prepare OUT/questions.jsonl``. Each video becomes ``OUT/<scene>/bag``
(images at ``--fps``, scaled to ``--max-side``, no odometry); each question asks about the whole video.

Layouts read (``--layout``):

``vsibench``
    The Hugging Face ``nyu-visionx/VSI-Bench`` layout: ``*.parquet`` tables in DIR with ``id``,
    ``dataset``, ``scene_name``, ``question_type``, ``question``, ``options`` (list of "A. text", null for
    numeric questions) and ``ground_truth`` (``answer`` and ``question_category`` are accepted too); the
    video is ``DIR/<dataset>/<scene_name>.mp4`` (the unpacked ``arkitscenes.zip``, ``scannet.zip``,
    ``scannetpp.zip``) or any ``DIR/**/<scene_name>.mp4``. A row ``id`` seen in an earlier table is skipped
    (the repository also holds subsets of the same rows, e.g. ``test_debiased.parquet``).
``urbanvideo``
    The Hugging Face ``EmbodiedCity/UrbanVideo-Bench`` layout: ``DIR/MCQ.parquet`` (or any ``*.parquet`` /
    ``.csv``) with ``Question_id``, ``video_id`` (the file name in ``DIR/videos/``, with or without
    ``.mp4``), ``question_category``, ``question`` (the choices inside the text, "A. text" on their own
    lines or inline) and ``answer`` (a letter).

An unreadable video is reported by name; its questions are skipped, the rest is imported, and the command
ends with status 1.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from tqdm import tqdm

from embodied_r_ros.config import REQUIRED, Alias, ConfigError, param
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.question_file import MC, NUMERIC, Question, write_questions
from embodied_r_ros.reasoning.options import LETTER, OPTION_LETTERS

from ..synth.bag_writer import BAG_DIR, DEFAULT_START_S, BagOptions, SceneBagWriter
from ..synth.render import CameraModel

logger = logging.getLogger(__name__)

LAYOUTS = ("vsibench", "urbanvideo")
_OPTION = re.compile(r"^\s*(" + LETTER + r")[.):]\s*(.+?)\s*$")


@dataclass(frozen=True)
class ImportConfig:
    """Everything ``embodied-r import-video`` needs; the fields' flags are declared with them."""

    directory: Path  # the benchmark folder
    out: Path = param(REQUIRED, "where bags and questions.jsonl go", flag="--out")
    layout: str = param(REQUIRED, "the benchmark's layout", choices=LAYOUTS, flag="--layout")
    fps: float = param(2.0, "frames per second kept from each video", flag="--fps")
    max_side: int = param(640, "longest image side in pixels", flag="--max-side")
    progress: bool = param(True, "progress bars", flag=Alias("--no-progress", "no progress bars"))

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError(f"--layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")


@dataclass(frozen=True)
class VideoQuestion:
    """One row of a benchmark table, before its video is imported."""

    video: Path
    scene: str
    task: str
    question: str
    options: tuple[str, ...]
    answer: str


def _strip_letters(options: Any) -> tuple[str, ...]:
    texts = [str(o) for o in (list(options) if options is not None else [])]
    return tuple((m.group(2) if (m := _OPTION.match(t)) else t.strip()) for t in texts)


_INLINE_OPTION = re.compile(r"(?:^|\s)(" + LETTER + r")[.)]\s+")


def _split_choices(text: str) -> tuple[str, list[str]]:
    """(question, choices) of a question whose text holds "A. text" choices, one per line or inline."""
    lines = text.splitlines()
    options = [m.group(2) for line in lines if (m := _OPTION.match(line))]
    if options:
        question = " ".join(line.strip() for line in lines if not _OPTION.match(line) and line.strip())
        return question, options
    # Inline: "Where is it? A. left B. right C. behind" -- letters must run A, B, C, ... to count.
    marks = list(_INLINE_OPTION.finditer(text))
    expected = [m for i, m in enumerate(marks) if m.group(1) == OPTION_LETTERS[i]] if marks else []
    if len(expected) >= 2 and len(expected) == len(marks):
        choices = [text[m.end() : (marks[i + 1].start() if i + 1 < len(marks) else len(text))].strip()
                   for i, m in enumerate(marks)]  # fmt: skip
        return " ".join(text[: marks[0].start()].split()), choices
    return " ".join(text.split()), []


def _answer_letter(answer: str) -> str:
    """The letter of an answer given as "B", "B." or "B. text"."""
    answer = answer.strip()
    match = re.match(r"^(" + LETTER + r")(?:[.):]|\s|$)", answer)
    return match.group(1) if match else answer


def read_vsibench(directory: Path) -> list[VideoQuestion]:
    """The questions of a VSI-Bench-like folder (see the module docstring)."""
    import pandas as pd

    rows = []
    seen: set[str] = set()
    for table in sorted(directory.glob("*.parquet")):
        for record in pd.read_parquet(table).to_dict("records"):
            if record.get("id") is not None:
                if str(record["id"]) in seen:
                    continue
                seen.add(str(record["id"]))
            scene = str(record["scene_name"])
            video = directory / str(record.get("dataset", "")) / f"{scene}.mp4"
            if not video.exists():
                video = next(iter(sorted(directory.rglob(f"{scene}.mp4"))), video)
            answer = record.get("ground_truth", record.get("answer"))
            rows.append(
                VideoQuestion(
                    video,
                    scene,
                    str(record.get("question_type", record.get("question_category"))),
                    str(record["question"]),
                    _strip_letters(record.get("options")),
                    str(answer),
                )  # fmt: skip
            )
    return rows


def read_urbanvideo(directory: Path) -> list[VideoQuestion]:
    """The questions of an UrbanVideo-Bench-like folder (see the module docstring)."""
    import pandas as pd

    tables = sorted(directory.glob("*.parquet")) + sorted(directory.glob("*.csv"))
    rows = []
    for table in tables:
        frame = pd.read_parquet(table) if table.suffix == ".parquet" else pd.read_csv(table)
        for record in frame.to_dict("records"):
            video_id = str(record["video_id"])
            question, options = _split_choices(str(record["question"]))
            video = directory / "videos" / (video_id if video_id.endswith(".mp4") else f"{video_id}.mp4")
            rows.append(
                VideoQuestion(
                    video,
                    video.stem,
                    str(record["question_category"]),
                    question,
                    tuple(options),
                    _answer_letter(str(record["answer"])),
                )  # fmt: skip
            )
    return rows


def video_to_bag(video: Path, bag: Path, fps: float, max_side: int, start_ns: int) -> tuple[int, int]:
    """Write ``video`` as a bag of JPEG images at ``fps``; returns (first, last) frame stamps in ns.

    Raises ValueError naming the video when it cannot be read or holds no frames.
    """
    capture = cv2.VideoCapture(str(video))
    if not capture.isOpened():
        raise ValueError(f"video {video} cannot be opened (missing file or unknown codec)")
    source_fps = capture.get(cv2.CAP_PROP_FPS) or fps
    bag.parent.mkdir(parents=True, exist_ok=True)
    step = max(1, round(source_fps / fps))
    writer: SceneBagWriter | None = None
    stamps: list[int] = []
    try:
        index = 0
        while True:
            ok, bgr = capture.read()
            if not ok:
                break
            if index % step == 0:
                scale = min(1.0, max_side / max(bgr.shape[:2]))
                if scale < 1.0:
                    bgr = cv2.resize(bgr, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
                rgb = np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
                if writer is None:
                    camera = CameraModel.from_fov(rgb.shape[1], rgb.shape[0])
                    writer = SceneBagWriter(bag, camera, BagOptions(compressed=True))
                stamp = start_ns + round(index / source_fps * NS_PER_S)
                writer.write_frame(stamp, rgb)
                stamps.append(stamp)
            index += 1
    finally:
        capture.release()
        if writer is not None:
            writer.close()
    if not stamps:
        raise ValueError(f"video {video} holds no readable frames")
    return stamps[0], stamps[-1]


def _question(row: VideoQuestion, number: int, first_ns: int, last_ns: int) -> Question:
    form = MC if row.options else NUMERIC
    answer: str | float = row.answer
    if form == NUMERIC:
        try:
            answer = float(row.answer)
        except ValueError:
            pass
    return Question(
        id=f"{row.scene}-{number:03d}",
        bag=f"{row.scene}/{BAG_DIR}",
        start_s=0.0,
        end_s=round((last_ns - first_ns) / NS_PER_S, 3),
        start_ns=first_ns,
        end_ns=last_ns,
        task=row.task,
        form=form,
        question=row.question,
        options=row.options,
        answer=answer,
        unit="",
        answer_text=row.answer,
    )


def import_videos(config: ImportConfig) -> tuple[list[Question], list[tuple[str, str]]]:
    """Import the benchmark folder of ``config`` into ``config.out``; returns (questions written, failures as
    (what, reason))."""
    directory, out, fps, max_side = config.directory, config.out, config.fps, config.max_side
    rows = read_vsibench(directory) if config.layout == "vsibench" else read_urbanvideo(directory)
    by_video: dict[Path, list[VideoQuestion]] = {}
    for row in rows:
        by_video.setdefault(row.video, []).append(row)
    out.mkdir(parents=True, exist_ok=True)
    questions: list[Question] = []
    failures: list[tuple[str, str]] = []
    start_ns = DEFAULT_START_S * NS_PER_S
    for video, video_rows in tqdm(by_video.items(), desc="videos", unit="video", disable=not config.progress):
        bag = out / video_rows[0].scene / BAG_DIR
        try:
            first, last = video_to_bag(video, bag, fps, max_side, start_ns)
        except (ValueError, OSError) as exc:
            failures.append((str(video), str(exc)))
            continue
        questions.extend(_question(row, n, first, last) for n, row in enumerate(video_rows))
    write_questions(out / "questions.jsonl", questions)
    return questions, failures
