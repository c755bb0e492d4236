"""Where a running process spends its time, from py-spy's sampled stacks: the share of samples under each
named function, and inside each of them the share under the functions below it that matter.

Sampling a live run costs it almost nothing (py-spy reads the process from outside; ``--nonblocking``
does not pause it), so a long training run can be profiled as it runs, on the machine and the data it
runs on, instead of in a separate benchmark that competes with it for the cores:

    pip install py-spy
    py-spy record --pid PID --rate 10 --duration 420 --nonblocking --format raw --output out/grpo_stacks.txt
    python bench/stack_shares.py out/grpo_stacks.txt

The defaults name the parts of a GRPO step (rollouts, the loss pass, the backward pass) and what a
decoding step is made of; ``--part`` and ``--inside`` name others.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

PARTS = (  # a GRPO step (training/embodied_r_training/rl/shared_prompt.py)
    "GRPOTrainer.training_step",
    "generate_from_shared_prompts",  # rollouts: the prefill of each prompt, then decoding
    "sample_dropping_finished",  # decoding (embodied_r_ros/backends/decoding.py)
    "shared_prompt_logps",  # the loss pass's forward
    "Tensor.backward",
    "StagedReward.__call__",
    "Trainer._save_checkpoint",
)
INSIDE = (  # what a transformer's forward is made of
    "Linear.forward",
    "LlamaMLP.forward",
    "sdpa_attention_forward",
    "DynamicLayer.update",  # the key/value cache growing by concatenation, one token a step
    "Cache.batch_select_indices",  # dropping finished rows from the cache
    "apply_rotary_pos_emb",
    "LlamaRMSNorm.forward",
)


def read_stacks(path: Path) -> list[tuple[list[str], int]]:
    """py-spy's raw output: one ``frame;frame;... count`` line per distinct stack; frames by function name."""
    stacks = []
    for line in path.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append(([frame.split(" (")[0] for frame in stack.split(";")], int(count)))
    return stacks


def shares(stacks: list[tuple[list[str], int]], parts: tuple[str, ...], inside: tuple[str, ...]) -> dict:
    """Per part: its share of all samples, and per ``inside`` function its share of the part's samples."""
    total = sum(count for _, count in stacks)
    found: dict[str, dict] = {}
    for part in parts:
        samples, under = 0, collections.Counter()
        for frames, count in stacks:
            if part not in frames:
                continue
            samples += count
            below = set(frames[frames.index(part) :])
            under.update({name: count for name in inside if name in below})
        found[part] = {
            "share": samples / total if total else 0.0,
            "inside": {name: n / samples for name, n in under.most_common()} if samples else {},
        }
    return {"samples": total, "parts": found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stacks", type=Path, help="py-spy record --format raw output")
    parser.add_argument("--part", action="append", help="a function whose share to report (repeatable)")
    parser.add_argument("--inside", action="append", help="a function to split each part by (repeatable)")
    args = parser.parse_args()
    result = shares(read_stacks(args.stacks), tuple(args.part or PARTS), tuple(args.inside or INSIDE))
    print(f"{result['samples']} samples")
    for part, values in result["parts"].items():
        inside = ", ".join(f"{name} {share:.0%}" for name, share in values["inside"].items())
        print(f"{values['share']:6.1%}  {part}" + (f"  [{inside}]" if inside else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
