"""``embodied-r train``: GRPO training of the reasoning LM with TRL, the paper's rewards and schedule.

Data flow: the data set of ``embodied-r prepare`` (chat prompts exactly as the node builds them, plus
``solution``/``question``/``options``) -> TRL's ``GRPOTrainer`` with one reward function,
:class:`~.staged_reward.StagedReward` (the rewards the config names, by default format, accuracy and
consistency, weighted by stage) -> checkpoints with
optimizer state in ``output_dir/checkpoint-N`` -> the final model in ``output_dir/final`` (a LoRA adapter,
or the full weights) plus ``node_params.yaml``, the ROS parameters that make the node load it.

The consistency reward's reference model is by default the policy's own starting weights, in-process:
the LoRA adapter switched off (peft ``disable_adapter``), or TRL's frozen KL reference with full
fine-tuning, so no extra copy is loaded in either case (see :class:`PolicyReference`).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from embodied_r_ros.config import ConfigError, ModelConfig

from .loading import load_model, load_split, load_tokenizer, lora_config, resolve_policy
from .outputs import FINAL_DIR, MERGED_DIR, TrainResult, write_config_copy, write_node_params
from .sft import run_warm_start, train_sft
from .train_config import TrainConfig, check_batch_shape

logger = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


# ----------------------------------------------------------------------------------------------------
# The consistency reward's reference model


class PolicyReference:
    """A :class:`~embodied_r_ros.backends.GenerationBackend` answering with the policy's starting weights.

    Bound to a trainer after it is built (:meth:`bind`). With LoRA it generates with the trained model under
    ``disable_adapter()`` (the base weights, no copy); with full fine-tuning it uses TRL's frozen KL
    reference model (``trainer.ref_model``, present when beta > 0). Either way the model is unwrapped for
    generation the way TRL does it (gathering DeepSpeed ZeRO-3 shards).

    In a multi-process run that unwrapping is a collective (ZeRO-3 gathers the shards from every rank, FSDP
    likewise), so :attr:`collective` is true and the consistency reward calls :meth:`generate` on every
    rank at every step, also where a rank has nothing to check; otherwise the ranks that entered it would
    wait forever for the one that did not.
    """

    supports_images = False

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.trainer: Any = None
        self.calls = 0
        self._backend: Any = None  # kept across steps: it caches the tokenized fixed prompt text

    def bind(self, trainer: Any) -> None:
        """Use ``trainer``'s model; raise when there is no frozen copy of the starting weights."""
        from peft import PeftModel

        lora = isinstance(trainer.accelerator.unwrap_model(trainer.model), PeftModel)
        if not lora and getattr(trainer, "ref_model", None) is None:
            raise ConfigError(
                "reference.backend policy needs the starting weights: use LoRA, or grpo.beta > 0 (TRL then "
                "keeps a frozen reference model), or set reference.backend transformers with "
                "reference.model"
            )
        self.trainer = trainer

    @property
    def collective(self) -> bool:
        """True when generating involves every process of the run (more than one process)."""
        return self.trainer is not None and self.trainer.accelerator.num_processes > 1

    @contextlib.contextmanager
    def _model(self) -> Iterator[tuple[Any, bool]]:
        """The unwrapped model to generate with, and whether its LoRA adapter must be turned off."""
        from trl.models.utils import unwrap_model_for_generation

        trainer = self.trainer
        if trainer is None:
            raise RuntimeError("PolicyReference.bind(trainer) must be called before generate")
        if getattr(trainer, "ref_model", None) is not None:
            with unwrap_model_for_generation(trainer.ref_model, trainer.accelerator) as model:
                yield model, False
            return
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            yield model, True

    def generate(
        self,
        requests: Sequence[Any],
        *,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
    ) -> list[str]:
        """One reply per request from the starting weights (one batched ``generate``)."""
        from embodied_r_ros.backends.adapter_off import AdapterOff
        from embodied_r_ros.backends.transformers_backend import TransformersBackend

        self.calls += 1
        with self._model() as (model, lora):
            if self._backend is None or self._backend.model is not model:
                self._backend = TransformersBackend.from_model(
                    self.config, model, self.trainer.processing_class
                )
            backend = AdapterOff(self._backend) if lora else self._backend
            was_training = model.training
            model.eval()
            try:
                return backend.generate(requests, max_new_tokens=max_new_tokens, temperature=temperature)
            finally:
                model.train(was_training)

    def close(self) -> None:
        self.trainer = self._backend = None


