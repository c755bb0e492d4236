"""The experiments keep finished results with what made them (training/experiments/kept.py, used by
smollm2_grpo.py) and restore them only while that code is unchanged and for the same recipe: config, model,
data and arguments."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "training" / "experiments"
CONFIGS = EXPERIMENTS.parents[0] / "configs"


def _load(name: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))  # the scripts import kept.py beside them
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class _Kept:
    """kept.KeptResults over the test's repository, with a fixed recipe unless one is given."""

    def __init__(self, kept_module, repo: Path) -> None:
        self.module, self.repo = kept_module, repo

    def KeptResults(self, root, out, config, recipe=None):  # noqa: N802 (the class it stands for)
        recipe = recipe or self.module.Recipe({"config": "c1", "model": "m1"})
        return self.module.KeptResults(self.repo, root, out, recipe, [config])


@pytest.fixture
def experiment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """kept.py's KeptResults over a fresh git repository holding one config file."""
    kept_module = _load("kept", monkeypatch)
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "config.yaml").write_text("steps: 1\n")
    subprocess.run([*git, "add", "config.yaml"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    return _Kept(kept_module, repo), repo


def test_results_are_restored_only_while_their_code_is_unchanged(experiment, tmp_path: Path) -> None:
    module, repo = experiment
    out, root = tmp_path / "out", repo / "kept"
    config = repo / "config.yaml"
    metrics = out / "eval" / "grpo" / "metrics.json"
    module.KeptResults(root, out, config).claim(metrics.parent)  # what evaluate() does before computing
    metrics.write_text(json.dumps({"mc_accuracy": 0.5}))
    module.KeptResults(root, out, config).keep("eval", "grpo", {"metrics.json": metrics})
    provenance = json.loads((root / "eval" / "grpo" / "provenance.json").read_text())
    assert "config.yaml" in provenance["files"] and len(provenance["commit"]) == 40

    fresh = tmp_path / "fresh"  # a new machine: OUT is empty
    assert module.KeptResults(root, fresh, config).restore("eval", "grpo", ("metrics.json",))
    assert json.loads((fresh / "eval" / "grpo" / "metrics.json").read_text()) == {"mc_accuracy": 0.5}
    assert not module.KeptResults(root, fresh, config).restore("eval", "sft", ("metrics.json",))

    config.write_text("steps: 2\n")  # the code (here: the config) changed: the result is stale
    again = tmp_path / "again"
    assert not module.KeptResults(root, again, config).restore("eval", "grpo", ("metrics.json",))
    assert not (again / "eval" / "grpo").exists()
    # ...and a result made from uncommitted changes is not kept at all.
    other = out / "eval" / "sft" / "metrics.json"
    other.parent.mkdir(parents=True)
    other.write_text("{}")
    module.KeptResults(root, out, config).keep("eval", "sft", {"metrics.json": other})
    assert not (root / "eval" / "sft").exists()
    assert module.KeptResults(None, out, config).restore("eval", "grpo", ("metrics.json",)) is False


def test_a_result_other_code_left_in_out_is_set_aside_not_kept(experiment, tmp_path: Path) -> None:
    module, repo = experiment
    out, root, config = tmp_path / "out", repo / "kept", repo / "config.yaml"
    old = out / "eval" / "grpo"
    old.mkdir(parents=True)
    (old / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.1}))  # no provenance: an earlier run's
    kept = module.KeptResults(root, out, config)
    assert not kept.vouched(old)
    kept.keep("eval", "grpo", {"metrics.json": old / "metrics.json"})
    assert not (root / "eval" / "grpo").exists()  # it would be labelled with code that did not make it

    kept.claim(old)  # before evaluate() recomputes: the old result moves aside, nothing is lost
    assert not (old / "metrics.json").exists() and kept.vouched(old)
    (aside,) = (out / "eval").glob("grpo.stale-*")
    assert json.loads((aside / "metrics.json").read_text()) == {"mc_accuracy": 0.1}
    (old / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.5}))
    kept.claim(old)  # a resumed run of the same code finds its own result and keeps it
    assert json.loads((old / "metrics.json").read_text()) == {"mc_accuracy": 0.5}
    kept.keep("eval", "grpo", {"metrics.json": old / "metrics.json"})
    assert (root / "eval" / "grpo" / "provenance.json").is_file()

    # A valid kept result replaces an older one in another OUT instead of being shadowed by it.
    other = tmp_path / "other" / "eval" / "grpo"
    other.mkdir(parents=True)
    (other / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.1}))
    assert module.KeptResults(root, tmp_path / "other", config).restore("eval", "grpo", ("metrics.json",))
    assert json.loads((other / "metrics.json").read_text()) == {"mc_accuracy": 0.5}


