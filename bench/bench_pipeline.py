"""Pipeline benchmarks with the tiny models (CPU), each a ratio or a share measured in one run.

1. Batched vs sequential description of N key frames: one VLM generate call for all of them (what the
   pipeline does) vs one call per key frame, both starting with an empty image cache.
   Goal: batched >= 3x faster.
2. Query overhead outside the model's forward passes for 32 key frames: the wall time of one query
   minus the time spent inside ``model.generate`` (both models). Cold: the key frames were never seen
   (each is preprocessed and encoded by the vision tower once, outside generate); warm: they were
   encoded before (as when the node encodes key frames on arrival, or a second question over the same
   window). Goal: <= 20 ms.

Run:  python bench/bench_pipeline.py [--models-dir DIR] [--keyframes 8] [--repeats 3] [--json out.json]
(`make bench` runs it inside the built workspace.)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from embodied_r_ros.backends import load_backend
from embodied_r_ros.config import model_config
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.perception import Perceiver
from embodied_r_ros.pipeline import EmbodiedR
from embodied_r_ros.reasoning.messages import Reasoner
from embodied_r_ros.testing.synthetic_clip import synthetic_clip
from embodied_r_ros.testing.tiny_models import ensure_tiny_models

QUESTION = "Which object did I pass first?"
OPTIONS = ("the red chair", "the lamp", "the door", "the sofa")


class GenerateTimer:
    """Wraps ``model.generate`` of a transformers backend and sums the seconds spent inside it."""

    def __init__(self, backend) -> None:
        self.seconds = 0.0
        self._generate = backend.model.generate

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return self._generate(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        backend.model.generate = timed


def keyframes_from_clip(count: int, size: tuple[int, int]) -> list[KeyFrame]:
    """``count`` frames of the synthetic clip, one per second, used as key frames."""
    clip = synthetic_clip(seconds=float(count), fps=1.0, size=size)
    return [KeyFrame(frame=frame, index=i) for i, frame in enumerate(clip.frames[:count])]


def best_of(repeats: int, function) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument(
        "--keyframes", type=int, default=8, help="key frames for the batched-vs-sequential test"
    )
    parser.add_argument("--max-new-tokens", type=int, default=64, help="per description and answer")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 = steadier timings)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    models = ensure_tiny_models(args.models_dir)
    common = dict(device="cpu", dtype="float32", max_new_tokens=args.max_new_tokens)
    vlm = load_backend(model_config(str(models / "vlm"), **common), vision=True)
    lm = load_backend(model_config(str(models / "lm"), **common), vision=False)
    perceiver = Perceiver(vlm)

    # 1. batched vs sequential description
    keyframes = keyframes_from_clip(args.keyframes, (320, 240))
    perceiver.describe(keyframes, QUESTION, OPTIONS)  # warm-up
    requests = perceiver.requests(keyframes, QUESTION, OPTIONS)

    def batched_cold() -> None:
        vlm.image_cache.clear()
        vlm.generate(requests)

    def sequential_cold() -> None:
        vlm.image_cache.clear()
        for request in requests:
            vlm.generate([request])

    batched = best_of(args.repeats, batched_cold)
    sequential = best_of(args.repeats, sequential_cold)

    # 2. query overhead outside the forward passes, 32 key frames
    keyframes32 = keyframes_from_clip(32, (320, 240))
    pipeline = EmbodiedR(perceiver, Reasoner(lm))
    vlm_timer, lm_timer = GenerateTimer(vlm), GenerateTimer(lm)
    pipeline.answer(QUESTION, OPTIONS, keyframes=keyframes32)  # warm-up

    def overhead(cold: bool) -> float:
        if cold:
            vlm.image_cache.clear()
        vlm_timer.seconds = lm_timer.seconds = 0.0
        start = time.perf_counter()
        pipeline.answer(QUESTION, OPTIONS, keyframes=keyframes32)
        return time.perf_counter() - start - vlm_timer.seconds - lm_timer.seconds

    cold = [overhead(cold=True) for _ in range(args.repeats)]
    warm = [overhead(cold=False) for _ in range(args.repeats)]
    # Preprocessing alone (the image processor) on the 32 distinct key frames, for the breakdown.
    images = [k.frame.image for k in keyframes32]
    image_processing = best_of(args.repeats, lambda: vlm.process_images(images))

    results = {
        "machine": f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s)",
        "keyframes": args.keyframes,
        "batched_s": batched,
        "sequential_s": sequential,
        "batched_speedup": sequential / batched,
        "max_new_tokens": args.max_new_tokens,
        "overhead_32_keyframes_cold_ms": 1000 * statistics.median(cold),
        "overhead_32_keyframes_warm_ms": 1000 * statistics.median(warm),
        "image_processing_32_keyframes_ms": 1000 * image_processing,
    }
    print(
        f"describe {args.keyframes} key frames: batched {batched:.3f} s, sequential {sequential:.3f} s, "
        f"speed-up {results['batched_speedup']:.1f}x (goal >= 3x)"
    )
    print(
        f"query overhead outside generate, 32 key frames: "
        f"warm {results['overhead_32_keyframes_warm_ms']:.1f} ms"
        f" (goal <= 20 ms), cold {results['overhead_32_keyframes_cold_ms']:.1f} ms, of which the image "
        f"processor {results['image_processing_32_keyframes_ms']:.1f} ms"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
