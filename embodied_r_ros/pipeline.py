"""The core pipeline in one object: frames -> key frames -> perception -> reasoning -> answer.

This is what the ROS node wraps and what ``embodied-r demo`` runs. It holds no ROS types.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from .answers import Answer
from .backends import BackendError, GenerationBackend, load_backend
from .config import GROUND_TRUTH, KeyFrameConfig, ModelConfig, PipelineConfig
from .frames import Frame
from .keyframes import KeyFrame, select_keyframes
from .perception import KeyFramePerceiver, Perceiver
from .reasoning import Reasoner

log = logging.getLogger(__name__)

# What logs and banners say about vlm.backend ground_truth (never call it a VLM).
GROUND_TRUTH_BANNER = "ground-truth perception (simulator geometry, not a VLM)"
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


def ground_truth_perceiver(config: ModelConfig) -> KeyFramePerceiver:
    """The simulator's ground-truth perception for ``vlm.backend: ground_truth`` (``vlm.model``: the
    scene.json of the bag being played): a measuring instrument, not a VLM. Raises :class:`BackendError`
    naming the setting and the fix."""
    try:  # training code (world, renderer): imported only here, so the core never needs it
        from embodied_r_training.synth.ground_truth import GroundTruthError, GroundTruthPerceiver
    except ImportError as exc:
        raise BackendError(
            f"vlm.backend {GROUND_TRUTH} needs the package embodied_r_training (the synthetic world and its "
            f"renderer), which is not importable ({exc}); install the whole project (`pip install .` in the "
            "repository, or build it with colcon), or use a VLM backend (transformers, openai)"
        ) from exc
    if not config.model.strip():
        raise BackendError(
            f"vlm.backend {GROUND_TRUTH} needs vlm.model = the scene.json that `embodied-r synth` wrote "
            "beside the bag (scene_NNNN/scene.json)"
        )
    try:
        return GroundTruthPerceiver(config.model)
    except GroundTruthError as exc:
        where = f"vlm.model = {config.model!r}"
        raise BackendError(f"cannot use ground-truth perception ({where}): {exc}") from exc


class NoFramesError(ValueError):
    """A query whose window holds no frames."""


class EmbodiedR:
    """Answers spatial questions about a clip with a VLM (perception) and an LM (reasoning).

    ``perceiver`` is the VLM's :class:`Perceiver`, or any other :class:`KeyFramePerceiver` (the simulator's
    ground truth).
    """

    def __init__(
        self,
        perceiver: KeyFramePerceiver,
        reasoner: Reasoner,
        keyframe_config: KeyFrameConfig | None = None,
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
        already loaded is released first. ``vlm.backend: ground_truth`` perceives with the simulator's
        geometry instead of a VLM (:func:`ground_truth_perceiver`).
        """
        if config.vlm.backend == GROUND_TRUTH:
            perceiver = ground_truth_perceiver(config.vlm)  # first: it fails fast, before the LM loads
            log.info("perception: %s, %s", perceiver.label, GROUND_TRUTH_BANNER)
            return cls(perceiver, Reasoner(_load_role("LM", "lm", config.lm, False)), config.keyframes)
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
        self.perceiver.close()
        self.reasoner.backend.close()
