"""The mission benchmark (issue 44): memory questions over missions of 5 to 120 minutes, one command.

For every length (``--lengths``, minutes) and seed (``--seeds``; the first, ``--choice-seed``, is the one the
memory's settings were chosen on, the others are used for no choice):

1. the mission (bench/make_mission.py's writer, ``--questions-per-kind`` labelled questions per kind at most)
   in ``--missions/m<L>-seed<S>``, written unless it is there; while a kind has fewer than
   ``--min-per-kind`` questions (a 5-minute mission passes four or five rooms), more missions of the seed's
   group (seeds S + 100, S + 200, ...; at most ``--most-missions``), pooled as one row;
2. its durable memory, built in one process as the node builds it
   (:mod:`embodied_r_training.eval.mission_store`), kept in the mission's directory;
3. every labelled question as the node's ``search_memory`` question puts it
   (:func:`embodied_r_training.eval.mission_answers.evaluate_mission`): the key frames the node's search
   retrieves (the sightings index for counts and first/last sightings, similarity otherwise), their
   GROUND-TRUTH descriptions (a measuring instrument, not a VLM), answered by the mission oracle (reads the
   prompt text only) over the retrieved key frames and over the evidence key frames; the blind rows
   (the best constant per kind, options-only) with their rules chosen on the OTHER seeds' missions of
   the same length, and chance.

Writes ``--out``/results.json (every question), table.md (per length, seed and kind: n, recall@k of the
search's hits, evidence reached, each system's score) and kinds.png (each kind's scores against mission
length). Run::

    python bench/mission_benchmark.py [--lengths 5 20 60 120] [--seeds 0 1] [--questions-per-kind 40]
        [--min-per-kind 40] [--most-missions 6] [--missions out/missions/bench] [--out out/mission_benchmark]
        [--lm DIR --lm-questions N]
    python bench/mission_benchmark.py --from-results RUN/results.json [...] --out DIR  # the table again
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # rendering and the oracle run on one core

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "training")]

from embodied_r_training.eval.mission_answers import (  # noqa: E402
    ALL,
    CHANCE,
    CONSTANT,
    LM,
    OPTIONS_ONLY,
    ORACLE,
    ORACLE_EVIDENCE,
    QUESTION_ONLY,
    MissionAnswers,
    MissionAnswersConfig,
    calibration_records,
    evaluate_mission,
    kind_rows,
    load_pipeline,
)
from embodied_r_training.eval.mission_store import build_store  # noqa: E402
from embodied_r_training.synth.mission import MissionConfig  # noqa: E402
from embodied_r_training.synth.mission_writer import write_mission  # noqa: E402

from embodied_r_ros.config import model_config  # noqa: E402
from embodied_r_ros.memory.read_only import ReadOnlyMemory  # noqa: E402
from embodied_r_ros.memory.text_embedding import E5Embedder  # noqa: E402

logger = logging.getLogger("mission_benchmark")
BLIND = (CONSTANT, OPTIONS_ONLY, CHANCE)
SHOWN = (ORACLE, ORACLE_EVIDENCE, *BLIND)
WITH_LM = (*SHOWN, QUESTION_ONLY, LM)  # with --lm: the reasoner with and without the descriptions


def shown(results: list[tuple[int, bool, MissionAnswers]]) -> tuple[str, ...]:
    """The systems of the table: the LM's rows too when one answered."""
    return WITH_LM if any(r.lm for _, _, r in results) else SHOWN


def mission_dir(missions: Path, minutes: float, seed: int) -> Path:
    return missions / f"m{minutes:g}-seed{seed}"


def ensure_mission(missions: Path, minutes: float, seed: int, per_kind: int) -> Path:
    """The mission of (minutes, seed), written unless there; a mission written with another number of
    questions per kind is an error naming the directory (remove it to write it again)."""
    directory = mission_dir(missions, minutes, seed)
    if (directory / "mission.json").is_file():
        config = json.loads((directory / "mission.json").read_text())["config"]
        if config.get("questions_per_kind") != per_kind:
            raise SystemExit(f"{directory} holds a mission with {config.get('questions_per_kind')} questions "
                             f"per kind, not {per_kind}; remove it or pass --missions elsewhere")  # fmt: skip
        return directory
    write_mission(MissionConfig(minutes=minutes, seed=seed, questions_per_kind=per_kind), directory)
    return directory


def kinds_asked(directory: Path) -> dict[str, int]:
    """The questions a mission kept per kind."""
    counts = json.loads((directory / "mission.json").read_text())["question_counts"]
    return {kind: count["kept"] for kind, count in counts.items()}


def ensure_missions(
    missions: Path, minutes: float, seed: int, per_kind: int, min_per_kind: int, most: int
) -> list[Path]:
    """The missions of (minutes, seed): the seed's own, then while a kind has fewer than ``min_per_kind``
    questions in all (short missions pass few rooms), more of that seed's group (seeds ``seed + 100 i``,
    i = 1, 2, ...; at most ``most`` missions)."""
    directories = [ensure_mission(missions, minutes, seed, per_kind)]
    totals = kinds_asked(directories[0])
    while min(totals.values()) < min_per_kind and len(directories) < most:
        directories.append(ensure_mission(missions, minutes, seed + 100 * len(directories), per_kind))
        for kind, n in kinds_asked(directories[-1]).items():
            totals[kind] = totals.get(kind, 0) + n
    return directories


