"""``embodied-r play BAG``: publish a rosbag2's topics at the recorded timing (no ``ros2 bag`` needed).

    embodied-r play scene_000 [--rate 2] [--loop] [--topics /camera/image_raw /odom] [--wait-subscribers 10]
                              [--start-offset 600] [--playback-duration 60]

The bag is read with ``rosbags`` (MCAP or sqlite3 storage); each message is published as its recorded
serialized bytes (no deserialization), in log-time order, at ``rate`` times the recorded pace. Topics whose
message type this ROS installation does not have are skipped with a warning. Header stamps are left as
recorded (the node's time base is the camera stamps, so no /clock is needed); with ``--loop`` they jump
back at each restart, which the node detects and answers by clearing its history. ``--start-offset`` and
``--playback-duration`` (seconds of bag time, as ``ros2 bag play`` names them) play one part of the bag: a
mission played in two parts reaches the node as one, its stamps never jumping back.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

logger = logging.getLogger(__name__)


class BagError(RuntimeError):
    """A bag that cannot be played; the message names it and the fix."""


@dataclass
class PlayStats:
    """What one play published."""

    published: dict[str, int] = field(default_factory=dict)  # topic -> messages
    skipped_topics: list[str] = field(default_factory=list)
    loops: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.published.values())


def message_class(msgtype: str) -> type:
    """The rclpy message class of a type name such as ``sensor_msgs/msg/Image``; raises ImportError."""
    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


def play_bag(
    path: str | Path,
    *,
    rate: float = 1.0,
    loop: bool = False,
    topics: Sequence[str] | None = None,
    delay_s: float = 0.5,
    wait_subscribers_s: float = 0.0,
    stop: threading.Event | None = None,
    args: Sequence[str] = (),
    start_offset_s: float = 0.0,
    duration_s: float | None = None,
) -> PlayStats:
    """Publish the bag's messages (see the module docstring); returns what was published.

    ``delay_s`` waits after creating the publishers (DDS discovery); ``wait_subscribers_s`` waits up to
    that long until every topic has a subscriber; ``stop`` ends the play early (e.g. a loop).
    ``start_offset_s`` and ``duration_s`` (bag seconds; None: to the end) play that part of the bag only.
    """
    import rclpy
    from rclpy.duration import Duration
    from rclpy.qos import QoSProfile
    from rosbags.highlevel import AnyReader

    if not rate > 0:
        raise BagError(f"--rate must be > 0, got {rate}")
    if start_offset_s < 0 or (duration_s is not None and not duration_s > 0):
        raise BagError(f"--start-offset must be >= 0 and --playback-duration > 0, got {start_offset_s} and "
                       f"{duration_s}")  # fmt: skip
    path = Path(path)
    if not path.exists():
        raise BagError(f"bag {path} does not exist")
    stop = stop or threading.Event()
    stats = PlayStats()
    context = rclpy.Context()
    rclpy.init(args=list(args), context=context)
    node = rclpy.create_node(f"embodied_r_play_{os.getpid()}", context=context)
    try:
        try:
            reader = AnyReader([path])
            reader.open()
        except Exception as exc:  # rosbags raises its own error types for unreadable bags
            raise BagError(f"cannot read bag {path}: {exc}; give a rosbag2 folder (metadata.yaml)") from exc
        try:
            if not reader.is2:
                raise BagError(f"{path} is a ROS 1 bag; convert it first: rosbags-convert --src {path}")
            connections, publishers = [], {}
            for connection in reader.connections:
                if topics and connection.topic not in topics:
                    continue
                if connection.topic not in publishers:
                    try:
                        cls = message_class(connection.msgtype)
                    except (ImportError, AttributeError, ValueError):
                        logger.warning(
                            "skipping %s: message type %s is not installed",
                            connection.topic,
                            connection.msgtype,
                        )
                        stats.skipped_topics.append(connection.topic)
                        continue
                    publishers[connection.topic] = node.create_publisher(
                        cls, connection.topic, QoSProfile(depth=20)
                    )
                connections.append(connection)
            if not connections:
                raise BagError(
                    f"bag {path} has no playable topics{f' among {list(topics)}' if topics else ''}"
                )
            _wait_for_subscribers(list(publishers.values()), wait_subscribers_s, stop)
            stop.wait(delay_s)
            window = _window_ns(reader.start_time, start_offset_s, duration_s)
            start = time.monotonic()
            while not stop.is_set():
                _play_once(reader, connections, publishers, rate, stop, stats, window)
                stats.loops += 1
                if not loop:
                    break
            stats.seconds = time.monotonic() - start
            # Exiting at once would destroy the writers with the last samples still unacknowledged, and
            # reliable subscribers would never get them.
            for publisher in publishers.values():
                publisher.wait_for_all_acked(Duration(seconds=2.0))
        finally:
            reader.close()
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    return stats


def _wait_for_subscribers(publishers: list[Any], timeout_s: float, stop: threading.Event) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stop.is_set():
        if all(p.get_subscription_count() > 0 for p in publishers):
            return
        stop.wait(0.05)


def _window_ns(bag_start_ns: int, start_offset_s: float, duration_s: float | None) -> tuple[int, int | None]:
    """The log times [start, stop) of the part to play (stop None: to the end)."""
    start = bag_start_ns + round(start_offset_s * 1e9)
    return start, None if duration_s is None else start + round(duration_s * 1e9)


def _play_once(
    reader: Any,
    connections: list[Any],
    publishers: dict[str, Any],
    rate: float,
    stop: threading.Event,
    stats: PlayStats,
    window: tuple[int, int | None],
) -> None:
    first: int | None = None
    start = time.monotonic()
    for connection, timestamp, rawdata in reader.messages(connections=connections, start=window[0],
                                                          stop=window[1]):  # fmt: skip
        if first is None:
            first = timestamp
        delay = start + (timestamp - first) / 1e9 / rate - time.monotonic()
        if delay > 0 and stop.wait(delay):
            return
        publishers[connection.topic].publish(bytes(rawdata))
        stats.published[connection.topic] = stats.published.get(connection.topic, 0) + 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r play``."""
    parser = subparsers.add_parser("play", help="publish a rosbag2's topics at the recorded timing")
    parser.set_defaults(func=run_play)
    parser.add_argument("bag", type=Path, help="rosbag2 folder (MCAP or sqlite3)")
    parser.add_argument("--rate", type=float, default=1.0, help="playback speed factor (2 = twice as fast)")
    parser.add_argument("--loop", action="store_true", help="start again at the end, until Ctrl-C")
    parser.add_argument("--topics", nargs="*", default=None, help="play only these topics")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds to wait before the first message")
    parser.add_argument(
        "--wait-subscribers",
        type=float,
        default=0.0,
        help="wait up to this long for a subscriber on every topic",
    )
    parser.add_argument(
        "--start-offset", type=float, default=0.0, help="start this many seconds into the bag (0)"
    )
    parser.add_argument(
        "--playback-duration",
        type=float,
        default=None,
        help="play this many seconds of the bag (default: to its end)",
    )


def run_play(args: argparse.Namespace) -> int:
    """Play the bag; prints what was published."""
    try:
        stats = play_bag(
            args.bag,
            rate=args.rate,
            loop=args.loop,
            topics=args.topics,
            delay_s=args.delay,
            wait_subscribers_s=args.wait_subscribers,
            start_offset_s=args.start_offset,
            duration_s=args.playback_duration,
        )
    except BagError as exc:
        print(f"embodied-r play: error: {exc}", file=sys.stderr)
        return 2
    counts = ", ".join(f"{topic} {count}" for topic, count in sorted(stats.published.items()))
    print(f"played {args.bag}: {stats.total} messages in {stats.seconds:.1f} s ({counts})")
    return 0
