"""The experiments keep finished results keyed by what they are made of (training/experiments/kept.py,
stage_code.py, steps.py): the stage's inputs by content and the code of that stage alone. A change that leaves
them as they were leaves a result valid; one that changes them invalidates it, with a message naming what."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "training" / "experiments"
CONFIGS = EXPERIMENTS.parents[0] / "configs"


def _load(name: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))  # the scripts import kept.py and stage_code.py beside them
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch):
    return _load("kept", monkeypatch)


@pytest.fixture
def code_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A throwaway package ``stagepkg`` on sys.path, and a function that (re)writes one of its modules and
    returns the identity of the stage made of ``stagepkg.a`` and ``stagepkg.b``."""
    stage_code = _load("stage_code", monkeypatch)
    package = tmp_path / "stagepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))

    def identity(**modules: str):
        for name, text in modules.items():
            (package / f"{name}.py").write_text(textwrap.dedent(text))
        for name in [m for m in sys.modules if m.startswith("stagepkg")]:
            del sys.modules[name]  # re-import what was rewritten
        return stage_code.code_identity(["stagepkg.a", "stagepkg.b"])

    return stage_code, identity


A = '''
    """Rewards."""
    import re

    LETTER = re.compile(r"[A-Z]")
    SCALE = 2


    def score(text: str) -> float:
        """How good."""
        return SCALE * len(LETTER.findall(text))
'''
B = """
    def helper(x):
        return x + 1
"""


def test_a_refactor_that_computes_the_same_keeps_the_code_identity(code_package) -> None:
    stage_code, identity = code_package
    before, _ = identity(a=A, b=B)
    # Comments, docstrings, blank lines, imports, a constant built another way with the same value, and
    # constants no function reads.
    same = '''
        """Rewards, reworded."""
        import re as regex  # another spelling of the same import

        FIRST, LAST = "A", "Z"
        LETTER = regex.compile(r"[" + FIRST + "-" + LAST + "]")  # the same pattern, built
        SCALE = 2


        def score(text: str) -> float:
            # no docstring now, and a comment
            return SCALE * len(LETTER.findall(text))
    '''
    after, _ = identity(a=same)
    assert stage_code.code_changes(before, after) == []  # FIRST and LAST are read by no function
    # A function that moves from one of the stage's modules to another: the same identity.
    with_helper = A.replace("SCALE = 2", "SCALE = 2\n\n\n    def helper(x):\n        return x + 1")
    moved, where = identity(a=with_helper, b="X = None\n")
    base, _ = identity(a=A, b="X = None\n" + textwrap.dedent(B))
    assert stage_code.code_changes(base, moved) == [] and where["helper"] == "stagepkg.a"


def test_a_change_to_what_the_code_computes_changes_the_identity_and_is_named(code_package) -> None:
    stage_code, identity = code_package
    before, _ = identity(a=A, b=B)
    for changed_text, names in (
        (A.replace("SCALE = 2", "SCALE = 3"), ["score"]),  # the function that reads the constant
        (A.replace("[A-Z]", "[A-H]"), ["score"]),
        (A.replace("return SCALE *", "return 1 + SCALE *"), ["score"]),
        (A.replace("def score(text: str)", "def score(text: str, k: int = 1)"), ["score"]),
        (A.replace("def score", "def grade"), ["grade", "score"]),
    ):
        after, _ = identity(a=changed_text)
        assert stage_code.code_changes(before, after) == names


REGISTRY = """
    import re
    from re import escape as quote


    def solve_a(text):
        return quote(text)


    def solve_b(text):
        return text


    TASK = dict(name="a", solve=solve_a)
    TASKS = (solve_a, solve_b)
"""


def test_registrations_their_order_and_aliases_count(code_package) -> None:
    """What runs through a registry or an alias is part of the code even when no function reads it."""
    stage_code, identity = code_package
    before, _ = identity(a=REGISTRY, b=B)
    for changed_text, names in (
        (REGISTRY.replace("solve=solve_a", "solve=solve_b"), ["TASK"]),  # another solver registered
        (REGISTRY.replace("(solve_a, solve_b)", "(solve_b, solve_a)"), ["TASKS"]),  # the order tried
        (REGISTRY.replace("from re import escape as quote", "from re import sub as quote"), ["solve_a"]),
    ):
        after, _ = identity(a=changed_text)
        assert stage_code.code_changes(before, after) == names
    same, _ = identity(a=REGISTRY.replace("import re\n", "import re  # patterns\n"))
    assert stage_code.code_changes(before, same) == []


