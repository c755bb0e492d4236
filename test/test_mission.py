"""Long synthetic missions (embodied_r_training.synth.mission*): a short mission written for real, its bag
read back, its sightings, questions and evidence checked against the mission's own geometry."""

from __future__ import annotations

import filecmp
import hashlib
import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from embodied_r_training.data.bag_reader import BagReader
from embodied_r_training.synth.ground_truth import GroundTruthError, GroundTruthPerceiver
from embodied_r_training.synth.mission import HALL, ROOM, MissionConfig, plan_mission
from embodied_r_training.synth.mission_ground_truth import MissionGroundTruth, is_mission_file
from embodied_r_training.synth.mission_writer import MissionResult, write_mission
from embodied_r_training.synth.trajectory import Trajectory
from embodied_r_training.tasks.mission.context import MissionQuestionConfig, format_mission_time
from embodied_r_training.tasks.mission.count import EDGE_S, TEMPLATE, count_windows
from embodied_r_training.tasks.mission.last_place import SEPARATION_M, format_place
from embodied_r_training.tasks.registry import MISSION_TASK_NAMES as KINDS
from synth_helpers import odom_pose, read_bag

from embodied_r_ros.config import ConfigError
from embodied_r_ros.frames import NS_PER_S, Frame
from embodied_r_ros.keyframes import KeyFrame, candidate_indices
from embodied_r_ros.memory.describer import AGNOSTIC_QUESTION as AGNOSTIC
from embodied_r_ros.question_file import read_questions
from embodied_r_ros.reasoning.options import OPTION_LETTERS

# Two minutes, four room visits, small images: a few seconds to write.
CONFIG = MissionConfig(minutes=2, seed=3, rooms_per_minute=2, width=160, height=120)


@pytest.fixture(scope="module")
def mission(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MissionResult]:
    out = tmp_path_factory.mktemp("mission") / "m"
    return out, write_mission(CONFIG, out)


def _data(out: Path) -> dict:
    return json.loads((out / "mission.json").read_text(encoding="utf-8"))


def _frame_stamps(config: MissionConfig) -> list[int]:
    return [config.stamp_ns(t) for t in config.frame_times()]


def test_a_short_mission_has_every_kind_of_question(mission) -> None:
    out, result = mission
    assert result.frames == CONFIG.n_frames == 240
    questions = read_questions(out / "questions.jsonl")
    assert {q.task for q in questions} == set(KINDS)
    data = _data(out)
    assert set(data["questions"]) == {q.id for q in questions}
    for kind, count in data["question_counts"].items():
        assert count["kept"] == sum(q.task == kind for q in questions) <= CONFIG.questions_per_kind
        assert count["usable"] + sum(count["dropped"].values()) == count["candidates"]
    # Every window is the whole mission, but a count's that asks about a part of it (which the text names).
    stamps = _frame_stamps(CONFIG)
    whole = [q for q in questions if "over the whole mission" in q.question or q.task != "mission_count"]
    assert {(q.start_ns, q.end_ns) for q in whole} == {(stamps[0], stamps[-1])}
    parts = {(q.start_ns, q.end_ns, q.question.split(" did I see ")[1]) for q in questions if q not in whole}
    last_minute = CONFIG.stamp_ns((stamps[-1] - stamps[0]) / NS_PER_S - 60.0)
    assert parts and parts <= {
        (stamps[0], CONFIG.stamp_ns(60.0), "in the first minute of the mission?"),
        (last_minute, stamps[-1], "in the last minute of the mission?"),
    }


# sha256 of the short mission's questions.jsonl and mission.json (questions, evidence, counts): a change to
# the mission tasks or their driver that alters them must do it on purpose, updating this and saying why.
# Last changed: counts over parts of the mission (windowed) and the mission_last_place kind (issue 44;
# its distractors: other names' last places).
MISSION_DIGEST = "af2f8c9610877d36b4e457af3e3c670fa604ab021f1d0ec15ffb33c3bc3da042"


def test_the_mission_questions_stay_the_same(mission) -> None:
    out, _ = mission
    digest = hashlib.sha256((out / "questions.jsonl").read_bytes() + (out / "mission.json").read_bytes())
    assert digest.hexdigest() == MISSION_DIGEST, f"the mission's questions changed: now {digest.hexdigest()}"


