"""Typed configuration of the pipeline, with the one set of defaults, and the parameter-table machinery.

The ROS node fills these from parameters, the CLI from flags, training from YAML; all go through
:func:`from_dict`, which rejects unknown keys with a message that lists the known ones.

Each field is declared with :func:`param`: its default plus what the node says about it (description,
range or choices, whether it may change while the node runs, and the launch argument or ``embodied-r run``
flag that sets it, if any). :func:`parameter_specs` reads that table; the node's parameter declarations
(``ros/params.py``), ``config/embodied_r.yaml``, the launch file's arguments and ``embodied-r run``'s flags
are all derived from it (:func:`shortcuts`), so a parameter is written down once. The node's own sections
(camera, poses, questions) live in :mod:`embodied_r_ros.node_config`; the pipeline's are here.

The other commands' configs (synth, prepare, eval, import-video, in training) declare their flags the same
way, ``param(..., flag=...)`` on their fields or in a :func:`section`'s overrides; :func:`leaf_fields` reads
any config class, and ``embodied_r_ros/cli/flags.py`` turns that table into a command's flags and back.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, NamedTuple, TypeVar

from . import plugins

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or key that cannot be used; the message says which and why."""


# The core's model backends (embodied_r_ros/backends/registry.py). Installed packages add theirs through the
# entry-point group embodied_r_ros.backends (docs/plugins.md): their names are valid values of vlm.backend
# and lm.backend too, read here without importing those packages.
CORE_BACKENDS = ("transformers", "openai")
BACKENDS = CORE_BACKENDS + tuple(n for n in plugins.names(plugins.BACKEND_GROUP) if n not in CORE_BACKENDS)
DTYPES = ("auto", "float32", "bfloat16", "float16")