def _key(kept, code, where=None, **inputs):
    base = {"data": "d1", "config": "c1", "model": "m1"}
    return kept.StageKey({**base, **inputs}, code, where or {})


def test_results_are_restored_only_for_an_equal_key_and_the_log_names_what_changed(
    kept, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out, root = tmp_path / "out", tmp_path / "kept"
    code = {"score": ["aaa"], "SCALE": ["bbb"]}
    key = _key(kept, code)
    metrics = out / "eval" / "grpo" / "metrics.json"
    kept.KeptResults(root, out).claim(metrics.parent, key)  # what evaluate() does before computing
    metrics.write_text(json.dumps({"mc_accuracy": 0.5}))
    kept.KeptResults(root, out).keep("eval", "grpo", key, {"metrics.json": metrics})
    record = json.loads((root / "eval" / "grpo" / "provenance.json").read_text())
    assert record["key"] == key.as_dict()

    fresh = tmp_path / "fresh"  # a new machine, the same inputs and code: restored
    assert kept.KeptResults(root, fresh).restore("eval", "grpo", _key(kept, dict(code)), ("metrics.json",))
    assert json.loads((fresh / "eval" / "grpo" / "metrics.json").read_text()) == {"mc_accuracy": 0.5}
    assert not kept.KeptResults(root, fresh).restore("eval", "sft", key, ("metrics.json",))

    caplog.set_level("WARNING")
    other_code = {"score": ["zzz"], "SCALE": ["bbb"], "new_helper": ["ccc"]}
    for changed, named in (
        (_key(kept, code, data="d2"), "made from another data"),
        (_key(kept, code, model="m2", config="c2"), "made from another config, model"),
        (_key(kept, other_code, {"score": "pkg.rewards", "new_helper": "pkg.util"}),
         "its code changed: new_helper (pkg.util), score (pkg.rewards)"),
    ):  # fmt: skip
        again = tmp_path / f"again-{len(caplog.records)}"
        assert not kept.KeptResults(root, again).restore("eval", "grpo", changed, ("metrics.json",))
        assert not (again / "eval" / "grpo").exists()
        assert named in caplog.records[-1].getMessage()
    assert kept.KeptResults(None, out).restore("eval", "grpo", key, ("metrics.json",)) is False


def test_a_result_another_key_left_in_out_is_set_aside_not_kept(kept, tmp_path: Path) -> None:
    out, root = tmp_path / "out", tmp_path / "kept"
    key = _key(kept, {"score": ["aaa"]})
    old = out / "eval" / "grpo"
    old.mkdir(parents=True)
    (old / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.1}))  # no provenance: an earlier run's
    store = kept.KeptResults(root, out)
    assert store.why_invalid(old, key) == "no provenance"
    store.keep("eval", "grpo", key, {"metrics.json": old / "metrics.json"})
    assert not (root / "eval" / "grpo").exists()  # it would be labelled with a key that did not make it

    store.claim(old, key)  # before evaluate() recomputes: the old result moves aside, nothing is lost
    assert not (old / "metrics.json").exists() and store.why_invalid(old, key) is None
    (aside,) = (out / "eval").glob("grpo.stale-*")
    assert json.loads((aside / "metrics.json").read_text()) == {"mc_accuracy": 0.1}
    (old / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.5}))
    store.claim(old, key)  # a resumed run with the same key finds its own result and keeps it
    assert json.loads((old / "metrics.json").read_text()) == {"mc_accuracy": 0.5}
    store.keep("eval", "grpo", key, {"metrics.json": old / "metrics.json"})
    assert (root / "eval" / "grpo" / "provenance.json").is_file()
    assert store.why_invalid(old, _key(kept, {"score": ["bbb"]})) is not None  # another stage code

    # A valid kept result replaces an older one in another OUT instead of being shadowed by it.
    other = tmp_path / "other" / "eval" / "grpo"
    other.mkdir(parents=True)
    (other / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.1}))
    assert kept.KeptResults(root, tmp_path / "other").restore("eval", "grpo", key, ("metrics.json",))
    assert json.loads((other / "metrics.json").read_text()) == {"mc_accuracy": 0.5}
    # A half-written result of the same key in OUT is replaced by the kept one, file by file.
    (other / "metrics.json").write_text("{")
    assert kept.KeptResults(root, tmp_path / "other").restore("eval", "grpo", key, ("metrics.json",))
    assert json.loads((other / "metrics.json").read_text()) == {"mc_accuracy": 0.5}
    # Keeping a new result of another key puts it in place whole, nothing left beside it.
    newer = _key(kept, {"score": ["ccc"]})
    store.claim(old, newer)
    (old / "metrics.json").write_text(json.dumps({"mc_accuracy": 0.75}))
    store.keep("eval", "grpo", newer, {"metrics.json": old / "metrics.json"})
    assert sorted(p.name for p in (root / "eval").iterdir()) == ["grpo"]
    assert store.why_invalid(root / "eval" / "grpo", newer) is None


