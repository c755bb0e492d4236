"""Does GRPO make a real pretrained LM a better spatial reasoner? SmolLM2-135M-Instruct on the CPU.

One command reproduces the whole table and the plots (resumable: each finished stage is skipped, an
interrupted GRPO run continues from its last checkpoint):

    python training/experiments/smollm2_grpo.py --out out/smollm2 [--parts main,ood,rotate,curriculum]

Perception is simulator ground truth (``prepare --perceiver ground_truth``): a measuring instrument that
says what a perfect VLM would say, so the numbers measure the REASONER, as in the paper's analysis that
separates perception from reasoning. It is not a VLM and no figure here is a VLM's.

1. Data: ``embodied-r synth`` writes four sets of scenes from seeds used nowhere else: training and
   held-out test scenes, indoor (rooms walked through) and outdoor (drone flights); ``embodied-r prepare``
   with ground-truth perception turns each into a data set. ``train_all``/``test_all`` join indoor and
   outdoor (ids prefixed ``indoor/``, ``outdoor/``).
2. Runs (``embodied-r train`` code, config ``--config``, default ``training/configs/smollm2_cpu.yaml``):
   * ``grpo_all``: the format warm start, then GRPO with the paper's staged rewards on ``train_all``;
     its ``warm_start/`` is the "warm start only" system;
   * ``sft_all``: supervised fine-tuning on the same questions with the ground-truth answers as targets
     (``method: sft``), the same budget in questions seen (warm start + GRPO prompts);
   * ``--parts ood``: the same pair trained on indoor scenes only and on outdoor scenes only;
   * ``--parts rotate``: ``grpo_all_rotated``, GRPO as ``grpo_all`` but each completion of a group sees
     the options in another rotation (``data.rotate_options``), against the main table's systems;
   * ``--parts curriculum``: ``grpo_all_curriculum``, GRPO with rotated options and a curriculum by task
     (:data:`CURRICULUM`: counting first, then the metric read-offs, then every task), against the main
     table's systems and the rotated run.
3. Evaluation (``embodied-r eval`` on the held-out test scenes, greedy, the GRPO completion length):
   chance, untrained SmolLM2, warm start only, GRPO, SFT; with ``ood`` each indoor/outdoor-trained model on
   both test sets. ``embodied-r compare`` makes the table with 95 % bootstrap intervals and paired
   differences against the untrained and warm-start-only models.

Writes ``OUT/tables/main/comparison.{md,json,png}``, ``OUT/tables/ood.{md,json}``, reward and length
curves of the GRPO run in ``OUT/runs/grpo_all/plots/``, ``OUT/summary.json`` (settings, stage times), and
copies the figures to ``--figures`` (default docs/figures/).

Results kept across machines (``--results``, default ``results/smollm2``, committed):
on 2 CPU cores the whole experiment takes longer than one working session on a fresh machine, so each
finished evaluation (metrics, predictions) and each GRPO run's log is copied there with its provenance: the
commit it ran from and the repository files it depended on (every module of the project the process had
loaded, the config, this script), and its recipe (:func:`recipe`: the resolved training config, the base
model's files, the prepared data sets, the other arguments). A later run restores a kept result instead of
recomputing it only for an equal recipe and while ``git diff`` shows none of those files changed since that
commit (see kept.py), and skips a training run whose evaluations are all restored. Any change to the code,
the config, the model, the data or the arguments means a rerun. Results in OUT
carry the same record (``provenance.json`` in each evaluation and run directory): one that other code left
there is moved aside (``NAME.stale-TIME``) and recomputed, never reused or kept as this code's.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kept import KeptResults
from steps import Stages, cli, evaluate, experiment_recipe, grpo_log, join_sets, restorable

logger = logging.getLogger("smollm2_grpo")

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "training" / "configs" / "smollm2_cpu.yaml"
DEFAULT_RESULTS = REPO / "results" / "smollm2"
ENVS = ("indoor", "outdoor")
# Scene sets: (role, environment) -> synth seed. Test seeds are never used for training data.
SEEDS = {
    ("train", "indoor"): 1001,
    ("train", "outdoor"): 1002,
    ("test", "indoor"): 2001,
    ("test", "outdoor"): 2002,
}
LABELS = {
    "chance": "chance",
    "untrained": "untrained SmolLM2",
    "warm": "warm start only",
    "grpo": "GRPO (staged rewards)",
    "sft": "SFT (same questions)",
}
# Curriculum by task (``--parts curriculum``) over the 48 steps: questions whose answer can be read off the
# descriptions first (counting the entries of a category), then the metric ones (sizes and distances the
# descriptions give in metres), then every task (directions, order, turns, route).
CURRICULUM = (
    "[{start_step: 0, tasks: [object_count]},"
    " {start_step: 16, tasks: [object_count, object_size, abs_distance, ego_distance]},"
    " {start_step: 32, tasks: all}]"
)


@dataclass(frozen=True)
class Variant:
    """A GRPO run like ``grpo_all`` with config ``overrides``: ``grpo_all_<suffix>``, evaluated as
    ``grpo_<suffix>``, in a table of its own next to the main table's systems and ``baselines`` (more
    evaluations it is compared with)."""

    suffix: str
    overrides: tuple[str, ...]
    label: str
    baselines: tuple[str, ...] = ()


# Training variants: --parts name -> variant.
VARIANTS = {
    "rotate": Variant("rotated", ("data.rotate_options=true",), "GRPO, rotated options"),
    "curriculum": Variant(
        "curriculum", ("data.rotate_options=true", f"curriculum={CURRICULUM}"),
        "GRPO, rotated options + curriculum", baselines=("grpo_rotated",),
    ),
}  # fmt: skip
VARIANTS_BY_EVAL = {f"grpo_{v.suffix}": v for v in VARIANTS.values()}


# ----------------------------------------------------------------------------------------------------
# Data


def build_data(out: Path, args: argparse.Namespace, stages: Stages) -> dict[str, Path]:
    """The four prepared sets and the two joined ones (see the module docstring); returns name -> dir."""
    data: dict[str, Path] = {}
    for (role, env), seed in SEEDS.items():
        name = f"{role}_{env}"
        synth, prepared = out / "synth" / name, out / "data" / name
        scenes = args.train_scenes if role == "train" else args.test_scenes
        command = ["synth", "--out", str(synth), "--scenes", str(scenes), "--seed", str(seed)]
        command += ["--size", args.size, "--duration", str(args.duration)]
        stages.run(f"synth {name}", synth / "questions.jsonl", lambda c=command, e=env: cli(
            [*c, *(["--outdoor"] if e == "outdoor" else [])]
        ))  # fmt: skip
        fractions = "1,0,0" if role == "train" else "0,0,1"
        prepare = ["prepare", str(synth / "questions.jsonl"), "--out", str(prepared), "--perceiver"]
        prepare += [
            "ground_truth",
            "--split",
            fractions,
            "--max-keyframes",
            str(args.max_keyframes),
            "--no-progress",
        ]
        stages.run(f"prepare {name}", prepared / "summary.json", lambda p=prepare: cli(p))
        data[name] = prepared
    for role, split in (("train", "train"), ("test", "test")):
        joined = out / "data" / f"{role}_all"
        parts = {env: data[f"{role}_{env}"] for env in ENVS}
        stages.run(
            f"join {role}_all",
            joined / f"{split}.parquet",
            lambda p=parts, s=split, j=joined: join_sets(p, s, j),
        )
        data[f"{role}_all"] = joined
    return data


# ----------------------------------------------------------------------------------------------------
# Training


def sft_steps(config: Any) -> int:
    """SFT steps (of warm_start.batch_size questions) that see as many questions as warm start + GRPO."""
    grpo = config.grpo
    prompts_per_step = int(grpo["per_device_train_batch_size"]) * int(
        grpo.get("gradient_accumulation_steps", 1)
    )
    prompts_per_step //= int(grpo["num_generations"])
    seen = config.warm_start.steps * config.warm_start.batch_size + int(grpo["max_steps"]) * prompts_per_step
    return -(-seen // config.warm_start.batch_size)


def train_runs(
    out: Path,
    args: argparse.Namespace,
    data: dict[str, Path],
    stages: Stages,
    kept: KeptResults,
    envs: list[str],
    methods: list[str],
    needed: Any = lambda name: True,
    variant: Variant | None = None,
) -> dict[str, Path]:
    """``methods`` (grpo, sft) on each training set in ``envs`` ("all", "indoor", "outdoor"), those
    ``needed(name)`` says are (a run whose evaluations were all restored is not); returns run name -> dir.
    ``variant`` (a value of :data:`VARIANTS`) adds its overrides and suffixes the run names."""
    from embodied_r_training.rl.train import NODE_PARAMS, train
    from embodied_r_training.rl.train_config import load_train_config

    base = load_train_config(args.config)
    runs: dict[str, Path] = {}
    for env in envs:
        for method in methods:
            name = f"{method}_{env}" + (f"_{variant.suffix}" if variant else "")
            run_dir = out / "runs" / name
            overrides = [f"output_dir={run_dir}", f"data.path={data[f'train_{env}']}", f"model={args.model}"]
            overrides += list(variant.overrides) if variant else []
            if method == "sft":
                overrides += ["method=sft", f"warm_start.steps={sft_steps(base)}"]
            config = load_train_config(args.config, overrides)
            if needed(name):
                kept.claim(run_dir)  # a run that other code left is set aside, one of this code resumes
                if stages.run(
                    f"train {name}", run_dir / "final" / NODE_PARAMS, lambda c=config: train(c, resume=True)
                ):
                    kept.record(run_dir)
            else:
                logger.info("train %s: not needed (its evaluations were restored)", name)
            runs[name] = run_dir
    return runs


# ----------------------------------------------------------------------------------------------------
# Evaluation


def systems(args: argparse.Namespace, env: str, variant: Variant | None = None) -> dict[str, list[str]]:
    """The eval arguments of each system trained on ``env`` (plus chance/untrained for "all")."""
    from embodied_r_training.rl.warm_start import WARM_START_DIR

    runs = args.out.resolve() / "runs"
    suffix = f"_{variant.suffix}" if variant else ""
    grpo, sft = runs / f"grpo_{env}{suffix}", runs / f"sft_{env}"
    found = {
        "warm": ["--lm", str(grpo / WARM_START_DIR)],
        "grpo": ["--lm", str(grpo / WARM_START_DIR), "--adapter", str(grpo / "final")],
        "sft": ["--lm", str(sft / "final")],
    }
    if not (grpo / "final" / "adapter_config.json").is_file():  # full fine-tuning: final holds the model
        found["grpo"] = ["--lm", str(grpo / "final")]
    if env == "all":
        untrained = ["--system", "untrained", "--lm", str(args.model)]
        found = {"chance": ["--system", "chance"], "untrained": untrained, **found}
    return found


def eval_flags(args: argparse.Namespace) -> list[str]:
    """The ``embodied-r eval`` flags every system of this experiment is evaluated with."""
    flags = ["--device", "cpu", "--max-new-tokens", str(args.max_new_tokens), "--batch-size"]
    return [*flags, str(args.eval_batch), "--no-progress", "--dtype", args.eval_dtype]


def lenient_mc(eval_dir: Path, dataset: Path) -> dict[str, Any] | None:
    """Multiple-choice accuracy when a completion WITHOUT an ``<answer>`` block is read whole (the letter
    anywhere in it, :func:`extract_choice`'s rules). The tables score as the node does (answer tags only);
    this shows how much of a model's score is the format, e.g. for the untrained LM, which rarely writes
    the tags. None for systems that generate nothing (chance)."""
    from embodied_r_training.eval.stats import bootstrap_ci

    from embodied_r_ros.reasoning.answers import extract_choice, parse_completion

    records = {}
    for line in (dataset / "test.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            records[row["id"]] = row
    scores, rescued = [], 0
    for line in (eval_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        prediction = json.loads(line)
        options = records[prediction["id"]]["options"]
        if prediction["form"] != "mc":
            continue
        if not prediction["completion"]:
            return None
        parsed = parse_completion(prediction["completion"])
        text = parsed.answer or prediction["completion"]
        rescued += not parsed.answer
        scores.append(float(extract_choice(text, options) == prediction["solution"]))
    interval = bootstrap_ci(scores)
    return {**(interval.as_dict() if interval else {}), "read_whole": rescued, "n": len(scores)}


def ood_table(results: dict[tuple[str, str, str], Path], out: Path) -> dict[str, Any]:
    """In- vs out-of-distribution multiple-choice accuracy of SFT and GRPO, with bootstrap intervals."""
    from embodied_r_training.eval.compare import load_run, percent_with_ci
    from embodied_r_training.eval.stats import bootstrap_ci

    rows = []
    for (method, train_env, test_env), path in sorted(results.items()):
        run = load_run(str(path))
        mc = [p["score"] for p in run.predictions.values() if p["form"] == "mc"]
        interval = bootstrap_ci(mc)
        accuracy = interval.as_dict() if interval else None
        rows.append(
            {
                "method": method, "train": train_env, "test": test_env, "n": len(mc),
                "in_distribution": train_env == test_env, "mc_accuracy": accuracy,
            }
        )  # fmt: skip
    lines = [
        "| method | trained on | test: same environment (ID) | test: other environment (OOD) | OOD - ID |",
        "|---|---|---:|---:|---:|",
    ]
    for method in ("sft", "grpo"):
        for env in ENVS:
            cell = {r["in_distribution"]: r for r in rows if r["method"] == method and r["train"] == env}
            if len(cell) < 2:
                continue
            same, other = (
                f"{percent_with_ci(cell[k]['mc_accuracy'])} (n={cell[k]['n']})" for k in (True, False)
            )
            drop = 100 * (cell[False]["mc_accuracy"]["mean"] - cell[True]["mc_accuracy"]["mean"])
            lines.append(f"| {LABELS[method]} | {env} | {same} | {other} | {drop:+.1f} |")
    table = {"rows": rows, "markdown": "\n".join(lines) + "\n"}
    out.mkdir(parents=True, exist_ok=True)
    (out / "ood.json").write_text(json.dumps(table, indent=1) + "\n")
    (out / "ood.md").write_text(table["markdown"])
    return table


def variant_table(
    out: Path, args: argparse.Namespace, data: dict[str, Path], stages: Stages, kept: KeptResults, part: str
) -> dict[str, Any]:
    """The GRPO variant of ``--parts PART`` (:data:`VARIANTS`) next to the main table's systems and its
    baselines, whose evaluations must be in OUT/eval already (``--parts main,...``, or restored from the
    kept results). Writes ``OUT/tables/PART/`` and ``smollm2_<suffix>*.png`` figures."""
    from embodied_r_training.eval.compare import compare, load_run, write_comparison
    from embodied_r_training.eval.plots import plot_training_curves

    variant = VARIANTS[part]
    name = f"grpo_{variant.suffix}"
    labels = {**LABELS, **{b: VARIANTS_BY_EVAL[b].label for b in variant.baselines}, name: variant.label}
    evals = {key: out / "eval" / key for key in labels if key != name}
    restorable(kept, list(evals))
    missing = [k for k, p in evals.items() if not (p / "metrics.json").is_file() or not kept.vouched(p)]
    if missing:
        raise SystemExit(
            f"--parts {part} compares with {', '.join(evals)}; {', '.join(missing)} have no evaluation by "
            f"this code in {out / 'eval'}: run their parts first (e.g. --parts main,rotate,{part})"
        )
    needed = name not in restorable(kept, [name])
    runs = train_runs(out, args, data, stages, kept, ["all"], ["grpo"], lambda run: needed, variant=variant)
    system = systems(args, "all", variant=variant)["grpo"]
    evals[name] = evaluate(out, data["test_all"], name, system, eval_flags(args), stages, kept)
    against = [LABELS["untrained"], LABELS["warm"], LABELS["grpo"]] + [labels[b] for b in variant.baselines]
    result = compare([load_run(f"{labels[k]}={p}") for k, p in evals.items()], against)
    files = write_comparison(result, out / "tables" / part)
    run_dir = runs[f"grpo_all_{variant.suffix}"]
    curves = plot_training_curves(grpo_log(out, run_dir.name, kept), run_dir / "plots")
    args.figures.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(files[2], args.figures / f"smollm2_{variant.suffix}.png")
    for curve in curves:
        shutil.copyfile(curve, args.figures / f"smollm2_{variant.suffix}_{curve.name}")
    print((out / "tables" / part / "comparison.md").read_text())
    return result


# ----------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("out/smollm2"))
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="GRPO config (smollm2_cpu.yaml)")
    parser.add_argument("--model", type=Path, default=REPO / ".cache" / "models" / "smollm2",
                        help="the converted SmolLM2 directory (built here when missing)")  # fmt: skip
    parser.add_argument(
        "--parts",
        default="main,ood,rotate,curriculum",
        help="main (all scenes), ood (indoor vs outdoor), rotate (GRPO with rotated options), curriculum "
        "(rotated options + curriculum by task)",
    )
    parser.add_argument("--train-scenes", type=int, default=12, help="training scenes per environment")
    parser.add_argument(
        "--test-scenes", type=int, default=7, help="held-out scenes per environment (~25 q. each)"
    )
    parser.add_argument("--size", default="320x240", help="rendered image size (key frames are chosen on it)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per scene")
    parser.add_argument(
        "--max-keyframes",
        type=int,
        default=8,
        help="key frames per question (paper 32; prompt length on a CPU)",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=0, help="eval completion limit (0: the config's)"
    )
    parser.add_argument("--eval-batch", type=int, default=16)
    parser.add_argument(
        "--eval-dtype", default="bfloat16", help="eval weights (bfloat16: 2x faster on the CPU)"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--figures", type=Path, default=REPO / "docs" / "figures")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS,
                        help="kept results (committed; see the module docstring)")  # fmt: skip
    parser.add_argument("--no-keep", action="store_true", help="neither restore nor keep results")
    return parser.parse_args()


def main() -> int:
    import torch
    from embodied_r_training.eval.compare import compare, load_run, write_comparison
    from embodied_r_training.eval.plots import plot_training_curves
    from embodied_r_training.rl.train_config import load_train_config

    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts <= {"main", "ood", *VARIANTS, "data"}:
        raise SystemExit(f"--parts takes main, ood, {', '.join(VARIANTS)} (or data), got {args.parts!r}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = load_train_config(args.config)
    args.max_new_tokens = args.max_new_tokens or int(config.grpo["max_completion_length"])
    stages = Stages(out)
    if parts == {"data"}:
        build_data(out, args, stages)
        return 0
    if not (args.model / "config.json").is_file():
        stages.run(
            "convert SmolLM2", args.model / "config.json", lambda: cli(["models", "smollm2", str(args.model)])
        )
    data = build_data(out, args, stages)
    root = None if args.no_keep else args.results.resolve()
    kept = KeptResults(REPO, root, out, experiment_recipe(args, config, data), [Path(__file__), args.config])

    summary: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items()}, "tables": {}}
    if "main" in parts:
        # GRPO and its baselines first, then the SFT comparison: the main table is ready soonest.
        restored = restorable(kept, list(LABELS))
        needed = {"grpo_all": not {"warm", "grpo"} <= restored, "sft_all": "sft" not in restored}
        runs = train_runs(out, args, data, stages, kept, ["all"], ["grpo"], needed.get)
        evals = {}
        for key, system in systems(args, "all").items():
            if key == "sft":
                runs.update(train_runs(out, args, data, stages, kept, ["all"], ["sft"], needed.get))
            evals[key] = evaluate(out, data["test_all"], key, system, eval_flags(args), stages, kept)
        result = compare([load_run(f"{LABELS[k]}={p}") for k, p in evals.items()],
                         [LABELS["untrained"], LABELS["warm"]])  # fmt: skip
        for row, key in zip(result["systems"], evals, strict=True):
            row["mc_accuracy_lenient"] = lenient_mc(evals[key], data["test_all"])
        files = write_comparison(result, out / "tables" / "main")
        curves = plot_training_curves(grpo_log(out, "grpo_all", kept), runs["grpo_all"] / "plots")
        summary["tables"]["main"] = result
        for source, name in (
            (files[2], "smollm2_main.png"),
            *((c, f"smollm2_grpo_{c.name}") for c in curves),
        ):
            args.figures.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, args.figures / name)
        print((out / "tables" / "main" / "comparison.md").read_text())
    if "ood" in parts:
        names = {(k, tr, te): f"ood/{k}_{tr}_on_{te}" for k in ("grpo", "sft") for tr in ENVS for te in ENVS}
        restored = restorable(kept, list(names.values()))
        results = {}
        # Each run is evaluated right after it trained, so its results are kept before the next one starts.
        for train_env in ENVS:
            for key in ("grpo", "sft"):
                mine = {k: n for k, n in names.items() if k[:2] == (key, train_env)}
                needed = any(name not in restored for name in mine.values())
                train_runs(out, args, data, stages, kept, [train_env], [key], lambda run, n=needed: n)
                for (_, _, test_env), name in mine.items():
                    system = systems(args, train_env)[key]
                    results[(key, train_env, test_env)] = evaluate(
                        out, data[f"test_{test_env}"], name, system, eval_flags(args), stages, kept
                    )
        summary["tables"]["ood"] = ood_table(results, out / "tables")
        print(summary["tables"]["ood"]["markdown"])
    for part in VARIANTS:  # in order: a variant may compare with an earlier one
        if part in parts:
            summary["tables"][part] = variant_table(out, args, data, stages, kept, part)
    summary["times_s"] = stages.times
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(f"summary {out / 'summary.json'}; stage times (s): {stages.times}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
