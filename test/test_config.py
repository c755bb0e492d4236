"""Configuration: one set of defaults, partial overrides, clear errors."""

from pathlib import Path

import pytest

from embodied_r_ros.config import (
    ConfigError,
    KeyFrameConfig,
    ModelConfig,
    PerceptionConfig,
    PipelineConfig,
    from_dict,
    load_yaml,
    model_config,
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
    assert ModelConfig().transformers.trust_remote_code is False


def test_partial_override_keeps_other_defaults():
    config = from_dict(
        PipelineConfig, {"lm": {"transformers": {"device": "cpu"}}, "keyframes": {"candidate_fps": 2}}
    )
    assert config.lm.transformers.device == "cpu"
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


def test_backend_options_are_typed_per_backend():
    config = from_dict(
        PipelineConfig,
        {"vlm": {"backend": "openai", "openai": {"base_url": "http://gpu:8000/v1", "retries": 5}}},
    )
    assert (config.vlm.openai.base_url, config.vlm.openai.retries) == ("http://gpu:8000/v1", 5)
    assert config.vlm.transformers == PipelineConfig().vlm.transformers  # the other backend's stay default
    # An option of one backend is unknown in the other's section, and at the model's level it names the
    # section that has it now.
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) vlm\.transformers\.base_url"):
        from_dict(PipelineConfig, {"vlm": {"transformers": {"base_url": "http://gpu:8000/v1"}}})
    with pytest.raises(ConfigError, match=r"lm\.openai\.device.*known keys under lm\.openai: api_key_env"):
        from_dict(PipelineConfig, {"lm": {"openai": {"device": "cpu"}}})
    with pytest.raises(
        ConfigError, match=r"unknown config key\(s\) lm\.device.*did you mean lm\.transformers\.device\?"
    ):
        from_dict(PipelineConfig, {"lm": {"device": "cpu"}})
    with pytest.raises(ConfigError, match="model timeout_s must be > 0"):
        from_dict(PipelineConfig, {"vlm": {"openai": {"timeout_s": 0.0}}})


def test_model_config_puts_each_setting_in_its_section():
    config = model_config("m", device="cpu", dtype="float32", base_url="http://x/v1", max_new_tokens=8)
    assert (config.model, config.max_new_tokens) == ("m", 8)
    assert (config.transformers.device, config.transformers.dtype) == ("cpu", "float32")
    assert config.openai.base_url == "http://x/v1"
    assert config.with_adapter("/a").transformers.adapter == "/a" and config.transformers.adapter == ""
    with pytest.raises(TypeError, match="unknown setting 'colour'"):
        model_config("m", colour="red")
    with pytest.raises(TypeError, match="unknown setting 'transformers'"):
        model_config("m", transformers={})


def test_perception_is_its_own_section_and_ground_truth_no_backend():
    config = from_dict(
        PipelineConfig, {"perception": {"perceiver": "ground_truth", "scene": "/s/scene.json"}}
    )
    assert (config.perception.perceiver, config.perception.scene) == ("ground_truth", "/s/scene.json")
    assert PipelineConfig().perception == PerceptionConfig(perceiver="vlm", scene="")
    with pytest.raises(ConfigError, match="perception.perceiver must not be empty"):
        PerceptionConfig(perceiver=" ")
    for backend in ("vlm", "lm"):
        with pytest.raises(ConfigError) as info:
            from_dict(PipelineConfig, {backend: {"backend": "ground_truth"}})
        assert "perception.perceiver: ground_truth and perception.scene" in str(info.value)
