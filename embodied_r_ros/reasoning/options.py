"""The letters that name answer options (A, B, C, ...): one definition for prompts, parsing and reports."""

from __future__ import annotations

OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# The letters as a regex character class, for every pattern that finds an option letter in text ("[A-Z]";
# a range, since the letters run on without a gap in ASCII). LETTER_ANY_CASE also takes "b" for B.
_FIRST, _LAST = OPTION_LETTERS[0], OPTION_LETTERS[-1]
LETTER = f"[{_FIRST}-{_LAST}]"
LETTER_ANY_CASE = f"[{_FIRST}-{_LAST}{_FIRST.lower()}-{_LAST.lower()}]"


def option_letter(index: int) -> str:
    """The letter of the option at 0-based ``index`` ("A" for 0); IndexError past Z."""
    if index < 0:
        raise IndexError(f"option index {index} is negative")
    return OPTION_LETTERS[index]