def test_the_same_seed_gives_the_same_mission_and_another_seed_another(mission, tmp_path: Path) -> None:
    out, result = mission
    again = write_mission(CONFIG, tmp_path / "again")
    assert again.messages == result.messages
    for name in ("questions.jsonl", "mission.json", "bag/bag.mcap", "pieces/piece_0000.json"):
        assert filecmp.cmp(out / name, tmp_path / "again" / name, shallow=False), name
    other = plan_mission(replace(CONFIG, seed=4))
    assert other.trajectory.to_dict() != plan_mission(CONFIG).trajectory.to_dict()


def test_the_bag_reads_back_with_every_frame_and_the_mission_poses(mission) -> None:
    out, _ = mission
    stamps = _frame_stamps(CONFIG)
    plan = plan_mission(CONFIG)
    with BagReader(out / "bag", candidate_fps=1.0) as reader:
        assert reader.image_messages == CONFIG.n_frames
        assert reader.start_ns == stamps[0] and reader.end_ns - stamps[-1] in (0, 1)  # rosbags: end + 1
        frames = reader.window(stamps[0], stamps[-1])
    assert [f.stamp_ns for f in frames] == [stamps[i] for i in candidate_indices(stamps, 1.0)]
    for frame in frames:
        t = (frame.stamp_ns - CONFIG.start_ns) / NS_PER_S
        assert frame.image.shape == (CONFIG.height, CONFIG.width, 3)
        assert np.allclose(frame.pose.position, plan.trajectory.position(t), atol=1e-6)
    odometry = read_bag(out / "bag").messages["/odom"]
    assert len(odometry) == int(stamps[-1] - stamps[0]) * CONFIG.odom_hz // NS_PER_S + 1
    # The camera walks on without jumps: odometry 0.1 s apart is never more than a stride apart.
    positions = np.array([odom_pose(m).position for _, m in odometry])
    assert np.linalg.norm(np.diff(positions, axis=0), axis=1).max() < 0.25


def test_sightings_lie_within_the_mission_on_frame_stamps_and_within_visits(mission) -> None:
    out, _ = mission
    data = _data(out)
    stamps = set(_frame_stamps(CONFIG))
    visits = {r["room"]: r["visits"] for r in data["rooms"]}
    seen = 0
    for obj in data["objects"]:
        for start, end in obj["sightings"]:
            assert data["start_ns"] <= start <= end <= data["end_ns"]
            assert start in stamps and end in stamps
            # An object is seen only while the camera is in its room (halls are empty, walls opaque).
            assert any(a <= start and end <= b for a, b in visits[obj["room"]])
        seen += bool(obj["sightings"])
    assert seen >= len(data["objects"]) // 2
    assert [p["kind"] for p in data["pieces"]][:3] == [ROOM, HALL, ROOM]


def test_rooms_lie_along_the_corridor_and_names_recur_in_far_apart_rooms(mission) -> None:
    out, _ = mission
    data = _data(out)
    rooms = data["rooms"]
    for a, b in zip(rooms, rooms[1:], strict=False):
        gap = (b["offset"][0] - b["size"][0] / 2) - (a["offset"][0] + a["size"][0] / 2)
        assert gap == pytest.approx(2.0, abs=1e-2)
    assert data["recurring"]
    names = {(o["room"], o["local_id"]): o["name"] for o in data["objects"]}
    for planted in data["recurring"]:
        name = names[(planted["room"], planted["local_id"])]
        source = [n for (room, _), n in names.items() if room == planted["copies_room"]]
        assert name in source
        assert abs(planted["room"] - planted["copies_room"]) >= len(rooms) // 2


