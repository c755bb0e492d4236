"""Perceivers by name: the registry, a perceiver registered by another package, and what the pipeline asks
its perceiver for (the pre-encoder)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from embodied_r_ros.cli.parts import perceivers
from embodied_r_ros.config import ConfigError, PerceptionConfig, PipelineConfig, model_config
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.perceivers import PerceiverRegistry, core_perceivers
from embodied_r_ros.perception import Description, ImageEncoder, PerceptionQuery, parse_descriptions
from embodied_r_ros.pipeline import EmbodiedR
from embodied_r_ros.testing.synthetic_clip import synthetic_clip


class EchoPerceiver:
    """A perceiver of another package: it says the same for every key frame (what `setting` holds)."""

    def __init__(self, setting: str) -> None:
        self.setting = setting
        self.closed = False

    @property
    def label(self) -> str:
        return f"echo:{self.setting}"

    def replies(self, queries: Sequence[PerceptionQuery]) -> list[list[str]]:
        # Key frame 0 is a scene, the others steps, in the forms the VLM prompts ask for.
        step = f"Action: move forward\nObservation: {self.setting}"
        return [[f"I see {self.setting}.", *[step] * (len(q.keyframes) - 1)] for q in queries]

    def describe(
        self, keyframes: Sequence[KeyFrame], question: str, options: Sequence[str] = ()
    ) -> list[Description]:
        (replies,) = self.replies([PerceptionQuery(keyframes, question, options)])
        return parse_descriptions(keyframes, replies)

    def pre_encoder(self) -> ImageEncoder | None:
        return None

    def close(self) -> None:
        self.closed = True


def _lm(models: Path) -> dict:
    return {"lm": model_config(str(models / "lm"), device="cpu", dtype="float32", max_new_tokens=8)}


def test_unknown_and_unavailable_perceivers_are_clear_errors():
    registry = core_perceivers()
    assert registry.names() == ("vlm",)
    with pytest.raises(
        ConfigError, match=r"perception.perceiver 'lidar' is not a registered perceiver; registered: vlm"
    ):
        registry.create(PipelineConfig(perception=PerceptionConfig("lidar")))
    registry.unavailable("lidar", "it needs the package lidar_tools; pip install lidar_tools")
    with pytest.raises(
        ConfigError, match="perception.perceiver lidar is not available here: .*pip install lidar"
    ):
        registry.describe(PipelineConfig(perception=PerceptionConfig("lidar")))
    with pytest.raises(ValueError, match="registered already"):
        registry.register("vlm", lambda config: EchoPerceiver(""), describes=lambda config: "")


def test_the_application_registers_ground_truth_beside_the_vlm():
    registry = perceivers()
    assert registry.names() == ("vlm", "ground_truth")
    config = PipelineConfig(perception=PerceptionConfig("ground_truth", "/s/scene.json"))
    assert (
        registry.describe(config)
        == "ground-truth perception (simulator geometry, not a VLM) from '/s/scene.json'"
    )
    assert registry.describe(PipelineConfig()) == "VLM 'Qwen/Qwen2.5-VL-7B-Instruct' (transformers)"


def test_a_perceiver_registered_by_name_is_what_the_pipeline_perceives_with(tiny_models_dir):
    registry = PerceiverRegistry()
    registry.register(
        "echo",
        lambda config: EchoPerceiver(config.perception.scene),
        describes=lambda config: f"echo of {config.perception.scene!r}",
    )
    config = PipelineConfig(perception=PerceptionConfig("echo", "a red chair"), **_lm(tiny_models_dir))
    pipeline = EmbodiedR.from_config(config, perceivers=registry)
    perceiver = pipeline.perceiver
    try:
        answer = pipeline.answer("Where is the chair?", frames=synthetic_clip(seconds=4.0).frames)
    finally:
        pipeline.close()
    assert isinstance(perceiver, EchoPerceiver) and perceiver.closed
    assert pipeline.perception == "echo of 'a red chair'" and pipeline.pre_encoder() is None
    first, *steps = answer.descriptions
    assert first.observation == "I see a red chair." and steps
    assert all(d.observation == "a red chair" for d in steps)
    # The core's registry does not know it; the VLM is not loaded for it either.
    with pytest.raises(ConfigError, match="'echo' is not a registered perceiver; registered: vlm"):
        EmbodiedR.from_config(config, perceivers=core_perceivers())


def test_the_pipeline_hands_out_the_vlms_encoder_only_when_it_caches(tiny_models_dir):
    for cache_mb, expect in ((64.0, True), (0.0, False)):
        vlm = model_config(
            str(tiny_models_dir / "vlm"), device="cpu", dtype="float32", image_cache_mb=cache_mb
        )
        pipeline = EmbodiedR.from_config(
            PipelineConfig(vlm=vlm, **_lm(tiny_models_dir)), perceivers=perceivers()
        )
        try:
            encode = pipeline.pre_encoder()
            assert (encode is not None) is expect
            if encode is not None:
                cache = pipeline.perceiver.backend.image_cache
                encode([np.full((64, 64, 3), 128, np.uint8)])
                assert len(cache) == 1  # the key frame waits in the VLM's cache for its question
        finally:
            pipeline.close()
    assert pipeline.perception == f"VLM {vlm.model!r} (transformers)"
