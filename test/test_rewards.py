"""GRPO rewards and the staged weight schedule: hand-written completions with known scores, the reference
model's batching, the schedule's epoch boundaries, and TRL 1.16's own reward call."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from embodied_r_training.rl.rewards import (
    REFERENCE_PROMPT_VERSION,
    ConsistencyConfig,
    ConsistencyReward,
    RewardContext,
    accuracy_reward,
    completion_text,
    format_reward,
    grade_batch,
    mask_answer_statements,
    reasons_left,
    register_reward,
    registered_reward,
    registered_rewards,
    unregister_reward,
)
from embodied_r_training.rl.schedule import (
    PAPER_STAGES,
    RewardSchedule,
    Stage,
    epoch_from_state,
)
from embodied_r_training.rl.staged_reward import StagedReward
from transformers import TrainerState

from embodied_r_ros.backends import ChatRequest, GenerationBackend, load_backend
from embodied_r_ros.config import ConfigError, ModelConfig, model_config

OPTIONS = ["the chair", "the lamp", "the table", "the door"]
QUESTION = "Which object is closest to me at the end of the video?"
DESCRIPTION = "Frame 0: Observe: a red chair ahead-left, a lamp on the right."


def _c(think: str, answer: str) -> str:
    return f"<think>{think}</think><answer>{answer}</answer>"


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


# ----------------------------------------------------------------------------------------------------
# Test double of the REFERENCE model only: replies with given strings and records every call, so that
# consistency scores can be checked exactly. The policy side is never faked.


class ScriptedReference:
    """A GenerationBackend whose replies are given in advance (reference model test double)."""

    def __init__(self, replies: Sequence[str]) -> None:
        self.config = ModelConfig(model="scripted-reference")
        self.supports_images = False
        self.replies = list(replies)
        self.calls: list[tuple[list[ChatRequest], int | None, float | None]] = []

    def generate(
        self,
        requests: Sequence[ChatRequest],
        *,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
    ) -> list[str]:
        self.calls.append((list(requests), max_new_tokens, temperature))
        replies, self.replies = self.replies[: len(requests)], self.replies[len(requests) :]
        assert len(replies) == len(requests), "the test scripted too few reference replies"
        return replies

    def close(self) -> None:
        pass


class CountingBackend:
    """A thin delegate around a real backend that counts generate calls and requests."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.config = inner.config
        self.supports_images = inner.supports_images
        self.calls: list[int] = []  # number of requests per call
        self.replies: list[str] = []

    def generate(self, requests: Sequence[ChatRequest], **kwargs: Any) -> list[str]:
        self.calls.append(len(requests))
        out = self.inner.generate(requests, **kwargs)
        self.replies.extend(out)
        return out

    def close(self) -> None:
        self.inner.close()


# ----------------------------------------------------------------------------------------------------
# format


@pytest.mark.parametrize(
    ("completion", "score"),
    [
        (_c("The chair is nearer.", "B"), 1.0),
        ("  <think>a</think>\n\n<answer>B</answer>\n", 1.0),  # whitespace around and between is fine
        (_c("", "B"), 1.0),  # empty reasoning allowed (paper's format rule)
        (_c("a", "B") + " Hope this helps.", 0.0),  # trailing text after </answer>
        ("<think>a</think><answer>A</answer><answer>B</answer>", 0.0),  # two answer tags
        ("<think>a</think> so <answer>B</answer>", 0.0),  # text between the blocks
        ("Sure! " + _c("a", "B"), 0.0),  # text before <think>
        ("<answer>B</answer>", 0.0),  # no reasoning block
        ("<think>a</think>", 0.0),  # no answer
        (_c("a", "  "), 0.0),  # empty answer
        ("<think>a <answer>B</answer></think><answer>B</answer>", 0.0),  # answer tag inside think
        ("<think>a</think><answer>B", 0.0),  # truncated
        ("", 0.0),
        (_chat(_c("a", "B")), 1.0),  # chat-message completion
        (_chat(_c("a", "B") + " extra"), 0.0),
        ([{"role": "assistant", "content": [{"type": "text", "text": _c("a", "B")}]}], 1.0),
        (None, 0.0),
        ([{"role": "assistant"}], 0.0),
    ],
)
def test_format_reward_table(completion: Any, score: float) -> None:
    assert format_reward([completion]) == [score]


def test_completion_text_joins_chat_messages() -> None:
    assert completion_text([{"role": "assistant", "content": "<think>a"}, {"content": "</think>"}]) == (
        "<think>a</think>"
    )
    assert completion_text(42) == ""  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------------
# accuracy


