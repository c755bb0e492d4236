"""The option a reasoning concludes and the lookup that writes the answer from it
(embodied_r_ros/reasoning/conclusion.py); the options read back from a prompt (reasoning/prompts.py); the
lookup's tokens in the decoding loop (backends/tool_decoding.py) and the backend's switch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from embodied_r_ros.backends.tool_decoding import ToolTokens
from embodied_r_ros.reasoning.conclusion import concluded_option, lookup_continuation
from embodied_r_ros.reasoning.prompts import question_block, reasoning_prompt, stated_options

OPTIONS = ["3.2 m", "0.9 m", "1.3 m", "1.8 m"]
ORDERS = ["white tv, green bed, white table", "green bed, white table, white tv", "white table, green bed"]
THINK = (
    "<think>By frame: green bed (0), white table (7).\nSo the order is green bed, white table, white tv.\n"
)


def test_the_concluded_option_is_the_option_the_reasoning_names_last() -> None:
    assert concluded_option("The square root is 0.94.\nNearest to 0.94: 0.9 m, option B.", OPTIONS) == "B"
    # The text decides, not a letter written beside another option's text.
    assert concluded_option("Nearest to 0.94: 0.9 m, option C.", OPTIONS) == "B"
    orders = ["white tv, green bed", "green bed, white tv"]
    assert (
        concluded_option("By frame: green bed (0), white tv (5).\ngreen bed, white tv is option B.", orders)
        == "B"
    )
    assert concluded_option("That is option D.", ["left", "right", "up", "down"]) == "D"
    # The option lookup's lines are read past: the conclusion before them decides, so a "yes" on
    # another option's line is a disagreement the goal counts.
    quadrants = ["front-left", "back-left", "back-right"]
    lookup = "So the bed is back-left.\nA. front-left: no.\nB. back-left: yes."
    assert concluded_option(lookup, quadrants) == "B"
    wrong = "So the bed is back-left.\nA. front-left: no.\nB. back-left: no.\nC. back-right: yes."
    assert concluded_option(wrong, quadrants) == "B"
    assert concluded_option("No idea.", OPTIONS) is None


@pytest.mark.parametrize(
    ("text", "written"),
    [
        (THINK + "A. white tv, green bed, white table:", " no."),
        (THINK + "A. white tv, green bed, white table: no.\nB. green bed, white table, white tv:", " yes."),
        # the model said yes one line late: the next line is still judged against the conclusion
        (
            THINK + "A. white tv, green bed, white table: no.\nB. green bed, white table, white tv: no.\n"
            "C. white table, green bed:",
            " no.",
        ),
        (THINK + "B. green bed, white table, white tv: yes.</think><answer>", "B"),
        (
            THINK + "B. green bed, white table, white tv: no.\n"
            "C. white table, green bed: yes.</think>\n<answer>",
            "B",
        ),
    ],
)
def test_the_lookup_writes_what_the_conclusion_says(text: str, written: str) -> None:
    assert lookup_continuation(text, ORDERS) == written


@pytest.mark.parametrize(
    "text",
    [
        THINK + "So the order is",  # not a lookup's place
        THINK + "x:",  # a step's label, not an option's line
        "<think>No idea.\nA. white tv, green bed, white table:",  # nothing concluded: the model writes
        "<think>No idea.</think><answer>",
        THINK + "</think><answer>B</answer>\nA. white tv, green bed, white table:",  # past the think
        THINK + "<answer>",  # an answer opened without closing the think: the model's own
        # two options on one line: the place is not one option's
        THINK + "A. white tv, green bed, white table: no. B. green bed, white table, white tv:",
    ],
)
def test_the_lookup_leaves_everything_else_to_the_model(text: str) -> None:
    assert lookup_continuation(text, ORDERS) is None


TURNS = ["left, about 180 degrees", "left, about 30 degrees", "right, about 45 degrees",
         "left, about 75 degrees"]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "options", "written"),
    [
        (
            "<think>The square root of 0.88 is 0.94.\nOptions: A 3.2, B 0.9, C 1.3, D 1.8.\nNearest to 0.94:",
            OPTIONS,
            " 0.9 m, option B.",
        ),
        # in ratio, as the traces: 2.2 is nearer 1.8 (x1.22) than 3.2 (x1.45)
        ("<think>x\nOptions: A 3.2, B 0.9, C 1.3, D 1.8.\nNearest to 2.2:", OPTIONS, " 1.8 m, option D."),
        # the candidates are the ones the model copied (a turn's side): right's 45 is not among them
        (
            "<think>In total left 102 deg.\nOptions left: A 180, B 30, D 75.\nNearest to 102:",
            TURNS,
            " left, about 75 degrees, option D.",
        ),
    ],
)
def test_the_lookup_writes_the_option_nearest_a_computed_value(text: str, options: list, written: str):
    assert lookup_continuation(text, options) == written
    # and the letter after the think is that option's
    think = text + written + "</think><answer>"
    assert lookup_continuation(think, options) == written[-2]


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("<think>x\nNearest to 0.94:", None),  # no options copied above
        ("<think>x\nOptions: A 3.2 m, B 0.9 m.\nNearest to 0.94:", None),  # not the traces' list
        ("<think>x\nOptions: A 3.2, B 0.9.\nNearest to -1.5:", None),  # not a positive value
        ("<think>x\nOptions: A 3.2, F 1.0.\nNearest to 1:", " 3.2 m, option A."),  # F is no option here
        ("<think>x\nOptions: A 3.2, B 0.9C 1.3.\nNearest to 1.2:", None),  # pairs run together
    ],
)
def test_the_nearest_lookup_needs_a_list_of_options_and_a_positive_value(text: str, written: str | None):
    assert lookup_continuation(text, OPTIONS) == written


def test_an_open_question_has_no_lookup() -> None:
    assert lookup_continuation("<think>x: 1 + 2 = 3.</think><answer>", []) is None


def test_the_options_a_prompt_states_are_read_back() -> None:
    observations = [(None, "a red bed ahead, near, 1.2 m."), ("Turn left", "a lamp left, far, 4.0 m.")]
    prompt = reasoning_prompt(observations, "Which is nearer?", [" red bed", "lamp "])
    assert stated_options(prompt) == ["red bed", "lamp"]
    assert stated_options(question_block("How far is the lamp?", [])) == []
    assert stated_options("Options:\nA. bed\nC. lamp\nAnswer with the letter of the correct option.") == []
    assert stated_options("no options here") == []


@pytest.fixture(scope="module")
def tokenizer(tiny_models_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_models_dir / "lm")


def _decode_rows(force: ToolTokens, tokenizer, model_text: list[str]) -> list[str]:
    """Feed each row's model tokens through ``force`` step by step, as the decoding loop does."""
    model_ids = [tokenizer.encode(text, add_special_tokens=False) for text in model_text]
    written: list[list[int]] = [[] for _ in model_text]
    for step in range(max(map(len, model_ids))):
        active = [row for row in range(len(model_text)) if step < len(model_ids[row])]
        out = force(torch.tensor(active), torch.tensor([model_ids[row][step] for row in active]))
        for row, token in zip(active, out.tolist(), strict=True):
            written[row].append(token)
    return [tokenizer.decode(ids) for ids in written]