def test_count_answers_are_the_distinct_objects_seen_of_the_category_in_the_window(mission) -> None:
    out, _ = mission
    data = _data(out)
    counts = [q for q in read_questions(out / "questions.jsonl") if q.task == "mission_count"]
    assert {data["questions"][q.id]["whole"] for q in counts} == {True, False}
    for question in counts:
        category = data["questions"][question.id]["category"]
        seen = [
            o for o in data["objects"]
            if o["category"] == category
            and any(a <= question.end_ns and b >= question.start_ns for a, b in o["sightings"])
        ]  # fmt: skip
        assert question.answer == len(seen) and question.unit == "count"
        assert sorted(question.objects) == sorted(o["id"] for o in seen)
        assert len({o["room"] for o in seen}) >= 2
        assert set(data["questions"][question.id]["evidence_objects"]) == {o["id"] for o in seen}
        for a, b in data["questions"][question.id]["evidence"]:  # clipped to the window
            assert question.start_ns <= a <= b <= question.end_ns
        # No sighting of the category lies within EDGE_S of an edge inside the mission.
        edges = {question.start_ns, question.end_ns} - {data["start_ns"], data["end_ns"]}
        members = [o for o in data["objects"] if o["category"] == category]
        slack = EDGE_S * NS_PER_S
        assert not any(a - slack < e < b + slack for o in members for a, b in o["sightings"] for e in edges)


def test_count_windows_are_whole_minutes_of_the_mission() -> None:
    texts = {
        minutes: [TEMPLATE.format("chairs", *map(str, w.minutes), variant=w.variant) for w in windows]
        for minutes, windows in ((m, count_windows(m * 60.0)) for m in (1, 5, 120))
    }
    assert texts[1] == ["How many different chairs did I see over the whole mission?"]
    assert [t.split(" see ")[1] for t in texts[120]] == [
        "over the whole mission?",
        "in the first 30 minutes of the mission?",
        "in the last 30 minutes of the mission?",
        "in the first 60 minutes of the mission?",
        "in the last 60 minutes of the mission?",
        "between minute 30 and minute 90 of the mission?",
    ]
    assert [(w.start_s, w.end_s) for w in count_windows(300.0)] == [
        (0, 300), (0, 60), (240, 300), (0, 120), (180, 300), (60, 240),
    ]  # fmt: skip
    for text in texts[5] + texts[120]:  # the oracle knows every variant
        assert TEMPLATE.match(text) and TEMPLATE.match(text).group(1) == "chairs"


def test_last_place_options_are_far_apart_places_and_the_answer_is_the_last_seen_object(mission) -> None:
    out, _ = mission
    data = _data(out)
    by_id = {o["id"]: o for o in data["objects"]}
    questions = [q for q in read_questions(out / "questions.jsonl") if q.task == "mission_last_place"]
    assert questions
    for question in questions:
        ((start, end),) = data["questions"][question.id]["evidence"]
        (oid,) = question.objects
        name = by_id[oid]["name"]
        # The object of the name's last sighting, alone in view then.
        assert end == max(b for o in data["objects"] if o["name"] == name for _, b in o["sightings"])
        assert not any(
            a <= end and b >= start for o in data["objects"] if o["name"] == name and o["id"] != oid
            for a, b in o["sightings"]
        )  # fmt: skip
        assert question.answer_text == format_place(*by_id[oid]["position"][:2])
        assert question.options[OPTION_LETTERS.index(question.answer)] == question.answer_text
        places = [tuple(map(int, o.strip("()").split(", "))) for o in question.options]
        gaps = [math.dist(p, q) for i, p in enumerate(places) for q in places[i + 1 :]]
        assert min(gaps) >= SEPARATION_M - 1.5  # whole metres: each place rounded by up to 0.71 m
    letters = [q.answer for q in questions]
    assert len(set(letters)) > 1


def test_first_seen_evidence_is_far_apart_and_gives_the_answer(mission) -> None:
    out, _ = mission
    data = _data(out)
    far_ns = max(MissionQuestionConfig().min_far_s, 0.2 * CONFIG.duration_s) * NS_PER_S
    by_id = {o["id"]: o for o in data["objects"]}
    questions = [q for q in read_questions(out / "questions.jsonl") if q.task == "mission_first_seen"]
    assert questions
    letters = []
    for question in questions:
        evidence = data["questions"][question.id]
        (a0, a1), (b0, b1) = sorted(evidence["evidence"])
        assert data["start_ns"] <= a0 and b1 <= data["end_ns"]
        assert b0 - a1 >= far_ns
        earlier = min(evidence["evidence_objects"], key=lambda o: by_id[o]["sightings"][0][0])
        assert question.answer_text == by_id[earlier]["name"]
        assert question.options[OPTION_LETTERS.index(question.answer)] == question.answer_text
        # The first sighting of the name: no object of that name was seen before.
        same_name = [o for o in data["objects"] if o["name"] == by_id[earlier]["name"] and o["sightings"]]
        assert min(o["sightings"][0][0] for o in same_name) == a0
        letters.append(question.answer)
    assert max(letters.count(x) for x in "AB") - min(letters.count(x) for x in "AB") <= 1


