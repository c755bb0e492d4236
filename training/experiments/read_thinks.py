"""Read a reasoner's held-out answers question by question: its goals beside the blind rows, where the
answer letter is not the option its think concludes, and a seeded sample of whole completions.

A table says how often a model is right; only its thinks say whether it reasons (copies values, does the
arithmetic, concludes, then writes the concluded letter) or guesses. Run after ``reasoner.py --parts main``::

    python training/experiments/read_thinks.py out/reasoner/eval/sft [--sample 20] [--task abs_distance]

``--blind`` names the blind rows' evaluation directories (default: the kept ones in results/reasoner/eval),
``--test`` the held-out questions (their options).
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEPT = REPO / "results" / "reasoner" / "eval"
BLIND = ("options_only", "chance", "constant")


def main(argv: list[str] | None = None) -> int:
    from embodied_r_training.eval.compare import load_run
    from embodied_r_training.eval.goals import check_goals, goals_markdown

    from embodied_r_ros.reasoning.answers import parse_completion
    from embodied_r_ros.reasoning.conclusion import concluded_option

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="an `embodied-r eval` output directory (predictions.jsonl)")
    parser.add_argument("--blind", type=Path, nargs="+", default=[KEPT / name for name in BLIND],
                        help="the blind rows' evaluation directories; the first is options-only")  # fmt: skip
    test = REPO / "out" / "reasoner" / "data" / "test_all" / "test.jsonl"
    parser.add_argument("--test", type=Path, default=test, help="the held-out questions (their options)")
    parser.add_argument("--sample", type=int, default=20, help="completions shown (seeded)")
    parser.add_argument("--task", default="", help="show completions of this task only")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rows = [json.loads(line) for line in args.test.read_text(encoding="utf-8").splitlines() if line.strip()]
    options = {row["id"]: row.get("options") or [] for row in rows}
    run = load_run(f"{args.run.name}={args.run}")
    blind = [load_run(f"{path.name}={path}") for path in args.blind]
    print(goals_markdown(args.run.name, check_goals(run, blind, blind[0], options)))

    disagree: Counter[str] = Counter()
    for question, prediction in run.predictions.items():
        if prediction["form"] == "mc":
            concluded = concluded_option(parse_completion(prediction["completion"]).think, options[question])
            disagree[prediction["task"]] += concluded != prediction.get("answer")
    print(
        "MC answers whose letter is not the option the think concludes, by task:",
        dict(disagree.most_common()),
    )

    shown = [p for p in run.predictions.values() if not args.task or p["task"] == args.task]
    for p in random.Random(args.seed).sample(shown, min(args.sample, len(shown))):
        print("=" * 40, p["id"], p["task"], p["form"], f"truth {p['solution']}", f"answer {p.get('answer')}",
              f"score {p['score']}")  # fmt: skip
        print(p["completion"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
