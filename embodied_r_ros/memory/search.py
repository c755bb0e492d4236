"""Questions that name things instead of times: the memory's intervals worth reasoning over.

"Where did I last see the red backpack?" names no window. The question (with its options) is embedded and
compared with the question-agnostic descriptions of every key frame in the durable memory
(:mod:`.memory_describer` writes them); of the closest ones, the ``k`` hits are spread over time first
(the best of each sighting before a second of any: :func:`spread_hits`), so a thing seen in several places
is found in each. Hits close in time belong to one sighting, so hits less than ``merge_s`` apart join one
interval, and each interval is
widened by ``pad_s`` on both sides (the approach and the departure: the motion that says where the thing
was). The intervals, in time order, are what the question is answered from: their key frames are chosen by
:func:`spread_indices` (the paper's rule inside each interval, every hit kept, the [min, max] clamp over
them all) and the answer names the intervals it used.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Sequence

from ..frames import NS_PER_S
from ..keyframes import clamp_indices, evenly_spaced_indices
from .reader import MemoryReader
from .records import SearchHit
from .text_embedding import TextEmbedder
from .words import words as text_words

REASON_RETRIEVED = "retrieved"  # a key frame whose description matched the question (KeyFrame.reason)
SEARCH_POOL = 1024  # closest key frames (by embedding) a search re-ranks and spreads over time
# Names matter more than a small text embedding can tell: "blue stool" and "red stool" embed alike. The
# hybrid score adds to the cosine LEXICAL_WEIGHT times the idf-weighted share of the query's terms (its
# words that are not function words, and their adjacent pairs: "blue stool", "red door") found in the text,
# idf taken over the candidates themselves, so words every description holds ("see", "near") count little,
# and a pair twice its words' weight.
LEXICAL_WEIGHT = 0.2  # chosen on the 60-minute mission of seed 0 (BENCHMARKS: recall held out on seed 1)
_COUNT_QUESTION = re.compile(r"\bhow many\b", re.IGNORECASE)
_FUNCTION_WORDS = frozenset(
    "a an and are as at be by did do does for from had has have how i in is it its me my of on or over so "
    "than that the their them then there these they this those to was we were what when where which who "
    "why will with you your".split()
)


@dataclass(frozen=True)
class SearchSettings:
    """How a question searches the memory (``memory.search_*``)."""

    k: int = 16  # key frames retrieved
    merge_s: float = 20.0  # hits closer than this join one interval
    pad_s: float = 5.0  # seconds added before and after each interval
    sightings: bool = True  # counts and first/last sightings from the sightings index (memory/sightings.py)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"memory.search_k must be >= 1, got {self.k}")
        if self.merge_s < 0 or self.pad_s < 0:
            raise ValueError(
                "memory.search_merge_s and memory.search_pad_s must be >= 0, got "
                f"{self.merge_s} and {self.pad_s}"
            )


@dataclass(frozen=True)
class Interval:
    """One retrieved interval of camera time: its best hit's similarity and the hits inside it."""

    start_ns: int
    end_ns: int
    score: float
    hits: tuple[int, ...]  # stamps of the matching key frames, oldest first


def query_text(question: str, options: Sequence[str] = ()) -> str:
    """What is embedded for a question: the question and its options (they name the things too)."""
    text = question.strip()
    if options:
        text += " " + "; ".join(o.strip() for o in options)
    return text


def group_hits(
    hits: Sequence[SearchHit], settings: SearchSettings, start_ns: int, end_ns: int
) -> list[Interval]:
    """The hits as intervals in time order: hits less than ``merge_s`` apart joined, each interval padded
    by ``pad_s`` and cut to [start_ns, end_ns], intervals that then overlap joined."""
    merge_ns, pad_ns = round(settings.merge_s * NS_PER_S), round(settings.pad_s * NS_PER_S)
    groups: list[list[SearchHit]] = []
    for hit in sorted(hits, key=lambda h: h.stamp_ns):
        if groups and hit.stamp_ns - groups[-1][-1].stamp_ns < merge_ns:
            groups[-1].append(hit)
        else:
            groups.append([hit])
    intervals: list[Interval] = []
    for group in groups:
        start = max(start_ns, group[0].stamp_ns - pad_ns)
        end = min(end_ns, group[-1].stamp_ns + pad_ns)
        score = max(h.score for h in group)
        stamps = tuple(h.stamp_ns for h in group)
        if intervals and start <= intervals[-1].end_ns:
            last = intervals[-1]
            intervals[-1] = Interval(last.start_ns, end, max(last.score, score), last.hits + stamps)
        else:
            intervals.append(Interval(start, end, score, stamps))
    return intervals