def test_another_recipe_never_restores_a_result(experiment, tmp_path: Path) -> None:
    helper, repo = experiment
    out, root, config = tmp_path / "out", repo / "kept", repo / "config.yaml"
    Recipe = helper.module.Recipe
    cpu = Recipe({"config": "cpu", "model": "smollm2", "data": "d", "arguments": "a"})
    metrics = out / "eval" / "grpo" / "metrics.json"
    helper.KeptResults(root, out, config, cpu).claim(metrics.parent)
    metrics.write_text(json.dumps({"mc_accuracy": 0.5}))
    helper.KeptResults(root, out, config, cpu).keep("eval", "grpo", {"metrics.json": metrics})
    assert json.loads((root / "eval" / "grpo" / "provenance.json").read_text())["recipe"] == cpu.as_dict()

    for other in ({"config": "gpu"}, {"model": "qwen"}, {"data": "d2"}, {"arguments": "a2"}):
        changed = Recipe({**cpu.inputs, **other})
        fresh = tmp_path / f"fresh-{next(iter(other))}"
        assert not helper.KeptResults(root, fresh, config, changed).restore("eval", "grpo", ("metrics.json",))
        assert not (fresh / "eval" / "grpo").exists()
    # Same recipe, same code: restored; and an OUT result of another recipe is set aside, not kept.
    assert helper.KeptResults(root, tmp_path / "same", config, cpu).restore("eval", "grpo", ("metrics.json",))
    gpu = Recipe({**cpu.inputs, "config": "gpu"})
    assert not helper.KeptResults(root, out, config, gpu).vouched(metrics.parent)


@pytest.mark.parametrize("cpu_config, gpu_config", [
    ("smollm2_cpu.yaml", "smollm2_gpu.yaml"), ("reasoner_cpu.yaml", "reasoner_gpu.yaml"),
])  # fmt: skip
def test_the_gpu_config_or_another_model_never_restores_the_cpu_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_config: str, gpu_config: str
) -> None:
    """The experiments' recipe (steps.experiment_recipe) tells a CPU config from the GPU config that
    includes it, and one model directory from another, so a GPU run never publishes the CPU numbers."""
    import argparse

    from embodied_r_training.rl.train_config import load_train_config

    steps = _load("steps", monkeypatch)
    data = {}
    for name, split in (("train_all", "train"), ("test_all", "test")):
        data[name] = tmp_path / "data" / name
        data[name].mkdir(parents=True)
        (data[name] / f"{split}.jsonl").write_text('{"id": "q1"}\n')
    model, larger = tmp_path / "smollm2", tmp_path / "larger"
    for path, size in ((model, 64), (larger, 128)):
        path.mkdir()
        (path / "config.json").write_text(json.dumps({"hidden_size": size}))
    args = argparse.Namespace(model=model, max_new_tokens=64, eval_dtype="float32", out=tmp_path)

    def recipe(config: str, model_dir: Path, **changes):
        return steps.experiment_recipe(
            argparse.Namespace(**{**vars(args), "model": model_dir, **changes}),
            load_train_config(CONFIGS / config),
            data,
        )

    cpu = recipe(cpu_config, model)
    assert recipe(cpu_config, model, out=tmp_path / "elsewhere") == cpu  # where results go: no part
    assert recipe(gpu_config, model).differences(cpu.inputs) == ["config"]
    assert recipe(cpu_config, larger).differences(cpu.inputs) == ["model"]
    assert recipe(cpu_config, model, max_new_tokens=256).differences(cpu.inputs) == ["arguments"]
    (data["test_all"] / "test.jsonl").write_text('{"id": "q2"}\n')
    assert recipe(cpu_config, model).differences(cpu.inputs) == ["data"]


