"""bfloat16 against float32 on this CPU, at SmolLM2-135M's shapes: is bf16 worth asking for here?

Times, each the median of ``--repeats`` after one warm-up, in one process: a linear layer's product (512
tokens x 576 -> 1536, the MLP's up projection), and causal attention forward + backward (9 heads of 64 over
``--tokens`` positions, torch's scaled_dot_product_attention, as the SFT runs it). Prints each time, the
bf16 / float32 ratio, torch's CPU capability and whether oneDNN multiplies bf16 natively
(``embodied_r_ros.backends.cpu_bf16.native_bf16``: what ``embodied-r train`` and ``eval`` check before a
bf16 run on the CPU).

Run:  python bench/bench_cpu_bf16.py [--threads 2] [--repeats 5] [--tokens 1024]
          [--json out/bench_cpu_bf16.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the core, from a checkout

from embodied_r_ros.backends.cpu_bf16 import native_bf16  # noqa: E402


def median_s(run, repeats: int) -> float:
    """The median wall time of ``run()`` over ``repeats`` calls, after one warm-up call."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(dtype: torch.dtype, tokens: int, repeats: int) -> dict[str, float]:
    """The product's and the attention's median seconds in ``dtype``."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(512, 576, generator=generator).to(dtype)
    w = torch.randn(576, 1536, generator=generator).to(dtype)
    q = torch.randn(1, 9, tokens, 64, generator=generator).to(dtype)

    def attention() -> None:
        leaf = q.detach().requires_grad_(True)
        torch.nn.functional.scaled_dot_product_attention(leaf, leaf, leaf, is_causal=True).sum().backward()

    return {"matmul_s": median_s(lambda: x @ w, repeats), "attention_fwd_bwd_s": median_s(attention, repeats)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=1024, help="attention positions (1024)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    figures = {str(d).removeprefix("torch."): measure(d, args.tokens, args.repeats)
               for d in (torch.float32, torch.bfloat16)}  # fmt: skip
    ratios = {k: round(figures["bfloat16"][k] / figures["float32"][k], 2) for k in figures["float32"]}
    results = {
        "machine": {"cpu": platform.processor() or platform.machine(), "capability":
                    torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
                    "torch": torch.__version__},  # fmt: skip
        "native_bf16": native_bf16(),
        "seconds": figures,
        "bf16_over_float32": ratios,
    }
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