def _data(root: Path, rows: list[dict]) -> dict[str, Path]:
    data = {}
    for name, split in (("train_all", "train"), ("test_all", "test")):
        data[name] = root / name
        data[name].mkdir(parents=True, exist_ok=True)
        (data[name] / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


@pytest.mark.parametrize("cpu_config, gpu_config", [("reasoner_cpu.yaml", "reasoner_gpu.yaml")])
def test_a_training_key_tells_configs_models_data_and_starting_adapters_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_config: str, gpu_config: str
) -> None:
    """steps.train_key tells a CPU config from the GPU config that includes it, one model directory from
    another, one training split from another, GRPO's starting adapter from another, so a GPU run never
    publishes the CPU numbers; where OUT lies is no part of it."""
    from embodied_r_training.rl.train_config import load_train_config

    steps = _load("steps", monkeypatch)
    model, larger = tmp_path / "smollm2", tmp_path / "larger"
    for path, size in ((model, 64), (larger, 128)):
        path.mkdir()
        (path / "config.json").write_text(json.dumps({"hidden_size": size}))
    adapters = []
    for rank in (8, 16):
        adapter = tmp_path / f"adapter{rank}"
        adapter.mkdir()
        (adapter / "adapter_config.json").write_text(json.dumps({"r": rank, "base_model_name_or_path": "/m"}))
        (adapter / "adapter_model.safetensors").write_bytes(b"weights")
        adapters.append(adapter)

    def key(config: str, model_dir: Path, out: Path, rows=({"id": "q1"},), start=None, **overrides):
        data = _data(out / "data", list(rows))
        sets = [f"{k}={v}" for k, v in overrides.items()]
        places = [f"data.path={data['train_all']}", f"output_dir={out / 'runs' / 'grpo_all'}"]
        resolved = load_train_config(CONFIGS / config, [*places, *sets])
        return steps.train_key(steps.Identities(out), resolved, data["train_all"], model_dir, start)

    out = tmp_path / "out"
    cpu = key(cpu_config, model, out)
    assert cpu.why_not(key(cpu_config, model, tmp_path / "elsewhere").as_dict()) is None  # where: no part
    assert cpu.why_not(key(gpu_config, model, out).as_dict()) == "made from another config"
    assert cpu.why_not(key(cpu_config, larger, out).as_dict()) == "made from another model"
    assert cpu.why_not(key(cpu_config, model, out, rows=[{"id": "q2"}]).as_dict()) == "made from another data"
    with_start = key(cpu_config, model, out, start=adapters[0])
    assert with_start.why_not(cpu.as_dict()) == "made from another start"
    assert with_start.why_not(key(cpu_config, model, out, start=adapters[1]).as_dict()) == (
        "made from another start"
    )
    # The same adapter trained in another checkout: its config names another base folder, the same start.
    moved = tmp_path / "adapter8-elsewhere"
    moved.mkdir()
    settings = json.loads((adapters[0] / "adapter_config.json").read_text())
    (moved / "adapter_config.json").write_text(json.dumps({**settings, "base_model_name_or_path": "/x/m"}))
    (moved / "adapter_model.safetensors").write_bytes(b"weights")
    assert with_start.why_not(key(cpu_config, model, out, start=moved).as_dict()) is None


