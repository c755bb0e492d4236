"""Restatements of an answer in reasoning, found and hidden, for the consistency judge.

The consistency reward (:class:`~.rewards.ConsistencyReward`) asks a reference model which answer the
policy's reasoning leads to. Reasoning that restates the answer ("so the answer is B", "two") leads it
there without any reasoning, so every restatement becomes :data:`ANSWER_MASK` before the reference reads
it, and only reasoning that IMPLIES the answer still leads there. The rule must also keep the evidence:
naming objects with their measured values ("the red door 0.94 m") is reasoning, and the reference must
read it to check the reasoning.

Multiple choice (:func:`hide_option_statements`), every option alike (hiding only the policy's option
would point at it):

0. the option lookup's lines ("A. red bed: no.", "B. green bed: yes.",
   :data:`~embodied_r_ros.reasoning.conclusion.OPTION_LOOKUP`)
   are removed whole: a masked line per option would still tell by its place which one said yes;
1. option letters, any case: "B", "(b)", "b)", "so it is b", "option a" (not the B of "Bed" or "B2",
   nor "e.g."). A capital letter is hidden wherever it stands alone (also the article "A": hiding it
   loses nothing); a lower-case "a" or "i" only where it cannot be the English word, i.e. not before
   another word ("a lamp" and "i think" stay, "the answer is a." and "a or b" are hidden);
2. references by position: the ordinal of "the second option", "the last choice" (first .. tenth, 1st ..,
   last; final before option/choice, not "final answer"), the number of "option two", "choice 3";
3. option texts that hold a digit or a comma (an amount "3.2 m", a composite "left, about 75 degrees",
   an order "green bed, white table, white tv"): wherever they appear, case-insensitive, not inside a
   longer word; their units in any spelling ("3.2 metres", "3.2m"), their numbers as written ("3.20 m",
   a more precise result, stays), a composite's parts in order with punctuation or "and", "then", "by"
   between them ("green bed -> white table and white tv"), and a composite's amount alone ("60 deg" of
   "right, about 60 degrees");
4. plain-name option texts ("red door", "back-left", with or without a leading article) and an amount
   option's number written without its unit ("(3.2)"), in conclusions only. The reasoning is cut into
   segments: sentences, and the clause from "so", "thus", "therefore" or "hence" on. A segment is
   evidence when it still carries a number after rules 1-3 (digits, or a number word other than "one",
   which is as often a pronoun) and does not speak of "the answer" or "correct"; otherwise it is a
   conclusion, and plain names in it are hidden. A unitless amount is hidden in a segment where it is the
   only number. So "Distances: the green bed 4.12 m; the red door 0.94 m." keeps its names and
   "The nearest is the red door." does not. A conclusion that carries a number ("the nearest is the red
   door, 0.94 m") reads as evidence and keeps its names: the rule cannot tell the two apart, and that
   sentence at least carries the value the reference can check.

Numeric (:func:`hide_number_statements`): a written number x restates the answer a when x is a rounding
of a to x's own number of decimals (|x - a| at most half a unit of x's last place) AND |x - a| <= 5 % of
|a|. Numbers are digits ("2.1", "-3") or English number words ("two", "twenty-three", "one hundred and
five", "two point one three"); a unit after one is converted first ("213 cm" for 2.13 m). So for 2.13
"2.1", "2.1 m" and "two point one" are hidden, "2" (6 % off) is not; for 3.3 "3.3" is hidden and "3"
(9 % off, e.g. "frame 3") stays; the measurements an answer was derived from ("1.20, 2.93" for a
distance of 3.17) stay.
The bound is 5 %, MRA's full-credit band: a number within it that the reference copied would score 1.0;
a wider bound would hide small integers (frame numbers, counts) that are evidence, and a number kept at
5-10 % off can earn the copying reference at most 0.9.

:func:`reasons_left` says whether masked reasoning says anything beyond the masks and the words that only
announce or qualify an answer: a think that was nothing but a restatement scores 0 without a reference
call. All functions here are pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from embodied_r_ros.reasoning.answers import extract_number
from embodied_r_ros.reasoning.conclusion import OPTION_LOOKUP
from embodied_r_ros.reasoning.options import OPTION_LETTERS

# What the reference reads in place of a restatement of the answer.
ANSWER_MASK = "[hidden]"

# How close a rounding of a numeric answer must be to count as a restatement (see the module docstring).
ROUNDED_TOLERANCE = 0.05

# ----------------------------------------------------------------------------------------------------
# Number words: "two", "twenty-three", "one hundred and five", "two point one three"

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split()
)}  # fmt: skip
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_NUMBER_VOCABULARY = frozenset(_UNITS) | frozenset(_TENS) | {"hundred", "point", "and"}
# A whole word: letters not glued to digits or underscores ("B2", "x_1").
_WORD = re.compile(r"(?<![\w])[A-Za-z]+(?![\w])")
# What may join the words of one number: spaces or hyphens ("twenty-three", "two point one").
_WORD_JOIN = re.compile(r"[ \t-]+")
# The most words one number is read from ("nine hundred and ninety-nine point nine nine" is 9): a bound
# that keeps a degenerate run ("one one one ...", as a policy may write) linear.
_MAX_NUMBER_WORDS = 16


@dataclass(frozen=True)
class WrittenNumber:
    """A number as written in text: where (``start``, ``end``), its value and its decimals as written."""

    start: int
    end: int
    value: float
    decimals: int


def number_from_words(words: Sequence[str]) -> tuple[float, int] | None:
    """(value, decimals written) of English number words, None when they do not form one number.

    Whole part: zero .. nineteen, a ten with an optional unit ("twenty three"), an optional "hundred"
    after 1 .. 99 and an optional "and" after it; decimals: "point" and one digit word each
    ("two point one three" is 2.13, 2 decimals). Lower-case words, hyphens already split off.
    """
    if "point" in words:
        cut = words.index("point")
        whole, digits = words[:cut], words[cut + 1 :]
        if not digits or any(_UNITS.get(d, 10) > 9 for d in digits):
            return None
        value = _whole_number(whole) if whole else 0
        if value is None:
            return None
        fraction = "".join(str(_UNITS[d]) for d in digits)
        return float(f"{value}.{fraction}"), len(digits)
    value = _whole_number(words)
    return None if value is None else (float(value), 0)


def _whole_number(words: Sequence[str]) -> int | None:
    """A whole number below 10 000 from number words (see :func:`number_from_words`), else None."""
    total, current, after_hundred = 0, None, False
    for i, word in enumerate(words):
        if word == "hundred":
            if current is None or not 1 <= current <= 99 or total:
                return None
            total, current, after_hundred = current * 100, None, True
        elif word == "and":
            if not after_hundred or i == len(words) - 1 or words[i - 1] != "hundred":
                return None
        elif word in _TENS:
            if current is not None:
                return None
            current = _TENS[word]
        elif word in _UNITS:
            if current is None:
                current = _UNITS[word]
            elif current >= 20 and current % 10 == 0 and 1 <= _UNITS[word] <= 9:
                current += _UNITS[word]
            else:
                return None
        else:
            return None
    if current is None and not total:
        return None
    return total + (current or 0)


def number_words_in(text: str) -> list[WrittenNumber]:
    """The numbers written in words in ``text``: runs of number words joined by spaces or hyphens, each
    read from its first word on as the longest number it forms (:func:`number_from_words`), so "three
    twenty one" is 3 and 21; "and", "point" and "hundred" alone are no number."""
    found: list[WrittenNumber] = []
    run: list[re.Match[str]] = []

    def close_run() -> None:
        while run and run[-1].group(0).lower() in ("and", "point"):
            run.pop()  # "two and", "three point" end before the connective
        if not run:
            return
        words = [m.group(0).lower() for m in run]
        i = 0
        while i < len(words):  # the longest number from each word on: "three twenty one" is 3 and 21
            for end in range(min(len(words), i + _MAX_NUMBER_WORDS), i, -1):
                parsed = number_from_words(words[i:end])
                if parsed is not None:
                    found.append(WrittenNumber(run[i].start(), run[end - 1].end(), *parsed))
                    i = end
                    break
            else:
                i += 1

    for match in _WORD.finditer(text):
        word = match.group(0).lower()
        joined = bool(run) and _WORD_JOIN.fullmatch(text, run[-1].end(), match.start()) is not None
        if word in _NUMBER_VOCABULARY and (joined or word in _UNITS or word in _TENS):
            if not joined:
                close_run()
                run = []
            run.append(match)
        else:
            close_run()
            run = []
    close_run()
    return found


