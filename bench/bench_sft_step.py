"""What an SFT step of the reasoner costs on the CPU, with TRL's defaults and with the project's (issue 42).

The reasoner's SFT (``training/configs/reasoner_cpu.yaml``: every weight of SmolLM2-135M, batch 8 of
scene prompts ~550 tokens with oracle traces, bf16 autocast) runs TRL's ``SFTTrainer``. Two things cost
there on a CPU that the loss does not need:

* TRL 1.16's fused LM head projects every position, prompt included, through the 49152-word head (and its
  entropy) where Triton does not run, then zeroes the prompt's: ``rl/warm_start.py``'s
  ``lm_head_on_labelled_positions`` makes it project the labelled positions alone (the same loss and
  gradients: ``test_train.py``);
* the foreach AdamW over 135M parameters; ``adamw_torch_fused`` is one kernel.

Both variants run in ONE process, in turn, over the same batches (the same seed and sampler), from the same
weights; each step's wall time is taken between the trainer's step callbacks. Run it alone on the machine:

    python bench/bench_sft_step.py --data out/reasoner/data/train_all --steps 4 --json out/bench_sft_step.json

``--float32`` runs the steps in float32 instead of bf16 autocast (``reasoner.py --float32``: a CPU without
native bf16, backends/cpu_bf16.py); ``--variants ours`` times the project's variant alone.

The figures go to BENCHMARKS.md with the machine and the command; timings never go into tests.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {"trl": (False, "adamw_torch"), "ours": (True, "adamw_torch_fused")}  # (labelled only, optim)


def step_times(model_dir: Path, data: Path, steps: int, labelled_only: bool, optim: str, bf16: bool = True
               ) -> list[float]:  # fmt: skip
    """Wall seconds of each of ``steps`` SFT steps of ``model_dir`` on ``data``'s traces (``bf16``: under bf16
    autocast, else float32)."""
    import torch
    from embodied_r_training.data.schema import read_split
    from embodied_r_training.rl.warm_start import lm_head_on_labelled_positions, warm_start_rows
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            times.append(time.perf_counter() - self.started)

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    rows = warm_start_rows(read_split(data, "train", ("prompt", "solution"), "SFT"), "trace", seed=0)
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(  # the reasoner's warm start (rl/warm_start.py), no checkpoints
            output_dir=out, max_steps=steps, learning_rate=5e-5, per_device_train_batch_size=8,
            lr_scheduler_type="cosine", warmup_steps=0.03, logging_steps=steps, save_strategy="no",
            report_to="none", seed=0, use_cpu=True, bf16=bf16, max_length=None,
            train_sampling_strategy="group_by_length", gradient_checkpointing=False, optim=optim,
        )  # fmt: skip
        trainer = SFTTrainer(model=model, args=args, train_dataset=rows, processing_class=tokenizer,
                             callbacks=[Clock()])  # fmt: skip
        if labelled_only:
            with lm_head_on_labelled_positions():
                trainer.train()
        else:
            trainer.train()
    return times


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--model", type=Path, default=REPO / ".cache" / "models" / "smollm2")
    parser.add_argument("--data", type=Path, default=REPO / "out" / "reasoner" / "data" / "train_all")
    parser.add_argument("--steps", type=int, default=4, help="steps per variant (the first is left out)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--float32", action="store_true", help="float32 steps, not bf16 autocast")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    import torch

    found: dict[str, Any] = {}
    for name in args.variants:
        labelled_only, optim = VARIANTS[name]
        times = step_times(args.model, args.data, args.steps, labelled_only, optim, bf16=not args.float32)
        kept = times[1:] or times  # the first step warms the allocator and oneDNN's kernels up
        found[name] = {"step_s": [round(t, 2) for t in times], "median_s": round(statistics.median(kept), 2)}
        print(f"{name}: steps {found[name]['step_s']} s, median after the first {found[name]['median_s']} s",
              flush=True)  # fmt: skip
    ratio = found["trl"]["median_s"] / found["ours"]["median_s"] if len(found) == 2 else None
    if ratio is not None:
        print(f"ours vs TRL's defaults: {ratio:.2f}x less time a step")
    if args.json:
        machine = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                   "threads": torch.get_num_threads(), "torch": torch.__version__}  # fmt: skip
        record = {"variants": found, "ratio": None if ratio is None else round(ratio, 2), "machine": machine,
                  "steps": args.steps, "dtype": "float32" if args.float32 else "bf16 autocast"}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