@pytest.mark.parametrize(
    ("completion", "solution", "score"),
    [
        (_c("The lamp is nearer.", "B"), "B", 1.0),
        (_c("x", "B"), "b", 1.0),  # solution letter case does not matter
        (_c("x", "(b)"), "B", 1.0),
        (_c("x", "**B.**"), "B", 1.0),
        (_c("x", "The answer is B"), "B", 1.0),
        (_c("x", "the lamp"), "B", 1.0),  # option text
        (_c("x", "C"), "B", 0.0),
        # adversarial: the letter only in the reasoning
        (_c("Option B is the closest, so it is B.", "unsure"), "B", 0.0),
        (_c("Option B is wrong.", "C"), "C", 1.0),  # "Option B" in think does not beat the answer
        (_c("Option B is wrong.", "C"), "B", 0.0),
        ("<think>It is B.</think>", "B", 0.0),  # no answer block at all
        ("The answer is B.", "B", 0.0),  # no tags: nothing is read
        # adversarial: two answer tags: the LAST block after the reasoning is the answer
        ("<think>x</think><answer>A</answer><answer>B</answer>", "B", 1.0),
        ("<think>x</think><answer>A</answer><answer>B</answer>", "A", 0.0),
        # adversarial: trailing text after </answer> is not read
        (_c("x", "B") + " Actually, A.", "B", 1.0),
        (_c("x", "B") + " Actually, A.", "A", 0.0),
        (_c("x", "A or B"), "B", 0.0),  # ambiguous
        (_c("x", "E"), "B", 0.0),  # not one of the four options
        (_chat(_c("x", "B")), "B", 1.0),
    ],
)
def test_accuracy_multiple_choice_table(completion: Any, solution: str, score: float) -> None:
    assert accuracy_reward([completion], solution=[solution], options=[OPTIONS]) == [score]


@pytest.mark.parametrize(
    ("answer", "solution", "score"),
    [
        ("2 m", 2.0, 1.0),
        ("2", 2.0, 1.0),
        ("200 cm", 2.0, 1.0),  # units are converted
        ("about 6.5 feet", 2.0, 1.0),  # 1.98 m: 0.9 % off
        ("2.2 meters", 2.0, 0.9),  # 10 % off: inside 9 of the 10 thresholds
        ("3m", 2.0, 0.1),  # 50 % off: only the loosest threshold
        ("5 m", 2.0, 0.0),
        ("12.5 square meters", "12.5", 1.0),  # solution given as a numeric string
        ("1,250 sq ft", 116.13, 1.0),  # 1250 sq ft = 116.13 m^2
        ("three chairs", 3, 1.0),
        ("unknown", 2.0, 0.0),
        ("", 2.0, 0.0),
    ],
)
def test_accuracy_numeric_table(answer: str, solution: Any, score: float) -> None:
    got = accuracy_reward([_c("x", answer)], solution=[solution], options=[[]])
    assert got == [pytest.approx(score)]


def test_numeric_value_in_think_only_scores_zero() -> None:
    completion = _c("The distance is 2 m.", "I cannot tell")
    assert accuracy_reward([completion], solution=[2.0], options=[[]]) == [0.0]


def test_row_kind_without_options_column() -> None:
    # No options column: a letter solution is multiple choice (any letter A-Z valid), else numeric.
    completions = [_c("x", "B"), _c("x", "4 chairs"), _c("x", "D")]
    assert accuracy_reward(completions, solution=["B", 4, "C"]) == [1.0, 1.0, 0.0]


def test_bad_solutions_name_the_row() -> None:
    with pytest.raises(ValueError, match=r"row 1: multiple-choice solution"):
        accuracy_reward([_c("x", "B")] * 2, solution=["B", 2.5], options=[OPTIONS, OPTIONS])
    with pytest.raises(ValueError, match=r"row 0: solution 'about two'"):
        accuracy_reward([_c("x", "2")], solution=["about two"], options=[[]])
    with pytest.raises(ValueError, match="column 'solution'"):
        accuracy_reward([_c("x", "B")], solution=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="column 'options' has 1 entries for 2 completions"):
        accuracy_reward([_c("x", "B")] * 2, solution=["B", "B"], options=[OPTIONS])


# ----------------------------------------------------------------------------------------------------
# consistency: exact values with the scripted reference


def _batch() -> dict[str, Any]:
    """Four completions of two questions: correct MC, wrong MC, correct numeric, malformed wrong."""
    return {
        "prompts": [DESCRIPTION] * 4,
        "completions": [
            _c("The lamp is on my right, 0.8 m away; the door is 2.5 m away.", "B"),
            _c("The door is nearest.", "D"),
            _c("I walked 1.2 m, then 0.9 m.", "2.1 m"),
            "The answer is B",
        ],
        "solution": ["B", "B", 2.0, "B"],
        "question": [QUESTION, QUESTION, "How far did I walk?", QUESTION],
        "options": [OPTIONS, OPTIONS, [], OPTIONS],
    }


def test_consistency_scores_only_correct_answers_in_one_call() -> None:
    reference = ScriptedReference(["B", "<think>hm</think><answer>2 m</answer>"])
    assert isinstance(reference, GenerationBackend)
    scores = ConsistencyReward(reference)(**_batch())
    assert scores == [1.0, 0.0, 1.0, 0.0]
    assert len(reference.calls) == 1
    requests, max_new_tokens, temperature = reference.calls[0]
    assert len(requests) == 2  # the wrong and the malformed answers were not sent
    assert temperature == pytest.approx(0.1) and max_new_tokens == ConsistencyConfig().max_new_tokens
    mc_text = "\n".join(m.joined_text for m in requests[0])
    assert QUESTION in mc_text and "B. the lamp" in mc_text and "D. the door" in mc_text
    assert "The lamp is on my right, 0.8 m away; the door is 2.5 m away." in mc_text
    assert "red chair" not in mc_text and "Frame 0" not in mc_text  # no video description
    assert "I walked 1.2 m, then 0.9 m." in "\n".join(m.joined_text for m in requests[1])