# ----------------------------------------------------------------------------------------------------
# Numeric answers

# A number in digits: "3", "3.5", "-2", "3m" (a glued unit); not "B2", "2nd" or a part of "1.2.3".
_NUMERAL = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\.?\d)(?!(?:st|nd|rd|th)\b)")


def numerals_in(text: str) -> list[WrittenNumber]:
    """The numbers written in digits in ``text``, with their decimals as written."""
    found = []
    for m in _NUMERAL.finditer(text):
        digits = m.group(0)
        decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
        found.append(WrittenNumber(m.start(), m.end(), float(digits), decimals))
    return found


def restates_number(number: WrittenNumber, answer: float) -> bool:
    """Whether a written number restates a numeric answer: a rounding of it to the number's own decimals,
    within :data:`ROUNDED_TOLERANCE` of it (module docstring)."""
    difference = abs(number.value - answer)
    slack = 1e-9 * max(abs(answer), 1.0)  # decimal boundaries computed in floats
    return (
        difference <= 0.5 * 10.0**-number.decimals + slack
        and difference <= ROUNDED_TOLERANCE * abs(answer) + slack
    )


def _unit_factor(text: str, end: int) -> float:
    """The factor to SI units of a unit written right after position ``end`` ("cm": 0.01), else 1.

    Read with :func:`~embodied_r_ros.reasoning.answers.extract_number` as "1 <unit>", cut before the next
    digit so that "3 m 20 cm" is not read as a compound."""
    tail = re.split(r"\d", text[end : end + 24], maxsplit=1)[0]
    factor = extract_number("1" + tail)
    return factor if factor and math.isfinite(factor) else 1.0


