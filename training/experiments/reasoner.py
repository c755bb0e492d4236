"""Answers that mean something: SmolLM2-135M given room and signal to reason, against a sound yardstick.

One command (resumable: a finished stage is skipped, an interrupted SFT or GRPO run continues from its last
checkpoint, kept results are restored on a fresh machine):

    python training/experiments/reasoner.py --out out/reasoner [--parts main,ood]

Perception is simulator ground truth (``prepare --perceiver ground_truth``): a measuring instrument that
states what a perfect VLM would see, so every figure measures the REASONER. It is not a VLM.

1. Data: ``embodied-r synth`` (only questions the oracle answers from the prompt prepare builds; ids carry
   environment and seed) for training and held-out test scenes, indoor and outdoor, from seeds used
   nowhere else; ``embodied-r prepare --perceiver ground_truth`` with the same ``--max-keyframes``.
2. Runs (``embodied-r train`` code, ``--config``, default ``training/configs/reasoner_cpu.yaml``):
   * ``sft_<env>``: SFT on the oracle's reasoning traces (``method: sft``, ``warm_start.answers: trace``),
     a LoRA adapter, merged into the base model afterwards (``runs/sft_<env>/merged``);
   * ``grpo_<env>``: GRPO from that merged model (a fresh LoRA; the reference, adapter off, is the SFT
     model), the paper's staged rewards, rotated options, 256-token completions.
   ``main`` trains on all training scenes; ``ood`` on indoor only and on outdoor only.
3. Evaluation on the held-out scenes (``embodied-r eval``, greedy): ``oracle`` and ``options-only``
   (programs: the bound and the blind reader), ``chance``, ``untrained`` SmolLM2, ``question-only`` (the
   GRPO model without the descriptions), ``sft`` and ``grpo``; ``embodied-r compare`` makes the table with
   95 % bootstrap intervals and paired differences against SFT and options-only.

Writes ``OUT/tables/main/comparison.{md,json,png}``, ``OUT/tables/ood.{md,json}``, the GRPO curves,
``OUT/summary.json``; copies the figures to ``--figures`` (docs/figures/reasoner_*.png).

Kept across machines in ``--results`` (default ``results/reasoner``, committed) by :mod:`kept`: each
evaluation, the GRPO logs, and the trained adapters (``models/``: a few MB each, so the demo and a later
session start from them), each with its provenance: the code it ran from and its recipe (the resolved
config, the base model's files, the data sets, the arguments). A kept result is restored only for an equal
recipe and unchanged code.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from kept import KeptResults
from steps import Stages, cli, evaluate, experiment_recipe, grpo_log, join_sets, restorable

logger = logging.getLogger("reasoner")

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "training" / "configs" / "reasoner_cpu.yaml"
DEFAULT_RESULTS = REPO / "results" / "reasoner"
KEPT_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
ENVS = ("indoor", "outdoor")
# Scene sets: (role, environment) -> synth seed; no other experiment uses these seeds.
SEEDS = {
    ("train", "indoor"): 3001,
    ("train", "outdoor"): 3002,
    ("test", "indoor"): 4001,
    ("test", "outdoor"): 4002,
}
LABELS = {
    "oracle": "oracle (reads the prompt)",
    "options_only": "options only (blind)",
    "chance": "chance",
    "question_only": "question only (GRPO model, no descriptions)",
    "untrained": "untrained SmolLM2",
    "sft": "SFT on oracle traces",
    "grpo": "GRPO from SFT",
}


# ----------------------------------------------------------------------------------------------------
# Data


def build_data(out: Path, args: argparse.Namespace, stages: Stages) -> dict[str, Path]:
    """The four prepared sets and the two joined ones (module docstring); returns name -> directory."""
    data: dict[str, Path] = {}
    for (role, env), seed in SEEDS.items():
        name = f"{role}_{env}"
        synth, prepared = out / "synth" / name, out / "data" / name
        scenes = args.train_scenes if role == "train" else args.test_scenes
        command = [
            "synth",
            "--out",
            str(synth),
            "--scenes",
            str(scenes),
            "--seed",
            str(seed),
            "--size",
            args.size,
        ]
        command += ["--duration", str(args.duration), "--max-keyframes", str(args.max_keyframes)]
        command += ["--outdoor"] if env == "outdoor" else []
        stages.run(f"synth {name}", synth / "questions.jsonl", lambda c=command: cli(c))
        split = "1,0,0" if role == "train" else "0,0,1"
        prepare = ["prepare", str(synth / "questions.jsonl"), "--out", str(prepared), "--perceiver"]
        prepare += [
            "ground_truth",
            "--split",
            split,
            "--max-keyframes",
            str(args.max_keyframes),
            "--no-progress",
        ]
        stages.run(f"prepare {name}", prepared / "summary.json", lambda p=prepare: cli(p))
        data[name] = prepared
    for role in ("train", "test"):
        joined = out / "data" / f"{role}_all"
        parts = {env: data[f"{role}_{env}"] for env in ENVS}
        stages.run(
            f"join {role}_all",
            joined / f"{role}.parquet",
            lambda p=parts, r=role, j=joined: join_sets(p, r, j),
        )
        data[f"{role}_all"] = joined
    return data


# ----------------------------------------------------------------------------------------------------
# Training


def merge_adapter(base: Path, adapter: Path, out: Path) -> None:
    """The base model with the LoRA ``adapter`` merged in, saved (with the tokenizer) to ``out``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter).merge_and_unload()
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)


