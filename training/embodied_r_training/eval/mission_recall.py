"""Retrieval recall of a mission's durable memory against the mission's labels (issue 30).

A long mission (:mod:`embodied_r_training.synth.mission_writer`) labels each question with its evidence:
the intervals of bag stamps ``[start_ns, end_ns]`` (inclusive) in which what the question names was in
view (``mission.json``, ``questions[id]["evidence"]``). A memory that held the mission and described its
key frames (:mod:`embodied_r_ros.memory.describer`) is searched the way a ``search_memory`` question
searches it: a count, a first or a last sighting from the memory's sightings index
(:mod:`embodied_r_ros.memory.sightings`), any other question by similarity
(:func:`embodied_r_ros.memory.search.search_hits`: the question and its options embedded, the closest
question-agnostic descriptions in the question's window, spread over time). For each ``k``:

* **recall@k**: the share of questions with at least one of their top-``k`` hits inside an evidence
  interval (widened by ``padding_s`` on both sides; 0 by default: the labels as they are);
* **coverage@k**: the share of a question's evidence intervals that hold at least one top-``k`` hit,
  averaged over the questions (a count across rooms needs every room, not one).

Both per question kind and over all questions. Pure functions over the store and the mission's files:
the search is run once per question for the largest ``k``; smaller ``k`` read its first hits (the order
does not depend on ``k``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.memory.reader import MemoryReader
from embodied_r_ros.memory.search import SearchSettings, query_text, search_hits
from embodied_r_ros.memory.sightings import SightingIndex, catch_up, sighting_answer
from embodied_r_ros.memory.text_embedding import TextEmbedder
from embodied_r_ros.node_config import PoseConfig
from embodied_r_ros.question_file import read_questions

DEFAULT_KS = (4, 8, 16)
ALL_KINDS = "all"  # the row over every question

Interval = tuple[int, int]


class MissionRecallError(ValueError):
    """The mission's files cannot be read as labels; the message names the file and the fix."""


@dataclass(frozen=True)
class LabelledQuestion:
    """A mission question with its evidence: ``text`` is what is embedded (question and options)."""

    id: str
    kind: str
    text: str
    start_ns: int
    end_ns: int
    evidence: tuple[Interval, ...]


@dataclass(frozen=True)
class QuestionRecall:
    """One question's retrieved stamps (best first) and how many of its evidence intervals the top ``k``
    hit, per ``k``."""

    id: str
    kind: str
    hits: tuple[int, ...]
    evidence_intervals: int
    intervals_hit: dict[int, int]

    def found(self, k: int) -> bool:
        """Whether a top-``k`` hit lies inside the evidence."""
        return self.intervals_hit[k] > 0

    def coverage(self, k: int) -> float:
        """The share of the evidence intervals a top-``k`` hit lies in."""
        return self.intervals_hit[k] / self.evidence_intervals


@dataclass(frozen=True)
class KindRecall:
    """recall@k and coverage@k of the questions of one kind (or :data:`ALL_KINDS`)."""

    kind: str
    questions: int
    recall: dict[int, float]
    coverage: dict[int, float]

    def to_dict(self) -> dict:
        """Plain data for a report (keys ``recall@k``, ``coverage@k``, rounded to 3 places)."""
        return {
            "kind": self.kind,
            "questions": self.questions,
            **{f"recall@{k}": round(v, 3) for k, v in self.recall.items()},
            **{f"coverage@{k}": round(v, 3) for k, v in self.coverage.items()},
        }


def labelled_questions(mission_dir: str | Path) -> list[LabelledQuestion]:
    """The questions of ``mission_dir`` (questions.jsonl) that have evidence intervals in mission.json."""
    mission_dir = Path(mission_dir)
    mission_json, questions_file = mission_dir / "mission.json", mission_dir / "questions.jsonl"
    for path in (mission_json, questions_file):
        if not path.is_file():
            raise MissionRecallError(
                f"{path} is missing: {mission_dir} is not a mission; write one with bench/make_mission.py"
            )
    try:
        labels = json.loads(mission_json.read_text(encoding="utf-8"))["questions"]
    except (ValueError, KeyError) as exc:
        raise MissionRecallError(
            f"{mission_json} has no question labels ({exc}); write the mission again with "
            "bench/make_mission.py"
        ) from exc
    labelled = []
    for question in read_questions(questions_file):
        evidence = tuple((int(a), int(b)) for a, b in labels.get(question.id, {}).get("evidence", []))
        if evidence:
            text = query_text(question.question, question.options)
            window = (question.start_ns, question.end_ns)
            labelled.append(LabelledQuestion(question.id, question.task, text, *window, evidence))
    return labelled


