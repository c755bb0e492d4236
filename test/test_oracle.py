"""The oracle reasoner reads the prompt and nothing else: every task's answer from the descriptions' text,
a changed text changes the answer, and missing evidence gives no answer."""

from __future__ import annotations

import pytest
from embodied_r_training.tasks.oracle import oracle_answer, oracle_trace, question_task
from embodied_r_training.tasks.reading import read_prompt

from embodied_r_ros.reasoning.prompts import reasoning_prompt

CHAIR = "red chair ahead, near, 2 m, longest side 0.90 m, at (2.00, 0.00, 0.45)"
TABLE = "blue table left, far, 3 m, longest side 1.40 m, at (1.00, 3.00, 0.38)"
SOFA = "green sofa right, far, 4 m, longest side 2.10 m, at (4.00, -2.00, 0.42)"
LEGEND = "Positions are metres from where I stand: x ahead, y left, z above the floor."


def prompt(frames: list[str], question: str, options: tuple[str, ...] = ()) -> str:
    """A reasoning prompt as the node builds it: frame 0's observation, then (action, observation)."""
    observations = [(None if j == 0 else "I moved forward 1.0 m", text) for j, text in enumerate(frames)]
    return reasoning_prompt(observations, question, options)


def scene(chair: str = CHAIR, table: str = TABLE, sofa: str = SOFA) -> list[str]:
    """Chair and table seen at frame 0, the sofa first seen at frame 2, the chair seen again there."""
    return [
        f"I see {chair}; {table}; black lamp left, far, 4 m. {LEGEND}",
        "Nothing new.",
        f"First seen: {sofa}. Seen again: the same red chair as in frame 0.",
    ]


DISTANCE = "What is the distance between the centres of the red chair and the blue table, in metres?"
SIZE = "What is the longest dimension (length, width or height) of the green sofa, in metres?"


def test_distances_and_sizes_follow_the_numbers_in_the_text() -> None:
    assert oracle_answer(prompt(scene(), DISTANCE)) == pytest.approx(3.16, abs=0.01)  # sqrt(1 + 9 + 0.07^2)
    moved = scene(table=TABLE.replace("(1.00, 3.00", "(1.00, 4.00"))
    assert oracle_answer(prompt(moved, DISTANCE)) == pytest.approx(4.12, abs=0.01)
    assert oracle_answer(prompt(scene(), SIZE)) == 2.1
    assert oracle_answer(prompt(scene(sofa=SOFA.replace("2.10", "1.70")), SIZE)) == 1.7
    options = ("1.2 m", "2.1 m", "3.2 m", "4.5 m")
    assert oracle_answer(prompt(scene(), SIZE, options)) == "B"
    assert oracle_answer(prompt(scene(sofa=SOFA.replace("2.10", "3.30")), SIZE, options)) == "C"


def test_order_of_first_appearance_from_the_key_frames() -> None:
    question = (
        "In what order do these objects first appear in the video: the green sofa, the red chair and "
        "the blue table?"
    )
    options = (
        "blue table, red chair, green sofa",
        "red chair, green sofa, blue table",
        "green sofa, red chair, blue table",
        "red chair, blue table, green sofa",
    )
    frames = [f"I see {CHAIR}. {LEGEND}", f"First seen: {TABLE}.", f"First seen: {SOFA}."]
    think, answer = oracle_trace(prompt(frames, question, options))
    assert answer == "D" and "The blue table is first seen in frame 1." in think
    # The order concluded, then the options checked a line each up to the one that reads it.
    lookup = (
        "So the order is red chair, blue table, green sofa.\n"
        "A. blue table, red chair, green sofa: no.\n"
        "B. red chair, green sofa, blue table: no.\n"
        "C. green sofa, red chair, blue table: no.\n"
        "D. red chair, blue table, green sofa: yes."
    )
    assert think.endswith(lookup)
    swapped = [f"I see {CHAIR}. {LEGEND}", f"First seen: {SOFA}.", f"First seen: {TABLE}."]
    assert oracle_answer(prompt(swapped, question, options)) == "B"
    # Two first appearances at one key frame: the order between them is not in the text.
    together = [f"I see {CHAIR}. {LEGEND}", f"First seen: {TABLE}; {SOFA}."]
    assert oracle_answer(prompt(together, question, options)) is None


