"""Configuration: one set of defaults, partial overrides, clear errors."""

from pathlib import Path

import pytest

from embodied_r_ros.config import (
    ConfigError,
    KeyFrameConfig,
    ModelConfig,
    PipelineConfig,
    from_dict,
    load_yaml,
    to_dict,
)


def test_defaults_follow_the_paper():
    kf = KeyFrameConfig()
    assert (kf.candidate_fps, kf.min_matches, kf.ransac_reproj_threshold, kf.overlap_threshold) == (
        1.0,
        10,
        5.0,
        0.5,
    )
    assert (kf.min_keyframes, kf.max_keyframes) == (4, 32)
    assert ModelConfig().trust_remote_code is False


def test_partial_override_keeps_other_defaults():
    config = from_dict(PipelineConfig, {"lm": {"device": "cpu"}, "keyframes": {"candidate_fps": 2}})
    assert config.lm.device == "cpu"
    assert config.lm.model == PipelineConfig().lm.model
    assert config.keyframes.candidate_fps == 2.0 and isinstance(config.keyframes.candidate_fps, float)
    assert from_dict(PipelineConfig, to_dict(config)) == config


@pytest.mark.parametrize(
    "data, words",
    [
        ({"vlm": {"modle": "x"}}, ["vlm.modle", "model"]),
        ({"keyframes": {"min_keyframes": 40}}, ["max_keyframes"]),
        ({"lm": {"backend": "onnx"}}, ["backend", "transformers"]),
        ({"lm": {"max_new_tokens": "many"}}, ["lm.max_new_tokens", "int"]),
        ({"buffer": 3}, ["buffer", "mapping"]),
        ({"keyframes": {"overlap_threshold": 1.5}}, ["overlap_threshold"]),
    ],
)
def test_bad_values_are_named(data, words):
    with pytest.raises(ConfigError) as info:
        from_dict(PipelineConfig, data)
    for word in words:
        assert word in str(info.value)


def test_yaml_errors_name_the_file(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("vlm:\n  model: x\n  colour: red\n")
    with pytest.raises(ConfigError, match="bad.yaml.*vlm.colour"):
        load_yaml(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_yaml(tmp_path / "missing.yaml")
    good = tmp_path / "good.yaml"
    good.write_text("vlm:\n  model: /models/vlm\nkeyframes:\n  max_keyframes: 16\n")
    assert load_yaml(good).keyframes.max_keyframes == 16
