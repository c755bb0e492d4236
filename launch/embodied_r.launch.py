"""Launch the embodied spatial reasoner (ROS 2 Jazzy / Kilted).

    ros2 launch embodied_r_ros embodied_r.launch.py \\
        camera_topic:=/drone/camera/image_raw compressed:=true odometry_topic:=/drone/odom \\
        vlm:=Qwen/Qwen2.5-VL-7B-Instruct lm:=$HOME/models/reasoner device:=cuda namespace:=drone1

Several cameras share one node's VLM and LM: ``cameras:="front=/drone/front/image_raw
down=/drone/down/image_raw:compressed"``. One node per camera instead (each loads its own models):
launch this file once per camera with its own ``name:=`` (``name:=front_reasoner camera_topic:=...``);
the config file's parameters reach a node of any name (:func:`file_parameters`).

Parameters come from ``config_file`` (default: this package's config/embodied_r.yaml, every default
listed), then from the arguments that set parameters (:data:`ARGUMENTS`; ``--show-args`` lists them)
that are not empty; an empty argument keeps the file's value. ``pose_source:=`` odometry, pose,
pose_with_covariance, tf or none says where poses come from; ``odometry_topic:=none`` (the topic of the
pose messages) turns them off. Those arguments are declared with the parameters, in
embodied_r_ros/node_config.py (``param(..., launch=...)``). ``launch`` and ``launch_ros`` are imported
inside the functions, so the plain-Python parts (the argument table and :func:`parameter_overrides`) load
anywhere (the package's tests check them against the node's parameters).
"""

import os

from embodied_r_ros.config import shortcuts  # plain Python: the parameter table, no ROS imports
from embodied_r_ros.node_config import NodeConfig

NODE_NAME = "embodied_r"
# Launch argument -> what it sets: its help, the node parameters (several for device) and their type.
ARGUMENTS = shortcuts("launch", NodeConfig)
# Launch argument -> the node parameters it sets (when not empty).
ARGUMENT_PARAMETERS = {name: list(argument.parameters) for name, argument in ARGUMENTS.items()}
# An empty argument keeps the config file's value, so these take "none" for an empty string.
NONE_MEANS_EMPTY = ("odometry_topic",)


def sim_time_parameters(text):
    """The ``use_sim_time`` parameter (rclpy's own, on every node) for the launch argument's value."""
    text = text.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"launch argument use_sim_time must be true or false, got {text!r}")
    return {"use_sim_time": text == "true"}


def parameter_overrides(values):
    """The node parameters set by the launch arguments' values (strings); empty values are skipped."""
    overrides = {}
    for argument, text in values.items():
        text = text.strip()
        if not text or argument not in ARGUMENTS:
            continue
        kind = ARGUMENTS[argument].kind
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError(f"launch argument {argument} must be true or false, got {text!r}")
            value = text.lower() == "true"
        elif argument in NONE_MEANS_EMPTY and text.lower() == "none":
            value = ""
        else:
            value = kind(text)
        for name in ARGUMENTS[argument].parameters:
            overrides[name] = value
    return overrides


def _choices(argument):
    """The values a parameter argument accepts, "" (keep the file's value) first; None = any."""
    if argument.kind is bool:
        return ["", "true", "false"]
    return ["", *argument.choices] if argument.choices else None


def file_parameters(path, node_name, namespace=""):
    """The parameters a parameters YAML gives node ``node_name`` in ``namespace``, flat ({"camera.topic":
    ...}), as rcl would read the file: each section whose key matches the node (``/**``, ``/**/NAME``,
    ``/ns/NAME``; ``*`` one name, ``**`` any namespaces) adds its ``ros__parameters``, later ones winning.
    A section for this package's default name (``embodied_r``, the key of its shipped file) counts for a node
    of any name, before the node's own sections: a node launched as ``name:=front_reasoner`` would otherwise
    miss every value of the file and run on the defaults."""
    import re

    import yaml

    with open(path) as file:
        sections = yaml.safe_load(file) or {}
    namespace = "/".join(part for part in namespace.split("/") if part)
    where = f"/{namespace}/" if namespace else "/"

    def matches(key, name):
        pattern = re.escape("/" + str(key).strip("/"))
        pattern = pattern.replace(r"/\*\*", "(?:/[^/]+)*").replace(r"\*", "[^/]*")
        return re.fullmatch(pattern, where + name) is not None

    parameters = {}
    for name in dict.fromkeys((NODE_NAME, node_name)):
        for key, section in sections.items():
            if matches(key, name):
                parameters.update(_flat((section or {}).get("ros__parameters") or {}))
    return parameters


def _flat(values, prefix=""):
    """A nested parameter dict as {dotted name: value} (how rcl merges sections: name by name)."""
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _launch_setup(context, *args, **kwargs):
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    values = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    config_file = LaunchConfiguration("config_file").perform(context)
    node_name = LaunchConfiguration("name").perform(context).strip() or NODE_NAME
    namespace = LaunchConfiguration("namespace").perform(context)
    parameters = [file_parameters(config_file, node_name, namespace)] if config_file else []
    overrides = parameter_overrides(values)
    overrides.update(sim_time_parameters(LaunchConfiguration("use_sim_time").perform(context)))
    parameters.append(overrides)
    return [
        Node(
            package="embodied_r_ros",
            executable="embodied_r_node",
            name=node_name,
            namespace=namespace,
            parameters=parameters,
            arguments=["--ros-args", "--log-level", LaunchConfiguration("log_level").perform(context)],
            output="screen",
            emulate_tty=True,
        )
    ]


def generate_launch_description():
    """The launch description: the arguments and the node."""
    from ament_index_python.packages import get_package_share_directory
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    default_config = os.path.join(get_package_share_directory("embodied_r_ros"), "config", "embodied_r.yaml")
    keep = "; empty keeps the config file's value"
    arguments = [
        DeclareLaunchArgument(
            "config_file", default_value=default_config, description="parameters YAML of the node"
        ),
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the node"),
        DeclareLaunchArgument(
            "name",
            default_value=NODE_NAME,
            description="name of the node (one node per camera: a name each, e.g. front_reasoner); its "
            "services are ~/ask under it and its memory file is named after it",
        ),
        DeclareLaunchArgument("log_level", default_value="info", description="debug, info, warn, error"),
        DeclareLaunchArgument(
            "use_sim_time",
            default_value="false",
            choices=["true", "false"],
            description="true: the node's clock follows /clock (a simulation, a bag played with --clock)",
        ),
    ]
    for name, argument in ARGUMENTS.items():
        choices = _choices(argument)
        extra = {"choices": choices} if choices else {}
        arguments.append(
            DeclareLaunchArgument(name, default_value="", description=argument.help + keep, **extra)
        )
    return LaunchDescription([*arguments, OpaqueFunction(function=_launch_setup)])
