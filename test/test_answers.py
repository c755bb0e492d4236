"""Tests of embodied_r_ros.reasoning.answers: completion parsing, choice letters, numbers, MRA and Answer."""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from embodied_r_ros.reasoning.answers import (
    Answer,
    ParsedCompletion,
    answer_from_completion,
    extract_choice,
    extract_number,
    mean_relative_accuracy,
    parse_completion,
)

# ----------------------------------------------------------------------------------------------------
# parse_completion


@pytest.mark.parametrize(
    ("text", "think", "answer", "well_formed"),
    [
        ("<think>look left</think><answer>B</answer>", "look left", "B", True),
        ("  \n<think> a </think>\n\n<answer> B </answer>\n ", "a", "B", True),
        ("<think></think><answer>B</answer>", "", "B", True),  # empty think allowed (paper's regex)
        # The public reference code's bug: a letter inside <think> must not beat the answer.
        ("<think>Option B. is wrong</think><answer>E</answer>", "Option B. is wrong", "E", True),
        ("<think>so it is B</think><answer></answer>", "so it is B", "", False),  # empty answer
        ("<think>so it is B</think><answer>   </answer>", "so it is B", "", False),
        ("<think>so it is B</think>", "so it is B", "", False),  # letter only in think
        ("<think>x</think><answer>A</answer><answer>C</answer>", "x", "C", False),  # last block wins
        ("<think>x</think><answer>A</answer><answer>C", "x", "A", False),  # truncated 2nd block
        ("<think>x</think><answer>A</answer> I hope this helps", "x", "A", False),  # trailing text
        ("Sure! <think>x</think><answer>A</answer>", "x", "A", False),  # leading text
        ("<think>x</think> because <answer>A</answer>", "x", "A", False),  # text between blocks
        ("<think>x</think><answer>D", "x", "", False),  # truncated inside <answer>
        ("<think>still thinking about B", "", "", False),  # truncated inside <think>
        ("<answer>C</answer>", "", "C", False),  # no think
        ("C", "", "", False),  # no tags: answer is never read from free text
        ("", "", "", False),
        ("   \n\t ", "", "", False),
        ("<think>use <answer>A</answer></think><answer>B</answer>", "use <answer>A</answer>", "B", False),
        ("<think>use <answer>A</answer></think>", "use <answer>A</answer>", "", False),
        ("<answer>A</answer><think>x</think>", "x", "", False),  # answer must follow the reasoning
        ("<answer><answer>A</answer>", "", "A", False),  # nested opening: content after the last one
        ("<think>x</think><think>y</think><answer>B</answer>", "x", "B", False),  # two thinks
        ("<THINK>x</THINK><ANSWER>B</ANSWER>", "", "", False),  # tags are lower case
        ("<think>x<answer>B</answer>", "", "B", False),  # unclosed think: no think block
        ("</think><answer>B</answer>", "", "B", False),
        ("<think>左边 ☕ ok</think><answer>２ 米</answer>", "左边 ☕ ok", "２ 米", True),
        ("<think>\ud800</think><answer>\U0001f600</answer>", "\ud800", "\U0001f600", True),
    ],
)
def test_parse_table(text: str, think: str, answer: str, well_formed: bool) -> None:
    assert parse_completion(text) == ParsedCompletion(think=think, answer=answer, well_formed=well_formed)


def test_parsed_completion_is_frozen() -> None:
    parsed = parse_completion("<think>a</think><answer>B</answer>")
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.answer = "C"  # type: ignore[misc]


@pytest.mark.parametrize("weird", [None, b"<think>a</think><answer>B</answer>", 12, ["<answer>B</answer>"]])
def test_parse_non_str_input_never_raises(weird: object) -> None:
    parsed = parse_completion(weird)  # type: ignore[arg-type]
    assert isinstance(parsed, ParsedCompletion)


