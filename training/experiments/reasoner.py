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
     model), the paper's staged rewards, rotated options, 400-token completions.
   ``main`` trains on all training scenes (with ``--missions`` on mission questions too:
   :func:`mission_data`); ``ood`` on indoor only and on outdoor only;
   * ``sft_missions`` (``--parts missions``): the main SFT model trained on further on mission questions
     put as the node puts them, beside as many scene questions (:func:`mission_mix`), a short run: mission
     prompts are ~4x a scene's. Its held-out scene row (what it kept) is ``eval/sft_missions``; its
     mission rows come from ``bench/mission_benchmark.py --lm OUT/models/sft_missions/weights``.
3. Evaluation on the held-out scenes (``embodied-r eval``, greedy): ``oracle``, ``options-only`` and
   ``constant`` (programs: the bound, the blind reader of the options, and the best constant answer per task
   and environment chosen on the training split), ``chance``, ``untrained`` SmolLM2, ``question-only`` of
   each trained model (SFT and GRPO without the descriptions), ``sft`` and ``grpo``; ``embodied-r compare``
   makes the table with 95 % bootstrap intervals and paired differences against SFT, options-only and the
   best blind row of each task. Program rows count their completions in SmolLM2 tokens, as the models do.

Writes ``OUT/tables/main/comparison.{md,json,png}`` and ``comparison_tasks.png`` (per task against its best
blind row), ``OUT/tables/ood_blind.{md,json}`` (:mod:`ood_table`),
the GRPO curves, ``OUT/summary.json``; copies the figures to ``--figures`` (docs/figures/reasoner_*.png).

Kept across machines in ``--results`` (default ``results/reasoner``, committed) by :mod:`kept`: each
prepared scene set (``data/``: :class:`KeptData`), each evaluation, the GRPO logs, and the trained adapters
(``models/``: a few MB each, so the demo and a later session start from them), each keyed by what it is
made of (:mod:`steps`: the prepared data files, the resolved config, the base model and adapters by
content, the SFT examples, the library versions, and the code of that stage alone). A kept result is
restored only for an equal key; when one is not, the log says which input or code definition changed, and
the stage runs again.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Callable

from kept import PROVENANCE, KeptResults, StageKey, portable
from ood_table import markdown as ood_markdown
from ood_table import ood_rows
from steps import (
    KEPT_ADAPTER_FILES,
    Identities,
    Stages,
    System,
    cli,
    data_key,
    evaluate,
    grpo_log,
    join_sets,
    recipe_identity,
    train_key,
)

logger = logging.getLogger("reasoner")

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "training" / "configs" / "reasoner_cpu.yaml"
DEFAULT_RESULTS = REPO / "results" / "reasoner"
ENVS = ("indoor", "outdoor")
MISSIONS = "missions"  # the training set (and run) of the mission stage: sft_missions
FULL_MODEL_RECORD = "full_model.json"  # beside a fully fine-tuned model's kept weights: what they are
# A fully fine-tuned model as kept in git and as every later stage reads it: 8-bit GGUF (see Runs).
KEPT_WEIGHTS = "model-q8_0.gguf"
DATA = "data"  # the prepared scene sets, kept as their text files (KeptData)
PREPARED_TEXT = ("summary.json", "failures.jsonl", "train.jsonl", "val.jsonl", "test.jsonl")
SPLITS = ("train", "val", "test")
CHECKPOINTS = "checkpoints"  # the kept latest checkpoint of an unfinished LoRA run (KeptCheckpoint)
# The one full model kept in git: the best held-out reasoner as an 8-bit GGUF (embodied-r demo loads it).
SHIPPED = Path("models") / "shipped"
SHIPPED_RECORD = "shipped.json"
SHIPPED_FILE = "reasoner-q8_0.gguf"
SHIPPED_LABELS = {
    "sft": "SFT on oracle reasoning traces",
    "grpo": "SFT on oracle reasoning traces, then GRPO",
    "sft_tools": "SFT on oracle reasoning traces; decoding with the calculator and the option lookup",
    "grpo_tools": "SFT on oracle reasoning traces, then GRPO; decoding with the calculator and the lookup",
}
# The node settings a shipped row was evaluated with (the demo runs the model with them).
SHIPPED_SETTINGS = {"lm.transformers.calculator": True, "lm.transformers.lookup": True}
# Scene sets: (role, environment) -> synth seed; no other experiment uses these seeds.
SEEDS = {
    ("train", "indoor"): 3001,
    ("train", "outdoor"): 3002,
    ("test", "indoor"): 4001,
    ("test", "outdoor"): 4002,
}
# The mission stage's settings beside the config's: prompts of 1000-3800 tokens, so half the batch and the
# activations recomputed (8 of them without checkpointing outgrow 24 GB), a checkpoint every few steps.
MISSION_SFT = ("warm_start.batch_size=4", "warm_start.gradient_checkpointing=true", "warm_start.save_steps=4")
# Programs: beside every table, each test set's own.
BLIND_ROWS = ("oracle", "options_only", "chance", "constant")
LABELS = {
    "oracle": "oracle (reads the prompt)",
    "options_only": "options only (blind)",
    "chance": "chance",
    "constant": "best constant (blind)",
    "question_only_sft": "question only (SFT model, no descriptions)",
    "question_only": "question only (GRPO model, no descriptions)",
    "untrained": "untrained SmolLM2",
    "sft": "SFT on oracle traces",
    "grpo": "GRPO from SFT",
    "sft_calculator": "SFT, its arithmetic results written by a calculator",
    "grpo_calculator": "GRPO, its arithmetic results written by a calculator",
    "sft_tools": "SFT with the calculator and the option lookup",
    "grpo_tools": "GRPO with the calculator and the option lookup",
}
# The rows that never see the descriptions (compare's "vs best blind" reads the best of them per task).
BLIND = ("options_only", "chance", "constant", "question_only_sft", "question_only")


