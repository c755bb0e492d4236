"""The core pipeline in one object: frames -> key frames -> perception -> reasoning -> answer.

This is what the ROS node wraps and what ``embodied-r demo`` runs. It holds no ROS types.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping, Sequence

from .backends import BackendError, load_role
from .backends.base import MeasuresPrompts
from .cameras import keep_measured_motion, label_cameras
from .config import KeyFrameConfig, PipelineConfig
from .frames import Frame
from .keyframes import KeyFrame, select_keyframes
from .memory.mission_time import place_in_mission
from .memory.sightings import add_summary
from .perceivers import PerceiverRegistry
from .perception import Description, ImageEncoder, KeyFramePerceiver
from .reasoning.answers import Answer
from .reasoning.messages import Reasoner
from .reasoning.prompt_fit import FittedPrompt, fit_prompt

log = logging.getLogger(__name__)

# Called with (stage, progress 0..1); stages: "keyframes", "perception", "reasoning", "done".
ProgressCallback = Callable[[str, float], None]


class NoFramesError(ValueError):
    """A query whose window holds no frames."""


class EmbodiedR:
    """Answers spatial questions about a clip with a perceiver (a VLM) and an LM (reasoning).

    ``perceiver`` is the VLM's :class:`~embodied_r_ros.perception.Perceiver`, or any other
    :class:`KeyFramePerceiver` (the simulator's ground truth); ``perception`` says what it perceives with,
    for logs and diagnostics (default: its label).
    """

    def __init__(
        self,
        perceiver: KeyFramePerceiver,
        reasoner: Reasoner,
        keyframe_config: KeyFrameConfig | None = None,
        perception: str = "",
    ) -> None:
        self.perceiver = perceiver
        self.reasoner = reasoner
        self.keyframe_config = keyframe_config or KeyFrameConfig()
        self.perception = perception or perceiver.label

    @classmethod
    def from_config(cls, config: PipelineConfig, *, perceivers: PerceiverRegistry) -> EmbodiedR:
        """Make the perceiver ``config.perception.perceiver`` names, from ``perceivers``, then load the LM.

        The perceiver comes first (ground truth fails fast, before the LM loads). Raises ConfigError for a
        perceiver that is not registered, and :class:`BackendError` (of the original kind, e.g.
        ``ModelNotFoundError``) whose message names the role, its settings, the reason and the fix when a
        model cannot be loaded; what was made already is released first.
        """
        perceiver = perceivers.create(config)
        try:
            reasoner = Reasoner(load_role("LM", "lm", config.lm, vision=False))
        except BackendError:
            perceiver.close()
            raise
        perception = perceivers.describe(config)
        log.info("perception: %s", perception)
        return cls(perceiver, reasoner, config.keyframes, perception)

    def pre_encoder(self) -> ImageEncoder | None:
        """What encodes key frames ahead of their questions (the VLM's vision tower into its image cache),
        or None when the perceiver has nothing to encode (no vision tower, its cache off, ground truth)."""
        return self.perceiver.pre_encoder()

    def select_keyframes(self, frames: Sequence[Frame]) -> list[KeyFrame]:
        """The paper's key frames of a clip (batch rule; the node uses its streaming selector instead)."""
        return select_keyframes(frames, self.keyframe_config)

    def answer(
        self,
        question: str,
        options: Sequence[str] = (),
        *,
        frames: Sequence[Frame] | None = None,
        keyframes: Sequence[KeyFrame] | None = None,
        on_progress: ProgressCallback | None = None,
        mission_origin_ns: int | None = None,
        cameras: Mapping[int, str] | None = None,
        summary: str = "",
    ) -> Answer:
        """Answer ``question`` from ``keyframes`` (or from ``frames``, selecting key frames first).

        ``mission_origin_ns`` (given for an answer from a memory search) starts each observation with its
        key frame's time since that stamp and its position (:mod:`~embodied_r_ros.memory.mission_time`).
        ``cameras`` (key frames of several cameras, merged by :func:`~embodied_r_ros.cameras.merge_keyframes`)
        starts each observation with the camera its key frame came from, by stamp. ``summary`` (a memory
        search's tally for a count, :func:`~embodied_r_ros.memory.sightings.tally`) follows the first
        observation the reasoner reads.

        When the LM's prompt (the summary included) would not fit its context, it is fitted first (fewer key
        frames, then shorter observations, see :mod:`~embodied_r_ros.reasoning.prompt_fit`); the answer's
        ``notes`` say what was done, and its descriptions and key-frame stamps are those reasoned over.
        """
        report = on_progress or (lambda stage, progress: None)
        if not question.strip():
            raise ValueError("the question is empty; ask something about what the robot has seen")
        if keyframes is None:
            if not frames:
                raise NoFramesError("no frames to answer from: the time window holds no camera frames")
            report("keyframes", 0.0)
            keyframes = self.select_keyframes(frames)
        if not keyframes:
            raise NoFramesError("no key frames to answer from: the time window holds no camera frames")

        report("perception", 0.1)
        start = time.perf_counter()
        descriptions = self.perceiver.describe(keyframes, question, options)
        perception_s = time.perf_counter() - start
        if cameras:
            descriptions = label_cameras(keep_measured_motion(descriptions, cameras), cameras)
        if mission_origin_ns is not None:
            descriptions = place_in_mission(descriptions, keyframes, mission_origin_ns)

        report("reasoning", 0.6)
        start = time.perf_counter()
        fitted = self.fit_prompt(descriptions, keyframes, question, options, summary=summary)
        answer = self.reasoner.answer(add_summary(fitted.descriptions, summary), question, options)
        if fitted.note:
            answer.notes.append(fitted.note)
        answer.reasoning_s = time.perf_counter() - start
        answer.perception_s = perception_s
        report("done", 1.0)
        log.debug(
            "answered %r from %d key frames: perception %.2f s, reasoning %.2f s",
            question,
            len(fitted.descriptions),
            perception_s,
            answer.reasoning_s,
        )
        return answer

    def fit_prompt(
        self,
        descriptions: Sequence[Description],
        keyframes: Sequence[KeyFrame],
        question: str,
        options: Sequence[str] = (),
        summary: str = "",
    ) -> FittedPrompt:
        """The descriptions whose LM prompt fits the LM's context (unchanged when the LM's backend cannot
        measure prompts, e.g. an HTTP server), measured with ``summary`` after the first observation (the
        descriptions come back without it); the note says what was done."""
        backend = self.reasoner.backend
        if not isinstance(backend, MeasuresPrompts):
            return FittedPrompt(list(descriptions))
        fitted = fit_prompt(
            descriptions,
            keyframes,
            question,
            options,
            backend.prompt_room,
            min_keyframes=self.keyframe_config.min_keyframes,
            summary=summary,
        )
        if fitted.note:
            log.info("%s", fitted.note)
        return fitted

    def close(self) -> None:
        """Release both models."""
        self.perceiver.close()
        self.reasoner.backend.close()
