"""The layers of the house, checked on the source: who may import whom (docs/layout.md, ARCHITECTURE.md).

core (embodied_r_ros, less ros/ and cli/) <- ros (embodied_r_ros/ros) <- command line (embodied_r_ros/cli);
the training library (embodied_r_training) imports the core only; the training package's commands
(embodied_r_training/commands, the command line's plugins: docs/plugins.md) import the core, the training
library and the command line's flags. Nothing under embodied_r_ros imports the training package: it finds
what training adds through entry points.

Every import statement counts, also the ones inside functions (the lazy ones) and modules named to
importlib.import_module, so a layer cannot be crossed by deferring the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "embodied_r_ros"
TRAINING = ROOT / "training" / "embodied_r_training"
FLAGS = "embodied_r_ros.cli.flags"  # what the training package's commands use of the command line


def _module_name(path: Path) -> str:
    top = CORE if path.is_relative_to(CORE) else TRAINING
    parts = [top.name, *path.relative_to(top).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    return _imports_of(path.read_text(encoding="utf-8"), path)


def _imports_of(source: str, path: Path) -> set[str]:
    """Absolute names of every module ``source`` (the text of ``path``) imports."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # "from . import x" imports x
        elif isinstance(node, ast.Call) and _call_name(node) in ("import_module", "__import__") and node.args:
            if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


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
    files = _files(CORE, "ros", "cli")
    assert len(files) > 20
    forbidden = ("rclpy", "embodied_r_ros.ros", "embodied_r_ros.cli", "embodied_r_training")
    assert _violations(files, forbidden) == []


def test_nothing_under_embodied_r_ros_imports_the_training_package():
    # Its perceiver, commands and yardstick come through entry points (embodied_r_ros/plugins.py).
    files = _files(CORE)
    assert len(files) > 40 and CORE / "cli" / "main.py" in files and CORE / "ros" / "node.py" in files
    assert _violations(files, ("embodied_r_training",)) == []


def test_the_check_sees_lazy_imports_and_modules_named_to_importlib():
    source = (
        "import importlib\n"
        "def f():\n"
        "    from embodied_r_training.synth import generate\n"
        "    importlib.import_module('embodied_r_training.commands.synth')\n"
        "    __import__('rclpy')\n"
    )
    found = _imports_of(source, CORE / "cli" / "probe.py")  # a path for the module's name only
    assert {"embodied_r_training.synth", "embodied_r_training.commands.synth", "rclpy"} <= found


def test_training_never_imports_the_node_or_the_command_line():
    files = _files(TRAINING, "commands")
    assert len(files) > 20
    assert _violations(files, ("rclpy", "embodied_r_ros.ros", "embodied_r_ros.cli")) == []


def test_the_training_commands_use_only_the_flags_of_the_command_line():
    # They are the command line's plugins (entry points of embodied_r_ros.commands): flags become configs
    # with embodied_r_ros.cli.flags; nothing else of cli/, and never the ROS layer.
    files = _files(TRAINING / "commands")
    assert len(files) >= 6
    assert _violations(files, ("rclpy", "embodied_r_ros.ros")) == []
    cli = [v for v in _violations(files, ("embodied_r_ros.cli",)) if not v.split()[-1].startswith(FLAGS)]
    assert cli == []
    assert _violations(files, (FLAGS,)) != []  # the check sees the flags where they are used


def test_only_the_command_line_parses_arguments():
    # Library modules take config objects; flags become configs in cli/ and in the training package's
    # commands (bench/ and training/experiments/ hold programs, which parse their own).
    files = _files(CORE, "cli") + _files(TRAINING, "commands")
    assert len(files) > 60
    assert _violations(files, ("argparse",)) == []
    assert _violations(_files(CORE / "cli"), ("argparse",)) != []  # the check sees argparse where it is
    assert _violations(_files(TRAINING / "commands"), ("argparse",)) != []


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


