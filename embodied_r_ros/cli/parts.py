"""The application's parts: which perceivers exist, and the pipeline and node made with them.

The only place that chooses perceivers: the core's (``vlm``) and those installed packages add through the
entry-point group ``embodied_r_ros.perceivers`` (the training package's ``ground_truth``:
:func:`~embodied_r_ros.perceivers.installed_perceivers`). ``embodied-r run``, ``embodied-r demo`` and the
node's executable (``embodied_r_node``, which ``ros2 run`` and the launch file start) all go through here;
the core and the ROS layer take the registry they are given.
"""

from __future__ import annotations

from typing import Sequence

from ..config import PipelineConfig
from ..perceivers import INSTALL_HINT, PerceiverRegistry, installed_perceivers
from ..pipeline import EmbodiedR

# This project's perceiver from the training package, named so that asking for it where that package is not
# installed says what to install (where it is, its entry point registers it).
GROUND_TRUTH = "ground_truth"


def perceivers() -> PerceiverRegistry:
    """The core's perceivers and the installed packages' (ground truth where the training package is)."""
    registry = installed_perceivers()
    if GROUND_TRUTH not in registry.names():
        registry.unavailable(
            GROUND_TRUTH,
            "it comes with the package embodied_r_training (the synthetic world and its renderer), which is "
            f"not installed; {INSTALL_HINT}",
        )
    return registry


def load_pipeline(config: PipelineConfig) -> EmbodiedR:
    """The pipeline ``config`` describes, its perceiver chosen from :func:`perceivers`."""
    return EmbodiedR.from_config(config, perceivers=perceivers())


def node_main(args: Sequence[str] | None = None) -> int:
    """Run the ``embodied_r`` node with the application's perceivers (the ``embodied_r_node`` executable,
    ``python -m embodied_r_ros.cli.parts``); returns its exit code."""
    from ..ros.allocator import limit_arenas

    # Before rclpy is imported: its import starts threads, each with a malloc arena of its own.
    limit_arenas()
    from ..ros.node_main import main

    return main(args, perceivers=perceivers())


if __name__ == "__main__":
    import sys

    sys.exit(node_main())
