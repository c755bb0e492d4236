"""The ``embodied-r`` command: one entry point, one subcommand per job.

Each subcommand lives in its own module, which has ``register(subparsers)`` adding its parser(s) with
``set_defaults(func=...)``; :data:`COMMAND_MODULES` lists them in the order ``embodied-r --help`` shows.
Modules are imported when the parser is built; keep their top-level imports light (torch, rclpy and
transformers are imported inside the command functions).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path
from typing import Sequence

from . import __version__


def _tiny_models(args: argparse.Namespace) -> int:
    from transformers.utils import logging as hf_logging

    from .backends.tiny_models import build_tiny_models

    hf_logging.disable_progress_bar()  # keep this command's output to the paths it built
    paths = build_tiny_models(args.dir, seed=args.seed)
    for name, path in paths.items():
        print(f"{name}: {path}")
    print("These are random-weight smoke models: they exercise the code paths, their answers mean nothing.")
    return 0


# Each module's register(subparsers) adds its subcommand(s).
COMMAND_MODULES: tuple[str, ...] = (
    "embodied_r_ros.model_commands",
    "embodied_r_ros.demo",
    "embodied_r_ros.ros_commands",
    "embodied_r_training.synth",
    "embodied_r_training.prepare",
    "embodied_r_training.train",
    "embodied_r_training.evaluate",
    "embodied_r_training.compare",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``embodied-r`` with all subcommands."""
    parser = argparse.ArgumentParser(
        prog="embodied-r",
        description="Embodied spatial reasoning for ROS 2 robots (Embodied-R).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tiny = sub.add_parser(
        "tiny-models", help="build the tiny offline smoke models (tokenizer, Qwen2.5-VL, Qwen2 LM)"
    )
    tiny.add_argument("dir", type=Path, help="output directory (DIR/vlm and DIR/lm are written)")
    tiny.add_argument("--seed", type=int, default=0, help="weight seed; the same seed gives the same files")
    tiny.set_defaults(func=_tiny_models)

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``embodied-r``; returns the process exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    from .backends.base import BackendError
    from .config import ConfigError
    from .frames import FrameError

    try:
        return int(args.func(args) or 0)
    except (BackendError, ConfigError, FrameError) as exc:
        # Expected failures get one clear line, not a traceback.
        print(f"embodied-r {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