def test_parse_bytes_are_decoded() -> None:
    assert parse_completion(b"<think>a</think><answer>B</answer>").answer == "B"  # type: ignore[arg-type]


ADVERSARIAL = [
    "<think>" * 20000,
    "<answer>" * 20000,
    "</answer>" * 20000,
    "<think>" * 10000 + "</think>" * 10000 + "<answer>" * 10000,
    "<answer>x</answer>" * 6000,
    "<think>" + "a" * 100_000,
    "option" + " " * 100_000 + "x",
    "the answer is" + " " * 100_000,
    "(" + " " * 100_000,
    "( " * 50_000,
    "A " * 50_000,
    "1" * 100_000,
    "1," * 50_000,
    "-" * 100_000,
    "twenty " * 15_000,
    "3" + " " * 100_000 + "m",
    "sq " * 30_000,
    "3 m " * 25_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:12]))
def test_adversarial_inputs_return(text: str) -> None:
    # Quadratic/exponential regex backtracking would make these hang; they must simply return.
    parsed = parse_completion(text)
    assert not parsed.well_formed
    extract_choice(text)
    extract_choice(text, ["chair", "lamp", "table"])
    extract_number(text)
    answer = answer_from_completion(text, "q?", [])
    assert answer.completion == text


def test_adversarial_answer_in_long_completion() -> None:
    text = "<think>" + "blah " * 20_000 + "</think>" + "<answer>" * 5000 + "B</answer>"
    parsed = parse_completion(text)
    assert parsed.answer == "B"
    assert not parsed.well_formed


def test_random_strings_never_raise() -> None:
    rng = random.Random(1234)
    pieces = ["<think>", "</think>", "<answer>", "</answer>", "<", ">", "/", "A", "b", "(", ")", ".", " ",
              "\n", "Option", "answer is", "3", "-", ",", "e", "m", "cm", "ft", "sq", "²", "twenty", "one",
              "中", "\U0001f600", "\ud800", "\x00", "−", "１"]  # fmt: skip
    options = ["A. chair", "B. lamp", "C. red chair"]
    for _ in range(1500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))
        parsed = parse_completion(text)
        assert isinstance(parsed.well_formed, bool)
        choice = extract_choice(parsed.answer, options)
        assert choice is None or choice in "ABC"
        letter = extract_choice(text)
        assert letter is None or (len(letter) == 1 and letter.isupper())
        value = extract_number(text)
        assert value is None or math.isfinite(value)
        if parsed.well_formed:  # then the structure really is think-block + answer-block
            body = text.strip()
            assert body.startswith("<think>") and body.endswith("</answer>") and parsed.answer


def test_random_bytes_never_raise() -> None:
    rng = random.Random(99)
    for _ in range(200):
        text = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))).decode("latin-1")
        parse_completion(text)
        extract_choice(text, ["x", "y"])
        extract_number(text)


# ----------------------------------------------------------------------------------------------------
# extract_choice


@pytest.mark.parametrize(
    ("answer", "options", "expected"),
    [
        ("B", None, "B"),
        ("(B)", None, "B"),
        ("B.", None, "B"),
        ("b", None, "B"),
        ("  **C**  ", None, "C"),
        ("[D]:", None, "D"),
        ("E", None, "E"),  # no options: any letter A-Z
        ("B) left", None, "B"),
        ("(b) left of the door", None, "B"),
        ("B. the lamp", None, "B"),
        ("Option B", None, "B"),
        ("option (c) is right", None, "C"),
        ("The answer is B", None, "B"),
        ("Answer: **C**", None, "C"),
        ("I think it is (C).", None, "C"),
        ("B is closer", None, "B"),
        ("It is B, the lamp", None, "B"),
        ("I think B", None, "B"),  # "I" before a lower-case word is the pronoun
        ("A is closer", None, "A"),
        ("Ｂ", None, "B"),  # full-width letter (NFKC)
        # Ambiguity: two different letters with equal standing.
        ("A or B", None, None),
        ("A and B", None, None),
        ("Option A or option B", None, None),
        ("B is right of C", None, None),
        # Nothing readable.
        ("", None, None),
        ("   ", None, None),
        ("the lamp", None, None),
        ("None", None, None),
        ("options a and b", None, None),
        ("i.e. nothing", None, None),
    ],
)
def test_choice_table_without_options(answer: str, options: list[str] | None, expected: str | None) -> None:
    assert extract_choice(answer, options) == expected


