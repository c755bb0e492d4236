"""Exact arithmetic for the reasoner's think: what a calculator writes after a step the LM has set up.

The small reasoner copies the values a question needs from its prompt, one step a line, and then combines
them wrongly ("x: -0.37 + 1.45 = 0.82", "10.40, squared 1044"; issue 42). A decoder with a
calculator (:mod:`embodied_r_ros.backends.tool_decoding`, ``lm.transformers.calculator``) lets the model
write each step up to its result, and writes the result itself, as GSM8K's calculator annotations did for
a model's arithmetic (Cobbe et al., 2021, "Training verifiers to solve math word problems"). The model
still chooses which values to combine and how; only the arithmetic is exact.

:func:`continuation` reads the think written so far and, when its current line ends where a step's result
comes next, returns the text to write there, formatted as the oracle's traces write it
(``embodied_r_training.tasks``): a line ending in "=" after an expression of numbers joined by +, - or x
(or a pair or triple of them in parentheses), ", squared" after a value, "The square root of N is", and the
gaps of a candidate's position from a target's (relative distance). Anything else returns None and the
model writes on. Plain Python: no model, no tokenizer.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"-?\d+(?:\.\d+)?"
_TERM = rf"(?:{_NUMBER}|\({_NUMBER}\))"
_EXPRESSION = rf"{_TERM}(?: [-+x] {_TERM})*"
EXPRESSION = re.compile(rf"^{_EXPRESSION}$")
TUPLE = re.compile(rf"^\(({_EXPRESSION}), ({_EXPRESSION})(?:, ({_EXPRESSION}))?\)$")
# A step's label ("x: ", "Ahead: ", "Facing: ") and the side words of "Right 167 - left 70 =".
_LABEL = re.compile(r"^[A-Za-z][A-Za-z ]*:\s*")
_TURN_WORDS = re.compile(r"\b(?:left|right|up|down)\s+", re.IGNORECASE)
_SQUARED = re.compile(rf"= ({_NUMBER}), squared$")
_ROOT = re.compile(rf"The square root of ({_NUMBER}) is$")
_POINT = rf"\(({_NUMBER}), ({_NUMBER})(?:, ({_NUMBER}))?\)"
_GAPS = re.compile(rf"^The .+? at {_POINT}: gaps$")
_CENTRE = re.compile(rf"^(?:<think>)?The .+? is at {_POINT}\.$", re.MULTILINE)
# Lines whose products carry their sign: relative_direction's dot and cross products.
_SIGNED = ("Ahead:", "Left:")
# abs_distance's lines, one an axis: their differences written with two decimals whatever the operands.
_AXES = ("x:", "y:", "z:")


def number(value: float) -> str:
    """A result as the traces write it (``embodied_r_training.tasks`` use this one): two decimals below
    100, one below 1000, whole above (a small model copies and adds short numbers more reliably than long
    ones)."""
    size = abs(value)
    return f"{value:.2f}" if size < 100 else f"{value:.1f}" if size < 1000 else f"{value:.0f}"


def evaluate(expression: str) -> float:
    """The value of an :data:`EXPRESSION` ("1.2 x (-0.5)", "124 + 72 - 6"): x before + and -."""
    if not EXPRESSION.match(expression):
        raise ValueError(f"not an arithmetic step: {expression!r}")
    tokens = expression.replace("(", "").replace(")", "").split(" ")
    total, product, sign = 0.0, float(tokens[0]), 1.0
    for operator, value in zip(tokens[1::2], tokens[2::2], strict=True):
        if operator == "x":
            product *= float(value)
        else:
            total += sign * product
            sign, product = (1.0 if operator == "+" else -1.0), float(value)
    return total + sign * product


def _point(match: re.Match[str]) -> tuple[float, ...]:
    return tuple(float(v) for v in match.groups() if v is not None)


def _equals(line: str, previous: str) -> str | None:
    """The result of a line ending in "=", or None when what precedes "=" is not arithmetic."""
    body = _TURN_WORDS.sub("", _LABEL.sub("", line[:-1].strip()))
    pair = TUPLE.match(body)
    if pair:  # relative_direction's vectors, one decimal
        values = [round(evaluate(e), 1) + 0.0 for e in pair.groups() if e is not None]
        return "(" + ", ".join(f"{v:g}" for v in values) + ")"
    if not EXPRESSION.match(body) or not re.search(r" [-+x] ", body):
        return None
    value = evaluate(body)
    if " x " in body:
        if line.startswith(_SIGNED) or previous.startswith(_SIGNED):
            return f"{'+' if value >= 0 else '-'}{number(abs(value))}"
        return f"{value:.2f}"
    if "." not in body:  # whole degrees (turns)
        return f"{value:.0f}"
    decimals = {len(v.split(".")[1]) if "." in v else 0 for v in re.findall(_NUMBER, body)}
    if decimals == {1} and not line.startswith(_AXES) and abs(value) < 100:  # climbs, in tenths of a metre
        return f"{value:.1f}"
    return number(value)


def _gaps(line: str, think: str) -> str | None:
    """A candidate's gaps from the target's position (the think's "The X is at (...)." line), their
    squares and the sum: "2.33, 4.10, 0.67; squared 5.43 + 16.81 + 0.45 = 22.69"."""
    candidate, centre = _GAPS.match(line), _CENTRE.search(think)
    if candidate is None or centre is None:
        return None
    here, there = _point(candidate), _point(centre)
    if len(here) != len(there):
        return None
    gaps = [abs(p - q) for p, q in zip(here, there, strict=True)]
    squares = [g * g for g in gaps]
    return (
        f"{', '.join(number(g) for g in gaps)}; squared {' + '.join(number(s) for s in squares)}"
        f" = {number(sum(squares))}"
    )


def continuation(think: str) -> str | None:
    """What a calculator writes next after ``think`` (the completion so far), space first; None when its
    current line does not end where a result comes."""
    lines = think.rsplit("\n", 2)
    line = lines[-1]
    if "<think>" in line:
        line = line.rsplit("<think>", 1)[1]
    previous = lines[-2] if len(lines) > 1 else ""
    if line.endswith("="):
        found = _equals(line, previous)
    elif line.endswith(", squared"):
        match = _SQUARED.search(line)
        found = number(float(match.group(1)) ** 2) if match else None
    elif line.endswith(" is"):
        match = _ROOT.search(line)
        found = number(math.sqrt(float(match.group(1)))) if match else None
    elif line.endswith(": gaps"):
        found = _gaps(line, think)
    else:
        return None
    return None if found is None else " " + found


# What the end of a token must be for :func:`continuation` to have anything to say (a cheap filter).
TRIGGER_ENDINGS = ("=", "squared", " is", "gaps")
