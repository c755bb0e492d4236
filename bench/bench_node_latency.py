"""Latency of one question to the embodied_r node with the tiny models, broken down by stage.

The node runs in this process on a MultiThreadedExecutor over DDS (an isolated domain); a client node
publishes a 640x480 camera clip with odometry (10 Hz) and asks through the ~/ask service. Stages, from the
node's own timing of the question (``NodeStats.last_timing``) and the client's clock:

- queued: waiting for the worker; keyframes: assembling the window's key frames (fetching and decoding the
  stored candidates, the newest frame, poses); perception (VLM) and reasoning (LM); publish: ~/keyframes
  and ~/answer; service: the rest of the round trip (request and response over DDS, executor).

Three cases, each on a clip the node has not seen before (a different panorama): "cold" (key frames never
encoded: pre-encoding off, image cache cleared), "pre-encoded" (the node encoded its key frames while idle,
as it does by default), and "repeat" (the same question again over the same window).

Run:  python bench/bench_node_latency.py [--seconds 20] [--max-new-tokens 32] [--repeats 3] [--json PATH]
"""

from __future__ import annotations

import os
import platform
import statistics
import threading
import time

from node_process import isolate_dds, node_bench_parser, report, tiny_model_overrides

QUESTION = "Which object did I pass first?"
OPTIONS = ["the red chair", "the lamp", "the door", "the sofa"]


def main() -> None:
    parser = node_bench_parser(__doc__)
    parser.add_argument("--seconds", type=float, default=20.0, help="clip length (the question's window)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    isolate_dds()
    import rclpy
    import torch
    from embodied_r_ros.srv import AskSpatial
    from nav_msgs.msg import Odometry
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image

    from embodied_r_ros.cli.parts import perceivers
    from embodied_r_ros.frames import NS_PER_S
    from embodied_r_ros.ros.messages import odometry_message, rgb_image_message
    from embodied_r_ros.ros.node import EmbodiedRNode
    from embodied_r_ros.testing.synthetic_clip import synthetic_clip
    from embodied_r_ros.testing.tiny_models import ensure_tiny_models

    models = ensure_tiny_models(args.models_dir)
    rclpy.init()
    overrides = tiny_model_overrides(models, args.max_new_tokens) | {
        "camera.qos": "reliable", "camera.qos_depth": 100, "query.window_s": args.seconds,
    }  # fmt: skip
    parameters = [Parameter(k, value=v) for k, v in overrides.items()]
    node = EmbodiedRNode(perceivers=perceivers(), parameter_overrides=parameters)
    client = rclpy.create_node("bench_latency_client")
    images = client.create_publisher(Image, "/camera/image_raw", QoSProfile(depth=100))
    odometry = client.create_publisher(Odometry, "/odom", QoSProfile(depth=100))
    ask = client.create_client(AskSpatial, "/embodied_r/ask")
    executor = MultiThreadedExecutor(num_threads=node.executor_threads + 2)
    executor.add_node(node)
    executor.add_node(client)
    threading.Thread(target=executor.spin, daemon=True).start()
    assert ask.wait_for_service(timeout_sec=30)
    while not (images.get_subscription_count() and odometry.get_subscription_count()):
        time.sleep(0.05)
    cache = node.pipeline.perceiver.backend.image_cache
    next_ns = [1_700_000_000 * NS_PER_S]

    def feed(seed: int) -> None:
        clip = synthetic_clip(seconds=args.seconds, fps=10.0, size=(640, 480), seed=seed, start_ns=next_ns[0])
        received = node.stats.frames_received
        for frame in clip.frames:
            odometry.publish(odometry_message(frame.stamp_ns, frame.pose))
            images.publish(rgb_image_message(frame.image, frame.stamp_ns, "camera"))
            time.sleep(0.01)
        while node.stats.frames_received < received + len(clip.frames):
            time.sleep(0.02)
        next_ns[0] = clip.frames[-1].stamp_ns + 10 * NS_PER_S

    def settle() -> None:
        """Wait until the idle pre-encoding has stopped adding to the image cache."""
        size, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < 1.0:
            if len(cache) != size:
                size, quiet_since = len(cache), time.monotonic()
            time.sleep(0.05)

    def question() -> dict[str, float]:
        start = time.monotonic()
        done = threading.Event()
        future = ask.call_async(AskSpatial.Request(question=QUESTION, options=OPTIONS))
        future.add_done_callback(lambda _: done.set())
        assert done.wait(300), "no answer"
        round_trip = time.monotonic() - start
        response = future.result()
        assert response.success, response.message
        timing = node.stats.last_timing
        return {
            "keyframes": timing.keyframes,
            "queued_ms": 1e3 * timing.queued_s,
            "keyframes_ms": 1e3 * timing.keyframes_s,
            "perception_ms": 1e3 * timing.perception_s,
            "reasoning_ms": 1e3 * timing.reasoning_s,
            "publish_ms": 1e3 * timing.publish_s,
            "service_ms": 1e3 * (round_trip - timing.total_s),
            "round_trip_ms": 1e3 * round_trip,
        }

    cases: dict[str, list[dict[str, float]]] = {"cold": [], "pre-encoded": [], "repeat": []}
    seed = 0
    for _ in range(args.repeats):
        node.set_parameters([Parameter("query.pre_encode_keyframes", value=False)])
        cache.clear()
        seed += 1
        feed(seed)
        cases["cold"].append(question())
        node.set_parameters([Parameter("query.pre_encode_keyframes", value=True)])
        seed += 1
        feed(seed)
        settle()
        cases["pre-encoded"].append(question())
        cases["repeat"].append(question())

    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s)",
        "setup": f"{args.seconds:g} s clip at 10 Hz, 640x480, odometry; tiny models, "
        f"{args.max_new_tokens} new tokens per call; median of {args.repeats}",
        "cases": {
            name: {key: round(statistics.median(run[key] for run in runs), 2) for key in runs[0]}
            for name, runs in cases.items()
        },
    }
    report(results, args.json)
    executor.shutdown(timeout_sec=2.0)
    node.destroy_node()
    client.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