def test_consistency_disagreement_scores_zero() -> None:
    # Reference reads the reasoning as leading to C; numeric reference 3 m vs the policy's 2.1 m.
    reference = ScriptedReference(["C", "3 m"])
    scores = ConsistencyReward(reference)(**_batch())
    assert scores[0] == 0.0
    assert scores[2] == pytest.approx(0.2)  # 3 vs 2.1: 42.9 % off, inside 2 thresholds (graded)


def test_consistency_makes_no_call_when_nothing_is_correct() -> None:
    reference = ScriptedReference([])
    batch = _batch()
    batch["solution"] = ["A", "A", 50.0, "A"]
    assert ConsistencyReward(reference)(**batch) == [0.0] * 4
    assert reference.calls == []


def test_consistency_without_reasoning_scores_zero_and_asks_nothing() -> None:
    # A correct answer with an empty (or blank) think: the reference would guess B from the question
    # alone, but there is no reasoning to be consistent with, so it must not score (issue 11, item 3).
    reference = ScriptedReference(["B", "B"])
    completions = ["<think></think><answer>B</answer>", "<think>  </think><answer>B</answer>"]
    batch = {"completions": completions, "solution": ["B", "B"], "question": [QUESTION] * 2}
    assert ConsistencyReward(reference)(**batch, options=[OPTIONS] * 2) == [0.0, 0.0]
    assert reference.calls == []


class ReadingReference(ScriptedReference):
    """A reference that reasons by rule: the letter of the option whose text the reasoning names (the last
    named, as a reader takes the conclusion), else "unsure". It never sees the policy's answer."""

    def __init__(self) -> None:
        super().__init__([])

    def generate(self, requests: Sequence[ChatRequest], **kwargs: Any) -> list[str]:
        self.calls.append((list(requests), kwargs.get("max_new_tokens"), kwargs.get("temperature")))
        replies = []
        for request in requests:
            reasoning = request[-1].joined_text.split("Reasoning:", 1)[1].lower()
            named = [(reasoning.rfind(o.split()[-1]), x) for x, o in zip("ABCD", OPTIONS, strict=True)]
            position, letter = max(named)
            replies.append(letter if position >= 0 else "unsure")
        return replies


def _graded(think: str, answer: str, solution: object, options: Sequence[str]):
    return grade_batch([_c(think, answer)], [solution], options=[list(options)])[0]


def test_explicit_statements_of_the_answer_are_masked() -> None:
    think = "Frame 1 shows the lamp first (option B), so B. A chair came later; B2 and Bed stay."
    masked = mask_answer_statements(think, _graded(think, "B", "B", OPTIONS), OPTIONS)
    assert masked == (
        "Frame 1 shows the lamp first (option [hidden]), so [hidden]. [hidden] chair came later; "
        "B2 and Bed stay."
    )
    think = "I moved 1.5 m, then 2 m: 3.5 m in all, so 3.5."
    masked = mask_answer_statements(think, _graded(think, "3.5 m", 3.5, []), [])
    assert masked == "I moved 1.5 m, then 2 m: [hidden] m in all, so [hidden]."


# Restatements beyond capital letters and exact numbers (issue 42): each case hides the answer and keeps
# the evidence next to it. Options as the data sets write them (relative_distance, appearance_order,
# abs_distance, ego_turn).
NAMES = ["green bed", "red door", "white tv", "black fridge"]
ORDERS = [
    "white tv, white table, green bed",
    "green bed, white table, white tv",
    "white table, white tv, green bed",
]
AMOUNTS = ["3.9 m", "3.2 m", "1.7 m", "4.8 m"]
TURNS = [
    "left, about 75 degrees",
    "right, about 150 degrees",
    "left, about 180 degrees",
    "right, about 60 degrees",
]
EVIDENCE = "Distances from the red chair: the green bed 4.12 m; the red door 0.94 m."


def _mask(think: str, answer: str, solution: object, options: Sequence[str]) -> str:
    return mask_answer_statements(think, _graded(think, answer, solution, options), options)


def test_lower_case_letters_are_hidden_but_the_article_stays() -> None:
    think = f"{EVIDENCE} So it is b: option b, (b). b) fits, 'b'. The answer is a. Not a lamp, i.e. not a."
    assert _mask(think, "B", "B", NAMES) == (
        f"{EVIDENCE} So it is [hidden]: option [hidden], ([hidden]). [hidden]) fits, '[hidden]'. "
        "The answer is [hidden]. Not a lamp, i.e. not [hidden]."
    )
    # Contractions are no letters: "I'd" (D).
    assert _mask("I'd say the bed, 4.12 m.", "A", "A", NAMES) == "I'd say the bed, 4.12 m."
    # "option a" is a letter even before a word; "e.g." is no letter E; letters past the options stay.
    assert _mask("Option a is close, e.g. the bed; f) too.", "A", "A", NAMES) == (
        "Option [hidden] is close, e.g. the bed; f) too."
    )


