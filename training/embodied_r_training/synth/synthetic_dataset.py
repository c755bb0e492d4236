"""A small training data set from the synthetic world, built the way users build one.

What ``embodied-r synth`` and then ``embodied-r prepare`` do, through the same library functions: render
scenes with ground-truth questions (:func:`.generate.synthesize`), then turn them into the data set (key
frames, VLM descriptions, the node's LM prompts, scene splits; :func:`..data.prepare.run_prepare`). Tests,
the learning experiment and the trainer benchmark all start from this; nothing here is special to them.
"""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def build_synthetic_dataset(
    out: Path, vlm: Path, *, scenes: int = 3, size: str = "160x120", duration_s: float = 12.0
) -> Path:
    """Scenes in ``out/synth``, the data set in ``out/data`` (returned); an existing data set is reused.

    ``vlm`` is the describing VLM's directory (the tiny one in tests). Raises RuntimeError when a question
    fails to become a record, ConfigError for unusable settings (scene directories in the way).
    """
    from embodied_r_ros.config import model_config

    from ..data.prepare import PrepareConfig, run_prepare, summary_table, write_dataset
    from .generate import SynthConfig, parse_size, synthesize

    data = out / "data"
    if (data / "train.parquet").is_file():
        logger.info("reusing the data set in %s", data)
        return data
    width, height = parse_size(size)
    synth = SynthConfig(out=out / "synth", scenes=scenes, width=width, height=height, duration_s=duration_s)
    synthesize(synth)
    prepare = PrepareConfig(
        questions=[synth.out / "questions.jsonl"],
        out=data,
        cache=out / "cache",
        vlm=model_config(str(vlm), device="cpu", max_new_tokens=8),
        batch_size=32,
        progress=False,
    )
    result = run_prepare(prepare)
    logger.info("data set in %s:\n%s", data, summary_table(write_dataset(data, result)))
    if result.failures:
        first = result.failures[0]
        raise RuntimeError(
            f"preparing {data}: {len(result.failures)} question(s) failed, first {first.what}: {first.reason}"
        )
    return data
