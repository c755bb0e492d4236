"""Launch the embodied spatial reasoner (ROS 2 Jazzy / Kilted).

    ros2 launch embodied_r_ros embodied_r.launch.py \\
        camera_topic:=/drone/camera/image_raw compressed:=true odometry_topic:=/drone/odom \\
        vlm:=Qwen/Qwen2.5-VL-7B-Instruct lm:=/models/embodied-r-3b device:=cuda namespace:=drone1

Parameters come from ``config_file`` (default: this package's config/embodied_r.yaml, every default
listed), then from the arguments below that are not empty; an empty argument keeps the file's value.
``odometry_topic:=none`` turns odometry off. ``launch`` and ``launch_ros`` are imported inside the
functions, so the plain-Python parts (the argument table and :func:`parameter_overrides`) load anywhere
(the package's tests check them against the node's parameters).
"""

import os

NODE_NAME = "embodied_r"
# Launch argument -> the node parameters it sets (when not empty).
ARGUMENT_PARAMETERS = {
    "camera_topic": ["camera.topic"],
    "compressed": ["camera.compressed"],
    "odometry_topic": ["odometry.topic"],
    "vlm": ["vlm.model"],
    "lm": ["lm.model"],
    "device": ["vlm.device", "lm.device"],
}
BOOLEAN_ARGUMENTS = ("compressed",)


def parameter_overrides(values):
    """The node parameters set by the launch arguments' values (strings); empty values are skipped."""
    overrides = {}
    for argument, text in values.items():
        text = text.strip()
        if not text or argument not in ARGUMENT_PARAMETERS:
            continue
        if argument in BOOLEAN_ARGUMENTS:
            if text.lower() not in ("true", "false"):
                raise ValueError(f"launch argument {argument} must be true or false, got {text!r}")
            value = text.lower() == "true"
        elif argument == "odometry_topic" and text.lower() == "none":
            value = ""
        else:
            value = text
        for name in ARGUMENT_PARAMETERS[argument]:
            overrides[name] = value
    return overrides


def _launch_setup(context, *args, **kwargs):
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    values = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENT_PARAMETERS}
    config_file = LaunchConfiguration("config_file").perform(context)
    parameters = [config_file] if config_file else []
    overrides = parameter_overrides(values)
    if overrides:
        parameters.append(overrides)
    return [
        Node(
            package="embodied_r_ros",
            executable="embodied_r_node",
            name=NODE_NAME,
            namespace=LaunchConfiguration("namespace").perform(context),
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
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "config_file", default_value=default_config, description="parameters YAML of the node"
            ),
            DeclareLaunchArgument("namespace", default_value="", description="namespace of the node"),
            DeclareLaunchArgument("log_level", default_value="info", description="debug, info, warn, error"),
            DeclareLaunchArgument(
                "camera_topic", default_value="", description="camera topic (sensor_msgs/Image)" + keep
            ),
            DeclareLaunchArgument(
                "compressed",
                default_value="",
                description="true: subscribe to <camera_topic>/compressed (CompressedImage)" + keep,
                choices=["", "true", "false"],
            ),
            DeclareLaunchArgument(
                "odometry_topic", default_value="", description="nav_msgs/Odometry topic, or none" + keep
            ),
            DeclareLaunchArgument(
                "vlm", default_value="", description="VLM: repo id or checkpoint directory" + keep
            ),
            DeclareLaunchArgument(
                "lm", default_value="", description="LM: repo id or checkpoint directory" + keep
            ),
            DeclareLaunchArgument(
                "device", default_value="", description="both models: auto, cpu, cuda, cuda:N" + keep
            ),
            OpaqueFunction(function=_launch_setup),
        ]
    )
