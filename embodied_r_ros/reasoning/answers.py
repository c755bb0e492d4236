"""Reading LM completions: the <think>/<answer> split, choice letters, numbers with units, and MRA.

This is the end of the data flow. The ROS node, the training rewards and users' scripts all read a
completion through these functions, so they share one rule set:

* :func:`parse_completion` splits a completion into think / answer and decides the format condition.
  The answer is read only from ``<answer>`` tags after the think block, never from the reasoning (the
  public Embodied-R code scanned the whole completion, so "Option B" inside <think> beat the answer).
* :func:`extract_choice` reads a multiple-choice letter from the answer text.
* :func:`extract_number` reads a numeric answer in SI units (metres, square metres, plain counts).
* :func:`mean_relative_accuracy` is VSI-Bench's MRA for numeric answers.

Every parser here is linear-time (``str.find``/``rfind`` and regular expressions without nested
quantifiers) and never raises on any input: garbage gives an empty or ``None`` result.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .options import LETTER, LETTER_ANY_CASE, OPTION_LETTERS

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"


# ----------------------------------------------------------------------------------------------------
# Completion structure


@dataclass(frozen=True)
class ParsedCompletion:
    """A completion split into its reasoning and its answer.

    ``think`` and ``answer`` are stripped; ``""`` when the block is missing. ``well_formed`` is the
    paper's format-reward condition (see :func:`parse_completion`).
    """

    think: str
    answer: str
    well_formed: bool


def _as_text(value: object) -> str:
    """Any input as a str, so that callers with bad data get an empty parse instead of an exception."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return str(value)
    except Exception:  # a hostile __str__ must not break a reward function
        return ""


def parse_completion(text: str) -> ParsedCompletion:
    """Split an LM completion into its ``<think>`` and ``<answer>`` parts.

    Rules (tags are matched exactly, lower case):

    * ``think``: the text between the first ``<think>`` and the first ``</think>`` after it; ``""``
      when there is no such complete block (e.g. a completion truncated inside the reasoning).
    * ``answer``: the text of the LAST complete ``<answer>...</answer>`` block that starts after the
      think block (anywhere when there is no think block). With nested or repeated openings the content
      starts after the last ``<answer>`` before that closing tag. Answer tags inside the reasoning are
      ignored, and the reasoning text itself is never used. A trailing ``<answer>`` without its closing
      tag (a truncated completion) does not count, so ``answer`` is ``""`` when nothing else is there.
    * ``well_formed``: the whole completion, apart from leading/trailing whitespace, is
      ``<think>...</think>`` then optional whitespace then ``<answer>...</answer>``, each of the four
      tags occurs exactly once, and the stripped answer is non-empty (an empty think is allowed, as in
      the paper's format reward).

    Never raises; ``None`` or non-str input parses as an empty completion.
    """
    text = _as_text(text)
    think = ""
    search_from = 0
    t_open = text.find(THINK_OPEN)
    if t_open >= 0:
        t_close = text.find(THINK_CLOSE, t_open + len(THINK_OPEN))
        if t_close >= 0:
            think = text[t_open + len(THINK_OPEN) : t_close].strip()
            search_from = t_close + len(THINK_CLOSE)

    answer = ""
    a_close = text.rfind(ANSWER_CLOSE, search_from)
    if a_close >= 0:
        a_open = text.rfind(ANSWER_OPEN, search_from, a_close)
        if a_open >= 0:
            answer = text[a_open + len(ANSWER_OPEN) : a_close].strip()

    return ParsedCompletion(think=think, answer=answer, well_formed=_is_well_formed(text, answer))


def _is_well_formed(text: str, answer: str) -> bool:
    body = text.strip()
    if not answer or not body.startswith(THINK_OPEN) or not body.endswith(ANSWER_CLOSE):
        return False
    if any(body.count(tag) != 1 for tag in (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)):
        return False
    # With one of each tag, think first and </answer> last, only the gap between the blocks is left.
    t_close = body.find(THINK_CLOSE)
    a_open = body.find(ANSWER_OPEN)
    return t_close < a_open and not body[t_close + len(THINK_CLOSE) : a_open].strip()


# ----------------------------------------------------------------------------------------------------
# Multiple choice

