"""The letters that name answer options (A, B, C, ...): one definition for prompts, parsing and reports."""

from __future__ import annotations

OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# A regular expression's character class that matches one option letter.
OPTION_LETTER_PATTERN = f"[{OPTION_LETTERS}]"


def option_letter(index: int) -> str:
    """The letter of the option at 0-based ``index`` ("A" for 0); IndexError past Z."""
    if index < 0:
        raise IndexError(f"option index {index} is negative")
    return OPTION_LETTERS[index]