LETTERED = ["A. the lamp", "B. the red chair", "C. the table", "D. the door"]
PLAIN = ["the lamp", "the red chair", "the table", "the door"]


@pytest.mark.parametrize("options", [LETTERED, PLAIN], ids=["lettered", "plain"])
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("B", "B"),
        ("d", "D"),
        ("E", None),  # not an option letter
        ("the red chair", "B"),  # option text only
        ("The Red Chair.", "B"),
        ("It is the table.", "C"),
        ("A red chair is closer", "B"),  # the article "A" loses to the option text (articles ignored)
        ("A table is closer", "C"),
        ("A is closer", "A"),  # no option text: "A" is the letter
        ("the lamp or the door", None),  # two option texts
        ("(C) the table", "C"),
        ("C, the table", "C"),
    ],
)
def test_choice_table_with_options(options: list[str], answer: str, expected: str | None) -> None:
    assert extract_choice(answer, options) == expected


@pytest.mark.parametrize(
    ("answer", "options", "expected"),
    [
        # The article "A" loses to a better reading: the option text.
        ("A chair is closer", ["A. table", "B. chair"], "B"),
        ("A chair is closer", ["table", "chair"], "B"),
        ("A lamp", ["lamp", "sofa"], "A"),
        # Option containment: the more specific option wins.
        ("the red chair", ["chair", "red chair"], "B"),
        ("the chair", ["chair", "red chair"], "A"),
        # An explicit letter beats option text.
        ("B, although the lamp looks close", ["lamp", "sofa"], "B"),
        # Letters limited to the options.
        ("E", ["a", "b", "c", "d"], None),
        ("E", ["a", "b", "c", "d", "e"], "E"),
        ("C", ["x", "y"], None),
        # Options with other prefix styles; letters come from the prefixes.
        ("lamp", ["(A) chair", "(B) lamp"], "B"),
        ("lamp", ["A) chair", "B) lamp"], "B"),
        ("lamp", ["A: chair", "B: lamp"], "B"),
        # Only some options look prefixed: treat all as plain text by position.
        ("B. King", ["B. King", "Elvis"], "B"),
        ("Elvis", ["B. King", "Elvis"], "B"),
        # Duplicate option texts are ambiguous.
        ("lamp", ["lamp", "lamp"], None),
        ("B", [], None),
    ],
)
def test_choice_rules(answer: str, options: list[str], expected: str | None) -> None:
    assert extract_choice(answer, options) == expected


def test_choice_reads_only_answer_tags_end_to_end() -> None:
    parsed = parse_completion("<think>Option B. is wrong</think><answer>E</answer>")
    assert extract_choice(parsed.answer) == "E"
    assert extract_choice(parsed.answer, ["a", "b", "c", "d", "e"]) == "E"
    parsed = parse_completion("<think>the answer is B</think><answer></answer>")
    assert extract_choice(parsed.answer, ["a", "b"]) is None


