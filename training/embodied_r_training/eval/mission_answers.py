"""Answer accuracy over a long mission, with the oracle and blind baselines (issue 30, point 4).

For a mission (:mod:`embodied_r_training.synth.mission_writer`) and a durable memory of it (the node's
store after it replayed the bag and described its key frames in the background), every labelled question
is put to the pipeline as the node's ``search_memory`` question puts it:

1. **key frames**: :meth:`RobotHistory.search <embodied_r_ros.history.RobotHistory.search>` over the store
   opened read only (:class:`~embodied_r_ros.memory.read_only.ReadOnlyMemory`), the node's default key-frame
   and search settings, the question's window;
2. **descriptions**: the mission's ground-truth perception
   (:class:`~embodied_r_training.synth.mission_ground_truth.MissionGroundTruth`: a MEASURING INSTRUMENT
   computed from the mission's geometry, not a VLM), question-conditioned as the node's perceiver is;
3. **the reasoner prompt**: :func:`embodied_r_ros.reasoning.messages.reasoning_messages`, fitted to the LM's
   context first when an LM is given (:meth:`EmbodiedR.fit_prompt <embodied_r_ros.pipeline.EmbodiedR>`).

The same question is also put over its **evidence** key frames: for each object the labels name, its
first evidence interval (the sighting the question is about), widened by the search's ``pad_s`` as a
retrieved hit is, with the sighting's middle candidate kept as a hit; the key frames then follow the same
rule (:meth:`RobotHistory.keyframes_in_intervals`). The oracle over those prompts separates "the
retrieval missed the evidence" from "the prompt cannot carry the answer".

Systems (scored with the yardstick's functions, :mod:`.evaluate`: MC accuracy, numeric MRA, 95 %
bootstrap intervals):

* ``oracle``: :mod:`..tasks.mission.oracle` reads only the prompt's text (never mission.json); an abstention
  scores 0 and is counted (``answered``);
* ``oracle-evidence``: the same reader over the evidence key frames' prompt;
* ``options-only`` (:mod:`.baselines`, its rules chosen on the scored questions: flattering) and
  ``chance`` (1/k for MC, the kind's mean answer for numeric: frequency chance);
* ``question-only`` and ``lm``: the LM given as a model path (optional), without and with the
  descriptions.

**Evidence reached**: per question, the share of its evidence objects (:class:`MissionQuestion`) with a key
frame of the prompt inside one of their evidence intervals (:func:`.mission_recall.intervals_hit`); a
question counts as reached ("any") with one, fully ("all") with every one.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from embodied_r_ros.backends.base import ChatMessage
from embodied_r_ros.config import BufferConfig, KeyFrameConfig, ModelConfig
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.history import MemorySearchError, RobotHistory, WindowKeyFrames
from embodied_r_ros.memory.mission_time import place_in_mission
from embodied_r_ros.memory.reader import MemoryReader
from embodied_r_ros.memory.search import REASON_RETRIEVED, Interval, SearchSettings
from embodied_r_ros.memory.sightings import add_summary
from embodied_r_ros.memory.text_embedding import TextEmbedder
from embodied_r_ros.node_config import MemoryConfig
from embodied_r_ros.pipeline import EmbodiedR
from embodied_r_ros.question_file import MC, Question, read_questions
from embodied_r_ros.reasoning.messages import Reasoner, reasoning_messages
from embodied_r_ros.windows import Window

from ..synth.mission_ground_truth import MISSION_FILE, MissionGroundTruth
from ..tasks.mission.oracle import mission_oracle
from .evaluate import (
    Prediction,
    chance_predictions,
    constant_predictions,
    grade_records,
    options_only_predictions,
    summarize,
)
from .mission_recall import MissionRecallError, intervals_hit, labelled_questions

logger = logging.getLogger(__name__)

RETRIEVED, EVIDENCE = "retrieved", "evidence"  # where a prompt's key frames come from
ORACLE, ORACLE_EVIDENCE, OPTIONS_ONLY, CHANCE = "oracle", "oracle-evidence", "options-only", "chance"
CONSTANT = "constant"  # the best constant per kind, chosen on other missions (calibration)
QUESTIONS_FILE = "questions.jsonl"
QUESTION_ONLY, LM = "question-only", "lm"
SYSTEMS = (ORACLE, ORACLE_EVIDENCE, CONSTANT, OPTIONS_ONLY, CHANCE, QUESTION_ONLY, LM)
ALL = "all"  # the row over every question
PERCEPTION = "ground-truth perception of mission.json (a measuring instrument, not a VLM)"
SPAN_SLACK_S = 2.0  # a store holds "the mission" when its span is within this of the mission's ends

Span = tuple[int, int]


@dataclass(frozen=True)
class MissionQuestion:
    """A labelled question: its evidence intervals and, aligned with them, the object each one shows."""

    question: Question
    evidence: tuple[Span, ...]
    objects: tuple[int, ...]

    def intervals_of(self, obj: int) -> list[Span]:
        """The evidence intervals showing object ``obj``, in label order."""
        return [span for span, o in zip(self.evidence, self.objects, strict=True) if o == obj]

    def objects_reached(self, stamps: Sequence[int]) -> int:
        """How many of the evidence objects have a stamp inside one of their intervals."""
        return sum(intervals_hit(stamps, self.intervals_of(o)) > 0 for o in dict.fromkeys(self.objects))

    def objects_held(self, memory: MemoryReader) -> int:
        """How many of the evidence objects have a frame the memory stored inside one of their intervals
        (a sighting shorter than the candidates' spacing, 1 s, may have none: nothing can reach it)."""
        return sum(
            any(memory.candidates(a, b) for a, b in self.intervals_of(o)) for o in dict.fromkeys(self.objects)
        )


@dataclass(frozen=True)
class QuestionPrompt:
    """One question's reasoner prompt from one source of key frames (:data:`RETRIEVED` or
    :data:`EVIDENCE`): the key frames' stamps, the intervals they came from, the user turn (empty, with
    ``error``, when there were no key frames) and how many evidence objects its key frames reach."""

    id: str
    source: str
    keyframe_stamps: tuple[int, ...]
    spans: tuple[Span, ...]
    messages: tuple[ChatMessage, ...]
    reached: int
    objects: int
    error: str = ""
    hits_reached: int = 0  # evidence objects the search's hits alone reach (its retrieved key frames)

    @property
    def user(self) -> str:
        """The user turn (what the oracle reads), "" without key frames."""
        return next((m.joined_text for m in self.messages if m.role == "user"), "")


@dataclass
class MissionAnswersConfig:
    """The node's settings the questions are answered with (its defaults), and the LM (None: no LM runs;
    ``lm_questions`` > 0 runs it on the first that many questions of each kind only)."""

    keyframes: KeyFrameConfig = field(default_factory=KeyFrameConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    search: SearchSettings = field(default_factory=lambda: MemoryConfig().search())
    lm: ModelConfig | None = None
    lm_questions: int = 0


@dataclass
class QuestionResult:
    """One question: its kind, the truth, each system's answer and score, each source's key frames and
    evidence reached, the evidence objects the memory holds a frame of, why the oracle abstained (per
    source; "" when it answered) and the LM's completions."""

    id: str
    kind: str
    form: str
    solution: str
    answers: dict[str, Any]
    scores: dict[str, float]
    keyframes: dict[str, int]
    spans: dict[str, int]
    reached: dict[str, int]
    hits_reached: int  # evidence objects the retrieved hits reach (recall@k's numerator, per question)
    objects: int
    held: int
    abstained: dict[str, str]
    completions: dict[str, str] = field(default_factory=dict)  # the LM's (question-only, lm)


@dataclass
class MissionAnswers:
    """The evaluation of one (mission, store) pair: per question, and the metrics per system
    (:func:`.evaluate.summarize`'s form: per task and form, overall, with bootstrap intervals)."""

    mission: str
    minutes: float
    store: str
    questions: list[QuestionResult]
    metrics: dict[str, dict[str, Any]]
    lm: str = ""
    blind_rules: str = "these questions (flattering)"  # what the blind readers chose their rules on

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a JSON report."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MissionAnswers:
        """The evaluation :meth:`to_dict` wrote (keys it did not write, e.g. a report's seed, are ignored)."""
        fields_ = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in fields_}
        return cls(**{**kept, "questions": [QuestionResult(**q) for q in data["questions"]]})


# ---------------------------------------------------------------------------------------------- inputs


def mission_questions(mission_dir: str | Path) -> list[MissionQuestion]:
    """The questions of ``mission_dir`` with evidence in mission.json, in file order (raises
    :class:`~.mission_recall.MissionRecallError` naming the file and the fix when they cannot be read)."""
    mission_dir = Path(mission_dir)
    labelled = {q.id for q in labelled_questions(mission_dir)}  # checks both files
    labels = json.loads((mission_dir / MISSION_FILE).read_text(encoding="utf-8"))["questions"]
    found = []
    for question in read_questions(mission_dir / QUESTIONS_FILE):
        if question.id not in labelled:
            continue
        label = labels[question.id]
        evidence = tuple((int(a), int(b)) for a, b in label["evidence"])
        objects = tuple(int(o) for o in label.get("evidence_objects", []))
        if len(objects) != len(evidence):
            raise MissionRecallError(
                f"{mission_dir / MISSION_FILE}: question {question.id} has {len(evidence)} evidence "
                f"intervals but {len(objects)} evidence objects; write the mission again with "
                "bench/make_mission.py"
            )
        found.append(MissionQuestion(question, evidence, objects))
    return found


def check_store_holds_mission(memory: MemoryReader, mission_dir: str | Path) -> None:
    """Raise ValueError naming both when the store's span is not the mission's (another mission's store)."""
    data = json.loads((Path(mission_dir) / MISSION_FILE).read_text(encoding="utf-8"))
    start, end = int(data["start_ns"]), int(data["end_ns"])
    span = memory.span()
    slack = round(SPAN_SLACK_S * NS_PER_S)
    if span is None or abs(span[0] - start) > slack or abs(span[1] - end) > slack:
        held = "nothing" if span is None else f"{(span[1] - span[0]) / NS_PER_S:.1f} s from {span[0]}"
        raise ValueError(
            f"memory store {memory.path} holds {held}, but mission {mission_dir} runs "
            f"{(end - start) / NS_PER_S:.1f} s from {start}: give the store the node wrote while replaying "
            "this mission (bench/bench_mission_memory.py)"
        )


def evidence_intervals(question: MissionQuestion, memory: MemoryReader, pad_s: float) -> list[Interval]:
    """The intervals a search that found exactly the evidence would give: per evidence object its first
    interval holding a stored candidate, widened by ``pad_s``, its middle candidate the hit; overlapping
    ones joined (in time order, as :meth:`RobotHistory.keyframes_in_intervals` wants them)."""
    pad = round(pad_s * NS_PER_S)
    chosen: list[Interval] = []
    for obj in dict.fromkeys(question.objects):
        for a, b in question.intervals_of(obj):
            candidates = memory.candidates(a, b)
            if candidates:
                middle = candidates[len(candidates) // 2].stamp_ns
                chosen.append(Interval(a - pad, b + pad, 1.0, (middle,)))
                break
    joined: list[Interval] = []
    for interval in sorted(chosen, key=lambda i: i.start_ns):
        if joined and interval.start_ns <= joined[-1].end_ns:
            last = joined[-1]
            hits = tuple(sorted({*last.hits, *interval.hits}))
            joined[-1] = replace(last, end_ns=max(last.end_ns, interval.end_ns), hits=hits)
        else:
            joined.append(interval)
    return joined


# --------------------------------------------------------------------------------------------- prompts


class MissionPrompter:
    """Builds each question's reasoner prompt as the node would (see the module docstring): a history over
    the store, the mission's ground-truth perceiver, the embedder of searches and, with an LM, the
    pipeline whose context the prompt is fitted to."""

    def __init__(
        self,
        mission_dir: str | Path,
        memory: MemoryReader,
        embedder: TextEmbedder,
        config: MissionAnswersConfig,
        pipeline: EmbodiedR | None = None,
    ) -> None:
        self.memory, self.embedder, self.config = memory, embedder, config
        self.history = RobotHistory(config.buffer, config.keyframes, memory=memory)
        self.pipeline = pipeline
        mission_json = Path(mission_dir) / MISSION_FILE
        self.perceiver = pipeline.perceiver if pipeline else MissionGroundTruth(mission_json)

    def prompt(self, question: MissionQuestion, source: str) -> QuestionPrompt:
        """The prompt of ``question`` over its retrieved or its evidence key frames."""
        q = question.question
        try:
            if source == RETRIEVED:
                window = Window(start_ns=q.start_ns, end_ns=q.end_ns)
                found = self.history.search(q.question, q.options, window, self.embedder, self.config.search)
            else:
                intervals = evidence_intervals(question, self.memory, self.config.search.pad_s)
                found = self.history.keyframes_in_intervals(intervals)
        except MemorySearchError as exc:
            found, error = None, str(exc)
        else:
            error = "" if found.keyframes else "no key frame in the intervals"
        return self._described(question, source, found, error)

    def _described(
        self, question: MissionQuestion, source: str, found: WindowKeyFrames | None, error: str
    ) -> QuestionPrompt:
        q, objects = question.question, len(set(question.objects))
        if found is None or not found.keyframes:
            return QuestionPrompt(q.id, source, (), (), (), 0, objects, error)
        keyframes = found.keyframes
        descriptions = self.perceiver.describe(keyframes, q.question, q.options)
        if found.mission_origin_ns is not None:  # as the node's pipeline does for a search
            descriptions = place_in_mission(descriptions, keyframes, found.mission_origin_ns)
        if self.pipeline is not None:  # the node fits the prompt to its LM's context
            fitted = self.pipeline.fit_prompt(descriptions, keyframes, q.question, q.options, found.summary)
            descriptions = fitted.descriptions
        stamps = tuple(d.stamp_ns for d in descriptions)
        descriptions = add_summary(descriptions, found.summary)  # a count's tally, as the node's pipeline
        messages = tuple(reasoning_messages(descriptions, q.question, q.options))
        hits = [k.frame.stamp_ns for k in keyframes if k.reason == REASON_RETRIEVED]
        return QuestionPrompt(
            q.id, source, stamps, found.spans(), messages, question.objects_reached(stamps), objects,
            hits_reached=question.objects_reached(hits),
        )  # fmt: skip


# ------------------------------------------------------------------------------------------------ systems


def record(question: Question, prompt: QuestionPrompt) -> dict[str, Any]:
    """The question in the form :mod:`.evaluate` scores (``embodied-r prepare``'s grading columns and the
    prompt as chat messages)."""
    return {
        "id": question.id,
        "task": question.task,
        "question": question.question,
        "options": list(question.options),
        "solution": str(question.answer),
        "unit": question.unit,
        "prompt": [{"role": m.role, "content": m.joined_text} for m in prompt.messages],
    }


def calibration_records(mission_dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The labelled questions of other missions as the blind readers choose their rules on them (task,
    options, solution, unit: no prompt, which they never read)."""
    return [
        {"id": q.id, "task": q.task, "question": q.question, "options": list(q.options),
         "solution": str(q.answer), "unit": q.unit}
        for mission in mission_dirs for q in read_questions(Path(mission) / QUESTIONS_FILE)
    ]  # fmt: skip


def oracle_completions(prompts: Sequence[QuestionPrompt]) -> tuple[list[str], list[str]]:
    """The mission oracle's completion for each prompt ("" when it abstains) and why it abstained."""
    completions, abstained = [], []
    for prompt in prompts:
        result = mission_oracle(prompt.user) if prompt.messages else None
        if result is None or result.answer is None:
            completions.append("")
            abstained.append(prompt.error if result is None else result.abstained)
        else:
            completions.append(f"<think>{result.reasoning}</think><answer>{result.answer}</answer>")
            abstained.append("")
    return completions, abstained


def _lm_predictions(
    pipeline: EmbodiedR, records: Sequence[dict[str, Any]], prompts: Sequence[QuestionPrompt]
) -> dict[str, list[Prediction]]:
    """The LM's answers without the descriptions (question-only) and with them (the full prompt; a
    question without key frames gets no answer, as the node answers it with an error)."""
    backend = pipeline.reasoner.backend
    blind = backend.generate([reasoning_messages([], r["question"], r["options"]) for r in records])
    asked = [i for i, p in enumerate(prompts) if p.messages]
    full = [""] * len(records)
    completions = backend.generate([list(prompts[i].messages) for i in asked])
    for i, completion in zip(asked, completions, strict=True):
        full[i] = completion
    return {QUESTION_ONLY: grade_records(records, blind), LM: grade_records(records, full)}


def lm_question_rows(records: Sequence[dict[str, Any]], per_kind: int) -> list[int]:
    """The rows of ``records`` the LM answers: the first ``per_kind`` of each kind (0: all), so a limit
    samples every kind (the questions come grouped by kind)."""
    if per_kind <= 0:
        return list(range(len(records)))
    seen: Counter[str] = Counter()
    rows = []
    for i, rec in enumerate(records):
        seen[rec["task"]] += 1
        if seen[rec["task"]] <= per_kind:
            rows.append(i)
    return rows


def load_pipeline(mission_dir: str | Path, config: MissionAnswersConfig) -> EmbodiedR | None:
    """The pipeline of the ground-truth perceiver and ``config.lm`` (None without an LM)."""
    if config.lm is None:
        return None
    from embodied_r_ros.backends import load_role

    perceiver = MissionGroundTruth(Path(mission_dir) / MISSION_FILE)
    reasoner = Reasoner(load_role("LM", "lm", config.lm, vision=False))
    return EmbodiedR(perceiver, reasoner, config.keyframes, PERCEPTION)


def evaluate_mission(
    mission_dir: str | Path,
    memory: MemoryReader,
    embedder: TextEmbedder,
    config: MissionAnswersConfig | None = None,
    pipeline: EmbodiedR | None = None,
    calibration: Sequence[dict[str, Any]] | None = None,
) -> MissionAnswers:
    """Every labelled question of ``mission_dir`` over ``memory`` (a store of that mission), answered by
    every system (see the module docstring); ``pipeline`` carries the LM (:func:`load_pipeline`).
    ``calibration``: other missions' questions (:func:`calibration_records`) the blind readers choose their
    rules on (options-only's rule per kind, and the ``constant`` row: the best constant per kind); without
    it options-only chooses on the scored questions (flattering) and there is no constant row."""
    config = config or MissionAnswersConfig()
    check_store_holds_mission(memory, mission_dir)
    questions = mission_questions(mission_dir)
    prompter = MissionPrompter(mission_dir, memory, embedder, config, pipeline)
    prompts = {source: [prompter.prompt(q, source) for q in questions] for source in (RETRIEVED, EVIDENCE)}
    records = [record(q.question, p) for q, p in zip(questions, prompts[RETRIEVED], strict=True)]
    predictions: dict[str, list[Prediction]] = {}
    abstained: dict[str, list[str]] = {}
    for system, source in ((ORACLE, RETRIEVED), (ORACLE_EVIDENCE, EVIDENCE)):
        completions, abstained[system] = oracle_completions(prompts[source])
        predictions[system] = grade_records(records, completions)
    predictions[OPTIONS_ONLY] = options_only_predictions(records, calibration)
    predictions[CHANCE] = chance_predictions(records)
    if calibration:
        predictions[CONSTANT] = constant_predictions(records, calibration)[0]
    lm_rows: dict[int, int] = {}  # question -> its place among the LM's predictions
    if pipeline is not None:
        asked = lm_question_rows(records, config.lm_questions)
        lm_rows = {row: j for j, row in enumerate(asked)}
        predictions.update(
            _lm_predictions(pipeline, [records[i] for i in asked], [prompts[RETRIEVED][i] for i in asked])
        )
    results = []
    for i, (question, rec) in enumerate(zip(questions, records, strict=True)):
        by_system = {s: p[i] for s, p in predictions.items() if s not in (QUESTION_ONLY, LM)}
        if i in lm_rows:
            by_system.update({s: predictions[s][lm_rows[i]] for s in (QUESTION_ONLY, LM)})
        results.append(
            QuestionResult(
                id=rec["id"],
                kind=rec["task"],
                form=question.question.form,
                solution=rec["solution"],
                answers={s: p.answer for s, p in by_system.items()},
                scores={s: p.score for s, p in by_system.items()},
                keyframes={src: len(prompts[src][i].keyframe_stamps) for src in prompts},
                spans={src: len(prompts[src][i].spans) for src in prompts},
                reached={src: prompts[src][i].reached for src in prompts},
                hits_reached=prompts[RETRIEVED][i].hits_reached,
                objects=prompts[RETRIEVED][i].objects,
                held=question.objects_held(memory),
                abstained={s: a[i] for s, a in abstained.items()},
                completions={s: p.completion for s, p in by_system.items() if s in (QUESTION_ONLY, LM)},
            )
        )
    data = json.loads((Path(mission_dir) / MISSION_FILE).read_text(encoding="utf-8"))
    return MissionAnswers(
        mission=str(data.get("mission", Path(mission_dir).name)),
        minutes=float(data["config"]["minutes"]),
        store=str(memory.path),
        questions=results,
        metrics={s: summarize(p, system=s) for s, p in predictions.items()},
        lm=config.lm.model if config.lm is not None else "",
        blind_rules="other missions" if calibration else "these questions (flattering)",
    )


# ------------------------------------------------------------------------------------------------ tables


@dataclass(frozen=True)
class KindRow:
    """One row of the table: a kind (or :data:`ALL`), its metric, n, the share of questions whose every
    evidence object the memory holds a frame of, evidence reached over the retrieved key frames (any / all
    objects) and over the evidence key frames (all), and per system its score, how
    many it scored and how many the oracles answered."""

    kind: str
    metric: str
    n: int
    held_all: float
    recall: float  # share of questions whose search hits reach an evidence object (recall@k)
    reached_any: float
    reached_all: float
    evidence_all: float
    scores: dict[str, float | None]
    scored: dict[str, int]
    answered: dict[str, int]


def kind_rows(result: MissionAnswers) -> list[KindRow]:
    """The table's rows: one per kind (in the mission's order), then :data:`ALL`."""
    by_kind: dict[str, list[QuestionResult]] = defaultdict(list)
    for q in result.questions:
        by_kind[q.kind].append(q)
    groups = [*by_kind.items(), (ALL, list(result.questions))]
    rows = []
    for kind, group in groups:
        n = len(group)
        forms = {q.form for q in group}
        metric = "mean" if len(forms) > 1 else ("accuracy" if forms == {MC} else "MRA")
        scores: dict[str, float | None] = {}
        scored: dict[str, int] = {}
        for system in result.metrics:
            values = [q.scores[system] for q in group if system in q.scores]
            scores[system] = sum(values) / len(values) if values else None
            scored[system] = len(values)
        answered = {s: sum(q.abstained.get(s) == "" for q in group) for s in (ORACLE, ORACLE_EVIDENCE)}
        rows.append(
            KindRow(
                kind=kind,
                metric=metric,
                n=n,
                held_all=sum(q.held == q.objects for q in group) / max(1, n),
                recall=sum(q.hits_reached > 0 for q in group) / max(1, n),
                reached_any=sum(q.reached[RETRIEVED] > 0 for q in group) / max(1, n),
                reached_all=sum(q.reached[RETRIEVED] == q.objects for q in group) / max(1, n),
                evidence_all=sum(q.reached[EVIDENCE] == q.objects for q in group) / max(1, n),
                scores=scores,
                scored=scored,
                answered=answered,
            )
        )
    return rows


def _score(row: KindRow, system: str) -> str:
    value = row.scores.get(system)
    if value is None:
        return "–"
    text = f"{value:.2f}"
    if system in row.answered:
        text += f" ({row.answered[system]}/{row.n})"
    elif row.scored.get(system, row.n) != row.n:
        text += f" (n={row.scored[system]})"
    return text


def _systems(results: Sequence[MissionAnswers]) -> list[str]:
    present = {s for r in results for s in r.metrics}
    return [s for s in SYSTEMS if s in present]


def answers_markdown(result: MissionAnswers) -> str:
    """One mission's table: per kind and over all questions, evidence reached and every system's score."""
    systems = _systems([result])
    header = ["kind", "metric", "n", "memory holds (all)", "reached (any / all)", "evidence frames (all)"]
    header += systems
    lines = [
        f"### {result.mission} ({result.minutes:g} min), store {result.store}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * 2 + "---:|" * (len(header) - 2),
    ]
    for row in kind_rows(result):
        cells = [
            row.kind if row.kind != ALL else "**all**",
            row.metric,
            str(row.n),
            f"{row.held_all:.2f}",
            f"{row.reached_any:.2f} / {row.reached_all:.2f}",
            f"{row.evidence_all:.2f}",
            *(_score(row, s) for s in systems),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", _footnote(result)]
    return "\n".join(lines) + "\n"


def _footnote(result: MissionAnswers) -> str:
    cis = []
    for system, metrics in result.metrics.items():
        overall = metrics["overall"]
        for key, name in (("mc_accuracy", "MC accuracy"), ("numeric_mra", "numeric MRA")):
            ci = overall.get(f"{key}_ci")
            if overall.get(key) is not None and ci:
                cis.append(f"{system} {name} {overall[key]:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]")
    lm = f"; LM `{result.lm}`" if result.lm else ""
    return (
        f"Descriptions: {PERCEPTION}{lm}. Oracle cells: score (answered / n); an abstention scores 0. "
        f"options-only picks its rule on {result.blind_rules}"
        + ("; constant: the best constant per kind chosen there" if CONSTANT in result.metrics else "")
        + "; chance is 1/k (MC) or the kind's mean answer (numeric, of these questions). 95 % bootstrap "
        "intervals: " + "; ".join(cis) + "."
    )


def length_markdown(results: Sequence[MissionAnswers]) -> str:
    """The table against mission length: per mission (shortest first) and kind, evidence reached and the
    scores of the oracle (retrieved and evidence key frames) and the blind baselines."""
    systems = [s for s in _systems(results)]
    header = [
        "mission",
        "min",
        "kind",
        "n",
        "holds (all)",
        "reached (all)",
        "evidence frames (all)",
        *systems,
    ]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---|" + "---:|" * (len(header) - 3)]
    for result in sorted(results, key=lambda r: (r.minutes, r.mission)):
        for row in kind_rows(result):
            cells = [
                result.mission,
                f"{result.minutes:g}",
                row.kind if row.kind != ALL else "**all**",
                str(row.n),
                f"{row.held_all:.2f}",
                f"{row.reached_all:.2f}",
                f"{row.evidence_all:.2f}",
                *(_score(row, s) for s in systems),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
