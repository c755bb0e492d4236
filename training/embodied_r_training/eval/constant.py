"""The best constant answer: a blind reader that answers every question of a task and environment alike.

It never reads the descriptions, the question or the options: per task, form and environment it gives one
answer, chosen on the TRAINING split (the calibration records):

* numeric: the mean, the median or the mode of that group's training solutions, whichever has the highest
  mean MRA on those training records (ties: in that order). The mode is taken of the solutions as the
  options display them (:func:`shown`: 0.1 m below 10 m, whole metres above; areas to 0.1 m^2; counts as
  whole numbers), the smallest of the most frequent on ties;
* multiple choice: the letter most frequent among that group's training solutions (alphabetical on ties).

Environments differ in scale about tenfold (abs_distance: median 3.2 m indoors, 51.5 m outdoors), so a
constant pooled over both is a straw man; this reader knows the environment, which the question's wording
shows anyway. A record's environment is its ``environment`` field, else the head of its id
(:func:`record_environment`); a record whose environment is unknown, or whose group the training split
lacks, gets the task's constant pooled over all environments (:data:`POOLED`).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from embodied_r_ros.question_file import MC, NUMERIC
from embodied_r_ros.reasoning.answers import mean_relative_accuracy

# The environments ids name: "indoor-seed4001-scene_0000-000" (synth), "indoor/indoor-seed..." (joined sets).
ENVIRONMENTS = ("indoor", "outdoor")
POOLED = "all"  # every environment together: a record's environment when neither field nor id says it
STATISTICS = ("mean", "median", "mode")
LETTER = "most frequent letter"  # a multiple-choice constant's statistic

Group = tuple[str, str, str]  # (task, form, environment)


def record_environment(record: Mapping[str, Any]) -> str:
    """A record's environment: its ``environment`` field, else the head of its id before the first "/" or
    "-" when that is one of :data:`ENVIRONMENTS`, else :data:`POOLED`."""
    if record.get("environment"):
        return str(record["environment"])
    head = re.split(r"[/-]", str(record.get("id", "")), maxsplit=1)[0]
    return head if head in ENVIRONMENTS else POOLED


def shown(value: float, unit: str) -> float:
    """``value`` as an option displays it (the rounding of ``tasks.amounts.format_amount``: areas to 0.1,
    counts truncated to whole numbers, lengths to 0.1 below 10 and to whole numbers above)."""
    if unit == "m^2":
        return float(f"{value:.1f}")
    if unit == "count":
        return float(int(value))
    return float(f"{value:.1f}") if value < 10 else float(f"{value:.0f}")


def _form(record: Mapping[str, Any]) -> str:
    return MC if record.get("options") else NUMERIC


def _score(form: str, answer: float | str, solution: Any) -> float:
    if form == MC:
        return 1.0 if answer == str(solution).strip().upper() else 0.0
    return mean_relative_accuracy(float(answer), float(solution))


@dataclass(frozen=True)
class Constant:
    """One group's constant answer: ``statistic`` (mean, median, mode; :data:`LETTER` for multiple choice) and
    its ``value``, chosen on ``n`` solutions of ``chosen_on``, where it scored ``score``; ``candidates``:
    each statistic's value and score there (numeric)."""

    task: str
    form: str
    environment: str
    statistic: str
    value: float | str
    n: int
    score: float
    chosen_on: str
    candidates: dict[str, dict[str, float]]

    def describe(self) -> str:
        """E.g. "the median, 3.1, of 72 indoor abs_distance solutions of the train split"."""
        where = "all environments'" if self.environment == POOLED else self.environment
        value = self.value if isinstance(self.value, str) else f"{self.value:.4g}"
        of = f"{self.n} {where} {self.task} solutions of the {self.chosen_on}"
        return f"the {self.statistic}, {value}, of {of}"

    def as_dict(self) -> dict[str, Any]:
        """The constant as metrics.json stores it."""
        return {
            "statistic": self.statistic, "value": self.value, "n": self.n, "score": self.score,
            "chosen_on": self.chosen_on, "candidates": self.candidates,
        }  # fmt: skip


