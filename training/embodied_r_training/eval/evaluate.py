"""``embodied-r eval``: score a system on a split of a data set from ``embodied-r prepare``.

Systems (``--system``):

* ``reasoner``: the LM (``--lm``, optionally with a LoRA ``--adapter``) answers each record's ``prompt``,
  the chat the node builds from the VLM's key-frame descriptions; loaded like the node's LM
  (:func:`embodied_r_ros.backends.load_backend` with ``vision=False``).
* ``untrained``: the same LM without an adapter: the baseline before RL.
* ``question-only``: the LM (with ``--adapter`` if given) WITHOUT the key-frame descriptions: the role line,
  the question and its options only (VSI-Bench's "vision disabled" row; a blind baseline: what the question
  alone gives this model).
* ``vlm``: the paper's ablation: the VLM alone answers from the same key frames (read from the record's
  bag at ``keyframe_stamps_ns``), all of a record's key frames and the question in ONE request.
* ``oracle``: no model: a program that reads only each record's prompt text
  (:mod:`embodied_r_training.tasks.oracle`) and answers
  with its reasoning: the bound of what any reasoner can reach from these prompts.
* ``options-only``: no model: a blind reader of the option texts alone (:mod:`.baselines`), its expected
  accuracy; VSI-Bench's blind rows ask that a model beat it.
* ``chance``: no model. Multiple choice scores its expected accuracy under a uniform guess (1/k for k
  options); numeric answers score the MRA of the split's mean answer of the same task (VSI-Bench's
  "chance (frequency)" baseline: it knows the answer distribution, so it is a generous floor; it pools
  environments, whose scales differ tenfold).
* ``constant``: no model: the best constant answer per task and environment, chosen on the training split
  (:mod:`.constant`; numeric: the mean, median or mode of the training solutions, whichever scores best
  there; multiple choice: the most frequent letter). A blind reader stronger than ``chance`` on numbers.

Scoring uses :mod:`.rewards` (the training rewards): multiple choice by the letter in the answer part,
numeric by mean relative accuracy (MRA), the format condition, and the consistency check (a reference
model reads only the question, options and reasoning of each correct answer; default: the base LM).
Every score comes with its 95 % percentile-bootstrap interval over records (:mod:`.stats`). Model rows also
report their answers read leniently (:mod:`.lenient`: no answer tags needed), beside the scores.

Output directory::

    metrics.json       per task and form (mc: accuracy, numeric: MRA), overall, format and consistency
                       rates, mean completion length (``length_unit``: tokens with a transformers backend,
                       and for programs when --lm is a local model folder with a tokenizer; else
                       characters); model rows: ``lenient``; constant: the ``constants`` chosen
    metrics.md         the same as a markdown table
    predictions.jsonl  id, task, form, solution, completion, answer, score, format, consistency, length,
                       rule (what a program answered by, e.g. the constant's statistic)
    per_task.png       bars per task (plots.py); rewards.png / length.png with ``--train-log``

A model row keeps its completions as it goes (:mod:`.partial`): run the same command again after an
interruption and it generates only what is missing.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from embodied_r_ros.backends.base import ChatMessage, ChatRequest, GenerationBackend
from embodied_r_ros.config import Alias, ConfigError, KeyFrameConfig, ModelConfig, param, section
from embodied_r_ros.reasoning import prompts
from embodied_r_ros.reasoning.messages import reasoning_messages

from ..data.bag_reader import BagReader, BagReadError, BagTopics
from ..data.schema import GRADING, KEYFRAMES, PROMPT, read_split
from ..data.splits import SPLITS
from ..rl.rewards import (
    ConsistencyConfig,
    ConsistencyReward,
    Graded,
    completion_text,
    consistency_eligible,
    grade_batch,
)
from .lenient import lenient_summary
from .partial import PartialCompletions, files_signature, ids_digest
from .stats import bootstrap_ci

logger = logging.getLogger(__name__)

SYSTEMS = ("reasoner", "untrained", "question-only", "vlm", "chance", "oracle", "options-only", "constant")
# The systems that are programs, not models: no generation, no consistency check.
PROGRAMS = ("chance", "oracle", "options-only", "constant")
WITH_ADAPTER = ("reasoner", "question-only")  # the systems that run --lm with its --adapter
DEFAULT_LM = "Qwen/Qwen2.5-3B-Instruct"
MC, NUMERIC = "mc", "numeric"
# The data-set columns each system reads (data/schema.py).
_COLUMNS = {
    "reasoner": (*GRADING, *PROMPT),
    "untrained": (*GRADING, *PROMPT),
    "question-only": GRADING,
    "vlm": (*GRADING, *KEYFRAMES),
    "chance": GRADING,
    "oracle": (*GRADING, *PROMPT),
    "options-only": GRADING,
    "constant": (*GRADING, "unit"),
}

# The VLM-alone prompt (paper ablation "VLM with the same key frames"). The system turn is the reasoning
# LM's, so both systems get the same instructions; only the evidence differs (pixels vs descriptions).
# Change VLM_ALONE_PROMPT_VERSION whenever the text changes, so scores of different prompts are not mixed.
VLM_ALONE_PROMPT_VERSION = "1"
VLM_ALONE_INTRO = (
    "You are a robot. These are key frames of your egocentric video, from the past to the present:"
)


def vlm_alone_request(images: Sequence[Any], question: str, options: Sequence[str]) -> list[ChatMessage]:
    """The VLM's chat for one record: every key frame (``Frame j:`` then the image) and the question."""
    parts: list[Any] = [VLM_ALONE_INTRO]
    for j, image in enumerate(images):
        parts += [f"\nFrame {j}:", image]
    parts.append("\n\n" + prompts.question_block(question, options))
    return [ChatMessage.text("system", prompts.REASONING_SYSTEM), ChatMessage("user", tuple(parts))]


