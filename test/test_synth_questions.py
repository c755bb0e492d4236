"""Ground-truth questions on small hand-built scenes where the answers are obvious."""

from __future__ import annotations

import collections
import json
import math

import numpy as np
import pytest
from embodied_r_training.synth.questions import generate_questions
from embodied_r_training.synth.render import CameraModel, Renderer
from embodied_r_training.synth.trajectory import PAUSE, TURN, WALK, Segment, StartState, Trajectory
from embodied_r_training.synth.visibility import Visibility, VisibilityRecorder
from embodied_r_training.synth.world import BOX, CYLINDER, INDOOR, Room, SceneObject, World, generate_world
from embodied_r_training.tasks.geometry import (
    closest_object,
    direction_angle,
    object_distance,
    relative_direction,
    route_turns,
    turn_label,
)
from embodied_r_training.tasks.registry import TASK_NAMES as TASKS
from embodied_r_training.tasks.scene import QuestionConfig

from embodied_r_ros.question_file import MC, NUMERIC, Question, bag_path, read_questions, write_questions
from embodied_r_ros.reasoning.options import OPTION_LETTERS

PIXELS = 160 * 120


def obj(
    i: int, name: str, x: float, y: float, size: tuple[float, float, float] = (0.5, 0.5, 0.8)
) -> SceneObject:
    colour, category = name.split(" ", 1)
    shape = CYLINDER if category == "lamp" else BOX
    return SceneObject(i, category, colour, shape, size, (x, y, size[2] / 2))


def room(*objects: SceneObject) -> World:
    return World(INDOOR, tuple(objects), (-3.4, 3.4, -2.4, 2.4), Room((8.0, 6.0, 2.8)), texture_seed=1)


def visibility(first_seen: dict[int, float], n_objects: int, end_s: float = 20.0) -> Visibility:
    """Each object in ``first_seen`` covers 5 % of the image from that time on; the others never show."""
    times = np.round(np.arange(0.0, end_s + 1e-9, 0.5), 3)
    pixels = np.zeros((len(times), n_objects + 1), dtype=np.int32)
    for object_id, t in first_seen.items():
        pixels[times >= t, object_id] = PIXELS // 20
    return Visibility(times, pixels, PIXELS)


def still(duration: float = 20.0) -> Trajectory:
    return Trajectory(StartState(0.0, 0.0, 1.25, 0.0, 0.0), [Segment(PAUSE, duration)])


def letter_text(q: Question) -> str:
    return q.options[OPTION_LETTERS.index(q.answer)]


# ------------------------------------------------------------------------------------------ ground truth


def test_relative_direction_quadrants() -> None:
    me, ahead = obj(1, "red chair", 0.0, 0.0), obj(2, "blue table", 0.0, 3.0)  # facing +y (north)
    cases = {
        (-1.0, 1.0): "front-left",
        (1.0, 1.0): "front-right",
        (-1.0, -1.0): "back-left",
        (1.0, -1.0): "back-right",
    }
    for (x, y), expected in cases.items():
        assert relative_direction(me, ahead, obj(3, "green box", x, y)) == expected
    assert direction_angle(me, ahead, obj(3, "green box", -1.0, 0.0)) == pytest.approx(90.0)  # due left


def test_distances_and_closest() -> None:
    a, b, c = obj(1, "red chair", 0.0, 0.0), obj(2, "blue table", 3.0, 4.0), obj(3, "green box", 1.0, 0.0)
    assert object_distance(a, b) == pytest.approx(5.0)
    assert closest_object(a, [b, c]).name == "green box"


def _zigzag_walk() -> Trajectory:
    """Walk 3 m, turn left, walk 2.5 m, turn right, walk 1 m (a route with both turns)."""
    return Trajectory(
        StartState(-2.0, -1.5, 1.25, 0.0, 0.0),
        [
            Segment(WALK, 4.0, forward_m=3.0),
            Segment(TURN, 2.0, yaw_deg=90.0),
            Segment(WALK, 3.0, forward_m=2.5),
            Segment(TURN, 2.0, yaw_deg=-90.0),
            Segment(WALK, 2.0, forward_m=1.0),
        ],
    )


def test_turn_labels_and_route_turns() -> None:
    assert turn_label(90.0) == "turn left" and turn_label(-60.0) == "turn right"
    assert turn_label(170.0) == "turn around" and turn_label(5.0) == ""
    assert turn_label(25.0) is None and turn_label(150.0) is None  # too close to a limit to name
    traj = _zigzag_walk()
    assert route_turns(traj, 0, 4) == ["turn left", "turn right"]
    assert route_turns(traj, 0, 2) == ["turn left"]


# ------------------------------------------------------------------------------------------- generation


