"""Ground-truth perception (a measuring instrument for simulator bags, never a VLM): the descriptions
against hand-computed geometry, the same parsing as a VLM's replies, and its wiring into the pipeline and
``embodied-r prepare``."""

from __future__ import annotations

import json
from pathlib import Path

import ground_truth_scene as scene
import pytest
from embodied_r_training.synth.ground_truth import (
    GroundTruthError,
    GroundTruthPerceiver,
    GroundTruthScenes,
    direction_words,
    mentioned_objects,
    round_distance,
    scene_file_for_bag,
)
from embodied_r_training.synth.world import BOX, CYLINDER, INDOOR, Room, SceneObject, World

from embodied_r_ros.backends import BackendError
from embodied_r_ros.cli.parts import perceivers
from embodied_r_ros.config import (
    ConfigError,
    ModelConfig,
    PerceptionConfig,
    PipelineConfig,
    from_dict,
    model_config,
)
from embodied_r_ros.perception import PerceptionQuery, parse_step_reply
from embodied_r_ros.pipeline import EmbodiedR
from embodied_r_ros.reasoning.prompts import ACTIONS

QUESTION = "Is the red chair nearer to me than the yellow lamp?"


@pytest.fixture(scope="module")
def perceiver(tmp_path_factory: pytest.TempPathFactory) -> GroundTruthPerceiver:
    return GroundTruthPerceiver(scene.write_scene(tmp_path_factory.mktemp("scene")))


def test_first_key_frame_lists_what_is_in_view_nearest_first(perceiver: GroundTruthPerceiver) -> None:
    first = perceiver.replies_for(scene.keyframes((0.0,)), "What is around me?")[0]
    # Straight ahead, centre 2 m away; 25 deg left, centre 3.31 m away. The blue box is behind the camera
    # and the green stool hidden behind the red chair: neither is listed.
    assert first == "I see red chair ahead, near, 2 m; yellow lamp left, far, 3.5 m."


def test_an_object_is_hidden_only_by_the_occluder(tmp_path: Path) -> None:
    open_view = GroundTruthPerceiver(scene.write_scene(tmp_path, with_occluder=False))
    first = open_view.replies_for(scene.keyframes((0.0,)), "What is around me?")[0]
    assert "green stool ahead, far, 4 m" in first and "blue box" not in first


def test_steps_name_the_true_motion_and_the_question_objects(perceiver: GroundTruthPerceiver) -> None:
    replies = perceiver.replies_for(scene.keyframes(), QUESTION)
    # Question objects come with their longest side and their centre on the map of key frame 0 (x ahead,
    # y left of the camera there, z above the floor): the chair is a 0.6 m cube 2 m ahead at eye height,
    # the lamp a 1.6 m tall cylinder at (3, 3 tan 25 deg).
    assert replies[0] == (
        "I see red chair ahead, near, 2 m, longest side 0.60 m, at (2.00, 0.00, 1.25); yellow lamp left, "
        "far, 3.5 m, longest side 1.60 m, at (3.00, 1.40, 1.25). Positions are metres from where I stand: "
        "x ahead, y left, z above the floor."
    )
    # Objects seen at an earlier key frame are not listed as new again.
    assert replies[1] == "Action: move forward\nObservation: Nothing new."
    assert replies[2] == "Action: rotate left\nObservation: Nothing new."
    other = perceiver.replies_for(scene.keyframes(), "How many stools are there?")
    assert other[1] == "Action: move forward\nObservation: Nothing new." and "stool" not in " ".join(other)
    assert all(r.split("\n")[0].removeprefix("Action: ") in ACTIONS for r in replies[1:])


def test_motion_questions_get_the_path_and_objects_keep_their_identity(
    perceiver: GroundTruthPerceiver,
) -> None:
    question = "How far did I walk, and is the red chair still there?"
    replies = perceiver.replies_for(scene.keyframes(), question)
    # The walk is 1 m forward, then a turn of 60 deg to the left on the spot.
    assert replies[1] == "Action: move forward\nObservation: Path: walked 1.00 m. Nothing new."
    assert replies[2] == "Action: rotate left\nObservation: Path: turned left 60 deg. Nothing new."
    # Turning away from the chair and back: the chair is the same one as in frame 0, not a new one.
    back = perceiver.replies_for(scene.keyframes((0.0, 4.0, 0.0)), question)
    assert "First seen" not in back[2] and back[2].endswith("Seen again: the same red chair as in frame 0.")
    room = perceiver.replies_for(scene.keyframes((0.0,)), "What is the floor area of this room?")
    assert room[0].endswith("The room is 10.00 m by 10.00 m.")


