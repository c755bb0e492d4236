"""Whether this CPU multiplies bfloat16 matrices natively; the check that stops a bf16 run where it does not.

torch runs bf16 matrix products through oneDNN on CPUs with AVX512 (fast with AVX512-BF16 or AMX; what
oneDNN reports as bf16 support). On an AVX2-only CPU they fall back to a generic loop: ``python
bench/bench_cpu_bf16.py`` measured a 512x576 by 576x1536 product 66x slower in bf16 than in float32 on an
AVX2 AMD EPYC (attention forward + backward 6x), and one SFT step of mission prompts under bf16 autocast had
not finished after 16 minutes (BENCHMARKS.md, issue 44's section, "The 120-minute rows"). A run that asks
for bf16 there is stopped before it starts, with the fix, instead of running for days.
The node is not affected: its ``dtype: auto`` is float32 on a CPU.
"""

from __future__ import annotations

from ..config import ConfigError, ModelConfig

# Set to 1 to run bf16 on such a CPU anyway (e.g. to reproduce a bf16 figure bit for bit, slowly).
ALLOW_ENV = "EMBODIED_R_ALLOW_SLOW_BF16"


class SlowBf16Error(ConfigError):
    """bf16 asked for on a CPU whose bf16 matrix products are emulated; the message names the fix."""


def native_bf16() -> bool:
    """True when torch multiplies bf16 matrices on this CPU through oneDNN (AVX512 and up), not a generic
    loop."""
    import torch

    try:  # the op exists only where torch was built with oneDNN
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def check_cpu_bf16(what: str, fix: str) -> None:
    """Raise :class:`SlowBf16Error` naming ``what`` asked for bf16 and ``fix`` (the setting that asks for
    float32) when this CPU has no native bf16 and ``EMBODIED_R_ALLOW_SLOW_BF16`` is not 1."""
    import os

    import torch

    if native_bf16() or os.environ.get(ALLOW_ENV) == "1":
        return
    raise SlowBf16Error(
        f"{what} asks for bfloat16 on this CPU ({torch.backends.cpu.get_cpu_capability()}; oneDNN has no "
        f"bf16 here), where torch's bf16 matrix products run up to ~66x slower than float32 "
        f"(bench/bench_cpu_bf16.py); {fix}, or run on a GPU or a CPU with AVX512 ({ALLOW_ENV}=1 runs it "
        "anyway)"
    )


def check_model_bf16(model: ModelConfig, fix: str) -> None:
    """:func:`check_cpu_bf16` for a model the transformers backend would load in bf16 on the CPU (its
    ``device`` resolved as the backend resolves it: ``auto`` is the GPU when there is one)."""
    options = model.transformers
    if model.backend != "transformers" or options.dtype != "bfloat16":
        return
    from .transformers_backend import resolve_device

    if resolve_device(options.device).type == "cpu":
        check_cpu_bf16(f"--dtype bfloat16 ({model.model})", fix)