def test_option_texts_are_hidden_in_conclusions_and_kept_in_evidence() -> None:
    # A plain name: hidden where the sentence carries no number, kept where it names a measured value.
    think = f"{EVIDENCE} The nearest is the red door. The red door is 0.94 m away, so it is the red door."
    assert _mask(think, "B", "B", NAMES) == (
        f"{EVIDENCE} The nearest is [hidden]. The red door is 0.94 m away, so it is [hidden]."
    )
    # An order (commas): hidden wherever it stands, also with other connectives; the sightings stay.
    think = (
        "First seen: the green bed in frame 1, the white table in frame 2, the white tv in frame 5. "
        "So the order is green bed, white table, white tv; that is green bed -> white table and white tv."
    )
    assert _mask(think, "B", "B", ORDERS) == (
        "First seen: the green bed in frame 1, the white table in frame 2, the white tv in frame 5. "
        "So the order is [hidden]; that is [hidden]."
    )
    # An amount: as written, its unit in any spelling, or alone in a conclusion; a more precise result
    # and the coordinates it came from stay.
    think = (
        "The bed is at (0.85, 2.09), the door at (3.2, 1.5): 3.17 m apart. "
        "The nearest option is B (3.2 m), i.e. 3.2 metres. So 3.2."
    )
    assert _mask(think, "B", "B", AMOUNTS) == (
        "The bed is at (0.85, 2.09), the door at (3.2, 1.5): 3.17 m apart. "
        "The nearest option is [hidden] ([hidden]), i.e. [hidden]. So [hidden]."
    )
    # A composite (ego_turn): whole, or its amount alone; the turns it adds up stay.
    think = "My turns: +40 by frame 2, +37 by frame 5. In total left 77 deg: left, about 75 degrees, 75 deg."
    assert _mask(think, "A", "A", TURNS) == (
        "My turns: +40 by frame 2, +37 by frame 5. In total left 77 deg: [hidden], [hidden]."
    )


def test_references_by_position_are_hidden() -> None:
    think = f"{EVIDENCE} The answer is the second option, not the last choice; option two."
    assert _mask(think, "B", "B", NAMES) == (
        f"{EVIDENCE} The answer is the [hidden] option, not the [hidden] choice; option [hidden]."
    )
    # "final answer" is no position; "the first one I saw" is evidence, not a reference to an option.
    think = "The first one I saw was the bed in frame 1. My final answer: choice #2, the 2nd option."
    assert _mask(think, "B", "B", NAMES) == (
        "The first one I saw was the bed in frame 1. My final answer: choice #[hidden], the [hidden] option."
    )


def test_option_lookup_lines_are_removed_whole() -> None:
    # A mask per lookup line would still say by its place which option said yes: the lines go, the
    # evidence stays, and the conclusion's name is hidden as any conclusion's is.
    lookup = "\nThe nearest is the red door.\nA. green bed: no.\nb) red door: Yes\n"
    assert _mask(EVIDENCE + lookup, "B", "B", NAMES) == f"{EVIDENCE}\nThe nearest is [hidden].\n\n\n"


def test_rounded_numbers_are_hidden_but_derivations_stay() -> None:
    # 2.13: "2.1", "2.1 m", "213 cm" restate it; "2" (6 % off) and the parts 1.20 and 0.93 stay.
    think = "I walked 1.20 m, then 0.93 m: 2.13 m, so 2.1, i.e. 2.1 m or 213 cm; roughly 2 m."
    assert _mask(think, "2.13", 2.13, []) == (
        "I walked 1.20 m, then 0.93 m: [hidden] m, so [hidden], i.e. [hidden] m or [hidden] cm; roughly 2 m."
    )
    # 3.17 from the differences 1.20 and 2.93; "3" in "frame 3" is 5.4 % off: evidence.
    think = "The differences are 1.20, 2.93 (frame 3), so the distance is 3.17 m, about 3.2 m."
    assert _mask(think, "3.17 m", 3.17, []) == (
        "The differences are 1.20, 2.93 (frame 3), so the distance is [hidden] m, about [hidden] m."
    )


@pytest.mark.parametrize(
    ("think", "answer", "masked"),
    [
        ("Chairs in frame 1 and frame 5: two.", 2, "Chairs in frame 1 and frame 5: [hidden]."),
        ("Frame 4 and frame 9 show twenty-three chairs.", 23, "Frame 4 and frame 9 show [hidden] chairs."),
        ("1.20 m then 0.93 m: two point one metres.", 2.13, "1.20 m then 0.93 m: [hidden] metres."),
        # "one" (a pronoun too) is no restatement of 3; "three" is.
        (
            "One in frame 1, two in frame 4: three chairs.",
            3,
            "One in frame 1, two in frame 4: [hidden] chairs.",
        ),
        ("One hundred and five tiles, 105.", 105, "[hidden] tiles, [hidden]."),
    ],
)
def test_numbers_in_words_are_hidden(think: str, answer: float, masked: str) -> None:
    assert _mask(think, str(answer), answer, []) == masked


@pytest.mark.parametrize(
    ("think", "answer", "options", "left"),
    [
        ("The answer is the second option.", "B", NAMES, False),
        ("So it is b.", "B", NAMES, False),
        ("So the order is green bed, white table, white tv.", "B", ORDERS, False),
        ("The nearest option is (3.2 m).", "B", AMOUNTS, False),
        ("two", "2", [], False),
        ("About 2.1 m.", "2.13", [], False),
        (f"{EVIDENCE} The nearest is the red door.", "B", NAMES, True),
        ("I walked 1.20 m, then 0.93 m.", "2.13", [], True),
    ],
)
def test_reasons_left_after_a_restatement_only(
    think: str, answer: str, options: list[str], left: bool
) -> None:
    solution = answer if options else float(answer)
    assert reasons_left(_mask(think, answer, solution, options)) is left