def test_an_sft_key_holds_only_the_config_sft_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SFT's key holds the config sections SFT reads (steps.SFT_CONFIG): GRPO's settings, rewards and LoRA
    (when SFT trains every weight) cannot change it, so work on GRPO never makes a finished SFT run stale."""
    from embodied_r_training.rl.train_config import load_train_config

    steps = _load("steps", monkeypatch)
    ids = steps.Identities(tmp_path)

    def part(*sets: str) -> str:
        config = load_train_config(CONFIGS / "reasoner_cpu.yaml", ["method=sft", *sets])
        return ids.config(config, steps.SFT_CONFIG)

    base = part()
    grpo_only = ["grpo.beta=0.1", "grpo.max_steps=7", "data.rotate_options=false", "lora.r=4"]
    assert part(*grpo_only) == base
    assert part("rewards=[{start_step: 0, format: 1, accuracy: 1}]") == base
    sft_settings = ("warm_start.learning_rate=1e-4", "grpo.bf16=false", "seed=3", "data.max_prompt_tokens=99")
    for changed in sft_settings:
        assert part(changed) != base, changed
    assert ids.config(load_train_config(CONFIGS / "reasoner_cpu.yaml", ["method=sft"])) != base  # all of it


def test_an_evaluation_key_holds_its_data_system_and_settings_by_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """steps.eval_key: the test split's rows (bag paths portable), the system's inputs and the eval flags;
    a program's key holds its own code, not the generation backends'."""
    steps = _load("steps", monkeypatch)

    def key(out: Path, scene: str = "scene_0000", system=None, flags=("--dtype", "float32")):
        data = _data(out / "data", [{"id": "q1", "bag": str(out / "synth" / scene / "bag")}])
        system = system or {"name": "reasoner", "lm": "m1", "adapter": "a1"}
        command = ["eval", str(data["test_all"]), "--split", "test", "--out", str(out / "eval"), *flags]
        return steps.eval_key(steps.Identities(out), data["test_all"], system, command)

    here = key(tmp_path / "here")
    assert here.why_not(key(tmp_path / "elsewhere").as_dict()) is None
    assert here.why_not(key(tmp_path / "here", scene="scene_0001").as_dict()) == "made from another data"
    other = {"name": "reasoner", "lm": "m1", "adapter": "a2"}
    assert here.why_not(key(tmp_path / "here", system=other).as_dict()) == "made from another system"
    assert here.why_not(key(tmp_path / "here", flags=("--dtype", "bfloat16")).as_dict()) == (
        "made from another settings"
    )
    oracle = key(tmp_path / "here", system={"name": "oracle"})
    _, where = steps.code_identity(steps.EVALUATOR_CODE + steps.SYSTEM_CODE["oracle"])
    assert set(oracle.code) == set(where) and "TransformersBackend" in here.code
    assert "TransformersBackend" not in oracle.code


def test_the_mission_stage_starts_from_the_main_sft_model_and_its_key_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reasoner.py's mission stage (``--parts missions``) trains the main SFT model on with the mission
    mix: its config starts from that model with the stage's own settings (steps, half batch, activations
    recomputed), and its key holds the main SFT run's recipe, so another main SFT makes it stale."""
    import argparse

    reasoner = _load("reasoner", monkeypatch)
    steps = sys.modules["steps"]  # the module reasoner.py imported
    # What SFT is fed, by the rows' file here (the real one writes every trace of prepared rows).
    fed = lambda data, config: (data / "train.jsonl").read_text()  # noqa: E731
    monkeypatch.setattr(steps, "sft_examples_identity", fed)
    model = tmp_path / "smollm2"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 64}))
    args = argparse.Namespace(model=model, config=CONFIGS / "reasoner_cpu.yaml", mission_sft_steps=6,
                              ood_sft_steps=150, ood_grpo_steps=12, sft_steps=0, float32=False)  # fmt: skip

    def runs(out: Path, scene_rows: list[dict]):
        data = _data(out / "data", scene_rows)
        mix = out / "data" / "train_missions_mix"
        mix.mkdir()
        (mix / "train.jsonl").write_text(json.dumps({"id": "missions/m1"}) + "\n")
        data[f"train_{reasoner.MISSIONS}"] = mix
        data["train_indoor"] = data["train_all"]  # one environment's runs (only their configs are read)
        kept = sys.modules["kept"].KeptResults(None, out)
        return reasoner.Runs(out, args, data, steps.Stages(out), kept, steps.Identities(out)), mix

    first, mix = runs(tmp_path / "out", [{"id": "q1"}])
    config = first.config(reasoner.MISSIONS, "sft")
    run_dirs = tmp_path / "out" / "runs"
    weights = tmp_path / "out" / "models" / "sft_all" / "weights"  # the kept GGUF, read back
    assert config.method == "sft" and config.model == str(weights)
    assert config.data.path == str(mix) and config.output_dir == str(run_dirs / "sft_missions")
    ws = config.warm_start
    assert (ws.steps, ws.batch_size, ws.gradient_checkpointing, ws.lora) == (6, 4, True, False)
    key = first.key(reasoner.MISSIONS, "sft")
    assert key.as_dict()["inputs"]["start"] == reasoner.recipe_identity(first.key("all", "sft"))
    main_config = first.config("all", "sft")  # the main run is untouched by the stage's settings
    assert main_config.model == str(model) and main_config.warm_start.gradient_checkpointing is False
    other, _ = runs(tmp_path / "other", [{"id": "q2"}])  # another main SFT (other scenes)
    assert other.key(reasoner.MISSIONS, "sft").why_not(key.as_dict()) == "made from another start"
    # --ood-grpo-steps sizes the one-environment GRPO runs alone; the main run keeps the config's steps
    assert first.config("indoor", "grpo").grpo["max_steps"] == 12
    assert first.config("all", "grpo").grpo["max_steps"] == 48
    assert main_config.warm_start.steps == 240 and first.config("indoor", "sft").warm_start.steps == 150
    # --sft-steps sizes the main SFT alone
    args.sft_steps = 480
    longer, _ = runs(tmp_path / "longer", [{"id": "q1"}])
    assert longer.config("all", "sft").warm_start.steps == 480
    assert longer.config("indoor", "sft").warm_start.steps == 150
    assert longer.key("all", "sft").why_not(first.key("all", "sft").as_dict()) is not None
    # --float32 (a CPU without native bf16): every run trains in float32, another recipe with its own key
    args.sft_steps, args.float32 = 0, True
    plain, _ = runs(tmp_path / "float32", [{"id": "q1"}])
    assert first.config("all", "sft").grpo["bf16"] is True
    assert all(plain.config(env, m).grpo["bf16"] is False for env in ("all", reasoner.MISSIONS, "indoor")
               for m in ("sft", "grpo") if (env, m) != (reasoner.MISSIONS, "grpo"))  # fmt: skip
    assert plain.key("all", "sft").why_not(first.key("all", "sft").as_dict()) is not None
    assert "float32" in reasoner.eval_flags(argparse.Namespace(max_new_tokens=8, eval_batch=4, float32=True))


