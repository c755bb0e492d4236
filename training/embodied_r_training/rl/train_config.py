"""The configuration of ``embodied-r train``: typed sections filled from a YAML file, checked at start.

A config file (``training/configs/*.yaml``) has these top-level keys; anything else is an error:

* ``base``: another config file (relative to this one) whose values this file overrides, key by key.
* ``model``: the policy LM (local directory, hub name, or ``tiny`` for the project's tiny random LM).
* ``output_dir``: checkpoints, logs and the final model go here.
* ``data``: :class:`DataSection`, the data set written by ``embodied-r prepare``.
* ``warm_start``: :class:`~.warm_start.WarmStartSection`, optional supervised steps on the answer format
  before GRPO (off, as in the paper).
* ``lora``: :class:`LoraSection` (PEFT); off = full fine-tuning as in the paper.
* ``reference``: :class:`ReferenceSection`, the frozen model of the consistency reward.
* ``rewards``: the reward stages, each with ``start_epoch`` (or ``start_step``) and weights by registered
  reward name, e.g. ``{start_epoch: 1, format: 7, accuracy: 3}`` (:meth:`RewardSchedule.from_list`); the
  paper's format:accuracy:consistency schedule when absent.
* ``curriculum``: optional stages of tasks by step, easy tasks first (:class:`~.curriculum.Curriculum`);
  absent = TRL's shuffled order, as in the paper.
* ``grpo``: keyword arguments of TRL's ``GRPOConfig`` (learning_rate, beta, num_generations, ...).
  Unknown ones are an error; ``output_dir`` is taken from the top level.
* ``seed``: one seed for sampling, data order and initialisation.
* ``method``: ``grpo`` (default: the optional warm start, then GRPO) or ``sft``: supervised fine-tuning
  only, ``warm_start.steps`` steps on the ground-truth answers (the paper's SFT-vs-RL comparison); the
  ``grpo`` section then only supplies the device settings (``use_cpu``, ``bf16``).

Every check that can fail without loading a model runs in :func:`load_train_config` and
:func:`check_batch_shape`, so a bad config fails in a second, not after the model has loaded.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_r_ros.config import ConfigError, ModelConfig, OpenAIOptions, TransformersOptions, from_dict

from .curriculum import Curriculum
from .rewards import registered_reward
from .schedule import RewardSchedule
from .warm_start import WarmStartSection

REFERENCE_BACKENDS = ("policy", "transformers", "openai")
METHODS = ("grpo", "sft")
TOP_LEVEL_KEYS = (
    "base", "model", "output_dir", "data", "warm_start", "lora", "reference", "rewards", "grpo", "seed",
    "method", "curriculum",
)  # fmt: skip
# GRPOConfig keys the trainer sets itself: a value in the config would be silently overridden.
OWNED_GRPO_KEYS = ("output_dir", "seed", "reward_weights", "remove_unused_columns")


@dataclass(frozen=True)
class DataSection:
    """Where the training data lives (a directory written by ``embodied-r prepare``)."""

    path: str = ""
    train_split: str = "train"
    eval_split: str = ""  # e.g. "val": evaluated every eval_steps if grpo.eval_strategy says so
    max_prompt_tokens: int = 6144  # the paper's input limit; longer prompts are left out and counted
    limit: int = 0  # use only the first N training rows (0 = all); for smoke runs
    # GRPO only: each completion of a group sees the options in another rotation, so the right option
    # sits under every letter equally often (option_rotation.py); off = the data set's order, as the paper
    rotate_options: bool = False

    def __post_init__(self) -> None:
        if self.max_prompt_tokens < 1 or self.limit < 0:
            raise ConfigError("data.max_prompt_tokens must be >= 1 and data.limit >= 0 (0 = all rows)")


@dataclass(frozen=True)
class LoraSection:
    """PEFT LoRA; with it, the reference model is the same weights with the adapter switched off."""

    enabled: bool = False
    r: int = 64
    alpha: int = 128
    dropout: float = 0.05
    target_modules: str = "all-linear"  # "all-linear" or comma-separated module names ("q_proj,v_proj")
    merge: bool = False  # also save the adapter merged into the base model (final-merged/)

    def __post_init__(self) -> None:
        if self.r < 1 or self.alpha < 1 or not 0 <= self.dropout < 1:
            raise ConfigError(f"lora needs r >= 1, alpha >= 1 and 0 <= dropout < 1; got {self}")

    def modules(self) -> str | list[str]:
        """``target_modules`` as PEFT takes it."""
        if self.target_modules == "all-linear":
            return "all-linear"
        return [m.strip() for m in self.target_modules.split(",") if m.strip()]


@dataclass(frozen=True)
class ReferenceSection:
    """The frozen reference model of the logical-consistency reward.

    ``policy``: the policy's own starting weights, in-process: with LoRA the adapter is switched off (no
    second copy); with full fine-tuning TRL's frozen KL reference model (beta > 0), else one copy is
    loaded. ``transformers``: another local model (``model``). ``openai``: an OpenAI-compatible server
    (``model`` is the served name, ``base_url`` its address), e.g. vLLM serving a larger checker.
    """

    backend: str = "policy"
    model: str = ""
    base_url: str = "http://127.0.0.1:8000/v1"
    temperature: float = 0.1  # paper: low temperature
    max_new_tokens: int = 16
    numeric_correct_mra: float = 0.5

    def __post_init__(self) -> None:
        if self.backend not in REFERENCE_BACKENDS:
            raise ConfigError(
                f"reference.backend must be one of {', '.join(REFERENCE_BACKENDS)}, got {self.backend!r}"
            )
        if self.backend in ("transformers", "openai") and not self.model:
            raise ConfigError(f"reference.backend {self.backend} needs reference.model (a model name or dir)")

    def model_config(self, device: str = "auto") -> ModelConfig:
        """The :class:`ModelConfig` of a separately loaded reference (backend transformers/openai)."""
        backend = "openai" if self.backend == "openai" else "transformers"
        return ModelConfig(
            model=self.model,
            backend=backend,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            transformers=TransformersOptions(device=device),
            openai=OpenAIOptions(base_url=self.base_url),
        )


@dataclass(frozen=True)
class TrainConfig:
    """Everything ``embodied-r train`` needs; see the module docstring for the file layout."""

    model: str = ""
    output_dir: str = "out/train"
    data: DataSection = field(default_factory=DataSection)
    warm_start: WarmStartSection = field(default_factory=WarmStartSection)
    lora: LoraSection = field(default_factory=LoraSection)
    reference: ReferenceSection = field(default_factory=ReferenceSection)
    schedule: RewardSchedule = field(default_factory=RewardSchedule)  # the paper's stages
    grpo: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    method: str = "grpo"  # "grpo", or "sft": supervised steps on the answers only (see the module docstring)
    curriculum: Curriculum | None = None  # GRPO prompts by task, easy first; None = TRL's shuffled order
    source: str = ""  # the file(s) it was read from, for messages

    @property
    def needs_reference(self) -> bool:
        """Whether a stage weights a reward that needs the reference model (the consistency reward)."""
        return any(registered_reward(n).needs_reference for n in self.schedule.weighted_names)


def _yaml_load(text: str) -> Any:
    """YAML with ``1e-3`` read as a float (plain YAML 1.1 wants ``1.0e-3`` and would give a string)."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    pattern = re.compile(
        r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"
    )
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", pattern, list("-+0123456789."))
    return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``, mappings merged key by key, anything else replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The mapping of ``path`` with its ``base`` chain resolved (base first, this file over it)."""
    import yaml

    path = path.resolve()
    if path in seen:
        raise ConfigError(f"config {path}: base files form a loop ({' -> '.join(map(str, seen))})")
    if not path.is_file():
        raise ConfigError(f"training config {path} does not exist; see training/configs/ for examples")
    try:
        data = _yaml_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"training config {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"training config {path} must be a mapping of keys, got {type(data).__name__}")
    base = data.pop("base", None)
    if base is None:
        return data
    return _merge(_read_yaml(path.parent / str(base), (*seen, path)), data)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["grpo.max_steps=2", "lora.enabled=true"]`` as a nested mapping (values parsed as YAML)."""
    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set takes key=value (e.g. grpo.max_steps=2), got {pair!r}")
        value = _yaml_load(text) if text else ""
        node = result
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return result