def trained_adapter(
    out: Path, stages: Stages, kept: KeptResults, name: str, run_dir: Path, config: Any
) -> Path:
    """The LoRA adapter of run ``name`` in ``OUT/models/NAME``: restored when kept, else trained (resumed
    from its checkpoints) as ``config`` says and kept."""
    from embodied_r_training.rl.train import NODE_PARAMS, train

    target = out / "models" / name
    if kept.restore("models", name, KEPT_ADAPTER_FILES):
        return target
    kept.claim(run_dir)
    stages.run(f"train {name}", run_dir / "final" / NODE_PARAMS, lambda: train(config, resume=True))
    kept.claim(target)
    target.mkdir(parents=True, exist_ok=True)
    for f in KEPT_ADAPTER_FILES:
        shutil.copyfile(run_dir / "final" / f, target / f)
    kept.keep("models", name, {f: target / f for f in KEPT_ADAPTER_FILES})
    return target


def train_pair(
    out: Path, args: argparse.Namespace, data: dict[str, Path], stages: Stages, kept: KeptResults, env: str,
    needed: dict[str, bool],
) -> dict[str, Path]:  # fmt: skip
    """SFT on traces, then GRPO from it, on the training set ``env`` (all, indoor, outdoor); returns the
    adapters (``sft``, ``grpo``) and the merged SFT model (``merged``, GRPO's base). A run whose
    evaluations were all restored (``needed[method]`` False) is neither trained nor restored."""
    from embodied_r_training.rl.train_config import load_train_config

    sft_dir, grpo_dir = out / "runs" / f"sft_{env}", out / "runs" / f"grpo_{env}"
    merged = sft_dir / "merged"
    common = [f"data.path={data[f'train_{env}']}"]
    found = {"sft": out / "models" / f"sft_{env}", "grpo": out / "models" / f"grpo_{env}", "merged": merged}
    if needed["sft"] or needed["grpo"]:  # GRPO starts from the SFT model
        config = load_train_config(
            args.config, [*common, f"output_dir={sft_dir}", f"model={args.model}", "method=sft"]
        )
        sft = trained_adapter(out, stages, kept, f"sft_{env}", sft_dir, config)
        stages.run(f"merge sft_{env}", merged / "config.json", lambda: merge_adapter(args.model, sft, merged))
    if needed["grpo"]:
        overrides = [*common, f"output_dir={grpo_dir}", f"model={merged}", "warm_start.steps=0"]
        config = load_train_config(args.config, overrides)
        trained_adapter(out, stages, kept, f"grpo_{env}", grpo_dir, config)
    return found


# ----------------------------------------------------------------------------------------------------
# Evaluation


def systems(args: argparse.Namespace, runs: dict[str, Path], blind: bool) -> dict[str, list[str]]:
    """The eval arguments of each system; ``blind`` adds the programs and the untrained/blind LMs."""
    found = {
        "sft": ["--lm", str(args.model), "--adapter", str(runs["sft"])],
        "grpo": ["--lm", str(runs["merged"]), "--adapter", str(runs["grpo"])],
    }
    if blind:
        found = {
            "oracle": ["--system", "oracle"],
            "options_only": [
                "--system",
                "options-only",
                "--calibration",
                str(args.out.resolve() / "data" / "train_all"),
            ],
            "chance": ["--system", "chance"],
            "untrained": ["--system", "untrained", "--lm", str(args.model)],
            "question_only": ["--system", "question-only", *found["grpo"]],
            **found,
        }
    return found


def eval_flags(args: argparse.Namespace) -> list[str]:
    """The ``embodied-r eval`` flags every system here is evaluated with (greedy, float32 on the CPU)."""
    flags = ["--device", "cpu", "--max-new-tokens", str(args.max_new_tokens), "--batch-size"]
    return [*flags, str(args.eval_batch), "--no-progress", "--dtype", "float32"]


