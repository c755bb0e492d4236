"""The reasoner's calculator (embodied_r_ros/reasoning/calculator.py): what it writes after a step the model
set up, as the oracle's traces write it; the tokens it puts in place of the model's while decoding
(backends/tool_decoding.py); and the decoding loop feeding those tokens back to the model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from embodied_r_ros.backends import decoding
from embodied_r_ros.backends.tool_decoding import ToolTokens
from embodied_r_ros.reasoning.calculator import continuation, evaluate

THINK = "<think>The red door is at (0.86, 3.77, 1.07).\n"


@pytest.mark.parametrize(
    ("think", "written"),
    [
        # abs_distance: a difference per axis, its square, the sum, the root
        (THINK + "x: 1.06 + 1.68 =", " 2.74"),
        (THINK + "z: 0.9 - 0.3 =", " 0.60"),
        (THINK + "x: 2.22 - 0.54 = 1.68, squared", " 2.82"),
        (THINK + "7.51 + 2.82 + 0.36 =", " 10.69"),
        (THINK + "The square root of 10.69 is", " 3.27"),
        (THINK + "449.4 + 900.0 + 132.2 =", " 1482"),  # whole above 1000, as the traces write it
        # relative_direction: vectors to one decimal, signed products, their sum
        ("<think>Facing: (3.83 - 3.29, 1.56 + 0.27) =", " (0.5, 1.8)"),
        ("x\nAhead: -2.9 x (-0.3) =", " +0.87"),
        ("Ahead: -2.9 x (-0.3) = +0.87\n-1.3 x (-1.5) =", " +1.95"),
        ("Left: 1.8 x (-0.8) =", " -1.44"),
        ("+0.87\n0.87 + 1.95 =", " 2.82"),
        # room_size, ego_turn, ego_altitude, ego_distance
        ("The room is 4.12 m by 4.35 m.\n4.12 x 4.35 =", " 17.92"),
        ("Left: 41 + 45 = 86\nRight 167 - left 70 =", " 97"),
        ("Frame 4: up 1.7\nUp: 1.1 + 1.7 =", " 2.8"),
        ("Up 2.6 - down 0.4 =", " 2.2"),
        ("Along my path:\n1.45 + 1.14 =", " 2.59"),
        # relative_distance: the gaps from the target's position, their squares and sum
        (
            "<think>The grey trash can is at (1.06, 0.54, 0.3).\nThe red bed at (-1.27, 4.64, 0.97): gaps",
            " 2.33, 4.10, 0.67; squared 5.43 + 16.81 + 0.45 = 22.69",
        ),
    ],
)
def test_the_calculator_writes_a_step_s_result_as_the_traces_write_it(think: str, written: str) -> None:
    assert continuation(think) == written


@pytest.mark.parametrize(
    "think",
    [
        THINK + "So the order is grey trash can, blue table =",  # words, not arithmetic
        THINK + "x: 1.06 + 1.68",  # the result's place not reached yet
        THINK + "x: 1.06 + 1.68 = 2.74",  # written already
        THINK + "Frame 3: up 1.1",
        THINK + "1. the green door (frame 1)",
        THINK + "The answer is",  # " is" without a square root
        THINK + "2.74 =",  # nothing to compute
        "<think>The red bed at (1, 2, 3): gaps",  # no target position written before
    ],
)
def test_the_calculator_leaves_everything_else_to_the_model(think: str) -> None:
    assert continuation(think) is None


def test_products_come_before_sums() -> None:
    assert evaluate("2 x 3 + 4") == 10.0
    assert evaluate("1.2 x (-0.5)") == pytest.approx(-0.6)
    assert evaluate("124 + 72 - 6") == 190.0
    with pytest.raises(ValueError, match="not an arithmetic step"):
        evaluate("2 x door")


@pytest.fixture(scope="module")
def tokenizer(tiny_models_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_models_dir / "lm")


def test_the_calculator_s_tokens_replace_the_model_s_until_the_result_is_written(tokenizer) -> None:
    """Row 0 sets up a sum and the model goes on writing "9.99 apples" after "="; the calculator's " 2.74"
    takes the place of as many tokens, the model's writing resumes after it. Row 1 writes no step and is
    left alone. Rows are followed by their place even when only one is left in the batch."""
    model_text = ["x: 1.06 + 1.68 = 9.99 apples and more words", "The door is on the left and far"]
    model_ids = [tokenizer.encode(text, add_special_tokens=False) for text in model_text]
    force = ToolTokens(tokenizer, rows=2)
    written: list[list[int]] = [[], []]
    for step in range(max(map(len, model_ids))):
        active = [row for row in (0, 1) if step < len(model_ids[row])]
        chosen = torch.tensor([model_ids[row][step] for row in active])
        out = force(torch.tensor(active), chosen)
        for row, token in zip(active, out.tolist(), strict=True):
            written[row].append(token)
    first = tokenizer.decode(written[0])
    assert first.startswith("x: 1.06 + 1.68 = 2.74") and "9.99" not in first
    assert tokenizer.decode(written[1]) == model_text[1]
    assert force.written == 1 and force.forced == len(tokenizer.encode(" 2.74", add_special_tokens=False))
    assert force.texts[0] == first


def test_decoding_feeds_the_forced_tokens_back_to_the_model(tiny_models_dir: Path) -> None:
    """A token put in place of the model's first choice is what the model reads next: the rest of the row
    is what greedy decoding writes after the prompt and that token."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    model = AutoModelForCausalLM.from_pretrained(tiny_models_dir / "lm", dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(5)
    ids = torch.randint(3, model.config.vocab_size, (2, 7), generator=generator)
    mask = torch.ones_like(ids)
    config = GenerationConfig(max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0)
    plain = decoding.decode_batch(model, ids, mask, config)
    token = int(plain[0, 0]) + 1  # not what the model would write

    def force(active: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        if force.steps == 0:
            chosen = chosen.clone()
            chosen[0] = token
        force.steps += 1
        return chosen

    force.steps = 0
    forced = decoding.decode_batch(model, ids, mask, config, force)
    assert int(forced[0, 0]) == token and torch.equal(forced[1], plain[1])
    after = decoding.decode_batch(model, torch.cat([ids[:1], torch.tensor([[token]])], dim=1),
                                  torch.ones(1, 8, dtype=torch.long), config)  # fmt: skip
    assert torch.equal(forced[0, 1:], after[0, :5])


def test_the_backend_decodes_with_the_calculator_when_asked(tiny_models_dir: Path, monkeypatch) -> None:
    """``lm.transformers.calculator``: even a single request goes through the decoding loop, with a
    :class:`ToolTokens` for its rows; off, a single request is generate's."""
    from embodied_r_ros.backends import load_backend, transformers_backend
    from embodied_r_ros.backends.base import ChatMessage
    from embodied_r_ros.config import model_config

    calls = []
    decode = transformers_backend.decode_batch
    monkeypatch.setattr(transformers_backend, "decode_batch", lambda *a: calls.append(a) or decode(*a))
    request = [[ChatMessage.text("user", "x: 1.06 + 1.68 =")]]
    for calculator in (False, True):
        config = model_config(str(tiny_models_dir / "lm"), max_new_tokens=4, calculator=calculator)
        backend = load_backend(config, vision=False)
        try:
            assert len(backend.generate(request)) == 1
        finally:
            backend.close()
    assert len(calls) == 1 and isinstance(calls[0][4], ToolTokens)


def test_the_agreement_check_tells_a_last_digit_apart_from_another_number(monkeypatch) -> None:
    """training/experiments/calculator_agreement.py: a rounding of the last digit is told apart from a
    wrong result or another layout."""
    import importlib.util
    import sys

    script = Path(__file__).resolve().parents[1] / "training" / "experiments" / "calculator_agreement.py"
    spec = importlib.util.spec_from_file_location("calculator_agreement", script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    apart = module.last_digit_apart
    assert apart(" 2.74", " 2.75") and apart(" 1833", " 1834") and apart(" 2.33, 4.10", " 2.33, 4.11")
    assert not apart(" 2.74", " 2.76") and not apart(" 2.74", " 3.74") and not apart(" 2.74", " 2.740")
    assert not apart(" (0.5, 1.8)", " 0.5, 1.8")