def build_reference(config: TrainConfig) -> Any:
    """The consistency reward's reference backend, or None when no stage weights a reward that needs it."""
    if not config.needs_reference:
        return None
    section = config.reference
    if section.backend == "policy":
        return PolicyReference(
            ModelConfig(
                model=config.model, max_new_tokens=section.max_new_tokens, temperature=section.temperature
            )
        )
    from embodied_r_ros.backends import load_backend

    return load_backend(section.model_config(), vision=False)


# ----------------------------------------------------------------------------------------------------
# The trainer


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The ``checkpoint-N`` directory with the highest N in ``output_dir`` (None if there is none)."""
    if not output_dir.is_dir():
        return None
    found = [
        (int(m.group(1)), p) for p in output_dir.iterdir() if (m := _CHECKPOINT.match(p.name)) and p.is_dir()
    ]
    return max(found)[1] if found else None


def grpo_arguments(config: TrainConfig) -> Any:
    """TRL's ``GRPOConfig`` from the config's ``grpo`` section (output_dir and seed from the top level)."""
    from trl import GRPOConfig

    values = dict(config.grpo)
    values.setdefault("logging_steps", 1)  # every reward, every step
    values.setdefault("save_strategy", "epoch")
    values.setdefault("report_to", "none")
    if config.curriculum is not None:
        values["shuffle_dataset"] = False  # the curriculum laid the rows out in step order
    try:
        return GRPOConfig(output_dir=config.output_dir, seed=config.seed, **values)
    except (ValueError, TypeError) as exc:
        hint = ""
        if values.get("bf16") and not values.get("use_cpu"):
            hint = " (no GPU here? --set grpo.bf16=false --set grpo.use_cpu=true, or cpu_smoke.yaml)"
        raise ConfigError(f"{config.source}: grpo settings rejected by TRL: {exc}{hint}") from exc


def build_trainer(
    config: TrainConfig, callbacks: Sequence[Any] = (), start: Path | None = None, trainer_class: Any = None
) -> Any:
    """A ready ``GRPOTrainer`` for ``config`` (model loaded, data checked, reward and reference wired),
    starting from the weights in ``start`` (default: ``config.model``). ``trainer_class``: default
    :class:`~.shared_prompt.SharedPromptGRPOTrainer` (each prompt run once per group in the loss pass; the
    same gradient as TRL's ``GRPOTrainer``, which benchmarks pass to compare)."""
    from .curriculum import prompts_per_step, with_curriculum
    from .option_rotation import with_rotated_options
    from .rewards import ConsistencyConfig, RewardContext
    from .shared_prompt import SharedPromptGRPOTrainer
    from .staged_reward import StagedReward

    args = grpo_arguments(config)
    start = start or resolve_policy(config.model)
    # Data first: a data-set problem fails before minutes of model loading.
    tokenizer = load_tokenizer(config, start)
    train_dataset = load_split(config, config.data.train_split, tokenizer)
    if config.curriculum is not None:
        per_step = prompts_per_step(check_batch_shape(config), args.num_generations, args.num_iterations)
        where = f"split {config.data.train_split!r} of {config.data.path}"
        train_dataset = with_curriculum(
            train_dataset, config.curriculum, args.max_steps, per_step, config.seed, where
        )
    if config.data.rotate_options:
        train_dataset = with_rotated_options(train_dataset, config.seed)
    eval_dataset = load_split(config, config.data.eval_split, tokenizer) if config.data.eval_split else None
    model = load_model(config, start)
    reference = build_reference(config)
    section = config.reference
    context = RewardContext(
        reference, ConsistencyConfig(section.temperature, section.max_new_tokens, section.numeric_correct_mra)
    )
    peft_config = lora_config(config) if config.lora.enabled else None
    trainer = (trainer_class or SharedPromptGRPOTrainer)(
        model=model,
        reward_funcs=[StagedReward(config.schedule, context)],
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=list(callbacks),
    )
    if isinstance(reference, PolicyReference):
        reference.bind(trainer)
    trainer.embodied_r_reference = reference  # for benchmarks and tests: reference.calls
    return trainer


def _resume_from(config: TrainConfig, resume: bool | str | None) -> str | None:
    output_dir = Path(config.output_dir)
    latest = latest_checkpoint(output_dir)
    if resume in (None, False):
        if latest is not None:
            raise ConfigError(
                f"{output_dir} already holds {latest.name}; pass --resume to continue that run, or choose "
                "another output_dir"
            )
        return None
    if resume is True:
        if latest is None:
            logger.warning("--resume: no checkpoint in %s yet, starting from the beginning", output_dir)
            return None
        return str(latest)
    path = Path(resume)
    if not (path / "trainer_state.json").is_file():
        raise ConfigError(f"--resume {path}: not a checkpoint directory (no trainer_state.json in it)")
    return str(path)


def save_final(trainer: Any, config: TrainConfig) -> tuple[Path, Path | None]:
    """Save the final adapter or model, with tokenizer; with lora.merge also the merged full model."""
    output_dir = Path(config.output_dir)
    final = output_dir / FINAL_DIR
    trainer.save_model(str(final))
    trainer.processing_class.save_pretrained(str(final))
    merged_dir = None
    if config.lora.enabled and config.lora.merge and trainer.accelerator.is_main_process:
        merged = trainer.accelerator.unwrap_model(trainer.model).merge_and_unload()
        merged_dir = output_dir / MERGED_DIR
        merged.save_pretrained(str(merged_dir))
        trainer.processing_class.save_pretrained(str(merged_dir))
    return final, merged_dir


def train(
    config: TrainConfig, resume: bool | str | None = None, callbacks: Sequence[Any] = ()
) -> TrainResult:
    """Run GRPO training as configured (or SFT, ``method: sft``); ``resume`` True continues from the
    latest checkpoint."""
    if config.method == "sft":
        return train_sft(config)
    checkpoint = _resume_from(config, resume)
    grpo_arguments(config)  # TRL's own checks of the grpo section, before any model is looked for
    output_dir = Path(config.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    start = run_warm_start(config) if config.warm_start.steps else resolve_policy(config.model)
    trainer = build_trainer(config, callbacks, start)
    write_config_copy(config, output_dir)
    if checkpoint:
        logger.info("resuming from %s", checkpoint)
    trainer.train(resume_from_checkpoint=checkpoint)
    final, merged = save_final(trainer, config)
    result = TrainResult(
        output_dir=output_dir,
        final_dir=final,
        merged_dir=merged,
        base_model=start,
        global_step=trainer.state.global_step,
        log_history=list(trainer.state.log_history),
    )
    if trainer.accelerator.is_main_process:  # one writer when accelerate runs a process per GPU
        trainer.state.save_to_json(str(output_dir / "trainer_state.json"))
        write_node_params(result)
    return result


if __name__ == "__main__":  # the command moved out of this library module; say where instead of doing nothing
    raise SystemExit(
        "embodied_r_training.rl.train is a library module: run `embodied-r train` or "
        "`python -m embodied_r_training.commands.train` (what `accelerate launch -m` runs on every GPU)"
    )
