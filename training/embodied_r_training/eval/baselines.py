"""Blind baselines: how well a reader that sees only a question's options does (VSI-Bench's "blind" rows).

The options-only reader never sees the descriptions or the question: it picks an option by a rule on the
option texts alone. Several rules are tried and each task reports the best, so the row is a fair strong
blind reader, not a straw man:

================ =============================================================================
rule             picks
================ =============================================================================
geomean          the option whose number is nearest (in ratio) the geometric mean of the numbers
median_low/high  the lower / upper middle of the options sorted by their number
smallest/largest the option with the smallest / largest number
typical          the option sharing the most words with the other options (the "centre")
atypical         the option sharing the fewest words with the other options
shortest/longest the option with the fewest / most characters
prior            the option whose number is nearest (in ratio) the median of all option numbers of
                 the task in the evaluated set (the reader knows the task's typical magnitude)
================ =============================================================================

Ties are split evenly, so each rule's score is its EXPECTED accuracy; rules that need numbers score
chance (1/k) on options without them. :func:`options_only` scores records (dicts with ``task``,
``options`` and ``solution``, the letter, as ``embodied-r prepare`` writes them) per task.

Picking the best of ten rules on the set it is scored on flatters the reader: on 25 questions a task's best
rule scores about 35 % by luck alone. Pass ``calibration`` records (another split, e.g. the training set):
each task's rule, and the typical magnitudes of ``prior``, are then chosen there and scored on ``records``.
:func:`overall` is the options-only score over all multiple-choice questions, each task read by its rule.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from embodied_r_ros.reasoning.options import OPTION_LETTERS

_NUMBER = re.compile(r"\d+(?:\.\d+)?")

Rule = Callable[[Sequence[str], float | None], list[float]]


def option_number(text: str) -> float | None:
    """The first number in an option's text ("left, about 90 degrees" -> 90.0), or None."""
    match = _NUMBER.search(text)
    return float(match.group()) if match else None


def _best(scores: Sequence[float], highest: bool = True) -> list[float]:
    """Probabilities: uniform over the options with the best score."""
    target = max(scores) if highest else min(scores)
    winners = [abs(s - target) <= 1e-12 for s in scores]
    return [w / sum(winners) for w in winners]


def _numbers(options: Sequence[str]) -> list[float] | None:
    values = [option_number(o) for o in options]
    if any(v is None or v <= 0 for v in values):
        return None
    return [float(v) for v in values]  # type: ignore[arg-type]


def _by_number(pick: Callable[[list[float], float | None], list[float]]) -> Rule:
    def rule(options: Sequence[str], prior: float | None) -> list[float]:
        values = _numbers(options)
        if values is None:
            return [1.0 / len(options)] * len(options)
        return pick(values, prior)

    return rule


def _nearest(values: list[float], target: float) -> list[float]:
    return _best([-abs(math.log(v / target)) for v in values])


