"""Typed configuration of the pipeline, with the one set of defaults.

The ROS node fills these from parameters, the CLI from flags, training from YAML; all go through
:func:`from_dict`, which rejects unknown keys with a message that lists the known ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or key that cannot be used; the message says which and why."""


# ground_truth is no model: perception computed from a simulator scene (the VLM role only; see
# embodied_r_training.synth.ground_truth), a measuring instrument that separates reasoning from perception.
GROUND_TRUTH = "ground_truth"
BACKENDS = ("transformers", "openai", GROUND_TRUTH)
DTYPES = ("auto", "float32", "bfloat16", "float16")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass
class BufferConfig:
    """Clip buffer: how much history to keep and how it is stored."""

    memory_mb: float = 256.0  # hard budget for stored images
    history_s: float = 600.0  # frames older than this are dropped even under budget
    max_side: int = 640  # stored copies are downscaled so that max(h, w) <= this
    jpeg_quality: int = 90  # 0 stores raw (downscaled) pixels; 1..100 JPEG-compresses

    def __post_init__(self) -> None:
        _check(self.memory_mb > 0, "buffer.memory_mb must be > 0")
        _check(self.history_s > 0, "buffer.history_s must be > 0")
        _check(self.max_side >= 32, "buffer.max_side must be >= 32 pixels")
        _check(0 <= self.jpeg_quality <= 100, "buffer.jpeg_quality must be 0 (raw) or 1..100")


@dataclass
class KeyFrameConfig:
    """Key-frame selection (paper: 1 fps candidates, ORB, RANSAC 5 px, overlap < 0.5, clamp [4, 32])."""

    candidate_fps: float = 1.0
    orb_features: int = 500
    min_matches: int = 10  # a homography needs MORE than this many cross-checked matches
    ransac_reproj_threshold: float = 5.0
    overlap_threshold: float = 0.5  # keep a candidate when its overlap with the reference is below this
    min_keyframes: int = 4
    max_keyframes: int = 32
    match_width: int = 320  # frames are matched at this width (0 = full resolution), for speed

    def __post_init__(self) -> None:
        _check(self.candidate_fps > 0, "keyframes.candidate_fps must be > 0")
        _check(self.orb_features >= 10, "keyframes.orb_features must be >= 10")
        _check(self.min_matches >= 4, "keyframes.min_matches must be >= 4 (a homography needs 4 points)")
        _check(self.ransac_reproj_threshold > 0, "keyframes.ransac_reproj_threshold must be > 0")
        _check(0 < self.overlap_threshold <= 1, "keyframes.overlap_threshold must be in (0, 1]")
        _check(self.min_keyframes >= 2, "keyframes.min_keyframes must be >= 2 (first and last)")
        _check(
            self.max_keyframes >= self.min_keyframes,
            "keyframes.max_keyframes must be >= keyframes.min_keyframes",
        )
        _check(self.match_width == 0 or self.match_width >= 64, "keyframes.match_width must be 0 or >= 64")


@dataclass
class ModelConfig:
    """One model: where it lives and how it is run."""

    # hub repo id or local directory (transformers) / served model name (openai) / scene.json (ground_truth)
    model: str = ""
    backend: str = "transformers"  # "transformers" (in-process), "openai" (HTTP server) or "ground_truth"
    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:1", ...
    dtype: str = "auto"  # "auto", "float32", "bfloat16", "float16"
    adapter: str = ""  # optional LoRA adapter directory for the LM
    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy
    base_url: str = "http://127.0.0.1:8000/v1"  # openai backend only
    api_key_env: str = "OPENAI_API_KEY"  # name of the environment variable holding the key
    timeout_s: float = 60.0
    retries: int = 2
    max_concurrency: int = 8  # openai backend: requests in flight at once
    image_cache_mb: float = 256.0  # transformers VLM: encoded key frames kept for reuse (0 = off)
    trust_remote_code: bool = False
    allow_download: bool = False  # fetch from the hub when not on disk (robots usually run offline)

    def __post_init__(self) -> None:
        _check(
            self.backend in BACKENDS,
            f"model backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}",
        )
        _check(self.dtype in DTYPES, f"model dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        _check(self.max_new_tokens >= 1, "model max_new_tokens must be >= 1")
        _check(self.temperature >= 0, "model temperature must be >= 0 (0 = greedy)")
        _check(self.timeout_s > 0, "model timeout_s must be > 0")
        _check(self.retries >= 0, "model retries must be >= 0")
        _check(self.max_concurrency >= 1, "model max_concurrency must be >= 1")
        _check(self.image_cache_mb >= 0, "model image_cache_mb must be >= 0 (0 turns the cache off)")


def _default_vlm() -> ModelConfig:
    return ModelConfig(model="Qwen/Qwen2.5-VL-7B-Instruct", max_new_tokens=256)


def _default_lm() -> ModelConfig:
    return ModelConfig(model="Qwen/Qwen2.5-3B-Instruct", max_new_tokens=512)


@dataclass
class PipelineConfig:
    """Everything the core pipeline needs: models, key frames, buffer."""

    vlm: ModelConfig = field(default_factory=_default_vlm)
    lm: ModelConfig = field(default_factory=_default_lm)
    keyframes: KeyFrameConfig = field(default_factory=KeyFrameConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)


def from_dict(cls: type[T], data: dict[str, Any] | None, *, base: T | None = None, where: str = "") -> T:
    """Build dataclass ``cls`` from a (nested) dict over ``base`` (default: the defaults).

    Keys not given keep their value in ``base``; unknown keys raise :class:`ConfigError`.
    """
    data = dict(data or {})
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {', '.join(where + k for k in unknown)}; "
            f"known keys{' under ' + where.rstrip('.') if where else ''}: {', '.join(sorted(known))}"
        )
    values: dict[str, Any] = {}
    base = cls() if base is None else base
    for name, value in data.items():
        current = getattr(base, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"config key {where}{name} must be a mapping, got {value!r}")
            values[name] = from_dict(type(current), value, base=current, where=f"{where}{name}.")
        else:
            values[name] = _coerce(value, current, f"{where}{name}")
    return dataclasses.replace(base, **values)


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
# The ROS node's own settings. Its parameters are exactly the fields of NodeConfig, dotted
# ("camera.topic", "vlm.model", ...); embodied_r_ros.ros.params declares them with descriptions and ranges.