def test_questions_on_a_hand_built_room() -> None:
    world = room(
        obj(1, "red chair", 2.0, 1.5),
        obj(2, "blue table", 2.0, -1.5, (1.4, 0.8, 0.75)),
        obj(3, "green sofa", -2.5, 2.0, (2.0, 0.9, 0.85)),
        obj(4, "white lamp", -2.5, -2.0, (0.3, 0.3, 1.6)),  # never seen
        obj(5, "black box", 0.5, 0.0),
        obj(6, "yellow box", -0.5, -1.8),
    )
    vis = visibility({1: 1.0, 2: 3.0, 3: 6.0, 5: 8.0, 6: 12.0}, 6)
    questions = generate_questions(
        world,
        still(),
        vis,
        np.random.default_rng(0),
        scene_id="s",
        bag="bag",
        config=QuestionConfig(per_task=50),
    )
    tasks = collections.Counter(q.task for q in questions)
    for task in (
        "appearance_order",
        "relative_direction",
        "relative_distance",
        "object_count",
        "abs_distance",
        "object_size",
        "room_size",
    ):
        assert tasks[task] > 0, task
    first = {1: 1.0, 2: 3.0, 3: 6.0, 5: 8.0, 6: 12.0}
    for q in questions:
        assert 4 not in q.objects and "white lamp" not in q.question + " ".join(q.options)
        if q.form == MC:
            assert q.unit == "" and len(set(q.options)) == len(q.options) >= 3
            assert letter_text(q) == q.answer_text
        else:
            assert q.options == () and isinstance(q.answer, (int, float)) and q.unit
        if q.task == "appearance_order":
            names = [world.object(i).name for i in sorted(q.objects, key=first.get)]
            assert q.answer_text == ", ".join(names)
        elif q.task == "relative_direction":
            a, b, c = (world.object(i) for i in q.objects)
            assert q.answer_text == relative_direction(a, b, c)
        elif q.task == "relative_distance":
            target, *candidates = (world.object(i) for i in q.objects)
            assert q.answer_text == closest_object(target, candidates).name
        elif q.task == "object_count" and q.form == NUMERIC:
            category = q.question.split("How many ")[1].split(" appear")[0]
            assert q.answer == {"chairs": 1, "tables": 1, "sofas": 1, "boxes": 2}[category]
            assert q.unit == "count"
        elif q.task == "abs_distance" and q.form == NUMERIC:
            a, b = (world.object(i) for i in q.objects)
            assert q.answer == pytest.approx(object_distance(a, b), abs=1e-3) and q.unit == "m"
        elif q.task == "object_size" and q.form == NUMERIC:
            assert q.answer == pytest.approx(max(world.object(q.objects[0]).size), abs=1e-3)
        elif q.task == "room_size":
            assert (
                (q.answer == pytest.approx(48.0))
                if q.form == NUMERIC
                else q.answer_text == "48.0 square metres"
            )
    # The count question about lamps is never asked (the only lamp was never seen).
    assert not any("lamps" in q.question for q in questions)


def test_a_barely_visible_member_blocks_the_count() -> None:
    world = room(
        obj(1, "red chair", 2.0, 1.5), obj(2, "blue chair", -2.0, 1.5), obj(3, "black box", 0.0, -1.0)
    )
    vis = visibility({1: 1.0, 3: 2.0}, 3)
    vis.pixels[10, 2] = int(0.001 * PIXELS)  # a sliver of the blue chair, below the "seen" threshold
    questions = generate_questions(
        world, still(), vis, np.random.default_rng(0), config=QuestionConfig(per_task=9)
    )
    counted = [q.question for q in questions if q.task == "object_count"]
    assert counted and not any("chairs" in text for text in counted)


def test_route_and_ego_motion_on_a_hand_built_walk() -> None:
    world = room(
        obj(1, "red chair", -2.0, -2.1),
        obj(2, "blue table", 1.0, 1.7, (1.4, 0.8, 0.75)),
        obj(3, "green box", 2.8, -2.0),
    )
    traj = _zigzag_walk()
    vis = visibility({1: 0.0, 2: 0.0, 3: 0.0}, 3, end_s=13.0)
    # Options are drawn with rejection (so that the truth is exchangeable with them): over a few draws.
    questions = [
        q
        for seed in range(1, 7)
        for q in generate_questions(
            world, traj, vis, np.random.default_rng(seed), config=QuestionConfig(per_task=20)
        )
    ]
    routes = [q for q in questions if q.task == "route"]
    assert routes, "the walk from the red chair to the blue table must give a route question"
    full = [q for q in routes if q.start_s == 0.0 and q.end_s == 13.0]
    assert full and full[0].answer_text == "turn left, then turn right"
    assert "red chair" in full[0].question and "blue table" in full[0].question
    for q in questions:
        if q.task == "ego_distance" and q.form == NUMERIC:
            assert q.answer == pytest.approx(traj.path_length(q.start_s, q.end_s), abs=1e-3)
        if q.task == "ego_turn":
            change = traj.yaw_deg(q.end_s) - traj.yaw_deg(q.start_s)
            assert q.answer_text.startswith("left" if change > 0 else "right")
            assert f"about {int(round(abs(change) / 15) * 15)} degrees" in q.answer_text


