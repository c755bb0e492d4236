"""The SmolLM2 experiment keeps finished results with their code state and restores them only while that
code is unchanged (training/experiments/smollm2_grpo.py, KeptResults)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "training" / "experiments" / "smollm2_grpo.py"


@pytest.fixture
def experiment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The experiment module with REPO pointing at a fresh git repository holding one config file."""
    spec = importlib.util.spec_from_file_location("smollm2_grpo_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "config.yaml").write_text("steps: 1\n")
    subprocess.run([*git, "add", "config.yaml"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    monkeypatch.setattr(module, "REPO", repo)
    return module, repo


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
