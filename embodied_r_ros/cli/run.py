"""``embodied-r run``: start the ``embodied_r`` node from the command line (``ros2 run``/``ros2 launch``
are the ROS ways; this one needs neither).

    embodied-r run --vlm Qwen/Qwen2.5-VL-7B-Instruct --lm Qwen/Qwen2.5-3B-Instruct --camera-topic /cam/image
    embodied-r run --tiny-models --set query.timeout_s=30 --params-file my.yaml --namespace drone1

Flags become ROS parameters: ``--params-file`` files first (in order), then the flags, typed like the
parameters' defaults (so ``--set buffer.memory_mb=512`` is a double), through a temporary parameters file;
``--ros-args ...`` at the end is passed to ROS as is. The exit code is the node's (1 when parameters or
models are unusable, with one log line saying which and how to fix it).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from ..config import ConfigError, Shortcut, shortcuts
from ..node_config import NodeConfig
from .flags import flag_dest

# The flags for the settings a user changes most ({"--vlm": ..., "--device": ...}), each setting one or
# more parameters; they are declared with the parameters, in node_config.py (param(..., flag=...)).
FLAGS: dict[str, Shortcut] = shortcuts("flag", NodeConfig)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r run``."""
    parser = subparsers.add_parser("run", help="start the embodied_r ROS 2 node")
    parser.set_defaults(func=run_node)
    parser.add_argument("--params-file", type=Path, action="append", default=[], help="ROS parameters YAML")
    for flag in FLAGS.values():
        _add_parameter_flag(parser, flag)
    parser.add_argument(
        "--tiny-models",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="use the tiny random-weight smoke models (built in DIR, default $EMBODIED_R_TINY_MODELS)",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="any parameter: query.queue_length=4"
    )
    parser.add_argument(
        "--use-sim-time", action="store_true", help="the node's clock follows /clock (a simulation, a bag)"
    )
    parser.add_argument("--namespace", default="", help="the node's namespace")
    parser.add_argument("--name", default="", help="the node's name (default embodied_r)")
    parser.add_argument(
        "--ros-args",
        dest="ros_args",
        nargs=argparse.REMAINDER,
        default=[],
        help="the rest goes to ROS unchanged",
    )


def _add_parameter_flag(parser: argparse.ArgumentParser, flag: Shortcut) -> None:
    """A flag typed like its parameters, with the values they all accept; a boolean one turns them on."""
    if flag.kind is bool:
        parser.add_argument(flag.name, dest=flag_dest(flag), action="store_const", const=True, help=flag.help)
    else:
        choices = list(flag.choices) or None
        parser.add_argument(flag.name, dest=flag_dest(flag), type=flag.kind, choices=choices, help=flag.help)


def parameter_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The parameters the flags set, typed; raises ConfigError for unknown names or bad values.

    Later sources win: ``--tiny-models``, then the parameter flags, then ``--set``.
    """
    from ..ros.params import parameter_value

    overrides: dict[str, Any] = {}
    if args.tiny_models is not None:
        from ..testing.tiny_models import ensure_tiny_models

        models = ensure_tiny_models(Path(args.tiny_models) if args.tiny_models else None)
        overrides.update({"vlm.model": str(models / "vlm"), "lm.model": str(models / "lm")})
    for flag in FLAGS.values():
        value = getattr(args, flag_dest(flag))
        if value is not None:
            overrides.update(dict.fromkeys(flag.parameters, value))
    for item in args.set:
        name, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(f"--set takes NAME=VALUE, got {item!r}")
        overrides[name.strip()] = parameter_value(name.strip(), text)
    return overrides


def ros_arguments(args: argparse.Namespace, overlay: Path | None) -> list[str]:
    """The ROS command line of the node: parameter files, the flags' overlay, name and namespace."""
    ros = ["--ros-args"]
    for path in args.params_file:
        if not path.is_file():
            raise ConfigError(f"parameters file {path} does not exist")
        ros += ["--params-file", str(path)]
    if overlay is not None:
        ros += ["--params-file", str(overlay)]
    if getattr(args, "use_sim_time", False):
        ros += ["-p", "use_sim_time:=true"]
    if args.namespace:
        ros += ["-r", f"__ns:=/{args.namespace.strip('/')}"]
    if args.name:
        ros += ["-r", f"__node:={args.name}"]
    return ros + list(args.ros_args)


def run_node(args: argparse.Namespace) -> int:
    """Start the node with the flags as parameters; returns its exit code."""
    import yaml

    from .parts import node_main

    overrides = parameter_overrides(args)
    with tempfile.TemporaryDirectory(prefix="embodied_r_run_") as tmp:
        overlay = None
        if overrides:
            overlay = Path(tmp) / "overrides.yaml"
            # "/**" matches the node whatever its name and namespace (only this process reads the file).
            overlay.write_text(yaml.safe_dump({"/**": {"ros__parameters": overrides}}))
        return node_main(["embodied-r-run", *ros_arguments(args, overlay)])
