"""The node's models: the pipeline (perceiver and LM) loaded at configure, with its CPU threads.

A node given a pipeline (tests and benchmarks share one) loads nothing; otherwise configure loads one here
and cleanup closes it. A model that cannot be loaded stops configure with one line naming the role, the
parameter, the reason and the fix (:class:`ModelLoadError`).
"""

from __future__ import annotations

import os
from typing import Any

from ..backends import BackendError
from ..node_config import NodeConfig
from ..perceivers import PerceiverRegistry
from ..pipeline import EmbodiedR


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message names the role, the parameter, the reason and the fix."""


def set_torch_threads(config: NodeConfig) -> int | None:
    """Apply ``torch_threads`` when a model runs in-process; returns the thread count set (None: no torch)."""
    if "transformers" not in (config.vlm.backend, config.lm.backend):
        return None
    import torch

    threads = config.torch_threads or max(1, (os.cpu_count() or 2) - 1)
    torch.set_num_threads(threads)
    return threads


def load_pipeline(config: NodeConfig, perceivers: PerceiverRegistry) -> EmbodiedR:
    """Make the perceiver (``perception.perceiver``, from ``perceivers``) and load the LM; raises
    :class:`ModelLoadError` naming the role and parameter that failed (ConfigError: an unknown perceiver)."""
    try:
        return EmbodiedR.from_config(config.pipeline(), perceivers=perceivers)
    except BackendError as exc:
        raise ModelLoadError(str(exc)) from exc


def load_models(config: NodeConfig, perceivers: PerceiverRegistry, logger: Any) -> EmbodiedR:
    """Set the torch threads, say what is loaded (on ``logger``) and load it (:func:`load_pipeline`)."""
    threads = set_torch_threads(config)
    logger.info(
        f"loading the {perceivers.describe(config.pipeline())} and the LM {config.lm.model!r}"
        f"{f' ({threads} torch CPU threads)' if threads else ''} ..."
    )
    return load_pipeline(config, perceivers)
