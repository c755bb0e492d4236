"""The training data set's record: its columns, and writing and reading a split.

``embodied-r prepare`` writes one record per question into ``DIR/{train,val,test}.{jsonl,parquet}``;
``embodied-r train`` and ``embodied-r eval`` read them back, and TRL passes the columns to the rewards
(:mod:`embodied_r_training.rl.rewards`). This module is the one place the columns are defined.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embodied_r_ros.config import ConfigError

from .splits import SPLITS

# Every column of a record, in the order prepare writes them, with its meaning.
COLUMNS: dict[str, str] = {
    "id": "the question's id (from questions.jsonl)",
    "prompt": "the reasoning LM's chat, [{role, content}], as the node builds it: key-frame descriptions, "
    "the question and its options",
    "solution": 'the ground truth: the correct option\'s letter ("B"), or the number in SI units as text',
    "task": "the question's task (appearance_order, route, ...)",
    "form": "mc or numeric",
    "question": "the question text without its options",
    "options": "the option texts in letter order (empty: a numeric question)",
    "unit": "a numeric answer's unit (m, m^2, count), else empty",
    "scene": "the scene: the bag's directory relative to the questions file (splits are by scene)",
    "bag": "the bag directory as prepare found it",
    "start_ns": "the question's window in camera time (image stamps, ns)",
    "end_ns": "the end of that window",
    "keyframe_stamps_ns": "the stamps of the key frames the descriptions are of",
    "vlm": "what described the key frames: the VLM's name, or ground-truth:<scene file> (a measuring "
    "instrument, no VLM)",
    "prompt_version": "embodied_r_ros.reasoning.prompts.PROMPT_VERSION of the prompt texts",
    "split": "train, val or test",
}
# Written only with `prepare --folds K`: the scene's fold, 0..K-1.
OPTIONAL_COLUMNS: dict[str, str] = {"fold": "the scene's fold (prepare --folds K), 0..K-1"}

# What each reader needs (read_split checks them, naming the file and the fix when one is missing).
PROMPT = ("prompt",)  # the reasoning LM's input
# The policy's input and the answers (warm start, SFT); each reward names the further columns it reads
# (rl.rewards.register_reward: the consistency reward's reference reads question and options).
TRAINING = (*PROMPT, "solution")
GRADING = ("id", "solution", "task", "question", "options")  # eval scores a system's answers
KEYFRAMES = ("scene", "bag", "keyframe_stamps_ns")  # eval's VLM-alone system reads the frames from the bag


def make_record(**values: Any) -> dict[str, Any]:
    """A record with exactly the columns of :data:`COLUMNS` (plus optional ones), in their order.

    Raises ValueError naming a missing or unknown column: a bug in the writer, not a user error.
    """
    missing = [c for c in COLUMNS if c not in values]
    unknown = [c for c in values if c not in COLUMNS and c not in OPTIONAL_COLUMNS]
    if missing or unknown:
        raise ValueError(f"data-set record: missing columns {missing}, unknown columns {unknown}")
    record = {c: values[c] for c in COLUMNS}
    record.update({c: values[c] for c in OPTIONAL_COLUMNS if c in values})
    return record


def write_split(root: Path, split: str, records: Sequence[dict[str, Any]]) -> None:
    """Write ``records`` as ``root/split.jsonl`` and ``root/split.parquet`` (no parquet when empty)."""
    from datasets import Dataset

    with (root / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    if records:
        Dataset.from_list(list(records)).to_parquet(str(root / f"{split}.parquet"))
    else:
        (root / f"{split}.parquet").unlink(missing_ok=True)


def read_split(root: Path, split: str, columns: Sequence[str], needed_by: str) -> Any:
    """One split written by :func:`write_split`, as a ``datasets.Dataset`` (parquet, else jsonl).

    A missing or empty split, or rows without ``columns``, raise :class:`ConfigError` naming the file and
    the fix; ``needed_by`` says what needs the columns (e.g. "training").
    """
    from datasets import Dataset

    parquet, jsonl = root / f"{split}.parquet", root / f"{split}.jsonl"
    if not parquet.is_file() and not jsonl.is_file():
        raise ConfigError(
            f"data set {root} has no split {split!r} ({parquet.name} or {jsonl.name}); build it with "
            f"`embodied-r prepare QUESTIONS --out {root}`, or choose another split ({', '.join(SPLITS)})"
        )
    source = parquet if parquet.is_file() else jsonl
    if source == jsonl and jsonl.stat().st_size == 0:
        raise ConfigError(
            f"{jsonl} holds no records (splits are by scene: a small data set can leave one empty); "
            "choose another split, or rebuild with more scenes or other --split fractions"
        )
    try:
        dataset = Dataset.from_parquet(str(source)) if source == parquet else Dataset.from_json(str(source))
    except (OSError, ValueError) as exc:  # datasets' and pyarrow's errors for a damaged file
        fix = "rebuild the data set with embodied-r prepare"
        raise ConfigError(f"cannot read {source}: {exc}; {fix}") from exc
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise ConfigError(
            f"{source} lacks column(s) {', '.join(missing)} that {needed_by} needs (it has "
            f"{', '.join(dataset.column_names)}); rebuild the data set with embodied-r prepare"
        )
    return dataset