def require(ok: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``ok`` (the checks in ``__post_init__``)."""
    if not ok:
        raise ConfigError(message)


# ---------------------------------------------------------------------------------------------------
# The parameter table: field metadata written by param() and section().

_PARAM = "embodied_r_param"  # metadata key of a leaf field: its ParamSpec
_OVERRIDES = "embodied_r_overrides"  # metadata key of a section field: {field: ParamSpec changes}


# The default of a field that has none: the caller must give it (a command's required flag).
REQUIRED: Any = dataclasses.MISSING


class Alias(NamedTuple):
    """A short name that sets a parameter: a launch argument (``camera_topic``) or a command's flag
    (``--vlm``)."""

    name: str
    help: str


@dataclass(frozen=True)
class ParamSpec:
    """What the node says about one parameter: description, range (inclusive) or choices, dynamic, aliases."""

    description: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    dynamic: bool = False  # may change while the node runs (ros2 param set); the others are read at start
    launch: Alias | None = None  # argument of launch/embodied_r.launch.py
    # Flag of the command that fills this config (`embodied-r run` for the node's); a bare name takes the
    # description as its help.
    flag: Alias | str | None = None
    # Values it took once and what to set instead ({"ground_truth": "perception.perceiver: ..."}), so that
    # an old config fails with the fix instead of a bare list of choices.
    retired: tuple[tuple[str, str], ...] = ()

    def problem(self, name: str, value: Any) -> str | None:
        """Why ``value`` is not a valid choice of parameter ``name`` (None: it is, or any value is)."""
        if not self.choices or value in self.choices:
            return None
        instead = dict(self.retired).get(value)
        if instead is not None:
            return f"{name} {value!r} is no longer accepted: {instead}"
        return f"{name} must be one of {', '.join(self.choices)}, got {value!r}"


def param(
    default: Any,
    description: str,
    *,
    bounds: tuple[float, float] | None = None,
    choices: tuple[str, ...] = (),
    dynamic: bool = False,
    launch: Alias | None = None,
    flag: Alias | str | None = None,
    retired: dict[str, str] | None = None,
) -> Any:
    """A config field with its default and what the node declares for it (``bounds``: inclusive range;
    ``retired``: values it no longer accepts, each with what to set instead).

    ``default`` :data:`REQUIRED` makes a field without default. ``flag`` names the field's flag in the
    command that builds this config (:mod:`embodied_r_ros.cli.flags`); a bare name has the description
    as its help.
    """
    lo, hi = bounds if bounds is not None else (None, None)
    spec = ParamSpec(
        description, lo, hi, tuple(choices), dynamic, launch, flag, tuple((retired or {}).items())
    )
    return field(default=default, metadata={_PARAM: spec})


def section(factory: Callable[[], Any], **overrides: dict[str, Any]) -> Any:
    """A nested config field; ``overrides`` change what some of its fields say as parameters of this section.

    ``vlm`` and ``lm`` share :class:`ModelConfig` but describe their model differently, e.g.
    ``section(default_lm, model={"description": ...})``. A field declared without :func:`param` gets its
    ParamSpec here (``{"description": ..., "flag": ...}``). The overrides of a nested section are one level
    deeper: ``section(ModelConfig, openai={"base_url": {"flag": "--base-url"}})``.
    """
    return field(default_factory=factory, metadata={_OVERRIDES: overrides})


def _field_spec(config: Any, name: str) -> ParamSpec:
    return next(f for f in dataclasses.fields(config) if f.name == name).metadata[_PARAM]


def check_param(config: Any, name: str, where: str, note: str = "") -> None:
    """Check field ``name`` against the choices or range its :func:`param` gives.

    Used where that range is also the rule for every user of the config. Elsewhere the node's range is
    narrower than what the code needs (a test buffer of 10 kB is fine, a robot's is >= 1 MB), so those
    fields check their own minimum in ``__post_init__``.
    """
    spec, value = _field_spec(config, name), getattr(config, name)
    problem = spec.problem(where + name, value)
    require(problem is None, problem or "")
    if spec.lo is not None and spec.hi is not None:
        require(spec.lo <= value <= spec.hi, f"{where}{name} must be in {spec.lo}..{spec.hi}{note}")


@dataclass
class BufferConfig:
    """Clip buffer: how much history to keep and how it is stored."""

    # A hard budget for the stored images.
    memory_mb: float = param(
        256.0, "memory budget of the history (JPEG copies of candidate frames)", bounds=(1.0, 1e6)
    )
    # Older frames are dropped even under budget.
    history_s: float = param(
        600.0, "seconds of history kept (older frames are dropped)", bounds=(1.0, 86400.0)
    )
    # Stored copies are downscaled so that max(h, w) <= this.
    max_side: int = param(
        640, "stored frames are downscaled to at most this many pixels a side", bounds=(32, 8192)
    )
    # 0 stores raw (downscaled) pixels; 1..100 JPEG-compresses.
    jpeg_quality: int = param(90, "JPEG quality of stored frames; 0 = raw pixels", bounds=(0, 100))

    def __post_init__(self) -> None:
        require(self.memory_mb > 0, "buffer.memory_mb must be > 0")
        require(self.history_s > 0, "buffer.history_s must be > 0")
        require(self.max_side >= 32, "buffer.max_side must be >= 32 pixels")
        check_param(self, "jpeg_quality", "buffer.", " (0 = raw pixels)")


@dataclass
class KeyFrameConfig:
    """Key-frame selection (paper: 1 fps candidates, ORB, RANSAC 5 px, overlap < 0.5, clamp [4, 32])."""

    candidate_fps: float = param(1.0, "candidate frames per second (paper: 1)", bounds=(0.01, 60.0))
    orb_features: int = param(500, "ORB features per frame", bounds=(10, 100000))
    # A homography needs MORE than this many cross-checked matches.
    min_matches: int = param(
        10, "a homography needs more than this many matches (paper: 10)", bounds=(4, 9999)
    )
    ransac_reproj_threshold: float = param(
        5.0, "RANSAC reprojection threshold, px (paper: 5)", bounds=(0.1, 99.0)
    )
    # Keep a candidate when its overlap with the reference is below this.
    overlap_threshold: float = param(
        0.5,
        "keep a candidate when its overlap with the last key frame is below this (paper: 0.5)",
        bounds=(0.01, 1.0),
    )
    min_keyframes: int = param(4, "fewest key frames per question (paper: 4)", bounds=(2, 256))
    max_keyframes: int = param(32, "most key frames per question (paper: 32)", bounds=(2, 256))
    # Frames are matched at this width (0 = full resolution), for speed.
    match_width: int = param(320, "match frames this wide; 0 = full resolution, else >= 64", bounds=(0, 8192))

    def __post_init__(self) -> None:
        require(self.candidate_fps > 0, "keyframes.candidate_fps must be > 0")
        require(self.orb_features >= 10, "keyframes.orb_features must be >= 10")
        require(self.min_matches >= 4, "keyframes.min_matches must be >= 4 (a homography needs 4 points)")
        require(self.ransac_reproj_threshold > 0, "keyframes.ransac_reproj_threshold must be > 0")
        require(0 < self.overlap_threshold <= 1, "keyframes.overlap_threshold must be in (0, 1]")
        require(self.min_keyframes >= 2, "keyframes.min_keyframes must be >= 2 (first and last)")
        require(
            self.max_keyframes >= self.min_keyframes,
            "keyframes.max_keyframes must be >= keyframes.min_keyframes",
        )
        require(self.match_width == 0 or self.match_width >= 64, "keyframes.match_width must be 0 or >= 64")


# What a model's fields say as parameters. NodeConfig's vlm and lm sections put the role in front of
# MODEL_SOURCE.
MODEL_SOURCE = (
    "Hugging Face repo id (in the local cache) or checkpoint directory; served model name with backend openai"
)
_BACKEND = "transformers (in-process) or openai (an OpenAI-compatible server such as vLLM)"
# vlm and lm share ModelConfig, so these launch arguments and run flags set the field of both models.
_BOTH = "both models"
_DEVICE_HELP = f"{_BOTH}: auto, cpu, cuda, cuda:N"
# The value vlm.backend took before ground truth became a perceiver (an old config names the fix).
_GROUND_TRUTH_MOVED = {
    "ground_truth": "ground-truth perception is a perceiver, not a model backend: set "
    "perception.perceiver: ground_truth and perception.scene: <the scene.json beside the bag> instead"
}


@dataclass
class TransformersOptions:
    """How the transformers backend runs a model in-process (used only with ``backend: transformers``)."""

    device: str = param(
        "auto",
        "auto, cpu, cuda or cuda:N",
        launch=Alias("device", _DEVICE_HELP),
        flag=Alias("--device", _DEVICE_HELP),
    )
    dtype: str = param(
        "auto",
        "weights dtype; auto: bfloat16 on a GPU, float32 on a CPU",
        choices=DTYPES,
        flag=Alias("--dtype", _BOTH),
    )
    adapter: str = param("", "optional LoRA adapter directory (PEFT save_pretrained); empty = none")
    image_cache_mb: float = param(
        256.0, "VLM: MB of encoded key frames kept for reuse; 0 = off", bounds=(0.0, 1_000_000.0)
    )
    calculator: bool = param(
        False,
        "LM: a calculator writes the result of each arithmetic step the reasoning sets up (x: 1.06 + 1.68 = "
        "...), the model the rest (reasoning/calculator.py); off: the model's own arithmetic, as trained",
    )
    lookup: bool = param(
        False,
        "LM, multiple choice: the option lookup's yes/no and the answer letter are written from the option "
        "the think concludes (reasoning/conclusion.py); off: the model writes them, as trained",
    )
    trust_remote_code: bool = param(False, "allow custom model code from the checkpoint (off by default)")
    # Off by default: robots usually run offline.
    allow_download: bool = param(False, "fetch the model from the hub when it is not on disk")

    def __post_init__(self) -> None:
        check_param(self, "dtype", "model ")
        require(self.image_cache_mb >= 0, "model image_cache_mb must be >= 0 (0 turns the cache off)")


@dataclass
class OpenAIOptions:
    """How the openai backend reaches its server (used only with ``backend: openai``)."""

    base_url: str = param("http://127.0.0.1:8000/v1", "server URL, e.g. http://gpu-box:8000/v1")
    api_key_env: str = param("OPENAI_API_KEY", "NAME of the environment variable holding the API key")
    timeout_s: float = param(60.0, "seconds per HTTP request", bounds=(0.1, 3600.0))
    retries: int = param(2, "retries of a failed request", bounds=(0, 100))
    max_concurrency: int = param(8, "requests in flight at once", bounds=(1, 1024))

    def __post_init__(self) -> None:
        require(self.timeout_s > 0, "model timeout_s must be > 0")
        require(self.retries >= 0, "model retries must be >= 0")
        require(self.max_concurrency >= 1, "model max_concurrency must be >= 1")


@dataclass
class ModelConfig:
    """One model: where it lives, what it generates, and its backend's options (one section per backend)."""

    # Hub repo id or local directory (transformers) / served model name (openai).
    model: str = param("", MODEL_SOURCE)
    backend: str = param(
        "transformers",
        _BACKEND,
        choices=BACKENDS,
        flag=Alias("--backend", _BOTH),
        retired=_GROUND_TRUTH_MOVED,
    )
    max_new_tokens: int = param(
        256, "tokens generated per call at most", bounds=(1, 32768), flag=Alias("--max-new-tokens", _BOTH)
    )
    temperature: float = param(0.0, "sampling temperature; 0 = greedy", bounds=(0.0, 10.0))
    transformers: TransformersOptions = section(TransformersOptions)
    openai: OpenAIOptions = section(OpenAIOptions)

    def __post_init__(self) -> None:
        check_param(self, "backend", "model ")
        require(self.max_new_tokens >= 1, "model max_new_tokens must be >= 1")
        require(self.temperature >= 0, "model temperature must be >= 0 (0 = greedy)")

    def with_adapter(self, adapter: str) -> ModelConfig:
        """This model with LoRA adapter directory ``adapter`` ("" = none); everything else unchanged."""
        return dataclasses.replace(self, transformers=dataclasses.replace(self.transformers, adapter=adapter))


def model_config(model: str = "", **settings: Any) -> ModelConfig:
    """A :class:`ModelConfig` from flat settings, each put in the section that declares it.

    ``model_config("m", device="cpu", max_new_tokens=8)`` sets ``transformers.device``;
    ``model_config("m", backend="openai", base_url=url)`` sets ``openai.base_url``. For code that takes a
    model's settings from flags or keyword arguments; a name no section declares raises TypeError.
    """
    kinds = option_sections()
    own: dict[str, Any] = {}
    options: dict[str, dict[str, Any]] = {section: {} for section in kinds}
    for key, value in settings.items():
        section = next((name for name, kind in kinds.items() if key in _field_names(kind)), None)
        if section is not None:
            options[section][key] = value
        elif key in _field_names(ModelConfig) and key not in kinds:
            own[key] = value
        else:
            raise TypeError(f"model_config() got an unknown setting {key!r}")
    sections = {section: kind(**options[section]) for section, kind in kinds.items()}
    return ModelConfig(model=model, **own, **sections)


def option_sections() -> dict[str, type]:
    """ModelConfig's backend options sections: {field name: its type} ("openai": OpenAIOptions), the
    sections a backend may read (:mod:`embodied_r_ros.backends.registry`)."""
    defaults = {f.name: field_default(f) for f in dataclasses.fields(ModelConfig)}
    return {name: type(value) for name, value in defaults.items() if dataclasses.is_dataclass(value)}


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def default_vlm() -> ModelConfig:
    """The VLM a pipeline uses unless told otherwise."""
    return ModelConfig(model="Qwen/Qwen2.5-VL-7B-Instruct", max_new_tokens=256)


def default_lm() -> ModelConfig:
    """The reasoning LM a pipeline uses unless told otherwise."""
    return ModelConfig(model="Qwen/Qwen2.5-3B-Instruct", max_new_tokens=512)


# The core's perceiver (embodied_r_ros.perceivers): the VLM of the vlm section describes the key frames.
VLM_PERCEIVER = "vlm"


@dataclass
class PerceptionConfig:
    """What describes the key frames: a perceiver, by the name it is registered under
    (:mod:`embodied_r_ros.perceivers`)."""

    perceiver: str = param(
        VLM_PERCEIVER,
        "what describes the key frames: vlm (the VLM of the vlm.* parameters), or a perceiver another "
        "package registers: ground_truth (embodied_r_training) is not a VLM but a measuring instrument for "
        "`embodied-r synth` bags, perception computed from the scene's geometry (what a perfect VLM would "
        "say), to separate reasoning from perception",
    )
    scene: str = param(
        "",
        "perceiver ground_truth: the scene.json that `embodied-r synth` wrote beside the bag being played",
    )

    def __post_init__(self) -> None:
        require(
            bool(self.perceiver.strip()), f"perception.perceiver must not be empty ({VLM_PERCEIVER}: the VLM)"
        )


@dataclass
class PipelineConfig:
    """Everything the core pipeline needs: perception, models, key frames, buffer."""

    perception: PerceptionConfig = field(default_factory=PerceptionConfig)
    vlm: ModelConfig = field(default_factory=default_vlm)
    lm: ModelConfig = field(default_factory=default_lm)
    keyframes: KeyFrameConfig = field(default_factory=KeyFrameConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)


def from_dict(cls: type[T], data: dict[str, Any] | None, *, base: T | None = None, where: str = "") -> T:
    """Build dataclass ``cls`` from a (nested) dict over ``base`` (default: the defaults).

    Keys not given keep their value in ``base``; unknown keys raise :class:`ConfigError`.
    """
    data = dict(data or {})
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    base = cls() if base is None else base
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {', '.join(where + k for k in unknown)}; "
            f"known keys{' under ' + where.rstrip('.') if where else ''}: {', '.join(sorted(known))}"
            + _moved_hint(base, unknown, where)
        )
    values: dict[str, Any] = {}
    for name, value in data.items():
        current = getattr(base, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"config key {where}{name} must be a mapping, got {value!r}")
            values[name] = from_dict(type(current), value, base=current, where=f"{where}{name}.")
        else:
            values[name] = _coerce(value, current, f"{where}{name}")
    return dataclasses.replace(base, **values)


def _moved_hint(config: Any, keys: list[str], where: str) -> str:
    """A hint ("; did you mean vlm.transformers.device?") for keys that a section of ``config`` declares
    (a key that moved into a section, such as a model's backend options); "" for none."""
    sections = [
        f.name for f in dataclasses.fields(config) if dataclasses.is_dataclass(getattr(config, f.name))
    ]
    found = [
        f"{where}{name}.{key}"
        for key in keys
        for name in sections
        if key in _field_names(type(getattr(config, name)))
    ]
    return f"; did you mean {', '.join(found)}?" if found else ""


def _coerce(value: Any, default: Any, name: str) -> Any:
    """Convert ``value`` to the type of ``default`` (int -> float allowed), else raise."""
    kind = type(default)
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"config key {name} must be true or false, got {value!r}")
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is str and isinstance(value, str):
        return value
    raise ConfigError(f"config key {name} must be {kind.__name__}, got {value!r}")