# ----------------------------------------------------------------------------------------------------
# Data


class KeptData:
    """A prepared scene set (synth, then prepare: ~6 min a set on 2 cores) kept in ``--results`` as its
    text files, so that a fresh machine reads it back instead of rendering its scenes again. Keyed by
    :func:`steps.data_key`. The bag paths its rows hold are kept as ``<out>/...`` and written back for this
    OUT (no row of this experiment reads a bag: perception is ground truth), and its parquet files are made
    again from those rows by prepare's own writer."""

    def __init__(self, kept: KeptResults, name: str, key: StageKey) -> None:
        self.kept, self.name, self.key = kept, name, key
        self.place = {str(kept.out.resolve()): "<out>"}

    def restore(self) -> bool:
        """Put the kept set in ``OUT/data/NAME``; True when one was kept with this key."""
        from embodied_r_training.data.schema import write_split

        if not self.kept.restore(DATA, self.name, self.key, PREPARED_TEXT):
            return False
        target = self.kept.out / DATA / self.name
        out = str(self.kept.out.resolve()).rstrip("/") + "/"
        splits = {f"{split}.jsonl": split for split in SPLITS}
        for f in PREPARED_TEXT:
            text = (target / f).read_text(encoding="utf-8").replace("<out>/", out)
            if f in splits:  # the split's rows, as prepare writes them: jsonl and parquet
                write_split(target, splits[f], [json.loads(line) for line in text.splitlines()])
            else:
                (target / f).write_text(text, encoding="utf-8")
        logger.info("%s: restored the kept prepared set (%s)", self.name, self.kept.root / DATA / self.name)
        return True

    def keep(self) -> None:
        """Keep ``OUT/data/NAME`` (made under :meth:`KeptResults.claim` with this key), paths portable."""
        import tempfile

        source = self.kept.out / DATA / self.name
        with tempfile.TemporaryDirectory(dir=self.kept.out) as staging:
            files = {}
            for f in PREPARED_TEXT:
                files[f] = Path(staging) / f
                files[f].write_text(portable((source / f).read_text("utf-8"), self.place), "utf-8")
            self.kept.keep(DATA, self.name, self.key, files)


def build_data(
    out: Path, args: argparse.Namespace, stages: Stages, kept: KeptResults, ids: Identities
) -> dict[str, Path]:
    """The four prepared sets (each restored when kept, :class:`KeptData`) and the two joined ones (module
    docstring); returns name -> directory."""
    data: dict[str, Path] = {}
    for (role, env), seed in SEEDS.items():
        name = f"{role}_{env}"
        synth, prepared = out / "synth" / name, out / "data" / name
        scenes = args.train_scenes if role == "train" else args.test_scenes
        per_task = args.train_questions_per_task if role == "train" else 2
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
        command += ["--questions-per-task", str(per_task)]
        command += ["--outdoor"] if env == "outdoor" else []
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
        data[name] = prepared
        made = KeptData(kept, name, data_key([command, prepare], ids.places))
        if made.restore():
            continue
        kept.claim(prepared, made.key)
        stages.run(f"synth {name}", synth / "questions.jsonl", lambda c=command: cli(c))
        stages.run(f"prepare {name}", prepared / "summary.json", lambda p=prepare: cli(p))
        made.keep()
    for role in ("train", "test"):
        joined = out / "data" / f"{role}_all"
        parts = {env: data[f"{role}_{env}"] for env in ENVS}
        stages.run(
            f"join {role}_all",
            joined / f"{role}.parquet",
            lambda p=parts, r=role, j=joined: join_sets(p, r, j),
        )
        data[f"{role}_all"] = joined
    if args.list_repeats > 1:
        data["train_all_lists"] = longer_lists(out, data["train_all"], args.list_repeats, stages)
    if args.missions:
        data["train_all_missions"] = mission_data(out, data.get("train_all_lists", data["train_all"]), stages)
    return data


# The scene tasks whose traces enumerate: object_count lists each distinct sighting, ego_altitude each climb.
LIST_TASKS = ("object_count", "ego_altitude")


def is_long_list(row: dict[str, Any]) -> bool:
    """Whether ``row``'s oracle trace lists two or more items: an ego_altitude question (a climb a step), an
    object_count question whose count is 2 or more."""
    if row["task"] == "object_count":
        return float(row["solution"]) >= 2
    return row["task"] in LIST_TASKS


def repeat_long_lists(rows: list[dict[str, Any]], repeats: int) -> list[dict[str, Any]]:
    """``rows`` and ``repeats - 1`` more copies of each long-list row (:func:`is_long_list`), ids made
    unique with ``#2``, ``#3``, ...: the reasoner stopped its lists after the first item, and most training
    counts are 1 (302 of 470)."""
    extra = [
        {**row, "id": f"{row['id']}#{copy}"}
        for copy in range(2, repeats + 1)
        for row in rows
        if is_long_list(row)
    ]
    return [*rows, *extra]


def longer_lists(out: Path, train_all: Path, repeats: int, stages: Stages) -> Path:
    """The main runs' training set with ``--list-repeats``: ``train_all`` and its long-list rows
    (:func:`repeat_long_lists`) ``repeats`` times in all: ``OUT/data/train_all_lists``."""
    from embodied_r_training.data.schema import write_split

    def write(target: Path) -> None:
        lines = (train_all / "train.jsonl").read_text(encoding="utf-8").splitlines()
        rows = repeat_long_lists([json.loads(line) for line in lines if line.strip()], repeats)
        target.mkdir(parents=True, exist_ok=True)
        write_split(target, "train", rows)

    lists = out / "data" / "train_all_lists"
    stages.run("repeat long lists", lists / "train.parquet", lambda: write(lists))
    return lists


