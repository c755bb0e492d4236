"""``embodied-r ask``: ask a running ``embodied_r`` node a question and print the answer and its evidence.

    embodied-r ask "Which way did I turn?" --options left right [--window 30] [--action | --topic]
    embodied-r ask "Where was the door?" --start 1700000002.5 --end 2026-12-01T10:05:00+00:00
    embodied-r ask --questions questions.jsonl --report answers.html

Uses the node's ``~/ask`` service (or, with ``--action``, its ``~/answer`` action, printing the stages as
they come; with ``--topic``, its ``~/question`` topic, the answer taken from ``~/answers``) through
:class:`~embodied_r_ros.ros.spatial_client.SpatialClient`. Prints the answer, the reasoning and the
key-frame stamps. ``--questions`` reads a file of questions
(:mod:`embodied_r_ros.question_file`: JSON lines, a JSON list or YAML; keys ``question``, optional
``options``, ``answer`` or ``ground_truth``, ``window_s``, ``start_ns``/``end_ns`` (camera stamps), ``id``:
the lines ``embodied-r synth`` writes work as they are, each asked about its own interval of the bag) and
prints each answer next to its ground truth. ``--start``/``--end`` ask about an interval of camera time
(seconds since the epoch, as in the images' stamps, or an ISO 8601 time) instead of the last ``--window``
seconds. ``--report`` collects the key frames the node publishes on ``~/keyframes`` and writes the HTML
report.

Exit code: 0 when every question was answered, 1 when one was not (busy, timeout, no frames, a node that
is not active: the message names its state and the transition to make ...), 2 when no node answers.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ..question_file import Question, read_questions
from ..reasoning.prompts import letter_options
from ..reasoning.yardstick import YardstickAnswers, installed_yardstick
from ..ros.spatial_client import DEFAULT_NODE, AskResult, NodeNotFoundError, SpatialClient

# The node publishes an answer's key frames before it answers, but on a loaded machine they can arrive
# seconds later; the wait ends as soon as all are there.
IMAGE_WAIT_S = 20.0


def describe(
    result: AskResult, question: Question, score: float | None, yardstick: YardstickAnswers | None = None
) -> str:
    """The printed account of one answer (with the oracle's and the blind reader's, when given)."""
    from ..ros.messages import format_stamps, keyframe_stamps_ns

    lines = [f"question: {question.question}"]
    if question.options:
        lines.append("options:  " + "   ".join(letter_options(question.options)))
    if not result.success:
        lines.append(f"NO ANSWER: {result.message}")
    else:
        answer = result.answer
        value = "" if math.isnan(answer.value) else f"{answer.value:g}"
        shown = answer.choice or value or "(unreadable)"
        lines.append(
            f"answer:   {shown}   <answer>{answer.answer}</answer>  well formed: {answer.well_formed}"
        )
        lines.append(f"reasoning: {answer.reasoning or '(none)'}")
        stamps = keyframe_stamps_ns(answer)
        lines.append(f"key frames ({len(stamps)}): {format_stamps(stamps)}")
        if answer.keyframe_cameras:
            lines.append(f"cameras:  {' '.join(answer.keyframe_cameras)}")
        lines.append(
            f"latency:  perception {answer.perception_seconds:.2f} s, reasoning "
            f"{answer.reasoning_seconds:.2f} s, round trip {result.round_trip_s:.2f} s"
        )
    if question.ground_truth is not None:
        verdict = (
            ""
            if score is None
            else (
                f"  score {score:.2f}" if not question.options else ("  correct" if score == 1 else "  wrong")
            )
        )
        lines.append(f"ground truth: {question.ground_truth}{verdict}")
    if yardstick is not None:
        oracle = yardstick.oracle or "(the prompt does not determine it)"
        lines.append(f"oracle (reads only the prompt): {oracle}   {yardstick.oracle_reasoning}".rstrip())
        if question.options:
            lines.append(f"options only (blind reader): {yardstick.options_only}")
    return "\n".join(lines)


def _as_json(result: AskResult, question: Question, score: float | None) -> str:
    from ..ros.messages import keyframe_stamps_ns

    answer = result.answer
    record = {
        "id": question.id,
        "question": question.question,
        "options": list(question.options),
        "success": result.success,
        "message": result.message,
        "answer": answer.answer,
        "choice": answer.choice,
        "value": None if math.isnan(answer.value) else answer.value,
        "reasoning": answer.reasoning,
        "well_formed": answer.well_formed,
        "keyframe_stamps_ns": keyframe_stamps_ns(answer),
        "keyframe_descriptions": list(answer.keyframe_descriptions),
        "keyframe_cameras": list(answer.keyframe_cameras),
        "perception_s": answer.perception_seconds,
        "reasoning_s": answer.reasoning_seconds,
        "round_trip_s": result.round_trip_s,
        "ground_truth": question.ground_truth,
        "score": score,
    }
    return json.dumps(record)


def parse_stamp(text: str) -> int:
    """A camera stamp from the command line: seconds since the epoch (``1700000002.5``, as in the images'
    headers) or an ISO 8601 time (``2026-12-01T10:05:00+00:00``; without a zone: this machine's), in ns."""
    from datetime import datetime

    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = datetime.fromisoformat(text).timestamp()
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a stamp: give seconds since the epoch (e.g. 1700000002.5) or an ISO 8601 "
                "time (e.g. 2026-12-01T10:05:00+00:00)"
            ) from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a stamp: it must be a time after 1970")
    return round(seconds * 1e9)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r ask``."""
    parser = subparsers.add_parser("ask", help="ask the running embodied_r node a spatial question")
    parser.set_defaults(func=run_ask)
    parser.add_argument("question", nargs="?", default="", help="the question (or use --questions)")
    parser.add_argument("--options", nargs="*", default=[], help="multiple-choice options, without letters")
    parser.add_argument(
        "--window", type=float, default=0.0, help="seconds of history (0: the node's default)"
    )
    parser.add_argument(
        "--start",
        type=parse_stamp,
        default=0,
        help="ask about camera time from this stamp (epoch seconds or ISO 8601)",
    )
    parser.add_argument(
        "--end", type=parse_stamp, default=0, help="... to this stamp (alone: the --window seconds before it)"
    )
    parser.add_argument("--questions", type=Path, help="file of questions (JSON lines, JSON or YAML)")
    parser.add_argument(
        "--camera",
        default="",
        help="a node with several cameras (parameter cameras): answer from this one (default: all of them)",
    )
    parser.add_argument("--node", default=DEFAULT_NODE, help=f"the node's full name (default {DEFAULT_NODE})")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument(
        "--action", action="store_true", help="use the ~/answer action and print its stages"
    )
    transport.add_argument(
        "--topic", action="store_true", help="publish on ~/question and take the answer from ~/answers"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each answer")
    parser.add_argument("--wait", type=float, default=10.0, help="seconds to wait for the node to appear")
    parser.add_argument("--json", action="store_true", help="print one JSON object per answer")
    parser.add_argument("--report", type=Path, help="write an HTML report with the key frames to this file")
    parser.add_argument("--banner", default="", help="a note at the top of the report")


def run_ask(args: argparse.Namespace) -> int:
    """Ask the questions given on the command line or in --questions; see the module docstring."""
    from .report import entry_from_answer, grade, score_summary, write_report

    try:
        if args.questions:
            questions = read_questions(args.questions)
        elif args.question.strip():
            questions = [
                Question(
                    args.question,
                    tuple(args.options),
                    window_s=args.window,
                    start_ns=args.start,
                    end_ns=args.end,
                )
            ]
        else:
            raise ValueError("give a question or --questions FILE")
    except (OSError, ValueError) as exc:  # json/yaml errors are ValueErrors too
        print(f"embodied-r ask: error: {exc}", file=sys.stderr)
        return 2
    client = SpatialClient(args.node, collect_images=args.report is not None)
    try:
        try:
            client.wait_for_node(args.wait, action=args.action, topic=args.topic)
        except NodeNotFoundError as exc:
            print(f"embodied-r ask: error: {exc}", file=sys.stderr)
            return 2
        entries, failures = [], 0
        yardstick = installed_yardstick() if any(q.ground_truth is not None for q in questions) else None
        for question in questions:

            def feedback(stage: str, progress: float) -> None:
                if not args.json:
                    print(f"  [{progress:4.0%}] {stage}", flush=True)

            result = client.ask(
                question.question,
                question.options,
                question.window_s or args.window,
                use_action=args.action,
                use_topic=args.topic,
                timeout_s=args.timeout,
                on_feedback=feedback,
                image_wait_s=IMAGE_WAIT_S if args.report else 0.0,
                interval_ns=(question.start_ns or args.start, question.end_ns or args.end),
                camera=args.camera,
            )
            failures += not result.success
            answer = result.answer
            value = None if math.isnan(answer.value) else answer.value
            score = (
                grade(question.options, answer.choice, value, question.ground_truth)
                if result.success
                else None
            )
            # Beside a graded answer, what the prompt allows (oracle) and what the options alone give.
            beside = None
            if yardstick is not None and result.success and question.ground_truth is not None:
                descriptions = list(answer.keyframe_descriptions)
                beside = yardstick(descriptions, question.question, question.options)
            print(
                _as_json(result, question, score)
                if args.json
                else describe(result, question, score, beside) + "\n",
                flush=True,
            )
            entry = entry_from_answer(
                answer,
                images=result.images,
                success=result.success,
                message=result.message,
                ground_truth=question.ground_truth,
                round_trip_s=result.round_trip_s,
            )
            entry.question, entry.options = question.question, list(question.options)
            entry.yardstick = beside
            entries.append(entry)
        if len(questions) > 1 and not args.json:
            print(f"Scores: {score_summary(entries)}.", flush=True)
        if args.report:
            path = write_report(args.report, entries, banner=args.banner)
            if not args.json:
                print(f"report: {path}")
        return 1 if failures else 0
    finally:
        client.close()
