"""What the experiment scripts share: running ``embodied-r`` commands, resumable timed stages, joining
prepared data sets, the key of each stage (its inputs by content and its own code), and evaluations kept
across machines."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kept import KeptResults, StageKey, file_identity, text_file_identity, tree_identity, value_identity
from stage_code import code_identity

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]


def cli(args: list[str]) -> None:
    """Run one ``embodied-r`` command in-process (the users' code path); a failure stops the experiment."""
    from embodied_r_ros.cli.main import main

    logger.info("embodied-r %s", " ".join(args))
    status = main(args)
    if status != 0:
        raise SystemExit(f"embodied-r {args[0]} failed with status {status}: embodied-r {' '.join(args)}")


class Stages:
    """Times each stage and skips the ones whose output already exists (so a rerun resumes)."""

    def __init__(self, out: Path) -> None:
        self.path = out / "times.json"
        self.times: dict[str, float] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def run(self, name: str, done: Path, work: Any) -> bool:
        """Run ``work`` unless ``done`` exists; True when it ran here."""
        if done.exists():
            logger.info("%s: done already (%s)", name, done)
            return False
        logger.info("%s: starting", name)
        start = time.perf_counter()
        work()
        self.times[name] = round(time.perf_counter() - start, 1)
        self.path.write_text(json.dumps(self.times, indent=1) + "\n")
        logger.info("%s: %.0f s", name, self.times[name])
        return True


def join_sets(parts: dict[str, Path], split: str, out: Path, sample: dict[str, int] | None = None) -> None:
    """One data set from several prepared ones: ``split`` rows with ids and scenes prefixed by the key;
    ``sample``: a part's number of rows drawn at random (seeded, in file order) instead of all of it."""
    import random

    from embodied_r_training.data.schema import write_split

    rows = []
    for prefix, path in parts.items():
        lines = [
            line
            for line in (path / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        if sample and prefix in sample and sample[prefix] < len(lines):
            chosen = sorted(random.Random(0).sample(range(len(lines)), sample[prefix]))
            lines = [lines[i] for i in chosen]
        for line in lines:
            row = json.loads(line)
            row["id"], row["scene"] = f"{prefix}/{row['id']}", f"{prefix}/{row['scene']}"
            rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    write_split(out, split, rows)


# What a kept evaluation holds, and the marker written after all of it.
KEPT_EVAL_FILES = ("metrics.json", "predictions.jsonl")
EVAL_DONE = "eval_done.json"
# What a kept training run holds: its LoRA adapter.
KEPT_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")

# The code of each stage alone, by module (stage_code.py identifies it by what it computes). What a stage
# runs beyond these modules is plumbing whose effect the key holds otherwise: the config's and the command
# line's parsing (the resolved config and the arguments are inputs), finding a model directory (its files
# are an input), logging and plots. test/test_stage_code.py runs each stage under a profiler and checks
# that every project function it executes, and every project class those functions name, lies in its
# modules or in that plumbing.

# SFT (``method: sft``, on what sft_examples holds): the supervised trainer and what it reads the rows with.
SFT_CODE = (
    "embodied_r_training.rl.sft",
    "embodied_r_training.rl.loading",
    "embodied_r_training.rl.outputs",
    "embodied_r_training.rl.train_config",
    "embodied_r_training.rl.warm_start",
    "embodied_r_ros.reasoning.answers",
    "embodied_r_ros.reasoning.options",
)
# What SFT reads of its resolved config: the rest (GRPO's settings, rewards, reference) cannot change it.
SFT_CONFIG = ("method", "seed", "warm_start", "data.train_split", "data.max_prompt_tokens", "data.limit",
              "grpo.use_cpu", "grpo.bf16")  # fmt: skip
# GRPO: the trainer, its rewards and their schedule, the rollouts' generation, and the merge of the adapter
# it starts from (experiments start GRPO from the SFT adapter merged into the base model).
TRAINER_CODE = (
    *SFT_CODE,
    "embodied_r_ros.backends.base",
    "embodied_r_training.rl.train",
    "embodied_r_training.rl.shared_prompt",
    "embodied_r_ros.backends.decoding",
    "embodied_r_ros.backends.tool_decoding",  # imported by transformers_backend (rollouts use no tools)
    "embodied_r_ros.reasoning.calculator",
    "embodied_r_ros.reasoning.conclusion",
    "embodied_r_training.rl.rewards",
    "embodied_r_training.rl.schedule",
    "embodied_r_training.rl.staged_reward",
    "embodied_r_training.rl.restatements",
    "embodied_r_training.rl.curriculum",
    "embodied_r_training.rl.option_rotation",
    "embodied_r_ros.reasoning.prompts",
    "embodied_r_ros.backends.transformers_backend",
    "embodied_r_ros.backends.segment_tokenizer",
    "embodied_r_ros.backends.adapter_off",
    "embodied_r_ros.backends.image_cache",
    "embodied_r_ros.frames",
    "embodied_r_ros.backends.merge",
)
# The evaluator (scoring, summaries) and, per system, what computes its answers.
EVALUATOR_CODE = (
    "embodied_r_training.eval.evaluate",
    "embodied_r_training.eval.stats",
    "embodied_r_training.eval.lenient",  # model rows' answers read without tags, beside their scores
    "embodied_r_training.eval.partial",  # completions kept as generated (an interrupted row resumes)
    "embodied_r_training.rl.rewards",
    "embodied_r_training.rl.restatements",
    "embodied_r_ros.reasoning.conclusion",  # the option lookup's lines the consistency judge hides
    "embodied_r_ros.reasoning.answers",
    "embodied_r_ros.reasoning.options",
    "embodied_r_ros.reasoning.prompts",
    "embodied_r_ros.reasoning.messages",
    "embodied_r_ros.perception",
)
GENERATION_CODE = (
    "embodied_r_ros.backends.base",
    "embodied_r_ros.backends.transformers_backend",
    "embodied_r_ros.backends.decoding",
    "embodied_r_ros.backends.tool_decoding",  # --calculator, --lookup: what the tools write
    "embodied_r_ros.reasoning.calculator",
    "embodied_r_ros.reasoning.conclusion",
    "embodied_r_ros.backends.segment_tokenizer",
    "embodied_r_ros.backends.image_cache",
    "embodied_r_ros.backends.adapter_off",
    "embodied_r_ros.frames",
    "embodied_r_ros.backends.merge",  # a GRPO model is evaluated merged with the SFT adapter it started from
)
SYSTEM_CODE = {
    "oracle": (
        "embodied_r_training.tasks.*",
        "embodied_r_training.synth.world",
        "embodied_r_training.synth.ground_truth",
        "embodied_r_ros.reasoning.calculator",  # the traces' numbers
    ),
    "options-only": ("embodied_r_training.eval.baselines",),
    "constant": ("embodied_r_training.eval.constant",),
    "chance": (),
}
# What writes a prepared scene set: ``embodied-r synth`` (scenes, bags, questions) then ``embodied-r prepare
# --perceiver ground_truth`` (key frames, their descriptions, prompts). Its rows enter every later key by
# content; this key says only when a kept set may stand in for building it again (:func:`data_key`). The
# pipeline's config defaults (key-frame selection) are in it too: prepare reads them.
DATA_CODE = (
    "embodied_r_training.synth.*",
    "embodied_r_training.tasks.*",
    "embodied_r_training.data.*",
    "embodied_r_training.perceivers",
    "embodied_r_ros.config",
    "embodied_r_ros.frames",
    "embodied_r_ros.image_conversion",
    "embodied_r_ros.keyframes",
    "embodied_r_ros.perception",
    "embodied_r_ros.perceivers",
    "embodied_r_ros.poses.*",
    "embodied_r_ros.question_file",
    "embodied_r_ros.reasoning.*",
    "embodied_r_ros.backends.base",
)
# What writes the SFT examples (the oracle's traces): keyed by the examples themselves (sft_examples).
SFT_EXAMPLE_CODE = (
    "embodied_r_training.tasks.*",
    "embodied_r_training.synth.world",
    "embodied_r_ros.reasoning.calculator",  # the traces write numbers with its number()
)
# Plumbing a stage runs whose effect its key holds otherwise (a name ending in ".*": a package).
PLUMBING = (
    "embodied_r_ros",
    "embodied_r_training",
    "embodied_r_training.eval",
    "embodied_r_ros.config",  # parsing configs: the resolved config and the arguments are inputs
    "embodied_r_ros.cli.*",  # the command line: its arguments are inputs
    "embodied_r_training.commands.*",
    "embodied_r_ros.plugins",  # finding the installed commands, backends and perceivers by name
    "embodied_r_ros.backends",  # choosing a backend by its name: the name is an input
    "embodied_r_ros.backends.registry",
    "embodied_r_ros.backends.loading",  # finding a model's folder: its files are an input
    "embodied_r_ros.backends.cpu_bf16",  # bf16 on a CPU without it: stops a run at its start, alters none
    "embodied_r_training.data.schema",  # reading the prepared split: its rows are an input
    "embodied_r_training.eval.plots",  # pictures, not kept
)
# The libraries whose versions a result depends on.
LIBRARIES = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "tokenizers",
    "safetensors",
    "numpy",
)


def stage_code(modules: tuple[str, ...]) -> StageKey:
    """A key holding only the code of ``modules`` (add the inputs with :meth:`StageKey.with_inputs`)."""
    identity, where = code_identity(modules)
    return StageKey({}, identity, where)


def libraries_identity() -> str:
    """The Python version and the versions of :data:`LIBRARIES` installed here."""
    import importlib.metadata
    import platform

    versions = {name: importlib.metadata.version(name) for name in LIBRARIES}
    return value_identity({"python": ".".join(platform.python_version_tuple()[:2]), **versions})


def data_key(commands: list[list[str]], places: dict[str, str]) -> StageKey:
    """The key of a prepared scene set: :data:`DATA_CODE`, the ``embodied-r`` command lines that make it
    (folders written as ``places`` says) and the library versions."""
    return stage_code(DATA_CODE).with_inputs(
        commands=value_identity(commands, places), libraries=libraries_identity()
    )


class Identities:
    """Content identities of an experiment's inputs, with the checkout and OUT written as placeholders
    (prepared data holds absolute bag paths, a resolved config may hold paths)."""

    def __init__(self, out: Path) -> None:
        self.places = {str(Path(out).resolve()): "<out>", str(REPO): "<repo>"}
        # The data and the base model do not change while an experiment runs: each is read once (adapters
        # are, when trained here, so they are read every time).
        self._known: dict[tuple[str, Path, str], str] = {}

    def model(self, model: Path) -> str:
        """A model directory by its files."""
        key = ("model", Path(model), "")
        if key not in self._known:
            self._known[key] = tree_identity(model)
        return self._known[key]

    def split(self, data: Path, split: str) -> str:
        """A prepared split by its rows, as its JSON-lines file holds them. The parquet beside it, which the
        trainer and the evaluator read first, must hold the same rows (prepare writes both from one list; an
        interrupted write or an edit of one of them is refused here, naming the fix)."""
        known = ("split", Path(data), split)
        if known in self._known:
            return self._known[known]
        jsonl = data / f"{split}.jsonl"
        parquet = data / f"{split}.parquet"
        if parquet.is_file():
            from datasets import Dataset

            rows = [
                json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines() if line.strip()
            ]
            if Dataset.from_parquet(str(parquet)).to_list() != Dataset.from_list(rows).to_list():
                raise SystemExit(f"{parquet} and {jsonl.name} hold different rows: rebuild the data set "
                                 f"(delete {data} and run the experiment again)")  # fmt: skip
        self._known[known] = text_file_identity(jsonl, self.places)
        return self._known[known]

    def adapter(self, adapter: Path) -> str:
        """A LoRA adapter by its weights and its settings; the folder its config names as the base model
        (the checkout it was trained in) is no part of it: the base enters on its own, by content."""
        settings = json.loads((adapter / KEPT_ADAPTER_FILES[0]).read_text(encoding="utf-8"))
        settings.pop("base_model_name_or_path", None)
        return value_identity(
            {"settings": settings, "weights": file_identity(adapter / KEPT_ADAPTER_FILES[1])}
        )

    def config(self, config: Any, only: tuple[str, ...] = ()) -> str:
        """A resolved training config, without what enters by content (model, data, output folder); with
        ``only``, just those keys ("section" or "section.key")."""
        values = dataclasses.asdict(config)
        values.update(model="", output_dir="", source="")  # source: the file it was read from
        values["data"]["path"] = ""
        if only:
            picked: dict[str, Any] = {}
            for name in only:
                section, _, key = name.partition(".")
                if key:
                    picked.setdefault(section, {})[key] = values[section].get(key)
                else:
                    picked[section] = values[section]
            values = picked
        return value_identity(values, self.places)


def sft_examples_identity(data: Path, config: Any) -> str:
    """What SFT is fed: the (prompt, completion) rows :func:`warm_start_rows` makes of the training split
    (with ``warm_start.answers: trace``, the oracle's traces), by content."""
    from embodied_r_training.data.schema import read_split
    from embodied_r_training.rl.warm_start import warm_start_rows

    rows = warm_start_rows(read_split(data, config.data.train_split, ("prompt", "solution"), "SFT"),
                           config.warm_start.answers, config.seed)  # fmt: skip
    return value_identity([[r["prompt"], r["completion"]] for r in rows])


def train_key(
    ids: Identities, config: Any, data: Path, model: Path, start: Path | str | None = None
) -> StageKey:
    """The key of one training run: ``config`` (resolved) on the training split of ``data`` from the base
    ``model``, starting from what an earlier run made (GRPO after SFT) when given: a LoRA adapter merged into
    the base (its folder), or a fully fine-tuned model by its identity (:func:`recipe_identity`)."""
    sft = config.method == "sft"
    read = (*SFT_CONFIG, *(("lora",) if config.warm_start.lora else ())) if sft else ()
    key = stage_code(SFT_CODE if sft else TRAINER_CODE).with_inputs(
        config=ids.config(config, read),
        data=ids.split(data, config.data.train_split),
        model=ids.model(model),
        libraries=libraries_identity(),
    )
    if start is not None:
        key = key.with_inputs(start=start if isinstance(start, str) else ids.adapter(start))
    if config.method == "sft":
        key = key.with_inputs(sft_examples=sft_examples_identity(data, config))
    return key


def recipe_identity(key: StageKey) -> str:
    """A trained model known by how it is made (the key of the run that makes it), not by its weights:
    for a fully fine-tuned model, whose weights are too large to keep in git. A run that restores results
    keyed by it recomputes nothing; one that needs the weights trains them from the same recipe."""
    return "recipe:" + value_identity(key.as_dict())


def eval_settings(command: list[str]) -> dict[str, Any]:
    """The resolved configuration ``embodied-r COMMAND`` (an ``eval``) runs with, its defaults included
    (greedy decoding is a default), with the paths left out: the data, the models and the calibration data
    enter the key by content."""
    import argparse

    from embodied_r_training.commands.evaluate import config_from_args, register

    parser = argparse.ArgumentParser(prog="embodied-r")
    register(parser.add_subparsers(dest="command"))
    values = dataclasses.asdict(config_from_args(parser.parse_args(command)))
    values.update(dataset="", out="", calibration="", bag_root="", train_log="")
    for role in ("lm", "vlm", "reference"):
        if values.get(role):
            values[role]["model"] = ""
            values[role]["transformers"]["adapter"] = ""
    return values


def eval_key(ids: Identities, dataset: Path, system: dict[str, Any], command: list[str]) -> StageKey:
    """The key of one evaluation of ``system`` on the test split of ``dataset``: ``system`` holds its
    ``name`` (an ``--system`` of ``embodied-r eval``) and its inputs by content (models, adapters,
    calibration data); ``command``: the ``embodied-r eval`` arguments it runs with (resolved, paths left
    out: :func:`eval_settings`)."""
    name = system["name"]
    modules = EVALUATOR_CODE + SYSTEM_CODE.get(name, GENERATION_CODE)
    return stage_code(modules).with_inputs(
        data=ids.split(dataset, "test"),
        system=value_identity(system),
        settings=value_identity(eval_settings(command), ids.places),
        libraries=libraries_identity(),
    )


@dataclass(frozen=True)
class System:
    """One system as ``embodied-r eval`` runs it: ``name`` (its ``--system``), its ``arguments`` (paths
    included), its ``inputs`` by content (models, adapters, calibration data: what the key holds instead of
    the paths) and what must exist before it runs (``needs``, e.g. a merged model)."""

    name: str
    arguments: list[str]
    inputs: dict[str, str]
    needs: Callable[[], Any] | None = None


def evaluate(
    out: Path,
    dataset: Path,
    name: str,
    system: System,
    flags: list[str],
    stages: Stages,
    kept: KeptResults,
    ids: Identities,
) -> Path:
    """``embodied-r eval DATASET --split test`` of one system (the experiment's shared ``flags``) into
    ``OUT/eval/NAME``: restored when kept with its key, computed and kept otherwise."""
    target = out / "eval" / name
    command = ["eval", str(dataset), "--split", "test", "--out", str(target), *flags, *system.arguments]
    key = eval_key(ids, dataset, {"name": system.name, **system.inputs}, command)
    if kept.restore("eval", name, key, KEPT_EVAL_FILES):
        return target
    kept.claim(target, key)
    done = target / EVAL_DONE

    def run() -> None:
        if system.needs is not None:
            system.needs()
        cli(command)
        done.write_text("{}\n")  # last: a result cut off halfway is never taken for a finished one

    stages.run(f"eval {name}", done, run)
    kept.keep("eval", name, key, {f: target / f for f in KEPT_EVAL_FILES})
    return target


def grpo_log(out: Path, name: str, kept: KeptResults, key: StageKey) -> list[dict[str, Any]]:
    """GRPO run ``name``'s log history (``key``: the run's): kept (``log_history.json``), or read from its
    checkpoints in ``OUT/runs/NAME`` once the run has finished (then kept); [] when neither is there."""
    from embodied_r_training.eval.plots import load_log_history
    from embodied_r_training.rl.outputs import NODE_PARAMS

    run_dir = out / "runs" / name
    log = run_dir / "log_history.json"
    if not kept.restore("runs", name, key, ("log_history.json",)):
        if not (run_dir / "final" / NODE_PARAMS).is_file():
            return []  # not trained here, or cut off: a partial log is never kept
        log.write_text(json.dumps({"log_history": load_log_history(run_dir)}) + "\n", encoding="utf-8")
        kept.keep("runs", name, key, {"log_history.json": log})
    return load_log_history(log)
