"""pip install of the Python parts (core, training, the `embodied-r` command), without the ROS interfaces.

ROS users build with colcon instead (package.xml, CMakeLists.txt), which also generates
embodied_r_ros.msg/.srv/.action. Dependencies: requirements.txt (pinned, one environment for everything).
"""

import configparser
from pathlib import Path

from setuptools import find_packages, setup


def training_entry_points() -> dict[str, str]:
    """The training package's entry points (its embodied-r commands, perceiver, yardstick), from the file
    colcon installs them from too: training/setup.cfg."""
    parser = configparser.ConfigParser()
    parser.optionxform = str  # entry-point group names keep their case
    parser.read(Path(__file__).parent / "training" / "setup.cfg", encoding="utf-8")
    return dict(parser["options.entry_points"])  # {group: its "name = module:object" lines}


setup(
    name="embodied_r_ros",
    version="0.1.0",
    description="Embodied spatial reasoning for ROS 2 robots (Embodied-R): core, training and CLI",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["embodied_r_ros", "embodied_r_ros.*"])
    + find_packages("training", include=["embodied_r_training", "embodied_r_training.*"]),
    package_dir={"embodied_r_training": "training/embodied_r_training"},
    install_requires=[
        "numpy",
        "opencv-python-headless",
        "pyyaml",
        "rich",
        "tqdm",
        "torch>=2.6",  # transformers 5.20 and later disable older torch (test/test_install.py)
        "transformers>=5.18,<6",  # the first 5.x with every API the code calls (requirements-robot.txt)
        "tokenizers",
        "huggingface_hub",
        "safetensors",
        "peft",
        "xxhash",
    ],
    extras_require={"training": ["trl", "datasets", "accelerate", "rosbags"]},
    entry_points={
        "console_scripts": ["embodied-r = embodied_r_ros.cli.main:main"],
        **training_entry_points(),
    },
)
