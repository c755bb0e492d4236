"""Decoding a batch with finished rows dropped (embodied_r_ros/backends/decoding.py) against ``generate``.

The transformers backend decodes text-only batches with each row leaving the batch once it has ended; this
times three ways on the same batches of held-out reasoner prompts in one process, alternating (greedy, the
evaluation's batch size, dtype and completion limit), and counts the completions that differ from
``generate``'s (bf16 numerics can flip a near tie when the batch changes shape; float32 gives generate's
tokens):

* ``generate``: transformers' own loop (every row to the end of the longest);
* ``dropping_sdpa``: rows dropped, each step with transformers' ``sdpa`` attention and its cache grown by
  concatenation (the loop as it was before its cheaper step);
* ``dropping``: rows dropped, one-token attention over the key/value heads and a cache with room (as the
  backend and GRPO's rollouts decode).

    python bench/bench_decoding.py --model out/reasoner/models/sft_all/weights \\
        --data out/reasoner/data/test_all --batches 2 --json out/bench_decoding.json

The figures go to BENCHMARKS.md with the command and the machine; timings never go into tests.
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
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def step_as_before() -> Iterator[None]:
    """The decoding loop's step as it was before its cheaper one (embodied_r_ros/backends/decoding.py):
    transformers' ``sdpa`` attention, the cache grown by concatenation, ``torch.multinomial``'s draw."""
    import torch

    from embodied_r_ros.backends import decoding

    kept = (decoding.single_token_attention, decoding.with_room, decoding.draw)
    decoding.single_token_attention = lambda model: contextlib.nullcontext()
    decoding.with_room = lambda cache, room: cache
    decoding.draw = lambda probs: torch.multinomial(probs, num_samples=1).squeeze(1)
    try:
        yield
    finally:
        decoding.single_token_attention, decoding.with_room, decoding.draw = kept


def main(argv: list[str] | None = None) -> int:
    import torch

    from embodied_r_ros.backends import transformers_backend
    from embodied_r_ros.backends.base import ChatMessage
    from embodied_r_ros.config import model_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a reasoner checkpoint directory")
    parser.add_argument("--data", type=Path, required=True, help="a prepared data set (its test split)")
    parser.add_argument("--batches", type=int, default=2, help="batches timed each way")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=400)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    rows = [json.loads(line) for line in (args.data / "test.jsonl").read_text().splitlines() if line.strip()]
    rows = rows[:: max(1, len(rows) // (args.batches * args.batch_size))][: args.batches * args.batch_size]
    requests = [[ChatMessage.text(m["role"], m["content"]) for m in row["prompt"]] for row in rows]
    config = model_config(args.model, max_new_tokens=args.max_new_tokens, dtype=args.dtype, device="cpu")
    backend = transformers_backend.TransformersBackend(config, vision=False)
    supports = transformers_backend.supports
    ways = ("generate", "dropping_sdpa", "dropping")
    times: dict[str, list[float]] = {way: [] for way in ways}
    tokens: dict[str, list[list[int]]] = {way: [] for way in ways}
    for start in range(0, len(requests), args.batch_size):
        batch = requests[start : start + args.batch_size]
        for way in ways:
            transformers_backend.supports = supports if way != "generate" else (lambda config: False)
            with step_as_before() if way == "dropping_sdpa" else contextlib.nullcontext():
                began = time.perf_counter()
                out = backend.generate_ids(batch, temperature=0.0)
                times[way].append(time.perf_counter() - began)
            tokens[way] += out.token_ids
    transformers_backend.supports = supports
    written = sum(map(len, tokens["dropping"]))
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "batches": len(times["generate"]),
        "batch_size": args.batch_size,
        "dtype": args.dtype,
        "seconds": {way: [round(t, 1) for t in ts] for way, ts in times.items()},
        "generate_over_dropping": round(sum(times["generate"]) / sum(times["dropping"]), 2),
        "dropping_sdpa_over_dropping": round(sum(times["dropping_sdpa"]) / sum(times["dropping"]), 2),
        "tokens_written": written,
        "longest_per_batch": [
            max(map(len, tokens["generate"][i : i + args.batch_size]))
            for i in range(0, len(tokens["generate"]), args.batch_size)
        ],
        "completions_alike_generate": {
            way: sum(a == b for a, b in zip(tokens["generate"], tokens[way], strict=True)) for way in ways[1:]
        },
        "completions": len(tokens["generate"]),
        "median_batch_s": {way: round(statistics.median(ts), 1) for way, ts in times.items()},
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