QOS_PROFILES = ("sensor_data", "reliable")


@dataclass
class CameraConfig:
    """Camera input of the node."""

    topic: str = "camera/image_raw"  # sensor_msgs/Image; relative names resolve in the node's namespace
    compressed: bool = False  # subscribe to sensor_msgs/CompressedImage on <topic>/compressed instead
    qos: str = "sensor_data"  # "sensor_data" (best effort, keep last) or "reliable"
    qos_depth: int = 5
    jump_back_reset_s: float = 1.0  # a stamp this far behind the newest clears the history; 0 = never

    def __post_init__(self) -> None:
        _check(bool(self.topic.strip()), "camera.topic must not be empty")
        _check(
            self.qos in QOS_PROFILES, f"camera.qos must be one of {', '.join(QOS_PROFILES)}, got {self.qos!r}"
        )
        _check(self.qos_depth >= 1, "camera.qos_depth must be >= 1")
        _check(self.jump_back_reset_s >= 0, "camera.jump_back_reset_s must be >= 0 (0 = never reset)")


@dataclass
class OdometryConfig:
    """Optional odometry (nav_msgs/Odometry): key frames get the pose interpolated at their stamp."""

    topic: str = "odom"  # "" = no odometry (the VLM then labels the actions, as in the paper)
    max_gap_s: float = 0.5  # a key frame farther than this from any odometry sample gets no pose

    def __post_init__(self) -> None:
        _check(self.max_gap_s > 0, "odometry.max_gap_s must be > 0")


@dataclass
class QueryConfig:
    """How the node serves questions."""

    window_s: float = 60.0  # history a question covers when it asks for 0 s
    timeout_s: float = 120.0  # from arrival (queue wait included) to answer
    queue_length: int = 2  # questions waiting behind the running one; more get "busy" at once
    publish_keyframes: bool = True  # publish each answer's key frames on ~/keyframes
    pre_encode_keyframes: bool = True  # encode new key frames with the VLM's vision tower while idle
    # Bounds on one request: the question goes to the VLM once per key frame, so an unbounded one can
    # exhaust the robot's memory (a 100 kB question grew the node past 6 GB).
    max_question_chars: int = 2000
    max_options: int = 26  # one letter each, A..Z
    max_option_chars: int = 200

    def __post_init__(self) -> None:
        _check(self.window_s > 0, "query.window_s must be > 0 seconds")
        _check(self.timeout_s > 0, "query.timeout_s must be > 0 seconds")
        _check(0 <= self.queue_length <= 64, "query.queue_length must be in 0..64")
        _check(1 <= self.max_question_chars <= 100_000, "query.max_question_chars must be in 1..100000")
        _check(0 <= self.max_options <= 26, "query.max_options must be in 0..26 (option letters A..Z)")
        _check(1 <= self.max_option_chars <= 10_000, "query.max_option_chars must be in 1..10000")


@dataclass
class NodeConfig:
    """Everything the ROS node is configured with: its inputs, its query service and the pipeline."""

    camera: CameraConfig = field(default_factory=CameraConfig)
    odometry: OdometryConfig = field(default_factory=OdometryConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    vlm: ModelConfig = field(default_factory=_default_vlm)
    lm: ModelConfig = field(default_factory=_default_lm)
    keyframes: KeyFrameConfig = field(default_factory=KeyFrameConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    diagnostics_period_s: float = 1.0
    # CPU threads for in-process (transformers) models; 0 = all cores but one, so that inference on the CPU
    # does not starve the camera subscription and DDS (on 2 cores it made a 30 Hz stream stall for seconds).
    torch_threads: int = 0

    def __post_init__(self) -> None:
        _check(self.diagnostics_period_s > 0, "diagnostics_period_s must be > 0 seconds")
        _check(self.torch_threads >= 0, "torch_threads must be >= 0 (0 = all cores but one)")

    def pipeline(self) -> PipelineConfig:
        """The core pipeline's part of this configuration."""
        return PipelineConfig(vlm=self.vlm, lm=self.lm, keyframes=self.keyframes, buffer=self.buffer)
