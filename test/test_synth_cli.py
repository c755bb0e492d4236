"""``embodied-r synth`` as a user runs it, and its errors for bad arguments."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import cv2
import pytest

from embodied_r_ros.cli.main import build_parser, main


def test_synth_command_writes_bags_questions_and_a_preview(tmp_path: Path) -> None:
    command = shutil.which("embodied-r")
    assert command, "embodied-r is not on PATH: build with `make build` and source install/setup.bash"
    out = tmp_path / "data"
    args = ["synth", "--out", str(out), "--scenes", "2", "--seed", "7", "--size", "96x72", "--rate", "4",
            "--duration", "3", "--preview", "--compressed", "--storage", "sqlite3"]  # fmt: skip
    result = subprocess.run([command, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "2 scene(s)" in result.stdout and "questions" in result.stdout
    for scene in ("scene_0000", "scene_0001"):
        assert (out / scene / "bag" / "bag.db3").is_file() and (
            out / scene / "bag" / "metadata.yaml"
        ).is_file()
        description = json.loads((out / scene / "scene.json").read_text())
        assert description["frames"] == 12 and description["image_topic"] == "/camera/image_raw/compressed"
        preview = cv2.imread(str(out / scene / "preview.png"))
        assert preview is not None and preview.shape[1] > preview.shape[0] > 300
    lines = (out / "questions.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["bag"].startswith("scene_000") for line in lines)


def test_help_lists_synth() -> None:
    assert "synth" in build_parser().format_help()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scenes", "0"], "--scenes must be in 1..100000"),
        (["--size", "16x16"], "--size must be between 32x32"),
        (["--duration", "0.1"], "at least 2"),
        (["--rate", "0"], "--rate must be in (0, 120]"),
        (["--jpeg-quality", "0"], "--jpeg-quality must be in 1..100"),
        (["--seed", "-1"], "--seed must be a non-negative integer"),
        (["--hfov", "179"], "--hfov must be in [20, 150]"),
    ],
)
def test_bad_values_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str],
                                       message: str) -> None:  # fmt: skip
    assert main(["synth", "--out", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embodied-r synth: error:") and message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()  # nothing written before the check


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "big"], "expected WIDTHxHEIGHT"),
        (["--storage", "rosbag1"], "invalid choice"),
        ([], "required: --out"),
    ],
)
def test_unparsable_arguments_are_refused_by_argparse(capsys: pytest.CaptureFixture, args: list[str],
                                                      message: str) -> None:  # fmt: skip
    full = ["synth", *args] if not args else ["synth", "--out", "x", *args]
    with pytest.raises(SystemExit) as exit_info:
        main(full)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_existing_scene_directories_are_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "scene_0001").mkdir()
    assert main(["synth", "--out", str(tmp_path), "--scenes", "2", "--size", "64x48", "--duration", "1"]) == 2
    err = capsys.readouterr().err
    assert "scene_0001 exists already" in err and "choose another --out" in err
    assert not (tmp_path / "scene_0000").exists()