def numeric_candidates(solutions: Sequence[float], unit: str) -> dict[str, float]:
    """The mean, the median and the mode (of the solutions as displayed, :func:`shown`) of ``solutions``."""
    counts = Counter(shown(v, unit) for v in solutions)
    most = max(counts.values())
    return {
        "mean": statistics.fmean(solutions),
        "median": statistics.median(solutions),
        "mode": min(v for v, c in counts.items() if c == most),
    }


def best_constant(group: Group, records: Sequence[Mapping[str, Any]], chosen_on: str) -> Constant:
    """The best constant of one group on its ``records`` (see the module docstring)."""
    task, form, environment = group
    solutions = [r["solution"] for r in records]
    if form == MC:
        letters = Counter(str(s).strip().upper() for s in solutions)
        letter = min(letters, key=lambda x: (-letters[x], x))
        return Constant(task, form, environment, LETTER, letter, len(records),
                        letters[letter] / len(records), chosen_on, {})  # fmt: skip
    unit = str(records[0].get("unit") or "m")
    values = [float(s) for s in solutions]
    candidates = {
        name: {"value": value, "score": statistics.fmean(_score(NUMERIC, value, s) for s in values)}
        for name, value in numeric_candidates(values, unit).items()
    }
    best = max(STATISTICS, key=lambda name: (candidates[name]["score"], -STATISTICS.index(name)))
    return Constant(task, form, environment, best, candidates[best]["value"], len(records),
                    candidates[best]["score"], chosen_on, candidates)  # fmt: skip


def choose_constants(records: Iterable[Mapping[str, Any]], chosen_on: str) -> dict[Group, Constant]:
    """The best constant of every (task, form, environment) group of ``records``, and of every (task, form)
    over all environments (environment :data:`POOLED`)."""
    groups: dict[Group, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        task, form = str(record["task"]), _form(record)
        environment = record_environment(record)
        groups[(task, form, POOLED)].append(record)
        if environment != POOLED:
            groups[(task, form, environment)].append(record)
    return {group: best_constant(group, rows, chosen_on) for group, rows in sorted(groups.items())}


def constant_for(record: Mapping[str, Any], *tables: Mapping[Group, Constant]) -> Constant:
    """The constant that answers ``record``: from the first of ``tables`` (e.g. the training split's, then
    the scored split's) holding its task and form, its environment's there, else all environments'."""
    task, form = str(record["task"]), _form(record)
    for table in tables:
        found = table.get((task, form, record_environment(record))) or table.get((task, form, POOLED))
        if found is not None:
            return found
    raise KeyError(f"no constant for task {task} ({form}): none of the tables holds it")


@dataclass(frozen=True)
class ConstantAnswer:
    """One record's constant answer and its score (accuracy, or MRA)."""

    constant: Constant
    score: float


def constant_answers(
    records: Sequence[Mapping[str, Any]], calibration: Iterable[Mapping[str, Any]] | None
) -> list[ConstantAnswer]:
    """Per record, the best constant's answer and score: constants chosen on ``calibration`` (the training
    split); a task and form it lacks (or no calibration at all) chosen on ``records`` themselves, which
    flatters the reader (``chosen_on`` says so)."""
    trained = choose_constants(calibration, "train split") if calibration is not None else {}
    scored = choose_constants(records, "scored split (flattering: no training solutions)")
    answers = []
    for record in records:
        constant = constant_for(record, trained, scored)
        answers.append(ConstantAnswer(constant, _score(constant.form, constant.value, record["solution"])))
    return answers


def constants_used(answers: Iterable[ConstantAnswer]) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """The constants ``answers`` used, by task, form and environment (the group each constant was chosen
    for: :data:`POOLED` where a record's own environment had none), as metrics.json's ``constants``."""
    used: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for answer in answers:
        c = answer.constant
        used.setdefault(c.task, {}).setdefault(c.form, {})[c.environment] = c.as_dict()
    return {task: {form: dict(sorted(e.items())) for form, e in forms.items()} for task, forms in
            sorted(used.items())}  # fmt: skip