def ood_table(results: dict[tuple[str, str, str], Path], out: Path) -> dict[str, Any]:
    """In- vs out-of-distribution accuracy of SFT and GRPO-from-SFT, with bootstrap intervals."""
    from embodied_r_training.eval.compare import load_run, percent_with_ci
    from embodied_r_training.eval.stats import bootstrap_ci

    rows = []
    for (method, train_env, test_env), path in sorted(results.items()):
        run = load_run(str(path))
        cells = {}
        for form in ("mc", "numeric"):
            interval = bootstrap_ci([p["score"] for p in run.predictions.values() if p["form"] == form])
            cells[form] = interval.as_dict() if interval else None
        rows.append({"method": method, "train": train_env, "test": test_env, **cells})
    lines = [
        "| method | trained on | MC, same env (ID) | MC, other env (OOD) | MRA, ID | MRA, OOD |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for method in ("sft", "grpo"):
        for env in ENVS:
            cell = {r["test"] == env: r for r in rows if r["method"] == method and r["train"] == env}
            if len(cell) == 2:
                values = [
                    percent_with_ci(cell[same][form]) for form in ("mc", "numeric") for same in (True, False)
                ]
                lines.append(f"| {LABELS[method]} | {env} | " + " | ".join(values) + " |")
    table = {"rows": rows, "markdown": "\n".join(lines) + "\n"}
    out.mkdir(parents=True, exist_ok=True)
    (out / "ood.json").write_text(json.dumps(table, indent=1) + "\n")
    (out / "ood.md").write_text(table["markdown"])
    return table


# ----------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("out/reasoner"))
    parser.add_argument(
        "--config", type=Path, default=DEFAULT_CONFIG, help="training config (reasoner_cpu.yaml)"
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache" / "models" / "smollm2",
                        help="the base LM directory (SmolLM2, built with `make smollm2`)")  # fmt: skip
    parser.add_argument(
        "--parts", default="main,ood", help="main (all scenes), ood (indoor vs outdoor), data"
    )
    parser.add_argument("--train-scenes", type=int, default=36, help="training scenes per environment")
    parser.add_argument("--test-scenes", type=int, default=10, help="held-out scenes per environment")
    parser.add_argument("--size", default="320x240", help="rendered image size (key frames are chosen on it)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per scene")
    parser.add_argument("--max-keyframes", type=int, default=8, help="key frames per question (paper 32)")
    parser.add_argument(
        "--max-new-tokens", type=int, default=0, help="eval completion limit (0: the config's)"
    )
    parser.add_argument("--eval-batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--figures", type=Path, default=REPO / "docs" / "figures")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="kept results (committed)")
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
    if not parts <= {"main", "ood", "data"}:
        raise SystemExit(f"--parts takes main, ood or data, got {args.parts!r}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = load_train_config(args.config)
    args.max_new_tokens = args.max_new_tokens or int(config.grpo["max_completion_length"])
    stages = Stages(out)
    if not (args.model / "config.json").is_file():
        stages.run(
            "convert SmolLM2", args.model / "config.json", lambda: cli(["models", "smollm2", str(args.model)])
        )
    data = build_data(out, args, stages)
    if parts == {"data"}:
        return 0
    root = None if args.no_keep else args.results.resolve()
    kept = KeptResults(REPO, root, out, experiment_recipe(args, config, data), [Path(__file__), args.config])
    summary: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items()}, "tables": {}}
    if "main" in parts:
        # SFT and what needs no training first, then GRPO: the first rows are ready (and kept) soonest.
        restored = restorable(kept, list(LABELS))
        late = ("grpo", "question_only")
        needed = {"sft": not {"sft", *late} <= restored, "grpo": not set(late) <= restored}
        evals = {}
        for pass_, methods in ((0, {"sft": needed["sft"], "grpo": False}), (1, needed)):
            runs = train_pair(out, args, data, stages, kept, "all", methods)
            for key, system in systems(args, runs, True).items():
                if (key in late) == bool(pass_):
                    evals[key] = evaluate(out, data["test_all"], key, system, eval_flags(args), stages, kept)
        evals = {key: evals[key] for key in LABELS}
        result = compare(
            [load_run(f"{LABELS[k]}={p}") for k, p in evals.items()], [LABELS["sft"], LABELS["options_only"]]
        )
        files = write_comparison(result, out / "tables" / "main")
        summary["tables"]["main"] = result
        args.figures.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(files[2], args.figures / "reasoner_main.png")
        log = grpo_log(out, "grpo_all", kept)
        for curve in plot_training_curves(log, out / "runs" / "grpo_all" / "plots") if log else []:
            shutil.copyfile(curve, args.figures / f"reasoner_grpo_{curve.name}")
        print((out / "tables" / "main" / "comparison.md").read_text())
    if "ood" in parts:
        names = {(k, tr, te): f"ood/{k}_{tr}_on_{te}" for k in ("sft", "grpo") for tr in ENVS for te in ENVS}
        restored = restorable(kept, list(names.values()))
        results = {}
        for train_env in ENVS:  # each pair is evaluated right after it trained, so its results are kept early
            mine = {k: n for k, n in names.items() if k[1] == train_env}
            needed = {
                m: any(n not in restored for k, n in mine.items() if k[0] == m) for m in ("sft", "grpo")
            }
            runs = train_pair(out, args, data, stages, kept, train_env, needed)
            for (method, _, test_env), name in mine.items():
                system = systems(args, runs, False)[method]
                results[(method, train_env, test_env)] = evaluate(
                    out, data[f"test_{test_env}"], name, system, eval_flags(args), stages, kept
                )
        summary["tables"]["ood"] = ood_table(results, out / "tables")
        print(summary["tables"]["ood"]["markdown"])
    summary["times_s"] = stages.times
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(f"summary {out / 'summary.json'}; stage times (s): {stages.times}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
