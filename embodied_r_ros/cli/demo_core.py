"""``embodied-r demo --core``: the core pipeline in-process on a short synthetic clip, printed step by step.

No ROS involved: frames -> streaming key frames -> one batched VLM call -> LM -> parsed answer. Without
``--vlm``/``--lm`` it builds (or reuses) the tiny random-weight smoke models, so it runs anywhere in
seconds; with real model paths the same flow gives real answers.
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from ..config import PipelineConfig, model_config
from ..keyframes import StreamingKeyFrameSelector
from ..reasoning.prompts import letter_options
from ..testing.synthetic_clip import synthetic_clip
from .parts import load_pipeline

DEFAULT_QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Which way did I turn while walking?", ("left", "right", "I did not turn", "I turned around twice")),
    ("How far did I walk?", ()),
)


def _pipeline_config(args: argparse.Namespace, console: Console) -> tuple[PipelineConfig, bool]:
    """The models to use, and whether they are the random-weight smoke models."""
    smoke = not (args.vlm and args.lm)
    vlm, lm = args.vlm, args.lm
    if smoke:
        from ..testing.tiny_models import ensure_tiny_models

        models_dir = ensure_tiny_models()
        vlm = vlm or str(models_dir / "vlm")
        lm = lm or str(models_dir / "lm")
    common = dict(device=args.device, max_new_tokens=args.max_new_tokens or 48)
    return PipelineConfig(vlm=model_config(vlm, **common), lm=model_config(lm, **common)), smoke


def run_core_demo(args: argparse.Namespace) -> int:
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
    clip = synthetic_clip(seconds=args.duration)
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
    pipeline = load_pipeline(config)
    try:
        for question, options in DEFAULT_QUESTIONS:
            answer = pipeline.answer(question, options, keyframes=keyframes)
            console.rule(f"[bold]{question}")
            if options:
                console.print("options: " + "  ".join(letter_options(options)))
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
