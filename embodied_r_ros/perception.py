"""Perception: question-conditioned VLM descriptions of key frames (paper, "Perception").

Key frame 0 is described alone (the scene around the robot); key frame j >= 1 is described together with
key frame j-1 (the action between them and what became visible). Each description depends only on
(frame j-1, frame j, question), so all key frames of a query go to the VLM in ONE batched call.

When the frames carry poses, the action comes from odometry (robots know how they moved) and the VLM is
told the motion; otherwise the VLM's action label is used, as in the paper.

The pipeline, the node and ``embodied-r prepare`` take any :class:`KeyFramePerceiver`: the VLM's
:class:`Perceiver`, or a measuring instrument that writes the same replies from other knowledge (the
simulator's ground truth, which the training package registers by name, see :mod:`.perceivers`); both go
through :func:`parse_descriptions`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from .backends.base import ChatMessage, ChatRequest, GenerationBackend
from .keyframes import KeyFrame
from .poses.ego_motion import ego_motion
from .reasoning import prompts

# Phrases a VLM may use for the paper's labels; the first match in the action line wins.
_ACTION_SYNONYMS: tuple[tuple[str, str], ...] = (
    (r"\b(rotat\w*|turn\w*|yaw\w*|pan\w*)\s+(to\s+the\s+)?left", "rotate left"),
    (r"\b(rotat\w*|turn\w*|yaw\w*|pan\w*)\s+(to\s+the\s+)?right", "rotate right"),
    (r"\btilt\w*\s+(down\w*)", "tilt downward"),
    (r"\btilt\w*\s+(up\w*)", "tilt upward"),
    (
        r"\b(mov\w*|go\w*|went|fly\w*|flew|climb\w*|ascend\w*|rais\w*)\s+(up|upward\w*|higher)\b",
        "move upward",
    ),
    (
        r"\b(mov\w*|go\w*|went|fly\w*|flew|descend\w*|lower\w*|drop\w*)\s+(down|downward\w*|lower)\b",
        "move downward",
    ),
    (r"\b(ascend\w*|climb\w*)\b", "move upward"),
    (r"\b(descend\w*)\b", "move downward"),
    (
        r"\b(mov\w*|go\w*|went|walk\w*|fly\w*|flew|step\w*|strafe\w*|shift\w*)\s+(to\s+the\s+)?left",
        "move left",
    ),
    (
        r"\b(mov\w*|go\w*|went|walk\w*|fly\w*|flew|step\w*|strafe\w*|shift\w*)\s+(to\s+the\s+)?right",
        "move right",
    ),
    (
        r"\b(mov\w*|go\w*|went|walk\w*|fly\w*|flew|step\w*|advanc\w*)\s+(forward\w*|ahead|straight)",
        "move forward",
    ),
    (r"\b(mov\w*|go\w*|went|walk\w*|fly\w*|flew|step\w*|back\w*)\s+(backward\w*|back)\b", "move backward"),
)


# Encodes images ahead of the questions that will send them (the VLM's vision tower into its image cache).
ImageEncoder = Callable[[Sequence[np.ndarray]], Any]


@dataclass(frozen=True)
class Description:
    """What the VLM saw at one key frame.

    ``action`` is the motion from the previous key frame (None for the first one): a paper label from the
    VLM, or the odometry's account ("I moved forward 1.8 m and turned left 35 deg"). ``action_source`` is
    "odometry", "vlm" or "none" (first frame, or a VLM reply without a readable action).
    """

    index: int
    stamp_ns: int
    action: str | None
    observation: str
    raw: str
    action_source: str = "none"

    def as_text(self) -> str:
        """One line for messages and reports."""
        if self.action is None:
            return self.observation
        return f"After {self.action}: {self.observation}"


@dataclass(frozen=True)
class PerceptionQuery:
    """One question over its key frames, as :meth:`KeyFramePerceiver.replies` takes a batch of them."""

    keyframes: Sequence[KeyFrame]
    question: str
    options: Sequence[str] = ()


class KeyFramePerceiver(Protocol):
    """What the pipeline needs from perception (the VLM's :class:`Perceiver` or a ground-truth instrument)."""

    @property
    def label(self) -> str:
        """The source in logs and data sets: the model name, or e.g. "ground-truth:scene.json"."""
        ...

    def replies(self, queries: Sequence[PerceptionQuery]) -> list[list[str]]:
        """The raw replies (one per key frame, in the form the VLM prompts ask for) of several queries."""
        ...

    def describe(
        self, keyframes: Sequence[KeyFrame], question: str, options: Sequence[str] = ()
    ) -> list[Description]:
        """The parsed descriptions of one query's key frames."""
        ...

    def pre_encoder(self) -> ImageEncoder | None:
        """What encodes key frames as they arrive so that questions find them ready, or None (nothing to
        encode: no vision tower, or its cache is off)."""
        ...

    def close(self) -> None:
        """Release what the perceiver holds (a model, files)."""
        ...


def parse_action(text: str) -> str | None:
    """Map free text (an "Action:" line) to one of the paper's ten labels, or None."""
    lowered = " ".join(text.lower().split())
    for label in prompts.ACTIONS:
        if label in lowered:
            return label
    for pattern, label in _ACTION_SYNONYMS:
        if re.search(pattern, lowered):
            return label
    return None


def parse_step_reply(reply: str) -> tuple[str | None, str]:
    """Split a step description into (action label or None, observation).

    Expected form: "Action: ...\\nObservation: ...". Anything unexpected still gives an observation: the
    reply without its action line.
    """
    action_match = re.search(r"action\s*[:：]\s*(.*)", reply, flags=re.IGNORECASE)
    action = parse_action(action_match.group(1)) if action_match else None
    observation_match = re.search(r"observation\s*[:：]\s*(.*)", reply, flags=re.IGNORECASE | re.DOTALL)
    if observation_match:
        observation = observation_match.group(1)
    elif action_match:
        observation = reply[: action_match.start()] + reply[action_match.end() :]
    else:
        observation = reply
    return action, " ".join(observation.split())


class Perceiver:
    """Describes the key frames of a query with a VLM backend, in one batched call."""

    def __init__(self, backend: GenerationBackend) -> None:
        if not backend.supports_images:
            raise ValueError(
                f"the perception model {backend.config.model!r} does not take images; "
                "configure a vision-language model (e.g. Qwen/Qwen2.5-VL-7B-Instruct) as the VLM"
            )
        self.backend = backend

    @property
    def label(self) -> str:
        """The VLM's configured name (what data sets record as their ``vlm``)."""
        return self.backend.config.model

    def requests(
        self, keyframes: Sequence[KeyFrame], question: str, options: Sequence[str] = ()
    ) -> list[ChatRequest]:
        """The VLM chats for these key frames: frame 0 alone, then each frame with its predecessor."""
        system = ChatMessage.text("system", prompts.PERCEPTION_SYSTEM)
        chats: list[ChatRequest] = []
        for j, keyframe in enumerate(keyframes):
            if j == 0:
                user = ChatMessage("user", (keyframe.frame.image, prompts.scene_prompt(question, options)))
            else:
                previous = keyframes[j - 1]
                motion = odometry_motion(previous, keyframe)
                user = ChatMessage(
                    "user",
                    (
                        f"Frame {j - 1}:",
                        previous.frame.image,
                        f"Frame {j}:",
                        keyframe.frame.image,
                        prompts.step_prompt(question, options, motion),
                    ),
                )
            chats.append([system, user])
        return chats

    def replies(self, queries: Sequence[PerceptionQuery]) -> list[list[str]]:
        """The VLM's replies to several queries, all their key frames in ONE batched generate call."""
        chats = [chat for q in queries for chat in self.requests(q.keyframes, q.question, q.options)]
        flat = self.backend.generate(chats) if chats else []
        replies, start = [], 0
        for query in queries:
            replies.append(list(flat[start : start + len(query.keyframes)]))
            start += len(query.keyframes)
        return replies

    def describe(
        self, keyframes: Sequence[KeyFrame], question: str, options: Sequence[str] = ()
    ) -> list[Description]:
        """Describe all key frames of one query with a single batched generate call."""
        if not keyframes:
            return []
        (replies,) = self.replies([PerceptionQuery(keyframes, question, options)])
        return parse_descriptions(keyframes, replies)

    def pre_encoder(self) -> ImageEncoder | None:
        """The backend's image encoder when it keeps encoded images for reuse (transformers, with
        ``transformers.image_cache_mb`` > 0); None otherwise (an openai server encodes on its side)."""
        # An optional capability of backends (GenerationBackend does not require it).
        encode = getattr(self.backend, "encode_images", None)
        if encode is None or self.backend.config.transformers.image_cache_mb <= 0:
            return None
        return encode

    def close(self) -> None:
        """Release the VLM."""
        self.backend.close()


def parse_descriptions(keyframes: Sequence[KeyFrame], replies: Sequence[str]) -> list[Description]:
    """Turn the VLM's replies (one per key frame, as :meth:`Perceiver.requests` asked) into Descriptions."""
    descriptions = []
    for j, (keyframe, reply) in enumerate(zip(keyframes, replies, strict=True)):
        stamp = keyframe.frame.stamp_ns
        if j == 0:
            descriptions.append(Description(j, stamp, None, " ".join(reply.split()), reply))
            continue
        label, observation = parse_step_reply(reply)
        motion = odometry_motion(keyframes[j - 1], keyframe)
        if motion is not None:
            descriptions.append(Description(j, stamp, f"I {motion}", observation, reply, "odometry"))
        else:
            descriptions.append(Description(j, stamp, label, observation, reply, "vlm" if label else "none"))
    return descriptions


def odometry_motion(previous: KeyFrame, current: KeyFrame) -> str | None:
    """The odometry's account of the motion between two key frames, or None without poses."""
    if previous.frame.pose is None or current.frame.pose is None:
        return None
    return ego_motion(previous.frame.pose, current.frame.pose).describe()
