"""Words as the memory's searches compare them: a question's with a description's, a question's with a name's.

:mod:`.search` weighs the words a question shares with each description, :mod:`.sightings` finds the names
a question names; both need "chairs" to meet "chair" and "shelves" to meet "shelf". :func:`stem` is the one
rule: the form a word's singular and its plural share. It is a key to compare, not always a word: English
plurals follow no rule a few lines can hold, so the endings a plural may change ("-ve"/"-fe" and "-f",
"-oe" and "-o", "-ie" and "-y", the "e" of "-ses", "-xes", "-ches") are read alike in both forms.
"""

from __future__ import annotations

import re
from collections.abc import Collection

_WORD = re.compile(r"[a-z0-9]+")
_VOWELS = frozenset("aeiouy")
# What a plural's "s" (or "es") may leave, read as the singular's ending: "shelve" as "shelf", "knife" as
# "knif" (and "knive"), "tomatoe" as "tomato", "lorrie" as "lorry", "boxe" as "box", "benche" as "bench",
# "glasse" as "glass".
_ENDINGS = (("ve", "f"), ("fe", "f"), ("oe", "o"), ("ie", "y"), ("xe", "x"), ("ze", "z"),
            ("che", "ch"), ("she", "sh"), ("se", "s"))  # fmt: skip


def stem(word: str) -> str:
    """The form ``word`` (lower case) and its singular or plural share: "chairs" and "chair" -> "chair",
    "boxes" and "box" -> "box", "shelves" and "shelf" -> "shelf", "tomatoes" and "tomato" -> "tomato",
    "benches" -> "bench", "tvs" -> "tv"; "glass", "bus", "this" and "has" keep their "s"."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    elif len(word) == 3 and word.endswith("s") and not _VOWELS & set(word[:2]):
        word = word[:-1]  # an abbreviation's plural: "tvs", "pcs"
    for ending, common in _ENDINGS:
        if word.endswith(ending) and len(word) > len(ending) + 1:
            return word[: -len(ending)] + common
    return word


def words(text: str, keep: Collection[str] = ()) -> list[str]:
    """The lower-case words of ``text`` (letters and digits), each as its :func:`stem`, except those in
    ``keep`` (function words: "does" is not a "do", nor "these" a "thes")."""
    return [w if w in keep else stem(w) for w in _WORD.findall(text.lower())]