def test_last_seen_options_are_times_and_the_answer_is_the_last_sighting(mission) -> None:
    out, _ = mission
    data = _data(out)
    by_id = {o["id"]: o for o in data["objects"]}
    questions = [q for q in read_questions(out / "questions.jsonl") if q.task == "mission_last_seen"]
    assert questions
    for question in questions:
        ((start, end),) = data["questions"][question.id]["evidence"]
        name = by_id[question.objects[0]]["name"]
        last = max(s[1] for o in data["objects"] if o["name"] == name for s in o["sightings"])
        assert end == last
        assert question.answer_text == format_mission_time((end - data["start_ns"]) / NS_PER_S)
        times = [int(m) * 60 + int(s) for m, s in (o.split(":") for o in question.options)]
        assert times == sorted(times) and len(set(times)) == 4
        assert question.options[OPTION_LETTERS.index(question.answer)] == question.answer_text
    ranks = [OPTION_LETTERS.index(q.answer) for q in questions]
    assert max(ranks.count(r) for r in range(4)) - min(ranks.count(r) for r in range(4)) <= 1


def test_route_answers_are_the_straight_line_between_first_sightings(mission) -> None:
    out, _ = mission
    data = _data(out)
    trajectory = Trajectory.from_dict(data["trajectory"])
    questions = [q for q in read_questions(out / "questions.jsonl") if q.task == "mission_route"]
    assert questions
    for question in questions:
        evidence = data["questions"][question.id]
        (a, _), (b, _) = evidence["evidence"]
        ta, tb = ((s - data["start_ns"]) / NS_PER_S for s in (a, b))
        metres = math.dist(trajectory.position(ta)[:2], trajectory.position(tb)[:2])
        assert question.answer == pytest.approx(metres, abs=0.01) and question.unit == "m"
        assert question.answer >= 3.0 and evidence["spread_m"] >= 0


def test_each_piece_is_a_scene_the_ground_truth_perceiver_loads(mission) -> None:
    out, _ = mission
    data = _data(out)
    plan = plan_mission(CONFIG)
    by_local = {(o["room"], o["local_id"]): o for o in data["objects"]}
    checked = 0
    for entry in data["pieces"]:
        perceiver = GroundTruthPerceiver(out / entry["scene"])
        start, end = entry["interval"]
        for stamp in [s for s in _frame_stamps(CONFIG) if start <= s <= end][::6]:
            t = (stamp - CONFIG.start_ns) / NS_PER_S
            pose = perceiver.views.pose_at(stamp)
            expected = plan.piece_at(t).to_local(plan.trajectory.pose(t))
            assert np.allclose(pose.position, expected.position, atol=1e-6)
            views = perceiver.views.views(pose)
            if entry["kind"] == HALL:
                assert views == []
                continue
            # What the ground truth sees clearly at a frame, the mission's sightings hold at that frame.
            for view in views:
                if view.fraction >= 0.01:
                    sightings = by_local[(entry["room"], view.id)]["sightings"]
                    assert any(a <= stamp <= b for a, b in sightings)
                    checked += 1
    assert checked > 0