def test_appearance_order_from_rendered_frames() -> None:
    """A camera turning left in place sees three boxes east, north and west of it, in that order."""
    world = room(obj(1, "green box", -2.5, 0.0), obj(2, "red box", 2.5, 0.0), obj(3, "blue box", 0.0, 2.2))
    traj = Trajectory(
        StartState(0.0, 0.0, 1.0, -90.0, 10.0), [Segment(PAUSE, 1.0), Segment(TURN, 12.0, yaw_deg=300.0)]
    )
    cam = CameraModel.from_fov(96, 72)
    renderer = Renderer(world, cam)
    recorder = VisibilityRecorder(3, 96 * 72)
    for t in np.arange(0.0, 13.0 + 1e-9, 0.2):
        recorder.add(float(t), renderer.render(traj.pose(float(t))).ids)
    vis = recorder.result()
    firsts = [vis.first_seen(i, 0.0, 13.0) for i in (2, 3, 1)]
    assert None not in firsts and firsts == sorted(firsts)
    questions = generate_questions(
        world, traj, vis, np.random.default_rng(0), config=QuestionConfig(per_task=3)
    )
    order = [q for q in questions if q.task == "appearance_order"]
    assert order and order[0].answer_text == "red box, blue box, green box"
    # Turns are the net change of heading, unwrapped past 180 deg. Windows are drawn at random (and an
    # ego_turn question is asked only when its options can be drawn), so a few draws find the whole turn.
    turns = [
        q
        for seed in range(6)
        for q in generate_questions(
            world, traj, vis, np.random.default_rng(seed), config=QuestionConfig(per_task=3)
        )
        if q.task == "ego_turn"
    ]
    for q in turns:
        amount = round((traj.yaw_deg(q.end_s) - traj.yaw_deg(q.start_s)) / 15) * 15
        assert q.answer_text == f"left, about {amount} degrees"
    whole = [q for q in turns if q.end_s - q.start_s >= 12]
    assert whole and all(q.answer_text == "left, about 300 degrees" for q in whole)


def test_letters_are_balanced_and_options_plausible() -> None:
    letters: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        world = generate_world(rng)
        vis = visibility({o.id: 0.5 * o.id for o in world.objects}, len(world.objects))
        traj = Trajectory(
            StartState(0, 0, 1.25, 0, 0),
            [Segment(WALK, 10.0, forward_m=1.0), Segment(TURN, 10.0, yaw_deg=90.0)],
        )
        questions = generate_questions(world, traj, vis, rng, config=QuestionConfig(per_task=3))
        mc = [q for q in questions if q.form == MC]
        counts = collections.Counter(q.answer for q in mc if len(q.options) == 4)
        assert max(counts.values()) - min(counts.values()) <= 1, counts  # per scene
        for q in mc:
            letters[len(q.options)][q.answer] += 1
            if q.task in ("abs_distance", "object_size", "ego_distance"):
                values = sorted(float(o.split()[0]) for o in q.options)
                assert all(b >= 1.15 * a for a, b in zip(values, values[1:], strict=False)), q.options
    assert set(letters[4]) == set("ABCD")


def test_questions_are_reproducible_and_round_trip(tmp_path) -> None:
    world = generate_world(np.random.default_rng(4))
    vis = visibility({o.id: 0.5 * o.id for o in world.objects}, len(world.objects))
    traj = Trajectory(
        StartState(0, 0, 1.25, 0, 0), [Segment(WALK, 10.0, forward_m=2.0), Segment(TURN, 10.0, yaw_deg=120.0)]
    )
    a = generate_questions(
        world, traj, vis, np.random.default_rng(9), scene_id="scene_0004", start_ns=5 * 10**18
    )
    b = generate_questions(
        world, traj, vis, np.random.default_rng(9), scene_id="scene_0004", start_ns=5 * 10**18
    )
    assert a == b and len({q.id for q in a}) == len(a)
    assert {q.task for q in a} <= set(TASKS)
    path = tmp_path / "questions.jsonl"
    write_questions(path, a)
    assert read_questions(path) == a
    first = json.loads(path.read_text().splitlines()[0])
    assert list(first)[:11] == [
        "id",
        "bag",
        "start_s",
        "end_s",
        "start_ns",
        "end_ns",
        "task",
        "form",
        "question",
        "options",
        "answer",
    ]
    assert first["start_ns"] == 5 * 10**18 + round(first["start_s"] * 1e9)
    assert bag_path(path, a[0]) == tmp_path / "bag"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: .*no 'question'"):
        read_questions(bad)


def test_question_config_is_checked() -> None:
    with pytest.raises(ValueError, match="per_task"):
        QuestionConfig(per_task=0)
    with pytest.raises(ValueError, match="forms"):
        QuestionConfig(forms=("essay",))
    assert math.isclose(QuestionConfig().min_fraction, 0.002)
