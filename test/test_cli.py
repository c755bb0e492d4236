"""The `embodied-r` command as a user runs it: a real subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess


def _run(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # The installed entry point, as colcon (install/embodied_r_ros/bin) or pip puts it on PATH.
    command = shutil.which("embodied-r")
    assert command, "embodied-r is not on PATH: build with `make build` and source install/setup.bash"
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([command, *args], capture_output=True, text=True, env=env, timeout=600)


def test_demo_runs_the_pipeline_and_says_the_models_are_smoke_models(tiny_models_dir):
    result = _run(
        "demo",
        "--seconds",
        "6",
        "--max-new-tokens",
        "8",
        env_extra={"EMBODIED_R_TINY_MODELS": str(tiny_models_dir)},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "RANDOM-WEIGHT" in out and "key frames" in out
    assert out.count("reasoning:") == 2 and out.count("answer:") >= 2
    assert "odometry" in out  # actions came from the clip's poses


def test_missing_model_is_one_clear_line_not_a_traceback(tmp_path):
    result = _run(
        "demo",
        "--vlm",
        str(tmp_path / "no-such-vlm"),
        "--lm",
        "example-org/no-such-lm",
        env_extra={"HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "no-such-vlm" in result.stderr and "error" in result.stderr


def test_help_lists_the_subcommands():
    result = _run("--help")
    assert result.returncode == 0
    assert "tiny-models" in result.stdout and "demo" in result.stdout
