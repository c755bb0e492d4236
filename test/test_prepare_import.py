"""`embodied-r import-video`: benchmark-like folders (cv2.VideoWriter, pandas) -> bags -> data set."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
from embodied_r_training.data.bag_reader import BagReader

from embodied_r_ros.cli.main import main
from embodied_r_ros.question_file import read_questions


def _write_video(path: Path, frames: int = 24, fps: float = 8.0, seed: int = 0) -> None:
    """A moving-texture clip, so key-frame matching has something to match."""
    path.parent.mkdir(parents=True, exist_ok=True)
    texture = np.random.default_rng(seed).integers(0, 255, (120, 400, 3), dtype=np.uint8)
    texture = cv2.GaussianBlur(texture, (5, 5), 0)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (160, 120))
    assert writer.isOpened()
    for i in range(frames):
        writer.write(np.ascontiguousarray(texture[:, i * 8 : i * 8 + 160]))
    writer.release()


def test_vsibench_layout_imports_to_bags_and_prepares(tmp_path: Path, tiny_models_dir: Path) -> None:
    root = tmp_path / "vsi"
    _write_video(root / "scannet" / "scene0001.mp4", seed=1)
    _write_video(root / "arkitscenes" / "scene0002.mp4", seed=2)
    (root / "scannet" / "broken.mp4").write_bytes(b"not a video at all")
    table = pd.DataFrame(
        {
            "id": [0, 1, 2, 3],
            "dataset": ["scannet", "scannet", "arkitscenes", "scannet"],
            "scene_name": ["scene0001", "scene0001", "scene0002", "broken"],
            "question_type": ["object_counting", "object_rel_direction", "room_size", "object_counting"],
            "question": ["How many chairs?", "Where is the lamp?", "How big is the room?", "How many?"],
            "options": [None, ["A. left", "B. right", "C. back"], None, None],
            "ground_truth": ["3", "B", "12.5", "1"],
        }
    )
    table.to_parquet(root / "test-00000-of-00001.parquet")
    table.iloc[1:3].to_parquet(root / "test_debiased.parquet")  # a subset of the same rows (same ids)
    out = tmp_path / "bags"
    assert main(["import-video", str(root), "--layout", "vsibench", "--out", str(out), "--no-progress"]) == 1
    questions = read_questions(out / "questions.jsonl")
    assert [q.task for q in questions] == ["object_counting", "object_rel_direction", "room_size"]
    direction = questions[1]
    assert (
        direction.options == ("left", "right", "back") and direction.answer == "B" and direction.form == "mc"
    )
    assert questions[2].answer == 12.5 and questions[2].form == "numeric"
    with BagReader(out / questions[0].bag) as reader:
        frames = reader.window(questions[0].start_ns, questions[0].end_ns)
    assert frames[0].image.shape == (120, 160, 3) and frames[0].pose is None
    # The imported bags train through the same path as robot bags.
    ds = tmp_path / "ds"
    args = ["prepare", str(out / "questions.jsonl"), "--out", str(ds), "--cache", str(tmp_path / "cache")]
    args += [
        "--vlm",
        str(tiny_models_dir / "vlm"),
        "--device",
        "cpu",
        "--max-new-tokens",
        "2",
        "--no-progress",
    ]
    assert main(args) == 0
    summary = json.loads((ds / "summary.json").read_text())
    assert summary["records"] == 3 and set(summary["tasks"]) == {q.task for q in questions}


def test_urbanvideo_layout_parses_choices_from_the_question(tmp_path: Path) -> None:
    """MCQ.parquet as EmbodiedCity/UrbanVideo-Bench has it: video_id is the file name in videos/."""
    root = tmp_path / "urban"
    _write_video(root / "videos" / "flight_7.mp4", seed=3)
    _write_video(root / "videos" / "flight_8.mp4", seed=4)
    pd.DataFrame(
        {
            "Question_id": [0, 1],
            "video_id": ["flight_7.mp4", "flight_8"],
            "question_category": ["Landmark Position", "Counterfactual"],
            "question": [
                "Where is the tower?\nA. ahead\nB. to the left\nC. behind",
                "Can I still reach the roof if I turn left? A.  Yes, by the stairs B. No C. Only by flying",
            ],
            "answer": ["B", "C."],
        }
    ).to_parquet(root / "MCQ.parquet")
    out = tmp_path / "bags"
    assert (
        main(["import-video", str(root), "--layout", "urbanvideo", "--out", str(out), "--no-progress"]) == 0
    )
    first, second = read_questions(out / "questions.jsonl")
    assert first.question == "Where is the tower?"
    assert first.options == ("ahead", "to the left", "behind") and first.answer == "B"
    assert first.bag == "flight_7/bag" and first.end_ns > first.start_ns
    assert second.question == "Can I still reach the roof if I turn left?"
    assert second.options == ("Yes, by the stairs", "No", "Only by flying") and second.answer == "C"
    assert second.bag == "flight_8/bag" and second.task == "Counterfactual"


def test_choices_past_h_import_like_the_first_eight(tmp_path: Path) -> None:
    """Every option letter the reasoner reads (26) is read from a benchmark too, not only A-H."""
    from embodied_r_training.data.import_video import read_urbanvideo

    from embodied_r_ros.reasoning.options import OPTION_LETTERS

    texts = [f"place {i}" for i in range(10)]
    inline = "Where did I land? " + " ".join(f"{OPTION_LETTERS[i]}. {t}" for i, t in enumerate(texts))
    lines = "Where did I start?\n" + "\n".join(f"{OPTION_LETTERS[i]}) {t}" for i, t in enumerate(texts))
    root = tmp_path / "urban"
    root.mkdir()
    pd.DataFrame({
        "Question_id": [0, 1], "video_id": ["a.mp4", "b.mp4"], "question_category": ["Landmark", "Landmark"],
        "question": [inline, lines], "answer": ["J", "I."],
    }).to_parquet(root / "MCQ.parquet")  # fmt: skip
    first, second = read_urbanvideo(root)
    assert first.question == "Where did I land?" and first.options == tuple(texts) and first.answer == "J"
    assert second.question == "Where did I start?" and second.options == tuple(texts) and second.answer == "I"
