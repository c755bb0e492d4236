"""Prompt building and VLM reply parsing (no models): the paper's structure, our wording."""

import math

import numpy as np
import pytest

from embodied_r_ros.frames import Frame, Pose
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.perception import Description, parse_action, parse_descriptions, parse_step_reply
from embodied_r_ros.reasoning import prompts
from embodied_r_ros.reasoning.messages import reasoning_messages


@pytest.mark.parametrize(
    "text, label",
    [
        ("move forward", "move forward"),
        ("Move Backward.", "move backward"),
        ("I turned to the left", "rotate left"),
        ("rotating right slowly", "rotate right"),
        ("the drone flew upward", "move upward"),
        ("descended", "move downward"),
        ("tilt down", "tilt downward"),
        ("tilted upwards", "tilt upward"),
        ("strafed right", "move right"),
        ("walked straight ahead", "move forward"),
        ("no idea", None),
        ("", None),
    ],
)
def test_parse_action(text, label):
    assert parse_action(text) == label


def test_parse_step_reply_forms():
    assert parse_step_reply("Action: rotate left\nObservation: a red sofa appears on the left.") == (
        "rotate left",
        "a red sofa appears on the left.",
    )
    action, observation = parse_step_reply("Action: move forward. A lamp is now ahead.")
    assert action == "move forward" and observation == ""
    assert parse_step_reply("A table is ahead-right.") == (None, "A table is ahead-right.")
    assert parse_step_reply("observation: the door\nis closer\naction: tilt up") == (
        "tilt upward",
        "the door is closer action: tilt up",
    )


def test_letter_options_keeps_existing_letters():
    assert prompts.letter_options(["chair", "lamp"]) == ["A. chair", "B. lamp"]
    assert prompts.letter_options(["A. chair", "B) lamp"]) == ["A. chair", "B. lamp"]
    # "A" as an article is not a letter prefix of option B.
    assert prompts.letter_options(["sofa", "A chair"]) == ["A. sofa", "B. A chair"]
    with pytest.raises(ValueError, match="at most 26"):
        prompts.letter_options([str(i) for i in range(27)])


def test_reasoning_prompt_has_the_papers_structure():
    descriptions = [
        Description(0, 10, None, "a red chair ahead-left,\n a door ahead", "raw0"),
        Description(1, 20, "rotate left", "a sofa on the left", "raw1", "vlm"),
        Description(2, 30, "I moved forward 1.8 m", "the door is close", "raw2", "odometry"),
    ]
    system, user = reasoning_messages(descriptions, "Which object is closest to the door?", ["chair", "sofa"])
    assert system.role == "system" and "<think>" in system.joined_text and "<answer>" in system.joined_text
    lines = user.joined_text.splitlines()
    assert lines[0].startswith("You are a robot.")
    assert lines[1] == "Frame 0: Observe: a red chair ahead-left, a door ahead"
    assert lines[2] == "Frame 1: After rotate left, Observe: a sofa on the left"
    assert lines[3] == "Frame 2: After I moved forward 1.8 m, Observe: the door is close"
    assert "Question: Which object is closest to the door?" in lines
    assert lines[lines.index("Options:") + 1 : lines.index("Options:") + 3] == ["A. chair", "B. sofa"]
    _, numeric = reasoning_messages(descriptions, "How far is the door?", [])
    assert "Options:" not in numeric.joined_text and "number" in numeric.joined_text


def _keyframe(index: int, yaw_deg: float | None, x: float = 0.0) -> KeyFrame:
    pose = None
    if yaw_deg is not None:
        half = math.radians(yaw_deg) / 2
        pose = Pose((x, 0.0, 0.0), (0.0, 0.0, math.sin(half), math.cos(half)))
    image = np.full((8, 8, 3), index, dtype=np.uint8)
    return KeyFrame(frame=Frame(image, 1_000 + index, pose), index=index)


def test_odometry_replaces_the_vlm_action():
    keyframes = [_keyframe(0, 0.0), _keyframe(1, 90.0, x=0.0), _keyframe(2, 90.0, x=-2.0)]
    replies = ["a room", "Action: rotate right\nObservation: a lamp", "Action: move forward\nObservation: x"]
    descriptions = parse_descriptions(keyframes, replies)
    assert descriptions[0].action is None and descriptions[0].observation == "a room"
    assert descriptions[1].action_source == "odometry" and "left" in descriptions[1].action
    assert "right" not in descriptions[1].action  # odometry wins over the VLM's (wrong) label
    # x decreased by 2 m while facing +y (yaw 90): the robot's left is -x, so it moved left, not forward.
    assert descriptions[2].action == "I moved left 2.0 m"


def test_without_poses_the_vlm_label_is_used():
    keyframes = [_keyframe(0, None), _keyframe(1, None)]
    descriptions = parse_descriptions(keyframes, ["scene", "Action: tilt down\nObservation: the floor"])
    assert (descriptions[1].action, descriptions[1].action_source) == ("tilt downward", "vlm")
    descriptions = parse_descriptions(keyframes, ["scene", "gibberish"])
    assert (descriptions[1].action, descriptions[1].action_source) == (None, "none")
    with pytest.raises(ValueError):
        parse_descriptions(keyframes, ["only one reply"])
