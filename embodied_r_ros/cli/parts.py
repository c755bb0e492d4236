"""The application's parts: which perceivers exist, and the pipeline and node made with them.

The only place that chooses perceivers: the core's (``vlm``), plus the training package's (``ground_truth``)
where it is installed. ``embodied-r run``, ``embodied-r demo`` and the node's executable (``embodied_r_node``,
which ``ros2 run`` and the launch file start) all go through here; the core and the ROS layer take the
registry they are given.
"""

from __future__ import annotations

from typing import Sequence

from ..config import PipelineConfig
from ..perceivers import PerceiverRegistry, core_perceivers
from ..pipeline import EmbodiedR

# What a user installs for the perceivers of the training package.
TRAINING_INSTALL_HINT = (
    "install the whole project (`pip install .` in the repository, or build it with colcon), or use "
    "perception.perceiver: vlm"
)


def perceivers() -> PerceiverRegistry:
    """The core's perceivers and, when the training package can be imported, its ground truth."""
    registry = core_perceivers()
    try:  # imported here, so that `embodied-r run` needs no training dependencies
        from embodied_r_training.perceivers import register
    except ImportError as exc:
        if (exc.name or "").startswith("embodied_r_ros"):
            raise  # a bug in this package, not a missing dependency
        registry.unavailable(
            "ground_truth",
            f"it needs the package embodied_r_training (the synthetic world and its renderer), which is not "
            f"importable ({exc}); {TRAINING_INSTALL_HINT}",
        )
        return registry
    register(registry)
    return registry


def load_pipeline(config: PipelineConfig) -> EmbodiedR:
    """The pipeline ``config`` describes, its perceiver chosen from :func:`perceivers`."""
    return EmbodiedR.from_config(config, perceivers=perceivers())


def node_main(args: Sequence[str] | None = None) -> int:
    """Run the ``embodied_r`` node with the application's perceivers (the ``embodied_r_node`` executable,
    ``python -m embodied_r_ros.cli.parts``); returns its exit code."""
    from ..ros.node import main

    return main(args, perceivers=perceivers())


if __name__ == "__main__":
    import sys

    sys.exit(node_main())