def test_newly_visible_objects_are_listed_with_where_they_are(perceiver: GroundTruthPerceiver) -> None:
    # Turning back from 60 deg left to straight ahead brings the red chair back into view.
    replies = perceiver.replies_for(scene.keyframes((4.0, 0.0)), "Where is the sofa?")
    assert replies[1].startswith("Action: rotate right\nObservation: First seen: red chair ahead, near, 2 m")


def test_descriptions_have_the_form_a_vlm_reply_gets(perceiver: GroundTruthPerceiver) -> None:
    keyframes = scene.keyframes()
    replies = perceiver.replies_for(keyframes, QUESTION)
    descriptions = perceiver.describe(keyframes, QUESTION)
    assert descriptions[0].action is None and descriptions[0].observation == replies[0]
    for description, reply in zip(descriptions[1:], replies[1:], strict=True):
        assert (description.action, description.observation) == parse_step_reply(reply)
        assert description.action_source == "vlm"  # the label of the reply, as for a VLM without poses
    # With poses on the key frames the action is odometry's account, exactly as for a VLM.
    with_poses = perceiver.describe(scene.keyframes(poses=True), QUESTION)
    assert with_poses[1].action == "I moved forward 1.0 m" and with_poses[1].action_source == "odometry"
    assert [d.observation for d in with_poses] == [d.observation for d in descriptions]
    batch = perceiver.replies(
        [PerceptionQuery(keyframes, QUESTION), PerceptionQuery(keyframes[:1], QUESTION)]
    )
    assert batch == [replies, replies[:1]]
    assert perceiver.label == "ground-truth:scene.json"


def test_question_objects_come_from_the_text_only() -> None:
    objects = (
        SceneObject(1, "chair", "red", BOX, (0.5, 0.5, 0.9), (1.0, 0.0, 0.45)),
        SceneObject(2, "chair", "blue", BOX, (0.5, 0.5, 0.9), (2.0, 0.0, 0.45)),
        SceneObject(3, "lamp", "black", CYLINDER, (0.3, 0.3, 1.6), (3.0, 0.0, 0.8)),
        SceneObject(4, "lamp post", "grey", CYLINDER, (0.3, 0.3, 6.0), (4.0, 0.0, 3.0)),
        SceneObject(5, "box", "green", BOX, (0.5, 0.5, 0.5), (5.0, 0.0, 0.25)),
    )
    world = World(INDOOR, objects, (-5, 5, -5, 5), Room((12.0, 12.0, 3.0)))

    def names(question: str, options: tuple[str, ...] = ()) -> list[str]:
        return [o.name for o in mentioned_objects(world, question, options)]

    assert names("Which is closer to the red chair?", ("the green box", "the grey lamp post")) == [
        "red chair",
        "grey lamp post",
        "green box",
    ]
    assert names("How many chairs appear in this video?") == ["red chair", "blue chair"]
    assert names("Where is the lamp?") == ["black lamp"]  # a category alone; a lamp post is no lamp
    assert names("How many boxes are there?") == ["green box"]
    assert names("How far did I walk?") == []


def test_distances_and_directions_in_words() -> None:
    assert [round_distance(d) for d in (0.1, 1.26, 2.0, 4.6, 4.8, 12.4)] == [0.5, 1.5, 2.0, 4.5, 5.0, 12.0]
    assert direction_words(0.0, 0.0) == "ahead" and direction_words(-15.0, 0.0) == "ahead-right"
    assert direction_words(30.0, -50.0) == "left below"


def test_key_frames_from_another_recording_are_refused(perceiver: GroundTruthPerceiver) -> None:
    far = scene.keyframes((0.0, 100.0))
    with pytest.raises(GroundTruthError, match="not from this scene's bag"):
        perceiver.replies_for(far, QUESTION)


def test_scene_files_of_bags(tmp_path: Path) -> None:
    bag = tmp_path / "scene_0003" / "bag"
    assert scene_file_for_bag(bag) == tmp_path / "scene_0003" / "scene.json"
    assert scene_file_for_bag(bag, "/data/one.json") == Path("/data/one.json")
    with pytest.raises(GroundTruthError, match="does not exist"):
        GroundTruthScenes().for_bag(bag)
    assert GroundTruthScenes().label == "ground-truth:scene.json"


