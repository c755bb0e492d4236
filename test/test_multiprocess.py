"""Two-process GRPO (``accelerate launch --num_processes 2`` on CPUs, gloo): the consistency stage joins
every collective on every rank, also where a rank has no correct answer to check (issue 11.2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS, DIRECT_CALLS = 2, 3  # as in multiprocess_consistency.py
TIMEOUT_S = 240


def test_two_ranks_join_every_reference_call_when_one_has_nothing_to_check(
    tiny_models_dir: Path, tiny_dataset: Path, tmp_path: Path
) -> None:
    result = tmp_path / "result.json"
    command = [
        # accelerate's --cpu launches one process; --multi_gpu on a machine without GPUs starts
        # MULTI_CPU workers over gloo (the trainer itself runs with use_cpu either way).
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", "0",
        str(HERE / "multiprocess_consistency.py"),
        str(tiny_models_dir / "lm"), str(tiny_dataset), str(tmp_path / "runs"), str(result),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    # Bounded: ~30 s idle; a rank left waiting in a collective hangs, and the whole group is killed.
    launch = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        stdout, stderr = launch.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(launch.pid, signal.SIGKILL)
        stdout, stderr = launch.communicate()
        hung = f"2-process GRPO did not finish in {TIMEOUT_S} s (a rank hung):\n{stderr[-4000:]}"
        raise AssertionError(hung) from None
    assert launch.returncode == 0, stdout[-3000:] + stderr[-6000:]
    results = json.loads(result.read_text())
    for mode in ("lora", "full"):
        calls = results[mode]["calls"]  # per rank: [after training, after the direct calls]
        assert results[mode]["world"] == 2
        assert calls[0] == calls[1], f"{mode}: the ranks entered the reference unequally: {calls}"
        assert calls[0][0] >= STEPS  # at least one reference call per training step on each rank
        assert calls[0][1] - calls[0][0] == DIRECT_CALLS  # the rank with nothing to check joined too