def test_directions_and_nearest_objects_from_the_positions() -> None:
    question = (
        "If I am standing by the red chair and facing the green sofa, is the blue table to my front-left, "
        "front-right, back-left, or back-right?"
    )
    options = ("front-left", "front-right", "back-left", "back-right")
    # From (2, 0) facing (4, -2): the table at (1, 3) is 153 deg to the left, behind.
    assert oracle_answer(prompt(scene(), question, options)) == "C"
    ahead = TABLE.replace("(1.00, 3.00", "(5.00, 0.00")
    assert oracle_answer(prompt(scene(table=ahead), question, options)) == "A"
    closest = (
        "Which of these objects is closest to the red chair (measured between their centres): the blue "
        "table or the green sofa?"
    )
    assert oracle_answer(prompt(scene(), closest, ("blue table", "green sofa"))) == "B"  # 2.83 m vs 3.16 m
    # Each candidate's gaps, their squares and the sum on one line; the smallest sum; the lookup.
    think, _ = oracle_trace(prompt(scene(), closest, ("blue table", "green sofa")))
    sofa = "The green sofa at (4, -2, 0.42): gaps 2.00, 2.00, 0.03; squared 4.00 + 4.00 + 0.00 = 8.00."
    assert sofa in think
    lookup = "The smallest sum is 8.00: the green sofa.\nA. blue table: no.\nB. green sofa: yes."
    assert think.endswith(lookup)
    far_sofa = SOFA.replace("(4.00, -2.00", "(6.00, -2.00")
    assert oracle_answer(prompt(scene(sofa=far_sofa), closest, ("blue table", "green sofa"))) == "A"


def test_counts_take_each_object_once() -> None:
    chairs = "How many chairs appear in this video?"
    blue = "blue chair left, far, 3 m, longest side 0.92 m, at (1.00, 2.00, 0.46)"
    again = "Nothing new. Seen again: the same red chair as in frame 0."
    frames = [f"I see {CHAIR}. {LEGEND}", f"First seen: {blue}.", again]
    think, answer = oracle_trace(prompt(frames, chairs))
    assert answer == 2 and "2. the blue chair (frame 1)" in think and "That makes 2." in think
    assert oracle_answer(prompt(frames[:1], chairs)) == 1
    assert oracle_answer(prompt(frames, "How many lamps appear in this video?")) is None  # none described


def test_traces_copy_the_values_then_take_one_step_a_line_then_name_the_letter() -> None:
    # Shaped for a small model: the values it needs copied first, one arithmetic step a line, the
    # conclusion, and the letter last, next to the option it reads.
    options = ("1.2 m", "3.2 m", "2.1 m", "4.5 m")
    think, answer = oracle_trace(prompt(scene(), DISTANCE, options))
    lines = think.splitlines()
    assert lines[:2] == ["The red chair is at (2, 0, 0.45).", "The blue table is at (1, 3, 0.38)."]
    assert lines[2:5] == ["x: 2 - 1 = 1.00, squared 1.00", "y: 3 - 0 = 3.00, squared 9.00",
                          "z: 0.45 - 0.38 = 0.07, squared 0.00"]  # fmt: skip
    assert lines[5:7] == ["1.00 + 9.00 + 0.00 = 10.00", "The square root of 10.00 is 3.16."]
    assert lines[7:] == ["Options: A 1.2, B 3.2, C 2.1, D 4.5.", "Nearest to 3.16: 3.2 m, option B."]
    assert answer == "B"
    # Sums are built one addition a line, a right turn as a subtraction.
    frames = [
        "No objects in view.",
        "Path: walked 2.00 m, turned left 90 deg. Nothing new.",
        "Path: turned left 5 deg, walked 1.50 m. Nothing new.",
        "Path: turned right 100 deg, walked 0.50 m. Nothing new.",
    ]
    turn = "Which way did I turn in total during this clip, and by about how much?"
    turns = (
        "left, about 90 degrees",
        "right, about 15 degrees",
        "right, about 45 degrees",
        "left, about 15 degrees",
    )
    think, answer = oracle_trace(prompt(frames, turn, turns))
    # Each side added up alone, then the smaller side taken from the larger: no sum crosses zero.
    sides = "Frame 3: right 100\nLeft: 90 + 5 = 95\nRight: 100\nRight 100 - left 95 = 5\nIn total right 5 deg"
    assert sides in think
    assert think.endswith("Options right: B 15, C 45.\nNearest to 5: right, about 15 degrees, option B.")
    distance = "How far did I travel during this clip, measured along my path, in metres?"
    think, answer = oracle_trace(prompt(frames, distance))
    assert "2.00 + 1.50 = 3.50\n3.50 + 0.50 = 4.00\nIn total 4.00 m." in think and answer == 4.0
    # Direction: the two offsets, then the signs of their dot and cross products decide the quadrant.
    direction = (
        "If I am standing by the red chair and facing the green sofa, is the blue table to my front-left, "
        "front-right, back-left, or back-right?"
    )
    quadrants = ("front-left", "front-right", "back-left", "back-right")
    think, answer = oracle_trace(prompt(scene(), direction, quadrants))
    assert "Facing: (4 - 2, -2 - 0) = (2, -2)\nTarget: (1 - 2, 3 - 0) = (-1, 3)" in think
    assert "Ahead: 2 x (-1) = -2.00\n-2 x 3 = -6.00\n-2.00 - 6.00 = -8.00, so back." in think
    assert "Left: 2 x 3 = +6.00\n-2 x (-1) = +2.00\n6.00 - 2.00 = 4.00, so left." in think
    lookup = "So the blue table is back-left.\nA. front-left: no.\nB. front-right: no.\nC. back-left: yes."
    assert think.endswith(lookup) and answer == "C"