def test_ground_truth_is_no_model_backend() -> None:
    # Ground truth is a perceiver now: as a model backend it is refused with the settings that replace it.
    fix = r"perception\.perceiver: ground_truth and perception\.scene"
    with pytest.raises(ConfigError, match=fix):
        ModelConfig(model="scene.json", backend="ground_truth")
    with pytest.raises(ConfigError, match=fix):
        from_dict(PipelineConfig, {"vlm": {"backend": "ground_truth", "model": "scene.json"}})


def test_pipeline_answers_with_ground_truth_and_the_tiny_lm(
    perceiver: GroundTruthPerceiver, tiny_models_dir: Path
) -> None:
    config = PipelineConfig(
        perception=PerceptionConfig(perceiver="ground_truth", scene=str(perceiver.scene.path)),
        lm=model_config(str(tiny_models_dir / "lm"), device="cpu", dtype="float32", max_new_tokens=8),
    )
    pipeline = EmbodiedR.from_config(config, perceivers=perceivers())
    try:
        answer = pipeline.answer(QUESTION, ["yes", "no"], keyframes=scene.keyframes(poses=True))
    finally:
        pipeline.close()
    assert pipeline.perceiver.label == "ground-truth:scene.json"
    assert pipeline.perception.startswith("ground-truth perception (simulator geometry, not a VLM) from ")
    assert pipeline.pre_encoder() is None  # no vision tower: nothing to encode ahead
    assert answer.descriptions[0].observation.startswith("I see red chair ahead")
    assert answer.descriptions[2].action == "I turned left 60 deg"
    assert answer.choice in (None, "A", "B")


def test_pipeline_names_a_missing_scene_file(tmp_path: Path, tiny_models_dir: Path) -> None:
    config = PipelineConfig(
        perception=PerceptionConfig(perceiver="ground_truth", scene=str(tmp_path / "nowhere.json")),
        lm=model_config(str(tiny_models_dir / "lm"), device="cpu"),
    )
    with pytest.raises(BackendError, match=r"perception.scene = .*nowhere.json.*does not exist"):
        EmbodiedR.from_config(config, perceivers=perceivers())
    unset = PipelineConfig(perception=PerceptionConfig(perceiver="ground_truth"))
    with pytest.raises(BackendError, match="needs perception.scene = the scene.json"):
        EmbodiedR.from_config(unset, perceivers=perceivers())


def test_prepare_with_ground_truth_perception(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from embodied_r_ros.cli.main import main

    synth = tmp_path / "synth"
    args = ["--scenes", "1", "--size", "96x72", "--rate", "5", "--duration", "8"]
    assert main(["synth", "--out", str(synth), *args]) == 0
    out, cache = tmp_path / "ds", tmp_path / "cache"
    prepare = ["prepare", str(synth / "questions.jsonl"), "--out", str(out), "--cache", str(cache)]
    assert main([*prepare, "--perceiver", "ground_truth", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "ground-truth:scene.json, ground-truth perception (simulator geometry, not a VLM)" in printed
    records = [
        json.loads(line)
        for split in ("train", "val", "test")
        for line in (out / f"{split}.jsonl").read_text().splitlines()
    ]
    assert records and {r["vlm"] for r in records} == {"ground-truth:scene.json"}
    world = json.loads((synth / "scene_0000" / "scene.json").read_text())["world"]
    names = {f"{o['colour']} {o['category']}" for o in world["objects"]}
    prompts = [r["prompt"][1]["content"] for r in records]
    assert any(name in prompt.split("Question:")[0] for prompt in prompts for name in names)
    assert all("Frame 1: After I " in p for p in prompts if "Frame 1:" in p)  # odometry actions
    assert json.loads((out / "summary.json").read_text())["perception"] == "ground-truth:scene.json"
    assert not cache.exists() or not any(cache.rglob("*.json"))  # the description cache is bypassed
    # A VLM backend still needs --vlm.
    assert main([*prepare, "--vlm-backend", "openai"]) == 2
    assert "--vlm is required with --vlm-backend openai" in capsys.readouterr().err
    # The old spelling names the new one.
    assert main([*prepare, "--vlm-backend", "ground_truth"]) == 2
    assert "--vlm-backend ground_truth is now --perceiver ground_truth" in capsys.readouterr().err
