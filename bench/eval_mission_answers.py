"""Answer accuracy over long missions, with the oracle and blind baselines (issue 30, point 4).

For each (mission, store) pair (a mission of bench/make_mission.py and the memory store the node wrote
while replaying it, bench/bench_mission_memory.py), every labelled question is put as the node's
search_memory question puts it: the key frames RobotHistory.search retrieves from the store (opened read
only, the node's default settings), their descriptions by the mission's GROUND-TRUTH PERCEPTION (a
measuring instrument, not a VLM), the reasoner prompt the node builds. Answered by the mission oracle
(reads the prompt text only), over the retrieved key frames and over the evidence key frames, and by the
options-only and chance baselines; with ``--lm`` also by that LM (question-only and full prompt). See
embodied_r_training.eval.mission_answers.

Usage::

    python bench/eval_mission_answers.py --mission out/missions/m5-seed0 --store /tmp/.../memory.sqlite
    python bench/eval_mission_answers.py --pair out/missions/m5-seed0 S5 --pair out/missions/m60-seed0 S60
        [--lm $EMBODIED_R_SMOLLM2 --lm-questions 8] [--json out/mission_answers.json]

Prints one markdown table per mission; with several pairs, also the table against mission length.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path

# Run from a checkout without installing the package.
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "training")]

from embodied_r_training.eval.mission_answers import (  # noqa: E402
    MissionAnswersConfig,
    answers_markdown,
    evaluate_mission,
    length_markdown,
    load_pipeline,
)
from embodied_r_training.eval.mission_recall import MissionRecallError  # noqa: E402
from embodied_r_training.eval.mission_store import build_store  # noqa: E402

from embodied_r_ros.backends.base import BackendError  # noqa: E402
from embodied_r_ros.config import ModelConfig  # noqa: E402
from embodied_r_ros.memory.read_only import ReadOnlyMemory  # noqa: E402
from embodied_r_ros.memory.records import MemoryStoreError  # noqa: E402
from embodied_r_ros.memory.text_embedding import E5Embedder, EmbeddingError  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags; --mission/--store or one --pair at least."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mission", type=Path, action="append", default=[],
        help="a mission directory; with --store, that store, else its memory built here in one process "
        "(eval/mission_store.py, kept as <mission>/memory.sqlite); repeatable without --store",
    )  # fmt: skip
    parser.add_argument("--store", type=Path, help="the node's memory store of the one --mission")
    parser.add_argument(
        "--pair", nargs=2, action="append", default=[], metavar=("MISSION", "STORE"), type=Path,
        help="a mission and its store; repeat for the table against mission length",
    )  # fmt: skip
    parser.add_argument("--lm", help="an LM (directory or name) to answer too: question-only and full prompt")
    parser.add_argument(
        "--lm-questions", type=int, default=0, help="the LM answers the first N questions (0: all)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=256, help="the LM's new tokens per answer")
    parser.add_argument(
        "--no-sightings", action="store_true",
        help="the similarity search alone (memory.search_sightings false), for counts and sightings too",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write every question's answers and the metrics here")
    args = parser.parse_args(argv)
    if args.store is not None and len(args.mission) != 1:
        parser.error("--store goes with exactly one --mission")
    args.pair[:0] = [[mission, args.store] for mission in args.mission]  # store None: built here
    if not args.pair:
        parser.error("give --mission DIR [--store PATH], or --pair DIR PATH (repeatable)")
    if args.lm_questions < 0:
        parser.error(f"--lm-questions must be >= 0, got {args.lm_questions}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Evaluate every pair, print the tables, write the JSON; 2 when a pair cannot be evaluated."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    lm = ModelConfig(model=args.lm, max_new_tokens=args.max_new_tokens) if args.lm else None
    config = MissionAnswersConfig(lm=lm, lm_questions=args.lm_questions)
    if args.no_sightings:
        config = replace(config, search=replace(config.search, sightings=False))
    results = []
    try:
        embedder = E5Embedder()
        for mission, store in args.pair:
            store = store or build_store(mission, embedder)
            pipeline = load_pipeline(mission, config)
            try:
                with ReadOnlyMemory(store) as memory:
                    results.append(evaluate_mission(mission, memory, embedder, config, pipeline))
            finally:
                if pipeline is not None:
                    pipeline.close()
            print(answers_markdown(results[-1]))
    except (MissionRecallError, MemoryStoreError, EmbeddingError, BackendError, ValueError) as exc:
        print(f"eval_mission_answers: {exc}", file=sys.stderr)
        return 2
    if len(results) > 1:
        print("### Against mission length\n")
        print(length_markdown(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "missions": [r.to_dict() for r in results],
        }
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