# ----------------------------------------------------------------------------------------------------
# Configuration


def _default_lm() -> ModelConfig:
    return ModelConfig(model=DEFAULT_LM, max_new_tokens=512)


@dataclass
class EvalConfig:
    """Everything ``embodied-r eval`` needs. ``lm`` and ``vlm`` carry the generation settings
    (``max_new_tokens``, ``temperature``); ``reference`` None means the base LM (``lm`` without adapter).

    The fields' flags are declared with them; ``embodied-r eval`` gives ``vlm`` and ``reference`` the
    generation settings of ``lm`` (--vlm, --vlm-backend, --reference).
    """

    dataset: Path
    out: Path
    system: str = param("reasoner", "what answers (default reasoner)", choices=SYSTEMS, flag="--system")
    split: str = param("test", "the data-set split to score", choices=SPLITS, flag="--split")
    limit: int = param(0, "first N records only (0 = all)", flag="--limit")
    lm: ModelConfig = section(
        _default_lm,
        model={"flag": Alias("--lm", f"reasoning LM: directory or name ({DEFAULT_LM})")},
        backend={"flag": "--lm-backend"},
        transformers={
            "adapter": {"flag": Alias("--adapter", "LoRA adapter directory for --lm (reasoner only)")},
            "device": {"flag": "--device"},
            "dtype": {"flag": "--dtype"},
            "calculator": {"flag": Alias("--calculator", "a calculator writes the LM's arithmetic results")},
            "lookup": {"flag": Alias("--lookup", "the LM's option lookup and letter follow its conclusion")},
        },
        openai={"base_url": {"flag": Alias("--base-url", "openai backends: server URL")}},
        temperature={"flag": Alias("--temperature", "0 = greedy")},
        max_new_tokens={"flag": "--max-new-tokens"},
    )
    vlm: ModelConfig | None = None
    reference: ModelConfig | None = None
    consistency: bool = param(
        True,
        "check each correct answer's reasoning with the reference model",
        flag=Alias("--no-consistency", "skip the consistency check"),
    )
    consistency_config: ConsistencyConfig = section(
        ConsistencyConfig, temperature={"description": "paper: 0.1", "flag": "--reference-temperature"}
    )
    batch_size: int = param(8, "records per generate call", flag="--batch-size")
    topics: BagTopics = field(default_factory=BagTopics)
    candidate_fps: float = KeyFrameConfig().candidate_fps
    bag_root: Path | None = param(None, "--system vlm: bags at DIR/<scene>", flag="--bag-root")
    train_log: Path | None = param(None, "trainer_state.json or its directory", flag="--train-log")
    calibration: Path | None = param(
        None,
        "--system options-only, constant: the data set whose train split chooses the blind reader's rules "
        "or constants (default: this data set's train split, if it has one)",
        flag="--calibration",
    )
    seed: int = param(0, "seed of the sampling (temperature > 0, the reference's)", flag="--seed")
    progress: bool = param(True, "progress bars", flag=Alias("--no-progress", "no progress bars"))

    def __post_init__(self) -> None:
        if self.system not in SYSTEMS:
            raise ConfigError(f"--system must be one of {', '.join(SYSTEMS)}, got {self.system!r}")
        if self.split not in SPLITS:
            raise ConfigError(f"--split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.batch_size < 1 or self.limit < 0:
            raise ConfigError(
                f"--batch-size must be >= 1 and --limit >= 0, got {self.batch_size}, {self.limit}"
            )
        adapter = self.lm.transformers.adapter
        if self.system == "untrained" and adapter:
            raise ConfigError(
                f"--system untrained evaluates the base LM; drop --adapter {adapter} (or use "
                "--system reasoner to evaluate the adapter)"
            )
        if adapter and self.lm.backend != "transformers":
            raise ConfigError(
                "--adapter needs --lm-backend transformers; with an OpenAI-compatible server, serve the "
                "adapter there (e.g. vLLM --lora-modules) and pass its served name as --lm"
            )
        if self.system == "vlm" and (self.vlm is None or not self.vlm.model):
            raise ConfigError("--system vlm needs --vlm MODEL (a Qwen2/2.5-VL directory or served name)")


# ----------------------------------------------------------------------------------------------------
# Data


def record_bag(record: dict[str, Any], bag_root: Path | None) -> Path:
    """Where a record's bag is: ``bag_root/<scene>`` when given, else the path prepare recorded."""
    return bag_root / record["scene"] if bag_root is not None else Path(record["bag"])


def _check_bags(records: Sequence[dict[str, Any]], bag_root: Path | None) -> None:
    missing = sorted({str(record_bag(r, bag_root)) for r in records if not record_bag(r, bag_root).exists()})
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ConfigError(
            f"--system vlm reads the key frames from the bags, and bag(s) {shown} do not exist; pass "
            "--bag-root DIR where DIR/<scene> holds each record's bag, or rerun embodied-r prepare"
        )


# ----------------------------------------------------------------------------------------------------
# Scoring


@dataclass
class Prediction:
    """One record's completion, read and scored. ``score`` is accuracy (mc) or MRA (numeric);
    ``consistency`` is None when not checked (a wrong answer, or consistency off)."""

    id: str
    task: str
    form: str
    solution: str
    completion: str
    answer: str | float | None
    score: float
    format: bool
    length: int
    consistency: float | None = None
    checkable: bool = False  # correct enough for the consistency check
    rule: str = ""  # a program's: what it answered by (the constant's statistic)


def grade_records(
    records: Sequence[dict[str, Any]],
    completions: Sequence[str],
    lengths: Sequence[int] | None = None,
    consistency: ConsistencyConfig | None = None,
) -> list[Prediction]:
    """Score ``completions`` (one per record) with the training rewards' rules; ``lengths`` default to
    the completions' characters."""
    graded = grade_batch(
        list(completions), [r["solution"] for r in records], options=[r.get("options") or [] for r in records]
    )
    consistency = consistency or ConsistencyConfig()
    lengths = list(lengths) if lengths is not None else [len(c) for c in completions]
    predictions = []
    for record, completion, g, length in zip(records, completions, graded, lengths, strict=True):
        predictions.append(
            Prediction(
                id=str(record["id"]),
                task=str(record["task"]),
                form=MC if g.multiple_choice else NUMERIC,
                solution=str(record["solution"]),
                completion=completion,
                answer=_answer(g),
                score=g.accuracy,
                format=g.parsed.well_formed,
                length=int(length),
                checkable=consistency_eligible(g, consistency),
            )
        )
    return predictions


def chance_predictions(records: Sequence[dict[str, Any]]) -> list[Prediction]:
    """The ``chance`` system: expected accuracy 1/k of a uniform guess among k options (multiple choice);
    for numeric records the MRA of the mean solution of the same task in ``records`` (frequency chance)."""
    from embodied_r_ros.reasoning.answers import mean_relative_accuracy

    by_task: dict[str, list[float]] = defaultdict(list)
    for record in records:
        if not record.get("options"):
            by_task[str(record["task"])].append(float(record["solution"]))
    predictions = []
    for record in records:
        options = record.get("options") or []
        if options:
            answer: str | float | None = None
            score = 1.0 / len(options)
        else:
            answer = sum(by_task[str(record["task"])]) / len(by_task[str(record["task"])])
            score = mean_relative_accuracy(answer, float(record["solution"]))
        predictions.append(
            Prediction(
                id=str(record["id"]), task=str(record["task"]), form=MC if options else NUMERIC,
                solution=str(record["solution"]), completion="", answer=answer, score=score, format=False,
                length=0,
            )
        )  # fmt: skip
    return predictions


def oracle_predictions(records: Sequence[dict[str, Any]]) -> list[Prediction]:
    """The ``oracle`` system: :func:`~embodied_r_training.tasks.oracle.oracle_trace` reads each record's
    prompt (the user turn only, never the scene) and answers with its reasoning; a prompt it cannot answer
    gets an empty completion. Scored like a model's completion, so it bounds what any reasoner can reach from
    these prompts."""
    from ..tasks.oracle import oracle_trace

    completions = []
    for record in records:
        user = next((completion_text([m]) for m in record["prompt"] if m["role"] == "user"), "")
        trace = oracle_trace(user)
        completions.append("" if trace is None else f"<think>{trace[0]}</think><answer>{trace[1]}</answer>")
    return grade_records(records, completions)


def options_only_predictions(
    records: Sequence[dict[str, Any]], calibration: Sequence[dict[str, Any]] | None
) -> list[Prediction]:
    """The ``options-only`` system: a blind reader that sees only the option texts
    (:func:`.baselines.options_only_expected`, each task's rule chosen on ``calibration``, the data set's
    training split, when it has one); its expected accuracy per question, like ``chance``. Numeric
    questions have no options to read: they score as ``chance`` does (the task's mean answer)."""
    from .baselines import options_only_expected

    expected = options_only_expected(records, calibration)
    chance = chance_predictions(records)
    return [replace(c, score=expected[i]) if expected[i] is not None else c for i, c in enumerate(chance)]


def constant_predictions(
    records: Sequence[dict[str, Any]], calibration: Sequence[dict[str, Any]] | None
) -> tuple[list[Prediction], dict[str, Any]]:
    """The ``constant`` system: per record the best constant answer of its task and environment
    (:func:`.constant.constant_answers`, chosen on ``calibration``, the training split), its statistic in
    ``rule``; and the constants it used by task, form and environment (metrics.json's ``constants``)."""
    from .constant import constant_answers, constants_used

    answers = constant_answers(records, calibration)
    predictions = [
        Prediction(
            id=str(r["id"]), task=str(r["task"]), form=a.constant.form, solution=str(r["solution"]),
            completion="", answer=a.constant.value, score=a.score, format=False, length=0,
            rule=a.constant.describe(),
        )
        for r, a in zip(records, answers, strict=True)
    ]  # fmt: skip
    return predictions, {"constants": constants_used(answers)}


def _calibration(config: EvalConfig) -> list[dict[str, Any]] | None:
    """The training records a blind program chooses its rules on: ``--calibration``'s train split, else
    this data set's (None, with a warning, when it has none: the scored split is then used, flattering)."""
    source = config.calibration or config.dataset
    if config.calibration is None and config.split == "train":
        return None
    try:
        columns = _COLUMNS[config.system]
        return read_split(source, "train", columns, f"--system {config.system}").to_list() or None
    except ConfigError:
        if config.calibration is not None:
            raise
        logger.warning(
            "%s: %s has no train split to choose on: chosen on the scored %s split (flattering; give "
            "--calibration)", config.system, source, config.split,
        )  # fmt: skip
        return None


def program_predictions(
    config: EvalConfig, records: Sequence[dict[str, Any]]
) -> tuple[list[Prediction], dict[str, Any]]:
    """The predictions of a system that is a program (:data:`PROGRAMS`), not a model, with what the
    metrics should say about how it answered (the constants chosen)."""
    if config.system == "oracle":
        return oracle_predictions(records), {}
    if config.system == "options-only":
        return options_only_predictions(records, _calibration(config)), {}
    if config.system == "constant":
        return constant_predictions(records, _calibration(config))
    return chance_predictions(records), {}


def _tokenizer_dir(config: EvalConfig) -> Path | None:
    """``--lm`` when it is a local model folder with a tokenizer (program rows count tokens with it)."""
    path = Path(config.lm.model).expanduser()
    has_tokenizer = any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json"))
    return path if path.is_dir() and has_tokenizer else None


def program_lengths(config: EvalConfig, completions: Sequence[str]) -> tuple[list[int], str]:
    """A program's completion lengths and their unit: tokens of ``--lm``'s tokenizer when it is a local
    folder (so they compare with the model rows'), else characters."""
    where = _tokenizer_dir(config)
    if where is None:
        return [len(c) for c in completions], "characters"
    if not any(completions):
        return [0] * len(completions), "tokens"
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(where)
    return [len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in completions], "tokens"


def _answer(graded: Graded) -> str | float | None:
    return graded.choice if graded.multiple_choice else graded.value


def check_consistency(
    predictions: Sequence[Prediction],
    records: Sequence[dict[str, Any]],
    reward: ConsistencyReward,
    batch_size: int = 8,
    progress: bool = False,
) -> int:
    """Fill ``consistency`` of every checkable prediction; one batched reference call per ``batch_size``
    of them. Returns the number of reference calls."""
    rows = [i for i, p in enumerate(predictions) if p.checkable]
    calls = 0
    for start in tqdm(
        range(0, len(rows), batch_size), desc="consistency", unit="batch", disable=not progress or not rows
    ):
        chunk = rows[start : start + batch_size]
        scores = reward(
            [predictions[i].completion for i in chunk],
            [records[i]["solution"] for i in chunk],
            question=[records[i]["question"] for i in chunk],
            options=[records[i].get("options") or [] for i in chunk],
        )
        calls += 1
        for i, score in zip(chunk, scores, strict=True):
            predictions[i].consistency = float(score)
    return calls


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ci(values: Sequence[float]) -> list[float] | None:
    """[low, high] of the 95 % bootstrap interval of the mean of ``values`` (None without values)."""
    interval = bootstrap_ci(values)
    return None if interval is None else [interval.low, interval.high]


def _stats(predictions: Sequence[Prediction]) -> dict[str, Any]:
    checked = [p.consistency for p in predictions if p.consistency is not None]
    return {
        "n": len(predictions),
        "score": _mean([p.score for p in predictions]),
        "score_ci": _ci([p.score for p in predictions]),
        "format_rate": _mean([1.0 if p.format else 0.0 for p in predictions]),
        "consistency_rate": _mean(checked),
        "consistency_checked": len(checked),
        "mean_length": _mean([float(p.length) for p in predictions]),
    }


def summarize(predictions: Sequence[Prediction], **info: Any) -> dict[str, Any]:
    """The metrics: per task and form, overall, by form, and the mean over task/form groups.

    ``score`` is accuracy for mc and MRA for numeric; ``overall.score`` is the mean over records and
    ``overall.task_mean`` the mean of the groups' scores (the paper's average over tasks). ``info`` is
    stored as is (system, models, settings).
    """
    groups: dict[str, dict[str, list[Prediction]]] = defaultdict(lambda: defaultdict(list))
    for p in predictions:
        groups[p.task][p.form].append(p)
    tasks = {
        task: {
            form: {"metric": "accuracy" if form == MC else "mra", **_stats(preds)}
            for form, preds in sorted(forms.items())
        }
        for task, forms in sorted(groups.items())
    }
    overall = _stats(predictions)
    overall["task_mean"] = _mean([g["score"] for forms in tasks.values() for g in forms.values()])
    for key, form in (("mc_accuracy", MC), ("numeric_mra", NUMERIC)):
        of_form = _stats([p for p in predictions if p.form == form])
        overall[key], overall[f"{key}_ci"] = of_form["score"], of_form["score_ci"]
    return {**info, "overall": overall, "tasks": tasks}


def _cell(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ci_cell(ci: Sequence[float] | None) -> str:
    return "–" if not ci else f"{ci[0]:.3f}–{ci[1]:.3f}"


def metrics_markdown(metrics: dict[str, Any]) -> str:
    """``metrics`` as markdown: a header, then one table row per task and form, and the overall rows."""
    unit = metrics.get("length_unit", "characters")
    overall = metrics["overall"]
    lines = [
        f"# {metrics.get('label', metrics.get('system', 'evaluation'))}: split {metrics.get('split', '?')}, "
        f"{overall['n']} records",
        "",
        f"Models: {', '.join(f'{k} `{v}`' for k, v in metrics.get('models', {}).items() if v) or 'none'}.",
        *([f"Descriptions from: {metrics['perception']}."] if metrics.get("perception") else []),
        "Score: accuracy for multiple choice (mc), mean relative accuracy (MRA) for numeric answers.",
        "",
        f"| task | form | metric | n | score | format | consistency (checked) | mean length ({unit}) | "
        "score 95 % CI |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]

    def row(name: str, form: str, metric: str, s: dict[str, Any]) -> str:
        consistency = f"{_cell(s['consistency_rate'])} ({s['consistency_checked']})"
        return (
            f"| {name} | {form} | {metric} | {s['n']} | {_cell(s['score'])} | {_cell(s['format_rate'])} | "
            f"{consistency} | {_cell(s['mean_length'], 1)} | {_ci_cell(s.get('score_ci'))} |"
        )

    for task, forms in metrics["tasks"].items():
        for form, s in forms.items():
            lines.append(row(task, form, "accuracy" if form == MC else "MRA", s))
    lines.append(row("**all records**", "", "mean", overall))
    lines.append("")
    lines.append(
        f"Mean over task/form groups: **{_cell(overall['task_mean'])}**; multiple-choice accuracy "
        f"{_cell(overall['mc_accuracy'])} (95 % CI {_ci_cell(overall.get('mc_accuracy_ci'))}); numeric MRA "
        f"{_cell(overall['numeric_mra'])} (95 % CI {_ci_cell(overall.get('numeric_mra_ci'))})."
    )
    lenient = metrics.get("lenient")
    if lenient:
        lines.append("")
        lines.append(
            "Read leniently (no <answer> tag needed: without one, the last option letter or number of the "
            f"completion): multiple-choice accuracy {_cell(lenient['mc'])}, numeric MRA "
            f"{_cell(lenient['numeric'])}."
        )
    if metrics.get("constants"):
        lines += [
            "",
            "| constant of task | form | environment | statistic | value | chosen on (n) | score there |",
            "|---|---|---|---|---:|---|---:|",
        ]
        for task, forms in metrics["constants"].items():
            for form, environments in forms.items():
                for environment, c in environments.items():
                    value = c["value"] if isinstance(c["value"], str) else f"{c['value']:.4g}"
                    lines.append(
                        f"| {task} | {form} | {environment} | {c['statistic']} | {value} | "
                        f"{c['chosen_on']} ({c['n']}) | {_cell(c['score'])} |"
                    )
    skipped = metrics.get("skipped") or []
    if skipped:
        lines.append("")
        lines.append(
            f"Skipped {len(skipped)} record(s): " + "; ".join(f"{s['id']}: {s['reason']}" for s in skipped)
        )
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------------
# Running the models


def _load(config: ModelConfig, vision: bool) -> GenerationBackend:
    from embodied_r_ros.backends import load_backend

    return load_backend(config, vision=vision)


def _generate(backend: Any, requests: list[ChatRequest]) -> tuple[list[str], list[int] | None]:
    """Completions and, from an in-process transformers model, the number of tokens each generated."""
    if not callable(getattr(backend, "generate_ids", None)):
        return backend.generate(requests), None
    token_ids = backend.generate_ids(requests).token_ids
    return backend.decode(token_ids), [len(ids) for ids in token_ids]


@dataclass
class Skipped:
    """A record that could not be evaluated (vlm: its bag or key frames could not be read)."""

    id: str
    reason: str


def _reasoner_requests(records: Sequence[dict[str, Any]]) -> Iterator[tuple[int, ChatRequest]]:
    for i, record in enumerate(records):
        # completion_text reads str contents and lists of text parts alike.
        yield i, [ChatMessage.text(m["role"], completion_text([m])) for m in record["prompt"]]


def _question_only_requests(records: Sequence[dict[str, Any]]) -> Iterator[tuple[int, ChatRequest]]:
    """The reasoner's chat with the key-frame descriptions left out (VSI-Bench's "vision disabled" row):
    the role line, then the question and its options only."""
    for i, record in enumerate(records):
        yield i, reasoning_messages([], str(record["question"]), list(record.get("options") or []))


def _vlm_requests(
    records: Sequence[dict[str, Any]], config: EvalConfig, skipped: list[Skipped]
) -> Iterator[tuple[int, ChatRequest]]:
    """Each record's VLM chat with its key frames read from its bag; unreadable records go to ``skipped``."""
    reader: BagReader | None = None
    reader_path: Path | None = None
    broken: dict[Path, str] = {}
    try:
        for i, record in enumerate(records):
            path = record_bag(record, config.bag_root)
            if path in broken:
                skipped.append(Skipped(str(record["id"]), broken[path]))
                continue
            try:
                if path != reader_path:
                    if reader is not None:
                        reader.close()
                    reader, reader_path = None, None
                    reader, reader_path = BagReader(path, config.topics, config.candidate_fps), path
                images = _keyframe_images(reader, record)
            except BagReadError as exc:
                if reader is None:
                    broken[path] = str(exc)
                skipped.append(Skipped(str(record["id"]), str(exc)))
                continue
            yield i, vlm_alone_request(images, record["question"], record.get("options") or [])
    finally:
        if reader is not None:
            reader.close()


def _keyframe_images(reader: BagReader, record: dict[str, Any]) -> list[Any]:
    stamps = [int(s) for s in record["keyframe_stamps_ns"]]
    if not stamps:
        raise BagReadError(f"record {record['id']} has no key frames (keyframe_stamps_ns is empty)")
    # The window from the first to the last key frame has the same candidate grid as the question's window
    # (key frame 0 is its first frame, the last key frame its last), so every key frame is a candidate.
    frames = {f.stamp_ns: f for f in reader.window(stamps[0], stamps[-1])}
    missing = [s for s in stamps if s not in frames]
    if missing:
        raise BagReadError(
            f"bag {reader.path} has no candidate frame at key-frame stamp(s) {missing[:3]} ns of record "
            f"{record['id']}; was the data set prepared with another candidate rate or image topic?"
        )
    return [frames[s].image for s in stamps]


def _generate_all(
    backend: GenerationBackend,
    requests: Iterator[tuple[int, ChatRequest]],
    n: int,
    config: EvalConfig,
    partial: PartialCompletions | None = None,
) -> dict[int, tuple[str, int | None]]:
    """(completion, generated tokens or None) by record index, ``config.batch_size`` requests per call;
    with ``partial``, the records it holds are not generated again and each batch is kept there."""
    completions: dict[int, tuple[str, int | None]] = dict(partial.done) if partial is not None else {}
    batch: list[tuple[int, ChatRequest]] = []
    bar = tqdm(total=n, initial=len(completions), desc=config.system, unit="record",
               disable=not config.progress)  # fmt: skip

    def flush() -> None:
        texts, lengths = _generate(backend, [request for _, request in batch])
        if len(texts) != len(batch):
            raise RuntimeError(f"backend returned {len(texts)} completions for {len(batch)} requests")
        for k, ((i, _), text) in enumerate(zip(batch, texts, strict=True)):
            completions[i] = (text, lengths[k] if lengths is not None else None)
        if partial is not None:
            partial.append([(i, *completions[i]) for i, _ in batch])
        bar.update(len(batch))
        batch.clear()

    try:
        for item in requests:
            if item[0] in completions:  # generated before an interruption
                continue
            batch.append(item)
            if len(batch) >= config.batch_size:
                flush()
        if batch:
            flush()
    finally:
        bar.close()
        if partial is not None:
            partial.close()
    return completions


def _partial(config: EvalConfig, records: Sequence[dict[str, Any]]) -> PartialCompletions:
    """The kept completions of this evaluation (:mod:`.partial`), keyed by what generates them."""
    models = [m for m in (config.lm, config.vlm) if m is not None]
    header = {
        "system": config.system,
        "models": [asdict(m) for m in models],
        "files": [[files_signature(m.model), files_signature(m.transformers.adapter)] for m in models],
        "dataset": str(config.dataset),
        "split": config.split,
        "ids": ids_digest(str(r["id"]) for r in records),
        "batch_size": config.batch_size,
        "seed": config.seed,
    }
    return PartialCompletions(config.out, header)


@dataclass
class EvalResult:
    """What a run produced."""

    metrics: dict[str, Any]
    predictions: list[Prediction]
    skipped: list[Skipped]
    files: list[Path] = field(default_factory=list)


def run_eval(config: EvalConfig) -> EvalResult:
    """Evaluate ``config.system`` on the split and write the outputs into ``config.out``."""
    import torch

    torch.manual_seed(config.seed)  # sampling (temperature > 0, the reference's 0.1) is repeatable
    system = config.system
    records = read_split(config.dataset, config.split, _COLUMNS[system], f"--system {system}").to_list()
    records = records[: config.limit] if config.limit else records
    skipped: list[Skipped] = []
    if config.system in PROGRAMS:
        predictions, how = program_predictions(config, records)
        lengths, length_unit = program_lengths(config, [p.completion for p in predictions])
        for prediction, length in zip(predictions, lengths, strict=True):
            prediction.length = length
        info = _info(config, length_unit, "", skipped, perception_of(records))
        info["length_tokenizer"] = config.lm.model if length_unit == "tokens" else ""
        metrics = summarize(predictions, **info, **how)
        result = EvalResult(metrics, predictions, skipped)
        result.files = write_outputs(config, result)
        return result
    if config.system == "vlm":
        assert config.vlm is not None
        _check_bags(records, config.bag_root)
        backend = _load(config.vlm, vision=True)
        requests = _vlm_requests(records, config, skipped)
    else:
        backend = _load(config.lm, vision=False)
        requests = (_question_only_requests if system == "question-only" else _reasoner_requests)(records)
    open_backends = [backend]
    partial = _partial(config, records)
    try:
        by_index = _generate_all(backend, requests, len(records), config, partial)
        done = [records[i] for i in sorted(by_index)]
        completions = [by_index[i][0] for i in sorted(by_index)]
        tokens = [by_index[i][1] for i in sorted(by_index)]
        # Tokens generated when the model runs in-process; an HTTP server's completions count characters.
        length_unit = "tokens" if all(t is not None for t in tokens) else "characters"
        lengths = tokens if length_unit == "tokens" else [len(c) for c in completions]
        predictions = grade_records(done, completions, lengths, config.consistency_config)
        reference_label = _reference_label(config) if config.consistency else ""
        if config.consistency and any(p.checkable for p in predictions):
            if _reference_needs_loading(config):
                backend.close()  # one model in memory at a time
                open_backends.remove(backend)
            reference = _reference(config, backend)
            if reference is not backend:
                open_backends.append(reference)
            check_consistency(
                predictions, done, ConsistencyReward(reference, config.consistency_config), config.batch_size,
                config.progress,
            )  # fmt: skip
    finally:
        for model in open_backends:
            model.close()
    info = _info(config, length_unit, reference_label, skipped, perception_of(records))
    metrics = summarize(predictions, **info, lenient=lenient_summary(done, completions))
    result = EvalResult(metrics, predictions, skipped)
    result.files = write_outputs(config, result)
    partial.remove()
    return result


def _reference_label(config: EvalConfig) -> str:
    if config.reference is not None:
        return config.reference.model
    return f"{config.lm.model} (base LM{', adapter disabled' if config.lm.transformers.adapter else ''})"


def _reference_needs_loading(config: EvalConfig) -> bool:
    """Whether the consistency reference is a model of its own (else the evaluated LM is reused)."""
    return config.reference is not None or config.system == "vlm"


def _reference(config: EvalConfig, backend: GenerationBackend) -> GenerationBackend:
    """The consistency reference: ``--reference``, else the base LM, reusing ``backend`` when it is it."""
    if config.reference is not None:
        return _load(config.reference, vision=False)
    if config.system == "vlm":
        return _load(config.lm.with_adapter(""), vision=False)
    if config.lm.transformers.adapter:
        from embodied_r_ros.backends.adapter_off import AdapterOff

        return AdapterOff(backend)
    return backend


def perception_of(records: Sequence[dict[str, Any]]) -> str:
    """What described the key frames of ``records`` (their ``vlm`` column: a VLM's name, or the simulator's
    ground truth), joined when mixed; "" when the data set does not say."""
    return ", ".join(sorted({str(r["vlm"]) for r in records if r.get("vlm")}))


def _info(
    config: EvalConfig, length_unit: str, reference: str, skipped: list[Skipped], perception: str = ""
) -> dict[str, Any]:
    model = config.vlm if config.system == "vlm" and config.vlm is not None else config.lm
    labels = {
        "reasoner": "Embodied-R reasoner" + (" (adapter)" if config.lm.transformers.adapter else ""),
        "untrained": "untrained LM (baseline)",
        "question-only": "the LM without the descriptions (blind: question and options only)"
        + (" (adapter)" if config.lm.transformers.adapter else ""),
        "vlm": "VLM alone on the key frames (ablation)",
        "chance": "chance (uniform guess; numeric: the split's mean answer per task)",
        "oracle": "oracle (a program reading only the prompt: what the prompt allows)",
        "options-only": "options only (blind: a program reading only the option texts; numeric as chance)",
        "constant": "best constant (blind): one answer per task and environment, chosen on the train split",
    }
    return {
        "system": config.system,
        "label": labels[config.system],
        "dataset": str(config.dataset),
        "split": config.split,
        "models": {
            "lm": config.lm.model if config.system not in ("vlm", *PROGRAMS) else "",
            "adapter": config.lm.transformers.adapter if config.system in WITH_ADAPTER else "",
            "vlm": config.vlm.model if config.system == "vlm" and config.vlm else "",
            "reference": reference,
        },
        # The descriptions the reasoner read: a VLM, or ground-truth perception (a measuring instrument).
        "perception": perception if config.system != "vlm" else "",
        "generation": {
            "backend": model.backend,
            "max_new_tokens": model.max_new_tokens,
            "temperature": model.temperature,
            "batch_size": config.batch_size,
        },
        "consistency": asdict(config.consistency_config)
        if config.consistency and config.system not in PROGRAMS
        else "off",
        "length_unit": length_unit,
        "prompt_version": prompts.PROMPT_VERSION,
        **({"vlm_alone_prompt_version": VLM_ALONE_PROMPT_VERSION} if config.system == "vlm" else {}),
        "skipped": [asdict(s) for s in skipped],
    }


def _json_value(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_outputs(config: EvalConfig, result: EvalResult) -> list[Path]:
    """metrics.json, metrics.md, predictions.jsonl, per_task.png (and the training curves with
    ``config.train_log``) in ``config.out``; returns the paths written."""
    from .plots import load_log_history, plot_task_scores, plot_training_curves

    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "metrics.json", out / "metrics.md", out / "predictions.jsonl"]
    files[0].write_text(json.dumps(result.metrics, indent=1) + "\n", encoding="utf-8")
    files[1].write_text(metrics_markdown(result.metrics), encoding="utf-8")
    with files[2].open("w", encoding="utf-8") as handle:
        for p in result.predictions:
            row = {k: _json_value(v) for k, v in asdict(p).items() if k != "checkable"}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    if result.predictions:
        files.append(plot_task_scores(result.metrics, out / "per_task.png"))
    if config.train_log is not None:
        files += plot_training_curves(load_log_history(config.train_log), out)
    return files
