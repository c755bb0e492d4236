"""Plugins through package entry points (docs/plugins.md): what the built package exposes, `embodied-r`
where the training package is not installed, the registries, and an outside package's plugins."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from embodied_r_ros import plugins
from embodied_r_ros.backends import BackendError, BackendRegistry, core_backends, load_backend, load_role
from embodied_r_ros.cli.main import TRAINING_COMMANDS
from embodied_r_ros.config import BACKENDS, CORE_BACKENDS, ModelConfig, OpenAIOptions, model_config

ROOT = Path(__file__).resolve().parents[1]
TRAINING = "embodied_r_training"
GROUPS = (plugins.COMMAND_GROUP, plugins.PERCEIVER_GROUP, plugins.YARDSTICK_GROUP)


def _declared() -> dict[str, dict[str, str]]:
    """{group: {name: value}} of training/setup.cfg, the one file both installs read."""
    parser = configparser.ConfigParser()
    parser.optionxform = str
    parser.read(ROOT / "training" / "setup.cfg", encoding="utf-8")
    return {
        group: dict(line.split(" = ") for line in text.strip().splitlines())
        for group, text in parser["options.entry_points"].items()
    }


def _entry_points(dist: metadata.Distribution) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for entry in dist.entry_points:
        found.setdefault(entry.group, {})[entry.name] = entry.value
    return found


def test_the_built_package_exposes_the_training_entry_points():
    """`make build` (colcon, ament_python_install_package with SETUP_CFG) wrote them into the training
    package's egg-info, where importlib.metadata finds them; each one imports."""
    declared = _declared()
    assert set(declared) == set(GROUPS)
    assert set(declared[plugins.COMMAND_GROUP]) == set(TRAINING_COMMANDS)  # cli/main.py names the same
    assert set(declared[plugins.PERCEIVER_GROUP]) == {"ground_truth"}
    for group in GROUPS:
        found = {entry.name: entry for entry in plugins.entry_points(group)}
        assert {name: found[name].value for name in declared[group]} == declared[group]
        assert all(callable(plugins.load(found[name])) for name in declared[group])
    dist = metadata.distribution(TRAINING)
    assert Path(str(dist.locate_file(""))).is_relative_to(ROOT / "install"), "not the colcon build's"
    assert {g: e for g, e in _entry_points(dist).items() if g in GROUPS} == declared


def test_pip_writes_the_same_entry_points(tmp_path):
    """`pip install .` builds its metadata from setup.py, which reads training/setup.cfg too."""
    subprocess.run(
        [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)],
        cwd=ROOT, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (egg_info,) = tmp_path.glob("*.egg-info")
    found = _entry_points(metadata.PathDistribution(egg_info))
    assert found.pop("console_scripts") == {"embodied-r": "embodied_r_ros.cli.main:main"}
    assert found == _declared()


