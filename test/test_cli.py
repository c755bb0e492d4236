"""The `embodied-r` command as a user runs it: a real subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def _run(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # The installed entry point, as colcon (install/embodied_r_ros/bin) or pip puts it on PATH.
    command = shutil.which("embodied-r")
    assert command, "embodied-r is not on PATH: build with `make build` and source install/setup.bash"
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([command, *args], capture_output=True, text=True, env=env, timeout=600)


def test_core_demo_runs_the_pipeline_and_says_the_models_are_smoke_models(tiny_models_dir):
    result = _run(
        "demo",
        "--core",
        "--duration",
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
        "--core",
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


def test_ros_demo_answers_a_synthetic_scene_over_dds(tiny_models_dir, tmp_path, ros_domain):
    """The full demo: synth -> node process -> play process -> ask process -> HTML report."""
    out = tmp_path / "demo"
    result = _run(
        "demo",
        "--smoke",
        "--out",
        str(out),
        "--duration",
        "6",
        "--rate",
        "4",
        "--questions",
        "2",
        "--max-new-tokens",
        "8",
        env_extra={"EMBODIED_R_TINY_MODELS": str(tiny_models_dir)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "RANDOM-WEIGHT" in result.stdout
    assert result.stdout.count("ground truth:") == 2 and "NO ANSWER" not in result.stdout
    report = (out / "report.html").read_text()
    assert report.count("data:image/jpeg;base64,") >= 4  # the key frames came back over ~/keyframes
    assert (out / "scene_0000" / "preview.png").is_file()


def test_ros_demo_answers_with_the_real_lm_and_ground_truth_perception(smollm2_dir, tmp_path, ros_domain):
    """`make demo` by default: the pretrained SmolLM2 reasons over ground-truth descriptions, and the
    banner and the report name both (the ground truth as a measuring instrument, not a VLM)."""
    out = tmp_path / "demo"
    command = ["demo", "--out", str(out), "--duration", "6", "--rate", "4", "--questions", "2"]
    result = subprocess.run(
        [shutil.which("embodied-r"), *command, "--max-new-tokens", "24"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,  # no trained reasoner under out/ here
        env={**os.environ, "EMBODIED_R_SMOLLM2": str(smollm2_dir)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "RANDOM-WEIGHT" not in result.stdout
    assert "SmolLM2-135M-Instruct, pretrained" in result.stdout and "GROUND-TRUTH PERCEPTION" in result.stdout
    assert result.stdout.count("ground truth:") == 2 and "Scores: 2 questions, 2 answered" in result.stdout
    # Beside each answer, what the prompt allows (the oracle, with its reasoning) and the blind reader.
    assert result.stdout.count("oracle (reads only the prompt):") == 2
    assert "oracle multiple-choice accuracy 1.00" in result.stdout
    report = (out / "report.html").read_text()
    assert "SmolLM2-135M-Instruct" in report and "NOT a VLM" in report
    assert report.count("oracle (reads only the prompt)") == 2 and "options only (blind reader)" in report
    assert "2 questions, 2 answered" in report and "ground-truth perception" in report.lower()


def test_demo_smoke_flag_keeps_the_random_weight_path_and_vlm_needs_a_model(tmp_path):
    result = _run("demo", "--perception", "vlm", "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and "--perception vlm needs --vlm" in result.stderr


# The node's side of the CLI with the training extras made unimportable, as on a robot with only the
# node's dependencies installed.
_WITHOUT_TRAINING = """
import sys
for name in ("embodied_r_training", "rosbags", "trl", "datasets"):
    sys.modules[name] = None  # import raises ImportError, as when not installed
{body}
"""


def _python_without_training(body: str, *args: str) -> subprocess.CompletedProcess:
    script = _WITHOUT_TRAINING.format(body=body)
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300, env=os.environ
    )


def test_node_commands_work_without_the_training_package():
    cli = "from embodied_r_ros.cli.main import main\nsys.exit(main())"
    for command in ("run", "ask", "play"):
        result = _python_without_training(cli, command, "--help")
        assert result.returncode == 0, result.stderr
        assert f"embodied-r {command}" in result.stdout
    imported = _python_without_training(
        "import embodied_r_ros.ros.node, embodied_r_ros.pipeline, embodied_r_ros.cli.run\nprint('imported')"
    )
    assert imported.returncode == 0 and "imported" in imported.stdout, imported.stderr

    # Ground truth is the training package's perceiver: without it, asking for it says how to install it.
    ground_truth = _python_without_training(
        "from embodied_r_ros.cli.parts import perceivers\n"
        "from embodied_r_ros.config import PerceptionConfig, PipelineConfig\n"
        "registry = perceivers()\n"
        "try:\n"
        "    registry.create(PipelineConfig(perception=PerceptionConfig('ground_truth', 'scene.json')))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "print(registry.names())"
    )
    assert ground_truth.returncode == 0, ground_truth.stderr
    assert "('vlm',)" in ground_truth.stdout  # installed, tried on first use, not importable: not listed
    assert "ConfigError perception.perceiver ground_truth is not available here" in ground_truth.stdout
    assert "embodied_r_training" in ground_truth.stdout and "pip install ." in ground_truth.stdout

    listing = _python_without_training(cli, "--help")
    assert listing.returncode == 0, listing.stderr
    train_line = next(line for line in listing.stdout.splitlines() if line.strip().startswith("train"))
    assert "unavailable: needs embodied_r_training" in train_line
    assert "unavailable" not in next(line for line in listing.stdout.splitlines() if "run " in line)

    train = _python_without_training(cli, "train", "--config", "x.yaml")
    assert train.returncode == 2
    assert "Traceback" not in train.stderr
    assert "embodied_r_training" in train.stderr and "pip install '.[training]'" in train.stderr


def test_a_command_imports_only_its_own_module():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom embodied_r_ros.cli.main import build_parser\nbuild_parser(['run', '--help'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('embodied_r_training')))",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_demo_loads_the_shipped_reasoner_its_record_names(tmp_path) -> None:
    """The shipped record names its GGUF file (and the adapter on it) relative to itself: a copy beside it, or
    kept models elsewhere under results (the SFT's GGUF, GRPO's adapter: not stored twice); a record whose
    files are missing ships nothing."""
    import json

    from embodied_r_ros.cli.demo import shipped_reasoner

    root = tmp_path / "results"
    shipped = root / "models" / "shipped"
    shipped.mkdir(parents=True)
    assert shipped_reasoner(root) is None  # no record
    record = {"file": "../sft_all/model-q8_0.gguf", "label": "SFT", "scores": {}}
    (shipped / "shipped.json").write_text(json.dumps(record))
    assert shipped_reasoner(root) is None  # the file it names is not there
    (root / "models" / "sft_all").mkdir()
    (root / "models" / "sft_all" / "model-q8_0.gguf").write_bytes(b"GGUF")
    model, adapter, found = shipped_reasoner(root)
    assert model == (root / "models" / "sft_all" / "model-q8_0.gguf").resolve() and found == record
    assert adapter is None
    (shipped / "shipped.json").write_text(json.dumps({**record, "adapter": "../grpo_all"}))
    assert shipped_reasoner(root) is None  # GRPO's adapter is named but not kept
    (root / "models" / "grpo_all").mkdir()
    (root / "models" / "grpo_all" / "adapter_config.json").write_text("{}")
    assert shipped_reasoner(root)[1] == (root / "models" / "grpo_all").resolve()
    (shipped / "shipped.json").write_text(json.dumps({**record, "file": "reasoner-q8_0.gguf"}))
    assert shipped_reasoner(root) is None
    (shipped / "reasoner-q8_0.gguf").write_bytes(b"GGUF")
    assert shipped_reasoner(root)[:2] == ((shipped / "reasoner-q8_0.gguf").resolve(), None)


def test_the_demo_runs_the_shipped_reasoner_with_the_settings_it_was_measured_with(tmp_path) -> None:
    """A record whose row decoded with the tools (``settings``) turns them on in the node the demo starts:
    the flags parse into the node's typed parameters; a record without settings adds none."""
    import argparse

    from embodied_r_ros.cli import run
    from embodied_r_ros.cli.demo import shipped_flags

    model = tmp_path / "model-q8_0.gguf"
    settings = {"lm.transformers.calculator": True, "lm.transformers.lookup": True}
    flags = shipped_flags(model, tmp_path / "grpo_all", {"settings": settings})
    assert flags[:2] == ["--lm", str(model)]
    parser = argparse.ArgumentParser()
    run.register(parser.add_subparsers(dest="command"))
    overrides = run.parameter_overrides(parser.parse_args(["run", *flags]))
    assert overrides["lm.transformers.calculator"] is True and overrides["lm.transformers.lookup"] is True
    assert overrides["lm.transformers.adapter"] == str(tmp_path / "grpo_all")
    assert shipped_flags(model, None, {}) == ["--lm", str(model)]


