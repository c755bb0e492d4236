"""``embodied-r demo``: a synthetic scene, the node, the bag played to it, its questions asked over ROS.

    embodied-r demo [--lm M | --lm-params FILE] [--out out/demo] [--questions 6] [--rate 2]
    embodied-r demo --perception vlm --vlm M --lm M   # a real VLM instead of ground-truth perception
    embodied-r demo --smoke     # tiny random-weight VLM and LM (every code path, meaningless answers)
    embodied-r demo --core      # the core pipeline in-process, no ROS (see demo_core.py)

1. ``embodied-r synth`` renders one scene (a rosbag2, its ground-truth questions and ``scene.json``);
2. ``embodied-r run`` starts the ``embodied_r`` node. By default its reasoner is the best one this machine
   trained: the 8-bit GGUF of SmolLM2-135M-Instruct that ``training/experiments/reasoner.py`` ships in
   ``results/reasoner/models/shipped`` (its best held-out model), else SmolLM2 with the LoRA adapters that
   experiment kept in ``results/reasoner/models`` (SFT on oracle reasoning traces, then GRPO, whichever
   scored best held out; the SFT adapter merged into SmolLM2 once, into .cache/models/reasoner), or the
   model of ``--lm`` / ``--lm-params`` when given, else SmolLM2-135M-Instruct as pretrained. Its
   perception is simulator ground truth (``perception.perceiver: ground_truth`` reading the scene's
   ``scene.json``): a measuring instrument that says what a perfect VLM would say, because no VLM weights
   can be installed offline.
   Both are named in the banner and the report;
3. ``embodied-r play`` publishes the bag's camera and odometry to it;
4. the scene's questions go to the node's ``~/ask`` service; each answer is printed with its reasoning,
   next to its ground truth and to what the oracle (reading only the prompt) and the blind options-only
   reader answer, with the scores at the end; ``OUT/report.html`` shows the key frames, descriptions,
   reasoning, the yardstick's answers and latencies.

Each step is the same command a user runs by hand, in its own process, so the messages really cross DDS;
the scene, its ground-truth perception and the yardstick come from the training package's commands and
entry points (``embodied-r demo --core`` runs without it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

DEMO_SEED = 0
# Where `embodied-r synth --out OUT` writes its first scene (bag, questions.jsonl, scene.json, preview.png).
SCENE_DIR = "scene_0000"
# What training/experiments/reasoner.py keeps (committed): adapters and held-out evaluations.
KEPT_REASONERS = Path("results/reasoner")
# Where the demo merges the kept SFT adapter into SmolLM2 (a few seconds, once).
REASONER_DIR = Path(".cache/models/reasoner")
# The one full model the experiment ships (an 8-bit GGUF of its best held-out reasoner) and its record.
SHIPPED = Path("models") / "shipped"
SHIPPED_RECORD = "shipped.json"
GROUND_TRUTH_NOTE = (
    "Perception: GROUND-TRUTH PERCEPTION from the simulator's geometry ({scene}), a measuring instrument "
    "that says what a perfect VLM would say; it is NOT a VLM (none can be installed offline here)."
)
SMOKE_BANNER = (
    "SMOKE RUN with RANDOM-WEIGHT tiny models: the node, DDS, key frames, the batched VLM call, the LM and\n"
    "the parsing are all real, but the descriptions and answers are noise. For real answers:\n"
    "make demo VLM=Qwen/Qwen2.5-VL-7B-Instruct LM=Qwen/Qwen2.5-3B-Instruct (models on disk, a GPU helps)."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r demo``."""
    parser = subparsers.add_parser(
        "demo", help="synthetic scene -> node -> bag -> questions over the service -> answers and HTML report"
    )
    parser.set_defaults(func=run_demo)
    parser.add_argument(
        "--core", action="store_true", help="run the core pipeline in-process instead (no ROS)"
    )
    parser.add_argument(
        "--perception",
        choices=["ground-truth", "vlm"],
        default=None,
        help="ground-truth: the simulator's geometry (the default without --vlm); vlm: the VLM of --vlm",
    )
    parser.add_argument("--vlm", default="", help="VLM repo id or directory (implies --perception vlm)")
    parser.add_argument(
        "--lm",
        default="",
        help="reasoning LM, repo id or directory (default: the best reasoner kept in results/reasoner, "
        "else SmolLM2-135M-Instruct as pretrained)",
    )
    parser.add_argument(
        "--lm-params",
        type=Path,
        default=None,
        help="node parameters of a trained reasoner: final/node_params.yaml of an embodied-r train run",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny random-weight VLM and LM: all code paths, noise answers"
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")
    parser.add_argument(
        "--out", type=Path, default=Path("out/demo"), help="scene, answers and report go here"
    )
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of synthetic video")
    parser.add_argument("--size", default="320x240", metavar="WxH", help="synthetic camera size (320x240)")
    parser.add_argument("--rate", type=float, default=2.0, help="bag playback speed (1 = real time)")
    parser.add_argument(
        "--questions", type=int, default=0, help="how many of the scene's questions to ask (0: all)"
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=0, help="per model call (0: 48 for smoke models, else 256)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each answer")


def pick_questions(path: Path, count: int) -> list[dict]:
    """The scene's questions (``count`` > 0: up to that many, one per task type first, in file order).
    Each is asked about its own interval of the bag (``start_ns``/``end_ns``, see ``embodied-r ask``)."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if count <= 0:
        return records
    picked, tasks = [], set()
    for record in records:  # one per task first, for variety
        if record["task"] not in tasks and len(picked) < count:
            picked.append(record)
            tasks.add(record["task"])
    for record in records:
        if record not in picked and len(picked) < count:
            picked.append(record)
    return picked


def default_smollm2_dir() -> Path:
    """The converted SmolLM2: ``$EMBODIED_R_SMOLLM2`` (set by make), else .cache/models/smollm2."""
    return Path(os.environ.get("EMBODIED_R_SMOLLM2") or Path(".cache") / "models" / "smollm2")


def kept_reasoner(root: Path = KEPT_REASONERS) -> tuple[str, dict[str, float]] | None:
    """The best reasoner ``training/experiments/reasoner.py`` kept in ``root`` (its adapters in
    ``models/``, its held-out evaluations in ``eval/``): "grpo" or "sft", by the mean over task/form
    groups, with the held-out scores of it, the oracle and the options-only reader; None when none is kept."""
    scores: dict[str, float] = {}
    for name in ("sft", "grpo", "oracle", "options_only"):
        metrics = root / "eval" / name / "metrics.json"
        if metrics.is_file():
            scores[name] = float(json.loads(metrics.read_text())["overall"]["task_mean"])
    kept = [m for m in ("sft", "grpo") if m in scores and (root / "models" / f"{m}_all").is_dir()]
    if "sft" not in kept:  # GRPO's base is the SFT model
        return None
    return max(kept, key=lambda m: (scores[m], m == "grpo")), scores


def shipped_reasoner(root: Path = KEPT_REASONERS) -> tuple[Path, Path | None, dict] | None:
    """The reasoner ``training/experiments/reasoner.py`` ships in ``root/models/shipped``: its GGUF file, the
    LoRA adapter applied on it (None: none) and its record (``label``: how it was trained, ``scores``:
    held-out MC accuracy and numeric MRA of it, the oracle and the blind rows); None when there is none (or
    a file it names is missing). ``file`` and ``adapter`` are relative to the record: kept models are named
    there (``../sft_all/model-q8_0.gguf``, ``../grpo_all``) rather than copied."""
    record_file = root / SHIPPED / SHIPPED_RECORD
    if not record_file.is_file():
        return None
    record = json.loads(record_file.read_text(encoding="utf-8"))
    model = (root / SHIPPED / str(record.get("file", ""))).resolve()
    adapter = (root / SHIPPED / record["adapter"]).resolve() if record.get("adapter") else None
    if not record.get("file") or not model.is_file():
        return None
    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        return None
    return model, adapter, record


def shipped_flags(model: Path, adapter: Path | None, record: dict) -> list[str]:
    """The node flags that load a shipped reasoner: its model, its adapter, and the decoding settings it was
    evaluated with (``settings``: e.g. ``lm.transformers.calculator: true``), so the demo runs the model as
    its held-out scores were measured."""
    flags = ["--lm", str(model)]
    if adapter is not None:
        flags += ["--set", f"lm.transformers.adapter={adapter}"]
    for name, value in sorted(record.get("settings", {}).items()):
        flags += ["--set", f"{name}={json.dumps(value)}"]
    return flags


def _held_out(scores: dict[str, dict[str, float]]) -> str:
    """ "reasoner 52.1 / 61.0, oracle 100.0 / 100.0, ...": MC accuracy / numeric MRA, percent."""
    return ", ".join(f"{name} {100 * s['mc']:.1f} / {100 * s['numeric']:.1f}" for name, s in scores.items())


def reasoner(args: argparse.Namespace) -> tuple[list[str], str]:
    """The node flags that load the reasoning LM, and its name for the banner and the report: ``--lm``,
    else ``--lm-params``, else the best kept reasoner (:func:`kept_reasoner`), else the pretrained
    SmolLM2."""
    if args.lm:
        return ["--lm", args.lm], f"Reasoner: {args.lm}."
    if args.lm_params is not None:
        import yaml

        lm = yaml.safe_load(args.lm_params.read_text())["/**/embodied_r"]["ros__parameters"]["lm"]
        adapter = lm.get("transformers", {}).get("adapter")
        trained = f"{lm['model']}" + (f" + adapter {adapter}" if adapter else "")
        return ["--params-file", str(args.lm_params)], f"Reasoner: trained with embodied-r train ({trained})."
    shipped = shipped_reasoner()
    if shipped is not None:
        model, adapter, record = shipped
        flags = shipped_flags(model, adapter, record)
        return flags, (
            f"Reasoner: SmolLM2-135M-Instruct after {record['label']}, the best held-out model, as an 8-bit "
            f"GGUF ({model}{f' + LoRA adapter {adapter}' if adapter else ''}); held out, MC accuracy / "
            f"numeric MRA %: {_held_out(record['scores'])}."
        )
    from ..backends.smollm2 import ensure_smollm2

    path = ensure_smollm2(default_smollm2_dir())
    best = kept_reasoner()
    if best is None:
        return ["--lm", str(path)], f"Reasoner: SmolLM2-135M-Instruct, pretrained, not trained here ({path})."
    from ..backends.merge import merge_adapter

    method, scores = best
    merged = merge_adapter(path, KEPT_REASONERS / "models" / "sft_all", REASONER_DIR)
    flags, name = ["--lm", str(merged)], "SFT on oracle reasoning traces"
    if method == "grpo":
        flags += ["--set", f"lm.transformers.adapter={KEPT_REASONERS / 'models' / 'grpo_all'}"]
        name += ", then GRPO"
    held_out = ", ".join(f"{k.replace('_', '-')} {100 * v:.1f}" for k, v in scores.items())
    return flags, (
        f"Reasoner: SmolLM2-135M-Instruct after {name} (adapters in {KEPT_REASONERS / 'models'}; "
        f"held-out mean over tasks, %: {held_out})."
    )


def _command() -> list[str]:
    """How to start ``embodied-r`` itself in a child process."""
    installed = shutil.which("embodied-r")
    return [installed] if installed else [sys.executable, "-m", "embodied_r_ros.cli.main"]


def run_demo(args: argparse.Namespace) -> int:
    """Run the whole demo; returns 0 when every question got an answer."""
    if args.core:
        from .demo_core import run_core_demo

        return run_core_demo(args)
    from ..testing.tiny_models import default_tiny_models_dir

    smoke = args.smoke
    args.perception = args.perception or ("vlm" if args.vlm else "ground-truth")
    if args.perception == "vlm" and not smoke and not args.vlm:
        print("embodied-r demo: error: --perception vlm needs --vlm MODEL (or --smoke)", file=sys.stderr)
        return 2
    if smoke:
        print("=" * 100 + "\n" + SMOKE_BANNER + "\n" + "=" * 100, flush=True)
    out = args.out
    scene_dir = out / SCENE_DIR
    if scene_dir.exists():
        shutil.rmtree(scene_dir)  # the demo's own output from an earlier run
    print(f"[1/4] rendering a synthetic scene into {out} ...", flush=True)
    synth_cmd = [*_command(), "synth", "--out", str(out), "--seed", str(DEMO_SEED), "--size", args.size]
    synth_cmd += ["--duration", str(args.duration), "--preview"]
    synth = subprocess.run(synth_cmd, stdout=subprocess.PIPE, text=True, check=False)  # errors pass through
    if synth.returncode != 0:
        print(
            f"embodied-r demo: error: rendering the scene failed (exit {synth.returncode}); "
            "`embodied-r demo --core` runs without the training package",
            file=sys.stderr,
        )
        return 2
    questions = pick_questions(scene_dir / "questions.jsonl", args.questions)
    asked = out / "demo_questions.jsonl"
    asked.write_text("".join(json.dumps(q) + "\n" for q in questions))
    print(f"      {scene_dir / 'bag'}, {len(questions)} questions, preview {scene_dir / 'preview.png'}")

    node_cmd = [*_command(), "run", "--device", args.device]
    node_cmd += ["--set", f"query.window_s={args.duration + 1.0}", "--set", "camera.qos=reliable"]
    node_cmd += ["--max-new-tokens", str(args.max_new_tokens or (48 if smoke else 256))]
    banner = SMOKE_BANNER.replace("\n", " ")
    if smoke:
        node_cmd += ["--tiny-models", str(default_tiny_models_dir())]
    else:
        lm_flags, banner = reasoner(args)
        node_cmd += lm_flags
        if args.perception == "vlm":
            node_cmd += ["--vlm", args.vlm]
            banner += f" Perception: the VLM {args.vlm}."
        else:
            scene = scene_dir / "scene.json"
            node_cmd += ["--set", "perception.perceiver=ground_truth", "--set", f"perception.scene={scene}"]
            banner += " " + GROUND_TRUTH_NOTE.format(scene=scene)
        print("=" * 100 + "\n" + banner + "\n" + "=" * 100, flush=True)
    print("[2/4] starting the node: " + " ".join(node_cmd), flush=True)
    node = subprocess.Popen(node_cmd, start_new_session=True)
    try:
        print(f"[3/4] playing the bag at {args.rate:g}x ...", flush=True)
        play = subprocess.run(
            [
                *_command(),
                "play",
                str(scene_dir / "bag"),
                "--rate",
                str(args.rate),
                "--wait-subscribers",
                "120",
                "--topics",
                "/camera/image_raw",
                "/odom",
            ],
            check=False,
        )
        if play.returncode != 0:
            print(f"embodied-r demo: error: playing the bag failed (exit {play.returncode})", file=sys.stderr)
            return 1
        if node.poll() is not None:
            print(f"embodied-r demo: error: the node exited (code {node.returncode})", file=sys.stderr)
            return 1
        report = out / "report.html"
        print(f"[4/4] asking {len(questions)} questions over the ~/ask service ...", flush=True)
        ask_cmd = [*_command(), "ask", "--questions", str(asked), "--report", str(report), "--wait", "120"]
        ask_cmd += ["--timeout", str(args.timeout), "--banner", banner]
        answered = subprocess.run(ask_cmd, check=False)
        if smoke:
            print("Reminder: random-weight smoke models; the answers above are not meaningful.")
        return answered.returncode
    finally:
        _stop(node)


def _stop(process: subprocess.Popen) -> None:
    """Stop a child started in its own session (SIGINT first, as Ctrl-C would)."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    deadline = time.monotonic() + 10.0
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
