"""Benchmark of the data-set builder's bag side and its description cache.

1. Bag read + decode + key frames, by the code ``embodied-r prepare`` runs per bag
   (:func:`embodied_r_training.data.prepare.bag_keyframes`: one pass over the bag, the node's streaming rule),
   against plain ``rosbags`` read + deserialize + decode of every image of the same bag, in the same run;
   both as recorded frames per second of the bag. Two workloads: "clip", one window over the whole bag;
   "questions", the windows of the scene's synthetic questions (14 questions, 4 distinct windows at the
   defaults). The builder decodes only the 1 fps candidates (the only frames the key-frame rule looks at).
   The two sides alternate ``--rounds`` times and the medians are compared (reading a 277 MB raw bag varies
   several-fold with the state of the allocator and the machine). Goal: >= 50% of plain.
2. Description-cache lookups per second (hits on a warm OS file cache).

A synthetic scene (``embodied-r synth``) is written to a temporary directory first, raw rgb8 and JPEG.

Usage: ``python bench/bench_prepare.py [--size 640x480] [--duration 30] [--rounds 5]
[--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

from embodied_r_training.data.bag_reader import BagReader  # noqa: E402
from embodied_r_training.data.description_cache import DescriptionCache  # noqa: E402
from embodied_r_training.data.prepare import _window_ns, bag_keyframes  # noqa: E402
from embodied_r_training.synth.generate import SynthConfig, parse_size, synthesize  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

from embodied_r_ros.config import KeyFrameConfig  # noqa: E402
from embodied_r_ros.question_file import read_questions  # noqa: E402


def plain_read(bag: Path) -> tuple[int, float]:
    """Every image read, deserialized and decoded to RGB with rosbags + numpy/OpenCV: (frames, seconds)."""
    store = get_typestore(Stores.ROS2_KILTED)
    start = time.perf_counter()
    count = 0
    with Reader(bag) as reader:
        images = [c for c in reader.connections if c.msgtype.startswith("sensor_msgs/msg/")]
        images = [c for c in images if c.msgtype.endswith("Image")]
        for connection, _, raw in reader.messages(connections=images):
            message = store.deserialize_cdr(raw, connection.msgtype)
            if hasattr(message, "encoding"):
                image = np.frombuffer(message.data, np.uint8).reshape(message.height, message.width, 3)
            else:
                image = cv2.imdecode(np.frombuffer(message.data, np.uint8), cv2.IMREAD_COLOR_RGB)
            count += image.shape[0] > 0
    return count, time.perf_counter() - start


Window = tuple[int, int]


def builder_read(bag: Path, windows: list[Window] | None) -> tuple[int, int, float]:
    """prepare's path for one bag: (distinct windows, key frames of the first window, seconds).

    ``windows`` in bag time (ns) as prepare computes them from the questions; None = the whole bag.
    """
    start = time.perf_counter()
    with BagReader(bag) as reader:
        spans = [(reader.start_ns, reader.end_ns)] if windows is None else windows
        found = bag_keyframes(reader, spans, KeyFrameConfig())
    elapsed = time.perf_counter() - start
    if any(not isinstance(k, list) for k in found):
        raise RuntimeError(f"the builder failed on {bag}: {found}")
    return len(set(spans)), len(found[0]), elapsed


def cache_lookups(directory: Path, entries: int) -> float:
    """Lookups per second of ``entries`` present keys."""
    cache = DescriptionCache(directory)
    keys = [f"{i:064x}" for i in range(entries)]
    for key in keys:
        cache.put(key, ["Frame description " * 8] * 8)
    start = time.perf_counter()
    for key in keys:
        assert cache.get(key) is not None
    return entries / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=(640, 480))
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5, help="alternating runs of each side (medians)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, object] = {
        "size": f"{args.size[0]}x{args.size[1]}", "duration_s": args.duration,
        "rounds": args.rounds,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for compressed in (False, True):
            name = "jpeg" if compressed else "raw"
            out = Path(tmp) / name
            config = SynthConfig(
                out=out, width=args.size[0], height=args.size[1], duration_s=args.duration,
                compressed=compressed, questions_per_task=1,
            )  # fmt: skip
            synthesize(config)
            bag = out / "scene_0000" / "bag"
            questions = [q for q in read_questions(out / "questions.jsonl") if q.bag == "scene_0000/bag"]
            with BagReader(bag) as reader:  # the windows exactly as prepare computes them
                windows = [_window_ns(q, reader) for q in questions]
            plain_read(bag)  # warm the OS file cache for both
            times: dict[str, list[float]] = {"plain": [], "clip": [], "questions": []}
            cpu: dict[str, list[float]] = {"plain": [], "clip": [], "questions": []}  # all threads
            for _ in range(args.rounds):
                start = time.process_time()
                frames, seconds = plain_read(bag)
                times["plain"].append(seconds)
                cpu["plain"].append(time.process_time() - start)
                start = time.process_time()
                _, clip_keyframes, seconds = builder_read(bag, None)
                times["clip"].append(seconds)
                cpu["clip"].append(time.process_time() - start)
                start = time.process_time()
                distinct, _, seconds = builder_read(bag, windows)
                times["questions"].append(seconds)
                cpu["questions"].append(time.process_time() - start)
            median = {side: statistics.median(values) for side, values in times.items()}
            entry: dict[str, object] = {
                "frames": frames,
                "questions": len(questions),
                "distinct_windows": distinct,
                "clip_keyframes": clip_keyframes,
                "plain_fps": round(frames / median["plain"], 1),
            }
            line = f"{name:>4}: {frames} frames; plain rosbags read+decode {frames / median['plain']:7.1f}/s"
            for side in ("clip", "questions"):
                ratio = median["plain"] / median[side]
                entry[f"{side}_fps"] = round(frames / median[side], 1)
                entry[f"{side}_ratio"] = round(ratio, 2)
                line += f"; prepare {side} {frames / median[side]:7.1f}/s ({ratio:.2f}x)"
            entry["seconds"] = {side: [round(v, 4) for v in values] for side, values in times.items()}
            entry["cpu_seconds_median"] = {side: round(statistics.median(v), 4) for side, v in cpu.items()}
            results[name] = entry
            print(line + f"  [{len(questions)} questions, {distinct} distinct windows]")
        rate = cache_lookups(Path(tmp) / "cache", args.entries)
        results["cache_lookups_per_s"] = round(rate)
        print(f"description cache: {rate:,.0f} lookups/s ({args.entries} entries)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