def test_consistency_scores_a_restatement_zero_without_a_call_and_sends_the_evidence() -> None:
    restatements = [
        ("So it is b.", "B", NAMES),
        ("The answer is the second option.", "B", NAMES),
        ("So the order is green bed, white table, white tv.", "B", ORDERS),
        ("two point one", "2.13", []),
    ]
    question = "Which of these objects is closest to the red chair?"
    batch = {
        "completions": [_c(t, a) for t, a, _ in restatements],
        "solution": [a if o else float(a) for _, a, o in restatements],
        "question": [question] * len(restatements),
        "options": [o for _, _, o in restatements],
    }
    reference = ScriptedReference([])
    assert ConsistencyReward(reference)(**batch) == [0.0] * len(restatements)
    assert reference.calls == []  # nothing left to check: no reference call

    # The same batch with one reasoned answer: only it is sent, its evidence intact, its conclusion hidden.
    reference = ScriptedReference(["B"])
    batch["completions"].append(_c(f"{EVIDENCE} The nearest is the red door, so b.", "B"))
    for column, value in (("solution", "B"), ("question", question), ("options", NAMES)):
        batch[column].append(value)
    assert ConsistencyReward(reference)(**batch) == [0.0] * len(restatements) + [1.0]
    ((requests, _, _),) = reference.calls
    assert len(requests) == 1
    seen = requests[0][-1].joined_text.split("Reasoning:", 1)[1]
    assert f"{EVIDENCE} The nearest is [hidden], so [hidden]." in seen


@pytest.mark.parametrize(
    ("think", "score", "asked"),
    [
        ("B", 0.0, False),  # a restatement: nothing left to check, no reference call
        ("So the answer is option B.", 0.0, False),
        ("I pick B because it is B.", 0.0, True),  # words remain, but none implies an option
        ("The chair was in frame 3, after the lamp in frame 1.", 1.0, True),  # reasoning that implies B
        ("The chair is nearest at 0.5 m, so B.", 0.0, True),  # reasoning that implies A, not the answer B
    ],
)
def test_consistency_judges_reasoning_not_a_restatement(think: str, score: float, asked: bool) -> None:
    reference = ReadingReference()
    batch = {"completions": [_c(think, "B")], "solution": ["B"], "question": [QUESTION], "options": [OPTIONS]}
    assert ConsistencyReward(reference)(**batch) == [score]
    assert bool(reference.calls) == asked
    if asked:
        seen = reference.calls[0][0][0][-1].joined_text.split("Reasoning:", 1)[1]
        assert " B" not in seen and "[hidden]" in seen or "B" not in think


def test_consistency_needs_question_and_options_columns() -> None:
    batch = _batch()
    del batch["question"]
    with pytest.raises(ValueError, match="'question' and 'options'"):
        ConsistencyReward(ScriptedReference([]))(**batch)
    with pytest.raises(TypeError, match="generate"):
        ConsistencyReward(object())  # type: ignore[arg-type]
    assert REFERENCE_PROMPT_VERSION


# ----------------------------------------------------------------------------------------------------
# consistency with a real tiny model: call counting


@pytest.fixture(scope="module")
def tiny_reference(tiny_models_dir: Path) -> CountingBackend:
    backend = load_backend(model_config(str(tiny_models_dir / "lm"), device="cpu"), vision=False)
    yield CountingBackend(backend)
    backend.close()


def test_real_reference_one_batched_call_per_step(tiny_reference: CountingBackend) -> None:
    group = 8  # one prompt's rollouts, as TRL passes them
    answers = ["B", "C", "B", "(B)", "A", "the lamp", "D", "B"]
    completions = [_c(f"Reasoning number {i}.", a) for i, a in enumerate(answers)]
    reward = ConsistencyReward(tiny_reference, ConsistencyConfig(max_new_tokens=4))
    calls_before = len(tiny_reference.calls)
    scores = reward(
        completions, solution=["B"] * group, question=[QUESTION] * group, options=[OPTIONS] * group
    )
    assert tiny_reference.calls[calls_before:] == [5]  # one call with the five correct answers
    assert len(scores) == group and set(scores) <= {0.0, 1.0}
    assert [scores[i] for i in (1, 4, 6)] == [0.0, 0.0, 0.0]  # wrong answers score 0 without a query

    reward(
        completions, solution=["E"] * group, question=[QUESTION] * group, options=[OPTIONS + ["x"]] * group
    )
    assert len(tiny_reference.calls) == calls_before + 1  # no correct answer: no call


# ----------------------------------------------------------------------------------------------------
# schedule


@pytest.mark.parametrize(
    ("epoch", "ratio"),
    [
        (1, (7, 3, 0)),
        (2, (7, 3, 0)),
        (3, (3, 7, 0)),
        (4, (3, 7, 0)),
        (5, (1, 7, 2)),
        (12, (1, 7, 2)),
        (99, (1, 7, 2)),
    ],
)
def test_paper_schedule(epoch: int, ratio: tuple[int, int, int]) -> None:
    weights = RewardSchedule().weights_for_epoch(epoch)
    assert list(weights) == ["format", "accuracy", "consistency"]
    assert (weights["format"], weights["accuracy"], weights["consistency"]) == pytest.approx(
        [r / 10 for r in ratio]
    )