def _grpo_fields() -> set[str]:
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig) if f.init}


def build_train_config(data: Mapping[str, Any], source: str = "") -> TrainConfig:
    """A :class:`TrainConfig` from a mapping (the YAML's); unknown keys raise :class:`ConfigError`."""
    unknown = sorted(set(data) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise ConfigError(
            f"{source or 'training config'}: unknown key(s) {', '.join(unknown)}; known top-level keys: "
            f"{', '.join(TOP_LEVEL_KEYS)}"
        )
    try:
        sections = {
            name: from_dict(cls, data.get(name), where=f"{name}.")
            for name, cls in (
                ("data", DataSection),
                ("warm_start", WarmStartSection),
                ("lora", LoraSection),
                ("reference", ReferenceSection),
            )
        }
        stages = data.get("rewards")
        schedule = RewardSchedule() if stages is None else RewardSchedule.from_list(stages)
        curriculum = None if data.get("curriculum") is None else Curriculum.from_list(data["curriculum"])
    except ConfigError as exc:
        raise ConfigError(f"{source or 'training config'}: {exc}") from exc
    grpo = dict(data.get("grpo") or {})
    known = _grpo_fields()
    bad = sorted(set(grpo) - known)
    if bad:
        raise ConfigError(
            f"{source or 'training config'}: unknown grpo key(s) {', '.join(bad)}; grpo takes the fields of "
            "TRL's GRPOConfig (e.g. learning_rate, beta, num_generations, per_device_train_batch_size, "
            "max_completion_length, num_train_epochs, use_vllm)"
        )
    owned = sorted(set(grpo) & set(OWNED_GRPO_KEYS))
    if owned:
        raise ConfigError(
            f"{source or 'training config'}: grpo.{owned[0]} is set by the trainer; use the top-level "
            "output_dir / seed, and the rewards section for weights"
        )
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(
            f"{source or 'training config'}: model must name the policy LM (a directory, a hub name such as "
            "Qwen/Qwen2.5-3B-Instruct, or tiny)"
        )
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"{source or 'training config'}: seed must be an integer, got {seed!r}")
    method = data.get("method", "grpo")
    if method not in METHODS:
        raise ConfigError(
            f"{source or 'training config'}: method must be one of {', '.join(METHODS)}, got {method!r}"
        )
    if method == "sft" and sections["warm_start"].steps < 1:
        raise ConfigError(
            f"{source or 'training config'}: method sft trains warm_start.steps supervised steps; set "
            "warm_start.steps >= 1 (and its learning_rate, batch_size)"
        )
    config = TrainConfig(
        model=model, output_dir=str(data.get("output_dir") or "out/train"), schedule=schedule, grpo=grpo,
        seed=seed, method=method, curriculum=curriculum, source=source, **sections,
    )  # fmt: skip
    check_batch_shape(config)
    check_curriculum(config)
    check_reference(config)
    return config


