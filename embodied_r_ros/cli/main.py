"""The ``embodied-r`` command: one entry point, one subcommand per job.

:data:`COMMANDS` maps the node's subcommands to their modules in this package (the command layer: argparse
lives here, the library modules it calls take config objects); installed packages add theirs through the
entry-point group ``embodied_r_ros.commands`` (:mod:`embodied_r_ros.plugins`, docs/plugins.md), as the
training package adds synth, prepare, train, eval, ... Each command's ``register(subparsers)`` adds its
parser with ``set_defaults(func=...)``. Only the named command's code is imported, so ``embodied-r run``
(the node) works where only the node's dependencies are installed. ``embodied-r --help`` imports them all
and lists the ones that cannot be imported as unavailable, naming what is missing, and the training
package's commands as unavailable where it is not installed.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Callable, Sequence

from .. import __version__, plugins

# The node's subcommands -> their modules, in the order ``embodied-r --help`` lists them (the installed
# packages' commands follow).
COMMANDS: dict[str, str] = {
    "tiny-models": "embodied_r_ros.cli.models",
    "models": "embodied_r_ros.cli.models",
    "demo": "embodied_r_ros.cli.demo",
    "run": "embodied_r_ros.cli.run",
    "ask": "embodied_r_ros.cli.ask",
    "play": "embodied_r_ros.cli.play",
}
# The commands this project's training package adds (its entry points, training/setup.cfg), named here only
# so that where that package is not installed, the help lists them and running one says what to install.
TRAINING_COMMANDS = ("synth", "import-video", "prepare", "train", "eval", "compare")
TRAINING_PACKAGE = "embodied_r_training"
# What a user installs when a command's code cannot be imported.
INSTALL_HINT = "pip install '.[training]' (or `make build`, which installs everything)"

Register = Callable[[argparse._SubParsersAction], None]


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
    """The function of a command whose code cannot be imported: it prints the fix and returns 2."""

    def fail(args: argparse.Namespace) -> int:
        print(
            f"embodied-r {command}: error: this command needs {missing}, which is not installed: "
            + INSTALL_HINT,
            file=sys.stderr,
        )
        return 2

    return fail


def _add_unavailable(sub: argparse._SubParsersAction, command: str, missing: str) -> None:
    """List ``command`` as unavailable; running it prints what to install."""
    placeholder = sub.add_parser(
        command, help=f"[unavailable: needs {missing}]", add_help=False, prefix_chars="\0"
    )
    placeholder.add_argument("rest", nargs=argparse.REMAINDER)
    placeholder.set_defaults(func=_unavailable(command, missing))


def _registrars() -> dict[str, Callable[[], Register]]:
    """Every command name -> how to import its ``register`` (imports nothing yet): the node's, then the
    installed packages' (the training package's in the order of a training run, then the others by name;
    a name the node has already is left out)."""
    found: dict[str, Callable[[], Register]] = {
        name: (lambda module=module: importlib.import_module(module).register)
        for name, module in COMMANDS.items()
    }
    order = {name: i for i, name in enumerate(TRAINING_COMMANDS)}
    entries = plugins.entry_points(plugins.COMMAND_GROUP)
    for entry in sorted(entries, key=lambda e: (order.get(e.name, len(order)), e.name)):
        found.setdefault(entry.name, lambda entry=entry: plugins.load(entry))
    return found


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``embodied-r``. With ``argv`` naming a known command, only that command's code is
    imported; otherwise (``--help``, a typo) all are, unimportable ones listed as unavailable."""
    parser = argparse.ArgumentParser(
        prog="embodied-r",
        description="Embodied spatial reasoning for ROS 2 robots (Embodied-R).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    registrars = _registrars()
    not_installed = {name: TRAINING_PACKAGE for name in TRAINING_COMMANDS if name not in registrars}
    requested = _requested_command(sys.argv[1:] if argv is None else argv)
    if requested in registrars:
        names = [requested]
    elif requested in not_installed:
        names = []
        not_installed = {requested: not_installed[requested]}
    else:
        names = list(registrars)
    registered: set[Register] = set()
    for name in names:
        try:
            register = registrars[name]()
        except ImportError as exc:  # plugins.PluginUnavailable, or a module of the node's commands
            missing = getattr(exc, "missing", None) or (exc.name or COMMANDS.get(name, name)).split(".")[0]
            if missing.startswith("embodied_r_ros"):
                raise  # a bug in this package, not a missing dependency
            _add_unavailable(sub, name, missing)
            continue
        if register not in registered:  # one module may add several commands (models, tiny-models)
            register(sub)
            registered.add(register)
    for name, package in not_installed.items():
        _add_unavailable(sub, name, package)
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
