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

# Flag -> parameter, for the settings a user changes most.
FLAG_PARAMETERS = {
    "camera_topic": "camera.topic",
    "compressed": "camera.compressed",
    "odometry_topic": "odometry.topic",
    "window": "query.window_s",
    "timeout": "query.timeout_s",
}
MODEL_FLAGS = ("device", "dtype", "max_new_tokens", "backend")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r run``."""
    parser = subparsers.add_parser("run", help="start the embodied_r ROS 2 node")
    parser.set_defaults(func=run_node)
    parser.add_argument("--params-file", type=Path, action="append", default=[], help="ROS parameters YAML")
    parser.add_argument("--vlm", help="VLM repo id or directory (parameter vlm.model)")
    parser.add_argument("--lm", help="LM repo id or directory (parameter lm.model)")
    parser.add_argument(
        "--tiny-models",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="use the tiny random-weight smoke models (built in DIR, default $EMBODIED_R_TINY_MODELS)",
    )
    parser.add_argument("--device", help="both models: auto, cpu, cuda, cuda:N")
    parser.add_argument("--dtype", choices=["auto", "float32", "bfloat16", "float16"], help="both models")
    parser.add_argument("--backend", choices=["transformers", "openai"], help="both models")
    parser.add_argument("--max-new-tokens", type=int, help="both models")
    parser.add_argument("--camera-topic", help="camera topic (parameter camera.topic)")
    parser.add_argument(
        "--compressed", action="store_const", const=True, help="the camera publishes CompressedImage"
    )
    parser.add_argument("--odometry-topic", help="nav_msgs/Odometry topic; '' turns odometry off")
    parser.add_argument("--window", type=float, help="default question window, seconds (query.window_s)")
    parser.add_argument("--timeout", type=float, help="question timeout, seconds (query.timeout_s)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="any parameter: query.queue_length=4"
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


def parameter_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The parameters the flags set, typed; raises ConfigError for unknown names or bad values."""
    from ..config import ConfigError
    from ..ros.params import default_parameters, parameter_value

    overrides: dict[str, Any] = {}
    if args.tiny_models is not None:
        from ..testing.tiny_models import ensure_tiny_models

        models = ensure_tiny_models(Path(args.tiny_models) if args.tiny_models else None)
        overrides.update({"vlm.model": str(models / "vlm"), "lm.model": str(models / "lm")})
    for role in ("vlm", "lm"):
        if getattr(args, role):
            overrides[f"{role}.model"] = getattr(args, role)
        for flag in MODEL_FLAGS:
            if getattr(args, flag) is not None:
                overrides[f"{role}.{flag}"] = getattr(args, flag)
    for flag, name in FLAG_PARAMETERS.items():
        value = getattr(args, flag)
        if value is not None:
            overrides[name] = float(value) if isinstance(default_parameters()[name], float) else value
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
            from ..config import ConfigError

            raise ConfigError(f"parameters file {path} does not exist")
        ros += ["--params-file", str(path)]
    if overlay is not None:
        ros += ["--params-file", str(overlay)]
    if args.namespace:
        ros += ["-r", f"__ns:=/{args.namespace.strip('/')}"]
    if args.name:
        ros += ["-r", f"__node:={args.name}"]
    return ros + list(args.ros_args)


def run_node(args: argparse.Namespace) -> int:
    """Start the node with the flags as parameters; returns its exit code."""
    import yaml

    from ..ros.node import main

    overrides = parameter_overrides(args)
    with tempfile.TemporaryDirectory(prefix="embodied_r_run_") as tmp:
        overlay = None
        if overrides:
            overlay = Path(tmp) / "overrides.yaml"
            # "/**" matches the node whatever its name and namespace (only this process reads the file).
            overlay.write_text(yaml.safe_dump({"/**": {"ros__parameters": overrides}}))
        return main(["embodied-r-run", *ros_arguments(args, overlay)])