def intervals_hit(stamps: Sequence[int], evidence: Sequence[Interval], padding_ns: int = 0) -> int:
    """How many of the ``evidence`` intervals (inclusive, widened by ``padding_ns``) hold a stamp."""
    return sum(any(a - padding_ns <= s <= b + padding_ns for s in stamps) for a, b in evidence)


def question_recall(
    question: LabelledQuestion, hits: Sequence[int], ks: Sequence[int], padding_ns: int = 0
) -> QuestionRecall:
    """How the retrieved stamps ``hits`` (best first) meet the question's evidence, for each ``k``."""
    return QuestionRecall(
        question.id,
        question.kind,
        tuple(hits),
        len(question.evidence),
        {k: intervals_hit(hits[:k], question.evidence, padding_ns) for k in ks},
    )


def retrieve(
    store: MemoryReader,
    embedder: TextEmbedder,
    question: LabelledQuestion,
    k: int,
    settings: SearchSettings | None = None,
) -> list[int]:
    """The stamps of the ``k`` key frames a ``search_memory`` question retrieves, in their order (its
    window, or the whole memory when it names none): :func:`~embodied_r_ros.memory.search.search_hits` with
    the node's default ``settings`` but ``k``."""
    start_ns, end_ns = question.start_ns, question.end_ns or 2**63 - 1
    settings = replace(settings or SearchSettings(), k=k)
    return [h.stamp_ns for h in search_hits(store, embedder, question.text, start_ns, end_ns, settings)]


def recall_table(results: Sequence[QuestionRecall], ks: Sequence[int]) -> list[KindRecall]:
    """recall@k and coverage@k per kind (sorted by name), then over all questions."""
    by_kind: dict[str, list[QuestionRecall]] = defaultdict(list)
    for result in results:
        by_kind[result.kind].append(result)
    groups = [(kind, by_kind[kind]) for kind in sorted(by_kind)] + [(ALL_KINDS, list(results))]
    table = []
    for kind, group in groups:
        n = max(1, len(group))
        table.append(
            KindRecall(
                kind,
                len(group),
                {k: sum(r.found(k) for r in group) / n for k in ks},
                {k: sum(r.coverage(k) for r in group) / n for k in ks},
            )
        )
    return table


def sighted(index: SightingIndex, question: LabelledQuestion, k: int) -> list[int] | None:
    """The stamps a ``search_memory`` question gets from the memory's sightings index (a count, a first or
    a last sighting of things the index holds; in time order), as the node's search takes them before the
    similarity search; None when the sightings do not serve it."""
    end_ns = question.end_ns or 2**63 - 1
    answer = sighting_answer(index, question.text, (), question.start_ns, end_ns, k)
    return [h.stamp_ns for h in answer.hits] if answer.hits else None


def mission_recall(
    store: MemoryReader,
    embedder: TextEmbedder,
    mission_dir: str | Path,
    ks: Sequence[int] = DEFAULT_KS,
    padding_s: float = 0.0,
    sightings: bool = True,
    max_gap_s: float = PoseConfig().max_gap_s,
) -> tuple[list[KindRecall], list[QuestionRecall]]:
    """Search ``store`` for every labelled question of ``mission_dir`` as the node's ``search_memory`` does
    (with ``sightings``: the sightings index first, for each ``k``; else, or when it does not serve the
    question, the similarity search); the recall table and the per-question results (see the module
    docstring). ``max_gap_s``: the farthest a stored pose may lie from a key frame to place its sightings."""
    ks = sorted(set(ks))
    if not ks or ks[0] < 1:
        raise ValueError(f"k must be >= 1, got {ks}")
    padding_ns = round(padding_s * NS_PER_S)
    index = catch_up(None, store, max_gap_s) if sightings else None
    results = []
    for question in labelled_questions(mission_dir):
        by_k = {k: sighted(index, question, k) for k in ks} if index is not None else {}
        if by_k and by_k[ks[-1]] is not None:
            hits = by_k[ks[-1]]
            found = {k: intervals_hit(by_k[k] or [], question.evidence, padding_ns) for k in ks}
            evidence = len(question.evidence)
            results.append(QuestionRecall(question.id, question.kind, tuple(hits), evidence, found))
        else:
            hits = retrieve(store, embedder, question, ks[-1])
            results.append(question_recall(question, hits, ks, padding_ns))
    return recall_table(results, ks), results
