"""A small training data set from the synthetic world, built the way users build one.

``embodied-r synth`` renders scenes with ground-truth questions, then ``embodied-r prepare`` turns them into
the data set (key frames, VLM descriptions, the node's LM prompts, scene splits). Tests, the learning
experiment and the trainer benchmark all start from this; nothing here is special to them.
"""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def build_synthetic_dataset(
    out: Path, vlm: Path, *, scenes: int = 3, size: str = "160x120", duration_s: float = 12.0
) -> Path:
    """Scenes in ``out/synth``, the data set in ``out/data`` (returned); an existing data set is reused.

    ``vlm`` is the describing VLM's directory (the tiny one in tests). Raises RuntimeError when a step fails.
    """
    from embodied_r_ros.cli.main import main as cli

    data = out / "data"
    if (data / "train.parquet").is_file():
        logger.info("reusing the data set in %s", data)
        return data
    synth = ["synth", "--out", str(out / "synth"), "--scenes", str(scenes), "--size", size]
    if cli([*synth, "--duration", str(duration_s)]) != 0:
        raise RuntimeError(f"embodied-r synth into {out / 'synth'} failed (see the log above)")
    prepare = [
        "prepare", str(out / "synth" / "questions.jsonl"), "--out", str(data), "--cache", str(out / "cache"),
        "--vlm", str(vlm), "--device", "cpu", "--max-new-tokens", "8", "--batch-size", "32", "--no-progress",
    ]  # fmt: skip
    if cli(prepare) != 0:
        raise RuntimeError(f"embodied-r prepare into {data} failed (see the log above)")
    return data