def test_the_demo_picks_the_best_kept_reasoner_and_merges_its_adapter(tiny_models_dir, tmp_path) -> None:
    """`make demo` uses the best reasoner results/reasoner keeps: GRPO or SFT by their held-out score, the
    SFT adapter merged into the base once (`embodied-r models merge`)."""
    import json

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from embodied_r_ros.cli.demo import kept_reasoner

    root = tmp_path / "results"
    assert kept_reasoner(root) is None  # nothing kept: the pretrained SmolLM2
    for name, mean in (("sft", 0.40), ("grpo", 0.45), ("oracle", 1.0), ("options_only", 0.25)):
        (root / "eval" / name).mkdir(parents=True)
        (root / "eval" / name / "metrics.json").write_text(json.dumps({"overall": {"task_mean": mean}}))
    assert kept_reasoner(root) is None  # scores without the SFT adapter: nothing to load
    (root / "models" / "sft_all").mkdir(parents=True)
    assert kept_reasoner(root)[0] == "sft"  # GRPO's adapter is not kept
    (root / "models" / "grpo_all").mkdir(parents=True)
    method, scores = kept_reasoner(root)
    assert method == "grpo" and scores == {"sft": 0.40, "grpo": 0.45, "oracle": 1.0, "options_only": 0.25}
    (root / "eval" / "grpo" / "metrics.json").write_text(json.dumps({"overall": {"task_mean": 0.30}}))
    assert kept_reasoner(root)[0] == "sft"

    torch.manual_seed(0)
    adapter = tmp_path / "adapter"
    model = AutoModelForCausalLM.from_pretrained(tiny_models_dir / "lm")
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(adapter)
    merged = tmp_path / "merged"
    first = _run("models", "merge", str(tiny_models_dir / "lm"), str(adapter), str(merged))
    assert first.returncode == 0 and (merged / "config.json").is_file(), first.stderr
    written = (merged / "model.safetensors").stat().st_mtime_ns
    assert _run("models", "merge", str(tiny_models_dir / "lm"), str(adapter), str(merged)).returncode == 0
    assert (merged / "model.safetensors").stat().st_mtime_ns == written  # the same adapter: nothing redone
    missing = _run("models", "merge", str(tiny_models_dir / "lm"), str(tmp_path / "nowhere"), str(merged))
    assert missing.returncode == 2 and "LoRA adapter" in missing.stderr