def mission_questions(out: Path, stages: Stages) -> Path:
    """Mission questions put as the node puts them (:mod:`embodied_r_training.eval.mission_dataset`:
    missions of 5 and 20 minutes from seeds no benchmark uses, each question over the key frames the
    memory's search retrieves, kept when the mission oracle answers it from that prompt): ``OUT/data/
    train_missions``."""
    from embodied_r_training.eval.mission_dataset import build_mission_dataset

    from embodied_r_ros.memory.text_embedding import E5Embedder

    missions = out / "data" / "train_missions"
    stages.run(
        "mission questions",
        missions / "train.parquet",
        lambda: build_mission_dataset(missions, out / "missions", E5Embedder()),
    )
    return missions


def mission_data(out: Path, train_all: Path, stages: Stages) -> Path:
    """The training set of the main runs with ``--missions``: the scene questions of ``train_all`` and
    every mission question (:func:`mission_questions`), so the reasoner learns both (issue 44, point 4).
    The blind rows stay calibrated on ``train_all``: the mission tasks are never in the held-out tables."""
    missions = mission_questions(out, stages)
    joined = out / "data" / "train_all_missions"
    parts = {"scenes": train_all, "missions": missions}
    stages.run("join train_all_missions", joined / "train.parquet", lambda: join_sets(parts, "train", joined))
    return joined


def mission_mix(out: Path, train_all: Path, stages: Stages) -> Path:
    """The training set of the mission stage (``sft_missions``): every mission question and as many scene
    questions of ``train_all`` drawn at random (seeded), so the main SFT model keeps the scene tasks while
    it learns the mission ones: ``OUT/data/train_missions_mix``."""
    missions = mission_questions(out, stages)
    count = len([line for line in (missions / "train.jsonl").open(encoding="utf-8") if line.strip()])
    mix = out / "data" / "train_missions_mix"
    parts = {"scenes": train_all, "missions": missions}
    stages.run("join train_missions_mix", mix / "train.parquet",
               lambda: join_sets(parts, "train", mix, sample={"scenes": count}))  # fmt: skip
    return mix


# ----------------------------------------------------------------------------------------------------
# Training


class KeptCheckpoint:
    """The latest checkpoint of a LoRA run (GRPO: adapter, optimizer and scheduler state, ~60 MB), kept
    in ``--results`` as it is saved, so that a run longer than its machine's session resumes on the next
    machine where it stopped: restored into the run directory when that holds none, and dropped once the
    run is done (its adapter is kept then)."""

    def __init__(self, kept: KeptResults, name: str, key: StageKey) -> None:
        self.kept, self.name, self.key = kept, name, key

    def restore_into(self, run_dir: Path) -> Path | None:
        """Put the kept checkpoint in ``run_dir`` (as ``checkpoint-N``) unless one is there already; the
        checkpoint directory then in ``run_dir``, or None."""
        from embodied_r_training.rl.train import latest_checkpoint

        if (there := latest_checkpoint(run_dir)) is not None:
            return there
        files = self.kept.restore_all(CHECKPOINTS, self.name, self.key)
        if not files:
            return None
        staged = self.kept.out / CHECKPOINTS / self.name
        step = json.loads((staged / "trainer_state.json").read_text())["global_step"]
        target = run_dir / f"checkpoint-{step}"
        target.mkdir(parents=True)
        for f in files:
            shutil.copyfile(staged / f, target / f)
        logger.info("%s: resuming from the kept checkpoint of step %d", self.name, step)
        return target

    def save(self, checkpoint: Path) -> None:
        """Keep ``checkpoint`` (a ``checkpoint-N`` directory, its files alone), replacing the one before."""
        staged = self.kept.out / CHECKPOINTS / self.name
        self.kept.claim(staged, self.key)
        for old in [p for p in staged.iterdir() if p.is_file() and p.name != PROVENANCE]:
            old.unlink()
        files = {p.name: p for p in checkpoint.iterdir() if p.is_file()}
        for f, source in files.items():
            shutil.copyfile(source, staged / f)
        self.kept.keep(CHECKPOINTS, self.name, self.key, {f: staged / f for f in files}, replace=True)

    def callback(self) -> Any:
        """A transformers ``TrainerCallback`` that keeps each checkpoint as the trainer saves it."""
        from transformers import TrainerCallback

        carried = self

        class KeepEachCheckpoint(TrainerCallback):
            def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                carried.save(Path(args.output_dir) / f"checkpoint-{state.global_step}")

        return KeepEachCheckpoint()


