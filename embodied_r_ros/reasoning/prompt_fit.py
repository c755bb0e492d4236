"""Prompt fitting: a question over a wide window is answered from fewer key frames, not refused.

Before reasoning, :func:`fit_prompt` measures the LM's prompt (with a backend that
:class:`~embodied_r_ros.backends.base.MeasuresPrompts`) and, when it does not fit the context:

1. drops key frames by the paper's rule made stricter. The selector keeps a frame when its overlap with its
   reference is below a threshold; lowering the threshold drops the most overlapping (most redundant) key
   frames first. The first and the last key frame stay, and at least ``min_keyframes`` (paper: 4) remain.
   A dropped frame's motion folds into the next kept frame's action: the odometry's account between the two
   kept frames when both have poses, else the labels joined ("rotate left, then move forward").
2. when ``min_keyframes`` key frames still do not fit, cuts every observation to the same number of words,
   the most that fits, on word boundaries and marked with an ellipsis.
3. when even empty observations do not fit (the question alone is too long), leaves the descriptions as
   they are: the backend's PromptTooLongError then names the prompt's size (that is not a wide window).

Both searches are binary: the prompt shrinks as more frames are dropped or as observations get shorter.
The result says what was done in one sentence, for the answer's message.

A memory's tally for a count (``summary``, :func:`~embodied_r_ros.memory.sightings.add_summary` puts it
after the first observation once fitted) is measured in place and never cut: it is what a count is answered
from, and the prompt must hold it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..backends.base import ChatMessage, PromptRoom
from ..keyframes import KeyFrame
from ..memory.sightings import add_summary
from ..perception import Description, odometry_motion
from .messages import reasoning_messages

# Measures one LM chat against the context; None when the backend cannot say.
PromptMeasure = Callable[[list[ChatMessage]], PromptRoom | None]

ELLIPSIS = "…"


@dataclass(frozen=True)
class FittedPrompt:
    """The descriptions to reason over and what fitting did to them (``note``: "" when nothing)."""

    descriptions: list[Description]
    note: str = ""


def fit_prompt(
    descriptions: Sequence[Description],
    keyframes: Sequence[KeyFrame],
    question: str,
    options: Sequence[str],
    measure: PromptMeasure,
    *,
    min_keyframes: int,
    summary: str = "",
) -> FittedPrompt:
    """The descriptions (one per key frame, in order) whose reasoning prompt fits the LM's context.

    Unchanged when the prompt fits, when ``measure`` cannot say (None), or when even the shortest prompt
    does not fit; otherwise the fewest key frames are dropped (most overlapping first, never the first or
    the last, never below ``min_keyframes``) and, if that is not enough, the observations are cut. The
    kept descriptions are renumbered (``index`` = their frame number in the prompt). ``summary``: what the
    caller puts after the first observation (:func:`~embodied_r_ros.memory.sightings.add_summary`): the
    prompt is measured with it, and the descriptions returned are without it.
    """
    if len(descriptions) != len(keyframes):
        raise ValueError(
            f"prompt fitting needs one description per key frame, got {len(descriptions)} descriptions for "
            f"{len(keyframes)} key frames; describe every key frame of the query"
        )
    original = list(descriptions)

    def room(candidate: list[Description]) -> PromptRoom | None:
        return measure(reasoning_messages(add_summary(candidate, summary), question, options))

    first = room(original)
    if first is None or first.fits:
        return FittedPrompt(original)

    order = drop_order(keyframes)
    most_drops = min(len(order), max(0, len(original) - min_keyframes))

    def thinned(drops: int) -> list[Description]:
        return thin(original, keyframes, set(order[:drops]))

    fewest = _least(1, most_drops, lambda drops: _fits(room(thinned(drops))))
    drops = most_drops if fewest is None else fewest
    fitted = thinned(drops)
    words: int | None = None
    if fewest is None:
        longest = max((len(d.observation.split()) for d in fitted), default=0)
        # The most words per observation that fits: the least cut, searched as "words taken away".
        cut = _least(1, longest, lambda taken: _fits(room(cut_observations(fitted, longest - taken))))
        if cut is None:
            return FittedPrompt(original)  # the question alone is too long: the backend says so
        words = longest - cut
        fitted = cut_observations(fitted, words)
    after = room(fitted)
    return FittedPrompt(fitted, _note(first, after, len(original), len(fitted), words))


def drop_order(keyframes: Sequence[KeyFrame]) -> list[int]:
    """Positions of the key frames that may be dropped, the most overlapping with its reference first.

    The first and last key frame are never listed. A frame whose overlap is unknown (matching failed: the
    rule kept it as new content) comes last; equal overlaps go in frame order.
    """
    inner = range(1, len(keyframes) - 1)
    return sorted(inner, key=lambda i: (-_overlap(keyframes[i]), i))


def thin(
    descriptions: Sequence[Description], keyframes: Sequence[KeyFrame], dropped: set[int]
) -> list[Description]:
    """``descriptions`` without the positions in ``dropped``, each dropped motion folded into the next kept
    frame's action, renumbered."""
    kept: list[Description] = []
    previous = 0
    for position, description in enumerate(descriptions):
        if position in dropped:
            continue
        if position - previous > 1:
            skipped = descriptions[previous + 1 : position]
            description = _folded(keyframes[previous], keyframes[position], skipped, description)
        kept.append(replace(description, index=len(kept)))
        previous = position
    return kept


def cut_observations(descriptions: Sequence[Description], words: int) -> list[Description]:
    """Each observation cut to at most ``words`` words (an ellipsis marks a cut)."""
    cut = []
    for description in descriptions:
        parts = description.observation.split()
        if len(parts) > words:
            description = replace(description, observation=" ".join([*parts[:words], ELLIPSIS]))
        cut.append(description)
    return cut


def _overlap(keyframe: KeyFrame) -> float:
    return -math.inf if keyframe.overlap is None else float(keyframe.overlap)


def _folded(
    previous: KeyFrame, current: KeyFrame, skipped: Sequence[Description], description: Description
) -> Description:
    """``description`` with the motion since ``previous`` kept frame, across the ``skipped`` ones."""
    motion = odometry_motion(previous, current)
    if motion is not None:
        return replace(description, action=f"I {motion}", action_source="odometry")
    steps = [d for d in (*skipped, description) if d.action]
    if not steps:
        return replace(description, action=None, action_source="none")
    sources = {d.action_source for d in steps}
    # A motion told partly by the VLM is the VLM's account.
    source = sources.pop() if len(sources) == 1 else "vlm"
    return replace(description, action=", then ".join(d.action for d in steps), action_source=source)


def _fits(room: PromptRoom | None) -> bool:
    return room is not None and room.fits


def _least(low: int, high: int, fits: Callable[[int], bool]) -> int | None:
    """The least n in [low, high] for which ``fits(n)`` holds, assuming it holds from some n on; None when
    not even ``high`` fits."""
    if high < low or not fits(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return high


def _note(before: PromptRoom, after: PromptRoom | None, frames: int, kept: int, words: int | None) -> str:
    done = []
    if kept < frames:
        done.append(f"{frames} -> {kept} key frames, dropping the most overlapping")
    if words is not None:
        done.append(f"observations cut to at most {words} words each")
    tokens = f"{before.tokens} -> {after.tokens}" if after is not None else f"{before.tokens}"
    return (
        f"fitted the prompt to the LM's context ({tokens} tokens, room for {before.limit}): {'; '.join(done)}"
    )