@pytest.mark.parametrize(
    ("state_epoch", "epoch"),
    [
        (None, 1),
        (0.0, 1),
        (0.5, 1),
        (0.999, 1),
        (1.0, 2),
        (1.99, 2),
        (2.0, 3),
        (2 - 1e-12, 3),
        (4.0, 5),
        (11.5, 12),
    ],
)
def test_epoch_from_trainer_state(state_epoch: float | None, epoch: int) -> None:
    assert epoch_from_state(TrainerState(epoch=state_epoch)) == epoch


@pytest.mark.parametrize("steps_in_epoch", [1, 3, 7, 10, 49])
def test_trainer_epoch_floats_map_to_their_epoch(steps_in_epoch: int) -> None:
    # transformers' Trainer: after step s of 0-based epoch e, state.epoch = e + (s + 1) / steps_in_epoch;
    # rewards of step s see the value left by the step before (e + s / n, or exactly e after an epoch).
    schedule = RewardSchedule()
    for e in range(6):
        seen = [e if s == 0 else e + s / steps_in_epoch for s in range(steps_in_epoch)]
        if e > 0:
            seen[0] = (e - 1) + steps_in_epoch / steps_in_epoch  # the value the last step of e-1 left
        for value in seen:
            assert epoch_from_state(TrainerState(epoch=value)) == e + 1
            assert schedule.weights_for_state(TrainerState(epoch=value)) == schedule.weights_for_epoch(e + 1)


def test_custom_schedule_and_errors() -> None:
    schedule = RewardSchedule.from_list(
        [{"start_epoch": 1, "format": 1, "accuracy": 1}, {"start_epoch": 2, "accuracy": 1, "consistency": 3}]
    )
    assert schedule.weights_for_epoch(1) == {"format": 0.5, "accuracy": 0.5, "consistency": 0.0}
    assert schedule.weights_for_epoch(7) == {"format": 0.0, "accuracy": 0.25, "consistency": 0.75}
    assert RewardSchedule().stages == PAPER_STAGES
    with pytest.raises(
        ConfigError, match="unknown key.*'acc'.*registered rewards: format, accuracy, consistency"
    ):
        RewardSchedule.from_list([{"start_epoch": 1, "acc": 1}])
    with pytest.raises(ConfigError, match="no start_epoch"):
        RewardSchedule.from_list([{"format": 1}])
    with pytest.raises(ConfigError, match="must start at epoch 1"):
        RewardSchedule((Stage(2, {"format": 1}),))
    with pytest.raises(ConfigError, match="increase strictly"):
        RewardSchedule((Stage(1, {"format": 1}), Stage(3, {"format": 1}), Stage(3, {"accuracy": 1})))
    with pytest.raises(ConfigError, match="all 0"):
        Stage(1, {"format": 0, "accuracy": 0, "consistency": 0})
    with pytest.raises(ConfigError, match=">= 0"):
        Stage(1, {"format": 1, "accuracy": -1})
    with pytest.raises(ConfigError, match="unknown reward 'acc'.*registered rewards: format, accuracy"):
        Stage(1, {"format": 1, "acc": 1})
    with pytest.raises(ValueError, match="1-based"):
        RewardSchedule().weights_for_epoch(0)
    with pytest.raises(ValueError, match="needs trainer_state"):
        epoch_from_state(None)


# ----------------------------------------------------------------------------------------------------
# weighted total


def test_staged_total_by_epoch_logs_every_reward(caplog: pytest.LogCaptureFixture) -> None:
    reference = ScriptedReference(["B", "2 m"])
    total = StagedReward(context=RewardContext(reference))
    batch = _batch()
    fmt, acc = [1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]  # 2.1 vs 2.0 is 5 % off: MRA 1.0
    metrics: list[tuple[str, float]] = []

    with caplog.at_level(logging.INFO, logger="embodied_r_training.rl.staged_reward"):
        early = total(
            **batch, trainer_state=TrainerState(epoch=1.5), log_metric=lambda k, v: metrics.append((k, v))
        )
    assert early == pytest.approx([0.7 * f + 0.3 * a for f, a in zip(fmt, acc, strict=True)])
    assert reference.calls == []  # consistency weight 0 in epochs 1-4: no reference queries
    assert "epoch 2" in caplog.text and "consistency skipped" in caplog.text
    assert {k for k, _ in metrics if k.startswith("rewards/")} == {
        "rewards/format/mean",
        "rewards/accuracy/mean",
    }
    assert dict(metrics)["rewards/format/mean"] == pytest.approx(0.75)
    assert dict(metrics)["rewards/accuracy/mean"] == pytest.approx(0.5)
    assert [v for k, v in metrics if k.startswith("weight/")] == pytest.approx([0.7, 0.3, 0.0])

    metrics.clear()
    with caplog.at_level(logging.INFO, logger="embodied_r_training.rl.staged_reward"):
        late = total(
            **batch, trainer_state=TrainerState(epoch=4.0), log_metric=lambda k, v: metrics.append((k, v))
        )
    cons = [1.0, 0.0, 1.0, 0.0]
    assert late == pytest.approx(
        [0.1 * f + 0.7 * a + 0.2 * c for f, a, c in zip(fmt, acc, cons, strict=True)]
    )
    assert len(reference.calls) == 1
    assert dict(metrics)["rewards/consistency/mean"] == pytest.approx(0.5)
    assert [v for k, v in metrics if k.startswith("weight/")] == pytest.approx([0.1, 0.7, 0.2])
    assert "epoch 5" in caplog.text and f"total {sum(late) / 4:.4f}" in caplog.text

    with pytest.raises(ValueError, match="weights consistency, which needs a reference model"):
        StagedReward()
    plain = StagedReward(RewardSchedule((Stage(1, {"format": 1, "accuracy": 1, "consistency": 0}),)))
    assert plain(**batch, trainer_state=TrainerState(epoch=9.0)) == pytest.approx([1.0, 0.5, 1.0, 0.0])