def test_list_repeats_adds_copies_of_the_long_list_questions_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--list-repeats K``: every object_count question of 2 or more and every ego_altitude question K
    times in all (ids kept unique), every other question once; the main runs train on that set."""
    reasoner = _load("reasoner", monkeypatch)
    steps = sys.modules["steps"]
    rows = [
        {"id": "one", "task": "object_count", "solution": "1"},
        {"id": "three", "task": "object_count", "solution": "3"},
        {"id": "climb", "task": "ego_altitude", "solution": "2.4"},
        {"id": "far", "task": "abs_distance", "solution": "5.0"},
    ]
    train_all = tmp_path / "data" / "train_all"
    train_all.mkdir(parents=True)
    (train_all / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lists = reasoner.longer_lists(tmp_path, train_all, 3, steps.Stages(tmp_path))
    ids = [json.loads(line)["id"] for line in (lists / "train.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(["one", "three", "climb", "far", "three#2", "climb#2", "three#3", "climb#3"])
    assert (lists / "train.parquet").exists()
    assert reasoner.repeat_long_lists(rows, 1) == rows


def test_a_full_fine_tune_is_kept_as_an_8_bit_gguf_and_a_fresh_machine_reads_it_without_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_models_dir: Path
) -> None:
    """reasoner.py keeps a fully fine-tuned SFT model as a Q8_0 GGUF beside its key; the machine that trained
    it and a fresh one (another OUT, the same results) read the same weights back from it, and the fresh
    one trains nothing. Another recipe does not restore it."""
    import argparse

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    reasoner = _load("reasoner", monkeypatch)
    steps = sys.modules["steps"]
    fed = lambda data, config: (data / "train.jsonl").read_text()  # noqa: E731
    monkeypatch.setattr(steps, "sft_examples_identity", fed)
    base = tmp_path / "smollm2"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"hidden_size": 64}))
    args = argparse.Namespace(model=base, config=CONFIGS / "reasoner_cpu.yaml", mission_sft_steps=6,
                              ood_sft_steps=150, ood_grpo_steps=0, sft_steps=0, float32=False)  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(tiny_models_dir / "lm")
    source = json.loads((tiny_models_dir / "lm" / "config.json").read_text())
    trained: list[Path] = []

    def train(self, env: str, method: str) -> None:  # what SFT leaves: a model in runs/NAME/final
        run_dir = self.out / "runs" / f"{method}_{env}"
        self.kept.claim(run_dir, self.key(env, method))
        config = LlamaConfig(
            vocab_size=source["vocab_size"], hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True, initializer_range=0.1,
            bos_token_id=source["bos_token_id"], eos_token_id=source["eos_token_id"],
            pad_token_id=source["pad_token_id"],
        )  # fmt: skip
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(run_dir / "final")
        tokenizer.save_pretrained(run_dir / "final")
        (run_dir / "final" / "node_params.yaml").write_text("{}\n")
        trained.append(run_dir)

    monkeypatch.setattr(reasoner.Runs, "train", train)
    results = tmp_path / "results"

    def runs(out: Path, rows: list[dict]):
        kept = sys.modules["kept"].KeptResults(results, out)
        data = _data(out / "data", rows)
        data["train_indoor"] = data["train_all"]
        return reasoner.Runs(out, args, data, steps.Stages(out), kept, steps.Identities(out))

    here = runs(tmp_path / "here", [{"id": "q1"}])
    weights = here.full_model("all", "sft")
    assert len(trained) == 1 and weights == here.weights("all", "sft")
    kept_gguf = results / "models" / "sft_all" / reasoner.KEPT_WEIGHTS
    assert kept_gguf.is_file() and (results / "models" / "sft_all" / reasoner.FULL_MODEL_RECORD).is_file()

    fresh = runs(tmp_path / "fresh", [{"id": "q1"}])
    read_back = fresh.full_model("all", "sft")
    assert len(trained) == 1  # restored, not trained
    exact = LlamaForCausalLM.from_pretrained(trained[0] / "final").state_dict()
    ours = AutoModelForCausalLM.from_pretrained(weights).state_dict()
    theirs = AutoModelForCausalLM.from_pretrained(read_back).state_dict()
    for name, tensor in exact.items():  # 8-bit: close to the trained weights, equal on both machines
        assert torch.equal(ours[name], theirs[name]), name
        assert torch.allclose(ours[name], tensor, atol=tensor.abs().max().item() / 100), name

    other = runs(tmp_path / "other", [{"id": "q2"}])  # another recipe (other rows) trains its own
    other.full_model("all", "sft")
    assert len(trained) == 2

    indoor = here.full_model("indoor", "sft")  # git holds the main run's weights alone
    assert len(trained) == 3 and (indoor / "config.json").is_file()
    assert sorted(p.name for p in (results / "models" / "sft_indoor").iterdir()) == [
        reasoner.FULL_MODEL_RECORD, "provenance.json"
    ]


def test_an_unfinished_lora_run_s_latest_checkpoint_is_kept_and_resumed_on_a_fresh_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reasoner.py keeps each GRPO checkpoint as it is saved (replacing the one before); a fresh OUT gets the
    latest back as checkpoint-N, a run directory with its own checkpoint keeps it, another key restores
    nothing, and a finished run drops it."""
    reasoner = _load("reasoner", monkeypatch)
    kept_module = sys.modules["kept"]
    key = kept_module.StageKey(inputs={"data": "d1"}, code={"trainer": ["c1"]})
    results = tmp_path / "results"

    def checkpoint(run_dir: Path, step: int) -> Path:
        path = run_dir / f"checkpoint-{step}"
        path.mkdir(parents=True)
        (path / "adapter_model.safetensors").write_bytes(bytes([step]) * 64)
        (path / "optimizer.pt").write_bytes(bytes([step + 1]) * 128)
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        return path

    here = kept_module.KeptResults(results, tmp_path / "here")
    carried = reasoner.KeptCheckpoint(here, "grpo_all", key)
    saving = carried.callback()
    run_dir = tmp_path / "here" / "runs" / "grpo_all"
    args = type("Args", (), {"output_dir": str(run_dir)})()
    for step in (4, 8):
        checkpoint(run_dir, step)
        saving.on_save(args, type("State", (), {"global_step": step})(), None)
    kept_dir = results / reasoner.CHECKPOINTS / "grpo_all"
    assert json.loads((kept_dir / "trainer_state.json").read_text())["global_step"] == 8
    assert (kept_dir / "optimizer.pt").read_bytes() == bytes([9]) * 128

    fresh = reasoner.KeptCheckpoint(kept_module.KeptResults(results, tmp_path / "fresh"), "grpo_all", key)
    fresh_run = tmp_path / "fresh" / "runs" / "grpo_all"
    restored = fresh.restore_into(fresh_run)
    assert restored == fresh_run / "checkpoint-8"
    assert sorted(p.name for p in restored.iterdir()) == ["adapter_model.safetensors", "optimizer.pt",
                                                          "trainer_state.json"]  # fmt: skip
    assert (restored / "adapter_model.safetensors").read_bytes() == bytes([8]) * 64

    own = tmp_path / "own" / "runs" / "grpo_all"  # a run directory with a checkpoint of its own keeps it
    checkpoint(own, 12)
    assert reasoner.KeptCheckpoint(here, "grpo_all", key).restore_into(own) == own / "checkpoint-12"
    other = kept_module.StageKey(inputs={"data": "d2"}, code={"trainer": ["c1"]})
    elsewhere = reasoner.KeptCheckpoint(kept_module.KeptResults(results, tmp_path / "x"), "grpo_all", other)
    assert elsewhere.restore_into(tmp_path / "x" / "runs" / "grpo_all") is None
    here.drop(reasoner.CHECKPOINTS, "grpo_all")
    assert not kept_dir.exists()


