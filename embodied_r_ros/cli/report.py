"""A self-contained HTML report of answered questions: key frames, descriptions, reasoning, answers.

One file, no external resources: key frames are inline JPEG data URIs (downscaled to a thumbnail), so the
report can be mailed or attached to a CI run. Per question it shows the question and options, the answer
(letter or value) next to the ground truth when one is given and the score (1/0 for a choice, VSI-Bench's
mean relative accuracy for a number), the reasoning, every key frame with its stamp and its description,
and the latencies. ``embodied-r ask --report FILE`` writes one from the node's answers.
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import cv2
import numpy as np

from ..frames import NS_PER_S
from ..reasoning.answers import extract_choice, extract_number, mean_relative_accuracy
from ..reasoning.options import option_letter
from ..reasoning.yardstick import YardstickAnswers

THUMBNAIL_SIDE = 320


@dataclass
class ReportKeyFrame:
    """One key frame of an answer: its source stamp, its image (None when not received) and description."""

    stamp_ns: int
    image: np.ndarray | None
    description: str = ""


@dataclass
class ReportEntry:
    """One question and what the node made of it."""

    question: str
    options: list[str] = field(default_factory=list)
    success: bool = True
    message: str = ""  # why it failed, or the node's note
    answer: str = ""  # the text inside <answer>
    choice: str = ""
    value: float | None = None
    reasoning: str = ""
    well_formed: bool = False
    keyframes: list[ReportKeyFrame] = field(default_factory=list)
    ground_truth: str | None = None
    perception_s: float | None = None
    reasoning_s: float | None = None
    round_trip_s: float | None = None
    query_id: str = ""
    yardstick: YardstickAnswers | None = None  # the oracle's and the blind reader's answers, when graded


def entry_from_answer(
    answer: Any,
    *,
    images: dict[int, np.ndarray] | None = None,
    success: bool = True,
    message: str = "",
    ground_truth: Any = None,
    round_trip_s: float | None = None,
) -> ReportEntry:
    """A report entry from a SpatialAnswer-like message; ``images`` maps key-frame stamps (ns) to RGB."""
    images = images or {}
    stamps = [int(s.sec) * NS_PER_S + int(s.nanosec) for s in answer.keyframe_stamps]
    descriptions = list(answer.keyframe_descriptions) + [""] * len(stamps)
    value = float(answer.value)
    return ReportEntry(
        question=answer.question,
        options=list(answer.options),
        success=success,
        message=message,
        answer=answer.answer,
        choice=answer.choice,
        value=None if math.isnan(value) else value,
        reasoning=answer.reasoning,
        well_formed=bool(answer.well_formed),
        keyframes=[ReportKeyFrame(s, images.get(s), d) for s, d in zip(stamps, descriptions, strict=False)],
        ground_truth=None if ground_truth is None else str(ground_truth),
        perception_s=float(answer.perception_seconds) if success else None,
        reasoning_s=float(answer.reasoning_seconds) if success else None,
        round_trip_s=round_trip_s,
        query_id=answer.query_id,
    )


def grade(options: Sequence[str], choice: str, value: float | None, ground_truth: str | None) -> float | None:
    """The score of an answer against the ground truth: 1/0 for a choice (the truth may be a letter or an
    option's text), mean relative accuracy for a number; None without a (readable) ground truth."""
    if ground_truth is None or not str(ground_truth).strip():
        return None
    if options:
        truth = extract_choice(str(ground_truth), list(options))
        return None if truth is None else float(choice == truth)
    truth_value = extract_number(str(ground_truth))
    if truth_value is None or truth_value == 0:
        return None
    return mean_relative_accuracy(value, truth_value)


def _data_uri(image: np.ndarray) -> str:
    h, w = image.shape[:2]
    if max(h, w) > THUMBNAIL_SIDE:
        scale = THUMBNAIL_SIDE / max(h, w)
        image = cv2.resize(
            image, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA
        )
    ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 85])
    if not ok:
        return ""
    return "data:image/jpeg;base64," + base64.b64encode(jpeg.tobytes()).decode("ascii")


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def _entry_html(number: int, entry: ReportEntry) -> str:
    e = html.escape
    options = "".join(f"<li><b>{option_letter(i)}.</b> {e(o)}</li>" for i, o in enumerate(entry.options))
    shown = entry.choice or ("" if entry.value is None else f"{entry.value:g}") or entry.answer
    score = grade(entry.options, entry.choice, entry.value, entry.ground_truth)
    verdict = ""
    if score is not None:
        kind = "good" if score >= 0.5 else "bad"
        label = ("correct" if score == 1 else "wrong") if entry.options else f"MRA {score:.2f}"
        verdict = f' <span class="{kind}">{label}</span>'
    truth = f"<p><b>ground truth:</b> {e(entry.ground_truth)}{verdict}</p>" if entry.ground_truth else ""
    if not entry.success:
        body = f'<p class="bad"><b>no answer:</b> {e(entry.message)}</p>{truth}'
    else:
        frames = []
        for j, keyframe in enumerate(entry.keyframes):
            stamp = f"{keyframe.stamp_ns // NS_PER_S}.{keyframe.stamp_ns % NS_PER_S:09d}"
            picture = (
                f'<img src="{_data_uri(keyframe.image)}" alt="key frame {j}">'
                if keyframe.image is not None
                else '<div class="missing">image not received</div>'
            )
            frames.append(
                f"<figure>{picture}<figcaption><b>frame {j}</b> <code>{stamp}</code><br>"
                f"{e(keyframe.description)}</figcaption></figure>"
            )
        form = "well formed" if entry.well_formed else "not well formed"
        body = (
            f'<p><b>answer:</b> <span class="answer">{e(shown or "(unreadable)")}</span>'
            f" <small>({e(entry.answer)}; {form})</small></p>"
            f"{truth}{_yardstick_html(entry)}"
            f"<details open><summary>reasoning</summary><pre>{e(entry.reasoning or '(none)')}</pre></details>"
            f'<div class="frames">{"".join(frames)}</div>'
            f'<p class="times">perception {_seconds(entry.perception_s)}, reasoning '
            f"{_seconds(entry.reasoning_s)}, round trip {_seconds(entry.round_trip_s)}"
            f"{f' · query {e(entry.query_id)}' if entry.query_id else ''}</p>"
        )
    return f'<section><h2>{number}. {e(entry.question)}</h2><ol type="A">{options}</ol>{body}</section>'