def test_the_lookup_s_tokens_replace_the_model_s_yes_and_letter(tokenizer) -> None:
    """Row 0 concludes B, then says "no" to B's line, "yes" to C's and answers C (the late lookup): the
    lookup writes "yes" on B's line, "no" on C's and the letter B. Row 1 (an open question) is left alone,
    and the calculator is off: its sum stays the model's."""
    late = THINK + "A. white tv, green bed, white table: no.\nB. green bed, white table, white tv: no.\n"
    model_text = [late + "C. white table, green bed: yes.</think><answer>C</answer>", "x: 1 + 2 = 4 m"]
    force = ToolTokens(tokenizer, rows=2, calculate=False, options=[ORDERS, []])
    first, second = _decode_rows(force, tokenizer, model_text)
    assert "B. green bed, white table, white tv: yes.\nC. white table, green bed: no." in first
    assert first.endswith("</think><answer>B</answer>")
    assert second == model_text[1]
    assert force.looked_up >= 3 and force.written == 0


def test_the_tools_need_one_option_list_a_row(tokenizer) -> None:
    with pytest.raises(ValueError, match="one a row"):
        ToolTokens(tokenizer, rows=2, options=[ORDERS])


def test_the_backend_looks_up_the_options_its_prompts_state(tiny_models_dir: Path, monkeypatch) -> None:
    """``lm.transformers.lookup``: the decoding loop gets a :class:`ToolTokens` holding each request's
    stated options (none for an open question); off, a single request is generate's."""
    from embodied_r_ros.backends import load_backend, transformers_backend
    from embodied_r_ros.backends.base import ChatMessage
    from embodied_r_ros.config import model_config

    calls = []
    decode = transformers_backend.decode_batch
    monkeypatch.setattr(transformers_backend, "decode_batch", lambda *a: calls.append(a) or decode(*a))
    mc = [ChatMessage.text("user", question_block("Which came first?", ORDERS))]
    open_question = [ChatMessage.text("user", question_block("How far?", []))]
    for lookup in (False, True):
        config = model_config(str(tiny_models_dir / "lm"), max_new_tokens=4, lookup=lookup)
        backend = load_backend(config, vision=False)
        try:
            assert len(backend.generate([mc])) == 1
            assert len(backend.generate([mc, open_question])) == 2
        finally:
            backend.close()
    tools = [call[4] for call in calls]
    assert tools[0] is None  # two requests without tools: the loop, nothing forced
    assert [t.options for t in tools[1:]] == [[ORDERS], [ORDERS, []]]
    assert not tools[1].calculate


def test_on_the_oracle_s_traces_the_lookup_writes_the_trace_s_own_text() -> None:
    """Every kept held-out question (results/reasoner/data/test_*, both environments): its options read back
    from its prompt are its options, and wherever the lookup writes into the oracle's trace (each lookup
    line, each nearest option, the letter) it writes what the trace says there."""
    import json

    from embodied_r_training.rl.warm_start import trace_completion

    root = Path(__file__).resolve().parents[1] / "results" / "reasoner" / "data"
    lines = [line for env in ("indoor", "outdoor")
             for line in (root / f"test_{env}" / "test.jsonl").read_text().splitlines()]  # fmt: skip
    rows = [json.loads(line) for line in lines if line.strip()]
    places, letters = 0, 0
    for row in (r for r in rows if r.get("options")):
        assert stated_options(row["prompt"][-1]["content"]) == row["options"], row["id"]
        trace = trace_completion(row)
        for end in (i + 1 for i, c in enumerate(trace) if c in ":>"):
            written = lookup_continuation(trace[:end], row["options"])
            if written is not None:
                assert trace[end : end + len(written)] == written, (row["id"], trace[:end])
                places += 1
                letters += written == row["solution"]
    mc = sum(1 for r in rows if r.get("options"))
    assert mc >= 200 and letters == mc and places > 2 * mc  # a letter for each, and the lookups before it