def check_curriculum(config: TrainConfig) -> None:
    """A curriculum lays GRPO's prompts out step by step: it needs ``grpo.max_steps`` and TRL's sampler
    keeping the data set's order; SFT does not read it."""
    if config.curriculum is None:
        return
    if config.method != "grpo":
        raise ConfigError(
            f"{config.source}: curriculum orders GRPO prompts; method {config.method} would ignore it"
        )
    max_steps = config.grpo.get("max_steps", -1)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ConfigError(
            f"{config.source}: curriculum needs grpo.max_steps >= 1 (its stages start at steps), got "
            f"{max_steps!r}"
        )
    last = config.curriculum.stages[-1].start_step
    if last >= max_steps:
        raise ConfigError(
            f"{config.source}: the last curriculum stage starts at step {last}, not before "
            f"grpo.max_steps={max_steps}; every stage needs steps"
        )
    if config.grpo.get("shuffle_dataset"):
        raise ConfigError(
            f"{config.source}: grpo.shuffle_dataset: true would undo the curriculum's order; leave it out"
        )


def check_reference(config: TrainConfig) -> None:
    """The in-process reference needs a frozen copy of the starting weights: LoRA's base, or TRL's KL model.

    With full fine-tuning and ``grpo.beta`` 0 (TRL's default) TRL keeps no frozen model, and the policy
    itself would judge its own reasoning as it drifts; fail before anything loads.
    """
    beta = float(config.grpo.get("beta", 0.0))
    if config.needs_reference and config.reference.backend == "policy" and not config.lora.enabled:
        if beta <= 0:
            raise ConfigError(
                f"{config.source}: reference.backend policy with full fine-tuning needs grpo.beta > 0 (TRL "
                "then keeps the frozen starting weights; the paper uses 0.001), or lora.enabled: true, or "
                "reference.backend transformers/openai with reference.model"
            )


