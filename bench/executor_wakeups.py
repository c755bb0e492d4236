"""How often the node's executor wakes while the node is idle, per input (issue 31).

Every wake-up of the node's ``MultiThreadedExecutor`` rebuilds its wait set in Python under the GIL, so
wake-ups that find nothing to do cost CPU and delay the camera thread and the models. The node runs as its
own process (tiny models) with ``bench/wakeup_count/sitecustomize.py`` counting its executors' waits; this
process feeds one set of inputs at a time for ``--seconds`` with no question asked, and reports the spin
thread's wake-ups a second and what they found ready.

Run:  python bench/executor_wakeups.py [--seconds 20] [--inputs none,camera,odom,clock,all] [--json PATH]
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path

from node_process import isolate_dds, node_bench_parser, paced, start_node, stop_node, tiny_model_overrides

SPIN_THREAD = "embodied_r_spin"
RATES_HZ = {"camera": 30.0, "odom": 30.0, "clock": 100.0}


def _feed(inputs: set[str], stop: threading.Event) -> list[threading.Thread]:
    """Publish the chosen inputs (640x480 rgb8 camera, odometry, /clock) until ``stop``."""
    import numpy as np
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image

    from embodied_r_ros.frames import Pose
    from embodied_r_ros.ros.messages import ns_to_time, odometry_message, rgb_image_message

    feeder = rclpy.create_node("executor_wakeups_feeder")
    images = feeder.create_publisher(Image, "/camera/image_raw", QoSProfile(depth=5))
    odometry = feeder.create_publisher(Odometry, "/odom", QoSProfile(depth=5))
    clock = feeder.create_publisher(Clock, "/clock", QoSProfile(depth=1))
    image = rgb_image_message(np.zeros((480, 640, 3), np.uint8), 0, "camera")

    def camera() -> None:
        image.header.stamp = ns_to_time(time.time_ns())
        images.publish(image)

    def odom() -> None:
        odometry.publish(odometry_message(time.time_ns(), Pose()))

    def tick() -> None:
        clock.publish(Clock(clock=ns_to_time(time.time_ns())))

    def loop(rate_hz: float, publish) -> None:
        for _ in paced(rate_hz, stop):
            publish()

    threads = []
    for name, publish in (("camera", camera), ("odom", odom), ("clock", tick)):
        if name in inputs:
            threads.append(threading.Thread(target=loop, args=(RATES_HZ[name], publish), daemon=True))
            threads[-1].start()
    return threads


def _last_counts(path: Path) -> dict:
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return json.loads(lines[-1]) if lines else {"t": time.time(), "waits": {}, "ready": {}}


def measure(inputs: set[str], seconds: float, models: Path, sim_time: bool) -> dict:
    """Start the node, let it settle, feed ``inputs`` for ``seconds``; the spin thread's wake-ups."""
    counts = Path(tempfile.mkdtemp(prefix="wakeups_")) / "counts.jsonl"
    site = str(Path(__file__).resolve().parent / "wakeup_count")
    os.environ["EMBODIED_R_WAKEUP_COUNT"] = str(counts)
    os.environ["PYTHONPATH"] = os.pathsep.join([site, os.environ.get("PYTHONPATH", "")])
    overrides = tiny_model_overrides(models) | {"camera.qos": "reliable", "use_sim_time": sim_time}
    try:
        node = start_node(overrides)
    finally:
        del os.environ["EMBODIED_R_WAKEUP_COUNT"]
        os.environ["PYTHONPATH"] = os.environ["PYTHONPATH"].split(os.pathsep, 1)[1]
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 120.0
        while SPIN_THREAD not in _last_counts(counts)["waits"] and time.monotonic() < deadline:
            time.sleep(0.5)  # the node is up once its spin thread has waited
        time.sleep(2.0)
        threads = _feed(inputs, stop)
        time.sleep(2.0)  # matched and flowing
        before = _last_counts(counts)
        time.sleep(seconds)
        after = _last_counts(counts)
    finally:
        stop.set()
        stop_node(node)
    for thread in threads:
        thread.join(timeout=1.0)
    span = after["t"] - before["t"]
    woke = after["waits"].get(SPIN_THREAD, 0) - before["waits"].get(SPIN_THREAD, 0)
    ready = {k: after["ready"].get(k, 0) - before["ready"].get(k, 0) for k in after["ready"]}
    return {
        "inputs": sorted(inputs),
        "sim_time": sim_time,
        "seconds": round(span, 1),
        "wakeups_per_s": round(woke / span, 1) if span > 0 else None,
        "ready_per_s": {k: round(v / span, 2) for k, v in ready.items() if v},
    }


def main() -> None:
    parser = node_bench_parser(__doc__, max_new_tokens=None)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--inputs", default="none,camera,odom,clock,all", help="comma-separated sets to run")
    args = parser.parse_args()
    models = args.models_dir or Path(os.environ.get("EMBODIED_R_TINY_MODELS", ".cache/tiny-models"))
    isolate_dds()
    import rclpy

    rclpy.init()
    results = []
    for name in args.inputs.split(","):
        inputs = set(RATES_HZ) if name == "all" else set() if name == "none" else {name}
        result = measure(inputs, args.seconds, models, sim_time="clock" in inputs)
        print(json.dumps(result), flush=True)
        results.append(result)
    rclpy.shutdown()
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
