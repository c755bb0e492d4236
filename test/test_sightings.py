"""The memory's sightings (issue 44): objects read from the question-agnostic descriptions, placed with
the key frame's pose, merged into identities by name and place; a count answered from one key frame per
identity, a last (first) sighting from each identity's last (first) one. Pure functions, and a real
MemoryStore under RobotHistory.search (no ROS)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_r_ros.config import BufferConfig, KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.history import RobotHistory
from embodied_r_ros.memory.records import SearchHit
from embodied_r_ros.memory.search import REASON_RETRIEVED, SearchSettings
from embodied_r_ros.memory.sightings import (
    Mention,
    Sighting,
    SightingIndex,
    catch_up,
    identities,
    mentions,
    named_in,
    place,
    sighting_answer,
)
from embodied_r_ros.memory.store import MemoryStore
from embodied_r_ros.windows import Window

S = NS_PER_S
T0 = 1_700_000_000 * S


def facing(x: float, y: float, yaw_deg: float) -> Pose:
    a = math.radians(yaw_deg) / 2
    return Pose((x, y, 1.2), (0.0, 0.0, math.sin(a), math.cos(a)))


def test_mentions_read_the_listing_form_and_leave_out_what_they_cannot_read():
    text = (
        "I see white tv right, near, 2.5 m; orange lamp ahead-right, far, 4 m; "
        "red mat ahead below, near, 1 m."
    )
    assert mentions(text) == [
        Mention("white tv", -30.0, 2.5),
        Mention("orange lamp", -15.0, 4.0),
        Mention("red mat", 0.0, 1.0),
    ]
    # A step's observation lists what is new; identity lines and prose are not sightings.
    step = "First seen: grey trash can left, far, 6 m. Seen again: the same red chair as in frame 2."
    assert mentions(step) == [Mention("grey trash can", 30.0, 6.0)]
    assert mentions("No objects in view.") == []
    assert mentions("A red chair stands to my left, quite close.") == []
    # The place line a memory answer starts with does not hide the listing.
    assert mentions("At 1:02 into the mission, at (3.1, -2.0) m: I see blue box left, near, 1.5 m.") == [
        Mention("blue box", 30.0, 1.5)
    ]


def test_an_object_is_placed_from_the_key_frame_s_pose():
    # Facing +y from (1, 2): 2 m ahead is (1, 4); 3 m at 30 deg left of +y points towards -x.
    ahead = place(Mention("red chair", 0.0, 2.0), facing(1.0, 2.0, 90.0))
    assert ahead == pytest.approx((1.0, 4.0))
    left = place(Mention("red chair", 30.0, 3.0), facing(1.0, 2.0, 90.0))
    assert left == pytest.approx((1.0 - 3 * math.sin(math.radians(30)), 2.0 + 3 * math.cos(math.radians(30))))
    assert place(Mention("red chair", 0.0, 2.0), None) is None


def test_identities_merge_a_revisit_and_keep_two_alike_objects_apart():
    sightings = [
        Sighting(1, "red chair", (0.0, 0.0), 2.0),
        Sighting(2, "red chair", (0.5, 0.3), 1.5),  # the same chair from a step further
        Sighting(3, "red chair", (40.0, 0.0), 2.0),  # the red chair of a room far away
        Sighting(4, "blue lamp", (0.2, 0.0), 3.0),
        Sighting(9, "red chair", (0.4, -0.5), 2.5),  # back in the first room: the first chair again
    ]
    found = identities(sightings)
    assert [(i.name, [s.stamp_ns for s in i.sightings]) for i in found] == [
        ("red chair", [1, 2, 9]),
        ("red chair", [3]),
        ("blue lamp", [4]),
    ]
    assert found[0].clearest().stamp_ns == 2 and found[0].last_ns == 9
    # Without poses the place cannot tell them apart: one identity per name.
    unplaced = [Sighting(s.stamp_ns, s.name, None, s.distance_m) for s in sightings]
    assert [len(i.sightings) for i in identities(unplaced)] == [4, 1]


def test_a_question_names_whole_names_or_every_name_of_a_thing():
    names = {"red chair", "blue chair", "orange lamp", "lamp post", "grey bench"}
    assert named_in("How far into the mission did I last see the red chair?", names) == {"red chair"}
    assert named_in("How many different chairs did I see over the whole mission?", names) == {
        "red chair", "blue chair",
    }  # fmt: skip
    assert named_in("How many benches did I see?", names) == {"grey bench"}
    assert named_in("Which did I see first: the orange lamp or the lamp post?", names) == {
        "orange lamp", "lamp post",
    }  # fmt: skip
    assert named_in("Where is the door?", names) == set()


def index_of(rows: list[tuple[int, str, Pose | None]]) -> SightingIndex:
    index = SightingIndex()
    for stamp, text, pose in rows:
        index.add(stamp, text, pose)
    return index


ROOMS = [  # (second, description, robot pose): rooms 0 and 1 are 40 m apart, room 0 visited twice
    (10, "I see red chair ahead, near, 2 m; blue lamp left, far, 4 m.", facing(0, 0, 0)),
    (12, "I see red chair ahead, near, 1.5 m.", facing(0.5, 0, 0)),
    (60, "I see red chair ahead, near, 2 m; grey bench right, near, 2 m.", facing(40, 0, 0)),
    (300, "I see red chair ahead, far, 3 m.", facing(-1, 0, 0)),
    (310, "I see blue lamp ahead-left, near, 2 m.", facing(0, 2, 45)),
]


def test_counts_and_last_and_first_sightings_pick_their_key_frames_in_time_order():
    index = index_of([(T0 + s * S, text, pose) for s, text, pose in ROOMS])
    end = T0 + 400 * S

    def stamps(question, k=16):
        hits = sighting_answer(index, question, (), T0, end, k).hits
        return None if hits is None else [(h.stamp_ns - T0) // S for h in hits]

    # Two red chairs (room 0, seen at 10, 12, 300; room 1 at 60): one key frame each, the clearest view.
    assert stamps("How many different chairs did I see over the whole mission?") == [12, 60]
    assert stamps("How many different chairs did I see over the whole mission?", k=1) == [12]
    # The last sighting of each red chair, with the one before it; the latest is what "last" reads.
    assert stamps("How far into the mission (minutes:seconds) did I last see the red chair?") == [12, 60, 300]
    assert stamps("Which did I see first: the blue lamp or the grey bench?") == [10, 60, 310]
    # A window bounds the sightings; other questions go to the similarity search.
    later = sighting_answer(index, "How many chairs did I see?", (), T0 + 50 * S, end, 16).hits
    assert [h.stamp_ns for h in later] == [T0 + 60 * S, T0 + 300 * S]  # room 0's chair: seen at 300 only
    assert stamps("Where is the red chair?") is None
    assert stamps("How many doors did I see?") is None
    lamps = sighting_answer(index, "How many lamps?", (), T0, end, 16).hits
    assert all(isinstance(h, SearchHit) for h in lamps)


def write_mission(store: MemoryStore, rows) -> None:
    """Candidates every second (each a key frame at the listed seconds), poses at 10 Hz, descriptions."""
    pixels = np.zeros((24, 32, 3), np.uint8)
    described = {second: (text, pose) for second, text, pose in rows}
    for second in range(0, 320):
        store.add_candidate(T0 + second * S, second in described, 0.5, "overlap", pixels)
        pose = described.get(second, (None, facing(0, 0, 0)))[1]
        store.add_pose(T0 + second * S, pose)
    for second, (text, _) in described.items():
        store.add_description(T0 + second * S, text, "ground truth", question_agnostic=True)
    assert store.flush()


def test_the_history_answers_a_count_from_every_sighting_and_keeps_its_index_current(tmp_path):
    store = MemoryStore(tmp_path / "memory.sqlite", 64.0)
    try:
        write_mission(store, ROOMS)
        history = RobotHistory(BufferConfig(history_s=60.0), KeyFrameConfig(), memory=store)
        settings = SearchSettings(k=16, merge_s=3.0, pad_s=1.0)
        # The embedder is never asked: the sightings answer it (None would fail a similarity search).
        counted = history.search("How many different chairs did I see over the whole mission?", (),
                                 Window(), None, settings)  # fmt: skip
        retrieved = [k.frame.stamp_ns for k in counted.keyframes if k.reason == REASON_RETRIEVED]
        assert retrieved == [T0 + 12 * S, T0 + 60 * S]
        # Poses come from the store: the chair of room 1 was placed 40 m away, so it is a second chair.
        assert len(history._sightings) == 7
        # A description written later is read into the index at the next search.
        store.add_candidate(T0 + 330 * S, True, 0.5, "overlap", np.zeros((24, 32, 3), np.uint8))
        store.add_description(T0 + 330 * S, "I see red chair ahead, near, 2 m.", "gt", question_agnostic=True)
        assert store.flush()
        last = history.search("How far into the mission did I last see the red chair?", (), Window(), None,
                               settings)  # fmt: skip
        assert max(k.frame.stamp_ns for k in last.keyframes if k.reason == REASON_RETRIEVED) == T0 + 330 * S
        # A cleared memory (a reset) is read again from its first row.
        history.clear()
        assert history._sightings is None
        assert len(catch_up(None, store, 0.5)) == 8
    finally:
        store.close()


def test_the_sightings_can_be_turned_off_for_the_similarity_search_alone(tmp_path):
    from dataclasses import replace

    from embodied_r_ros.node_config import MemoryConfig

    assert MemoryConfig().search().sightings and not MemoryConfig(search_sightings=False).search().sightings
    store = MemoryStore(tmp_path / "memory.sqlite", 64.0)
    try:
        write_mission(store, ROOMS)
        history = RobotHistory(BufferConfig(history_s=60.0), KeyFrameConfig(), memory=store)
        settings = replace(SearchSettings(k=16), sightings=False)
        with pytest.raises(AttributeError, match="query"):  # went to the similarity search: it embeds
            history.search("How many chairs did I see?", (), Window(), None, settings)
        assert history._sightings is None  # and never read the sightings
    finally:
        store.close()


def test_a_count_gets_the_memory_s_tally_after_the_first_observation():
    from embodied_r_ros.memory.sightings import add_summary

    index = index_of([(T0 + s * S, text, pose) for s, text, pose in ROOMS])
    end = T0 + 400 * S
    whole = "How many different chairs did I see over the whole mission?"
    tally = sighting_answer(index, whole, (), T0, end, 1).summary
    assert tally == "From every sighting in my memory: 2 red chairs, 2 in all."
    lamps = sighting_answer(index, "How many lamps did I see?", (), T0, end, 1).summary
    assert lamps == "From every sighting in my memory: 1 blue lamp, 1 in all."
    assert sighting_answer(index, "When did I last see the red chair?", (), T0, end, 1).summary == ""
    assert sighting_answer(index, "How many doors did I see?", (), T0, end, 1).summary == ""
    first, second = description(10, "I see red chair ahead, near, 2 m."), description(20, "a door")
    summed = add_summary([first, second], tally)
    assert summed[0].observation == "I see red chair ahead, near, 2 m. " + tally and summed[1] == second
    assert add_summary([first], "") == [first] and add_summary([], tally) == []


def description(stamp_ns: int, text: str):
    from embodied_r_ros.perception import Description

    return Description(0, stamp_ns, None, text, text)


def test_a_count_is_about_the_things_after_how_many_and_needs_places():
    rows = [(T0 + s * S, text, pose) for s, text, pose in ROOMS]
    index = index_of(rows)
    end = T0 + 400 * S
    # The red chair of the question's place phrase is not what is counted: the lamps are.
    near = sighting_answer(index, "How many lamps did I see near the red chair?", (), T0, end, 1).summary
    assert near == "From every sighting in my memory: 1 blue lamp, 1 in all."
    hits = sighting_answer(index, "How many lamps did I see near the red chair?", (), T0, end, 16).hits
    assert [(h.stamp_ns - T0) // S for h in hits] == [310]  # the lamp's clearest view
    # Passes and durations are no object counts: the similarity search answers them.
    assert sighting_answer(index, "How many times did I pass the red chair?", (), T0, end, 16).hits is None
    assert sighting_answer(index, "How many times did I pass the red chair?", (), T0, end, 1).summary == ""
    # Without poses alike objects cannot be told apart: no tally rather than a wrong one.
    unplaced = index_of([(stamp, text, None) for stamp, text, _ in rows])
    assert sighting_answer(unplaced, "How many chairs did I see?", (), T0, end, 1).summary == ""


# --- after review: a reset racing a search, alike objects in one view, one answer per question, plurals


def test_a_store_cleared_under_the_index_is_read_again_from_its_first_row(tmp_path):
    store = MemoryStore(tmp_path / "memory.sqlite", 64.0)
    try:
        write_mission(store, ROOMS)
        history = RobotHistory(BufferConfig(history_s=60.0), KeyFrameConfig(), memory=store)
        settings = SearchSettings(k=16, merge_s=3.0, pad_s=1.0)
        question = "How many different chairs did I see over the whole mission?"
        before = history.search(question, (), Window(), None, settings)
        assert before.summary.endswith("2 red chairs, 2 in all.")
        # The memory is cleared without the history (a reset that raced the search, another process) and
        # holds a shorter mission: same timeline, row ids from 1 again, below the last one read.
        assert store.clear()
        write_mission(store, [ROOMS[0]])
        found = history.search(question, (), Window(), None, settings)
        assert found.summary == "From every sighting in my memory: 1 red chair, 1 in all."
        assert len(history._sightings) == 2  # the red chair and the blue lamp of second 10, nothing older
    finally:
        store.close()


def test_a_reset_during_a_search_leaves_no_index_of_the_old_memory(tmp_path, monkeypatch):
    import embodied_r_ros.history as history_module

    store = MemoryStore(tmp_path / "memory.sqlite", 64.0)
    try:
        write_mission(store, ROOMS)
        history = RobotHistory(BufferConfig(history_s=60.0), KeyFrameConfig(), memory=store)
        read = history_module.catch_up

        def reset_meanwhile(index, memory, max_gap_s):
            found = read(index, memory, max_gap_s)
            history.clear()  # ~/reset, between the search's read of the index and its write-back
            return found

        monkeypatch.setattr(history_module, "catch_up", reset_meanwhile)
        found = history.search("How many chairs did I see?", (), Window(), None, SearchSettings(k=16))
        assert found.summary  # the question asked before the reset is answered ...
        assert history._sightings is None  # ... but the next search reads the memory anew
        monkeypatch.setattr(history_module, "catch_up", read)
        history.search("How many chairs did I see?", (), Window(), None, SearchSettings(k=16))
        assert len(history._sightings) == 7  # kept when no reset came
    finally:
        store.close()


def test_two_alike_objects_in_one_key_frame_are_two_objects():
    index = index_of([
        (T0 + 10 * S, "I see red chair ahead, near, 2 m; red chair left, near, 2 m.", facing(0, 0, 0)),
        (T0 + 12 * S, "I see red chair ahead, near, 1.5 m; red chair left, near, 1.5 m.", facing(0.5, 0, 0)),
    ])  # fmt: skip
    found = identities(index.between(T0, T0 + 20 * S, {"red chair"}))
    # 1 m apart, within the merge radius, but seen side by side: two chairs, each seen again at 12 s.
    assert [[(s.stamp_ns - T0) // S for s in i.sightings] for i in found] == [[10, 12], [10, 12]]
    summary = sighting_answer(index, "How many red chairs did I see?", (), T0, T0 + 20 * S, 1).summary
    assert summary == "From every sighting in my memory: 2 red chairs, 2 in all."
    # One key frame is its camera and its stamp: two cameras at one stamp may see one chair.
    front = Sighting(T0, "red chair", (2.0, 0.0), 2.0, camera="front")
    side = Sighting(T0, "red chair", (2.2, 0.1), 2.0, camera="side")
    assert len(identities([front, side])) == 1


def test_one_answer_gives_a_count_s_key_frames_and_tally_from_one_set_of_identities(tmp_path, monkeypatch):
    import embodied_r_ros.memory.sightings as sightings_module

    index = index_of([(T0 + s * S, text, pose) for s, text, pose in ROOMS])
    question, end = "How many different chairs did I see over the whole mission?", T0 + 400 * S
    built = []
    make = sightings_module.identities
    monkeypatch.setattr(sightings_module, "identities", lambda *a, **kw: built.append(1) or make(*a, **kw))
    answer = sighting_answer(index, question, (), T0, end, 16)
    assert len(built) == 1
    assert answer.hits == sighting_answer(index, question, (), T0, end, 16).hits  # the same every time
    assert answer.summary == "From every sighting in my memory: 2 red chairs, 2 in all."
    assert sorted({s.stamp_ns for s in answer.counted}) == [T0 + s * S for s in (10, 12, 60, 300)]
    # The history's search builds them once too, and carries the sightings it counted.
    store = MemoryStore(tmp_path / "memory.sqlite", 64.0)
    try:
        write_mission(store, ROOMS)
        history = RobotHistory(BufferConfig(history_s=60.0), KeyFrameConfig(), memory=store)
        built.clear()
        found = history.search(question, (), Window(), None, SearchSettings(k=16))
        assert len(built) == 1 and found.summary == answer.summary and len(found.counted) == 4
    finally:
        store.close()


def test_a_key_frame_described_twice_is_read_once(tmp_path):
    store = MemoryStore(tmp_path / "memory.sqlite", 64.0)
    try:
        write_mission(store, ROOMS)
        store.add_description(T0 + 10 * S, "I see red chair ahead, near, 2 m.", "gt", question_agnostic=True)
        assert store.flush()
        looked_up = []
        pose_at = store.pose_at
        store.pose_at = lambda stamp, gap: looked_up.append(stamp) or pose_at(stamp, gap)
        assert len(catch_up(None, store, 0.5)) == 7
        assert len(looked_up) == len(set(looked_up))  # the second description of a stamp: no pose lookup
    finally:
        store.close()


def test_plurals_name_their_singular_names_both_ways():
    from embodied_r_training.synth.world import CATEGORIES, plural

    from embodied_r_ros.memory.sightings import _plural
    from embodied_r_ros.memory.words import stem, words

    for category in CATEGORIES:  # how the synthetic world's questions name them ("tvs", "bookshelves")
        assert _plural(category) == plural(category)
        assert words(plural(category)) == words(category)
        assert named_in(f"How many different {plural(category)} did I see?", {f"black {category}"}) == {
            f"black {category}"
        }
    pairs = [("chairs", "chair"), ("boxes", "box"), ("shelves", "shelf"), ("tomatoes", "tomato"),
             ("benches", "bench"), ("glasses", "glass"), ("knives", "knife"), ("lorries", "lorry"),
             ("buses", "bus"), ("tvs", "tv"), ("shoes", "shoe")]  # fmt: skip
    for plural_word, singular in pairs:
        assert stem(plural_word) == stem(singular), (plural_word, singular)
    assert [stem(w) for w in ("glass", "bus", "this", "has", "its")] == ["glass", "bus", "this", "has", "its"]
    assert stem("shelves") == "shelf" and stem("boxes") == "box" and stem("tomatoes") == "tomato"
    assert named_in("How many tomatoes did I see?", {"red tomato", "red box"}) == {"red tomato"}
    assert _plural("red box") == "red boxes" and _plural("red lorry") == "red lorries"


def test_several_cameras_count_together_an_object_two_of_them_saw_once(tmp_path):
    from embodied_r_ros.memory.sightings import merged_tally
    from embodied_r_ros.ros.answering import _summary

    # The side camera's key frame at 10 s shows the chair the front camera saw then (same place, same
    # stamp: the cameras are triggered together), and at 70 s a red chair the front camera never saw.
    side_rows = [
        (10, "I see red chair ahead, near, 2 m.", facing(0, 0, 0)),
        (70, "I see red chair ahead, near, 2 m.", facing(0, 18, 90)),
    ]
    found, stores = {}, []
    try:
        for name, rows in (("front", ROOMS), ("side", side_rows)):
            store = MemoryStore(tmp_path / f"{name}.sqlite", 64.0)
            stores.append(store)
            write_mission(store, rows)
            history = RobotHistory(BufferConfig(history_s=60.0), KeyFrameConfig(), memory=store)
            found[name] = history.search("How many chairs did I see?", (), Window(), None, SearchSettings())
        assert [f.summary.split(": ")[1] for f in found.values()] == ["2 red chairs, 2 in all."] * 2
        merged = "From every sighting in my memory: 3 red chairs, 3 in all."
        assert merged_tally({name: f.counted for name, f in found.items()}) == merged
        assert _summary(found) == merged  # what the node's answerer gives the pipeline
        assert _summary({"front": found["front"]}) == found["front"].summary  # one camera: its own
    finally:
        for store in stores:
            store.close()