# "A. chair", "(A) chair", "A) chair", "A: chair", "[A] chair"; upper case only, so a plain option text
# that starts with a word ("A chair") is not taken for a prefix.
_OPTION_PREFIX = re.compile(r"\s*[\(\[]?(" + LETTER + r")\s*[\.\):\]]\s*(.*)", re.DOTALL)
# Characters that may surround a bare letter answer: "(B)", "B.", "**B**", "'b'", "[B]:".
_LETTER_DECORATION = re.compile(r"[\s()\[\]{}*_`\"'“”‘’.,:;!]+")
# The answer opens with a delimited letter: "B) left", "(B) left", "B. left", "B: left", "[B] left".
_LEADING_LETTER = re.compile(
    r"\s*+(?:[\(\[]\s*+(" + LETTER_ANY_CASE + r")\s*+[\)\]]|(" + LETTER_ANY_CASE + r")\s*+\)|(" + LETTER
    + r")\s*+[.:](?![A-Za-z]))"
)
# Explicit markers anywhere: "Option B", "choice (c)", "the answer is B", "Answer: (B)", "(B)".
# Possessive quantifiers (*+, ++) keep runs of whitespace from being re-split: linear on any input.
_EXPLICIT_LETTER = re.compile(
    r"(?i:\b(?:option|choice)\b)\s*+(?:[:#]\s*+)?(?:[\(\[]\s*+)?(" + LETTER_ANY_CASE + r")(?![\w'’])"
    r"|(?i:\banswer\b)(?:\s++(?i:is)\b)?\s*+(?:[:=]\s*+)?(?:(?i:option)\s*+)?(?:[\(\[]\s*+)?(" + LETTER
    + r")(?![\w'’])|\(\s*+(" + LETTER + r")\s*+\)"
)
# A standalone capital letter: not part of a word, a contraction ("I'm") or a number.
_STANDALONE_LETTER = re.compile(r"(?<![\w'’])(" + LETTER + r")(?![\w'’])")
# "A" and "I" are also English words: followed by a lower-case word they read as "A chair", "I think".
# Words that follow a choice letter as often as an article ("A and B", "A is closer") do not count.
_WORD_LIKE_LETTER = re.compile(
    r"\s++(?!(?:and|or|nor|is|was|are|were|vs|versus|then|than|seems|looks|appears)\b)[a-z]"
)


def _option_table(options: Sequence[str] | None) -> tuple[str, list[str]]:
    """Valid letters and the matching option texts (prefix removed).

    Options count as prefixed only when every one of them has a letter prefix; the letters are then
    read from the prefixes, otherwise they are A, B, C ... by position (at most 26 options).
    """
    if options is None:
        return OPTION_LETTERS, []
    texts = [unicodedata.normalize("NFKC", _as_text(o)) for o in list(options)[: len(OPTION_LETTERS)]]
    matches = [_OPTION_PREFIX.fullmatch(t) for t in texts]
    if texts and all(matches):
        letters = "".join(m.group(1) for m in matches)  # type: ignore[union-attr]
        return letters, [m.group(2) for m in matches]  # type: ignore[union-attr]
    return OPTION_LETTERS[: len(texts)], texts


def _unique(letters: list[str], valid: str) -> tuple[bool, str | None]:
    """(any valid candidate, the letter when exactly one distinct valid letter was found)."""
    found = {letter.upper() for letter in letters if letter and letter.upper() in valid}
    if not found:
        return False, None
    return True, found.pop() if len(found) == 1 else None


_ARTICLES = frozenset({"a", "an", "the"})


def _normalise_words(text: str) -> str:
    # Articles are dropped so that "A red chair" matches the option "the red chair".
    return " ".join(w for w in re.findall(r"\w+", text.casefold()) if w not in _ARTICLES)


def _match_option_text(answer: str, letters: str, texts: list[str]) -> str | None:
    """The letter of the one option whose text equals, or appears as whole words in, the answer."""
    norm_answer = _normalise_words(answer)
    norm_texts = [_normalise_words(t) for t in texts]
    if not norm_answer:
        return None
    equal = [i for i, t in enumerate(norm_texts) if t and t == norm_answer]
    if equal:
        return letters[equal[0]] if len(equal) == 1 else None
    padded = f" {norm_answer} "
    inside = [i for i, t in enumerate(norm_texts) if t and f" {t} " in padded]
    # "the red chair" contains both "chair" and "red chair": the longer, more specific option wins.
    best = [
        i for i in inside if not any(j != i and f" {norm_texts[i]} " in f" {norm_texts[j]} " for j in inside)
    ]
    return letters[best[0]] if len(best) == 1 else None


