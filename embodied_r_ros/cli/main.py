"""The ``embodied-r`` command: one entry point, one subcommand per job.

:data:`COMMANDS` maps each subcommand to its module in this package (the command layer: argparse lives
here, the library modules it calls take config objects); the module's ``register(subparsers)`` adds its
parser with ``set_defaults(func=...)``. Only the named command's module is imported, so ``embodied-r run``
(the node) works where only the node's dependencies are installed: the training commands' modules import
``embodied_r_training`` and need the ``training`` extras (TRL, datasets, rosbags). ``embodied-r --help``
imports them all and lists the ones that cannot be imported as unavailable, naming what is missing.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Callable, Sequence

from .. import __version__

# Subcommand -> its module, in the order ``embodied-r --help`` lists them.
COMMANDS: dict[str, str] = {
    "tiny-models": "embodied_r_ros.cli.models",
    "models": "embodied_r_ros.cli.models",
    "demo": "embodied_r_ros.cli.demo",
    "run": "embodied_r_ros.cli.run",
    "ask": "embodied_r_ros.cli.ask",
    "play": "embodied_r_ros.cli.play",
    "synth": "embodied_r_ros.cli.synth",
    "import-video": "embodied_r_ros.cli.import_video",
    "prepare": "embodied_r_ros.cli.prepare",
    "train": "embodied_r_ros.cli.train",
    "eval": "embodied_r_ros.cli.evaluate",
    "compare": "embodied_r_ros.cli.compare",
}
# What a user installs when a command's module cannot be imported.
INSTALL_HINT = "pip install '.[training]' (or `make build`, which installs everything)"


def _requested_command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is no option or option value), if any."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _unavailable(command: str, missing: str) -> Callable[[argparse.Namespace], int]:
    """The function of a command whose module cannot be imported: it prints the fix and returns 2."""

    def fail(args: argparse.Namespace) -> int:
        print(
            f"embodied-r {command}: error: this command needs {missing}, which is not installed: "
            + INSTALL_HINT,
            file=sys.stderr,
        )
        return 2

    return fail


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``embodied-r``. With ``argv`` naming a known command, only that command's module is
    imported; otherwise (``--help``, a typo) all are, unimportable ones listed as unavailable."""
    parser = argparse.ArgumentParser(
        prog="embodied-r",
        description="Embodied spatial reasoning for ROS 2 robots (Embodied-R).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    requested = _requested_command(sys.argv[1:] if argv is None else argv)
    names = [requested] if requested in COMMANDS else list(COMMANDS)
    registered: set[str] = set()
    for name in names:
        module_name = COMMANDS[name]
        if module_name in registered:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            missing = (exc.name or module_name).split(".")[0]
            if missing.startswith("embodied_r_ros"):
                raise  # a bug in this package, not a missing dependency
            for command in (c for c, m in COMMANDS.items() if m == module_name and c in names):
                placeholder = sub.add_parser(
                    command, help=f"[unavailable: needs {missing}]", add_help=False, prefix_chars="\0"
                )
                placeholder.add_argument("rest", nargs=argparse.REMAINDER)
                placeholder.set_defaults(func=_unavailable(command, missing))
        else:
            module.register(sub)
        registered.add(module_name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``embodied-r``; returns the process exit code."""
    args = build_parser(argv).parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    from ..backends.base import BackendError
    from ..config import ConfigError
    from ..frames import FrameError

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
