"""The two install paths stay what the README says: requirements.txt (a machine without ROS: ROS from PyPI
wheels, the CPU torch pinned) and requirements-robot.txt (a robot with ROS 2 and its own torch, in a venv).

The floors they state are the real ones: torch's is read from the installed transformers (the pinned one), and
the robot commands in README.md and docs/robot.md name launch arguments that exist and models that a command
on the same page makes. The venv layout itself: test/robot_venv_check.sh (slow, not part of the suite).
"""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from test_node_parts import _declared_launch_arguments, _launch_module

ROOT = Path(__file__).resolve().parents[1]
ROBOT_PAGES = ("README.md", "docs/robot.md")
# Where a torch floor is stated: "torch >= 2.6", "torch>=2.6", "torch 2.6 or later".
TORCH_FLOOR = re.compile(r"\btorch\s*>=\s*(\d+(?:\.\d+)+)|\btorch (\d+(?:\.\d+)+) or later")
FLOOR_PAGES = ("requirements-robot.txt", "setup.py", "package.xml", *ROBOT_PAGES)


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


def _setup_requirements() -> dict[str, str]:
    """{name: specifier} of setup.py's install_requires."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    found = {}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"]
    for call in calls:
        for keyword in (k for k in call.keywords if k.arg == "install_requires"):
            for requirement in map(Requirement, ast.literal_eval(keyword.value)):
                found[requirement.name.lower()] = str(requirement.specifier)
    assert found, "setup.py has no install_requires"
    return found


def _transformers_torch_floor() -> Version:
    """The oldest torch the installed transformers uses: its declared requirement and the version below which
    ``is_torch_available`` disables torch ("Disabling PyTorch because PyTorch >= 2.6 is required")."""
    import transformers.utils.import_utils as import_utils
    from transformers.dependency_versions_table import deps

    floors = [Version(s.version) for s in Requirement(deps["torch"]).specifier if s.operator == ">="]
    source = Path(import_utils.__file__).read_text(encoding="utf-8")
    floors += [Version(v) for v in re.findall(r"PyTorch >= (\d+(?:\.\d+)+) is required", source)]
    assert floors, "found no torch floor in transformers"
    return max(floors)


def test_every_stated_torch_floor_is_the_one_transformers_enforces():
    import torch

    floor = _transformers_torch_floor()
    for name in FLOOR_PAGES:
        stated = [Version(a or b) for a, b in TORCH_FLOOR.findall((ROOT / name).read_text(encoding="utf-8"))]
        assert stated, f"{name} states no torch floor"
        assert set(stated) == {floor}, (name, sorted(map(str, set(stated))), f"transformers: {floor}")
    assert Version(_setup_requirements()["torch"].removeprefix(">=")) == floor
    pinned = Version(_requirements(ROOT / "requirements.txt")["torch"].removeprefix("=="))
    assert pinned >= floor and Version(torch.__version__.split("+")[0]) >= floor


def test_the_transformers_pin_lies_in_the_ranges_and_is_the_one_installed():
    import transformers

    pinned = Version(_requirements(ROOT / "requirements.txt")["transformers"].removeprefix("=="))
    robot = SpecifierSet(_requirements(ROOT / "requirements-robot.txt")["transformers"])
    assert robot == SpecifierSet(_setup_requirements()["transformers"]), "one floor and one ceiling for both"
    assert pinned in robot
    # The torch floor above is read from the installed transformers: it must be the pinned one.
    assert Version(transformers.__version__) == pinned


def _commands(page: str) -> list[str]:
    """The shell lines of a page's code blocks, continuation lines joined, comments dropped."""
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [re.sub(r"\s#\s.*$", "", line).strip() for line in lines]


def test_the_robot_pages_skip_every_pip_key_and_install_it_into_the_venv():
    keys = {d.text for d in ET.parse(ROOT / "package.xml").getroot() if d.tag.endswith("depend")}
    pip_keys = {k for k in keys if k.endswith("-pip")} | {"python3-torch"}
    for page in ROBOT_PAGES:
        commands = _commands(page)
        rosdep = [c for c in commands if c.startswith("rosdep install")]
        assert rosdep, f"{page} has no rosdep command"
        for command in rosdep:
            skipped = set(re.search(r'--skip-keys\s+"([^"]+)"', command).group(1).split())
            assert skipped == pip_keys, (page, sorted(skipped ^ pip_keys))
        venv = [c for c in commands if "-m venv" in c]
        assert venv and all("--system-site-packages" in c for c in venv), page
        assert any(c.startswith("python -m colcon build") for c in commands), page


def test_the_robot_launch_commands_use_real_arguments_and_models_a_command_makes(monkeypatch):
    module, _ = _launch_module()
    declared = set(_declared_launch_arguments(module, monkeypatch))
    for page in ROBOT_PAGES:
        commands = _commands(page)
        launches = [c for c in commands if c.startswith("ros2 launch embodied_r_ros embodied_r.launch.py")]
        assert launches, f"{page} starts no node"
        made = {c.split()[-1] for c in commands if c.startswith("embodied-r models merge")}
        made |= {m for c in commands for m in re.findall(r"^embodied-r models export .*--out (\S+)", c)}
        for command in launches:
            arguments = dict(re.findall(r"(\w+):=(\S*)", command))
            assert set(arguments) <= declared, (page, sorted(set(arguments) - declared))
            for role in ("vlm", "lm"):
                model = arguments.get(role)
                # A Hugging Face repo id (resolved from the robot's cache) or what a command above made.
                repo_id = model is not None and re.fullmatch(r"[\w.-]+/[\w.-]+", model)
                assert model is None or repo_id or model in made, (page, model)
