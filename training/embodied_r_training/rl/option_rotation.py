"""Rotated answer options within a GRPO group (``data.rotate_options: true``; off by default).

Each completion of a group sees the same multiple-choice question with its options in another order, and
the orders are rotations of one another, so the correct option sits under every letter equally often in
the group (twice each for 8 completions and 4 options). Numeric questions are left as they are.

Why: a small LM's multiple-choice answer is mostly its letter prior (SmolLM2-135M answers "B" whatever the
question; BENCHMARKS.md, "Does SmolLM2 read the question at all?"). With one option order per group, a
letter that happens to be right for this question is reinforced for every question; the prior walks until
one letter wins and the groups stop carrying a signal (GRPO runs 2-5 there). With rotated orders a
completion that always says "B" is right in 1 of n rotations and wrong in the others: its advantages
cancel, and what is left to reinforce is choosing the option whose *text* is right. LLMs' selection bias
on multiple choice and permuting the options as its remedy: Zheng et al., "Large Language Models Are Not
Robust Multiple Choice Selectors", ICLR 2024. The paper trains with the data set's fixed order.

The rotation is stateless: TRL's ``RepeatSampler`` puts a group's copies of one row into one fetch, and
the k-th copy of a row in a fetch gets rotation k of a base order drawn from (seed, row id), so a resumed
run sees the same prompts. Evaluation keeps the data set's order.
"""

from __future__ import annotations

import copy
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from embodied_r_ros.config import ConfigError
from embodied_r_ros.reasoning.options import OPTION_LETTERS
from embodied_r_ros.reasoning.prompts import letter_options, question_block


def _option_texts(options: Sequence[str]) -> list[str]:
    """The option texts without their letters (``"B. lamp"`` -> ``"lamp"``)."""
    return [line.split(". ", 1)[1] for line in letter_options(options)]


def rotated_order(row_id: str, n: int, k: int, seed: int) -> list[int]:
    """The original option indices in the order the ``k``-th copy of row ``row_id`` shows them.

    A base order drawn from (``seed``, ``row_id``), rotated by ``k``: copies 0..n-1 put each option under
    each letter exactly once.
    """
    rng = np.random.default_rng([seed, zlib.crc32(row_id.encode("utf-8"))])
    base = [int(i) for i in rng.permutation(n)]
    shift = k % n
    return base[shift:] + base[:shift]


def rotate_record(record: dict[str, Any], order: Sequence[int]) -> dict[str, Any]:
    """``record`` (a data-set row, see ``data/schema.py``) with its options shown in ``order``.

    Rewrites the options, the solution letter and the question block at the end of the last user message
    of the prompt. Raises :class:`ConfigError` naming the row when its prompt does not hold the block that
    ``question``/``options`` make (a data set from another prompt version) or its solution is no option.
    """
    options = list(record.get("options") or ())
    if not options:
        return record
    texts = _option_texts(options)
    solution = str(record["solution"]).strip().upper()
    if len(solution) != 1 or solution not in OPTION_LETTERS[: len(texts)]:
        raise ConfigError(
            f"data-set row {record.get('id')!r}: solution {record['solution']!r} is not one of the letters "
            f"of its {len(texts)} options; rebuild the data set with embodied-r prepare"
        )
    shown = [texts[i] for i in order]
    old_block = question_block(record["question"], options)
    new_block = question_block(record["question"], shown)
    prompt = copy.deepcopy(record["prompt"])
    users = [m for m in prompt if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    body = content.rstrip() if isinstance(content, str) else ""
    if not body.endswith(old_block):
        raise ConfigError(
            f"data-set row {record.get('id')!r}: its prompt does not end with the question block its "
            "question and options make (a data set written by another prompt version?); rebuild it with "
            "embodied-r prepare, or set data.rotate_options: false"
        )
    cut = body.rfind(old_block)
    users[-1]["content"] = content[:cut] + new_block + content[cut + len(old_block) :]
    rotated = dict(record)
    rotated.update(
        prompt=prompt,
        options=shown,
        solution=OPTION_LETTERS[list(order).index(OPTION_LETTERS.index(solution))],
    )
    return rotated


def rotate_batch(batch: dict[str, list[Any]], seed: int) -> dict[str, list[Any]]:
    """A fetched batch (columns -> lists) with each multiple-choice row's k-th copy rotated k places."""
    columns = list(batch)
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*batch.values(), strict=True)]
    seen: Counter[str] = Counter()
    out = []
    for row in rows:
        row_id = str(row.get("id"))
        n = len(row.get("options") or ())
        k = seen[row_id]
        seen[row_id] += 1
        out.append(rotate_record(row, rotated_order(row_id, n, k, seed)) if n > 1 else row)
    return {c: [row[c] for row in out] for c in columns}


def with_rotated_options(dataset: Any, seed: int) -> Any:
    """``dataset`` (a ``datasets.Dataset``) whose fetches rotate the options (see the module docstring).

    Every multiple-choice row is rotated once here, so a bad row fails before training starts.
    """
    for row in dataset:
        if row.get("options"):
            rotate_record(row, list(range(len(row["options"]))))
    return dataset.with_transform(lambda batch: rotate_batch(batch, seed))
