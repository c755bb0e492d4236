"""The window a question asks about: the last N seconds or an interval of camera time, checked against the
history the node holds (embodied_r_ros.windows); and `embodied-r ask`'s stamps."""

from __future__ import annotations

import argparse
import json
import math

import pytest

from embodied_r_ros.cli.ask import parse_stamp
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.question_file import read_questions
from embodied_r_ros.windows import Window, WindowError

T0 = 1_700_000_000 * NS_PER_S
OLDEST, NEWEST = T0 + 100 * NS_PER_S, T0 + 400 * NS_PER_S  # 300 s of history held


def resolve(window: Window) -> tuple[int, int]:
    return window.resolve(default_s=30.0, oldest_ns=OLDEST, newest_ns=NEWEST, history_s=600.0)


def test_the_last_seconds_and_intervals_resolve_to_stamps() -> None:
    assert resolve(Window()) == (NEWEST - 30 * NS_PER_S, NEWEST)  # the node's default
    assert resolve(Window(5.0)) == (NEWEST - 5 * NS_PER_S, NEWEST)
    assert resolve(Window(10_000.0))[1] == NEWEST  # longer than the history: all of it, no error
    middle = (T0 + 200 * NS_PER_S, T0 + 230 * NS_PER_S)
    assert resolve(Window(5.0, *middle)) == middle  # both stamps: window_seconds ignored
    assert resolve(Window(5.0, 0, middle[1])) == (middle[1] - 5 * NS_PER_S, middle[1])
    assert resolve(Window(0.0, middle[0], 0)) == (middle[0], NEWEST)
    assert resolve(Window(0.0, OLDEST - NS_PER_S // 2, NEWEST)) == (OLDEST - NS_PER_S // 2, NEWEST)  # slack


@pytest.mark.parametrize(
    "window, words",
    [
        (Window(math.inf), "finite number of seconds >= 0"),
        (Window(-1.0), "finite number of seconds >= 0"),
        (Window(math.nan), "finite number of seconds >= 0"),
        (Window(0.0, T0 + 300 * NS_PER_S, T0 + 200 * NS_PER_S), "is after end_stamp"),
        (Window(0.0, -5, 0), "must be camera stamps"),
        (Window(0.0, T0, T0 + 50 * NS_PER_S), "starts before the oldest frame the node still holds"),
        (Window(0.0, T0 + 50 * NS_PER_S, T0 + 200 * NS_PER_S), "raise buffer.history_s"),
        (Window(0.0, NEWEST + 10 * NS_PER_S, NEWEST + 20 * NS_PER_S), "reaches into the future"),
        (Window(0.0, NEWEST - NS_PER_S, NEWEST + 20 * NS_PER_S), "the newest camera frame is at 1700000400"),
    ],
)
def test_windows_that_cannot_be_answered_say_why(window: Window, words: str) -> None:
    with pytest.raises(WindowError, match=words):
        resolve(window)


def test_ask_reads_stamps_as_seconds_or_iso_times(tmp_path) -> None:
    assert parse_stamp("1700000002.5") == T0 + 2_500_000_000
    assert parse_stamp("2023-11-14T22:13:20+00:00") == T0
    for bad in ("yesterday", "-3", "nan"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a stamp"):
            parse_stamp(bad)
    path = tmp_path / "questions.jsonl"
    lines = [
        {"question": "Where was the door?", "start_ns": T0, "end_ns": T0 + NS_PER_S, "start_s": 0.0},
        {"question": "How far did I walk?", "window_s": 5},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    first, second = read_questions(path)
    assert (first.start_ns, first.end_ns, first.window_s) == (T0, T0 + NS_PER_S, 0.0)
    assert (second.start_ns, second.end_ns, second.window_s) == (0, 0, 5.0)
    path.write_text(json.dumps({"question": "q", "start_ns": "soon"}) + "\n")
    with pytest.raises(ValueError, match=r"questions.jsonl:1: window_s, start_ns, end_ns.* must be numbers"):
        read_questions(path)
