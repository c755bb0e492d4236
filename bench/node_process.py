"""The embodied_r node as its own process, the bench's side beside it, and the plain subscriber: shared by
the node benchmarks.

``start_node(overrides)`` runs the installed ``embodied_r_node`` executable with the shipped parameters file
plus ``-p`` overrides (``tiny_model_overrides`` for the tiny models on the CPU); ``stop_node`` stops it with
SIGINT (as Ctrl-C would) and returns its stderr. ``isolate_dds`` gives the run its own DDS domain on this
host. ``rss_mb`` reads a process's resident memory from /proc, ``percentile`` is the nearest-rank percentile
of the reports.

The bench's side: :class:`BenchNode` is the bench's own rclpy node, spun by a thread, with a
``SpatialClient`` of the node under test; :class:`CameraFeed` publishes a looped synthetic clip with its
odometry (and /clock) from it, paced by :func:`paced`.

The plain subscriber is an rclpy node in its own process that only counts the camera frames it receives,
with the QoS the node uses: what the middleware delivers on this machine in the same run, the baseline the
node's ``frames_received`` is compared with. ``start_plain_subscriber`` starts it (this file run as a
script); ``plain_subscriber_result`` waits for its count (it stops ``idle_s`` after the last frame).

Run as a script only by ``start_plain_subscriber``:
    python bench/node_process.py plain [--qos reliable] [--topic /camera/image_raw] [--compressed]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

IMAGE_TOPIC = "/camera/image_raw"
ODOMETRY_TOPIC = "/odom"
NODE = "/embodied_r"


def node_bench_parser(description: str, *, max_new_tokens: int | None = 32, size: bool = False,
                      rate: float | None = None) -> argparse.ArgumentParser:  # fmt: skip
    """The flags every node benchmark shares: ``--models-dir`` (the tiny models, built when missing) and
    ``--json`` (where its figures go); with the arguments, ``--max-new-tokens``, ``--size`` and ``--rate``."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if rate is not None:
        parser.add_argument("--rate", type=float, default=rate, help="camera and odometry rate, Hz")
    if max_new_tokens is not None:
        parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    if size:
        parser.add_argument("--size", default="640x480", help="camera image WIDTHxHEIGHT")
    parser.add_argument("--models-dir", type=Path, default=None, help="the tiny models (built when missing)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return parser


def report(results: dict[str, Any], path: Path | None) -> None:
    """Print a benchmark's figures as JSON, and write them to ``path`` when given."""
    text = json.dumps(results, indent=2)
    print(text)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def isolate_dds() -> None:
    """A random ROS_DOMAIN_ID and discovery on this host only, for this process and the ones it starts
    (call before rclpy is imported)."""
    os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 100))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"


def tiny_model_overrides(models: Path, max_new_tokens: int | None = None) -> dict[str, Any]:
    """The node's parameters for the tiny models in ``models`` on the CPU (and their ``max_new_tokens``)."""
    overrides: dict[str, Any] = {
        "vlm.model": str(models / "vlm"), "lm.model": str(models / "lm"),
        "vlm.transformers.device": "cpu", "lm.transformers.device": "cpu",
    }  # fmt: skip
    if max_new_tokens is not None:
        overrides |= {"vlm.max_new_tokens": max_new_tokens, "lm.max_new_tokens": max_new_tokens}
    return overrides


def node_command(overrides: Mapping[str, Any]) -> list[str]:
    """The command line of the installed node: the shipped parameters file, then ``-p name:=value`` for
    each override (booleans as ``true``/``false``)."""
    from ament_index_python.packages import get_package_prefix, get_package_share_directory

    executable = Path(get_package_prefix("embodied_r_ros")) / "lib" / "embodied_r_ros" / "embodied_r_node"
    params = Path(get_package_share_directory("embodied_r_ros")) / "config" / "embodied_r.yaml"
    command = [str(executable), "--ros-args", "--params-file", str(params)]
    for name, value in overrides.items():
        command += ["-p", f"{name}:={str(value).lower() if isinstance(value, bool) else value}"]
    return command


def start_node(overrides: Mapping[str, Any], log_path: Path | None = None) -> subprocess.Popen:
    """Start the node with ``overrides``: stdout discarded, stderr kept for :func:`stop_node`, or written
    to ``log_path`` (for long runs: a pipe nobody reads stalls the node once its buffer is full). Without a
    ``memory.path`` override the node's ROS_HOME is a fresh temporary directory, so a bench never writes
    into the user's ~/.ros memory store."""
    env = dict(os.environ)
    if "memory.path" not in overrides:
        env["ROS_HOME"] = tempfile.mkdtemp(prefix="bench_ros_home_")
    stderr = subprocess.PIPE if log_path is None else open(log_path, "w")
    try:
        return subprocess.Popen(
            node_command(overrides), stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=env
        )
    finally:
        if log_path is not None:
            stderr.close()  # the child holds its own copy