# Training's layers, lowest first: a module imports from its own layer and the ones below, never from one
# above. synth/ holds two of them: the simulator (worlds, camera paths, rendering, bags, ground-truth
# perception), which the rest builds on, and question generation (the drivers that ask the tasks' questions,
# the answerable screen, the writers behind `embodied-r synth`), which builds on the tasks and on data.
SYNTH_GENERATION = (
    "synth.questions",
    "synth.mission_questions",
    "synth.answerable",
    "synth.generate",
    "synth.mission_writer",
    "synth.synthetic_dataset",
)
TRAINING_LAYERS = (
    ("simulator", ("synth",)),  # every synth module but the generation ones
    ("data", ("data", "perceivers")),  # bags, prepare, the record schema; ground truth as a perceiver
    ("tasks", ("tasks",)),  # question tasks (template, generator, solver) and the oracles
    ("generation", SYNTH_GENERATION),
    ("rl", ("rl",)),  # rewards, warm start, GRPO and SFT
    ("eval", ("eval",)),  # the yardstick (it grades with rl's rewards), baselines, mission answers
    ("commands", ("commands",)),  # the `embodied-r` commands training adds (entry points): flags -> configs
)


def _training_layer(name: str) -> int | None:
    """The index in TRAINING_LAYERS of the training module (or imported name) ``name``: its most specific
    prefix decides (synth.questions is generation, synth.world the simulator); None outside training."""
    parts = name.split(".")
    if parts[0] != TRAINING.name or len(parts) == 1:
        return None
    relative = ".".join(parts[1:])
    found = [
        (len(prefix), layer)
        for layer, (_, prefixes) in enumerate(TRAINING_LAYERS)
        for prefix in prefixes
        if relative == prefix or relative.startswith(prefix + ".")
    ]
    return max(found)[1] if found else None


def test_every_training_module_belongs_to_a_layer():
    modules = [_module_name(p) for p in _files(TRAINING)]
    assert len(modules) > 60
    assert [m for m in modules if m != TRAINING.name and _training_layer(m) is None] == []
    assert [_training_layer(f"embodied_r_training.{m}") for m in ("synth.world", "synth.questions")] == [0, 3]


def test_training_layers_import_only_downwards():
    bad = []
    for path in _files(TRAINING):
        own = _training_layer(_module_name(path))
        for imported in _imports(path):
            layer = _training_layer(imported)
            if own is not None and layer is not None and layer > own:
                names = TRAINING_LAYERS[own][0], TRAINING_LAYERS[layer][0]
                bad.append(f"{path.relative_to(ROOT)} ({names[0]}) imports {imported} ({names[1]})")
    assert sorted(bad) == []


def _training_imports() -> dict[str, set[str]]:
    """Per training module, the training modules it imports (a name inside a module counts as the module)."""
    modules = {_module_name(p): p for p in _files(TRAINING)}
    graph = {}
    for name, path in modules.items():
        found = set()
        for imported in _imports(path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                found.add(imported)
        graph[name] = found
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (its modules, in order), or [] when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str]:
        if name in path:
            return path[path.index(name) :]
        if name in done:
            return []
        path.append(name)
        for imported in sorted(graph[name]):
            if found := visit(imported):
                return found
        path.pop()
        done.add(name)
        return []

    return next((found for name in sorted(graph) if (found := visit(name))), [])


def test_training_modules_import_each_other_without_cycles():
    graph = _training_imports()
    assert "embodied_r_training.tasks.scene" in graph["embodied_r_training.tasks.appearance_order"]
    assert _cycle(graph) == []
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c"]  # the check finds a cycle


def test_the_core_is_grouped_by_what_each_part_serves():
    """At most 16 modules lie flat in the core; the memory, the poses and the prompt-and-answer modules
    live in their own sub-packages (docs/layout.md)."""
    flat = sorted(p.stem for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert 8 <= len(flat) <= 16, flat
    grouped = {"memory": "store", "poses": "transform_tree", "reasoning": "answers"}
    assert all((CORE / package / f"{module}.py").is_file() for package, module in grouped.items())
    assert not {"memory_store", "pose_math", "answers", "prompts", "options"} & set(flat)