def test_where_the_checkout_and_out_lie_is_no_part_of_the_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prepared data holds absolute bag paths and a resolved config its own path: the recipe writes both
    relative to OUT and the checkout, so a clean checkout elsewhere restores the kept results, while a
    row that names another bag still counts as other data."""
    import argparse
    import shutil

    from embodied_r_training.rl.train_config import load_train_config

    steps = _load("steps", monkeypatch)
    model = tmp_path / "smollm2"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 64}))

    def recipe(place: str, scene: str = "scene_0000"):
        repo, out = tmp_path / place / "repo", tmp_path / place / "out"
        if not repo.exists():
            shutil.copytree(CONFIGS, repo / "training" / "configs")
        monkeypatch.setattr(steps, "REPO", repo)
        data = {}
        for name, split in (("train_all", "train"), ("test_all", "test")):
            data[name] = out / "data" / name
            data[name].mkdir(parents=True, exist_ok=True)
            row = {"id": "q1", "bag": str(out / "synth" / scene / "bag")}
            (data[name] / f"{split}.jsonl").write_text(json.dumps(row) + "\n")
        args = argparse.Namespace(model=model, max_new_tokens=256, out=out)
        config = load_train_config(repo / "training" / "configs" / "reasoner_cpu.yaml")
        return steps.experiment_recipe(args, config, data)

    here = recipe("here")
    assert recipe("elsewhere") == here
    assert recipe("elsewhere", scene="scene_0001").differences(here.inputs) == ["data"]


def test_the_kept_record_names_the_code_a_stage_loaded_after_its_claim(experiment, tmp_path: Path) -> None:
    """claim() records the code before the stage imports what it runs; record() adds it afterwards, and
    keep() keeps that record (the computing process's), so a change to the stage's code invalidates it."""
    module, repo = experiment
    out, root, config = tmp_path / "out", repo / "kept", repo / "config.yaml"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    stage_code = repo / "stage.py"
    stage_code.write_text("STEPS = 1\n")
    subprocess.run([*git, "add", "stage.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "stage"], check=True)

    target = out / "eval" / "grpo"
    computing = module.KeptResults(root, out, config)
    computing.claim(target)
    assert "stage.py" not in json.loads((target / "provenance.json").read_text())["files"]
    computing.extra_files.append(stage_code)  # stands for a module the stage imported while it ran
    (target / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.5}))
    computing.record(target)
    assert "stage.py" in json.loads((target / "provenance.json").read_text())["files"]

    # A later process that never loaded stage.py (a resumed run finding the result) keeps that record.
    module.KeptResults(root, out, config).keep("eval", "grpo", {"metrics.json": target / "metrics.json"})
    kept = json.loads((root / "eval" / "grpo" / "provenance.json").read_text())
    assert "stage.py" in kept["files"] and "config.yaml" in kept["files"]
    assert module.KeptResults(root, tmp_path / "fresh", config).restore("eval", "grpo", ("metrics.json",))

    stage_code.write_text("STEPS = 2\n")  # the stage's code changes: neither result is this code's now
    subprocess.run([*git, "commit", "-qam", "two steps"], check=True)
    assert not module.KeptResults(root, tmp_path / "again", config).restore("eval", "grpo", ("metrics.json",))
    assert not module.KeptResults(root, out, config).vouched(target)


def test_a_result_made_at_an_earlier_commit_is_kept_by_a_later_run(experiment, tmp_path: Path) -> None:
    """A resumed run at a later commit that changed files the result never loaded finds it valid and keeps
    it: the files only the keeper loaded are no part of the result, so they never make it look stale."""
    module, repo = experiment
    out, root, config = tmp_path / "out", repo / "kept", repo / "config.yaml"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    target = out / "eval" / "sft"
    module.KeptResults(root, out, config).claim(target)
    (target / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.5}))

    other = repo / "other.py"  # a file the computing run did not load, added and then changed
    for text in ("A = 1\n", "A = 2\n"):
        other.write_text(text)
        subprocess.run([*git, "add", "other.py"], check=True)
        subprocess.run([*git, "commit", "-qm", text], check=True)
    keeper = module.KeptResults(root, out, config)
    keeper.extra_files.append(other)
    assert keeper.vouched(target)
    keeper.keep("eval", "sft", {"metrics.json": target / "metrics.json"})
    assert module.KeptResults(root, tmp_path / "fresh", config).restore("eval", "sft", ("metrics.json",))
