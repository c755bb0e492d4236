"""Benchmark of the data-set builder's bag side and its description cache.

1. Bag read + decode + key frames (``BagReader.window`` over the whole bag, then ``select_keyframes``)
   against plain ``rosbags`` read + deserialize + decode of every image of the same bag, in the same run;
   both as recorded frames per second. The builder decodes only the 1 fps candidates (the only frames the
   key-frame rule looks at), which is why it can beat decoding everything. Goal: >= 50% of plain.
2. Description-cache lookups per second (hits on a warm OS file cache).

A synthetic scene (``embodied-r synth``) is written to a temporary directory first, raw rgb8 and JPEG.

Usage: ``python bench/bench_prepare.py [--size 640x480] [--duration 30] [--entries 2000] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

from embodied_r_training.bag_reader import BagReader  # noqa: E402
from embodied_r_training.description_cache import DescriptionCache  # noqa: E402
from embodied_r_training.synth import SynthConfig, parse_size, synthesize  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

from embodied_r_ros.keyframes import select_keyframes  # noqa: E402


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


def builder_read(bag: Path) -> tuple[int, int, float, float]:
    """The builder's path over the whole bag: (candidates decoded, key frames, total s, key-frame s)."""
    start = time.perf_counter()
    with BagReader(bag) as reader:
        frames = reader.window(reader.start_ns, reader.end_ns)
        selecting = time.perf_counter()
        keyframes = select_keyframes(frames)
    end = time.perf_counter()
    return len(frames), len(keyframes), end - start, end - selecting


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
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cv2.setNumThreads(1)
    results: dict[str, object] = {"size": f"{args.size[0]}x{args.size[1]}", "duration_s": args.duration}
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
            plain_read(bag)  # warm the OS file cache for both
            frames, plain_s = plain_read(bag)
            candidates, keyframes, builder_s, keyframe_s = builder_read(bag)
            results[name] = {
                "frames": frames,
                "plain_fps": round(frames / plain_s, 1),
                "builder_fps": round(frames / builder_s, 1),
                "ratio": round(plain_s / builder_s, 2),
                "read_decode_fps": round(frames / (builder_s - keyframe_s), 1),
                "keyframe_s": round(keyframe_s, 3),
                "candidates_decoded": candidates,
                "keyframes": keyframes,
            }
            print(
                f"{name:>4}: {frames} frames; plain rosbags read+decode {frames / plain_s:8.1f} frames/s, "
                f"builder read+decode+key frames {frames / builder_s:8.1f} frames/s "
                f"({plain_s / builder_s:.2f}x; {candidates} candidates decoded, {keyframes} key frames; "
                f"without key frames {frames / (builder_s - keyframe_s):.1f} frames/s, "
                f"key frames {keyframe_s * 1000:.0f} ms)"
            )
        rate = cache_lookups(Path(tmp) / "cache", args.entries)
        results["cache_lookups_per_s"] = round(rate)
        print(f"description cache: {rate:,.0f} lookups/s ({args.entries} entries)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
