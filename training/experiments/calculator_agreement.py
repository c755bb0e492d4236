"""Does the calculator write what the oracle's traces write? Per task, at every place of a trace where the
calculator (embodied_r_ros/reasoning/calculator.py) would write a result, whether it writes the trace's
text exactly, or a number one unit off in its last digit (the trace rounds the exact values, the
calculator computes from the rounded ones the think shows), or something else.

    python training/experiments/calculator_agreement.py out/reasoner/data/train_all [--every 1]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

from embodied_r_training.rl.warm_start import trace_completion

from embodied_r_ros.reasoning.calculator import continuation

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
COLUMNS = ("places", "exact", "last_digit", "other")


def last_digit_apart(ours: str, theirs: str) -> bool:
    """Whether two results differ only by one unit in the last digit of each number, written alike."""
    a, b = _NUMBER.findall(ours), _NUMBER.findall(theirs)
    if len(a) != len(b) or _NUMBER.sub("#", ours) != _NUMBER.sub("#", theirs):
        return False
    for x, y in zip(a, b, strict=True):
        decimals = len(x.split(".")[1]) if "." in x else 0
        if len(x) != len(y) or abs(float(x) - float(y)) > 1.01 * 10**-decimals:
            return False
    return True


def agreement(rows: list[dict], every: int = 1) -> dict[str, Counter]:
    """Per task: ``places`` the calculator writes at, ``exact``, ``last_digit`` and ``other`` of them."""
    found: dict[str, Counter] = {}
    for row in rows[::every]:
        trace = trace_completion(row) or ""
        counts = found.setdefault(row["task"], Counter())
        for end in range(1, len(trace)):
            written = continuation(trace[:end])
            if written is None:
                continue
            counts["places"] += 1
            theirs = trace[end : end + len(written)]
            if theirs == written:
                counts["exact"] += 1
            else:
                counts["last_digit" if last_digit_apart(written, theirs) else "other"] += 1
    return {task: counts for task, counts in found.items() if counts["places"]}


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("dataset", type=Path, help="a prepared set (its train.jsonl or test.jsonl is read)")
    parser.add_argument("--every", type=int, default=1, help="read every N-th row")
    args = parser.parse_args()
    files = [args.dataset / name for name in ("train.jsonl", "test.jsonl") if (args.dataset / name).is_file()]
    if not files:
        raise SystemExit(f"{args.dataset} holds no train.jsonl or test.jsonl: give a prepared data set")
    rows = [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines() if line.strip()]
    print("| task | places | exact | last digit apart | other |\n|---|---:|---:|---:|---:|")
    total: Counter = Counter()
    for task, counts in sorted(agreement(rows, args.every).items()):
        total.update(counts)
        print(f"| {task} | " + " | ".join(str(counts[k]) for k in COLUMNS) + " |")
    print("| all | " + " | ".join(str(total[k]) for k in COLUMNS) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
