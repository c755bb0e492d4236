"""Does a reasoner reason? Its held-out predictions checked against goals a blind guess cannot meet.

A reasoner that writes one letter to every question, or copies a number instead of combining two, can
still score near a blind reader. :func:`check_goals` reads one evaluated system beside the blind rows of the
same questions (:mod:`.compare`'s runs) and reports, each with its target and whether it is met:

* multiple choice overall, and per task (with enough questions) against the options-only reader;
* the share of the most frequent answer letter (a reasoner spreads its letters as the truths do);
* the agreement of the letter with the option the reasoning concludes (:func:`concluded_option`): the
  letter must follow from the think, not stand beside it;
* numeric MRA overall against the best blind row per task, and per task on the tasks whose answer combines
  values from more than one frame (where copying a number from the prompt cannot score).

Every figure is computed from the per-question scores; the blind side is chosen per task on the same
questions (it flatters the blind side, as in :mod:`.compare`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from embodied_r_ros.reasoning.answers import parse_completion
from embodied_r_ros.reasoning.conclusion import concluded_option

from .compare import MC, NUMERIC, Run, best_blind, best_blind_scores, task_key

# Tasks whose answer combines values from more than one key frame (the oracle adds, subtracts, multiplies).
COMBINING = ("abs_distance", "ego_distance", "ego_turn", "object_count", "room_size", "route", "ego_altitude")


@dataclass(frozen=True)
class Goals:
    """The targets (issue 42's): fractions, not percent."""

    mc_overall: float = 0.45
    mc_over_options_only: float = 0.10  # per MC task with at least ``min_task_questions``
    min_task_questions: int = 30
    max_letter_share: float = 0.40
    min_think_agreement: float = 0.95
    numeric_over_blind: float = 0.15  # overall, against each task's best blind row
    combining: tuple[str, ...] = COMBINING


@dataclass
class GoalCheck:
    """One goal: what is measured, the target, whether it is met."""

    goal: str
    measured: float | None
    target: float | None
    met: bool
    detail: dict[str, Any] = field(default_factory=dict)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def check_goals(
    system: Run,
    blind: Sequence[Run],
    options_only: Run,
    options: Mapping[str, Sequence[str]],
    goals: Goals = Goals(),
) -> list[GoalCheck]:
    """The goals of :class:`Goals` for ``system`` on its questions; ``blind``: the blind rows of the same
    questions (options-only among them), ``options``: each multiple-choice question's option texts by id."""
    predictions = system.predictions
    mc = sorted(i for i, p in predictions.items() if p["form"] == MC)
    numeric = sorted(i for i, p in predictions.items() if p["form"] == NUMERIC)
    checks: list[GoalCheck] = []

    accuracy = _mean(system.scores(mc))
    checks.append(GoalCheck("multiple choice, overall", accuracy, goals.mc_overall,
                            accuracy is not None and accuracy >= goals.mc_overall))  # fmt: skip
    ours, blind_reader = system.task_scores(mc), options_only.task_scores(mc)
    sizes = Counter(task_key(predictions[i]) for i in mc)
    for task in sorted(t for t, n in sizes.items() if n >= goals.min_task_questions):
        target = blind_reader[task] + goals.mc_over_options_only
        checks.append(GoalCheck(f"{task}: over options-only + {100 * goals.mc_over_options_only:.0f}",
                                ours[task], target, ours[task] >= target, {"n": sizes[task]}))  # fmt: skip

    letters = Counter(str(predictions[i].get("answer") or "none") for i in mc)
    top, count = letters.most_common(1)[0] if letters else ("none", 0)
    share = count / len(mc) if mc else None
    checks.append(GoalCheck("most frequent answer letter, share", share, goals.max_letter_share,
                            share is not None and share <= goals.max_letter_share,
                            {"letter": top, "letters": dict(sorted(letters.items()))}))  # fmt: skip

    agree = [
        concluded_option(parse_completion(predictions[i]["completion"]).think, options[i])
        == predictions[i].get("answer")
        for i in mc
    ]
    agreement = _mean([float(a) for a in agree])
    checks.append(GoalCheck("answer letter = the option the think concludes", agreement,
                            goals.min_think_agreement,
                            agreement is not None and agreement >= goals.min_think_agreement))  # fmt: skip

    if numeric:
        runs = [system, *blind]
        best = best_blind(list(blind), numeric)
        blind_mra = _mean(best_blind_scores(runs, best, numeric))
        mra = _mean(system.scores(numeric))
        target = None if blind_mra is None else blind_mra + goals.numeric_over_blind
        goal = f"numeric MRA, over the best blind row + {100 * goals.numeric_over_blind:.0f}"
        met = mra is not None and target is not None and mra >= target
        checks.append(GoalCheck(goal, mra, target, met))
        ours = system.task_scores(numeric)
        for task, row in best.items():
            if task.split(" (")[0] in goals.combining:
                checks.append(GoalCheck(f"{task}: over the best blind row ({row['label']})", ours[task],
                                        row["score"], ours[task] > row["score"]))  # fmt: skip
    return checks


def goals_markdown(label: str, checks: Sequence[GoalCheck]) -> str:
    """A table of ``checks``: goal, measured, target (percent), met."""

    def pct(value: float | None) -> str:
        return "–" if value is None else f"{100 * value:.1f}"

    lines = [f"Goals for {label} (held out; percent):", "", "| goal | measured | target | met |",
             "|---|---:|---:|:-:|"]  # fmt: skip
    for check in checks:
        extra = f" (letter {check.detail['letter']})" if "letter" in check.detail else ""
        lines.append(f"| {check.goal}{extra} | {pct(check.measured)} | {pct(check.target)} | "
                     f"{'yes' if check.met else 'no'} |")  # fmt: skip
    met = sum(c.met for c in checks)
    return "\n".join([*lines, "", f"{met} of {len(checks)} goals met."]) + "\n"