class Runs:
    """The trained models of the experiment: SFT on traces, then GRPO from it, per training set ``env``
    (all, indoor, outdoor); each restored when kept with its key, else trained (resumed from its
    checkpoints) and kept.

    A run that trains a LoRA adapter keeps the adapter (a few MB) in ``--results``. A fully fine-tuned
    model (SFT with ``warm_start.lora: false``: 540 MB in float32, too large for git) is kept as an 8-bit
    GGUF (~145 MB, :data:`KEPT_WEIGHTS`), and every later stage (its evaluations, GRPO's start, the demo)
    reads those weights, read back into float32, on the machine that trained it as on a fresh one: one
    model everywhere, whose training (~1.5 h on 2 cores) outlives the machine. It is known downstream by its
    recipe (:func:`steps.recipe_identity`)."""

    def __init__(self, out: Path, args: argparse.Namespace, data: dict[str, Path], stages: Stages,
                 kept: KeptResults, ids: Identities) -> None:  # fmt: skip
        self.out, self.args, self.data, self.stages, self.kept, self.ids = out, args, data, stages, kept, ids
        self.found: dict[tuple[str, str], Path] = {}
        self.keys: dict[tuple[str, str], StageKey] = {}
        self.configs: dict[tuple[str, str], Any] = {}

    def config(self, env: str, method: str) -> Any:
        """The resolved training config of run ``METHOD_ENV`` (read once)."""
        if (env, method) not in self.configs:
            self.configs[(env, method)] = self._config(env, method)
        return self.configs[(env, method)]

    def train_set(self, env: str) -> Path:
        """The training data of the runs of ``env``: the main runs' holds the mission questions too (when
        built) and the long lists repeated (``--list-repeats``), the indoor and outdoor runs' their
        environment's scenes alone."""
        for variant in ("missions", "lists"):
            if f"train_{env}_{variant}" in self.data:
                return self.data[f"train_{env}_{variant}"]
        return self.data[f"train_{env}"]

    def _config(self, env: str, method: str) -> Any:
        from embodied_r_training.rl.train_config import load_train_config

        run_dir = self.out / "runs" / f"{method}_{env}"
        common = [f"data.path={self.train_set(env)}", f"output_dir={run_dir}"]
        common += ["grpo.bf16=false"] if self.args.float32 else []  # another recipe: its own keys
        if method == "sft" and env == MISSIONS:  # on from the main SFT model; mission prompts are ~4x longer
            steps = f"warm_start.steps={self.args.mission_sft_steps}"
            sft = [*common, f"model={self.start('all')}", "method=sft", steps, *MISSION_SFT]
            return load_train_config(self.args.config, sft)
        if method == "sft":
            sft = [*common, f"model={self.args.model}", "method=sft"]
            if env in ENVS and self.args.ood_sft_steps:  # each environment alone: half the data, fewer steps
                sft.append(f"warm_start.steps={self.args.ood_sft_steps}")
            elif env not in ENVS and self.args.sft_steps:  # the main SFT, longer or shorter than the config's
                sft.append(f"warm_start.steps={self.args.sft_steps}")
            return load_train_config(self.args.config, sft)
        grpo = [*common, f"model={self.start(env)}", "warm_start.steps=0"]
        if env in ENVS and self.args.ood_grpo_steps:  # the reward stages keep their steps (rewards:)
            grpo.append(f"grpo.max_steps={self.args.ood_grpo_steps}")
        return load_train_config(self.args.config, grpo)

    def is_adapter(self, env: str, method: str) -> bool:
        """Whether run ``METHOD_ENV`` trains a LoRA adapter (else every weight)."""
        config = self.config(env, method)
        return bool(config.warm_start.lora if method == "sft" else config.lora.enabled)

    def key(self, env: str, method: str) -> StageKey:
        """The key of run ``METHOD_ENV`` (GRPO's holds the SFT model it starts from)."""
        if (env, method) not in self.keys:
            start = self.identity(env, "sft") if method == "grpo" else None
            if env == MISSIONS:  # the mission stage starts from the main SFT model
                start = self.identity("all", "sft")
            self.keys[(env, method)] = train_key(
                self.ids, self.config(env, method), self.train_set(env), self.args.model, start
            )
        return self.keys[(env, method)]

    def identity(self, env: str, method: str) -> str:
        """What run ``METHOD_ENV`` made, by content: its adapter, or a full model by its recipe."""
        if self.is_adapter(env, method):
            return self.ids.adapter(self.adapter(env, method))
        return recipe_identity(self.key(env, method))

    def adapter(self, env: str, method: str) -> Path:
        """The LoRA adapter of run ``METHOD_ENV`` in ``OUT/models/METHOD_ENV``: restored, or trained."""
        if (env, method) in self.found:
            return self.found[(env, method)]
        name, key = f"{method}_{env}", self.key(env, method)
        target, run_dir = self.out / "models" / name, self.out / "runs" / name
        if not self.kept.restore("models", name, key, KEPT_ADAPTER_FILES):
            self.train(env, method)
            self.kept.claim(target, key)
            for f in KEPT_ADAPTER_FILES:
                shutil.copyfile(run_dir / "final" / f, target / f)
            self.kept.keep("models", name, key, {f: target / f for f in KEPT_ADAPTER_FILES})
        self.found[(env, method)] = target
        return target

    def weights(self, env: str, method: str) -> Path:
        """Where the fully fine-tuned model of run ``METHOD_ENV`` is read from: its kept 8-bit GGUF read back
        into a transformers checkpoint (``OUT/models/METHOD_ENV/weights``)."""
        return self.out / "models" / f"{method}_{env}" / "weights"

    def full_model(self, env: str, method: str) -> Path:
        """The fully fine-tuned model of run ``METHOD_ENV`` as later stages read it (:meth:`weights`):
        restored from its kept GGUF when one was kept with its key, else trained (or resumed) into
        ``OUT/runs/METHOD_ENV/final``, exported to 8-bit GGUF and kept."""
        from embodied_r_training.rl.outputs import NODE_PARAMS

        from embodied_r_ros.backends.gguf import convert_gguf
        from embodied_r_ros.backends.gguf_export import export_gguf

        if (env, method) in self.found:
            return self.found[(env, method)]
        name, key = f"{method}_{env}", self.key(env, method)
        # git holds one such model: the main run's, which the main table, GRPO and the demo read. The
        # others (indoor, outdoor, missions) keep their record alone and train again on a fresh machine.
        in_git = env == "all"
        record, files = self.out / "models" / name, (FULL_MODEL_RECORD, KEPT_WEIGHTS)
        made = (record / KEPT_WEIGHTS).is_file() and self.kept.why_invalid(record, key) is None
        if not (in_git and self.kept.restore("models", name, key, files)) and not made:
            final = self.out / "runs" / name / "final"
            if not (final / NODE_PARAMS).is_file() or self.kept.why_invalid(final.parent, key) is not None:
                self.train(env, method)
            self.kept.claim(record, key)
            export_gguf(final, record / KEPT_WEIGHTS, quantization="q8_0")
            kept_as = KEPT_WEIGHTS if in_git else "not kept (git holds the main run's alone): trained again"
            (record / FULL_MODEL_RECORD).write_text(json.dumps(
                {"weights": kept_as, "quantization": "q8_0", "trained_into": f"runs/{name}/final"}
            ) + "\n")  # fmt: skip
        kept = files if in_git else (FULL_MODEL_RECORD,)
        self.kept.keep("models", name, key, {f: record / f for f in kept})
        weights = convert_gguf(record / KEPT_WEIGHTS, self.weights(env, method))
        self.found[(env, method)] = weights
        return weights

    def train(self, env: str, method: str) -> None:
        """Train run ``METHOD_ENV`` into ``OUT/runs/METHOD_ENV`` (resumed from its checkpoints when this key
        left them; what another key left is set aside first)."""
        from embodied_r_training.commands.train import check_train_bf16
        from embodied_r_training.rl.outputs import NODE_PARAMS
        from embodied_r_training.rl.sft import train_sft
        from embodied_r_training.rl.train import train

        name, run_dir = f"{method}_{env}", self.out / "runs" / f"{method}_{env}"
        self.kept.claim(run_dir, self.key(env, method))
        if method == "grpo":
            self.start(env, weights=True)
        elif env == MISSIONS:
            self.start("all", weights=True)
        config = self.config(env, method)
        if not (run_dir / "final" / NODE_PARAMS).is_file():  # bf16 on a CPU without it: stopped, with the fix
            check_train_bf16(config)
        if method == "sft":  # resumes by itself, from checkpoints on this machine (a full model's are GBs)
            self.stages.run(f"train {name}", run_dir / "final" / NODE_PARAMS, lambda: train_sft(config))
            return
        carried = KeptCheckpoint(self.kept, name, self.key(env, method))
        carried.restore_into(run_dir)
        self.stages.run(f"train {name}", run_dir / "final" / NODE_PARAMS,
                        lambda: train(config, resume=True, callbacks=[carried.callback()]))  # fmt: skip
        self.kept.drop(CHECKPOINTS, name)  # done: its adapter is what is kept now

    def merged_dir(self, env: str) -> Path:
        return self.out / "runs" / f"sft_{env}" / "merged"

    def start(self, env: str, weights: bool = False) -> Path:
        """GRPO's starting model for ``env``: the SFT adapter merged into the base, or the fully fine-tuned
        SFT model; its folder, with the weights made (``weights``) or only named."""
        if self.is_adapter(env, "sft"):
            return self.merged(env) if weights else self.merged_dir(env)
        return self.full_model(env, "sft") if weights else self.weights(env, "sft")

    def merged(self, env: str) -> Path:
        """The SFT adapter of ``env`` merged into the base model (GRPO's starting point), made when needed:
        the merge records what it was made from and is made again when the adapter or the base differ."""
        from embodied_r_ros.backends.merge import merge_adapter

        return merge_adapter(self.args.model, self.adapter(env, "sft"), self.merged_dir(env))

    def lm(self, env: str, method: str) -> tuple[list[str], dict[str, str], Callable[[], Any] | None]:
        """The eval arguments of trained model ``METHOD_ENV``, its inputs by content, and what makes the
        weights it reads when they are not there."""
        if method == "sft":
            if self.is_adapter(env, "sft"):
                adapter = self.adapter(env, "sft")
                inputs = {"lm": self.ids.model(self.args.model), "adapter": self.ids.adapter(adapter)}
                return ["--lm", str(self.args.model), "--adapter", str(adapter)], inputs, None
            model, inputs = self.weights(env, "sft"), {"lm": self.identity(env, "sft")}
            return ["--lm", str(model)], inputs, lambda: self.full_model(env, "sft")
        start = self.start(env)
        inputs = {"lm": self.ids.model(self.args.model), "start": self.identity(env, "sft")}
        if self.is_adapter(env, "grpo"):
            adapter = self.adapter(env, "grpo")
            inputs["adapter"] = self.ids.adapter(adapter)
            arguments = ["--lm", str(start), "--adapter", str(adapter)]
            return arguments, inputs, lambda: self.start(env, weights=True)
        inputs["model"] = self.identity(env, "grpo")
        model = self.weights(env, "grpo")
        return ["--lm", str(model)], inputs, lambda: self.full_model(env, "grpo")