def hide_number_statements(think: str, answer: float) -> str:
    """``think`` with every written number that restates the numeric ``answer`` (SI units) hidden,
    in digits or in words, with or without a unit (module docstring)."""
    hidden = []
    for number in numerals_in(think) + number_words_in(think):
        factor = _unit_factor(think, number.end)
        if restates_number(number, answer) or (factor != 1.0 and restates_number(number, answer / factor)):
            hidden.append(number)
    return _replace_spans(think, [(n.start, n.end) for n in hidden])


def _replace_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with each (start, end) span, non-overlapping, replaced by :data:`ANSWER_MASK`."""
    out, pos = [], 0
    for start, end in sorted(spans):
        if start < pos:
            continue
        out += [text[pos:start], ANSWER_MASK]
        pos = end
    return "".join(out) + text[pos:]


# ----------------------------------------------------------------------------------------------------
# Multiple choice: letters and references by position

# A standalone option letter, any case: not part of a word, a number, "e.g."/"i.e." or a contraction
# ("I'd"); a quoted one ('b') is a letter.
_LETTER = re.compile(r"(?<![\w.])(?<!\w['’])([A-Za-z])(?!\w)(?!\.\w)")
# After a lower-case "a" or "i", a word or number that makes it the English word ("a lamp", "i think"),
# unless it is one that follows a letter as well: "a or b", "the answer is a because".
_WORD_AFTER = {
    letter: re.compile(rf"\s+(?!(?:{followers})\b)[A-Za-z0-9]", re.IGNORECASE)
    for letter, followers in (
        ("a", "and|or|nor|vs|versus|then|than|because|since|is|was|seems|looks|appears"),
        ("i", "and|or|nor|vs|versus|then|than|because|since"),
    )
}
_ORDINALS = (
    "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|"
    r"1st|2nd|3rd|[4-9]th|10th"
)
_INDEX_WORDS = "one|two|three|four|five|six|seven|eight|nine|ten"
# "the second option", "the last choice", "the final option" (not "the final answer"); "option two",
# "choice 3", "option number 2", "option #2", "letter b", "option (c)".
_BY_POSITION = re.compile(
    rf"\b(?:({_ORDINALS})(?=\s+(?:options?|choices?|answers?|alternatives?)\b)"
    r"|(final)(?=\s+(?:options?|choices?)\b))"
    r"|\b(?:options?|choices?|alternatives?|letter)\s*(?:number\s+|no\.\s*|#\s*|:\s*)?[(\[\"'*]*"
    rf"(?:(\d+|{_INDEX_WORDS})(?!\.?\d)(?![\w'’])|([A-Za-z])(?!\w)(?!\.\w))",
    re.IGNORECASE,
)


def _option_letters(options: Sequence[str]) -> str:
    return OPTION_LETTERS[: max(len(options), 1)]


def _letter_is_word(text: str, match: re.Match[str]) -> bool:
    """A lower-case "a"/"i" that reads as the English word: another word (or number) follows it."""
    word_after = _WORD_AFTER.get(match.group(1))
    return word_after is not None and word_after.match(text, match.end()) is not None


def hide_option_letters(think: str, options: Sequence[str]) -> str:
    """``think`` with every option letter hidden (rule 1 of the module docstring), the policy's and the
    others' alike; letters past the number of options stay."""
    letters = _option_letters(options)

    def hide(match: re.Match[str]) -> str:
        if match.group(1).upper() not in letters or _letter_is_word(think, match):
            return match.group(0)
        return ANSWER_MASK

    return _LETTER.sub(hide, think)