# ----------------------------------------------------------------------------------------------------
# TRL 1.16's own reward call


def test_trl_grpo_calculate_rewards_calls_our_functions(tiny_reference: CountingBackend) -> None:
    """Run GRPOTrainer._calculate_rewards itself (TRL's code, not a copy) on a stand-in trainer object."""
    from accelerate import Accelerator
    from trl import GRPOTrainer

    batch = _batch()
    # Dataset rows as TRL hands them to _calculate_rewards: every column, repeated per completion.
    inputs = [
        {"prompt": p, "solution": s, "question": q, "options": o, "task": "relative_distance"}
        for p, s, q, o in zip(
            batch["prompts"], batch["solution"], batch["question"], batch["options"], strict=True
        )
    ]
    scripted = ScriptedReference(["B", "2 m"])
    funcs = [
        format_reward,
        accuracy_reward,
        ConsistencyReward(scripted),
        StagedReward(context=RewardContext(tiny_reference)),
    ]
    metrics: dict[str, list[float]] = {}
    trainer = SimpleNamespace(
        accelerator=Accelerator(cpu=True),
        args=SimpleNamespace(report_to=[]),
        state=TrainerState(epoch=6.25, global_step=3),
        reward_funcs=funcs,
        reward_processing_classes=[None] * len(funcs),
        reward_func_names=[getattr(f, "__name__", type(f).__name__) for f in funcs],
        environments=None,
        _log_completion_extra=lambda column, values: None,
        _log_metric=lambda name, value: metrics.setdefault(name, []).append(value),
    )
    calls_before = len(tiny_reference.calls)
    rewards = GRPOTrainer._calculate_rewards(
        trainer, inputs, batch["prompts"], batch["completions"], [[1, 2, 3]] * len(inputs)
    )
    assert rewards.shape == (4, 4) and not torch.isnan(rewards).any()
    assert rewards[:, 0].tolist() == [1.0, 1.0, 1.0, 0.0]
    assert rewards[:, 1].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert rewards[:, 2].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert len(tiny_reference.calls) == calls_before + 1  # epoch 7: the staged total queried once
    assert set(metrics) == {"rewards/format/mean", "rewards/accuracy/mean", "rewards/consistency/mean"} | {
        "weight/format",
        "weight/accuracy",
        "weight/consistency",
    }
    assert trainer.reward_func_names[3] == "total"  # TRL logs the staged total as rewards/total/mean
    # Epoch 7 weighs 0.1:0.7:0.2; the random tiny reference's agreement is unknown, so bounds for the
    # correct rows, exact values for the wrong ones (not queried).
    total = rewards[:, 3].tolist()
    assert 0.8 - 1e-6 <= total[0] <= 1.0 + 1e-6 and total[1] == pytest.approx(0.1)
    assert 0.8 - 1e-6 <= total[2] <= 1.0 + 1e-6 and total[3] == 0.0


def test_schedule_by_optimizer_step_for_runs_shorter_than_an_epoch() -> None:
    schedule = RewardSchedule.from_list(
        [
            {"start_step": 0, "format": 7, "accuracy": 3},
            {"start_step": 5, "format": 3, "accuracy": 7},
            {"start_step": 10, "format": 1, "accuracy": 7, "consistency": 2},
        ]
    )
    assert schedule.by_step and not RewardSchedule().by_step
    # The trainer's epoch stays below 1 all run long; the step decides.
    weights = [schedule.weights_for_state(TrainerState(epoch=0.01 * s, global_step=s)) for s in range(12)]
    assert weights[0] == weights[4] == {"format": 0.7, "accuracy": 0.3, "consistency": 0.0}
    assert weights[5] == weights[9] == {"format": 0.3, "accuracy": 0.7, "consistency": 0.0}
    assert weights[10] == weights[11] == {"format": 0.1, "accuracy": 0.7, "consistency": 0.2}
    with pytest.raises(ValueError, match="by optimizer step"):
        schedule.weights_for_epoch(1)
    with pytest.raises(ValueError, match="needs trainer_state"):
        schedule.weights_for_state(None)
    with pytest.raises(ConfigError, match="start_step on every stage"):
        RewardSchedule.from_list([{"start_step": 0, "format": 1}, {"start_epoch": 2, "accuracy": 1}])
    with pytest.raises(ConfigError, match="the first at 0"):
        RewardSchedule.from_list([{"start_step": 3, "format": 1}])
    with pytest.raises(ConfigError, match="start steps must increase"):
        RewardSchedule.from_list([{"start_step": 0, "format": 1}, {"start_step": 0, "accuracy": 1}])
    with pytest.raises(ConfigError, match="start_step must be an integer"):
        Stage(start_step=-1, weights={"format": 1})


# ----------------------------------------------------------------------------------------------------
# rewards by name


@pytest.fixture
def added_rewards() -> Iterator[list[str]]:
    """The names a test registers; they are unregistered after it, leaving the registry as imported."""
    before = registered_rewards()
    added: list[str] = []
    yield added
    for name in added:
        unregister_reward(name)
    assert registered_rewards() == before