# ----------------------------------------------------------------------------------------------------
# Evaluation


def trained_system(runs: Runs, env: str, method: str, name: str = "reasoner") -> System:
    """A trained model as an ``embodied-r eval`` system (``name``: reasoner or question-only)."""
    arguments, inputs, needs = runs.lm(env, method)
    return System(name, [*(["--system", name] if name != "reasoner" else []), *arguments], inputs, needs)


def main_systems(
    args: argparse.Namespace, runs: Runs, ids: Identities, data: dict[str, Path]
) -> dict[str, Callable[[], System]]:
    """The systems of the main table, each made when asked for, in the order they are evaluated: what
    needs no training first, then SFT, then GRPO, so the first rows are ready (and kept) soonest."""

    def program(name: str, calibrated: bool = False) -> System:
        """A program row: its completions counted in the base model's tokens (--lm), as the models' are;
        ``calibrated``: its rules or constants chosen on the training split."""
        arguments = ["--system", name, "--lm", str(args.model)]
        inputs = {"lm": ids.model(args.model)}
        if calibrated:
            arguments += ["--calibration", str(data["train_all"])]
            inputs["calibration"] = ids.split(data["train_all"], "train")
        return System(name, arguments, inputs)

    return {
        "oracle": lambda: program("oracle"),
        "options_only": lambda: program("options-only", calibrated=True),
        "chance": lambda: program("chance"),
        "constant": lambda: program("constant", calibrated=True),
        "untrained": lambda: System(
            "untrained", ["--system", "untrained", "--lm", str(args.model)], {"lm": ids.model(args.model)}
        ),  # fmt: skip
        "sft": lambda: trained_system(runs, "all", "sft"),
        "question_only_sft": lambda: trained_system(runs, "all", "sft", "question-only"),
        "grpo": lambda: trained_system(runs, "all", "grpo"),
        "question_only": lambda: trained_system(runs, "all", "grpo", "question-only"),
        "sft_calculator": lambda: with_calculator(trained_system(runs, "all", "sft")),
        "grpo_calculator": lambda: with_calculator(trained_system(runs, "all", "grpo")),
        "sft_tools": lambda: with_lookup(with_calculator(trained_system(runs, "all", "sft"))),
        "grpo_tools": lambda: with_lookup(with_calculator(trained_system(runs, "all", "grpo"))),
    }