def test_room_size_from_its_sides() -> None:
    question = "What is the floor area of this room, in square metres?"
    frames = [f"I see {CHAIR}. {LEGEND} The room is 8.00 m by 6.00 m."]
    assert oracle_answer(prompt(frames, question)) == 48.0
    assert oracle_answer(prompt([frames[0].replace("6.00 m.", "5.00 m.")], question)) == 40.0
    assert oracle_answer(prompt([f"I see {CHAIR}."], question)) is None


def test_my_own_motion_from_the_path_accounts() -> None:
    frames = [
        "No objects in view.",
        "Path: walked 2.00 m, turned left 90 deg. Nothing new.",
        "Path: turned left 5 deg, walked 1.50 m. Nothing new.",
        "Path: turned right 100 deg, walked 0.50 m. First seen: red chair ahead, near, 1 m.",
    ]
    distance = "How far did I travel during this clip, measured along my path, in metres?"
    assert oracle_answer(prompt(frames, distance)) == 4.0
    turn = "Which way did I turn in total during this clip, and by about how much?"
    options = (
        "left, about 90 degrees",
        "right, about 15 degrees",
        "right, about 45 degrees",
        "left, about 15 degrees",
    )
    assert oracle_answer(prompt(frames, turn, options)) == "B"  # +90 + 5 - 100 = 5 deg right
    route = (
        "In this clip I walked from near the red chair to near the blue table. Which turns did I make on the "
        "way, in order?"
    )
    routes = ("turn left", "turn left, then turn right", "turn right, then turn left", "turn right")
    think, answer = oracle_trace(prompt(frames, route, routes))
    assert answer == "B" and "turn left (+95 deg, by frame 2)" in think
    # A turn too near a label's limit (25 deg: between straight on and a turn) is not named.
    blurred = [frames[0], "Path: walked 2.00 m, turned left 25 deg, walked 1.00 m. Nothing new."]
    assert oracle_answer(prompt(blurred, route, routes)) is None
    assert oracle_answer(prompt(frames[:1], distance)) is None  # one key frame: no motion at all
    no_path = [frames[0], "Nothing new."]
    assert oracle_answer(prompt(no_path, distance)) is None


def test_altitude_from_climbs_and_flights() -> None:
    frames = [
        "No objects in view.",
        "Path: flew 12.0 m (up 3.0 m), turned right 40 deg. Nothing new.",
        "Path: descended 8.0 m. Nothing new.",
    ]
    numeric = "By how many metres did my altitude change during this clip (up or down)?"
    assert oracle_answer(prompt(frames, numeric)) == 5.0
    mc = "Did I fly up or down during this clip, and by about how much?"
    options = ("up, about 5 m", "down, about 5 m", "down, about 9 m", "up, about 3 m")
    assert oracle_answer(prompt(frames, mc, options)) == "B"
    climbed = [frames[0], frames[1], "Path: climbed 8.0 m. Nothing new."]
    assert oracle_answer(prompt(climbed, mc, options)) == "A"  # up 11 m: of the "up" options, 5 m is nearest
    travel = "How far did I travel during this clip, measured along my path, in metres?"
    assert oracle_answer(prompt(frames, travel)) == 20.0  # 12 m flown + 8 m descended


def test_what_is_not_a_prompt_gets_no_answer() -> None:
    assert oracle_answer("What is the distance between the centres of the red chair and the lamp?") is None
    assert read_prompt(prompt(scene(), DISTANCE)).sightings["green sofa"].frame == 2
    assert question_task(DISTANCE) == "abs_distance" and question_task("What colour is the sky?") is None
    assert oracle_answer(prompt(scene(), "What colour is the red chair?")) is None
