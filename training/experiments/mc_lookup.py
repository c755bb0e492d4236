"""Where a reasoner's multiple-choice answers go wrong: the reasoning, or the letter.

The reasoner's think ends by naming an option ("The nearest option is C (2.1 m)", "So the order is white
tv, green bed, white table. That is option C."). This script reads kept predictions beside the held-out
data set's options and, for every multiple-choice record, finds the option whose text the think names last.
It then counts, per system:

* ``letter``: the answer letter is right (the MC accuracy in the tables);
* ``named``: the option the think names is the right one (the reasoning reached the right value);
* ``agree``: the answer letter is the letter of the option the think names (the lookup step);
* the spread of answer letters.

A diagnosis, not a score: ``named`` reads the option from the think with a string match, which the model
was never asked to satisfy. Usage::

    python training/experiments/mc_lookup.py --data out/reasoner/data/test_all/test.jsonl \\
        --predictions results/reasoner/eval --systems sft,grpo
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path
from typing import Any

from embodied_r_ros.reasoning.options import OPTION_LETTERS

LETTERS = OPTION_LETTERS[:4]  # the probe's four options
THINK = re.compile(r"<think>(.*?)</think>", re.S)


def named_option(think: str, options: list[str]) -> int | None:
    """Index of the option the think names last (the latest end of a match, then the longest), or None."""
    text = think.lower()
    best: tuple[int, int] | None = None
    index = None
    for i, option in enumerate(options):
        at = text.rfind(option.lower())
        if at < 0:
            continue
        key = (at + len(option), len(option))
        if best is None or key > best:
            best, index = key, i
    return index


def diagnose(records: list[dict[str, Any]], options: dict[str, list[str]]) -> dict[str, Any]:
    """Counts for one system's multiple-choice records (see the module docstring)."""
    n = letter = named = agree = 0
    letters: collections.Counter[str] = collections.Counter()
    per_task: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for record in records:
        if record["form"] != "mc" or record["id"] not in options:
            continue
        n += 1
        answer = record.get("answer") or "-"
        letters[answer] += 1
        found = THINK.search(record.get("completion") or "")
        index = named_option(found.group(1), options[record["id"]]) if found else None
        named_letter = LETTERS[index] if index is not None else None
        task = per_task[record["task"]]
        task["n"] += 1
        for key, hit in (
            ("letter", answer == record["solution"]),
            ("named", named_letter == record["solution"]),
            ("agree", named_letter is not None and answer == named_letter),
        ):
            task[key] += hit
        letter += answer == record["solution"]
        named += named_letter == record["solution"]
        agree += named_letter is not None and answer == named_letter
    return {
        "n": n,
        "letter": letter / max(n, 1),
        "named": named / max(n, 1),
        "agree": agree / max(n, 1),
        "letters": dict(sorted(letters.items())),
        "tasks": {task: {k: v for k, v in c.items()} for task, c in sorted(per_task.items())},
    }


def markdown(results: dict[str, dict[str, Any]]) -> str:
    """One row per system, then per task: counts as percentages."""
    lines = [
        "| system | MC n | answer letter right | think names the right option "
        "| letter = the named option | answer letters |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for system, r in results.items():
        spread = " ".join(f"{k} {v}" for k, v in r["letters"].items())
        lines.append(
            f"| {system} | {r['n']} | {100 * r['letter']:.1f} | {100 * r['named']:.1f} | "
            f"{100 * r['agree']:.1f} | {spread} |"
        )
    tasks = sorted({t for r in results.values() for t in r["tasks"]})
    lines += ["", "| task | " + " | ".join(f"{s}: letter / named" for s in results) + " |"]
    lines.append("|---|" + "---:|" * len(results))
    for task in tasks:
        cells = []
        for r in results.values():
            c = r["tasks"].get(task, {})
            total = max(c.get("n", 0), 1)
            cells.append(f"{100 * c.get('letter', 0) / total:.0f} / {100 * c.get('named', 0) / total:.0f}")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="held-out data set (test.jsonl)")
    parser.add_argument("--predictions", type=Path, required=True, help="holds <system>/predictions.jsonl")
    parser.add_argument("--systems", default="sft,grpo", help="comma-separated systems under --predictions")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args()
    with args.data.open() as f:
        options = {r["id"]: r["options"] for r in map(json.loads, f) if r.get("options")}
    results = {}
    for system in args.systems.split(","):
        with (args.predictions / system / "predictions.jsonl").open() as f:
            results[system] = diagnose([json.loads(line) for line in f], options)
    print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
