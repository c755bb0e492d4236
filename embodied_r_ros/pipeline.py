"""The core pipeline in one object: frames -> key frames -> perception -> reasoning -> answer.

This is what the ROS node wraps and what ``embodied-r demo`` runs. It holds no ROS types.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from .answers import Answer
from .backends import BackendError, GenerationBackend, load_backend
from .config import KeyFrameConfig, ModelConfig, PipelineConfig
from .frames import Frame
from .keyframes import KeyFrame, select_keyframes
from .perception import Perceiver
from .reasoning import Reasoner

log = logging.getLogger(__name__)

# Called with (stage, progress 0..1); stages: "keyframes", "perception", "reasoning", "done".
ProgressCallback = Callable[[str, float], None]


def _load_role(role: str, key: str, config: ModelConfig, vision: bool) -> GenerationBackend:
    """Load one model; any failure becomes a BackendError naming the role and its settings."""
    try:
        return load_backend(config, vision=vision)
    except Exception as exc:  # any failure here means: this model cannot serve; say which and why
        why = " ".join(str(exc).split()) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
        settings = f"{key}.model = {config.model!r}, {key}.backend = {config.backend}, {key}.device = "
        settings += config.device
        kind = type(exc) if isinstance(exc, BackendError) else BackendError
        raise kind(f"cannot load the {role} ({settings}): {why}") from exc


class NoFramesError(ValueError):
    """A query whose window holds no frames."""


class EmbodiedR:
    """Answers spatial questions about a clip with a VLM (perception) and an LM (reasoning)."""

    def __init__(
        self, perceiver: Perceiver, reasoner: Reasoner, keyframe_config: KeyFrameConfig | None = None
    ) -> None:
        self.perceiver = perceiver
        self.reasoner = reasoner
        self.keyframe_config = keyframe_config or KeyFrameConfig()

    @classmethod
    def from_config(cls, config: PipelineConfig) -> EmbodiedR:
        """Load both models as configured (``config`` may be any config with ``vlm``, ``lm`` and
        ``keyframes``, such as the node's).

        A model that cannot be loaded raises :class:`BackendError` (of the original kind, e.g.
        ``ModelNotFoundError``) whose message names the role, its settings, the reason and the fix; a model
        already loaded is released first.
        """
        loaded: list[GenerationBackend] = []
        try:
            for role, key, model_config, vision in (
                ("VLM", "vlm", config.vlm, True),
                ("LM", "lm", config.lm, False),
            ):
                loaded.append(_load_role(role, key, model_config, vision))
        except BackendError:
            for backend in loaded:
                backend.close()
            raise
        return cls(Perceiver(loaded[0]), Reasoner(loaded[1]), config.keyframes)

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
    ) -> Answer:
        """Answer ``question`` from ``keyframes`` (or from ``frames``, selecting key frames first)."""
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

        report("reasoning", 0.6)
        start = time.perf_counter()
        answer = self.reasoner.answer(descriptions, question, options)
        answer.reasoning_s = time.perf_counter() - start
        answer.perception_s = perception_s
        report("done", 1.0)
        log.debug(
            "answered %r from %d key frames: perception %.2f s, reasoning %.2f s",
            question,
            len(keyframes),
            perception_s,
            answer.reasoning_s,
        )
        return answer

    def close(self) -> None:
        """Release both models."""
        self.perceiver.backend.close()
        self.reasoner.backend.close()
