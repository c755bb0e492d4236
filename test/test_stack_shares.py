"""bench/stack_shares.py's arithmetic: a part's share counts each sample once however deep the part
recurs, and what lies under a part is split by the functions below it only."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _module():
    spec = importlib.util.spec_from_file_location("stack_shares_under_test", BENCH / "stack_shares.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shares_of_parts_and_of_what_lies_under_them(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks.txt"
    stacks.write_text(
        "main (a.py:1);step (a.py:2);decode (d.py:3);Linear.forward (l.py:4) 6\n"
        "main (a.py:1);step (a.py:2);decode (d.py:3);cat (c.py:5) 2\n"
        "main (a.py:1);step (a.py:2);Linear.forward (l.py:4);backward (b.py:6) 1\n"
        "main (a.py:1);cat (c.py:5);step (a.py:2);decode (d.py:3);decode (d.py:3) 1\n"  # decode twice: once
        "garbage line without a count\n"
    )
    module = _module()
    parts, inside = ("step", "decode", "backward"), ("Linear.forward", "cat")
    result = module.shares(module.read_stacks(stacks), parts, inside)
    assert result["samples"] == 10
    decode = result["parts"]["decode"]
    assert decode["share"] == 0.9
    # The cat above decode in the last stack is not under it.
    assert decode["inside"] == {"Linear.forward": 6 / 9, "cat": 2 / 9}
    assert result["parts"]["step"]["inside"] == {"Linear.forward": 7 / 10, "cat": 2 / 10}
    assert result["parts"]["backward"] == {"share": 0.1, "inside": {}}
