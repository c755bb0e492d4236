"""``embodied-r demo``: the core pipeline on a short synthetic clip, printed step by step.

Without ``--vlm``/``--lm`` it builds (or reuses) the tiny random-weight smoke models, so it runs anywhere
in seconds; with real model paths the same flow gives real answers.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from .config import ModelConfig, PipelineConfig
from .keyframes import StreamingKeyFrameSelector
from .pipeline import EmbodiedR
from .synthetic_clip import synthetic_clip

DEFAULT_QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Which way did I turn while walking?", ("left", "right", "I did not turn", "I turned around twice")),
    ("How far did I walk?", ()),
)


def default_tiny_models_dir() -> Path:
    """Where the tiny smoke models live: $EMBODIED_R_TINY_MODELS, else ~/.cache/embodied_r_ros/tiny-models."""
    env = os.environ.get("EMBODIED_R_TINY_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "embodied_r_ros" / "tiny-models"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r demo``."""
    parser = subparsers.add_parser(
        "demo", help="answer questions about a synthetic clip with the core pipeline"
    )
    parser.set_defaults(func=run_demo)
    parser.add_argument("--vlm", default="", help="VLM repo id or directory (default: tiny smoke model)")
    parser.add_argument("--lm", default="", help="LM repo id or directory (default: tiny smoke model)")
    parser.add_argument(
        "--models-dir", type=Path, default=None, help="where the tiny models are built/reused"
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    parser.add_argument("--seconds", type=float, default=12.0, help="length of the synthetic clip")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="per model call (tiny models ramble)")


def _pipeline_config(args: argparse.Namespace, console: Console) -> tuple[PipelineConfig, bool]:
    """The models to use, and whether they are the random-weight smoke models."""
    smoke = not (args.vlm and args.lm)
    vlm, lm = args.vlm, args.lm
    if smoke:
        from .backends.tiny_models import build_tiny_models, tiny_models_complete

        models_dir = args.models_dir or default_tiny_models_dir()
        if not tiny_models_complete(models_dir, seed=0):
            console.print(f"building the tiny smoke models in {models_dir} ...")
            build_tiny_models(models_dir)
        vlm = vlm or str(models_dir / "vlm")
        lm = lm or str(models_dir / "lm")
    common = dict(device=args.device, dtype=args.dtype, max_new_tokens=args.max_new_tokens)
    return PipelineConfig(vlm=ModelConfig(model=vlm, **common), lm=ModelConfig(model=lm, **common)), smoke


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo and print key frames, descriptions, reasoning and answers."""
    console = Console()
    config, smoke = _pipeline_config(args, console)
    if smoke:
        console.print(
            Panel(
                "SMOKE RUN with RANDOM-WEIGHT tiny models: every stage below is real code on real model\n"
                "calls, but the descriptions and answers are noise. Pass --vlm and --lm\n"
                "(or `make demo VLM=... LM=...`) for real answers.",
                title="embodied-r demo",
                style="bold yellow",
            )
        )
    clip = synthetic_clip(seconds=args.seconds)
    console.print(
        f"synthetic clip: {len(clip)} frames, {clip.duration_s:.1f} s, "
        f"{clip.frames[0].width}x{clip.frames[0].height}, poses from odometry"
    )

    # Stream the frames as the node does, then take the key frames of the whole clip.
    selector = StreamingKeyFrameSelector(config.keyframes)
    for frame in clip.frames:
        selector.push(frame)
    keyframes = selector.keyframes_in_window(clip.frames[0].stamp_ns, clip.frames[-1].stamp_ns)
    table = Table(title=f"{len(keyframes)} key frames")
    for column in ("#", "t (s)", "candidate", "position (m)", "yaw (deg)"):
        table.add_column(column)
    import math

    for j, keyframe in enumerate(keyframes):
        pose = keyframe.frame.pose
        x, y, _ = pose.position if pose else (math.nan, math.nan, 0.0)
        yaw = math.degrees(2 * math.atan2(pose.orientation[2], pose.orientation[3])) if pose else math.nan
        t = (keyframe.frame.stamp_ns - clip.frames[0].stamp_ns) / 1e9
        table.add_row(str(j), f"{t:.1f}", str(keyframe.index), f"({x:.2f}, {y:.2f})", f"{yaw:.0f}")
    console.print(table)

    console.print(f"loading VLM {config.vlm.model} and LM {config.lm.model} ...")
    pipeline = EmbodiedR.from_config(config)
    try:
        for question, options in DEFAULT_QUESTIONS:
            answer = pipeline.answer(question, options, keyframes=keyframes)
            console.rule(f"[bold]{question}")
            if options:
                console.print("options: " + "  ".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(options)))
            for description in answer.descriptions:
                console.print(
                    f"[cyan]frame {description.index}[/] "
                    f"[dim]({description.action_source})[/] {description.as_text()[:200]}"
                )
            console.print(f"[magenta]reasoning:[/] {answer.think[:400] or '(none)'}")
            shown = answer.choice or (f"{answer.value:g}" if answer.value is not None else answer.text[:80])
            console.print(f"[green]answer:[/] {shown or '(unreadable)'}   well formed: {answer.well_formed}")
            console.print(
                f"[dim]perception {answer.perception_s:.2f} s, reasoning {answer.reasoning_s:.2f} s[/]"
            )
    finally:
        pipeline.close()
    if smoke:
        console.print(
            "[yellow]Reminder: random-weight smoke models; the answers above are not meaningful.[/]"
        )
    return 0