def test_builtin_rewards_are_registered_with_what_they_need() -> None:
    assert registered_rewards()[:3] == ("format", "accuracy", "consistency")
    assert registered_reward("format").build(RewardContext()) is format_reward
    assert registered_reward("accuracy").columns == ("solution",)
    consistency = registered_reward("consistency")
    assert consistency.columns == ("solution", "question", "options")
    assert consistency.needs_reference and consistency.only_when_weighted
    reference = ScriptedReference([])
    built = consistency.build(RewardContext(reference, ConsistencyConfig(temperature=0.0)))
    assert isinstance(built, ConsistencyReward) and built.backend is reference
    assert built.config.temperature == 0.0
    with pytest.raises(ValueError, match="needs a reference model"):
        consistency.build(RewardContext())
    with pytest.raises(ConfigError, match="unknown reward 'fromat'; registered rewards: format, accuracy"):
        registered_reward("fromat")


def test_a_registered_reward_is_weighted_summed_and_logged_by_name(added_rewards: list[str]) -> None:
    seen: list[dict[str, Any]] = []

    @register_reward("brevity")
    def brevity(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        seen.append(kwargs)
        return [None if i == 3 else 1.0 / (1 + i) for i in range(len(completions))]  # None: not applicable

    added_rewards.append("brevity")
    schedule = RewardSchedule.from_list([{"start_epoch": 1, "format": 1, "accuracy": 1, "brevity": 2}])
    assert schedule.names == ("format", "accuracy", "brevity")
    metrics: list[tuple[str, float]] = []
    state = TrainerState(epoch=0.0)
    total = StagedReward(schedule)(
        **_batch(), trainer_state=state, log_metric=lambda k, v: metrics.append((k, v))
    )
    fmt, acc, brev = [1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0], [1.0, 0.5, 1 / 3]
    assert total == pytest.approx(
        [0.25 * f + 0.25 * a + 0.5 * b for f, a, b in zip(fmt, acc, brev, strict=False)] + [0.0]
    )
    # Its mean over the completions it applies to, and its weight, under its name.
    assert dict(metrics)["rewards/brevity/mean"] == pytest.approx((1.0 + 0.5 + 1 / 3) / 3)
    assert dict(metrics)["weight/brevity"] == 0.5
    # It gets what TRL passes a reward function: the data-set columns and the trainer state.
    assert seen[0]["solution"] == _batch()["solution"] and seen[0]["trainer_state"] is state

    # A completion no reward applies to gets None (TRL then leaves it out of the group's statistics).
    only = StagedReward(RewardSchedule.from_list([{"start_epoch": 1, "brevity": 1}]))
    assert only(**_batch(), trainer_state=state) == pytest.approx([1.0, 0.5, 1 / 3, None])

    @register_reward("broken")
    def broken(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return [1.0]

    added_rewards.append("broken")
    with pytest.raises(ValueError, match="reward 'broken' returned 1 scores for 4 completions"):
        StagedReward(RewardSchedule.from_list([{"start_epoch": 1, "broken": 1}]))(
            **_batch(), trainer_state=state
        )


def test_a_costly_factory_reward_is_built_from_the_context_and_runs_only_when_weighted(
    added_rewards: list[str],
) -> None:
    contexts: list[RewardContext] = []
    calls: list[int] = []

    @register_reward("judge", factory=True, needs_reference=True, only_when_weighted=True)
    def judge(context: RewardContext) -> Any:
        contexts.append(context)

        def score(completions: Sequence[Any], **kwargs: Any) -> list[float]:
            calls.append(len(completions))
            return [0.5] * len(completions)

        return score

    added_rewards.append("judge")
    stages = [{"start_step": 0, "format": 1, "judge": 0}, {"start_step": 2, "format": 1, "judge": 1}]
    schedule = RewardSchedule.from_list(stages)
    with pytest.raises(ValueError, match="weights judge, which needs a reference model"):
        StagedReward(schedule)
    context = RewardContext(ScriptedReference([]))
    staged = StagedReward(schedule, context)
    assert contexts == [context]
    fmt = [1.0, 1.0, 1.0, 0.0]
    assert staged(**_batch(), trainer_state=TrainerState(global_step=1)) == fmt
    assert calls == []  # weight 0 at step 1: not computed
    late = staged(**_batch(), trainer_state=TrainerState(global_step=2))
    assert calls == [4] and late == pytest.approx([0.5 * f + 0.25 for f in fmt])
    # Named only at weight 0: never built, never computed, and no reference needed.
    idle = StagedReward(RewardSchedule.from_list([{"start_epoch": 1, "format": 1, "judge": 0}]))
    assert [r.name for r in idle.rewards] == ["format"] and len(contexts) == 1


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("format", "already registered"),
        ("total", "not one of start_epoch, start_step, total"),
        ("start_step", "not one of"),
        ("Brevity", "lower-case letters"),
        ("2x", "a letter first"),
    ],
)
def test_register_reward_refuses_taken_reserved_and_malformed_names(name: str, message: str) -> None:
    before = registered_rewards()
    with pytest.raises(ValueError, match=message):
        register_reward(name)(format_reward)
    assert registered_rewards() == before
    with pytest.raises(ValueError, match="no reward 'nothing' is registered"):
        unregister_reward("nothing")