def extract_choice(answer_text: str, options: Sequence[str] | None = None) -> str | None:
    """Read the chosen option letter (upper case) from an answer, or ``None``.

    Valid letters are A..Z when ``options`` is None, else one per option: the options' own letter
    prefixes when all of them have one ("A. chair", "(B) lamp"), otherwise A, B, C ... by position.
    Letters outside the valid set are ignored. Readings are tried from the most to the least explicit;
    the first reading that finds a valid letter decides, and two different letters at that level give
    ``None`` (ambiguous):

    1. the whole answer is one letter, with any brackets/punctuation/markdown: "B", "(b)", "**B.**";
    2. the answer opens with a delimited letter: "B) left", "(B) left", "B. left", "B: left";
    3. explicit markers anywhere: "Option B", "choice (c)", "the answer is B", "Answer: B", "(B)";
    4. standalone capital letters ("B is closer", "It is B", "A or B"), except "A"/"I" followed by a
       lower-case word other than and/or/is/was/are/vs/then/than..., which read as English words
       ("A chair is closer", "I think");
    5. option text: the answer equals one option's text, or contains exactly one option's text as whole
       words (case-insensitive, ignoring punctuation and the articles a/an/the; when one matching option
       contains another, the longer wins);
    6. the "A"/"I" letters set aside in step 4 ("A is closer" with no better reading).

    Never raises.
    """
    text = unicodedata.normalize("NFKC", _as_text(answer_text)).replace("*", "")
    if not text.strip():
        return None
    valid, texts = _option_table(options)
    if not valid:
        return None

    bare = _LETTER_DECORATION.sub("", text) if len(text) <= 16 else ""
    if len(bare) == 1 and bare.isascii() and bare.isalpha():
        return bare.upper() if bare.upper() in valid else None

    leading = _LEADING_LETTER.match(text)
    found, letter = _unique([next(g for g in leading.groups() if g)] if leading else [], valid)
    if found:
        return letter

    found, letter = _unique(
        [next(g for g in m.groups() if g) for m in _EXPLICIT_LETTER.finditer(text)], valid
    )
    if found:
        return letter

    strong: list[str] = []
    weak: list[str] = []
    for m in _STANDALONE_LETTER.finditer(text):
        word_like = m.group(1) in "AI" and _WORD_LIKE_LETTER.match(text, m.end()) is not None
        (weak if word_like else strong).append(m.group(1))
    found, letter = _unique(strong, valid)
    if found:
        return letter

    if texts:
        letter = _match_option_text(text, valid, texts)
        if letter is not None:
            return letter

    return _unique(weak, valid)[1]


# ----------------------------------------------------------------------------------------------------
# Numbers with units

# A numeral not glued to a word ("Qwen2", "B2") or to a preceding decimal point. Commas followed by
# groups of exactly three digits are thousands separators ("1,250" -> 1250); any other comma between
# digits is a decimal comma ("2,5" -> 2.5). No nested quantifiers: linear on any input.
_NUMERAL = r"([-+]?)(\d+(?:,\d{3})+(?![\d,])(?:\.\d+)?|\d+(?:[.,]\d+)?|\.\d+)([eE][-+]?\d+)?"
_NUMBER = re.compile(r"(?<![\w.])" + _NUMERAL)
# The second part of a compound length may follow the first unit directly ("3m20cm").
_NUMBER_PART = re.compile(_NUMERAL)
_UNITS_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS_WORDS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
               "eighty": 80, "ninety": 90}  # fmt: skip
_DIGIT_WORDS = "one|two|three|four|five|six|seven|eight|nine"
_NUMBER_WORD = re.compile(
    rf"\b(?:({'|'.join(_TENS_WORDS)})(?:[\s-]+({_DIGIT_WORDS}))?|({'|'.join(_UNITS_WORDS)}))\b",
    re.IGNORECASE,
)

