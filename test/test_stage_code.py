"""Each experiment stage runs only the code its key holds (training/experiments/steps.py) and plumbing whose
effect the key holds otherwise: run for real (SFT on oracle traces, GRPO with every reward, each evaluation
system) under a profiler, with the tiny models, and list every function of the project it executed."""

from __future__ import annotations

import ast
import cProfile
import functools
import importlib.util
import inspect
import pstats
import sys
from pathlib import Path

import pytest

from embodied_r_ros.cli.main import main

EXPERIMENTS = Path(__file__).resolve().parents[1] / "training" / "experiments"
CONFIG = EXPERIMENTS.parents[0] / "configs" / "reasoner_cpu.yaml"
TOPS = ("embodied_r_ros", "embodied_r_training")


@pytest.fixture(scope="module")
def steps():
    sys.path.insert(0, str(EXPERIMENTS))  # steps.py imports kept.py and stage_code.py beside it
    try:
        spec = importlib.util.spec_from_file_location("steps_under_test", EXPERIMENTS / "steps.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(EXPERIMENTS))
        sys.modules.pop("steps_under_test", None)


@pytest.fixture(scope="module")
def traces_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small data set from ground-truth perception (prompts the oracle answers: SFT traces exist)."""
    out = tmp_path_factory.mktemp("stage_code")
    synth = ["synth", "--out", str(out / "synth"), "--scenes", "2", "--seed", "5", "--size", "160x120"]
    assert main([*synth, "--duration", "8", "--max-keyframes", "8"]) == 0
    prepare = ["prepare", str(out / "synth" / "questions.jsonl"), "--out", str(out / "data"), "--perceiver"]
    prepare += ["ground_truth", "--split", "1,0,1", "--max-keyframes", "8", "--no-progress"]
    assert main(prepare) == 0
    return out / "data"


def _module_name(filename: str) -> str | None:
    parts = Path(filename).with_suffix("").parts
    tops = [i for i, part in enumerate(parts) if part in TOPS]  # the last: install/<pkg>/lib/.../<pkg>/
    if not tops or not filename.endswith(".py"):
        return None
    names = list(parts[tops[-1] :])
    return ".".join(names[:-1] if names[-1] == "__init__" else names)


@functools.cache
def _functions_by_first_line(filename: str) -> dict[int, ast.AST]:
    """The functions of a source file by the line their code object starts on (the first decorator's)."""
    tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    return {
        min([node.lineno, *(d.lineno for d in node.decorator_list)]): node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _named_classes(module_name: str, filename: str, lineno: int) -> set[str]:
    """The modules of the project classes the function at ``filename:lineno`` names (it builds, raises or
    subclasses them: a dataclass's generated ``__init__`` and defaults run where no profiler sees them)."""
    module = sys.modules.get(module_name)
    function = _functions_by_first_line(filename).get(lineno)
    if module is None or function is None:
        return set()
    found = set()
    for name in ast.walk(function):
        value = vars(module).get(name.id) if isinstance(name, ast.Name) else None
        owner = getattr(value, "__module__", "") or ""
        if inspect.isclass(value) and owner.split(".")[0] in TOPS:
            found.add(owner)
    return found


def executed_modules(work) -> dict[str, set[str]]:
    """Per project module with a function that ``work()`` executed, the modules of the project classes its
    executed functions name."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        work()
    finally:
        profile.disable()
    found: dict[str, set[str]] = {}
    for filename, lineno, _ in pstats.Stats(profile).stats:
        module_name = _module_name(filename)
        if module_name is not None:
            found.setdefault(module_name, set()).update(_named_classes(module_name, filename, lineno))
    return found


def run_outside(executed: dict[str, set[str]], code: tuple[str, ...], plumbing: tuple[str, ...]) -> list[str]:
    """The modules a stage ran (or whose classes its own code named) in neither its ``code`` nor
    ``plumbing``; what plumbing names counts as plumbing (e.g. choosing a backend class by its name)."""
    own = [m for m in executed if not outside({m}, code)]
    named = {c for m in own for c in executed[m]}
    return outside(set(executed) | named, code, plumbing)


def outside(executed: set[str], *allowed: tuple[str, ...]) -> list[str]:
    """The executed modules in none of the ``allowed`` sets (a name ending in ``.*`` allows a package)."""
    names = {m for group in allowed for m in group}
    packages = tuple(m[:-1] for m in names if m.endswith(".*"))  # "pkg.*" -> "pkg." and "pkg" itself
    names |= {m[:-2] for m in names if m.endswith(".*")}
    return sorted(m for m in executed if m not in names and not m.startswith(packages))


def test_the_check_sees_the_code_a_stage_runs(steps) -> None:
    from embodied_r_ros.reasoning.answers import parse_completion

    executed = executed_modules(lambda: parse_completion("<think>x</think><answer>B</answer>"))
    assert "embodied_r_ros.reasoning.answers" in executed
    assert run_outside(executed, (), steps.PLUMBING) == ["embodied_r_ros.reasoning.answers"]
    assert run_outside(executed, steps.EVALUATOR_CODE, steps.PLUMBING) == []


def test_building_a_prepared_set_runs_the_data_code(steps, traces_data: Path, tmp_path: Path) -> None:
    """synth (indoor and outdoor) and prepare with ground-truth perception: what reasoner.py's kept data
    sets are keyed by (steps.DATA_CODE)."""

    def build() -> None:
        small = ["--scenes", "1", "--seed", "7", "--size", "160x120", "--duration", "8"]
        small += ["--max-keyframes", "8"]
        for where, outdoor in (("indoor", []), ("outdoor", ["--outdoor"])):
            assert main(["synth", "--out", str(tmp_path / where), *small, *outdoor]) == 0
            questions = tmp_path / where / "questions.jsonl"
            prepare = ["prepare", str(questions), "--out", str(tmp_path / where / "d")]
            prepare += ["--perceiver", "ground_truth", "--split", "1,0,1", "--max-keyframes", "8"]
            assert main([*prepare, "--no-progress"]) == 0

    executed = executed_modules(build)
    assert {"embodied_r_training.synth.render", "embodied_r_training.data.prepare"} <= set(executed)
    assert run_outside(executed, steps.DATA_CODE, steps.PLUMBING) == []


def test_training_runs_the_trainer_code_and_what_the_sft_examples_hold(
    steps, traces_data: Path, tiny_models_dir: Path, tmp_path: Path
) -> None:
    from embodied_r_training.rl.sft import train_sft
    from embodied_r_training.rl.train import train
    from embodied_r_training.rl.train_config import load_train_config

    common = [f"data.path={traces_data}", f"model={tiny_models_dir / 'lm'}"]
    short = ["warm_start.steps=1", "warm_start.batch_size=2", "warm_start.save_steps=0"]
    sft = load_train_config(CONFIG, [*common, f"output_dir={tmp_path / 'sft'}", "method=sft", *short])
    executed = executed_modules(lambda: train_sft(sft))
    assert "embodied_r_training.rl.warm_start" in executed
    assert run_outside(executed, steps.SFT_CODE + steps.SFT_EXAMPLE_CODE, steps.PLUMBING) == []

    grpo = load_train_config(CONFIG, [
        *common, f"output_dir={tmp_path / 'grpo'}", "warm_start.steps=0", "grpo.max_steps=1",
        "grpo.num_generations=2", "grpo.per_device_train_batch_size=2", "grpo.max_completion_length=8",
        "grpo.save_steps=10", "rewards=[{start_step: 0, format: 1, accuracy: 1, consistency: 1}]",
    ])  # fmt: skip
    executed = executed_modules(lambda: train(grpo))
    assert {"embodied_r_training.rl.rewards", "embodied_r_training.rl.option_rotation"} <= set(executed)
    assert run_outside(executed, steps.TRAINER_CODE, steps.PLUMBING) == []


@pytest.mark.parametrize(
    "system", ["reasoner", "question-only", "untrained", "oracle", "options-only", "chance", "constant"]
)
def test_an_evaluation_runs_the_evaluator_and_its_system_code(
    steps, traces_data: Path, tiny_models_dir: Path, tmp_path: Path, system: str
) -> None:
    arguments = {
        "reasoner": ["--lm", str(tiny_models_dir / "lm")],
        "question-only": ["--system", "question-only", "--lm", str(tiny_models_dir / "lm")],
        "untrained": ["--system", "untrained", "--lm", str(tiny_models_dir / "lm")],
        "options-only": ["--system", "options-only", "--calibration", str(traces_data)],
        "constant": ["--system", "constant", "--lm", str(tiny_models_dir / "lm")],  # counts tokens with it
    }.get(system, ["--system", system])
    command = ["eval", str(traces_data), "--split", "test", "--out", str(tmp_path / "eval")]
    command += ["--device", "cpu", "--max-new-tokens", "8", "--no-progress", "--dtype", "float32", *arguments]
    executed = executed_modules(lambda: main(command))
    assert "embodied_r_training.eval.evaluate" in executed
    name = "reasoner" if system == "reasoner" else system
    code = steps.SYSTEM_CODE.get(name, steps.GENERATION_CODE)
    assert run_outside(executed, steps.EVALUATOR_CODE + code, steps.PLUMBING) == []