def load_train_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    """Read ``path`` (with its ``base`` chain) and ``--set`` overrides into a checked :class:`TrainConfig`."""
    data = _merge(_read_yaml(Path(path)), parse_overrides(overrides or []))
    return build_train_config(data, source=str(path))


def world_size() -> int:
    """Processes taking part (accelerate / torchrun set WORLD_SIZE; 1 for a plain run)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def check_batch_shape(config: TrainConfig, processes: int | None = None) -> int:
    """Check that each generation batch holds whole groups; return completions per optimizer step.

    TRL generates ``per_device_train_batch_size * processes * steps_per_generation`` completions at a time
    (``steps_per_generation`` defaults to ``gradient_accumulation_steps``), ``num_generations`` per prompt;
    a batch that does not divide into whole groups fails deep inside TRL after the model loaded.
    """
    grpo = config.grpo
    processes = processes or world_size()
    per_device = int(grpo.get("per_device_train_batch_size", 8))
    accumulation = int(grpo.get("gradient_accumulation_steps", 1))
    steps_per_generation = int(grpo.get("steps_per_generation") or accumulation)
    group = int(grpo.get("num_generations", 8))
    batch = grpo.get("generation_batch_size") or per_device * processes * steps_per_generation
    if group < 2:
        raise ConfigError(
            f"{config.source}: grpo.num_generations is {group}; GRPO compares completions within a group, "
            "so it needs >= 2 (the paper uses 8)"
        )
    if batch % group:
        raise ConfigError(
            f"{config.source}: the group size grpo.num_generations={group} does not divide the generation "
            f"batch of {batch} completions (per_device_train_batch_size {per_device} x {processes} "
            f"process(es) x steps_per_generation {steps_per_generation}); make the batch a multiple of "
            f"{group}, e.g. per_device_train_batch_size {group} or gradient_accumulation_steps {group}"
        )
    return per_device * processes * accumulation


def required_columns(config: TrainConfig) -> tuple[str, ...]:
    """The data-set columns training reads: the prompt and solution, the columns of every reward the
    schedule computes (the consistency reward adds question and options), and task for a curriculum."""
    from ..data.schema import TRAINING

    columns = [*TRAINING, *(c for reward in config.schedule.rewards() for c in reward.columns)]
    if config.curriculum is not None:
        columns.append("task")
    return tuple(dict.fromkeys(columns))
