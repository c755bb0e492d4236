"""The option a reasoning concludes, and the lookup that turns it into the answer letter.

The reasoner's think ends by naming a value ("So the order is white tv, green bed, white table.", "The
nearest option is C (2.1 m)"), then looks it up among the options one line each ("A. red bed: no.",
"B. green bed: yes.") and writes the letter. The small model reaches the right value more often than it
writes the right letter: its lookup says "yes" one line late by habit (issue 42). :func:`concluded_option`
reads which option the reasoning named last; :func:`lookup_continuation` is what a decoder with a lookup
(``lm.transformers.lookup``, :mod:`embodied_r_ros.backends.tool_decoding`) writes at a lookup line's colon,
after "Nearest to V:" and after ``<answer>``: the comparison of that line's option with the conclusion, the
option nearest a computed value (the numeric tasks' lookup), and the concluded letter.
The model still concludes; only the lookup is exact. Plain Python: no model, no tokenizer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from .options import LETTER, OPTION_LETTERS

# A line of the option lookup: "B. green bed: yes." (any case, as a policy writes it).
OPTION_LOOKUP = re.compile(
    r"^[ \t]*[A-Za-z][.)][ \t]+.*:[ \t]*(?:yes|no)\.?[ \t]*$", re.MULTILINE | re.IGNORECASE
)
# A lookup line up to where its yes or no comes: "B. green bed:" (its letter).
_LOOKUP_PLACE = re.compile(rf"^[ \t]*({LETTER})[.)][ \t]+[^:\n]*:$")  # one option, up to its colon
_OPTION_LETTER = re.compile(rf"\boption ({LETTER})\b")
# A numeric option's lookup: the options' numbers copied ("Options: A 3.2, B 0.9, C 1.3." or, for a turn,
# "Options left: A 180, C 45."), then the place of the nearest ("Nearest to 0.94:").
_NUMBER = r"-?\d+(?:\.\d+)?"
_PAIR = rf"{LETTER} {_NUMBER}"
_LISTED = re.compile(rf"^Options[^:\n]*: ({_PAIR}(?:, {_PAIR})*)\.$")
_NEAREST_PLACE = re.compile(rf"^Nearest to ({_NUMBER}):$")
ANSWER_OPEN = "<answer>"
THINK_CLOSE = "</think>"


def concluded_option(think: str, options: Sequence[str]) -> str | None:
    """The letter of the option the reasoning ends on: the option whose text it names last (the longest of
    those ending at the same place), else the last "option X" it writes; None when it names neither.
    The option lookup's lines are the lookup, not the conclusion: they are read past."""
    think = OPTION_LOOKUP.sub("", think)
    lowered = think.lower()
    best: tuple[int, int, int] | None = None  # (end, length, index)
    for i, text in enumerate(options):
        at = lowered.rfind(text.lower())
        if at >= 0 and text.strip():
            found = (at + len(text), len(text), i)
            best = found if best is None or found[:2] > best[:2] else best
    if best is not None:
        return OPTION_LETTERS[best[2]]
    letters = _OPTION_LETTER.findall(think)
    return letters[-1] if letters else None


def lookup_continuation(text: str, options: Sequence[str]) -> str | None:
    """What the lookup writes next after ``text`` (the completion so far) for a question with ``options``:
    " yes." or " no." after a lookup line's colon (its option against the conclusion above it); after
    "Nearest to V:", the option nearest V among those the line above lists (" 0.9 m, option B."); the
    concluded letter right after ``<answer>``; None elsewhere, where nothing is concluded, or without
    options (an open question)."""
    if not options:
        return None
    if text.endswith(ANSWER_OPEN):
        think = text[: -len(ANSWER_OPEN)].rstrip()
        if not think.endswith(THINK_CLOSE):
            return None
        return concluded_option(think[: -len(THINK_CLOSE)], options)
    before, _, line = text.rpartition("\n")
    if THINK_CLOSE in text:
        return None
    nearest = _NEAREST_PLACE.match(line)
    if nearest is not None:
        return _nearest(float(nearest.group(1)), before.rpartition("\n")[2], options)
    place = _LOOKUP_PLACE.match(line)
    if place is None:
        return None
    concluded = concluded_option(before, options)
    if concluded is None:
        return None
    return " yes." if place.group(1) == concluded else " no."


def _nearest(value: float, listed: str, options: Sequence[str]) -> str | None:
    """The option nearest ``value`` in ratio among the numbers the line ``listed`` copies ("Options: A 3.2,
    B 0.9."), as the traces name it (" 0.9 m, option B."); None when that line lists none or ``value`` is not
    positive (the traces match only positive values to options)."""
    match = _LISTED.match(listed)
    if match is None or value <= 0:
        return None
    best: tuple[float, int] | None = None
    for pair in match.group(1).split(", "):
        letter, number = pair.split(" ")
        index = OPTION_LETTERS.index(letter)
        if float(number) <= 0 or index >= len(options):
            continue
        gap = abs(math.log(float(number) / value))
        best = (gap, index) if best is None or gap < best[0] else best
    return None if best is None else f" {options[best[1]]}, option {OPTION_LETTERS[best[1]]}."


# What the end of a token must be for :func:`lookup_continuation` to have anything to say (a cheap filter).
TRIGGER_ENDINGS = (":", ">")