# ----------------------------------------------------------------------------------------------------
# extract_number


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("3", 3.0),
        ("3 chairs", 3.0),
        ("There are 12 chairs.", 12.0),
        ("-2.5", -2.5),
        ("+4", 4.0),
        ("−3 m", -3.0),  # unicode minus
        (".5", 0.5),
        ("1.2e3", 1200.0),
        ("5E-2 m", 0.05),
        ("1,250", 1250.0),  # thousands separator
        ("1,250,000", 1_250_000.0),
        ("2,5 m", 2.5),  # decimal comma
        ("2, 3", 2.0),  # a list: the first number
        ("1.5 m", 1.5),
        ("1.5m", 1.5),
        ("2 meters", 2.0),
        ("2 metres", 2.0),
        ("1 meter", 1.0),
        ("250 cm", 2.5),
        ("250cm", 2.5),
        ("35 centimeters", 0.35),
        ("1200 mm", 1.2),
        ("0.5 km", 500.0),
        ("10 ft", 3.048),
        ("10 feet", 3.048),
        ("1 foot", 0.3048),
        ("12 in", 0.3048),
        ("12 inches", 0.3048),
        ("3 in the room", 3.0),  # "in" followed by a word is not inches
        ("2 yards", 1.8288),
        ("3 m 20 cm", 3.2),
        ("3m20cm", 3.2),
        ("5 ft 10 in", 1.778),
        ("1 m and 50 cm", 1.5),
        ("3 m, 4 m", 3.0),  # same unit twice is a list, not a compound
        ("20 m^2", 20.0),
        ("20 m2", 20.0),
        ("20 m²", 20.0),
        ("20 sq m", 20.0),
        ("20 sqm", 20.0),
        ("20 square meters", 20.0),
        ("20 square metres", 20.0),
        ("20 meters squared", 20.0),
        ("100 sq ft", 9.290304),
        ("100 sq. ft.", 9.290304),
        ("100 square feet", 9.290304),
        ("100 ft²", 9.290304),
        ("10000 cm²", 1.0),
        ("three chairs", 3.0),
        ("Twelve", 12.0),
        ("zero", 0.0),
        ("seventeen", 17.0),
        ("twenty", 20.0),
        ("twenty-one chairs", 21.0),
        ("three meters", 3.0),
        ("one of the 4 chairs", 4.0),  # digits win over number words
        ("about 2.3 m from the sofa, 4 m from the door", 2.3),  # first quantity wins
        ("Qwen2 says 5", 5.0),  # numbers glued to words are not quantities
        ("２ 米", 2.0),  # full-width digit
        ("None", None),
        ("none", None),
        ("no chairs", None),
        ("", None),
        ("B", None),
        ("someone", None),
        ("1e999", None),  # not finite
        ("9" * 400, None),
    ],
)
def test_number_table(answer: str, expected: float | None) -> None:
    value = extract_number(answer)
    if expected is None:
        assert value is None
    else:
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_number_non_str_input() -> None:
    assert extract_number(None) is None  # type: ignore[arg-type]
    assert extract_number(b"3 m") == 3.0  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------------
# mean_relative_accuracy


@pytest.mark.parametrize(
    ("pred", "gt", "expected"),
    [
        (1.0, 1.0, 1.0),
        (3.0, 3.0, 1.0),
        # Exactly 10% off: inside thresholds 0.50..0.90 (<= 1 - t), outside 0.95 -> 9/10, both directions.
        (1.1, 1.0, 0.9),
        (0.9, 1.0, 0.9),
        (11.0, 10.0, 0.9),
        (9.0, 10.0, 0.9),
        # Exactly 20% off: the official float code gives 0.6 here (1 - 0.8 rounds below 0.2).
        (12.0, 10.0, 0.7),
        (8.0, 10.0, 0.7),
        (1.5, 1.0, 0.1),  # 50% off: only t = 0.50
        (0.5, 1.0, 0.1),
        (1.51, 1.0, 0.0),
        (1.0 + 0.1 + 1e-6, 1.0, 0.8),  # just past 10%
        (1.0 + 0.1 - 1e-6, 1.0, 0.9),
        (1.04, 1.0, 1.0),
        (1.05, 1.0, 1.0),  # 5% off: inside every threshold
        (1.06, 1.0, 0.9),
        (100.0, 1.0, 0.0),
        (-1.0, 1.0, 0.0),
        (-1.1, -1.0, 0.9),  # |gt| in the denominator
        (None, 1.0, 0.0),
        (float("nan"), 1.0, 0.0),
        (float("inf"), 1.0, 0.0),
        (0.0, 0.0, 1.0),
        (0.1, 0.0, 0.0),
    ],
)
def test_mra_values(pred: float | None, gt: float, expected: float) -> None:
    assert mean_relative_accuracy(pred, gt) == pytest.approx(expected, abs=1e-12)


