"""Shared fixtures: the tiny offline models, built once per test session."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

logger = logging.getLogger(__name__)

TINY_MODELS_ENV = "EMBODIED_R_TINY_MODELS"


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``vlm/`` (tiny Qwen2.5-VL) and ``lm/`` (tiny Qwen2), random weights, seed 0.

    Reuses the directory named by $EMBODIED_R_TINY_MODELS when it holds a complete build of the current
    format (e.g. made once with ``embodied-r tiny-models DIR``); otherwise builds into a temporary one.
    """
    from embodied_r_ros.backends.tiny_models import build_tiny_models, tiny_models_complete

    given = os.environ.get(TINY_MODELS_ENV, "")
    if given and tiny_models_complete(Path(given)):
        return Path(given)
    if given:
        logger.warning(
            "%s=%s is not a complete tiny-model build; building a fresh one", TINY_MODELS_ENV, given
        )
    out = tmp_path_factory.mktemp("tiny_models")
    build_tiny_models(out, seed=0)
    return out
