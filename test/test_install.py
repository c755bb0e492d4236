"""The two install paths stay what the README says: requirements.txt (a machine without ROS: ROS from PyPI
wheels, the CPU torch pinned) and requirements-robot.txt (a robot with ROS 2 and its own torch)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _requirements(path: Path) -> dict[str, str]:
    """{normalised package name: its version specifier} of a requirements file."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, spec = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", line).groups()
            found[name.lower().replace("_", "-")] = spec
    return found


def test_the_robot_requirements_hold_no_ros_wheels_and_no_torch():
    robot = _requirements(ROOT / "requirements-robot.txt")
    assert robot, "requirements-robot.txt is empty"
    ros = [n for n in robot if n.startswith(("ros-", "colcon", "catkin"))]
    assert ros == [], f"ROS wheels would install a second ROS beside /opt/ros: {ros}"
    assert not {"torch", "torchvision", "torchaudio"} & set(robot), "the robot's CUDA torch must stay"
    assert all("==" not in spec for spec in robot.values()), "ranges, so the robot's packages stay"


def test_the_robot_installs_the_same_python_packages_as_the_machine_without_ros():
    robot, full = _requirements(ROOT / "requirements-robot.txt"), _requirements(ROOT / "requirements.txt")
    assert set(robot) <= set(full), sorted(set(robot) - set(full))
    assert full["torch"] == "==2.13.0"  # the CPU wheel on this kind of machine, pinned in the same install
    # What requirements.txt has beyond the robot file: ROS and its build tools, torch, the test tools, and
    # packages that rosdep installs on a robot (package.xml) or that a listed one pulls in.
    keys = {d.text for d in ET.parse(ROOT / "package.xml").getroot() if d.tag.endswith("depend")}
    from_rosdep = {
        "numpy": "python3-numpy", "opencv-python-headless": "python3-opencv", "pyyaml": "python3-yaml",
        "pillow": "python3-pil", "pytest": "python3-pytest",
    }  # fmt: skip
    for name, key in from_rosdep.items():
        assert name in full and key in keys, (name, key)


def test_package_xml_declares_the_rosdep_keys_that_exist():
    """Every Python package the node or training needs that rosdistro has a key for is a rosdep key in
    package.xml (rosdep installs it on a robot); the others come from requirements-robot.txt."""
    keys = {d.text for d in ET.parse(ROOT / "package.xml").getroot() if d.tag.endswith("depend")}
    robot = _requirements(ROOT / "requirements-robot.txt")
    with_keys = {
        "transformers": "python3-transformers-pip", "huggingface-hub": "python3-huggingface-hub-pip",
        "rosbags": "python3-rosbags-pip", "rich": "python3-rich", "tqdm": "python3-tqdm",
        "matplotlib": "python3-matplotlib",
    }  # fmt: skip
    for name, key in with_keys.items():
        assert name in robot and key in keys, (name, key)
    assert "python3-torch" in keys  # apt's CPU torch where the robot has none; README: skip it for CUDA torch
