"""The training package's perceiver: ground truth, registered by name for ``perception.perceiver``.

Ground-truth perception (:mod:`.synth.ground_truth`) is a measuring instrument, never a VLM: for bags of
``embodied-r synth`` it says what a perfect VLM would say, computed from the scene's geometry
(``perception.scene``: the ``scene.json`` beside the bag). :func:`register` is this package's entry point
of group ``embodied_r_ros.perceivers`` (training/setup.cfg): registries built from the installed packages
(:func:`embodied_r_ros.perceivers.installed_perceivers`) hold it; the core never imports it.
"""

from __future__ import annotations

from embodied_r_ros.backends import BackendError
from embodied_r_ros.config import PipelineConfig
from embodied_r_ros.perceivers import PerceiverRegistry
from embodied_r_ros.perception import ImageEncoder

from .synth.ground_truth import DESCRIPTION, GroundTruthError, GroundTruthPerceiver
from .synth.mission_ground_truth import MissionGroundTruth, is_mission_file

GROUND_TRUTH = "ground_truth"  # its name for perception.perceiver


class GroundTruthKeyFrames(GroundTruthPerceiver):
    """:class:`GroundTruthPerceiver` as the pipeline's perceiver: it encodes no images (no vision tower)."""

    def pre_encoder(self) -> ImageEncoder | None:
        """Nothing to encode ahead: ground truth reads the key frames' stamps, not their pixels."""
        return None


def ground_truth_perceiver(config: PipelineConfig) -> GroundTruthKeyFrames | MissionGroundTruth:
    """Ground-truth perception of the scene ``config.perception.scene`` (a scene.json, or a long mission's
    mission.json: :class:`MissionGroundTruth`); raises :class:`BackendError` naming the setting and the fix
    when there is no usable scene file."""
    scene = config.perception.scene
    if not scene.strip():
        raise BackendError(
            f"perception.perceiver {GROUND_TRUTH} needs perception.scene = the scene.json that `embodied-r "
            "synth` wrote beside the bag (scene_NNNN/scene.json), or a mission's mission.json"
        )
    try:
        if is_mission_file(scene):
            return MissionGroundTruth(scene)
        return GroundTruthKeyFrames(scene)
    except GroundTruthError as exc:
        where = f"perception.scene = {scene!r}"
        raise BackendError(f"cannot use ground-truth perception ({where}): {exc}") from exc


def describe_ground_truth(config: PipelineConfig) -> str:
    """Ground truth in words, never called a VLM: "ground-truth perception (simulator geometry, not a VLM)
    from 'scene.json'"."""
    return f"{DESCRIPTION} from {config.perception.scene!r}"


def register(registry: PerceiverRegistry) -> None:
    """Add ``ground_truth`` to ``registry``."""
    registry.register(GROUND_TRUTH, ground_truth_perceiver, describes=describe_ground_truth)
