"""The node's memory over configure/cleanup cycles: what a cleanup leaves behind, cycle after cycle.

The node runs as its own process (the installed ``embodied_r_node``, tiny models, ``autostart`` false) in an
isolated DDS domain. This process drives it through its lifecycle services ``--cycles`` times: configure,
activate, ``--seconds`` of camera and odometry at ``--rate`` Hz (``--size`` rgb8), one question through
``~/ask``, deactivate, cleanup (``--idle`` only configures and cleans up). After each cleanup (and once
before the first configure) it reads the node's /proc/PID/status: VmRSS, RssAnon (the heap: what a leak
grows) and RssFile (mapped libraries). A cleanup that frees everything leaves RssAnon where the first
cleanup left it; the first cycle itself keeps what importing torch and transformers costs.

Run:  python bench/bench_lifecycle_memory.py [--cycles 5] [--seconds 3] [--rate 10] [--idle]
          [--set NAME=VALUE ...] [--json PATH]
"""

from __future__ import annotations

import threading
import time

from node_process import (
    NODE,
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

SETTLE_S = 1.0  # after a cleanup, before reading the node's memory (threads end, the allocator settles)
TRANSITION_TIMEOUT_S = 300.0


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon and RssFile (MB) and Threads of process ``pid`` (/proc/PID/status)."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                values[key] = int(rest) if key == "Threads" else round(int(rest.split()[0]) / 1024, 1)
    return values


def transition(bench: BenchNode, label: str) -> None:
    """Ask the node's ~/change_state for the transition ``label``; raises when it fails."""
    from lifecycle_msgs.srv import ChangeState

    client = bench.node.create_client(ChangeState, f"{NODE}/change_state")
    try:
        if not client.wait_for_service(timeout_sec=120.0):
            raise RuntimeError(f"no {NODE}/change_state within 120 s")
        request = ChangeState.Request()
        request.transition.label = label
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        if not done.wait(TRANSITION_TIMEOUT_S) or not future.result().success:
            raise RuntimeError(f"the transition {label} failed")
    finally:
        bench.node.destroy_client(client)


def wait_for_lifecycle(bench: BenchNode) -> None:
    """Wait until the node's lifecycle services are up (the process started)."""
    from lifecycle_msgs.srv import GetState

    client = bench.node.create_client(GetState, f"{NODE}/get_state")
    try:
        if not client.wait_for_service(timeout_sec=120.0):
            raise RuntimeError(f"no {NODE}/get_state within 120 s")
    finally:
        bench.node.destroy_client(client)


def feed(camera: CameraFeed, seconds: float, rate: float, start_ns: int) -> int:
    """``seconds`` of camera and odometry at ``rate`` Hz from ``start_ns``; returns the next stamp."""
    stop = threading.Event()
    step_ns = round(1e9 / rate)
    stamp = start_ns
    for i in paced(rate, stop):
        if i >= seconds * rate:
            break
        camera.publish(i, stamp)
        stamp += step_ns
    return stamp + 1000 * 10**9  # the next cycle's window holds only its own frames


def main() -> None:
    parser = node_bench_parser(__doc__, max_new_tokens=8, size=True, rate=10.0)
    parser.set_defaults(size="320x240")
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="camera seconds per active cycle")
    parser.add_argument("--idle", action="store_true", help="only configure and clean up (no frames)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a node parameter")
    args = parser.parse_args()
    isolate_dds()
    import rclpy

    from embodied_r_ros.testing.tiny_models import ensure_tiny_models

    models = ensure_tiny_models(args.models_dir)
    width, height = (int(v) for v in args.size.split("x"))
    overrides = tiny_model_overrides(models, args.max_new_tokens) | {"autostart": False}
    overrides |= dict(item.split("=", 1) for item in args.set)
    process = start_node(overrides)
    rclpy.init()
    bench = BenchNode("bench_lifecycle_memory")
    camera = CameraFeed(bench, args.rate, (width, height))
    rows = []
    try:
        wait_for_lifecycle(bench)
        time.sleep(SETTLE_S)
        rows.append({"after": "start (unconfigured)", **memory_mb(process.pid)})
        stamp = 1_700_000_000 * 10**9
        for cycle in range(1, args.cycles + 1):
            transition(bench, "configure")
            if not args.idle:
                transition(bench, "activate")
                camera.wait_until_subscribed()
                stamp = feed(camera, args.seconds, args.rate, stamp)
                answer = bench.client.ask("Which way did I turn?", ["left", "right"], 60.0, timeout_s=120.0)
                if not answer.success:
                    raise RuntimeError(f"cycle {cycle}: no answer: {answer.message}")
                transition(bench, "deactivate")
            transition(bench, "cleanup")
            time.sleep(SETTLE_S)
            rows.append({"after": f"cleanup {cycle}", **memory_mb(process.pid)})
            print(rows[-1], flush=True)
    except Exception:
        bench.close()
        rclpy.try_shutdown()
        print(stop_node(process)[-3000:])
        raise
    bench.close()
    rclpy.try_shutdown()
    stop_node(process)
    first, last = rows[1], rows[-1]
    results = {
        "cycles": args.cycles,
        "mode": "idle (configure, cleanup)" if args.idle else
                f"active ({args.seconds:g} s of {width}x{height} at {args.rate:g} Hz and one question)",
        "rows": rows,
        "rss_anon_growth_mb_first_to_last_cleanup": round(last["RssAnon"] - first["RssAnon"], 1),
        "rss_anon_growth_mb_per_cycle":
            round((last["RssAnon"] - first["RssAnon"]) / max(1, args.cycles - 1), 1),
        "rss_anon_above_unconfigured_mb": round(last["RssAnon"] - rows[0]["RssAnon"], 1),
    }  # fmt: skip
    report(results, args.json)


if __name__ == "__main__":
    main()