def test_the_mission_perceiver_routes_each_key_frame_to_its_piece(mission) -> None:
    out, _ = mission
    data = _data(out)
    perceiver = MissionGroundTruth(out / "mission.json")
    assert perceiver.label == "ground-truth:mission.json" and is_mission_file(out / "mission.json")
    image = np.zeros((8, 8, 3), np.uint8)
    rooms = [p for p in data["pieces"] if p["kind"] == ROOM]
    first, second = rooms[0], rooms[1]
    stamps = _frame_stamps(CONFIG)
    inside = [[s for s in stamps if p["interval"][0] <= s < p["interval"][1]] for p in (first, second)]
    chosen = [inside[0][0], inside[0][len(inside[0]) // 2], inside[1][0], inside[1][-1]]
    keyframes = [KeyFrame(Frame(image, s), i) for i, s in enumerate(chosen)]
    replies = perceiver.replies_for(keyframes, AGNOSTIC)
    # Within a piece: as that piece's own scene perceiver says it.
    alone = GroundTruthPerceiver(out / first["scene"]).replies_for(keyframes[:2], AGNOSTIC)
    assert replies[:2] == alone
    # Into the next room: the true motion on the mission's path, then what is in view, as a first frame.
    room_two = GroundTruthPerceiver(out / second["scene"]).replies_for(keyframes[2:], AGNOSTIC)
    assert replies[2].startswith("Action: ") and replies[2].endswith("\nObservation: " + room_two[0])
    assert replies[3] == room_two[1]
    described = perceiver.describe(keyframes, AGNOSTIC)
    assert [d.index for d in described] == [0, 1, 2, 3]
    with pytest.raises(GroundTruthError, match="outside mission"):
        perceiver.replies_for([KeyFrame(Frame(image, data["end_ns"] + NS_PER_S), 0)], AGNOSTIC)
    assert not is_mission_file(out / first["scene"])


def test_identity_lines_number_frames_in_the_whole_query(mission) -> None:
    """In "Seen again: the same X as in frame k", k counts the query's key frames, not the piece's run."""
    out, _ = mission
    data = _data(out)
    perceiver = MissionGroundTruth(out / "mission.json")
    image = np.zeros((8, 8, 3), np.uint8)
    rooms = [p for p in data["pieces"] if p["kind"] == ROOM]
    stamps = _frame_stamps(CONFIG)
    before = [s for s in stamps if rooms[0]["interval"][0] <= s < rooms[0]["interval"][1]][:3]
    found = 0
    for room in rooms[1:]:
        inside = [s for s in stamps if room["interval"][0] <= s < room["interval"][1]][::2]
        names = {o["name"] for o in data["objects"] if o["room"] == room["room"]}
        for name in sorted(names):
            question = f"Where is the {name}?"
            alone = GroundTruthPerceiver(out / room["scene"]).replies_for(
                [KeyFrame(Frame(image, s), i) for i, s in enumerate(inside)], question
            )
            if not any("as in frame" in reply for reply in alone):
                continue
            keyframes = [KeyFrame(Frame(image, s), i) for i, s in enumerate(before + inside)]
            replies = perceiver.replies_for(keyframes, question)
            for j, reply in enumerate(replies[len(before) :], start=len(before)):
                for k in (int(m) for m in re.findall(r"as in frame (\d+)", reply)):
                    assert len(before) <= k < j  # a frame of this room's run, earlier in the query
                    assert name in replies[k]  # where the object was listed first
                    found += 1
    assert found > 0  # the mission has such a line to check


def test_bad_settings_and_a_used_directory_are_refused(mission) -> None:
    out, _ = mission
    with pytest.raises(ConfigError, match="--minutes"):
        MissionConfig(minutes=0)
    with pytest.raises(ConfigError, match="--revisit-probability"):
        MissionConfig(revisit_probability=1.0)
    with pytest.raises(ConfigError, match="holds a mission already"):
        write_mission(CONFIG, out)


def test_embodied_r_synth_mission_writes_the_same_mission(mission, tmp_path: Path, capsys) -> None:
    """``embodied-r synth --mission`` is the writer with the command's flags: same settings, same bytes."""
    from embodied_r_ros.cli.main import main

    out = tmp_path / "cli"
    argv = ["synth", "--mission", "2", "--seed", "3", "--rooms-per-minute", "2", "--size", "160x120"]
    assert main([*argv, "--jpeg-quality", str(CONFIG.jpeg_quality), "--out", str(out)]) == 0
    assert "questions" in capsys.readouterr().out
    reference, _ = mission
    assert _data(out) == _data(reference)
    assert filecmp.cmp(out / "questions.jsonl", reference / "questions.jsonl", shallow=False)
    # A scene-only flag is refused by name, and nothing is written.
    refused = tmp_path / "refused"
    assert main([*argv, "--rate", "5", "--out", str(refused)]) == 2
    assert "--rate" in capsys.readouterr().err
    assert not refused.exists()
