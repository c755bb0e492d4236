"""The core pipeline end to end with the tiny models: clip -> key frames -> perception -> reasoning."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r_ros.backends import BackendError, ModelNotFoundError, load_backend
from embodied_r_ros.config import PipelineConfig, model_config
from embodied_r_ros.keyframes import select_keyframes
from embodied_r_ros.perceivers import core_perceivers
from embodied_r_ros.perception import Perceiver
from embodied_r_ros.pipeline import EmbodiedR, NoFramesError
from embodied_r_ros.reasoning.messages import Reasoner
from embodied_r_ros.testing.synthetic_clip import synthetic_clip


class CountingBackend:
    """Delegates to a real backend and records each generate call's batch size."""

    def __init__(self, backend):
        self.inner = backend
        self.config = backend.config
        self.supports_images = backend.supports_images
        self.batches: list[int] = []

    def generate(self, requests, **kwargs):
        self.batches.append(len(requests))
        return self.inner.generate(requests, **kwargs)

    def close(self):
        self.inner.close()


def _config(models: Path) -> PipelineConfig:
    common = dict(device="cpu", dtype="float32", max_new_tokens=12)
    return PipelineConfig(
        vlm=model_config(str(models / "vlm"), **common),
        lm=model_config(str(models / "lm"), **common),
    )


@pytest.fixture(scope="module")
def backends(tiny_models_dir):
    config = _config(tiny_models_dir)
    vlm = load_backend(config.vlm, vision=True)
    lm = load_backend(config.lm, vision=False)
    yield vlm, lm
    vlm.close()
    lm.close()


def test_answer_from_a_clip_with_one_batched_vlm_call(backends):
    vlm, lm = CountingBackend(backends[0]), CountingBackend(backends[1])
    pipeline = EmbodiedR(Perceiver(vlm), Reasoner(lm))
    clip = synthetic_clip(seconds=8.0, fps=5.0, size=(160, 120))
    keyframes = pipeline.select_keyframes(clip.frames)
    assert 4 <= len(keyframes) <= 32
    stages = []
    answer = pipeline.answer(
        "Which way did I turn?",
        ["left", "right"],
        frames=clip.frames,
        on_progress=lambda stage, progress: stages.append((stage, progress)),
    )
    # One VLM call describes every key frame; one LM call answers.
    assert vlm.batches == [len(keyframes)] and lm.batches == [1]
    assert [stage for stage, _ in stages] == ["keyframes", "perception", "reasoning", "done"]
    assert [p for _, p in stages] == sorted(p for _, p in stages)
    assert answer.keyframe_stamps_ns == [k.frame.stamp_ns for k in keyframes]
    assert [d.index for d in answer.descriptions] == list(range(len(keyframes)))
    # The clip carries poses, so every action after the first comes from odometry.
    assert all(d.action_source == "odometry" for d in answer.descriptions[1:])
    assert answer.descriptions[0].action is None
    assert answer.perception_s > 0 and answer.reasoning_s > 0
    assert answer.question == "Which way did I turn?" and answer.options == ["left", "right"]
    assert answer.choice in (None, "A", "B") and answer.value is None


def test_numeric_question_reads_no_choice(backends):
    pipeline = EmbodiedR(Perceiver(backends[0]), Reasoner(backends[1]))
    clip = synthetic_clip(seconds=4.0, fps=2.0, size=(160, 120))
    answer = pipeline.answer(
        "How far did I walk?", (), keyframes=select_keyframes(clip.frames, pipeline.keyframe_config)
    )
    assert answer.choice is None and answer.options == []


def test_empty_window_and_empty_question_are_clear_errors(backends):
    pipeline = EmbodiedR(Perceiver(backends[0]), Reasoner(backends[1]))
    with pytest.raises(NoFramesError, match="no frames"):
        pipeline.answer("Where is the door?", frames=[])
    with pytest.raises(ValueError, match="question is empty"):
        pipeline.answer("  ", frames=synthetic_clip(seconds=1.0).frames)


def test_a_text_only_model_cannot_be_the_vlm(tiny_models_dir):
    config = _config(tiny_models_dir)
    with pytest.raises(BackendError, match="text-only"):
        load_backend(model_config(config.lm.model, device="cpu"), vision=True)


def test_from_config_names_a_missing_model(tiny_models_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = _config(tiny_models_dir)
    config.lm.model = "example-org/not-a-real-model-3B"
    with pytest.raises(ModelNotFoundError) as info:
        EmbodiedR.from_config(config, perceivers=core_perceivers())
    message = str(info.value)
    assert "example-org/not-a-real-model-3B" in message and "tiny-models" in message
