"""Run by ``test_multiprocess.py`` under ``accelerate launch --num_processes 2`` on CPUs (gloo), not pytest.

Builds the real GRPO trainer on every rank (LoRA, then full fine-tuning with TRL's frozen reference) in the
consistency stage and checks that the in-process reference is entered on every rank at every reward call,
also on a rank with no correct answer. DeepSpeed is not installed here, so the reference's unwrapping is
given the one property of ZeRO-3's parameter gather that matters: it is a collective (a gloo all-reduce)
that every rank must join. A rank that skipped it would leave the others waiting (the test kills them).

Usage: multiprocess_consistency.py TINY_LM DATASET OUT_DIR RESULT_JSON
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.distributed as dist
from embodied_r_training.rl.train import PolicyReference, build_trainer
from embodied_r_training.rl.train_config import build_train_config

STEPS = 2  # real GRPO steps per training mode
DIRECT_CALLS = 3  # reward calls with one rank right and the other wrong


class GatheringReference(PolicyReference):
    """A PolicyReference whose unwrapping is a collective, as under ZeRO-3."""

    @contextlib.contextmanager
    def _model(self) -> Iterator[Any]:
        dist.all_reduce(torch.ones(1))  # stands in for ZeRO-3's gather of the shards from every rank
        with super()._model() as model:
            yield model


def config(lm: str, data: str, out: Path, lora: bool) -> Any:
    settings = dict(
        use_cpu=True, bf16=False, learning_rate=1e-3, beta=0.001, num_generations=4, temperature=1.0,
        per_device_train_batch_size=4, gradient_accumulation_steps=1, max_completion_length=16,
        max_steps=STEPS, gradient_checkpointing=False, save_strategy="no", logging_steps=1,
        ddp_timeout=120,
    )  # fmt: skip
    section = {"enabled": lora, "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "q_proj,v_proj"}
    return build_train_config({
        "model": lm,
        "output_dir": str(out),
        "data": {"path": data, "limit": 4},
        "lora": section,
        "rewards": [{"start_step": 0, "format": 1, "accuracy": 1, "consistency": 1}],
        "reference": {"max_new_tokens": 8},
        "grpo": settings,
    })  # fmt: skip


def check(lm: str, data: str, out: Path, lora: bool) -> dict[str, Any]:
    trainer = build_trainer(config(lm, data, out, lora))
    reference = trainer.embodied_r_reference
    assert isinstance(reference, PolicyReference) and reference.collective
    reference.__class__ = GatheringReference
    rank = trainer.accelerator.process_index

    trainer.train()  # real steps: rewards are computed on every rank
    after_training = reference.calls

    # Rank 0 holds a correct, reasoned answer (a reference query); rank 1 only a wrong one (none).
    answer = "B" if rank == 0 else "A"
    reward = trainer.reward_funcs[0]
    for _ in range(DIRECT_CALLS):
        reward(
            completions=[f"<think>I passed the chair first.</think><answer>{answer}</answer>"],
            solution=["B"],
            question=["Which did I pass first?"],
            options=[["door", "chair"]],
            trainer_state=trainer.state,
        )
    calls = torch.tensor([after_training, reference.calls])
    gathered = trainer.accelerator.gather(calls.unsqueeze(0)).tolist()
    return {"rank": rank, "world": trainer.accelerator.num_processes, "calls": gathered}


def main() -> int:
    lm, data, out, result = sys.argv[1:5]
    results = {}
    for mode, lora in (("lora", True), ("full", False)):
        results[mode] = check(lm, data, Path(out) / mode, lora)
    if results["lora"]["rank"] == 0:
        Path(result).write_text(json.dumps(results) + "\n")
    # An orderly teardown: left to interpreter exit, gloo's threads can abort a rank ("terminate called
    # without an active exception", seen under CPU load) after all the work is done.
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Past this point only the interpreter's teardown runs, where gloo's threads still abort a rank now
    # and then under CPU load (after destroy_process_group too): every result is written, so leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
