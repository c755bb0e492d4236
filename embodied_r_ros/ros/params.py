"""The node's ROS parameters, declared in one place: the fields of :class:`~embodied_r_ros.config.NodeConfig`.

Every parameter is a dotted field path of ``NodeConfig`` ("camera.topic", "vlm.model",
"keyframes.overlap_threshold", ...), its default is that field's default (the one set of defaults lives
in config.py), and :data:`SPECS` gives its description, range or choices and whether it may change while
the node runs (``query.*``); all others are read-only. ``config/embodied_r.yaml`` is
:func:`default_parameters_yaml` (``python -m embodied_r_ros.ros.params > config/embodied_r.yaml``), and a
test keeps the two equal.

:class:`NodeParameters` declares them on a node with descriptors (ranges, read-only), turns the values into
a validated ``NodeConfig`` (bad values stop the node with one line naming the parameter and the fix), and
validates later changes with an on-set-parameters callback that rejects bad values with a reason.
"""

from __future__ import annotations

import dataclasses
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..config import BACKENDS, DTYPES, GROUND_TRUTH, QOS_PROFILES, ConfigError, NodeConfig, from_dict

if TYPE_CHECKING:
    from rclpy.node import Node

NODE_NAME = "embodied_r"
# Matches the node in any namespace (a plain "embodied_r:" key would only match it at the root).
YAML_NODE_KEY = f"/**/{NODE_NAME}"


@dataclass(frozen=True)
class ParamSpec:
    """What the node says about one parameter: description, range (inclusive) or choices, dynamic."""

    description: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    dynamic: bool = False


# vlm.backend ground_truth: no model, the simulator's geometry (a measuring instrument, the VLM role only).
_GROUND_TRUTH_MODEL = (
    "; with backend ground_truth: the scene.json that `embodied-r synth` wrote beside the bag being played"
)
_GROUND_TRUTH_BACKEND = (
    ", or ground_truth: not a VLM but a measuring instrument for simulator bags, perception computed from "
    "the scene's geometry (what a perfect VLM would say), to separate reasoning from perception"
)


def _model_specs(role: str, what: str) -> dict[str, ParamSpec]:
    p = role
    vlm = role == "vlm"
    return {
        f"{p}.model": ParamSpec(
            f"{what}: Hugging Face repo id (in the local cache) or checkpoint directory; served model name "
            f"with backend openai{_GROUND_TRUTH_MODEL if vlm else ''}"
        ),
        f"{p}.backend": ParamSpec(
            "transformers (in-process) or openai (an OpenAI-compatible server such as vLLM)"
            + (_GROUND_TRUTH_BACKEND if vlm else ""),
            choices=BACKENDS if vlm else tuple(b for b in BACKENDS if b != GROUND_TRUTH),
        ),
        f"{p}.device": ParamSpec("auto, cpu, cuda or cuda:N (transformers backend)"),
        f"{p}.dtype": ParamSpec("weights dtype; auto: bfloat16 on a GPU, float32 on a CPU", choices=DTYPES),
        f"{p}.adapter": ParamSpec("optional LoRA adapter directory (PEFT save_pretrained); empty = none"),
        f"{p}.max_new_tokens": ParamSpec("tokens generated per call at most", 1, 32768),
        f"{p}.temperature": ParamSpec("sampling temperature; 0 = greedy", 0.0, 10.0),
        f"{p}.base_url": ParamSpec("openai backend: server URL, e.g. http://gpu-box:8000/v1"),
        f"{p}.api_key_env": ParamSpec("openai backend: NAME of the environment variable holding the API key"),
        f"{p}.timeout_s": ParamSpec("openai backend: seconds per HTTP request", 0.1, 3600.0),
        f"{p}.retries": ParamSpec("openai backend: retries of a failed request", 0, 100),
        f"{p}.max_concurrency": ParamSpec("openai backend: requests in flight at once", 1, 1024),
        f"{p}.image_cache_mb": ParamSpec(
            "transformers VLM: MB of encoded key frames kept for reuse; 0 = off", 0.0, 1_000_000.0
        ),
        f"{p}.trust_remote_code": ParamSpec("allow custom model code from the checkpoint (off by default)"),
        f"{p}.allow_download": ParamSpec("fetch the model from the hub when it is not on disk"),
    }