def stop_node(node: subprocess.Popen, timeout_s: float = 30.0) -> str:
    """SIGINT, wait up to ``timeout_s`` (then kill); the node's stderr ("" when it went to a file)."""
    node.send_signal(signal.SIGINT)
    try:
        _, err = node.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        node.kill()
        _, err = node.communicate()
    return err or ""


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MB (/proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def paced(rate_hz: float, stop: threading.Event, start: float | None = None) -> Iterator[int]:
    """0, 1, 2, ... each yielded at ``start + i / rate_hz`` on the monotonic clock (``start``: now), until
    ``stop`` is set."""
    start = time.monotonic() if start is None else start
    i = 0
    while not stop.is_set():
        delay = start + i / rate_hz - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield i
        i += 1


class BenchNode:
    """The bench's own rclpy node (``node``, in the default context: call ``rclpy.init()`` first), spun by
    a thread, and a SpatialClient of the node under test (``client``); :meth:`close` ends both."""

    def __init__(self, name: str, node: str = NODE) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from embodied_r_ros.ros.spatial_client import SpatialClient

        self.node = rclpy.create_node(name)
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(self.node)
        threading.Thread(target=self._executor.spin, daemon=True).start()
        self.client = SpatialClient(node)

    def close(self) -> None:
        self.client.close()
        self._executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()


class CameraFeed:
    """Camera (rgb8) and odometry publishers on ``bench`` (and /clock with ``clock``), publishing a looped
    3 s synthetic clip of ``size`` (width, height) recorded at ``rate_hz``."""

    def __init__(self, bench: BenchNode, rate_hz: float, size: tuple[int, int], clock: bool = False) -> None:
        from nav_msgs.msg import Odometry
        from rclpy.qos import QoSProfile
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import Image

        from embodied_r_ros.ros.messages import rgb_image_message
        from embodied_r_ros.testing.synthetic_clip import synthetic_clip

        self.images = bench.node.create_publisher(Image, IMAGE_TOPIC, QoSProfile(depth=5))
        self.odometry = bench.node.create_publisher(Odometry, ODOMETRY_TOPIC, QoSProfile(depth=5))
        self._clock = bench.node.create_publisher(Clock, "/clock", QoSProfile(depth=1)) if clock else None
        self._clip = synthetic_clip(seconds=3.0, fps=rate_hz, size=size)
        self._messages = [rgb_image_message(f.image, 0, "camera") for f in self._clip.frames]

    def wait_until_subscribed(self) -> None:
        """Wait until the node subscribed to the camera and the odometry."""
        while not (self.images.get_subscription_count() and self.odometry.get_subscription_count()):
            time.sleep(0.05)

    def publish(self, i: int, stamp_ns: int) -> None:
        """Frame ``i`` of the looped clip and its odometry, both stamped ``stamp_ns``."""
        from embodied_r_ros.ros.messages import ns_to_time, odometry_message

        n = i % len(self._messages)
        self.odometry.publish(odometry_message(stamp_ns, self._clip.frames[n].pose))
        image = self._messages[n]
        image.header.stamp = ns_to_time(stamp_ns)
        self.images.publish(image)

    def tick(self, stamp_ns: int) -> None:
        """One /clock message (a feed made with ``clock``)."""
        from rosgraph_msgs.msg import Clock

        from embodied_r_ros.ros.messages import ns_to_time

        assert self._clock is not None, "a CameraFeed made without clock=True"
        self._clock.publish(Clock(clock=ns_to_time(stamp_ns)))


def camera_qos(name: str):
    """The QoS of the camera topic: "sensor_data" (best effort, depth 5) or "reliable" (depth 5)."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

    return (
        qos_profile_sensor_data
        if name == "sensor_data"
        else QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    )


def plain_subscriber(
    idle_s: float, qos: str, topic: str = IMAGE_TOPIC, compressed: bool = False, first_wait_s: float = 120.0
) -> None:
    """Count frames until none came for ``idle_s`` after the first one (or none came within
    ``first_wait_s``); print the count and the CPU seconds as one JSON line."""
    import rclpy
    from sensor_msgs.msg import CompressedImage, Image

    rclpy.init()
    node = rclpy.create_node("bench_plain_subscriber")
    received = [0]
    last = [time.monotonic() + first_wait_s]

    def on_image(_message) -> None:
        received[0] += 1
        last[0] = time.monotonic()

    node.create_subscription(CompressedImage if compressed else Image, topic, on_image, camera_qos(qos))
    cpu = time.process_time()
    while time.monotonic() - last[0] < idle_s:
        rclpy.spin_once(node, timeout_sec=0.1)
    print(json.dumps({"received": received[0], "cpu_s": time.process_time() - cpu}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def start_plain_subscriber(
    qos: str, topic: str = IMAGE_TOPIC, compressed: bool = False, first_wait_s: float = 120.0
) -> subprocess.Popen:
    """Start :func:`plain_subscriber` in its own process (it stops 3 s after the last frame)."""
    command = [sys.executable, __file__, "plain", "--qos", qos, "--topic", topic]
    command += ["--first-wait", str(first_wait_s)] + (["--compressed"] if compressed else [])
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def plain_subscriber_result(process: subprocess.Popen, timeout_s: float = 120.0) -> dict:
    """The plain subscriber's report ({"received", "cpu_s"}) once it stopped."""
    out, _ = process.communicate(timeout=timeout_s)
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description="the plain subscriber of the node benchmarks")
    parser.add_argument("role", choices=["plain"])
    parser.add_argument("--qos", choices=["sensor_data", "reliable"], default="sensor_data")
    parser.add_argument("--topic", default=IMAGE_TOPIC)
    parser.add_argument("--compressed", action="store_true", help="sensor_msgs/CompressedImage")
    parser.add_argument("--first-wait", type=float, default=120.0, help="seconds to wait for a first frame")
    args = parser.parse_args()
    plain_subscriber(3.0, args.qos, args.topic, args.compressed, args.first_wait)


if __name__ == "__main__":
    main()