def test_mra_matches_the_definition_off_boundaries() -> None:
    # Away from the exact decimal boundaries the result is the plain definition.
    rng = np.random.default_rng(7)
    thresholds = [0.5 + 0.05 * k for k in range(10)]
    for _ in range(2000):
        gt = float(rng.uniform(0.1, 50.0))
        pred = float(gt * (1 + rng.uniform(-0.7, 0.7)))
        rel = abs(pred - gt) / gt
        if min(abs(rel - (1 - t)) for t in thresholds) < 1e-6:
            continue
        expected = sum(rel <= 1 - t for t in thresholds) / 10
        assert mean_relative_accuracy(pred, gt) == pytest.approx(expected)


def test_mra_is_in_tenths() -> None:
    for pred in np.linspace(-1.0, 3.0, 97):
        score = mean_relative_accuracy(float(pred), 1.0)
        assert 0.0 <= score <= 1.0
        assert score * 10 == pytest.approx(round(score * 10))


@pytest.mark.parametrize("gt", [float("nan"), float("inf"), "abc", None])
def test_mra_rejects_bad_ground_truth(gt: object) -> None:
    with pytest.raises(ValueError, match="gt must be a finite number"):
        mean_relative_accuracy(1.0, gt)  # type: ignore[arg-type]


def test_mra_of_parsed_answer() -> None:
    value = extract_number("about 250 cm")
    assert mean_relative_accuracy(value, 2.5) == 1.0
    assert mean_relative_accuracy(extract_number("no idea"), 2.5) == 0.0


# ----------------------------------------------------------------------------------------------------
# Answer


def test_answer_multiple_choice() -> None:
    completion = "<think>The lamp was on the left, option A is wrong.</think>\n<answer>(B) the chair</answer>"
    answer = answer_from_completion(completion, "Which is closer?", ("A. lamp", "B. chair"))
    assert answer == Answer(
        question="Which is closer?",
        options=["A. lamp", "B. chair"],
        text="(B) the chair",
        choice="B",
        value=None,
        think="The lamp was on the left, option A is wrong.",
        well_formed=True,
        completion=completion,
    )
    assert answer.keyframe_stamps_ns == [] and answer.descriptions == []
    assert answer.perception_s == 0.0 and answer.reasoning_s == 0.0


def test_answer_numeric() -> None:
    completion = "<think>Two tiles of 1 m, then half a tile.</think><answer>250 cm</answer>"
    answer = answer_from_completion(completion, "How far is the door?", [])
    assert answer.options == []
    assert answer.choice is None
    assert answer.value == pytest.approx(2.5)
    assert answer.text == "250 cm"
    assert answer.well_formed


def test_answer_reads_nothing_from_think() -> None:
    completion = "<think>It is B, 3 m away</think><answer>"
    mc = answer_from_completion(completion, "q", ["x", "y"])
    assert (mc.choice, mc.text, mc.well_formed) == (None, "", False)
    numeric = answer_from_completion(completion, "q", [])
    assert numeric.value is None


def test_answer_defaults_are_not_shared() -> None:
    first = answer_from_completion("<answer>A</answer>", "q", ["x", "y"])
    second = answer_from_completion("<answer>A</answer>", "q", ["x", "y"])
    first.keyframe_stamps_ns.append(1)
    first.descriptions.append("d")
    assert second.keyframe_stamps_ns == [] and second.descriptions == []
    assert first.choice == "A" and not first.well_formed