def pooled(results: list[MissionAnswers]) -> MissionAnswers:
    """Several missions of one length and seed group as one: their questions together."""
    if len(results) == 1:
        return results[0]
    first = results[0]
    return MissionAnswers(
        mission=" + ".join(r.mission for r in results),
        minutes=first.minutes,
        store=" + ".join(r.store for r in results),
        questions=[q for r in results for q in r.questions],
        metrics=first.metrics,  # the systems scored (the rows average the questions' own scores)
        lm=first.lm,
        blind_rules=first.blind_rules,
    )


def table(results: list[tuple[int, bool, MissionAnswers]]) -> str:
    """Per length, seed and kind: n, recall@k, evidence reached (any / all), the scores."""
    systems = shown(results)
    header = ["min", "seed", "kind", "metric", "n", "recall@k", "reached (any / all)", *systems]
    if LM in systems:  # the LM may answer the first --lm-questions of each kind only: the others there too
        header += ["n (LM)", "oracle on the LM's", "best blind on the LM's"]
    lines = ["| " + " | ".join(header) + " |", "|---:|---|---|---|" + "---:|" * (len(header) - 4)]
    for seed, held_out, result in sorted(results, key=lambda r: (r[2].minutes, r[0])):
        for row in kind_rows(result):
            scores = [row.scores.get(s) for s in systems]
            cells = [f"{result.minutes:g}", f"{seed}{' (held out)' if held_out else ''}",
                     "**all**" if row.kind == ALL else row.kind, row.metric, str(row.n), f"{row.recall:.2f}",
                     f"{row.reached_any:.2f} / {row.reached_all:.2f}",
                     *(_cell(v) for v in scores)]  # fmt: skip
            if LM in systems:
                cells += [str(row.scored.get(LM, 0)), _cell(on_lm_questions(result, row.kind, ORACLE)),
                          _cell(best_blind_on_lm_questions(result, row.kind))]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def on_lm_questions(result: MissionAnswers, kind: str, system: str) -> float | None:
    """``system``'s mean score over the questions of ``kind`` (or all) that the LM answered."""
    values = [q.scores[system] for q in result.questions
              if LM in q.scores and system in q.scores and kind in (ALL, q.kind)]  # fmt: skip
    return sum(values) / len(values) if values else None


def best_blind_on_lm_questions(result: MissionAnswers, kind: str) -> float | None:
    """The best blind row's mean over the questions the LM answered (the LM's like-for-like bar)."""
    scores = [v for s in BLIND if (v := on_lm_questions(result, kind, s)) is not None]
    return max(scores) if scores else None


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def plot(results: list[tuple[int, bool, MissionAnswers]], path: Path) -> Path:
    """Each kind's oracle (retrieved, evidence), best blind row and recall@k against mission length; the
    held-out seed solid, the choice seed dotted."""
    from matplotlib.figure import Figure

    kinds = [row.kind for row in kind_rows(results[0][2])]
    figure = Figure(figsize=(4.0 * len(kinds), 3.6), dpi=100, layout="constrained")
    axes = figure.subplots(1, len(kinds), squeeze=False)[0]
    for ax, kind in zip(axes, kinds, strict=True):
        for seed in sorted({s for s, _, _ in results}):
            runs = sorted((r for s, _, r in results if s == seed), key=lambda r: r.minutes)
            held_out = next(h for s, h, _ in results if s == seed)
            style = "-" if held_out else ":"
            rows = [next(row for row in kind_rows(r) if row.kind == kind) for r in runs]
            x = [r.minutes for r in runs]
            series = {
                "oracle (retrieved)": [row.scores.get(ORACLE) for row in rows],
                "oracle (evidence)": [row.scores.get(ORACLE_EVIDENCE) for row in rows],
                "best blind": [max((row.scores.get(s) or 0.0) for s in BLIND) for row in rows],
                "recall@k": [row.recall for row in rows],
            }
            if runs[0].lm:
                series["reasoner LM"] = [row.scores.get(LM) for row in rows]
            for (label, y), colour in zip(series.items(), ("C0", "C2", "C3", "C7", "C1"), strict=False):
                ax.plot(x, y, style, color=colour, marker="o", label=f"{label}, seed {seed}")
        ax.set_xscale("log")
        ax.set_xticks([r.minutes for _, _, r in results], [f"{r.minutes:g}" for _, _, r in results])
        ax.minorticks_off()  # the log axis' minor labels ("3 x 10^1") crowd the lengths
        ax.set_ylim(0, 1.05)
        ax.set_title("all kinds" if kind == ALL else kind)
        ax.set_xlabel("mission minutes")
    axes[0].set_ylabel("accuracy / MRA / recall")
    axes[-1].legend(fontsize=6, loc="lower left")
    figure.savefig(path)
    return path