def spread_hits(hits: Sequence[SearchHit], k: int, gap_ns: int) -> list[SearchHit]:
    """The ``k`` hits to answer from, from ``hits`` (best first): first the best hit of each stretch of
    time, every one at least ``gap_ns`` from the others, best first; then the rest by score. A thing seen in
    several places (or a question naming two things) is found in each place, not ``k`` times in the one
    place that fills the most key frames. The order does not depend on ``k``: a smaller ``k`` is a prefix."""
    first: list[SearchHit] = []
    rest: list[SearchHit] = []
    for hit in hits:
        apart = all(abs(hit.stamp_ns - chosen.stamp_ns) >= gap_ns for chosen in first)
        (first if apart else rest).append(hit)
    return (first + rest)[:k]


def terms(text: str) -> frozenset[str]:
    """The terms of a text: its words that are not function words, and adjacent pairs of them ("red door");
    a plural as its singular (:func:`~.words.stem`: "tables" as "table", "shelves" as "shelf")."""
    words = text_words(text, keep=_FUNCTION_WORDS)
    pairs = (f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
    return frozenset(w for w in words if w not in _FUNCTION_WORDS) | frozenset(
        p for p in pairs if not set(p.split()) & _FUNCTION_WORDS
    )


def rerank(text: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
    """``hits`` best first by the hybrid score: cosine + :data:`LEXICAL_WEIGHT` x the idf-weighted share
    of the query's terms (:func:`terms` of ``text``) that a hit's text holds (idf over ``hits``; a term no
    hit holds does not count)."""
    wanted = terms(text)
    held = [terms(h.text) & wanted for h in hits]
    df = {t: sum(t in h for h in held) for t in wanted}
    # A pair names a thing ("red door"): it counts twice what one of its words does.
    idf = {t: (2.0 if " " in t else 1.0) * math.log(1 + len(hits) / n) for t, n in df.items() if n}
    total = sum(idf.values())
    if not total:
        return sorted(hits, key=lambda h: -h.score)
    scored = [
        replace(h, score=h.score + LEXICAL_WEIGHT * sum(idf[t] for t in own) / total)
        for h, own in zip(hits, held, strict=True)
    ]
    return sorted(scored, key=lambda h: -h.score)


def settings_for(question: str, settings: SearchSettings, max_keyframes: int) -> SearchSettings:
    """The search settings for ``question``: a count ("how many ...") needs every sighting of a kind, not
    the best few, so it takes as many hits as the key-frame clamp allows (``max_keyframes``) when that is
    more than ``settings.k`` (60-minute missions: count MRA 0.02 with 16 hits, 0.48-0.54 with 32, the other
    kinds unchanged; BENCHMARKS.md)."""
    if _COUNT_QUESTION.search(question) and max_keyframes > settings.k:
        return replace(settings, k=max_keyframes)
    return settings


def search_hits(
    memory: MemoryReader,
    embedder: TextEmbedder,
    text: str,
    start_ns: int,
    end_ns: int,
    settings: SearchSettings,
) -> list[SearchHit]:
    """The ``settings.k`` described key frames of [start_ns, end_ns] to answer ``text`` (a
    :func:`query_text`) from: the :data:`SEARCH_POOL` closest by embedding, re-ranked by the hybrid score
    (:func:`rerank`), spread over time (:func:`spread_hits`, ``merge_s`` apart)."""
    pool = memory.search(embedder.query(text), embedder.name, start_ns, end_ns, max(SEARCH_POOL, settings.k))
    return spread_hits(rerank(text, pool), settings.k, round(settings.merge_s * NS_PER_S))


def search_intervals(
    memory: MemoryReader,
    embedder: TextEmbedder,
    question: str,
    options: Sequence[str],
    start_ns: int,
    end_ns: int,
    settings: SearchSettings,
) -> list[Interval]:
    """The intervals of [start_ns, end_ns] whose key frames' descriptions best match the question (see
    the module docstring); empty when no described key frame lies there."""
    hits = search_hits(memory, embedder, query_text(question, options), start_ns, end_ns, settings)
    return group_hits(hits, settings, start_ns, end_ns)


def spread_indices(kept: Sequence[int], must: Sequence[int], n: int, lo: int, hi: int) -> list[int]:
    """Which of ``n`` candidates (the intervals' candidates, in time order) become key frames.

    ``kept``: the rule's key frames and each interval's first and last candidate; ``must``: the hits,
    always chosen (the best ``hi`` of them when there are more, given best first). Then the paper's clamp,
    keeping the hits: fewer than ``lo`` in all are topped up with evenly spaced other candidates; more than
    ``hi`` are thinned to evenly spaced ones among the kept that are not hits.
    """
    must = list(dict.fromkeys(must))[:hi]
    chosen = sorted(set(kept) | set(must))
    if len(chosen) < lo:  # unlike the paper's clamp, which resamples all: the hits stay
        others = [i for i in range(n) if i not in set(chosen)]
        top_up = [others[j] for j in evenly_spaced_indices(len(others), lo - len(chosen))]
        return sorted([*chosen, *top_up])
    if len(chosen) <= hi:
        return clamp_indices(chosen, n, lo, hi)
    rest = [i for i in chosen if i not in set(must)]
    room = hi - len(must)
    return sorted([*must, *(rest[j] for j in evenly_spaced_indices(len(rest), room))])
