"""bench/gpu_check.py (issue 13): the GPU check's own code, run on the tiny models on the CPU.

The script is what a GPU machine runs for minutes at a time; these tests make sure every section runs and
reports figures before such minutes are spent. They check what the code does (forced token counts,
reference calls, the fallback of the large VLM, the shipped configs' sizes), never how fast it is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gpu_check.py"
# The GPU machine has no ROS, no rosbags and no colcon install: block those, run from the source tree only.
RUN_WITHOUT_ROS = (
    "import runpy, sys; sys.modules['rclpy'] = sys.modules['rosbags'] = None; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def load_script() -> ModuleType:
    """bench/gpu_check.py as a module (registered, as its dataclasses need; loaded once)."""
    if "gpu_check" in sys.modules:
        return sys.modules["gpu_check"]
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


def number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


@pytest.fixture(scope="module")
def tiny_run(tiny_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, str]:
    """One --tiny run of the whole script in a subprocess: (JSON, Markdown, output)."""
    out = tmp_path_factory.mktemp("gpu_check")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["EMBODIED_R_TINY_MODELS"] = str(tiny_models_dir)
    command = [
        sys.executable, "-c", RUN_WITHOUT_ROS, str(SCRIPT), "--tiny", "--out", str(out), "--threads", "1",
        "--large-margin-gib", "1e6",  # pretend the large VLM does not fit: exercises its fallback
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return json.loads((out / "gpu_check.json").read_text()), (out / "gpu_check.md").read_text(), output


def test_every_section_runs_and_reports_figures(tiny_run: tuple[dict, str, str]) -> None:
    results, _, output = tiny_run
    assert results["tiny"] and results["finished"]
    for name, section in results["sections"].items():
        assert section["status"] == "ok", (name, section, output[-3000:])
    assert "Traceback" not in output, output[-3000:]


def test_shipped_configs_have_the_real_sizes(tiny_run: tuple[dict, str, str]) -> None:
    models = tiny_run[0]["sections"]["model_sizes"]["models"]
    # Parameter counts of the public checkpoints: 8.29 B, 3.09 B, 73.4 B.
    for name, billions in (
        ("qwen2.5-vl-7b-instruct", 8.29),
        ("qwen2.5-3b-instruct", 3.09),
        ("qwen2.5-vl-72b-instruct", 73.41),
    ):
        assert models[name]["params_b"] == pytest.approx(billions, rel=0.005), name
    # A 640x480 key frame: 644x476 pixels after resizing, 46x34 patches, 2x2 merged.
    assert models["qwen2.5-vl-7b-instruct"]["image_tokens_per_keyframe"] == 391
    assert models["qwen2.5-vl-72b-instruct"]["image_tokens_per_keyframe"] == 391


def test_queries_force_token_counts_and_time_every_stage(tiny_run: tuple[dict, str, str]) -> None:
    results = tiny_run[0]
    robot = results["sections"]["query_robot"]
    sizes = results["sizes"]
    assert [run["keyframes"] for run in robot["runs"]] == [8, 16, 32]
    for run in robot["runs"]:
        assert run["status"] == "ok", run
        for key in ("perception_s", "reasoning_s", "total_s", "vision_encode_s", "peak_gib"):
            assert number(run[key]) and run[key] > 0, (key, run)
        assert run["total_s"] >= run["perception_s"] + run["reasoning_s"] - 1e-6
        # Random weights write exactly the forced lengths: one description per key frame, one answer.
        assert run["perception_tokens"]["calls"] == 1  # the pipeline's one batched VLM call
        assert run["perception_tokens"]["new_tokens"] == run["keyframes"] * sizes["description_tokens"]
        assert run["perception_tokens"]["image_tokens"] > 0
        assert run["reasoning_tokens"]["new_tokens"] == sizes["reasoning_tokens"]
    per_frame = robot["per_frame"]
    assert per_frame["status"] == "ok" and per_frame["keyframes"] == 8
    assert number(per_frame["ratio"]) and per_frame["ratio"] > 0


def test_grpo_steps_with_and_without_the_reference(tiny_run: tuple[dict, str, str]) -> None:
    results = tiny_run[0]
    grpo = results["sections"]["grpo"]
    length = results["sizes"]["grpo_completion_tokens"]
    for key, calls in (("without_reference", 0), ("with_reference", 2)):
        run = grpo[key]
        assert run["status"] == "ok", run
        assert run["completions_per_step"] == 32  # embodied_r_lora.yaml: 8 per micro-batch x 4 accumulation
        assert run["lora"]["r"] == 64 and run["gradient_checkpointing"]
        assert run["steps"] == 2 and all(number(s) and s > 0 for s in run["step_s"])
        assert run["completion_mean_length_logged"] == [length, length]
        assert run["reference_calls"] == calls  # one batched reference call per step
        assert number(run["peak_gib"]) and run["prompt_tokens"] > 100
        # rosbags was blocked, as on the GPU machine: the trainer's own loader must not need it
        assert run["data_loader"] == "embodied_r_training.rl.loading.load_split"
    assert max(grpo["with_reference"]["grad_norm_logged"]) > 0  # LoRA weights get gradients
    longest = results["sections"]["grpo_max_length"]["run"]
    assert longest["status"] == "ok" and longest["completion_mean_length_logged"] == [16]


def test_large_vlm_falls_back_to_fewer_layers(tiny_run: tuple[dict, str, str]) -> None:
    large = tiny_run[0]["sections"]["query_72b"]
    assert large["full"]["status"].startswith("OOM")
    reduced = large["reduced"]
    assert reduced["status"] == "ok" and reduced["text_layers"] < reduced["of_text_layers"]
    assert reduced["perception_s_extrapolated_upper_bound"] > reduced["perception_s"] > 0


def test_markdown_has_a_row_per_figure(tiny_run: tuple[dict, str, str]) -> None:
    markdown = tiny_run[1]
    assert "tiny random models on the CPU" in markdown
    for fragment in (
        "qwen2.5-vl-7b-instruct: parameters",
        "query, 8 key frames",
        "query, 32 key frames",
        "one call per key frame / one batched call",
        "GRPO step, lm + LoRA, without reference",
        "GRPO step, lm + LoRA, with reference",
        "with 1 of 2 text layers",
        "the paper's maximum)",
    ):
        assert fragment in markdown, fragment
    assert "| met |" not in markdown and "| missed |" not in markdown  # no verdicts on a dry run


def test_an_exhausted_budget_skips_sections_and_still_writes(
    tiny_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBODIED_R_TINY_MODELS", str(tiny_models_dir))
    monkeypatch.setenv("TQDM_DISABLE", "1")  # main() sets it; the monkeypatch restores it afterwards
    script = load_script()
    assert (
        script.main(["--tiny", "--out", str(tmp_path), "--budget-s", "0", "--sections", "model_sizes,grpo"])
        == 0
    )
    results = json.loads((tmp_path / "gpu_check.json").read_text())
    sections = results["sections"]
    assert sections["model_sizes"]["status"].startswith("skipped: budget")
    assert sections["grpo"]["status"].startswith("skipped: budget")
    assert sections["query_robot"]["status"].startswith("not run")
    assert "skipped: budget" in (tmp_path / "gpu_check.md").read_text()


def test_config_token_ids_are_mapped_onto_the_stand_in_tokenizer() -> None:
    script = load_script()
    ids = {token: 1000 + i for i, token in enumerate(script.SPECIAL_TOKENS)}
    config = {
        "image_token_id": 151655,
        "eos_token_id": [151645, 151643],
        "vocab_size": 152064,
        "text_config": {"bos_token_id": 151643, "hidden_size": 151655},
    }
    mapped = script.remap_token_ids(config, ids)
    assert mapped["image_token_id"] == ids["<|image_pad|>"]
    assert mapped["eos_token_id"] == [ids["<|im_end|>"], ids["<|endoftext|>"]]
    assert mapped["text_config"] == {"bos_token_id": ids["<|endoftext|>"], "hidden_size": 151655}
    assert mapped["vocab_size"] == 152064
