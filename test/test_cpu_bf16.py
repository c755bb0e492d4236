"""bf16 on a CPU without native bf16 matrix products (backends/cpu_bf16.py): training and evaluation that ask
for it stop before loading anything, with the setting that fixes it; float32 and the override pass. The
CPU's answer is replaced here both ways, so the test holds on any machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r_ros.backends import cpu_bf16
from embodied_r_ros.cli.main import build_parser
from embodied_r_ros.config import ConfigError

CONFIGS = Path(__file__).resolve().parents[1] / "training" / "configs"


@pytest.fixture
def emulated(monkeypatch):
    """A CPU whose bf16 products are a generic loop (AVX2 only)."""
    monkeypatch.setattr(cpu_bf16, "native_bf16", lambda: False)
    monkeypatch.delenv(cpu_bf16.ALLOW_ENV, raising=False)


def test_the_check_names_what_asked_and_the_fix(emulated, monkeypatch):
    with pytest.raises(cpu_bf16.SlowBf16Error) as caught:
        cpu_bf16.check_cpu_bf16("grpo.bf16", "set grpo.bf16=false")
    message = str(caught.value)
    assert message.startswith("grpo.bf16 asks for bfloat16 on this CPU")
    assert "set grpo.bf16=false" in message and "AVX512" in message and cpu_bf16.ALLOW_ENV in message
    assert isinstance(caught.value, ConfigError)  # the CLI prints it as one line, no traceback
    monkeypatch.setenv(cpu_bf16.ALLOW_ENV, "1")
    cpu_bf16.check_cpu_bf16("grpo.bf16", "set grpo.bf16=false")  # asked for anyway


def test_a_cpu_with_native_bf16_passes(monkeypatch):
    monkeypatch.setattr(cpu_bf16, "native_bf16", lambda: True)
    cpu_bf16.check_cpu_bf16("grpo.bf16", "set grpo.bf16=false")


def test_cpu_training_under_bf16_autocast_stops_and_float32_runs(emulated, tmp_path):
    from embodied_r_training.commands.train import check_train_bf16
    from embodied_r_training.rl.train_config import load_train_config

    config = load_train_config(CONFIGS / "reasoner_cpu.yaml", [f"output_dir={tmp_path}"])
    assert config.grpo["use_cpu"] and config.grpo["bf16"]  # the shipped CPU recipe asks for it
    with pytest.raises(cpu_bf16.SlowBf16Error, match=r"grpo\.bf16=false"):
        check_train_bf16(config)
    float32 = load_train_config(CONFIGS / "reasoner_cpu.yaml", [f"output_dir={tmp_path}", "grpo.bf16=false"])
    check_train_bf16(float32)


def test_an_evaluation_in_bf16_on_the_cpu_stops_and_float32_runs(emulated, tmp_path):
    from embodied_r_training.commands.evaluate import check_eval_bf16, config_from_args

    def config(*flags: str):
        args = build_parser(["eval"]).parse_args(["eval", str(tmp_path), "--lm", "some/lm", *flags])
        return config_from_args(args)

    with pytest.raises(cpu_bf16.SlowBf16Error, match=r"--dtype float32"):
        check_eval_bf16(config("--dtype", "bfloat16", "--device", "cpu"))
    check_eval_bf16(config("--dtype", "float32", "--device", "cpu"))
    check_eval_bf16(config("--device", "cpu"))  # auto: float32 on a CPU