def test_a_prepared_scene_set_is_kept_and_a_fresh_machine_reads_it_back_without_rendering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reasoner.py keeps each prepared scene set (synth then prepare) as its text files with the bag paths
    written as ``<out>/...``; another OUT (a fresh machine's) gets the same rows back, its own paths in them
    and parquet files that hold them, without running synth or prepare, and equal data identities (so
    every later kept result stays valid). Other command lines (another scene size) build their own."""
    import argparse

    reasoner = _load("reasoner", monkeypatch)
    steps = sys.modules["steps"]
    ran: list[str] = []
    real_cli = reasoner.cli
    monkeypatch.setattr(reasoner, "cli", lambda command: (ran.append(command[0]), real_cli(command)))
    args = argparse.Namespace(train_scenes=1, test_scenes=1, size="160x120", duration=8.0, max_keyframes=8,
                              train_questions_per_task=1, missions=False, list_repeats=1)  # fmt: skip
    results = tmp_path / "results"

    def build(out: Path, arguments: argparse.Namespace = args) -> dict[str, Path]:
        kept = sys.modules["kept"].KeptResults(results, out)
        return reasoner.build_data(out, arguments, steps.Stages(out), kept, steps.Identities(out))

    here = build(tmp_path / "here")
    assert ran.count("synth") == 4 and ran.count("prepare") == 4
    kept_rows = (results / "data" / "train_indoor" / "train.jsonl").read_text()
    assert str(tmp_path / "here") not in kept_rows and '"<out>/synth/train_indoor/' in kept_rows

    ran.clear()
    fresh = build(tmp_path / "fresh")
    assert ran == []  # read back, nothing rendered
    assert not (tmp_path / "fresh" / "synth").exists()
    from datasets import Dataset

    for name in ("train_indoor", "test_outdoor", "train_all", "test_all"):
        split = "train" if name.startswith("train") else "test"
        lines = (fresh[name] / f"{split}.jsonl").read_text()
        assert lines == (here[name] / f"{split}.jsonl").read_text().replace(
            str(tmp_path / "here"), str(tmp_path / "fresh")
        )
        rows = [json.loads(line) for line in lines.splitlines()]
        assert rows and Dataset.from_parquet(str(fresh[name] / f"{split}.parquet")).to_list() == rows
        assert steps.Identities(tmp_path / "fresh").split(fresh[name], split) == steps.Identities(
            tmp_path / "here"
        ).split(here[name], split)

    build(tmp_path / "other", argparse.Namespace(**{**vars(args), "size": "128x96"}))
    assert ran.count("synth") == 4
