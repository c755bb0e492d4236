"""The text of every prompt, in one place, versioned.

Perception prompts ask the VLM for question-conditioned descriptions (paper, section "Perception"); the
reasoning prompt gives the LM the descriptions in the paper's structure. ``PROMPT_VERSION`` goes into
cache keys and datasets: change it whenever a text here changes, so stale descriptions are not reused.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..poses.ego_motion import ACTION_LABELS
from .options import OPTION_LETTERS

PROMPT_VERSION = "1"

# The paper's ten action labels, in its order (defined with the motions they name).
ACTIONS: tuple[str, ...] = ACTION_LABELS

PERCEPTION_SYSTEM = (
    "You are the eyes of a mobile robot. You describe what its camera sees, precisely and briefly, "
    "from the robot's own point of view."
)

_SCENE_TASK = (
    "This is the first key frame of my egocentric video: I am the robot carrying the camera.\n"
    "Describe the scene around me: the objects you see, by colour and shape, and where each one is "
    "relative to me (left, ahead-left, ahead, ahead-right, right, above, below; near or far).\n"
    "Later I must answer this question: {question}\n"
    "Describe the objects that the question mentions, if you can see them. Do not answer the question."
)

_STEP_TASK = (
    "These are two consecutive key frames of my egocentric video, the earlier one first: I am the robot "
    "carrying the camera.\n"
    "{motion}"
    "Reply in exactly two lines:\n"
    "Action: <what I did between the frames, one of: {actions}>\n"
    "Observation: <what became visible or changed in the later frame and where it is relative to me, "
    "and the objects that this question mentions: {question}>\n"
    "Do not answer the question."
)

REASONING_SYSTEM = (
    "You reason about space from a robot's point of view. First reason step by step inside "
    "<think> </think>, then give only the final answer inside <answer> </answer>, with nothing after it. "
    "The answer must follow from your reasoning."
)

_ROLE_LINE = (
    "You are a robot. These are your egocentric observations of a video, from the past to the present:"
)


def letter_options(options: Sequence[str]) -> list[str]:
    """``["chair", "lamp"]`` -> ``["A. chair", "B. lamp"]``; options already lettered in order are kept."""
    if len(options) > len(OPTION_LETTERS):
        raise ValueError(f"at most {len(OPTION_LETTERS)} options are supported, got {len(options)}")
    lettered = []
    for letter, option in zip(OPTION_LETTERS, options, strict=False):
        text = option.strip()
        if re.match(rf"^\(?{letter}[.):]\s", text):
            text = re.sub(rf"^\(?{letter}[.):]\s*", "", text)
        lettered.append(f"{letter}. {text}")
    return lettered


_OPTIONS_HEADER = "Options:"
_OPTIONS_END = "Answer with the letter of the correct option."


def question_block(question: str, options: Sequence[str]) -> str:
    """The question with its lettered options and the expected answer form."""
    lines = [f"Question: {question.strip()}"]
    if options:
        lines.append(_OPTIONS_HEADER)
        lines.extend(letter_options(options))
        lines.append(_OPTIONS_END)
    else:
        lines.append("Answer with a number and its unit (metres, square metres) or a count.")
    return "\n".join(lines)


def stated_options(prompt: str) -> list[str]:
    """The option texts a reasoning prompt's :func:`question_block` lists (its last one), in order; empty for
    an open question. What a decoder that sees only the prompt needs to look an answer up."""
    _, found, block = prompt.rpartition(_OPTIONS_HEADER + "\n")
    if not found or _OPTIONS_END not in block:
        return []
    options = []
    for i, line in enumerate(block.split("\n" + _OPTIONS_END, 1)[0].split("\n")):
        letter = OPTION_LETTERS[i] if i < len(OPTION_LETTERS) else None
        if letter is None or not line.startswith(f"{letter}. "):
            return []
        options.append(line[len(letter) + 2 :])
    return options


def _inline_question(question: str, options: Sequence[str]) -> str:
    text = question.strip()
    if options:
        text += " (options: " + "; ".join(letter_options(options)) + ")"
    return text


def scene_prompt(question: str, options: Sequence[str] = ()) -> str:
    """Task text for the first key frame (shown alone)."""
    return _SCENE_TASK.format(question=_inline_question(question, options))


def step_prompt(question: str, options: Sequence[str] = (), motion: str | None = None) -> str:
    """Task text for key frame j shown with key frame j-1; ``motion`` is the odometry's account, if any."""
    motion_line = f"My odometry says that between the frames I {motion}.\n" if motion else ""
    return _STEP_TASK.format(
        motion=motion_line, actions=", ".join(ACTIONS), question=_inline_question(question, options)
    )


def reasoning_prompt(
    observations: Sequence[tuple[str | None, str]], question: str, options: Sequence[str]
) -> str:
    """The LM's user turn in the paper's structure.

    ``observations`` holds one ``(action, observation)`` per key frame; the first action is ignored.
    """
    lines = [_ROLE_LINE]
    for j, (action, observation) in enumerate(observations):
        observation = " ".join(observation.split()) or "nothing new."
        if j == 0:
            lines.append(f"Frame {j}: Observe: {observation}")
        else:
            lines.append(f"Frame {j}: After {action or 'moving'}, Observe: {observation}")
    lines.append("")
    lines.append(question_block(question, options))
    return "\n".join(lines)
