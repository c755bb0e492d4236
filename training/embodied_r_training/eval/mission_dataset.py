"""Training questions from long missions, put to the reasoner as the node puts them (issue 44, point 4).

The reasoner learns the synth tasks from 20-second scenes; a mission question ("how many red chairs did I
pass?", "where was the lamp when I last saw it?") reaches it differently: the memory's search retrieves
key frames from hours of stored frames, their descriptions carry the mission time and place, and a count's
prompt carries the sightings tally. This module writes such questions as a data set of ``embodied-r
prepare``'s columns (:mod:`..data.schema`), so the reasoner's SFT and GRPO can mix them in. It lives
with the evaluation because it puts each question exactly as the mission yardstick does:

    missions (synth.mission_writer) -> each mission's memory store (eval.mission_store, as the node
    writes it while replaying the bag) -> every labelled question's prompt over the key frames the search
    retrieves (eval.mission_answers.MissionPrompter, the node's settings) -> rows the mission oracle
    answers right from the prompt alone (tasks.mission.oracle; a prompt that does not determine the answer,
    or whose retrieved key frames miss part of the evidence, is left out and counted)

The descriptions come from the mission's ground-truth perception, a measuring instrument (the ``vlm``
column says so). Seeds must differ from the mission benchmark's (bench/mission_benchmark.py: 0, 1 and
their groups +100 i): :data:`FIRST_SEED` starts far above them.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_r_ros.memory.read_only import ReadOnlyMemory
from embodied_r_ros.memory.text_embedding import TextEmbedder
from embodied_r_ros.question_file import Question
from embodied_r_ros.reasoning.answers import mean_relative_accuracy
from embodied_r_ros.reasoning.prompts import PROMPT_VERSION

from ..data.schema import make_record, write_split
from ..rl.warm_start import TRACE_MIN_MRA
from ..synth.mission import MissionConfig
from ..synth.mission_writer import write_mission
from ..tasks.mission.oracle import mission_oracle
from ..tasks.task import Answer
from .mission_answers import (
    RETRIEVED,
    MissionAnswersConfig,
    MissionPrompter,
    mission_questions,
    record,
)
from .mission_store import build_store

logger = logging.getLogger(__name__)

FIRST_SEED = 10_000  # far from the benchmark's seeds (0, 1, 100, 101, ...)
GROUND_TRUTH = "ground-truth:mission.json"  # the vlm column: a measuring instrument, not a VLM


@dataclass(frozen=True)
class MissionDataConfig:
    """Which missions to write: ``count`` missions of each length in ``minutes``, seeds from
    ``first_seed`` on, ``questions_per_kind`` labelled questions per kind and mission."""

    minutes: tuple[float, ...] = (5.0, 20.0)
    count: int = 4
    first_seed: int = FIRST_SEED
    questions_per_kind: int = 12


@dataclass
class MissionDataReport:
    """What was written: rows per kind, and the questions left out and why."""

    rows: Counter = field(default_factory=Counter)
    left_out: Counter = field(default_factory=Counter)  # reason -> questions

    def to_dict(self) -> dict[str, Any]:
        return {"rows": dict(self.rows), "left_out": dict(self.left_out)}


def mission_seeds(config: MissionDataConfig) -> list[tuple[float, int]]:
    """(minutes, seed) of every mission, each seed used once."""
    pairs, seed = [], config.first_seed
    for minutes in config.minutes:
        for _ in range(config.count):
            pairs.append((minutes, seed))
            seed += 1
    return pairs


def is_right(answer: Answer, question: Question) -> bool:
    """Whether ``answer`` is ``question``'s: the letter, or a number with an MRA of at least
    :data:`~..rl.warm_start.TRACE_MIN_MRA` (the bar a trace passes to be taught)."""
    if question.options:
        return str(answer) == str(question.answer)
    return mean_relative_accuracy(float(answer), float(question.answer)) >= TRACE_MIN_MRA


def mission_rows(mission: Path, embedder: TextEmbedder, split: str, report: MissionDataReport) -> list[dict]:
    """The rows of one written mission (its store built unless kept): every labelled question's prompt over
    the retrieved key frames, with the solution, when the mission oracle answers it from that prompt."""
    store = build_store(mission, embedder)
    rows = []
    with ReadOnlyMemory(store) as memory:
        prompter = MissionPrompter(mission, memory, embedder, MissionAnswersConfig())
        for labelled in mission_questions(mission):
            question = labelled.question
            prompt = prompter.prompt(labelled, RETRIEVED)
            result = mission_oracle(prompt.user) if prompt.messages else None
            if result is None or result.answer is None:  # no key frame, or a prompt that does not decide it
                reason = prompt.error if result is None else result.abstained
                report.left_out[reason or "the oracle abstained"] += 1
                continue
            if not is_right(result.answer, question):  # the retrieved frames miss part of the evidence
                report.left_out["the retrieved key frames give another answer"] += 1
                continue
            row = record(question, prompt)
            rows.append(
                make_record(
                    **row, form=question.form, scene=mission.name, bag=str(mission / "bag"),
                    start_ns=question.start_ns, end_ns=question.end_ns,
                    keyframe_stamps_ns=list(prompt.keyframe_stamps), vlm=GROUND_TRUTH,
                    prompt_version=PROMPT_VERSION, split=split,
                )
            )  # fmt: skip
            report.rows[question.task] += 1
    return rows


def build_mission_dataset(
    out: Path,
    missions: Path,
    embedder: TextEmbedder,
    config: MissionDataConfig = MissionDataConfig(),
    split: str = "train",
) -> MissionDataReport:
    """Write the missions of ``config`` under ``missions`` (each kept once written) and their questions
    as ``out/<split>.{jsonl,parquet}``; returns what was written and left out."""
    out.mkdir(parents=True, exist_ok=True)
    report, rows = MissionDataReport(), []
    for minutes, seed in mission_seeds(config):
        directory = missions / f"m{minutes:g}-seed{seed}"
        if not (directory / "mission.json").is_file():
            mission = MissionConfig(minutes=minutes, seed=seed, questions_per_kind=config.questions_per_kind)
            write_mission(mission, directory)
        rows += mission_rows(directory, embedder, split, report)
        logger.info("mission %s: %d rows so far", directory.name, len(rows))
    write_split(out, split, rows)
    return report
