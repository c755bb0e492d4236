"""The layers of the house, checked on the source: who may import whom (README, "Layout").

Every import statement counts, also the ones inside functions (the lazy ones), so a layer cannot be crossed
by deferring the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "embodied_r_ros"
TRAINING = ROOT / "training" / "embodied_r_training"


def _module_name(path: Path) -> str:
    top = CORE if path.is_relative_to(CORE) else TRAINING
    parts = [top.name, *path.relative_to(top).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # "from . import x" imports x
    return found


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _violations(files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in files:
        for imported in _imports(path):
            if _within(imported, forbidden):
                bad.append(f"{path.relative_to(ROOT)} imports {imported}")
    return sorted(bad)


def _files(root: Path, *exclude: str) -> list[Path]:
    return [p for p in root.rglob("*.py") if not any(part in exclude for part in p.relative_to(root).parts)]


def test_the_core_imports_no_ros_no_command_line_and_no_training():
    # Perceivers from training (ground truth) are registered by the application (cli/parts.py), by name.
    files = _files(CORE, "ros", "cli")
    assert len(files) > 20
    forbidden = ("rclpy", "embodied_r_ros.ros", "embodied_r_ros.cli", "embodied_r_training")
    assert _violations(files, forbidden) == []


def test_training_never_imports_the_node_or_the_command_line():
    files = _files(TRAINING)
    assert len(files) > 20
    assert _violations(files, ("rclpy", "embodied_r_ros.ros", "embodied_r_ros.cli")) == []


def test_only_the_command_line_parses_arguments():
    # Library modules take config objects; flags become configs in cli/ (bench/ and training/experiments/
    # hold programs, which parse their own).
    files = _files(CORE, "cli") + _files(TRAINING)
    assert len(files) > 60
    assert _violations(files, ("argparse",)) == []
    assert _violations(_files(CORE / "cli"), ("argparse",)) != []  # the check sees argparse where it is


def test_the_ros_layer_needs_nothing_from_training_or_the_command_line():
    files = _files(CORE / "ros")
    assert len(files) >= 6
    assert _violations(files, ("embodied_r_training", "embodied_r_ros.cli")) == []


def test_production_backends_do_not_use_the_test_scaffolding():
    files = _files(CORE / "backends")
    assert _violations(files, ("embodied_r_ros.testing",)) == []


def test_option_letters_are_defined_once():
    """The letters that name options live in embodied_r_ros/reasoning/options.py only: no other module
    spells the alphabet out or computes a letter from a character code."""
    spelled = ("ABCDEFGH", "ascii_uppercase", "chr(65", 'ord("A")', "ord('A')")
    files = _files(CORE) + _files(TRAINING)
    found = [
        f"{path.relative_to(ROOT)}: {text}"
        for path in files
        if path.name != "options.py"
        for text in spelled
        if text in path.read_text(encoding="utf-8")
    ]
    assert found == []