_M = r"(?:met(?:er|re)s?)"
_AREA = r"(?![A-Za-z0-9])"  # an area unit may not run on into letters or digits ("m20cm" is not m2)
_LEN = r"(?![A-Za-z])"
# (pattern, factor to SI, is_length). Areas first so that "m2" / "meters squared" are not read as "m".
_UNIT_TABLE: tuple[tuple[re.Pattern[str], float, bool], ...] = tuple(
    (re.compile(r"\s*(?:" + pattern + r")" + tail, re.IGNORECASE), factor, is_length)
    for pattern, factor, is_length, tail in (
        (rf"square\s+{_M}|sq\.?\s*(?:{_M}|m)|sqm|{_M}\s+squared|m\s*\^\s*2|m2", 1.0, False, _AREA),
        (r"square\s+(?:feet|foot)|sq\.?\s*(?:ft|feet|foot)|sqft|(?:feet|foot)\s+squared|ft\s*\^\s*2|ft2",
         0.09290304, False, _AREA),
        (r"square\s+centimet(?:er|re)s?|sq\.?\s*cm|cm\s*\^\s*2|cm2", 1e-4, False, _AREA),
        (r"square\s+kilomet(?:er|re)s?|sq\.?\s*km|km\s*\^\s*2|km2", 1e6, False, _AREA),
        (r"square\s+inch(?:es)?|sq\.?\s*in|in\s*\^\s*2|in2", 0.00064516, False, _AREA),
        (r"kilomet(?:er|re)s?|km", 1000.0, True, _LEN),
        (r"centimet(?:er|re)s?|cm", 0.01, True, _LEN),
        (r"millimet(?:er|re)s?|mm", 0.001, True, _LEN),
        (rf"{_M}|m", 1.0, True, _LEN),
        (r"feet|foot|ft", 0.3048, True, _LEN),
        (r"yards?|yds?", 0.9144, True, _LEN),
        # "in" is only a unit when no word follows: "3 in" is inches, "3 in the room" is a count.
        (r"inch(?:es)?|in(?!\s+[A-Za-z])", 0.0254, True, _LEN),
    )
)  # fmt: skip
# Between the parts of a compound length: "3 m 20 cm", "5 ft and 10 in", "1 m, 50 cm".
_COMPOUND_GAP = re.compile(r"\s*(?:,\s*)?(?:and\s+)?", re.IGNORECASE)


def _read_unit(text: str, pos: int) -> tuple[float, bool, int] | None:
    """(factor to SI, is a length, end position) of the unit starting at ``pos``, if any."""
    for pattern, factor, is_length in _UNIT_TABLE:
        m = pattern.match(text, pos)
        if m:
            return factor, is_length, m.end()
    return None


def _numeral_value(m: re.Match[str]) -> float:
    sign, digits, exponent = m.group(1), m.group(2), m.group(3) or ""
    if re.fullmatch(r"\d+(?:,\d{3})+(?:\.\d+)?", digits):
        digits = digits.replace(",", "")
    return float(sign + digits.replace(",", ".") + exponent)


def _with_units(text: str, value: float, end: int) -> float:
    """Apply the unit after a number; add a following smaller length part ("3 m 20 cm")."""
    unit = _read_unit(text, end)
    if unit is None:
        return value
    factor, is_length, end = unit
    total = value * factor
    while is_length:
        gap = _COMPOUND_GAP.match(text, end)
        nxt = _NUMBER_PART.match(text, gap.end()) if gap else None
        part_unit = _read_unit(text, nxt.end()) if nxt and not nxt.group(1) else None
        if nxt is None or part_unit is None or not part_unit[1] or part_unit[0] >= factor:
            break
        factor, _, end = part_unit
        total += _numeral_value(nxt) * factor
    return total


def extract_number(answer_text: str) -> float | None:
    """Read the first quantity of an answer, in SI units, or ``None``.

    * Lengths become metres (m, meter(s)/metre(s), cm, mm, km, ft/feet/foot, in/inch(es), yd/yard(s);
      "1.5m" without a space; a compound "3 m 20 cm" / "5 ft 10 in" is summed). "in" counts as inches
      only when no word follows it ("3 in the corner" is the count 3).
    * Areas become square metres (m^2, m2, m², sq m, sqm, square meters/metres, meters squared, sq ft,
      square feet, cm², km², square inches).
    * Anything else is a plain number (counts).
    * Numerals: sign, decimals, scientific notation ("1.2e3"), thousands separators ("1,250" -> 1250);
      any other comma between digits is a decimal comma ("2,5" -> 2.5).
    * Digits win over words: the first numeral is used when there is one; otherwise the first number
      word ("zero" .. "nineteen", "twenty" .. "ninety", "twenty-one"), so "three chairs" -> 3.0 and
      "one of the 4 chairs" -> 4.0 ("one" is too often a pronoun). "none"/"no" are NOT read as 0:
      "None" is also how models say "no answer", and inventing a value would score it.
    * Non-finite results (e.g. "1e999") give ``None``. Never raises.
    """
    try:
        text = unicodedata.normalize("NFKC", _as_text(answer_text)).replace("\u2212", "-")
        numeral = _NUMBER.search(text)
        if numeral is not None:
            value, end = _numeral_value(numeral), numeral.end()
        else:
            word = _NUMBER_WORD.search(text)
            if word is None:
                return None
            if word.group(1):
                value = float(_TENS_WORDS[word.group(1).lower()])
                value += _UNITS_WORDS[word.group(2).lower()] if word.group(2) else 0
            else:
                value = float(_UNITS_WORDS[word.group(3).lower()])
            end = word.end()
        result = _with_units(text, value, end)
    except (ValueError, OverflowError):  # e.g. a numeral float() refuses; treat as unreadable
        return None
    return result if math.isfinite(result) else None