def with_calculator(system: System) -> System:
    """``system`` decoding with the calculator (``--calculator``: embodied_r_ros/reasoning/calculator.py)
    writing the results of the arithmetic steps its reasoning sets up."""
    return System(system.name, [*system.arguments, "--calculator"], {**system.inputs, "calculator": "on"},
                  system.needs)  # fmt: skip


def with_lookup(system: System) -> System:
    """``system`` decoding with the option lookup (``--lookup``: embodied_r_ros/reasoning/conclusion.py)
    writing its lookup's yes/no and its answer letter from the option its reasoning concludes."""
    return System(system.name, [*system.arguments, "--lookup"], {**system.inputs, "lookup": "on"},
                  system.needs)  # fmt: skip


def write_goals(out: Path, test: Path, loaded: dict[str, Any]) -> dict[str, Any]:
    """The goals a reasoner must meet beside the blind rows (:mod:`embodied_r_training.eval.goals`) for the
    SFT and GRPO rows (``loaded``: the main table's runs by name): ``OUT/tables/main/goals.md``; returns them
    for the summary."""
    from dataclasses import asdict

    from embodied_r_training.eval.goals import check_goals, goals_markdown

    lines = (test / "test.jsonl").read_text(encoding="utf-8").splitlines()
    options = {row["id"]: row.get("options") or [] for row in map(json.loads, filter(None, lines))}
    blind = [loaded[k] for k in BLIND]
    found, texts = {}, []
    for name in ("sft", "grpo", "sft_calculator", "grpo_calculator", "sft_tools", "grpo_tools"):
        checks = check_goals(loaded[name], blind, loaded["options_only"], options)
        found[name] = [asdict(c) for c in checks]
        texts.append(goals_markdown(LABELS[name], checks))
    (out / "tables" / "main" / "goals.md").write_text("\n".join(texts), encoding="utf-8")
    return found


def ship(out: Path, results: Path, runs: Runs, evals: dict[str, Path]) -> dict[str, Any] | None:
    """The best held-out reasoner of the main table (SFT or GRPO, with or without the decoding tools: the
    calculator and the option lookup, by the mean over task groups; the record's ``settings`` turn the tools
    on in the node) as one 8-bit GGUF file in ``results/models/shipped`` beside its record (what it is, its
    held-out scores beside the oracle's and the blind rows'), which ``embodied-r demo`` loads; exported again
    only when the model it would ship differs from the one there (the record holds what it was made from).
    From a fully fine-tuned SFT model nothing is copied: the record names its kept GGUF
    (``../sft_all/model-q8_0.gguf``) and, when GRPO is best, the kept GRPO adapter (``../grpo_all``)."""
    from embodied_r_ros.backends.gguf_export import export_gguf
    from embodied_r_ros.backends.merge import merge_adapter

    metrics = {k: json.loads((evals[k] / "metrics.json").read_text())["overall"] for k in evals}
    rows = [row for row in SHIPPED_LABELS if row in metrics]
    shipped = max(rows, key=lambda m: (metrics[m]["task_mean"], "grpo" in m, "tools" not in m))
    best = shipped.removesuffix("_tools")  # the model; a tools row decodes it with the tools on
    made_from = {"run": f"{best}_all", "model": runs.identity("all", best)}
    if best == "grpo":
        made_from["start"] = runs.identity("all", "sft")
    shown = ("oracle", "options_only", "constant", "chance")
    scores = {LABELS[k]: {"mc": metrics[k]["mc_accuracy"], "numeric": metrics[k]["numeric_mra"]}
              for k in (shipped, *shown)}  # fmt: skip
    settings = {"settings": SHIPPED_SETTINGS} if shipped.endswith("_tools") else {}
    target = results / SHIPPED
    record_file = target / SHIPPED_RECORD
    known = json.loads(record_file.read_text()) if record_file.is_file() else {}
    if not runs.is_adapter("all", "sft"):
        # A fully fine-tuned SFT model is kept as an 8-bit GGUF already, and a GRPO run from it keeps its LoRA
        # adapter: the record names those kept files (paths relative to it) rather than a second copy of
        # 145 MB in git; the demo loads the GGUF and applies the adapter, as the GRPO evaluation did.
        runs.full_model("all", "sft")  # restored (or made) and kept in results/models/sft_all
        record = {"file": f"../sft_all/{KEPT_WEIGHTS}", "label": SHIPPED_LABELS[shipped], "scores": scores,
                  "made_from": made_from, **settings}  # fmt: skip
        if best == "grpo":
            runs.adapter("all", "grpo")
            record["adapter"] = "../grpo_all"
        for stale in (target / SHIPPED_FILE, target / f".{SHIPPED_FILE}.partial"):
            stale.unlink(missing_ok=True)
        target.mkdir(parents=True, exist_ok=True)
        record_file.write_text(json.dumps(record, indent=1) + "\n")
        logger.info("shipped %s for the demo: %s", record_file, record["label"])
        return record
    record = {"file": SHIPPED_FILE, "label": SHIPPED_LABELS[shipped], "scores": scores,
              "made_from": made_from, **settings}  # fmt: skip
    if known.get("made_from") == made_from and (target / SHIPPED_FILE).is_file():
        if known != record:
            record_file.write_text(json.dumps(record, indent=1) + "\n")
        return record
    model = runs.merged("all") if best == "sft" else merge_adapter(
        runs.start("all", weights=True), runs.adapter("all", "grpo"), out / "runs" / "grpo_all" / "merged"
    )  # fmt: skip
    exported = export_gguf(model, out / "shipped" / SHIPPED_FILE, quantization="q8_0")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(exported, target / f".{SHIPPED_FILE}.partial")
    (target / f".{SHIPPED_FILE}.partial").rename(target / SHIPPED_FILE)  # the record comes last
    record_file.write_text(json.dumps(record, indent=1) + "\n")
    logger.info("shipped %s (%.0f MB) for the demo", target / SHIPPED_FILE, exported.stat().st_size / 1e6)
    return record