def _site_without_training(tmp_path: Path) -> dict[str, str]:
    """The environment of a robot with the node but without the training package: PYTHONPATH with the
    built site-packages replaced by a copy (of links) without the training package and its egg-info."""
    site = Path(str(metadata.distribution(TRAINING).locate_file("")))
    robot = tmp_path / "site-packages"
    robot.mkdir()
    for item in site.iterdir():
        if not item.name.startswith(TRAINING):
            (robot / item.name).symlink_to(item)
    path = [str(robot) if Path(p) == site else p for p in os.environ["PYTHONPATH"].split(os.pathsep)]
    assert str(robot) in path
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def test_embodied_r_without_the_training_package(tmp_path):
    env = _site_without_training(tmp_path)
    command = shutil.which("embodied-r")
    assert command, "embodied-r is not on PATH: build with `make build` and source install/setup.bash"
    probe = _run(env, tmp_path, "-c", f"import {TRAINING}")
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr  # it really is not there

    listing = _run(env, tmp_path, command, "--help")
    assert listing.returncode == 0, listing.stderr
    lines = {line.split()[0]: line for line in listing.stdout.splitlines() if line.startswith("    ")}
    for name in ("tiny-models", "models", "demo", "run", "ask", "play"):
        assert "unavailable" not in lines[name], lines[name]
    for name in TRAINING_COMMANDS:
        assert f"[unavailable: needs {TRAINING}]" in lines[name], lines[name]
    assert _run(env, tmp_path, command, "run", "--help").returncode == 0

    synth = _run(env, tmp_path, command, "synth", "--out", str(tmp_path / "x"))
    assert synth.returncode == 2 and "Traceback" not in synth.stderr
    assert f"embodied-r synth: error: this command needs {TRAINING}, which is not installed" in synth.stderr
    assert "pip install '.[training]'" in synth.stderr

    parts = _run(
        env, tmp_path, "-c",
        "from embodied_r_ros.cli.parts import perceivers\n"
        "from embodied_r_ros.config import PerceptionConfig, PipelineConfig\n"
        "from embodied_r_ros.reasoning.yardstick import installed_yardstick\n"
        "import embodied_r_ros.cli.demo, embodied_r_ros.cli.demo_core\n"
        "print(perceivers().names(), installed_yardstick())\n"
        "perceivers().create(PipelineConfig(perception=PerceptionConfig('ground_truth', 'scene.json')))",
    )  # fmt: skip
    assert "('vlm',) None" in parts.stdout, parts.stderr
    unavailable = "perception.perceiver ground_truth is not available here: it comes with the package "
    assert unavailable in parts.stderr
    assert f"{TRAINING} (the synthetic world and its renderer), which is not installed" in parts.stderr


def _example(tmp_path: Path) -> Path:
    """docs/plugins.md's outside package, installed as pip would (module + dist-info with its entry
    points) into a directory of its own."""
    page = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n# my_robot_plugins/__init__.py\n(.*?)```", page, re.DOTALL)
    (toml,) = re.findall(r"```toml\n(.*?)```", page, re.DOTALL)
    site = tmp_path / "plugins"
    (site / "my_robot_plugins").mkdir(parents=True)
    (site / "my_robot_plugins" / "__init__.py").write_text(code)
    info = site / "my_robot_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my_robot_plugins\nVersion: 0.1\n")
    groups = tomllib.loads(toml)["project"]["entry-points"]
    (info / "entry_points.txt").write_text(
        "".join(f"[{g}]\n" + "".join(f"{n} = {v}\n" for n, v in e.items()) for g, e in groups.items())
    )
    return site


_PIPELINE = """
from embodied_r_ros.backends import ChatMessage, load_backend, load_role, BackendError
from embodied_r_ros.config import BACKENDS, ModelConfig, PerceptionConfig, PipelineConfig
from embodied_r_ros.perceivers import installed_perceivers
from embodied_r_ros.pipeline import EmbodiedR
from embodied_r_ros.testing.synthetic_clip import synthetic_clip

print("backends", BACKENDS)
print("perceivers", sorted(installed_perceivers().names()))
lm = ModelConfig(model="m", backend="echo")
print("echo", load_backend(lm, vision=False).generate([[ChatMessage.text("user", "hi there")]]))
try:
    load_role("VLM", "vlm", lm, vision=True)
except BackendError as exc:
    print("vlm", exc)
config = PipelineConfig(perception=PerceptionConfig("fixed", "a red chair"), lm=lm)
pipeline = EmbodiedR.from_config(config, perceivers=installed_perceivers())
answer = pipeline.answer("Where is the chair?", frames=synthetic_clip(seconds=4.0).frames)
print("perception", pipeline.perception, {d.observation for d in answer.descriptions}, bool(answer.text))
"""


