"""Soak test of the embodied_r node: camera at 30 Hz with odometry and a question every 10 s, for minutes.

The node runs as its own process (the installed ``embodied_r_node`` executable, tiny models, the shipped
parameters file plus overrides) in an isolated DDS domain; this process publishes 640x480 rgb8 frames and
odometry at the camera rate, asks through ``~/ask`` (alternating a multiple-choice and an open question),
samples the node's resident memory (/proc/PID/status) every 5 s and reads its /diagnostics. Reports: node
memory after warm-up (flat = max/min within 5 %), questions asked / answered / failed (goal: none failed),
latency percentiles, frames published / received / dropped by the node, and received by a plain rclpy
subscriber (its own process, the same QoS: what the middleware delivers on this machine in the same run),
the camera callback's longest run and the longest garbage-collector pause in the node.

The node keeps ``--history-s`` of history (default 60 s, so that its buffers reach their steady size
during the warm-up; the default node keeps 600 s and reaches it after 10 minutes).

Run:  python bench/bench_node_soak.py [--minutes 10] [--rate 30] [--question-period 10] [--json PATH]
          [--node-log PATH] [--trace-stalls MS]

``--trace-stalls MS`` writes every thread's Python stack (beside the node's log, ``*.stalls.txt``) whenever
one camera callback runs longer than MS: what held it (bench/stall_trace/sitecustomize.py).
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

from node_process import (
    BenchNode,
    CameraFeed,
    isolate_dds,
    node_bench_parser,
    paced,
    percentile,
    plain_subscriber_result,
    report,
    rss_mb,
    start_node,
    start_plain_subscriber,
    stop_node,
    tiny_model_overrides,
)

OPEN_QUESTION = ("How far did I walk, in metres?", [])
CHOICE_QUESTION = ("Which way did I turn?", ["left", "right", "I did not turn"])


def trace_stalls(path: Path, threshold_ms: float) -> None:
    """Have the node's process (started after this) dump every thread's stack into ``path`` when a camera
    callback runs longer than ``threshold_ms`` (bench/stall_trace/sitecustomize.py)."""
    here = Path(__file__).resolve().parent / "stall_trace"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH")]))
    os.environ["EMBODIED_R_STALL_TRACE"] = str(path)
    os.environ["EMBODIED_R_STALL_MS"] = str(threshold_ms)
    print(f"stall trace: {path}", flush=True)


def main() -> None:
    parser = node_bench_parser(__doc__, size=True, rate=30.0)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--question-period", type=float, default=10.0, help="seconds between questions")
    parser.add_argument("--history-s", type=float, default=60.0, help="the node's buffer.history_s")
    parser.add_argument("--warmup-minutes", type=float, default=2.0, help="(at most 40 %% of the run)")
    parser.add_argument("--no-memory", action="store_true", help="memory.enabled false (no durable store)")
    parser.add_argument("--node-log", type=Path, default=None, help="the node's log (default: a temp file)")
    parser.add_argument(
        "--trace-stalls",
        type=float,
        default=None,
        metavar="MS",
        help="write every thread's stack when a camera callback runs longer than MS (bench/stall_trace/)",
    )
    args = parser.parse_args()

    isolate_dds()
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    from embodied_r_ros.frames import NS_PER_S
    from embodied_r_ros.testing.tiny_models import ensure_tiny_models

    models = ensure_tiny_models(args.models_dir)
    scratch = Path(tempfile.mkdtemp(prefix="bench_soak_"))
    store = scratch / "memory.sqlite"  # not the user's ~/.ros store
    node_log = args.node_log or scratch / "node.log"  # a file: a pipe nobody reads would stall the node
    width, height = (int(v) for v in args.size.split("x"))
    overrides = tiny_model_overrides(models, args.max_new_tokens) | {
        "camera.qos": "reliable", "buffer.history_s": float(args.history_s), "query.window_s": 30.0,
        "memory.enabled": not args.no_memory,
        "memory.path": str(store),
    }  # fmt: skip
    if args.trace_stalls is not None:
        trace_stalls(node_log.with_suffix(".stalls.txt"), args.trace_stalls)
    node = start_node(overrides, node_log)
    print(f"node log: {node_log}", flush=True)
    plain = start_plain_subscriber("reliable")

    rclpy.init()
    bench = BenchNode("bench_soak")
    feed = CameraFeed(bench, args.rate, (width, height))
    diagnostics: dict[str, str] = {}

    def on_diagnostics(array) -> None:
        for status in array.status:
            if status.name.startswith("/embodied_r"):
                diagnostics.update({kv.key: kv.value for kv in status.values})

    bench.node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    client = bench.client
    client.wait_for_node(120)
    feed.wait_until_subscribed()
    stop = threading.Event()
    published = [0]

    def camera() -> None:
        stamp0 = time.time_ns()
        for i in paced(args.rate, stop):
            feed.publish(i, stamp0 + round(i * NS_PER_S / args.rate))
            published[0] += 1

    camera_thread = threading.Thread(target=camera, daemon=True)
    camera_thread.start()
    run_s = args.minutes * 60
    warmup_s = min(args.warmup_minutes * 60, 0.4 * run_s)
    start = time.monotonic()
    samples: list[tuple[float, float]] = []
    received_series: list[tuple[int, int, int]] = []  # (s, published, received by the node)
    latencies: list[float] = []
    failures: list[str] = []
    asked = 0
    next_question = start + args.question_period
    next_sample = start
    while time.monotonic() - start < run_s:
        now = time.monotonic()
        if now >= next_sample:
            samples.append((now - start, rss_mb(node.pid)))
            received = int(diagnostics.get("frames_received", 0))
            received_series.append((round(now - start), published[0], received))
            next_sample += 5.0
        if now >= next_question:
            question, options = (CHOICE_QUESTION, OPEN_QUESTION)[asked % 2]
            asked += 1
            result = client.ask(question, options, timeout_s=60.0)
            if result.success:
                latencies.append(result.round_trip_s)
            else:
                failures.append(result.message)
            next_question += args.question_period
        time.sleep(0.05)
    elapsed = time.monotonic() - start
    stop.set()
    camera_thread.join(timeout=5)
    time.sleep(1.5)  # a last /diagnostics
    final = dict(diagnostics)
    stop_node(node)
    node_err = node_log.read_text(errors="replace")
    plain_received = plain_subscriber_result(plain)["received"]  # it stops 3 s after the last frame
    bench.close()
    rclpy.shutdown()

    steady = [mb for t, mb in samples if t >= warmup_s]
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "setup": f"{args.minutes:g} min, camera {width}x{height} rgb8 + odometry at {args.rate:g} Hz, a "
        f"question every {args.question_period:g} s, tiny models ({args.max_new_tokens} new tokens), "
        f"buffer.history_s {args.history_s:g}, warm-up {warmup_s / 60:.1f} min",
        "frames_published": published[0],
        "camera_rate_achieved_hz": round(published[0] / elapsed, 2),
        "frames_received_by_node": int(final.get("frames_received", 0)),
        "frames_received_by_plain_subscriber": plain_received,
        "node_over_published_percent": round(100 * int(final.get("frames_received", 0)) / published[0], 2),
        "plain_over_published_percent": round(100 * plain_received / published[0], 2),
        "frames_lost_in_transport_per_node": int(final.get("frames_lost", 0)),
        "node_camera_callback_max_ms": float(final.get("camera_callback_max_ms", "nan")),
        "node_camera_callback_cpu_max_ms": float(final.get("camera_callback_cpu_max_ms", "nan")),
        "node_gc_pause_max_ms": float(final.get("gc_pause_max_ms", "nan")),
        "node_gc_pause_cpu_max_ms": float(final.get("gc_pause_cpu_max_ms", "nan")),
        "frames_dropped_by_node": int(final.get("frames_dropped", 0)),
        "node_camera_callback_mean_ms": float(final.get("camera_callback_mean_ms", "nan")),
        "questions_asked": asked,
        "questions_answered": len(latencies),
        "questions_failed": len(failures),
        "failure_messages": sorted(set(failures)),
        "latency_s": {
            "p50": round(percentile(latencies, 50), 3),
            "p90": round(percentile(latencies, 90), 3),
            "p99": round(percentile(latencies, 99), 3),
            "max": round(max(latencies), 3),
            "mean": round(statistics.mean(latencies), 3),
        }
        if latencies
        else {},
        "node_rss_mb": {
            "at_start": round(samples[0][1], 1),
            "after_warmup_min": round(min(steady), 1),
            "after_warmup_max": round(max(steady), 1),
            "after_warmup_first": round(steady[0], 1),
            "after_warmup_last": round(steady[-1], 1),
            "after_warmup_spread_percent": round(100 * (max(steady) - min(steady)) / min(steady), 2),
        },
        "node_rss_mb_every_30_s": [round(mb, 1) for t, mb in samples if int(t) % 30 < 5],
        "published_and_received_every_30_s": [x for x in received_series if x[0] % 30 < 5],
        "memory": "off" if args.no_memory else "on",
        "memory_store_mb": round(sum(f.stat().st_size for f in store.parent.glob("*")) / 2**20, 1),
        "node_exit_code": node.returncode,
        "node_tracebacks": node_err.count("Traceback"),
    }
    report(results, args.json)


if __name__ == "__main__":
    main()
