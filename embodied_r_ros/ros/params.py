"""The node's ROS parameters: the fields of :class:`~embodied_r_ros.node_config.NodeConfig`, as described
there.

Every parameter is a dotted field path of ``NodeConfig`` ("camera.topic", "vlm.model",
"keyframes.overlap_threshold", ...). Its default, description, range or choices and whether it may change
while the node runs (``query.*``; all others are read-only) are written once, on the field (node_config.py,
config.py: :func:`~embodied_r_ros.config.param`); :data:`SPECS` is that table by parameter name.
``config/embodied_r.yaml`` is :func:`default_parameters_yaml`
(``python -m embodied_r_ros.ros.params > config/embodied_r.yaml``), and a test keeps the two equal.

:class:`NodeParameters` declares them on a node with descriptors (ranges, read-only), turns the values into
a validated ``NodeConfig`` (bad values stop the node with one line naming the parameter and the fix), and
validates later changes with an on-set-parameters callback that rejects bad values with a reason.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any, Callable

from ..config import ConfigError, ParamSpec, flatten, from_dict, parameter_specs
from ..node_config import NodeConfig

if TYPE_CHECKING:
    from rclpy.node import Node

NODE_NAME = "embodied_r"
# Matches the node in any namespace (a plain "embodied_r:" key would only match it at the root).
YAML_NODE_KEY = f"/**/{NODE_NAME}"

# {parameter name: what the node declares for it}, read from the param() metadata of NodeConfig's fields.
SPECS: dict[str, ParamSpec] = parameter_specs(NodeConfig)
# Parameters that were renamed: {old name: the one to set instead}. Their section is gone, so ROS would
# ignore them silently; the node refuses them with the new name.
RENAMED: dict[str, str] = {"odometry.topic": "pose.topic", "odometry.max_gap_s": "pose.max_gap_s"}


def unflatten(values: dict[str, Any]) -> dict[str, Any]:
    """{dotted path: value} as a nested dict (the form :func:`~embodied_r_ros.config.from_dict` reads)."""
    nested: dict[str, Any] = {}
    for name, value in values.items():
        *sections, key = name.split(".")
        target = nested
        for section in sections:
            target = target.setdefault(section, {})
        target[key] = value
    return nested


def default_parameters() -> dict[str, Any]:
    """Every parameter name with its default, in declaration order."""
    return flatten(NodeConfig())


def check_specs() -> None:
    """Raise unless every parameter has a description and a default within its range and choices.

    A programming error in the parameter table (node_config.py, config.py); the node checks it at start.
    """
    problems = []
    for name, default in default_parameters().items():
        spec = SPECS[name]
        if not spec.description:
            problems.append(f"{name}: no description")
        if spec.lo is not None and spec.hi is not None and not spec.lo <= default <= spec.hi:
            problems.append(f"{name}: default {default!r} outside [{spec.lo:g} .. {spec.hi:g}]")
        if spec.choices and default not in spec.choices:
            problems.append(f"{name}: default {default!r} not one of {', '.join(spec.choices)}")
    if problems:
        raise AssertionError(f"the parameter table (node_config.py) is inconsistent: {'; '.join(problems)}")


def config_from_parameters(values: dict[str, Any], base: NodeConfig | None = None) -> NodeConfig:
    """A validated NodeConfig from {dotted name: value}; raises ConfigError naming the parameter."""
    problems = [_choice_problem(name, value) for name, value in values.items()]
    problems = [p for p in problems if p]
    if problems:
        raise ConfigError("; ".join(problems))
    return from_dict(NodeConfig, unflatten(values), base=base)


def parameter_value(name: str, text: str) -> Any:
    """``text`` (from a command line) as the value of parameter ``name``, typed like its default.

    Raises ConfigError for an unknown name (with the closest known ones) or a value of the wrong kind.
    """
    defaults = default_parameters()
    if name not in defaults:
        close = _closest(name)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(defaults)}"
        raise ConfigError(f"unknown parameter {name!r}{hint}")
    default = defaults[name]
    try:
        if isinstance(default, bool):
            if text.strip().lower() not in ("true", "false"):
                raise ValueError(text)
            return text.strip().lower() == "true"
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        raise ConfigError(f"parameter {name} must be a {type(default).__name__}, got {text!r}") from None
    return text


def _choice_problem(name: str, value: Any) -> str | None:
    spec = SPECS.get(name)
    return spec.problem(f"parameter {name}", value) if spec else None


def unknown_parameters_problem(names: list[str]) -> str | None:
    """What is wrong with parameter names under the node's sections that it does not declare (ROS would
    ignore them silently), with the closest known names; None when there are none."""
    defaults = default_parameters()
    sections = {name.split(".")[0] for name in defaults}
    ours = sorted(n for n in names if n not in defaults and (n.split(".")[0] in sections or n in RENAMED))
    if not ours:
        return None
    hints = []
    for name in ours:
        close = _closest(name)
        hints.append(name + (f" (did you mean {', '.join(close)}?)" if close else ""))
    return f"unknown parameter(s) {'; '.join(hints)}; `python -m embodied_r_ros.ros.params` lists them all"


def _closest(name: str) -> list[str]:
    """Known parameters like ``name``: its new name (odometry.topic -> pose.topic), where it moved into a
    section (vlm.device -> vlm.transformers.device), else the closest spellings."""
    import difflib

    if name in RENAMED:
        return [RENAMED[name]]
    known = list(default_parameters())
    section, leaf = name.split(".")[0], name.split(".")[-1]
    moved = [k for k in known if k != name and k.startswith(section + ".") and k.endswith("." + leaf)]
    return moved or difflib.get_close_matches(name, known, n=3)


def _format_value(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text.removesuffix("...").strip()


def default_parameters_yaml() -> str:
    """The parameters file with every default, commented (what config/embodied_r.yaml holds)."""
    lines = [
        "# Parameters of the embodied_r node (embodied_r_ros), with their defaults.",
        "# Written by `python -m embodied_r_ros.ros.params` from embodied_r_ros/node_config.py.",
        "# query.* may change while the node runs (ros2 param set); the others are read at start.",
        "# The key matches the node in any namespace.",
        f"{YAML_NODE_KEY}:",
        "  ros__parameters:",
    ]
    open_sections: list[str] = []
    for name, value in default_parameters().items():
        *sections, key = name.split(".")
        if sections != open_sections:
            # Sections shared with the previous parameter stay open; the rest are opened (vlm.openai after
            # lm.transformers opens both vlm and its openai).
            shared = 0
            while (
                shared < min(len(sections), len(open_sections)) and sections[shared] == open_sections[shared]
            ):
                shared += 1
            for depth in range(shared, len(sections)):
                lines.append("    " + "  " * depth + f"{sections[depth]}:")
            open_sections = sections
        indent = "    " + "  " * len(sections)
        spec = SPECS[name]
        bounds = f" [{spec.lo:g} .. {spec.hi:g}]" if spec.lo is not None else ""
        choices = f" ({' | '.join(spec.choices)})" if spec.choices else ""
        comment = textwrap.wrap(f"{spec.description}{bounds}{choices}", width=110 - len(indent) - 2)
        lines.extend(f"{indent}# {line}" for line in comment)
        lines.append(f"{indent}{key}: {_format_value(value)}")
    return "\n".join(lines) + "\n"


class NodeParameters:
    """Declares the node's parameters and keeps the validated :class:`NodeConfig` they make.

    ``on_change(config)`` is called after a dynamic parameter was changed successfully.
    Raises :class:`ConfigError` (one line: the parameter, the value, the fix) when the values the node
    starts with are unusable.
    """

    def __init__(self, node: Node, on_change: Callable[[NodeConfig], None] | None = None) -> None:
        from rcl_interfaces.msg import ParameterDescriptor
        from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException

        check_specs()
        self._node = node
        self._on_change = on_change
        self._started = False
        node.add_on_set_parameters_callback(self._validate)
        values: dict[str, Any] = {}
        for name, default in default_parameters().items():
            descriptor = _descriptor(ParameterDescriptor, name, default, SPECS[name])
            try:
                values[name] = node.declare_parameter(name, default, descriptor).value
            except InvalidParameterTypeException as exc:
                kind = type(default).__name__
                hint = " (write decimals with a point, e.g. 2.0 not 2)" if kind == "float" else ""
                raise ConfigError(f"parameter {name} must be a {kind}{hint}: {exc}") from None
            except InvalidParameterValueException as exc:
                spec = SPECS[name]
                allowed = f"; allowed: {spec.lo:g} .. {spec.hi:g}" if spec.lo is not None else ""
                reason = str(exc).split("Reason: ", 1)[-1].removesuffix(f": {name}")
                raise ConfigError(f"parameter {name}: {reason}{allowed} ({spec.description})") from None
        # rclpy keeps parameters given for undeclared names (a typo, a key from an older version) only in
        # _parameter_overrides and ignores them; the node refuses them instead of running without them.
        problem = unknown_parameters_problem(list(node._parameter_overrides))
        if problem:
            raise ConfigError(problem)
        self.config = config_from_parameters(values)
        self._started = True
        node.add_post_set_parameters_callback(self._changed)

    def _validate(self, parameters: list[Any]) -> Any:
        from rcl_interfaces.msg import SetParametersResult

        if not self._started:
            # Values given at start are checked together once all are declared (cross-field rules).
            return SetParametersResult(successful=True)
        updates = {p.name: p.value for p in parameters}
        try:
            config_from_parameters(updates, base=self.config)
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _changed(self, parameters: list[Any]) -> None:
        self.config = config_from_parameters({p.name: p.value for p in parameters}, base=self.config)
        if self._on_change is not None:
            self._on_change(self.config)


def _descriptor(cls: Any, name: str, default: Any, spec: ParamSpec) -> Any:
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange

    constraints = f"one of: {', '.join(spec.choices)}" if spec.choices else ""
    if not spec.dynamic:
        constraints = (constraints + "; " if constraints else "") + "read at start (restart to change)"
    descriptor = cls(name=name, description=spec.description, additional_constraints=constraints)
    descriptor.read_only = not spec.dynamic
    if spec.lo is not None and spec.hi is not None:
        if isinstance(default, float):
            descriptor.floating_point_range = [
                FloatingPointRange(from_value=float(spec.lo), to_value=float(spec.hi), step=0.0)
            ]
        elif isinstance(default, int) and not isinstance(default, bool):
            descriptor.integer_range = [IntegerRange(from_value=int(spec.lo), to_value=int(spec.hi), step=1)]
    return descriptor


if __name__ == "__main__":
    print(default_parameters_yaml(), end="")