SPECS: dict[str, ParamSpec] = {
    "camera.topic": ParamSpec(
        "camera topic (sensor_msgs/Image); with camera.compressed the node subscribes to "
        "<topic>/compressed (image_transport naming) unless the topic already ends in /compressed"
    ),
    "camera.compressed": ParamSpec("subscribe to sensor_msgs/CompressedImage (JPEG/PNG) instead of Image"),
    "camera.qos": ParamSpec(
        "sensor_data (best effort, keep last; takes reliable publishers too) or reliable",
        choices=QOS_PROFILES,
    ),
    "camera.qos_depth": ParamSpec("camera subscription queue depth", 1, 1000),
    "camera.jump_back_reset_s": ParamSpec(
        "a frame stamped this many seconds behind the newest clears the history (a bag loops, a simulation "
        "restarts); 0 = never",
        0.0,
        86400.0,
    ),
    "odometry.topic": ParamSpec(
        "nav_msgs/Odometry topic; key frames get the pose interpolated at their stamp and the actions "
        "between them come from odometry; empty = no odometry (the VLM labels actions)"
    ),
    "odometry.max_gap_s": ParamSpec(
        "a key frame farther than this from any odometry sample gets no pose", 0.001, 60.0
    ),
    "query.window_s": ParamSpec(
        "seconds of history a question covers when it asks for 0 (the window ends at the newest frame)",
        0.1,
        86400.0,
        dynamic=True,
    ),
    "query.timeout_s": ParamSpec(
        "seconds from a question's arrival (queue wait included) to its answer; past it the caller gets "
        "success=false",
        0.1,
        86400.0,
        dynamic=True,
    ),
    "query.queue_length": ParamSpec(
        "questions that may wait behind the running one; more get success=false 'busy' at once",
        0,
        64,
        dynamic=True,
    ),
    "query.publish_keyframes": ParamSpec("publish each answer's key frames on ~/keyframes", dynamic=True),
    "query.max_question_chars": ParamSpec(
        "longest question accepted (characters); a longer one gets success=false at once (the question "
        "goes to the VLM once per key frame)",
        1,
        100000,
        dynamic=True,
    ),
    "query.max_options": ParamSpec("most answer options accepted (letters A..Z)", 0, 26, dynamic=True),
    "query.max_option_chars": ParamSpec(
        "longest answer option accepted (characters)", 1, 10000, dynamic=True
    ),
    "query.pre_encode_keyframes": ParamSpec(
        "encode new key frames with the VLM's vision tower while idle, so questions find them ready "
        "(nothing to encode with vlm.backend ground_truth)",
        dynamic=True,
    ),
    **_model_specs("vlm", "perception vision-language model (paper: Qwen2.5-VL-72B-Instruct)"),
    **_model_specs("lm", "reasoning language model (paper: Qwen2.5-3B-Instruct, trained)"),
    "keyframes.candidate_fps": ParamSpec("candidate frames per second (paper: 1)", 0.01, 60.0),
    "keyframes.orb_features": ParamSpec("ORB features per frame", 10, 100000),
    "keyframes.min_matches": ParamSpec("a homography needs more than this many matches (paper: 10)", 4, 9999),
    "keyframes.ransac_reproj_threshold": ParamSpec("RANSAC reprojection threshold, px (paper: 5)", 0.1, 99.0),
    "keyframes.overlap_threshold": ParamSpec(
        "keep a candidate when its overlap with the last key frame is below this (paper: 0.5)", 0.01, 1.0
    ),
    "keyframes.min_keyframes": ParamSpec("fewest key frames per question (paper: 4)", 2, 256),
    "keyframes.max_keyframes": ParamSpec("most key frames per question (paper: 32)", 2, 256),
    "keyframes.match_width": ParamSpec("match frames this wide; 0 = full resolution, else >= 64", 0, 8192),
    "buffer.memory_mb": ParamSpec("memory budget of the history (JPEG copies of candidate frames)", 1.0, 1e6),
    "buffer.history_s": ParamSpec("seconds of history kept (older frames are dropped)", 1.0, 86400.0),
    "buffer.max_side": ParamSpec("stored frames are downscaled to at most this many pixels a side", 32, 8192),
    "buffer.jpeg_quality": ParamSpec("JPEG quality of stored frames; 0 = raw pixels", 0, 100),
    "diagnostics_period_s": ParamSpec("seconds between /diagnostics messages", 0.1, 3600.0),
    "torch_threads": ParamSpec(
        "CPU threads for in-process models; 0 = all cores but one, leaving one for the camera and DDS",
        0,
        1024,
    ),
}


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """A config dataclass as {dotted field path: value}, in field order."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            values.update(flatten(value, f"{prefix}{f.name}."))
        else:
            values[f"{prefix}{f.name}"] = value
    return values


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
    """Raise unless :data:`SPECS` describes exactly the fields of NodeConfig (a programming error)."""
    names, described = set(default_parameters()), set(SPECS)
    if names != described:
        raise AssertionError(
            f"node_params.SPECS and NodeConfig differ: undescribed {sorted(names - described)}, "
            f"unknown {sorted(described - names)}"
        )


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
    import difflib

    defaults = default_parameters()
    if name not in defaults:
        close = difflib.get_close_matches(name, list(defaults), n=3)
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
    if spec and spec.choices and value not in spec.choices:
        return f"parameter {name} must be one of {', '.join(spec.choices)}, got {value!r}"
    return None


def _format_value(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return text.removesuffix("...").strip()


def default_parameters_yaml() -> str:
    """The parameters file with every default, commented (what config/embodied_r.yaml holds)."""
    lines = [
        "# Parameters of the embodied_r node (embodied_r_ros), with their defaults.",
        "# Written by `python -m embodied_r_ros.ros.params`; the defaults live in embodied_r_ros/config.py.",
        "# query.* may change while the node runs (ros2 param set); the others are read at start.",
        "# The key matches the node in any namespace.",
        f"{YAML_NODE_KEY}:",
        "  ros__parameters:",
    ]
    open_sections: list[str] = []
    for name, value in default_parameters().items():
        *sections, key = name.split(".")
        if sections != open_sections:
            for depth, section in enumerate(sections):
                if depth >= len(open_sections) or open_sections[depth] != section:
                    lines.append("    " + "  " * depth + f"{section}:")
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