# ----------------------------------------------------------------------------------------------------
# Metric

# 1 - t for t = 0.50, 0.55, ..., 0.95, built from integers: (20 - (10 + k)) / 20 for k = 0..9.
_MRA_TOLERANCES = np.arange(10, 0, -1, dtype=np.float64) / 20.0
# Relative errors computed in floats land a few ulps off exact decimal boundaries (|1.1 - 1| / 1 is
# 0.10000000000000009); this slack keeps "exactly 10% off" inside the 10% threshold as intended.
_BOUNDARY_SLACK = 1e-9


def mean_relative_accuracy(pred: float | None, gt: float) -> float:
    """VSI-Bench's Mean Relative Accuracy of one numeric prediction, in [0, 1].

    MRA = mean over the ten thresholds t in {0.50, 0.55, ..., 0.95} of [ |pred - gt| / |gt| <= 1 - t ].
    Source: VSI-Bench ("Thinking in Space", vision-x-nyu/thinking-in-space,
    lmms_eval/tasks/vsibench/utils.py): ``abs(pred - target) / target <= 1 - np.linspace(.5, .95, 10)``.
    Same inclusive comparison (<=) and thresholds, with three deliberate differences:

    * thresholds are the exact decimals (built from integers) and the comparison has a 1e-9 slack, so
      an error of exactly 10 % counts as within 10 % whatever the float rounding. The official float
      code is inconsistent exactly on these boundaries (it scores 12 vs 10 as 0.6, 11 vs 10 as 0.9).
      Off a boundary the two agree;
    * the denominator is |gt| (the official code divides by gt, which VSI-Bench keeps positive);
    * gt == 0 (a division by zero in the official code) gives 1.0 when pred == 0, else 0.0.

    ``pred`` None, NaN or infinite (unreadable answer) gives 0.0. Raises ValueError when ``gt`` is not
    a finite number, since that is a data-set error the caller must fix.
    """
    try:
        gt_value = float(gt)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"mean_relative_accuracy: gt must be a finite number, got {gt!r}") from exc
    if not math.isfinite(gt_value):
        raise ValueError(f"mean_relative_accuracy: gt must be a finite number, got {gt!r}")
    if pred is None:
        return 0.0
    try:
        pred_value = float(pred)
    except (TypeError, ValueError):
        return 0.0
    if not math.isfinite(pred_value):
        return 0.0
    if gt_value == 0.0:
        return 1.0 if pred_value == 0.0 else 0.0
    relative_error = abs(pred_value - gt_value) / abs(gt_value)
    return float(np.mean(relative_error <= _MRA_TOLERANCES + _BOUNDARY_SLACK))


# ----------------------------------------------------------------------------------------------------
# Final result of the pipeline


@dataclass
class Answer:
    """The pipeline's answer to one question: what the node publishes and training scores."""

    question: str
    options: list[str]
    text: str  # the answer part (what was inside <answer>)
    choice: str | None  # letter, None when not multiple choice or unreadable
    value: float | None  # numeric value in SI units, None when not numeric/unreadable
    think: str
    well_formed: bool
    completion: str  # raw LM output
    keyframe_stamps_ns: list[int] = field(default_factory=list)
    descriptions: list = field(default_factory=list)  # perception.Description items (no import here)
    perception_s: float = 0.0
    reasoning_s: float = 0.0
    # What the pipeline did to get this answer beyond the plain path (a prompt fitted to the context, ...),
    # one sentence each, for the answer's message.
    notes: list[str] = field(default_factory=list)


def answer_from_completion(completion: str, question: str, options: Sequence[str]) -> Answer:
    """Build an :class:`Answer` from a raw completion.

    ``choice`` is read (:func:`extract_choice`) only for multiple-choice questions (non-empty
    ``options``); ``value`` (:func:`extract_number`) only for open questions (no options). Both are read
    from the answer tags only, never from the reasoning.
    """
    completion = _as_text(completion)
    option_list = [_as_text(o) for o in options] if options else []
    parsed = parse_completion(completion)
    return Answer(
        question=question,
        options=option_list,
        text=parsed.answer,
        choice=extract_choice(parsed.answer, option_list) if option_list else None,
        value=None if option_list else extract_number(parsed.answer),
        think=parsed.think,
        well_formed=parsed.well_formed,
        completion=completion,
    )