def _yardstick_html(entry: ReportEntry) -> str:
    """The oracle's and the blind reader's answers beside the model's, each graded like it."""
    yardstick = entry.yardstick
    if yardstick is None:
        return ""
    e = html.escape
    rows = [("oracle (reads only the prompt)", yardstick.oracle, yardstick.oracle_reasoning)]
    if entry.options:
        rows.append(("options only (blind reader)", yardstick.options_only, ""))
    cells = []
    for label, answer, why in rows:
        score = _graded(entry, answer)
        mark = (
            ""
            if score is None
            else (
                ' <span class="good">&#10003;</span>'
                if score >= 0.5
                else ' <span class="bad">&#10007;</span>'
            )
        )
        cells.append(
            f"<tr><th>{e(label)}</th><td>{e(answer or '(cannot tell)')}{mark}</td><td>{e(why)}</td></tr>"
        )
    return f'<table class="yardstick">{"".join(cells)}</table>'


def _graded(entry: ReportEntry, answer: str | None) -> float | None:
    """An answer (a letter or a number, as text) graded against the entry's ground truth."""
    if answer is None:
        return None
    if entry.options:
        return grade(entry.options, answer, None, entry.ground_truth)
    return grade(entry.options, "", extract_number(answer), entry.ground_truth)


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
section{border-top:1px solid #ccc;padding:.5em 0 1em}
.banner{background:#fff3cd;border:1px solid #e0c060;padding:.6em 1em}
.frames{display:flex;flex-wrap:wrap;gap:10px}
figure{margin:0;width:240px;font-size:.8em}
figure img{width:240px;border:1px solid #999}
.missing{width:240px;height:60px;background:#eee;text-align:center;line-height:60px}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}
.good{color:#070;font-weight:bold}.bad{color:#a00;font-weight:bold}
.answer{font-size:1.2em;font-weight:bold}.times{color:#666;font-size:.85em}
.yardstick th{text-align:left;padding-right:1em;font-weight:normal;color:#555}.yardstick td{padding-right:1em}
"""


def score_summary(entries: Sequence[ReportEntry]) -> str:
    """One line: questions asked and answered, and the scores against ground truth (multiple-choice
    accuracy and numeric mean relative accuracy, each over the questions with a readable ground truth)."""
    summary = f"{len(entries)} questions, {sum(x.success for x in entries)} answered"
    for label, of_kind in (
        ("multiple-choice accuracy", [x for x in entries if x.options]),
        ("numeric MRA", [x for x in entries if not x.options]),
    ):
        scores = [grade(x.options, x.choice, x.value, x.ground_truth) for x in of_kind]
        scored = [score for score in scores if score is not None]
        if scored:
            summary += f"; {label} {sum(scored) / len(scored):.2f} over {len(scored)} with ground truth"
    beside = [x for x in entries if x.yardstick is not None]
    for label, answer_of in (
        ("oracle", lambda x: x.yardstick.oracle),
        ("options-only", lambda x: x.yardstick.options_only),
    ):
        scores = [_graded(x, answer_of(x)) for x in beside if x.options]
        if scores:
            right = sum(s or 0.0 for s in scores)
            summary += f"; {label} multiple-choice accuracy {right / len(scores):.2f}"
    return summary


def render_report(entries: Sequence[ReportEntry], title: str = "Embodied-R answers", banner: str = "") -> str:
    """The report as one HTML document (see the module docstring)."""
    summary = score_summary(entries)
    banner_html = f'<p class="banner">{html.escape(banner)}</p>' if banner else ""
    sections = "".join(_entry_html(i + 1, entry) for i, entry in enumerate(entries))
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{banner_html}"
        f"<p>{summary}</p>{sections}</body></html>\n"
    )


def write_report(
    path: str | Path, entries: Sequence[ReportEntry], title: str = "Embodied-R answers", banner: str = ""
) -> Path:
    """Write :func:`render_report` to ``path`` (parent folders are made); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(entries, title, banner), encoding="utf-8")
    return path