def load_yaml(path: str | Path, cls: type[T] = PipelineConfig) -> T:  # type: ignore[assignment]
    """Read a YAML file into ``cls``; a missing file or unknown key names the file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
        return from_dict(cls, data)
    except (yaml.YAMLError, ConfigError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def to_dict(config: Any) -> dict[str, Any]:
    """The plain-dict form of a config dataclass (for YAML, logs and ROS parameters)."""
    return dataclasses.asdict(config)


# ---------------------------------------------------------------------------------------------------
# Reading the table.


def flatten(config: Any) -> dict[str, Any]:
    """A config dataclass as {dotted field path: value}, in field order."""
    return {leaf.name: leaf.default for leaf in leaf_fields(config)}


class Leaf(NamedTuple):
    """A leaf field of a config dataclass: dotted name, default (:data:`REQUIRED` when it has none), the
    type of its values and what :func:`param` (or its section's overrides) says about it, None if nothing."""

    name: str
    default: Any
    kind: type
    spec: ParamSpec | None


def leaf_fields(config: Any) -> list[Leaf]:
    """Every leaf field of a config dataclass (class or instance), nested sections walked, in field order.

    A class's defaults are its fields' defaults (a section's: what its factory builds), an instance's its
    values. A section's overrides (:func:`section`) replace what its fields say; overriding a field the
    section does not have is a programming error.
    """
    return list(_leaves(config, "", {}))


def _leaves(config: Any, prefix: str, overrides: dict[str, dict[str, Any]]) -> Iterator[Leaf]:
    fields = dataclasses.fields(config)
    unknown = sorted(set(overrides) - {f.name for f in fields})
    if unknown:
        section_name = prefix.rstrip(".")
        raise TypeError(f"section {section_name} overrides {', '.join(unknown)}, which it does not have")
    cls = config if isinstance(config, type) else type(config)
    hints: dict[str, Any] | None = None
    for f in fields:
        value = field_default(f) if isinstance(config, type) else getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            # The section's own overrides, then those of the section holding it (a model's backend
            # options: section(ModelConfig, openai={"base_url": {"flag": ...}})).
            inner: dict[str, dict[str, Any]] = dict(f.metadata.get(_OVERRIDES, {}))
            for name, change in overrides.get(f.name, {}).items():
                inner[name] = {**inner.get(name, {}), **change}
            yield from _leaves(value, f"{prefix}{f.name}.", inner)
            continue
        spec: ParamSpec | None = f.metadata.get(_PARAM)
        change = overrides.get(f.name)
        if change is not None:
            spec = ParamSpec(**change) if spec is None else dataclasses.replace(spec, **change)
        if spec is not None and isinstance(spec.flag, str):
            spec = dataclasses.replace(spec, flag=Alias(spec.flag, spec.description))
        kind = type(value)
        if value is None or value is REQUIRED or isinstance(value, Path):
            hints = _type_hints(cls) if hints is None else hints
            kind = hints.get(f.name, kind)
        yield Leaf(prefix + f.name, value, kind, spec)


def field_default(f: dataclasses.Field) -> Any:
    """The default of a dataclass field: its value, what its factory builds, or :data:`REQUIRED`."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return REQUIRED


def _type_hints(cls: type) -> dict[str, type]:
    """{field: the class of its values} from the annotations (``Path | None`` -> Path), where resolvable."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):
        return {}
    kinds = {}
    for name, hint in hints.items():
        options = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
        kind = (typing.get_origin(options[0]) or options[0]) if len(options) == 1 else None
        if isinstance(kind, type):
            kinds[name] = kind
    return kinds


def _is_union(hint: Any) -> bool:
    import types

    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def parameter_specs(config: Any) -> dict[str, ParamSpec]:
    """{dotted parameter name: ParamSpec} for every leaf field of ``config`` (a config class or instance, e.g.
    the node's :class:`~embodied_r_ros.node_config.NodeConfig`), in order.

    A section's overrides (:func:`section`) replace what its fields say; a field declared without
    :func:`param` is a programming error (every node parameter must be described).
    """
    specs: dict[str, ParamSpec] = {}
    for leaf in leaf_fields(config):
        if leaf.spec is None:
            raise TypeError(f"config field {leaf.name} is not declared with param(...)")
        specs[leaf.name] = leaf.spec
    return specs


@dataclass(frozen=True)
class Shortcut:
    """A launch argument or a command's flag, with the parameters (fields) it sets: vlm's and lm's device."""

    name: str
    help: str
    parameters: tuple[str, ...]
    kind: type  # the type of the parameters' values: bool, int, float, str, Path, ...
    choices: tuple[str, ...] = ()  # values all its parameters accept; () = any
    default: Any = None  # the parameters' default when they share one (REQUIRED: none), else None


def shortcuts(kind: Literal["launch", "flag"], config: Any) -> dict[str, Shortcut]:
    """The launch arguments (``"launch"``) or flags (``"flag"``) declared on the fields of ``config`` (a
    config dataclass or instance: the node's :class:`~embodied_r_ros.node_config.NodeConfig` gives
    ``embodied-r run``'s flags and the launch arguments), in table order.

    The fields that give the same alias (the fields vlm and lm share) are set together by it.
    """
    found: dict[str, Shortcut] = {}
    for leaf in leaf_fields(config):
        alias: Alias | None = getattr(leaf.spec, kind) if leaf.spec is not None else None
        if alias is None:
            continue
        name, spec = leaf.name, leaf.spec
        known = found.get(alias.name)
        if known is None:
            found[alias.name] = Shortcut(
                alias.name, alias.help, (name,), leaf.kind, spec.choices, leaf.default
            )
            continue
        if (known.help, known.kind) != (alias.help, leaf.kind):
            raise TypeError(f"{kind} {alias.name} sets {known.parameters[0]} and {name}, which differ")
        # Only values that every parameter it sets accepts.
        choices = tuple(c for c in known.choices if c in spec.choices) if spec.choices else known.choices
        default = known.default if known.default == leaf.default else None
        found[alias.name] = dataclasses.replace(
            known, parameters=(*known.parameters, name), choices=choices, default=default
        )
    return found