def _middle(values: list[float], upper: bool) -> list[float]:
    ranked = sorted(values)
    middle = ranked[len(ranked) // 2] if upper else ranked[(len(ranked) - 1) // 2]
    return _best([-abs(v - middle) for v in values])


def _shared_words(options: Sequence[str]) -> list[float]:
    words = [set(re.findall(r"[a-z]+|\d+(?:\.\d+)?", o.lower())) for o in options]
    return [sum(len(w & other) for j, other in enumerate(words) if j != i) for i, w in enumerate(words)]


RULES: dict[str, Rule] = {
    "geomean": _by_number(lambda v, _: _nearest(v, math.exp(statistics.fmean(math.log(x) for x in v)))),
    "median_low": _by_number(lambda v, _: _middle(v, upper=False)),
    "median_high": _by_number(lambda v, _: _middle(v, upper=True)),
    "smallest": _by_number(lambda v, _: _best(v, highest=False)),
    "largest": _by_number(lambda v, _: _best(v)),
    "prior": _by_number(lambda v, prior: _nearest(v, prior) if prior else [1.0 / len(v)] * len(v)),
    "typical": lambda o, _: _best(_shared_words(o)),
    "atypical": lambda o, _: _best(_shared_words(o), highest=False),
    "shortest": lambda o, _: _best([len(x) for x in o], highest=False),
    "longest": lambda o, _: _best([len(x) for x in o]),
}


@dataclass(frozen=True)
class TaskScore:
    """One task's multiple-choice questions: their number, chance, each rule's expected accuracy, and the
    rule the options-only reader uses (chosen on the calibration records, else the best here)."""

    n: int
    chance: float
    rules: dict[str, float]
    rule: str

    @property
    def score(self) -> float:
        """The chosen rule's expected accuracy: the options-only score of the task."""
        return self.rules[self.rule]

    @property
    def best_rule(self) -> str:
        """The rule with the highest expected accuracy here (the first in :data:`RULES` order on ties)."""
        return _best_rule(self.rules)

    @property
    def best(self) -> float:
        """The best rule's expected accuracy here (flattering: see the module docstring)."""
        return self.rules[self.best_rule]


def _best_rule(rules: Mapping[str, float]) -> str:
    return max(rules, key=lambda name: (rules[name], -list(RULES).index(name)))


def _task_priors(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per task, the median of all its options' numbers (the magnitude a reader of the task expects)."""
    values: dict[str, list[float]] = defaultdict(list)
    for record in records:
        values[record["task"]] += [v for v in map(option_number, record["options"]) if v and v > 0]
    return {task: statistics.median(v) for task, v in values.items() if v}


def _rule_scores(rows: Sequence[Mapping[str, Any]], prior: float | None) -> tuple[float, dict[str, float]]:
    """Chance and each rule's expected accuracy over ``rows`` (multiple-choice records of one task)."""
    totals = dict.fromkeys(RULES, 0.0)
    chance = 0.0
    for row in rows:
        options = list(row["options"])
        correct = OPTION_LETTERS.index(str(row["solution"]).strip().upper())
        chance += 1.0 / len(options)
        for name, rule in RULES.items():
            totals[name] += rule(options, prior)[correct]
    return chance / len(rows), {name: total / len(rows) for name, total in totals.items()}


def _by_task(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    tasks: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        if record.get("options"):  # numeric questions: nothing to read
            tasks[record["task"]].append(record)
    return dict(sorted(tasks.items()))


def options_only(
    records: Iterable[Mapping[str, Any]], calibration: Iterable[Mapping[str, Any]] | None = None
) -> dict[str, TaskScore]:
    """Per task, the options-only reader's expected accuracy on the multiple-choice ``records``, by rule
    and with the rule chosen on ``calibration`` (the best on ``records`` without it)."""
    tasks = _by_task(records)
    tuning = _by_task(calibration) if calibration is not None else tasks
    priors = _task_priors([r for rows in tuning.values() for r in rows])
    scores = {}
    for task, rows in tasks.items():
        chance, rules = _rule_scores(rows, priors.get(task))
        if task in tuning and tuning is not tasks:
            rule = _best_rule(_rule_scores(tuning[task], priors.get(task))[1])
        else:
            rule = _best_rule(rules)
        scores[task] = TaskScore(len(rows), chance, rules, rule)
    return scores


def overall(scores: Mapping[str, TaskScore]) -> float:
    """The options-only score over all multiple-choice questions: each task read by its rule."""
    n = sum(s.n for s in scores.values())
    return sum(s.score * s.n for s in scores.values()) / n if n else 0.0


def options_only_expected(
    records: Sequence[Mapping[str, Any]], calibration: Iterable[Mapping[str, Any]] | None = None
) -> list[float | None]:
    """Per record, the options-only reader's expected accuracy (None for a numeric record: no options):
    each task read by the rule :func:`options_only` chooses (on ``calibration`` when given)."""
    scores = options_only(records, calibration)
    tuning = _by_task(calibration) if calibration is not None else _by_task(records)
    priors = _task_priors([r for rows in tuning.values() for r in rows])
    expected: list[float | None] = []
    for record in records:
        options = list(record.get("options") or [])
        if not options:
            expected.append(None)
            continue
        rule = RULES[scores[record["task"]].rule]
        correct = OPTION_LETTERS.index(str(record["solution"]).strip().upper())
        expected.append(rule(options, priors.get(record["task"]))[correct])
    return expected
