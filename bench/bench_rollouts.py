"""GRPO's rollouts, sampled the way the trainer samples them, with the decoding step as it was and as it is.

``SharedPromptGRPOTrainer`` samples a step's completions with
:func:`embodied_r_training.rl.shared_prompt.generate_from_shared_prompts`: each distinct prompt prefilled
once, the group's rows decoded from its cache with finished rows dropped, under the trainer's bf16 autocast
over float32 weights. This times that call on the same prompts (``--questions`` training questions x
``--group`` rows, sampling at temperature 1, one seed per repeat) in one process, alternating two ways:

* ``before``: each decoding step with transformers' ``sdpa`` attention, its cache grown by concatenation,
  and ``torch.multinomial``'s draw (an exponential variate per vocabulary entry);
* ``after``: one-token attention over the key/value heads, a cache with room, one uniform draw a row
  (``embodied_r_ros/backends/decoding.py``).

    python bench/bench_rollouts.py --model out/reasoner/models/sft_all/weights \\
        --data out/reasoner/data/train_all --max-new-tokens 120 --repeats 3 --json out/bench_rollouts.json

Every row writes ``--max-new-tokens`` tokens (no end token), so both ways do the same work whatever they
sample. The figures go to BENCHMARKS.md with the command and the machine; timings never go into tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decoding import step_as_before  # noqa: E402  (the decoding step as it was, beside it)


def main(argv: list[str] | None = None) -> int:
    import torch
    from embodied_r_training.rl.shared_prompt import generate_from_shared_prompts
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the policy (e.g. the experiment's SFT model)")
    parser.add_argument("--data", type=Path, required=True, help="a prepared data set (its train split)")
    parser.add_argument("--questions", type=int, default=4, help="distinct prompts a step (the config's 4)")
    parser.add_argument("--group", type=int, default=8, help="completions per prompt (num_generations)")
    parser.add_argument("--max-new-tokens", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls each way")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    lines = (args.data / "train.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[: args.questions]]
    prompts = [
        list(
            tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, return_dict=True)[
                "input_ids"
            ]
        )
        for r in rows
    ]
    batch = [p for p in prompts for _ in range(args.group)]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, do_sample=True, temperature=1.0,
                              eos_token_id=None, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    times: dict[str, list[float]] = {"before": [], "after": []}
    for repeat in range(args.repeats + 1):  # the first round warms up, untimed
        for way in ("before", "after"):
            torch.manual_seed(repeat)
            with step_as_before() if way == "before" else contextlib.nullcontext():
                began = time.perf_counter()
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = generate_from_shared_prompts(model, batch, tokenizer.pad_token_id, config, "cpu")
                if repeat:
                    times[way].append(time.perf_counter() - began)
            assert len(out) == len(batch) and all(len(o) == args.max_new_tokens for o in out)
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} at the end",
        "rows": len(batch),
        "prompt_tokens": [len(p) for p in prompts],
        "new_tokens": args.max_new_tokens,
        "seconds": {way: [round(t, 1) for t in ts] for way, ts in times.items()},
        "median_s": {way: round(statistics.median(ts), 1) for way, ts in times.items()},
        "before_over_after": round(statistics.median(times["before"]) / statistics.median(times["after"]), 2),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
