"""Answer latency of the embodied_r node under sim time against wall time, in the same run.

The node runs as its own process (the installed ``embodied_r_node``, tiny models) in an isolated DDS domain,
twice: with ``use_sim_time`` false, then true. This process publishes a 640x480 rgb8 camera and odometry at
``--rate`` Hz and, in the sim-time run, ``/clock`` at ``--clock-rate`` Hz (the camera stamped on that clock,
which runs at real speed), then asks the same question over the last ``--window`` seconds ``--questions``
times through ``~/ask``. Reports per mode: round-trip latency, the node's perception and reasoning seconds
(from the answer), and the node's CPU seconds per wall second while idle (camera and clock running, no
question), which shows work the clock alone causes; then the sim/wall ratio of the median latency.

Run:  python bench/bench_sim_time.py [--questions 5] [--window 8] [--clock-rate 100] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time
from pathlib import Path

from node_process import (
    BenchNode,
    CameraFeed,
    isolate_dds,
    node_bench_parser,
    paced,
    report,
    start_node,
    stop_node,
    tiny_model_overrides,
)

QUESTION = ("Which way did I turn?", ["left", "right", "I did not turn"])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_mode(args: argparse.Namespace, sim_time: bool, models: Path) -> dict:
    """Start the node, feed it, ask; returns the measurements of one mode."""
    from embodied_r_ros.frames import NS_PER_S

    overrides = tiny_model_overrides(models, args.max_new_tokens) | {
        "camera.qos": "reliable", "buffer.history_s": 60.0, "query.window_s": float(args.window),
        "use_sim_time": sim_time,
    }  # fmt: skip
    node = start_node(overrides)

    width, height = (int(v) for v in args.size.split("x"))
    bench = BenchNode("bench_sim_time")
    feed = CameraFeed(bench, args.rate, (width, height), clock=True)
    client = bench.client
    client.wait_for_node(120)
    feed.wait_until_subscribed()
    stop = threading.Event()
    # Sim time runs at real speed from an epoch far from wall time, so that a wrong clock shows.
    epoch_ns = 1_000_000 * NS_PER_S if sim_time else time.time_ns()
    start = time.monotonic()

    def now_ns() -> int:
        return epoch_ns + round((time.monotonic() - start) * NS_PER_S)

    def camera() -> None:
        for i in paced(args.rate, stop, start):
            feed.publish(i, now_ns())

    def clock_ticks() -> None:
        for _ in paced(args.clock_rate, stop, start):
            feed.tick(now_ns())

    threads = [threading.Thread(target=camera, daemon=True)]
    if sim_time:
        threads.append(threading.Thread(target=clock_ticks, daemon=True))
    for thread in threads:
        thread.start()
    time.sleep(args.window + 2.0)  # a full window of frames
    idle_cpu0, idle_t0 = cpu_seconds(node.pid), time.monotonic()
    time.sleep(args.idle_seconds)
    idle_cpu = (cpu_seconds(node.pid) - idle_cpu0) / (time.monotonic() - idle_t0)
    latencies, perception, reasoning, failures = [], [], [], []
    for _ in range(args.questions):
        result = client.ask(*QUESTION, window_s=float(args.window), timeout_s=120.0)
        if result.success:
            latencies.append(result.round_trip_s)
            perception.append(result.answer.perception_seconds)
            reasoning.append(result.answer.reasoning_seconds)
        else:
            failures.append(result.message)
        time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join(timeout=5)
    node_err = stop_node(node)
    bench.close()

    def median(values: list[float]) -> float | None:
        return round(statistics.median(values), 3) if values else None

    return {
        "latency_s": [round(v, 3) for v in latencies],
        "latency_median_s": median(latencies),
        "perception_median_s": median(perception),
        "reasoning_median_s": median(reasoning),
        "idle_node_cpu_s_per_s": round(idle_cpu, 3),
        "failures": failures,
        "node_tracebacks": node_err.count("Traceback"),
    }


def main() -> None:
    parser = node_bench_parser(__doc__, size=True, rate=30.0)
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--window", type=float, default=8.0, help="seconds of history each question covers")
    parser.add_argument("--clock-rate", type=float, default=100.0, help="/clock rate under sim time, Hz")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="CPU sampled with no question")
    args = parser.parse_args()

    isolate_dds()
    import rclpy

    from embodied_r_ros.testing.tiny_models import ensure_tiny_models

    models = ensure_tiny_models(args.models_dir)
    rclpy.init()
    try:
        wall = run_mode(args, False, models)
        sim = run_mode(args, True, models)
    finally:
        rclpy.shutdown()
    ratio = None
    if wall["latency_median_s"] and sim["latency_median_s"]:
        ratio = round(sim["latency_median_s"] / wall["latency_median_s"], 2)
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "setup": f"camera {args.size} rgb8 + odometry at {args.rate:g} Hz, /clock at {args.clock_rate:g} Hz "
        f"(sim), {args.questions} questions over {args.window:g} s, tiny models ({args.max_new_tokens} new "
        "tokens)",
        "wall_time": wall,
        "sim_time": sim,
        "sim_over_wall_median_latency": ratio,
    }
    report(results, args.json)


if __name__ == "__main__":
    main()
