"""bench/bench_mission_memory.py's own arithmetic (issue 44, cost flat in length): the early and late
intervals and where the node answers them from, the alternating order, the latency ratio, a mission minute
to its sample, RAM from that minute and the store's MB per mission hour. The bench itself runs the node
for minutes; these check what it computes from what it measured, without ROS."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
START = 1_700_000_000_000_000_000
MIN = 60 * 10**9  # a minute in ns
MISSION = {"start_ns": START, "end_ns": START + 120 * MIN}  # a two-hour mission, as mission.json has it


@pytest.fixture(scope="module")
def bench():
    saved = list(sys.path)
    sys.path.insert(0, str(BENCH))  # the bench imports node_process.py beside it
    try:
        spec = importlib.util.spec_from_file_location("bench_mission_memory_under_test",
                                                      BENCH / "bench_mission_memory.py")  # fmt: skip
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses need it registered
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path[:] = saved
        sys.modules.pop("bench_mission_memory_under_test", None)


def sample(bench, wall_s: float, minute: float, rss: float, store: float = 0.0):
    return bench.Sample(wall_s, minute * 60, rss, store, 0, 0, 0, 0, 0)


def test_the_early_and_the_late_interval_are_cut_to_the_mission(bench):
    assert bench.minute_interval(MISSION, 5) == (START + 4 * MIN, START + 6 * MIN)
    assert bench.minute_interval(MISSION, 5, 0.5) == (START + round(4.5 * MIN), START + round(5.5 * MIN))
    assert bench.minute_interval(MISSION, 0.5) == (START, START + round(1.5 * MIN))
    assert bench.minute_interval(MISSION, 119.5) == (START + round(118.5 * MIN), START + 120 * MIN)
    assert bench.last_minute_interval(MISSION) == (START + 119 * MIN, START + 120 * MIN)
    short = {"start_ns": START, "end_ns": START + MIN // 2}
    assert bench.last_minute_interval(short) == (START, START + MIN // 2)


def test_an_interval_before_what_ram_holds_is_answered_from_the_memory(bench):
    history_s = 600.0  # RAM holds minutes 110-120 at the end
    assert bench.answered_from(START + 4 * MIN, MISSION, history_s) == "memory"
    assert bench.answered_from(START + 110 * MIN - 1, MISSION, history_s) == "memory"
    assert bench.answered_from(START + 110 * MIN, MISSION, history_s) == "RAM"
    assert bench.answered_from(START + 119 * MIN, MISSION, history_s) == "RAM"
    # A mission shorter than the history: RAM holds it all, from its first frame.
    assert bench.answered_from(START, MISSION, 3 * 3600.0) == "RAM"


def test_the_order_alternates_so_that_drift_falls_on_both(bench):
    assert bench.alternating_order(("a", "b"), 3) == ["a", "b", "b", "a", "a", "b"]
    assert bench.alternating_order(("a", "b"), 0) == []
    order = bench.alternating_order(("a", "b"), 4)
    # a load rising linearly over the run: both sides get the same sum of positions
    positions = {name: sum(i for i, n in enumerate(order) if n == name) for name in ("a", "b")}
    assert positions["a"] == positions["b"]


def test_the_latency_ratio_is_of_the_medians_against_the_goal(bench):
    summary = bench.latency_summary([0.5, 9.0, 0.6, 0.55, 0.52], [0.40, 0.41, 0.39, 5.0, 0.40])
    assert summary["early_median_s"] == 0.55 and summary["late_median_s"] == 0.40  # outliers do not count
    assert summary["early_over_late"] == pytest.approx(1.375)
    assert summary["goal"] == 1.5 and summary["goal_met"] is True
    slow = bench.latency_summary([0.9, 1.0, 1.1], [0.5, 0.6, 0.7])
    assert slow["early_over_late"] == pytest.approx(1.667, abs=1e-3) and slow["goal_met"] is False
    none = bench.latency_summary([], [0.4])
    assert none["early_median_s"] is None and none["early_over_late"] is None and none["goal_met"] is None


def test_ram_start_is_the_first_sample_at_the_minute_during_the_replay(bench):
    samples = [
        sample(bench, 0, 0.0, 300), sample(bench, 85, 11.4, 500), sample(bench, 90, 12.1, 510),
        sample(bench, 95, 12.8, 512), sample(bench, 900, 120.0, 530),
        sample(bench, 960, 120.0, 600),  # after the replay (questions, drain): not the end
    ]  # fmt: skip
    ram = bench.ram_summary(samples, 12 * 60, replay_end_s=900)
    assert ram["start_mission_minute"] == 12.1 and ram["start_after_warmup_mb"] == 510
    assert ram["end_mission_minute"] == 120.0 and ram["end_of_replay_mb"] == 530
    assert ram["end_over_start"] == pytest.approx(530 / 510, abs=1e-4)
    assert ram["goal_within_5_percent"] is True
    assert ram["after_questions_and_drain_mb"] == 600 and ram["max_after_warmup_mb"] == 600
    grown = bench.ram_summary(samples[:3] + [sample(bench, 900, 120.0, 540)], 12 * 60, 900)
    assert grown["end_over_start"] == pytest.approx(540 / 510, abs=1e-4)
    assert grown["goal_within_5_percent"] is False  # x1.059


def test_a_replay_shorter_than_the_minute_uses_all_samples(bench):
    samples = [sample(bench, 0, 0.0, 300), sample(bench, 5, 1.0, 310)]
    assert bench.replay_samples(samples, 12 * 60, 100) == samples


def test_the_store_per_mission_hour_at_the_end_and_its_growth(bench):
    assert bench.mb_per_hour(154.0, 2 * 3600) == pytest.approx(77.0)
    samples = [
        sample(bench, 0, 0.0, 300, store=0.1), sample(bench, 90, 12.0, 500, store=20.0),
        sample(bench, 900, 120.0, 520, store=155.0), sample(bench, 960, 120.0, 520, store=160.0),
    ]  # fmt: skip
    store = bench.store_growth(samples, 12 * 60, replay_end_s=900)
    assert store["end_of_replay_mb"] == 155.0
    assert store["end_of_replay_mb_per_mission_hour"] == pytest.approx(77.5)
    assert store["growth_from_mission_minute"] == 12.0
    assert store["growth_mb_per_mission_hour"] == pytest.approx(75.0)  # 135 MB over 108 minutes
    one = bench.store_growth(samples[:1], 12 * 60, 900)
    assert one["growth_mb_per_mission_hour"] is None and one["end_of_replay_mb_per_mission_hour"] is None


def test_questions_settled_counts_every_outcome_but_running_and_waiting(bench):
    values = {"queries_answered": "7", "queries_failed": "2", "queries_running": "1",
              "queries_waiting": "3", "queries_busy": "1", "frames_received": "99"}  # fmt: skip
    assert bench.questions_settled(values) == 10
    assert bench.questions_settled({}) == 0


def test_the_control_divides_the_early_median_at_the_end_by_the_same_question_at_the_pause(bench):
    flat = {"interval": {"early_median_s": 0.30}, "search_memory": {"early_median_s": 0.20}}
    control = {"at_mission_minute": 16, "interval": {"median_s": 0.25}, "search_memory": {"median_s": 0.10}}
    both = bench.with_control(flat, control)
    assert both["control"] is control
    assert both["interval"]["early_at_end_over_control"] == 1.2 and both["interval"]["control_goal_met"]
    assert both["search_memory"]["early_at_end_over_control"] == 2.0
    assert both["search_memory"]["control_goal_met"] is False
    unanswered = bench.with_control(flat, {**control, "interval": {"median_s": None}})
    assert unanswered["interval"]["early_at_end_over_control"] is None
    assert unanswered["interval"]["control_goal_met"] is None


def test_the_control_pause_comes_after_the_early_minute_left_ram(bench):
    # Minute 4.5 leaves a 10-minute RAM history at minute 14.5: a pause after it asks the memory, as the end
    # does (the node's rule, answered_from); one before it is refused. Off by default.
    assert bench.earliest_control_minute(5, 600) == 14.5
    assert bench.early_interval(MISSION, 5) == bench.minute_interval(MISSION, 5, 0.5)  # as the last minute
    at_14 = {"start_ns": START, "end_ns": START + 14 * MIN}
    assert bench.answered_from(bench.minute_interval(MISSION, 5, 0.5)[0], at_14, 600) == "RAM"
    args = bench.parse_args(["--mission", "/tmp/m", "--question-minute", "5", "--control-minute", "16"])
    ram_oldest_ns = START + round(args.control_minute * MIN) - 600 * 10**9
    assert bench.minute_interval(MISSION, 5, 0.5)[0] < ram_oldest_ns
    assert bench.parse_args(["--mission", "/tmp/m"]).control_minute == 0
    with pytest.raises(SystemExit):
        bench.parse_args(["--mission", "/tmp/m", "--question-minute", "5", "--control-minute", "12"])