def test_an_outside_package_adds_a_perceiver_a_backend_and_a_command(tmp_path):
    site = _example(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    hello = _run(env, tmp_path, shutil.which("embodied-r"), "hello", "world")
    assert hello.returncode == 0 and hello.stdout == "hello world\n", hello.stderr
    listing = _run(env, tmp_path, shutil.which("embodied-r"), "--help")
    assert re.search(r"^    hello +say hello$", listing.stdout, re.MULTILINE), listing.stdout

    result = _run(env, tmp_path, "-c", _PIPELINE)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "backends ('transformers', 'openai', 'echo')" in out  # a valid vlm.backend / lm.backend now
    assert "perceivers ['fixed', 'ground_truth', 'vlm']" in out
    assert "echo ['<answer>hi there</answer>']" in out
    assert "vlm cannot load the VLM (vlm.model = 'm', vlm.backend = echo): echo reads no images" in out
    assert "perception fixed text 'a red chair' {'a red chair'} True" in out  # the echo LM answered


def test_the_core_registers_its_backends_with_their_options_sections():
    registry = core_backends()
    assert registry.names() == CORE_BACKENDS == BACKENDS[:2]
    config = model_config("served", backend="openai", base_url="http://gpu:8000/v1")
    assert registry.settings(config, "lm") == ["lm.openai.base_url = http://gpu:8000/v1"]
    local = model_config("m", device="cuda:1")
    assert registry.settings(local, "vlm") == ["vlm.transformers.device = cuda:1"]
    with pytest.raises(ValueError, match="registered already"):
        registry.register("openai", lambda config, *, vision: None)


def test_a_backend_is_one_registration_and_its_options_are_a_section_of_the_model_config():
    made = []

    def factory(config: ModelConfig, *, vision: bool):
        made.append((config.openai.base_url, vision))
        return "a backend"

    registry = BackendRegistry()
    registry.register("gateway", factory, options=OpenAIOptions, shown=("base_url", "timeout_s"))
    config = ModelConfig(model="m", backend="openai", openai=OpenAIOptions(base_url="http://x/v1"))
    config.backend = "gateway"  # a name only entry points make valid; set past the check for this test
    assert load_backend(config, vision=True, backends=registry) == "a backend"
    assert made == [("http://x/v1", True)]
    shown = ["vlm.openai.base_url = http://x/v1", "vlm.openai.timeout_s = 60.0"]
    assert registry.settings(config, "vlm") == shown

    with pytest.raises(TypeError, match="int is no options section of ModelConfig"):
        registry.register("odd", factory, options=int)
    with pytest.raises(TypeError, match="port are no options of its section"):
        registry.register("odd", factory, options=OpenAIOptions, shown=("port",))
    with pytest.raises(BackendError, match=r"unknown backend 'openai'; registered: gateway"):
        registry.create(ModelConfig(backend="openai"), vision=False)
    registry.unavailable("onnx", "onnx (my_pkg:register) needs onnxruntime, which is not importable")
    config.backend = "onnx"
    with pytest.raises(BackendError, match="backend onnx is not available here: .* needs onnxruntime"):
        load_backend(config, vision=False, backends=registry)


def test_an_unknown_backend_still_names_the_role_and_its_settings():
    config = ModelConfig(model="m")
    config.backend = "nowhere"  # past ModelConfig's own check, as a registry out of step would see it
    with pytest.raises(BackendError, match=r"^cannot load the LM \(lm.model = 'm', lm.backend = nowhere\): "
                       r"unknown backend 'nowhere'; registered: transformers, openai"):  # fmt: skip
        load_role("LM", "lm", config, vision=False)


def test_an_installed_plugin_is_imported_only_when_it_is_used():
    """The node builds its perceiver registry at every start: with perception.perceiver vlm, training's
    ground truth (its simulator, OpenCV renderer) must cost nothing; asking for it imports it."""
    code = (
        "import sys\n"
        "from embodied_r_ros.perceivers import installed_perceivers\n"
        "from embodied_r_ros.config import PerceptionConfig, PipelineConfig\n"
        "registry = installed_perceivers()\n"
        "print(registry.names(), sorted(m for m in sys.modules if m.startswith('embodied_r_training')))\n"
        "try:\n"
        "    registry.create(PipelineConfig(perception=PerceptionConfig('ground_truth', '')))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
        "print('embodied_r_training.perceivers' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    listing, error, imported = result.stdout.splitlines()
    assert listing == "('vlm', 'ground_truth') []"
    assert error == "BackendError" and imported == "True"  # asked for: imported, and it names the fix