def hide_positions(think: str, options: Sequence[str]) -> str:
    """``think`` with every reference to an option by its position hidden (rule 2): the ordinal or the
    number, and a letter named as an option ("option a" is a letter even before a word)."""
    letters = _option_letters(options)
    spans = []
    for match in _BY_POSITION.finditer(think):
        group = next(g for g in range(1, 5) if match.group(g))
        if group == 4 and match.group(4).upper() not in letters:
            continue
        spans.append(match.span(group))
    return _replace_spans(think, spans)


# ----------------------------------------------------------------------------------------------------
# Multiple choice: option texts

# Spellings of the units option texts use; any spelling of a group matches any other.
_UNIT_SPELLINGS = (
    ("square metres", "square meters", "square metre", "square meter", "sq m", "sqm", "m²", "m^2", "m2"),
    ("metres", "meters", "metre", "meter", "m"),
    ("centimetres", "centimeters", "centimetre", "centimeter", "cm"),
    ("degrees", "degree", "deg", "°"),
)
_UNIT_GROUP = {spelling: group for group in _UNIT_SPELLINGS for spelling in group}


def _alternation(words: Sequence[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


# An amount in an option text: a number and a unit ("3.2 m", "75 degrees", "17.9 square metres").
_AMOUNT = re.compile(r"(\d+(?:\.\d+)?)\s*(" + _alternation(list(_UNIT_GROUP)) + r")(?![\w^])", re.IGNORECASE)
_ARTICLE = r"(?:(?:the|a|an)\s+)"
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
# Between the parts of a composite option as restated: punctuation, arrows, "and", "then", "by".
_PART_GAP = r"[^\w.\n]*(?:(?:and|then|finally|next|followed\s+by|by)\b[^\w.\n]*)*" + _ARTICLE + "?"
_LEADING_CONNECTIVE = re.compile(r"^(?:(?:and|then|finally|next)\s+)+", re.IGNORECASE)
# Where a restatement may start and end: not inside a longer word, number or hyphenated word.
_START, _END = r"(?<![\w-])(?<!\d\.)", r"(?![\w]|-\w)"
# A letter prefix some data sets give their options: "A. chair", "(B) lamp".
_OPTION_PREFIX = re.compile(r"^\s*[(\[]?[A-Z]\s*[.):\]]\s+")


def _phrase_pattern(text: str) -> str:
    """A regex for ``text`` as written: case and whitespace free, its units in any spelling."""
    pieces, pos = [], 0
    for match in _AMOUNT.finditer(text):
        pieces.append(_words_pattern(text[pos : match.start()]))
        unit = _alternation(_UNIT_GROUP[match.group(2).lower()])
        pieces.append(re.escape(match.group(1)) + r"\s*(?:" + unit + ")")
        pos = match.end()
    pieces.append(_words_pattern(text[pos:]))
    return "".join(pieces)


def _words_pattern(text: str) -> str:
    return "".join(r"\s+" if part.isspace() else re.escape(part) for part in re.split(r"(\s+)", text) if part)


def option_texts(options: Sequence[str]) -> list[str]:
    """The option texts, a letter prefix removed when every option has one ("A. chair" -> "chair"); texts
    without a letter or digit (nothing a restatement could be found by) are left out."""
    texts = [" ".join(str(o).split()) for o in options]
    if texts and all(_OPTION_PREFIX.match(t) for t in texts):
        texts = [_OPTION_PREFIX.sub("", t) for t in texts]
    return [t for t in texts if re.search(r"[A-Za-z0-9]", t)]


def is_plain_name(text: str) -> bool:
    """Whether an option text is a plain name ("red door", "back-left"): no digit and no comma."""
    return not re.search(r"[\d,]", text)


def _marked_pattern(texts: Sequence[str]) -> re.Pattern[str] | None:
    """One regex for the option texts with a digit or a comma (rule 3), the longest first."""
    patterns, amounts = [], []
    for text in sorted(texts, key=len, reverse=True):
        parts = [_LEADING_CONNECTIVE.sub("", p.strip()) for p in text.split(",")]
        patterns.append(_PART_GAP.join(_phrase_pattern(p) for p in parts if p))
        if len(parts) > 1:  # a composite's amount alone too: "right 60 deg" for "right, about 60 degrees"
            amounts += [_phrase_pattern(m.group(0)) for m in _AMOUNT.finditer(text)]
    patterns += sorted(set(amounts), key=len, reverse=True)
    return re.compile(_START + "(?:" + "|".join(patterns) + ")" + _END, re.IGNORECASE) if patterns else None


def _names_pattern(texts: Sequence[str]) -> re.Pattern[str] | None:
    """One regex for plain-name option texts (rule 4), with or without a leading article."""
    names = sorted({_LEADING_ARTICLE.sub("", t) for t in texts}, key=len, reverse=True)
    if not names:
        return None
    alternatives = "|".join(_words_pattern(n) for n in names)
    return re.compile(_START + _ARTICLE + "?(?:" + alternatives + ")" + _END, re.IGNORECASE)


# Segment boundaries: after a sentence's end, at a line break, before "so"/"thus"/"therefore"/"hence"
# ("so far", "so that" and the like are no conclusion).
_SEGMENT_BOUNDARY = re.compile(
    r"(?<=[.!?]\s)|(?<=\n)|(?=\b(?:so|thus|therefore|hence)\b(?!\s+(?:far|that|on|much|many)\b))",
    re.IGNORECASE,
)
# A number that makes a segment evidence: digits, or a number word other than "one" (a pronoun too).
_EVIDENCE_NUMBER = re.compile(
    r"\d|\b(?:" + "|".join(w for w in [*_UNITS, *_TENS, "hundred"] if w != "one") + r")\b", re.IGNORECASE
)
_SPEAKS_OF_ANSWER = re.compile(r"\b(?:answer|correct)\b", re.IGNORECASE)


def segments(think: str) -> list[str]:
    """``think`` cut into segments (sentences, and clauses from so/thus/therefore/hence on); joined
    again they give ``think`` back."""
    return [s for s in _SEGMENT_BOUNDARY.split(think) if s]


def is_conclusion(segment: str) -> bool:
    """Whether a segment is a conclusion (rule 4): it carries no number, or it speaks of the answer."""
    return _EVIDENCE_NUMBER.search(segment) is None or _SPEAKS_OF_ANSWER.search(segment) is not None


def _hide_in_conclusions(think: str, names: re.Pattern[str] | None, amounts: set[str]) -> str:
    """Rule 4: plain names in conclusions; an amount option's number where it is a segment's only one."""
    out = []
    for segment in segments(think):
        if names is not None and is_conclusion(segment):
            segment = names.sub(ANSWER_MASK, segment)
        numbers = numerals_in(segment)
        if len(numbers) == 1 and segment[numbers[0].start : numbers[0].end] in amounts:
            segment = _replace_spans(segment, [(numbers[0].start, numbers[0].end)])
        out.append(segment)
    return "".join(out)


def hide_option_statements(think: str, options: Sequence[str]) -> str:
    """``think`` with every restatement of any option hidden: its texts, letters and positions (rules
    0-4 of the module docstring, applied in the order 0, 3, 2, 1, 4, so that a hidden letter or position
    is no number that makes a segment evidence)."""
    think = OPTION_LOOKUP.sub("", think)
    texts = option_texts(options)
    marked = _marked_pattern([t for t in texts if not is_plain_name(t)])
    if marked is not None:
        think = marked.sub(ANSWER_MASK, think)
    think = hide_option_letters(hide_positions(think, options), options)
    amounts = {m.group(1) for t in texts if (m := _AMOUNT.fullmatch(t))}
    return _hide_in_conclusions(think, _names_pattern([t for t in texts if is_plain_name(t)]), amounts)


# ----------------------------------------------------------------------------------------------------
# What is left

# Words that only announce or qualify an answer ("so the answer is [hidden]", "about [hidden] m", "the
# nearest option is [hidden]", as the oracle's traces conclude): reasoning needs more than these.
_ANNOUNCING = frozenset(
    "the a an answer answers is it its this that so thus therefore hence final correct right option options "
    "choice letter pick choose select i my must be should will would was of in order sequence number value "
    "nearest closest about approximately around roughly nearly exactly m metre metres meter meters cm square "
    "sq degrees deg".split()
)


def reasons_left(think: str) -> bool:
    """Whether masked reasoning still says anything: a word beyond the masks and the words that only
    announce or qualify an answer ("so the answer is [hidden]", "the [hidden] option", "about [hidden] m"
    have nothing left)."""
    words = re.findall(r"[A-Za-z]+", think.replace(ANSWER_MASK, " ").lower())
    return any(word not in _ANNOUNCING for word in words)
