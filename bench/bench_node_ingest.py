"""Camera ingest of the embodied_r node: callback cost per 640x480 rgb8 frame at 30 Hz, and frames received by
the node vs by a plain rclpy subscriber on the same publisher, in the same run.

Three processes over DDS (an isolated domain, this host only): a publisher (like a camera driver:
sensor-data QoS, 640x480 rgb8 at 30 Hz, frames of the synthetic clip), a plain rclpy subscriber that only
counts, and this process running the full node (tiny models loaded, pre-encoding on) on a
MultiThreadedExecutor. The node's camera callback times itself (conversion, key-frame selector, storing the
candidates); the process CPU time per frame adds what rclpy and DDS spend around it (taking the message,
deserializing 921 KB, the executor). Goals: mean callback <= 1 ms; node receives >= 99 % of what the plain
subscriber receives.

With Fast DDS's defaults, 921 KB frames exceed the 512 KB shared-memory segment and travel as UDP
fragments; with best-effort QoS most are lost for both subscribers. ``--fastdds-profile
config/fastdds_large_images.xml`` (a 32 MB segment) or ``--qos reliable`` measure the node itself.

Run:  python bench/bench_node_ingest.py [--seconds 20] [--rate 30] [--qos sensor_data|reliable]
          [--fastdds-profile config/fastdds_large_images.xml] [--executor-threads N]
          [--shared-executor] [--no-pre-encode] [--json out/bench_node_ingest.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

from node_process import (
    camera_qos,
    isolate_dds,
    plain_subscriber_result,
    report,
    start_plain_subscriber,
    tiny_model_overrides,
)

WIDTH, HEIGHT = 640, 480


def publisher(seconds: float, rate: float, subscribers: int, qos: str) -> None:
    """Publish ``seconds * rate`` frames once ``subscribers`` subscriptions are matched; print the count."""
    import rclpy
    from sensor_msgs.msg import Image

    from embodied_r_ros.ros.messages import ns_to_time, rgb_image_message
    from embodied_r_ros.testing.synthetic_clip import synthetic_clip

    rclpy.init()
    node = rclpy.create_node("bench_camera")
    pub = node.create_publisher(Image, "/camera/image_raw", camera_qos(qos))
    clip = synthetic_clip(seconds=4.0, fps=rate, size=(WIDTH, HEIGHT))
    messages = [rgb_image_message(f.image, 0, "camera") for f in clip.frames]
    deadline = time.monotonic() + 60
    while pub.get_subscription_count() < subscribers and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # let both readers finish matching
    count = int(seconds * rate)
    start, stamp0 = time.monotonic(), time.time_ns()
    for i in range(count):
        target = start + i / rate
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        message = messages[i % len(messages)]
        message.header.stamp = ns_to_time(stamp0 + round(i * 1e9 / rate))
        pub.publish(message)
    print(json.dumps({"published": count, "seconds": time.monotonic() - start}), flush=True)
    time.sleep(1.0)
    node.destroy_node()
    rclpy.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=30.0)
    parser.add_argument(
        "--qos", choices=["sensor_data", "reliable"], default="sensor_data", help="camera QoS"
    )
    parser.add_argument(
        "--fastdds-profile",
        type=Path,
        default=None,
        help="Fast DDS XML for every process (config/fastdds_large_images.xml)",
    )
    parser.add_argument(
        "--executor-threads", type=int, default=0, help="the node's executor threads (0: the node's own)"
    )
    parser.add_argument(
        "--shared-executor",
        action="store_true",
        help="the camera on the node's multi-threaded executor (the design before the camera thread)",
    )
    parser.add_argument(
        "--no-pre-encode", action="store_true", help="query.pre_encode_keyframes off (encode when asked)"
    )
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--role", choices=["bench", "publisher"], default="bench", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "publisher":
        return publisher(args.seconds, args.rate, subscribers=2, qos=args.qos)

    if args.fastdds_profile:
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(args.fastdds_profile.resolve())
    isolate_dds()
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from embodied_r_ros.cli.parts import perceivers
    from embodied_r_ros.ros.node import EmbodiedRNode
    from embodied_r_ros.testing.tiny_models import ensure_tiny_models

    models = ensure_tiny_models(args.models_dir)
    rclpy.init()
    overrides = tiny_model_overrides(models) | {
        "pose.topic": "", "camera.qos": args.qos, "query.pre_encode_keyframes": not args.no_pre_encode,
    }  # fmt: skip
    node = EmbodiedRNode(
        perceivers=perceivers(),
        parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
        camera_thread=not args.shared_executor,
    )
    threads = args.executor_threads or node.executor_threads
    executor = MultiThreadedExecutor(num_threads=threads)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    me = [
        sys.executable,
        __file__,
        "--seconds",
        str(args.seconds),
        "--rate",
        str(args.rate),
        "--qos",
        args.qos,
    ]
    plain = start_plain_subscriber(args.qos)
    cpu_before, wall_before = time.process_time(), time.monotonic()
    camera = subprocess.run([*me, "--role", "publisher"], capture_output=True, text=True, check=True)
    plain = plain_subscriber_result(plain)
    cpu, wall = time.process_time() - cpu_before, time.monotonic() - wall_before
    published = json.loads(camera.stdout.strip().splitlines()[-1])["published"]
    plain_received = plain["received"]
    stats = node.stats
    node_received = stats.frames_received
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "frame": f"{WIDTH}x{HEIGHT} rgb8 at {args.rate:g} Hz for {args.seconds:g} s, QoS {args.qos}",
        "fastdds_profile": str(args.fastdds_profile or "default"),
        "executor_threads": threads,
        "camera": "the node's executor" if args.shared_executor else "its own thread",
        "pre_encode_keyframes": not args.no_pre_encode,
        "published": published,
        "received_by_plain_subscriber": plain_received,
        "received_by_node": node_received,
        "node_vs_plain_percent": round(100.0 * node_received / max(1, plain_received), 2),
        "callback_mean_ms": round(1e3 * stats.ingest_s_total / max(1, stats.ingest_count), 3),
        "callback_max_ms": round(1e3 * stats.ingest_s_max, 3),
        "frames_stored_candidates": stats.frames_stored,
        "frames_dropped": dict(stats.dropped),
        "frames_lost_seen_by_node": stats.frames_lost,
        "node_process_cpu_ms_per_frame": round(1e3 * cpu / max(1, node_received), 3),
        "node_process_cpu_share_of_one_core": round(cpu / wall, 3),
        "plain_subscriber_cpu_ms_per_frame": round(1e3 * plain["cpu_s"] / max(1, plain_received), 3),
    }
    report(results, args.json)
    executor.shutdown(timeout_sec=2.0)
    spinner.join(timeout=5.0)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