def eval_flags(args: argparse.Namespace) -> list[str]:
    """The ``embodied-r eval`` flags every system here is evaluated with: greedy, bf16 weights on the CPU
    (the numerics the models train and sample under, bf16 autocast; as the node loads a model on a GPU;
    float32 with ``--float32``, where the CPU has no native bf16).
    Against float32: 1.4-1.5x faster decoding here, and 10 of 16 probe completions (128 tokens) alike."""
    flags = ["--device", "cpu", "--max-new-tokens", str(args.max_new_tokens), "--batch-size"]
    dtype = "float32" if args.float32 else "bfloat16"
    return [*flags, str(args.eval_batch), "--no-progress", "--dtype", dtype]


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
        "--parts",
        default="main,ood",
        help="main (all scenes), ood (indoor vs outdoor), data, models (train the main runs first: SFT, then "
        "GRPO, before any evaluation), missions (the main SFT model trained on with mission questions: "
        "sft_missions, and its held-out scene row)",
    )
    parser.add_argument(
        "--systems",
        default="",
        help="main: evaluate only these rows (comma-separated keys, e.g. sft,oracle) and print their "
        "metrics; the table, goals and shipping need every row (default: all)",
    )
    parser.add_argument("--train-scenes", type=int, default=64, help="training scenes per environment")
    parser.add_argument("--train-questions-per-task", type=int, default=4,
                        help="training questions per task and form, per scene (held-out: 2)")  # fmt: skip
    parser.add_argument("--test-scenes", type=int, default=10, help="held-out scenes per environment")
    parser.add_argument("--ood-sft-steps", type=int, default=150,
                        help="SFT steps of the runs trained on one environment (0: as main)")  # fmt: skip
    parser.add_argument("--sft-steps", type=int, default=0,
                        help="SFT steps of the main run (0: the config's warm_start.steps, 240 of 8: 1920 of "
                        "the ~5400 training traces)")  # fmt: skip
    parser.add_argument("--ood-grpo-steps", type=int, default=0,
                        help="GRPO steps of the runs trained on one environment (0: as main, 48 of ~280 s "
                        "on 2 cores)")  # fmt: skip
    parser.add_argument(
        "--missions",
        action="store_true",
        help="train the main runs on mission questions too (prompts ~4x a scene's: the first "
        "SFT step over them took 454 s on 2 cores, against ~45 s)",
    )
    parser.add_argument("--list-repeats", type=int, default=1,
                        help="the main runs see each training question whose trace lists two or more items "
                        "(object_count of 2 or more, ego_altitude) this many times (1: once)")  # fmt: skip
    parser.add_argument("--mission-sft-steps", type=int, default=48,
                        help="steps of the mission stage (batch 4: 48 steps, 192 questions)")  # fmt: skip
    parser.add_argument("--size", default="320x240", help="rendered image size (key frames are chosen on it)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per scene")
    parser.add_argument("--max-keyframes", type=int, default=8, help="key frames per question (paper 32)")
    parser.add_argument(
        "--max-new-tokens", type=int, default=0, help="eval completion limit (0: the config's)"
    )
    parser.add_argument("--eval-batch", type=int, default=16)
    parser.add_argument(
        "--float32",
        action="store_true",
        help="train and evaluate in float32, not under bf16 (for a CPU without native bf16, where bf16 runs "
        "~66x slower): another recipe, so its own keys; the kept rows are bf16's",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--figures", type=Path, default=REPO / "docs" / "figures")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="kept results (committed)")
    parser.add_argument("--no-keep", action="store_true", help="neither restore nor keep results")
    return parser.parse_args()


def main() -> int:
    import torch
    from embodied_r_training.eval.compare import compare, load_run, write_comparison
    from embodied_r_training.eval.plots import plot_training_curves
    from embodied_r_training.rl.allocator import return_freed_memory
    from embodied_r_training.rl.train_config import load_train_config

    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    return_freed_memory()  # the SFT's freed logits go back to the system (rl/allocator.py): no OOM at 24 GB
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts <= {"main", "ood", "data", "models", "missions"}:
        raise SystemExit(f"--parts takes main, ood, data, models or missions, got {args.parts!r}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = load_train_config(args.config)
    args.max_new_tokens = args.max_new_tokens or int(config.grpo["max_completion_length"])
    stages = Stages(out)
    from embodied_r_ros.backends.cpu_bf16 import native_bf16

    if not args.float32 and not torch.cuda.is_available() and not native_bf16():
        logger.warning(
            "this CPU has no native bf16 (backends/cpu_bf16.py): a stage that trains or evaluates will stop "
            "with the fix; --float32 runs them in float32 (their own keys, not the kept bf16 rows)")
    if not (args.model / "config.json").is_file():
        stages.run(
            "convert SmolLM2", args.model / "config.json", lambda: cli(["models", "smollm2", str(args.model)])
        )
    root = None if args.no_keep else args.results.resolve()
    kept, ids, flags = KeptResults(root, out, REPO), Identities(out), eval_flags(args)
    data = build_data(out, args, stages, kept, ids)
    if "missions" in parts:
        data[f"train_{MISSIONS}"] = mission_mix(out, data["train_all"], stages)
    if parts == {"data"}:
        return 0
    runs = Runs(out, args, data, stages, kept, ids)
    summary: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items()}, "tables": {}}
    if "models" in parts:  # the long runs first, each kept as soon as it is done
        for method in ("sft", "grpo"):
            runs.adapter("all", method) if runs.is_adapter("all", method) else runs.full_model("all", method)
    if "main" in parts:
        systems = main_systems(args, runs, ids, data)
        chosen = [k.strip() for k in args.systems.split(",") if k.strip()] or list(systems)
        if unknown := sorted(set(chosen) - set(systems)):
            raise SystemExit(f"--systems: unknown {unknown}; the main rows are {sorted(systems)}")
        test = data["test_all"]
        evals = {k: evaluate(out, test, k, systems[k](), flags, stages, kept, ids) for k in chosen}
        if set(chosen) != set(systems):  # a partial run: each row's metrics, no table
            for k, directory in evals.items():
                print(k, json.loads((Path(directory) / "metrics.json").read_text())["overall"])
            return 0
        loaded = {k: load_run(f"{LABELS[k]}={evals[k]}") for k in LABELS}
        result = compare(list(loaded.values()), [LABELS["sft"], LABELS["options_only"]],
                         [LABELS[k] for k in BLIND])  # fmt: skip
        files = write_comparison(result, out / "tables" / "main")
        summary["tables"]["main"] = result
        summary["goals"] = write_goals(out, data["test_all"], loaded)
        if not args.no_keep:
            summary["shipped"] = ship(out, args.results.resolve(), runs, evals)
        args.figures.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(files[2], args.figures / "reasoner_main.png")
        if len(files) > 3:  # each model per task beside the task's best blind row
            shutil.copyfile(files[3], args.figures / "reasoner_tasks.png")
        print((out / "tables" / "main" / "comparison.md").read_text())
    if "ood" in parts:
        for train_env in ENVS:  # each pair is evaluated right after it trained, so its results are kept early
            for method in ("sft", "grpo"):
                for test_env in ENVS:
                    name = f"ood/{method}_{train_env}_on_{test_env}"
                    system = trained_system(runs, train_env, method)
                    evaluate(out, data[f"test_{test_env}"], name, system, flags, stages, kept, ids)
        for name, make in main_systems(args, runs, ids, data).items():  # each test set's blind rows
            if name in BLIND_ROWS:
                evaluate(out, data["test_all"], name, make(), flags, stages, kept, ids)
        rows = ood_rows(out)  # the OOD evaluations beside each test set's blind rows (ood_table.py)
        (out / "tables").mkdir(parents=True, exist_ok=True)
        (out / "tables" / "ood_blind.json").write_text(json.dumps(rows, indent=1) + "\n")
        (out / "tables" / "ood_blind.md").write_text(ood_markdown(rows))
        summary["tables"]["ood"] = rows
        print(ood_markdown(rows))
    if "missions" in parts:  # the mission stage, then what it kept of the scene tasks
        system = trained_system(runs, MISSIONS, "sft")
        directory = evaluate(out, data["test_all"], "sft_missions", system, flags, stages, kept, ids)
        metrics = json.loads((Path(directory) / "metrics.json").read_text())["overall"]
        summary["missions"] = {"held_out_scenes": metrics, "model": str(runs.start(MISSIONS))}
        print(f"sft_missions on the held-out scenes: {metrics}")
        print("its mission rows: python bench/mission_benchmark.py --lm "
              f"{runs.weights(MISSIONS, 'sft')} --lm-questions 8")  # fmt: skip
    # The GRPO curves of the runs this invocation has (after their adapters: a log is read only from a
    # finished run, and asking for one never trains). ``models`` keeps the main run's log as soon as it has
    # finished: its checkpoints live in OUT alone, which a fresh machine does not have.
    has_main = bool(parts & {"main", "models"})
    for env in [e for e, wanted in (("all", has_main), *((e, "ood" in parts) for e in ENVS)) if wanted]:
        log = grpo_log(out, f"grpo_{env}", kept, runs.key(env, "grpo"))
        curves = plot_training_curves(log, out / "runs" / f"grpo_{env}" / "plots") if log else []
        for curve in curves if env == "all" else []:
            args.figures.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(curve, args.figures / f"reasoner_grpo_{curve.name}")
    summary["times_s"] = stages.times
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(f"summary {out / 'summary.json'}; stage times (s): {stages.times}")
    return 0


if __name__ == "__main__":
    from embodied_r_ros.backends.cpu_bf16 import SlowBf16Error

    try:
        raise SystemExit(main())
    except SlowBf16Error as exc:  # one line and this script's own fix, not a traceback
        raise SystemExit(f"reasoner.py: error: {exc}; here: --float32 does it for every stage") from None