def write_tables(results: list[tuple[int, bool, MissionAnswers]], out: Path) -> str:
    """``out``/table.md and ``out``/kinds.png from the evaluated groups; returns the table."""
    text = table(results)
    (out / "table.md").write_text(text)
    plot(results, out / "kinds.png")
    return text


def rewrite_tables(paths: list[Path], out: Path) -> int:
    """The table and plot of kept ``results.json`` files (one run's, or several runs' together, e.g. one per
    length) written again to ``out``."""
    missions = [m for path in paths for m in json.loads(path.read_text())["missions"]]
    results = [(m["seed"], m["held_out"], MissionAnswers.from_dict(m)) for m in missions]
    out.mkdir(parents=True, exist_ok=True)
    print(write_tables(results, out))
    print(f"wrote {out}/table.md, kinds.png from {', '.join(map(str, paths))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=float, nargs="+", default=[5, 20, 60, 120], help="minutes")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="the first is the choice seed")
    parser.add_argument("--questions-per-kind", type=int, default=40)
    parser.add_argument(
        "--min-per-kind",
        type=int,
        default=40,
        help="more missions of a seed's group while a kind has fewer questions (40)",
    )
    parser.add_argument("--most-missions", type=int, default=6, help="missions per length and seed, most (6)")
    parser.add_argument("--missions", type=Path, default=Path("out/missions/bench"))
    parser.add_argument("--out", type=Path, default=Path("out/mission_benchmark"))
    parser.add_argument(
        "--lm",
        help="a reasoner LM (directory or name) to answer too: question-only and full "
        "prompt (its rows beside the oracle and blind rows)",
    )
    parser.add_argument(
        "--lm-questions",
        type=int,
        default=0,
        help="the LM answers the first N questions of each kind in each mission (0: all)",
    )
    parser.add_argument(
        "--lm-seeds",
        type=int,
        nargs="*",
        help="the seed groups the LM answers (default: the held-out ones, every seed but the first)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=400, help="the LM's completion limit (400)")
    parser.add_argument(
        "--dtype",
        default="bfloat16",
        help="the LM's weights dtype (bfloat16: as the reasoner's held-out evaluations run on the CPU)",
    )
    parser.add_argument(
        "--describe-candidates",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="describe every 1 fps candidate, or the key frames only (memory.describe_candidates; default: "
        "the node's, every candidate)",
    )
    parser.add_argument(
        "--from-results",
        type=Path,
        nargs="+",
        help="write table.md and kinds.png to --out again from results.json files this command wrote, "
        "several runs' together (no mission is run)",
    )
    args = parser.parse_args(argv)
    if args.from_results:
        return rewrite_tables(args.from_results, args.out)
    if len(args.seeds) < 2:
        parser.error("--seeds needs two at least: the blind rules are chosen on the other seeds' missions")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    started = time.perf_counter()
    embedder = E5Embedder()
    lm = model_config(args.lm, max_new_tokens=args.max_new_tokens, dtype=args.dtype) if args.lm else None
    if lm is not None:
        from embodied_r_ros.backends.cpu_bf16 import SlowBf16Error, check_model_bf16

        try:
            check_model_bf16(lm, "give --dtype float32")
        except SlowBf16Error as exc:
            parser.error(str(exc))
    config = MissionAnswersConfig(lm=lm, lm_questions=args.lm_questions)
    lm_seeds = set(args.seeds[1:] if args.lm_seeds is None else args.lm_seeds)
    if lm is not None:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)  # the LM takes most of the time: every core
    results: list[tuple[int, bool, MissionAnswers]] = []
    for minutes in args.lengths:
        per_kind = args.questions_per_kind
        groups = {
            s: ensure_missions(args.missions, minutes, s, per_kind, args.min_per_kind, args.most_missions)
            for s in args.seeds
        }
        for seed, directories in groups.items():
            others = [d for s, ds in groups.items() if s != seed for d in ds]
            calibration = calibration_records(others)
            evaluated = []
            for directory in directories:
                store = build_store(directory, embedder, candidates=args.describe_candidates)
                asked = config if seed in lm_seeds else replace(config, lm=None)
                pipeline = load_pipeline(directory, asked)  # None without --lm
                with ReadOnlyMemory(store) as memory:
                    evaluated.append(
                        evaluate_mission(directory, memory, embedder, asked, pipeline, calibration)
                    )
            result = pooled(evaluated)
            results.append((seed, seed != args.seeds[0], result))
            logger.info("%g min, seed %d: %d missions, %d questions", minutes, seed, len(directories),
                        len(result.questions))  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "seconds": round(time.perf_counter() - started, 1),
        "choice_seed": args.seeds[0],
        "missions_per_group": {f"{r.minutes:g} min, seed {s}": r.mission.split(" + ") for s, _, r in results},
        "missions": [{"seed": s, "held_out": h, **r.to_dict()} for s, h, r in results],
    }
    (args.out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    print(write_tables(results, args.out))
    print(f"wrote {args.out}/results.json, table.md, kinds.png in {report['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
