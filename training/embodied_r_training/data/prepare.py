"""``embodied-r prepare``: rosbags (or robots' memory stores) + questions -> the data set the RL recipe
trains on.

For each question of the questions files (the format ``embodied-r synth`` writes): the candidate frames of
its window (:mod:`.bag_reader`), the key frames (:class:`~embodied_r_ros.keyframes.WindowReplay`: what the
node answers after watching the bag from its first frame, the same key frames), the VLM
descriptions (batched across questions and key frames; cached on disk by :mod:`.description_cache`), and
the LM chat built by :func:`embodied_r_ros.reasoning.messages.reasoning_messages`, exactly what the node asks.

``--perceiver ground_truth`` describes the key frames with the simulator's ground truth instead of a VLM
(:mod:`..perceivers`, a measuring instrument for synthetic bags: ``--scene`` names the scene file, by
default the ``scene.json`` beside each bag directory). It is cheaper than a cache lookup, so the description
cache is bypassed; records say ``vlm: "ground-truth:scene.json"``.

A question's ``bag`` may name a robot's durable memory instead (a node's ``.sqlite`` file, see
:mod:`.memory_source`): its window gets the key frames the node answers it with from that memory, the
images and poses it stored; ``start_s``/``end_s`` count from the oldest frame of the store's current
timeline. The file is opened for reading only and never changed.

Output directory::

    OUT/{train,val,test}.jsonl and .parquet   one record per question (see :func:`build_record`)
    OUT/failures.jsonl                        what could not be processed, by name, with the reason
    OUT/summary.json                          counts per task type and split, VLM calls, cache hits

Splits are by scene (the question's bag), shuffled with ``--seed``; ``--folds K`` adds a ``fold`` column
(0..K-1, by scene) for the paper's K-fold protocol. The command ends with status 1 when anything failed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from tqdm import tqdm

from embodied_r_ros.backends import BackendError
from embodied_r_ros.config import (
    REQUIRED,
    Alias,
    ConfigError,
    KeyFrameConfig,
    ModelConfig,
    PerceptionConfig,
    PipelineConfig,
    param,
    section,
)
from embodied_r_ros.keyframes import KeyFrame, WindowReplay
from embodied_r_ros.memory.read_only import ReadOnlyMemory
from embodied_r_ros.memory.records import MemoryStoreError
from embodied_r_ros.perceivers import PerceiverRegistry, core_perceivers
from embodied_r_ros.perception import KeyFramePerceiver, PerceptionQuery
from embodied_r_ros.question_file import Question, bag_path, read_questions
from embodied_r_ros.reasoning import prompts

from ..perceivers import GROUND_TRUTH
from ..perceivers import register as register_training_perceivers
from ..synth.ground_truth import (
    DEFAULT_SCENE_FILE,
    DESCRIPTION,
    LABEL_PREFIX,
    GroundTruthError,
    GroundTruthScenes,
    scene_file_for_bag,
)
from .bag_reader import BagReader, BagReadError, BagTopics
from .description_cache import DescriptionCache, cache_key, generation_settings
from .memory_source import is_memory_store, memory_keyframes
from .schema import make_record, write_split
from .splits import SPLITS, fold_scenes, split_scenes

logger = logging.getLogger(__name__)

DEFAULT_CACHE = Path.home() / ".cache" / "embodied_r" / "descriptions"


def prepare_perceivers() -> PerceiverRegistry:
    """The perceivers ``--perceiver`` may name: the core's VLM and this package's ground truth."""
    registry = core_perceivers()
    register_training_perceivers(registry)
    return registry


def _default_perception() -> PerceptionConfig:
    return PerceptionConfig(scene=DEFAULT_SCENE_FILE)


@dataclass
class PrepareConfig:
    """Everything ``embodied-r prepare`` needs; the fields' flags are declared with them."""

    questions: list[Path]
    out: Path = param(REQUIRED, "output data-set directory", flag="--out")
    vlm: ModelConfig = section(
        ModelConfig,
        model={"flag": Alias("--vlm", "VLM: local directory or served model name (--perceiver vlm)")},
        # No choices: the command names the new spelling of a retired --vlm-backend ground_truth.
        backend={"flag": Alias("--vlm-backend", "transformers or openai"), "choices": ()},
        openai={
            "base_url": {"flag": Alias("--base-url", "openai backend: server URL")},
            "max_concurrency": {"flag": Alias("--concurrency", "openai backend: requests in flight")},
        },
        transformers={"device": {"flag": "--device"}},
        max_new_tokens={"flag": "--max-new-tokens"},
    )
    # perceiver ground_truth: perception.scene is each bag's scene file, a bare name looked up beside the
    # bag directory (scene_file_for_bag), default scene.json.
    perception: PerceptionConfig = section(
        _default_perception,
        perceiver={
            "flag": Alias(
                "--perceiver",
                "vlm (the VLM of --vlm), or ground_truth: no VLM, a measuring instrument for `embodied-r "
                "synth` bags that describes key frames from the scene's geometry (what a perfect VLM would "
                "say)",
            ),
            "choices": prepare_perceivers().names(),
        },
        scene={
            "flag": Alias(
                "--scene",
                "--perceiver ground_truth: the scene file (or a mission's mission.json); a bare name is "
                f"looked up beside each bag directory or memory store (default {DEFAULT_SCENE_FILE})",
            )
        },
    )
    cache: Path = param(DEFAULT_CACHE, f"description cache ({DEFAULT_CACHE})", flag="--cache")
    topics: BagTopics = field(default_factory=BagTopics)
    keyframes: KeyFrameConfig = section(
        KeyFrameConfig,
        max_keyframes={
            "flag": Alias(
                "--max-keyframes",
                "key frames per question at most (paper: 32; fewer make shorter prompts, as the node's "
                "keyframes.max_keyframes does)",
            )
        },
    )
    seed: int = param(0, "split shuffle seed", flag="--seed")
    fractions: tuple[float, float, float] = param((0.8, 0.1, 0.1), "TRAIN,VAL,TEST fractions", flag="--split")
    folds: int = param(0, "add a fold column with K folds by scene", flag="--folds")
    # A kill loses at most one batch.
    batch_size: int = param(32, "VLM requests per generate call", flag="--batch-size")
    progress: bool = param(True, "progress bars", flag=Alias("--no-progress", "no progress bars"))

    @property
    def ground_truth(self) -> bool:
        """Whether the descriptions come from the simulator's ground truth instead of a VLM."""
        return self.perception.perceiver == GROUND_TRUTH

    @property
    def perception_label(self) -> str:
        """What the records' ``vlm`` column says: the VLM's name, or "ground-truth:scene.json"."""
        return GroundTruthScenes(self.perception.scene).label if self.ground_truth else self.vlm.model

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.folds == 1 or self.folds < 0:
            raise ConfigError(f"--folds must be 0 (off) or >= 2, got {self.folds}")
        if len(self.fractions) != 3 or min(self.fractions) < 0 or not sum(self.fractions) > 0:
            raise ConfigError(
                f"--split wants three non-negative fractions TRAIN,VAL,TEST, got {self.fractions}"
            )


@dataclass
class Failure:
    """One thing that could not be processed: ``what`` names it (question id, bag or file)."""

    what: str
    reason: str


@dataclass
class Item:
    """One question on its way through the pipeline."""

    question: Question
    bag: Path
    scene: str
    keyframes: list[KeyFrame]
    key: str  # description cache key; "" = not cached (ground truth)
    replies: list[str] | None = None


@dataclass
class PrepareResult:
    """What a run produced."""

    records: list[dict[str, Any]]
    failures: list[Failure]
    vlm_calls: int = 0
    vlm_requests: int = 0
    cache_hits: int = 0
    perception: str = ""  # the records' ``vlm``: the VLM's name, or "ground-truth:scene.json"


def _unlabelled(question: Question) -> str:
    """What a training record cannot do without and ``question`` lacks ('' when it has everything)."""
    lacking = [key for key, value in (("id", question.id), ("bag", question.bag)) if not value]
    if question.answer is None:
        lacking.append("answer")
    if not question.has_window():
        lacking.append("start_ns/end_ns (or start_s/end_s)")
    return ", ".join(lacking)


def _load_questions(config: PrepareConfig, failures: list[Failure]) -> list[tuple[Question, Path]]:
    loaded = []
    for path in config.questions:
        try:
            questions = read_questions(path)
        except (OSError, ValueError) as exc:
            failures.append(Failure(str(path), f"cannot read the questions file: {exc}"))
            continue
        for number, question in enumerate(questions, start=1):
            lacking = _unlabelled(question)
            if lacking:
                what = f"{path}: question {question.id or number}"
                failures.append(Failure(what, f"lacks {lacking}, which a training record needs"))
            else:
                loaded.append((question, bag_path(path, question)))
    return loaded


def _window_ns(question: Question, reader: BagReader) -> tuple[int, int]:
    """The window in bag time: the absolute stamps when given, else seconds from the bag start."""
    return _window_from(question, reader.start_ns)


def _window_from(question: Question, first_ns: int) -> tuple[int, int]:
    """The window in camera time: the absolute stamps when given, else seconds from ``first_ns`` (the bag's
    start, or the memory store's oldest frame)."""
    if question.start_ns or question.end_ns:
        return question.start_ns, question.end_ns
    return first_ns + round(question.start_s * 1e9), first_ns + round(question.end_s * 1e9)


def bag_keyframes(
    reader: BagReader,
    windows: Sequence[tuple[int, int]],
    config: KeyFrameConfig,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[list[KeyFrame] | BagReadError]:
    """Key frames of each window of one bag, as the node answers them after the bag has played into it
    from its first frame (:class:`~embodied_r_ros.keyframes.WindowReplay`, the one rule), in ONE pass.

    The bag is one stream: the reader hands over, in stamp order, its candidates from the first image and
    its last image (each read and decoded once; with an index only those are read at all). Returns per
    window its key frames or the error that ended it (outside the bag, no frames, an image that cannot be
    decoded).
    """
    errors: list[BagReadError | None] = [None] * len(windows)
    for i, (start, end) in enumerate(windows):
        if end < reader.start_ns or start > reader.end_ns or end < start:
            errors[i] = BagReadError(
                f"window [{start}, {end}] ns lies outside bag {reader.path} "
                f"([{reader.start_ns}, {reader.end_ns}] ns)"
            )
    valid = [i for i, error in enumerate(errors) if error is None]
    replay = WindowReplay([windows[i] for i in valid], config)
    # A bag that cannot be read to its end fails all its windows: their key frames depend on all of it.
    (failed,) = reader.scan([(reader.start_ns, reader.end_ns)], lambda _, f: replay.push(f), on_progress)
    found = replay.finish()
    results: list[list[KeyFrame] | BagReadError] = list(errors)  # type: ignore[arg-type]
    for i, keyframes in zip(valid, found, strict=True):
        start, end = windows[i]
        empty = BagReadError(f"window [{start}, {end}] ns of bag {reader.path} holds no frames")
        results[i] = failed or (keyframes if keyframes else empty)
    return results


def iter_items(
    config: PrepareConfig, questions: Sequence[tuple[Question, Path]], failures: list[Failure]
) -> Iterator[Item]:
    """Key frames and cache keys of every question, source by source; failed sources and windows go to
    ``failures``, by question, with the reason naming the bag or store.

    Each bag is read once for all its questions (:func:`bag_keyframes`), each memory store opened once
    (:func:`store_keyframes`); progress: one bar over the questions and one over the current bag's image
    messages.
    """
    by_bag: dict[Path, list[Question]] = defaultdict(list)
    for question, bag in questions:
        by_bag[bag].append(question)
    bar = tqdm(total=len(questions), desc="questions", unit="question", disable=not config.progress)
    try:
        for bag, bag_questions in by_bag.items():
            if is_memory_store(bag):
                found = store_keyframes(bag, bag_questions, config.keyframes)
            else:
                found = _bag_source_keyframes(bag, bag_questions, config)
            for question, keyframes in zip(bag_questions, found, strict=True):
                bar.update(1)
                if isinstance(keyframes, Exception):
                    failures.append(Failure(question.id, str(keyframes)))
                    continue
                key = "" if config.ground_truth else _cache_key(config, question, keyframes)
                yield Item(question, bag, question.bag, keyframes, key)
    finally:
        bar.close()


def _bag_source_keyframes(
    bag: Path, questions: Sequence[Question], config: PrepareConfig
) -> list[list[KeyFrame] | BagReadError]:
    """Key frames of each question's window of one bag (:func:`bag_keyframes`), or why there are none."""
    try:
        reader = BagReader(bag, config.topics, config.keyframes.candidate_fps)
    except BagReadError as exc:
        return [exc] * len(questions)
    with (
        reader,
        tqdm(
            desc=f"{bag.parent.name}: frames read", unit="frame", leave=False, disable=not config.progress
        ) as frames_bar,
    ):

        def progress(done: int, total: int) -> None:
            frames_bar.total = total
            frames_bar.update(done - frames_bar.n)

        windows = [_window_ns(question, reader) for question in questions]
        return bag_keyframes(reader, windows, config.keyframes, progress)


def store_keyframes(
    store: Path, questions: Sequence[Question], config: KeyFrameConfig
) -> list[list[KeyFrame] | MemoryStoreError]:
    """Key frames of each question's window of one memory store, as the node answers it from its memory
    (:func:`~.memory_source.memory_keyframes`), or why there are none (a store that cannot be read, a
    window outside its current timeline, named)."""
    try:
        memory = ReadOnlyMemory(store)
    except MemoryStoreError as exc:
        return [exc] * len(questions)
    with memory:
        span = memory.span()
        if span is None:
            empty = MemoryStoreError(f"memory store {store} holds no frames (on its current timeline)")
            return [empty] * len(questions)
        windows = [_window_from(question, span[0]) for question in questions]
        return memory_keyframes(memory, windows, config)


def _cache_key(config: PrepareConfig, question: Question, keyframes: Sequence[KeyFrame]) -> str:
    return cache_key(
        config.vlm.model,
        [k.frame for k in keyframes],
        question.question,
        question.options,
        generation_settings(config.vlm),
    )


class _Perceivers:
    """The perceiver of each bag, from the registry: one for all bags (the VLM, loaded on first use), or
    with ground truth one per scene file (each bag's, see :func:`scene_file_for_bag`)."""

    def __init__(self, config: PrepareConfig) -> None:
        self.registry = prepare_perceivers()
        self.pipeline = PipelineConfig(perception=config.perception, vlm=config.vlm)
        self.ground_truth = config.ground_truth
        self._made: dict[str, KeyFramePerceiver] = {}

    def for_bag(self, bag: Path) -> KeyFramePerceiver:
        """The bag's perceiver; with ground truth, a bag without a usable scene file raises GroundTruthError
        (its questions fail, not the run)."""
        if not self.ground_truth:
            if "" not in self._made:
                self._made[""] = self.registry.create(self.pipeline)
            return self._made[""]
        scene = str(scene_file_for_bag(bag, self.pipeline.perception.scene or DEFAULT_SCENE_FILE))
        if scene not in self._made:
            perception = dataclasses.replace(self.pipeline.perception, scene=scene)
            try:
                self._made[scene] = self.registry.create(
                    dataclasses.replace(self.pipeline, perception=perception)
                )
            except BackendError as exc:
                raise GroundTruthError(str(exc)) from exc
        return self._made[scene]

    def close(self) -> None:
        for perceiver in self._made.values():
            perceiver.close()


@dataclass
class VlmStats:
    """VLM work done by :func:`describe_items`."""

    calls: int = 0
    requests: int = 0
    cache_hits: int = 0


def describe_items(
    config: PrepareConfig,
    items: Iterable[Item],
    cache: DescriptionCache,
    stats: VlmStats,
    failures: list[Failure],
) -> Iterator[Item]:
    """Yield ``items`` with ``replies`` filled: from the cache at once, else from the perceiver in batches.

    Items are consumed lazily and each batch is written to the cache as soon as it is generated, so only
    one batch of key-frame images is held and a kill loses at most the batch in flight. The VLM is loaded
    on the first miss (a fully cached run never loads it). With ground truth, nothing is cached and a bag
    without its scene file fails its questions by name (``failures``), not the run.
    """
    perceivers = _Perceivers(config)
    batch: list[Item] = []

    def flush() -> list[Item]:
        # One call per perceiver in the batch: the VLM's whole batch at once, ground truth per scene.
        groups: dict[int, tuple[KeyFramePerceiver, list[Item]]] = {}
        done: list[Item] = []
        for item in batch:
            try:
                perceiver = perceivers.for_bag(item.bag)
            except GroundTruthError as exc:
                failures.append(Failure(item.question.id, str(exc)))
                continue
            groups.setdefault(id(perceiver), (perceiver, []))[1].append(item)
        for perceiver, group in groups.values():
            queries = [PerceptionQuery(i.keyframes, i.question.question, i.question.options) for i in group]
            try:
                replies = perceiver.replies(queries)
            except GroundTruthError as exc:  # key frames outside the scene's recording: a wrong scene file
                failures.extend(Failure(i.question.id, str(exc)) for i in group)
                continue
            stats.calls += 1
            stats.requests += sum(len(q.keyframes) for q in queries)
            for item, item_replies in zip(group, replies, strict=True):
                item.replies = item_replies
                if item.key:
                    cache.put(item.key, item_replies)
                done.append(item)
        return done

    try:
        for item in items:
            item.replies = cache.get(item.key) if item.key else None
            if item.replies is not None:
                stats.cache_hits += 1
                yield item
                continue
            batch.append(item)
            if sum(len(i.keyframes) for i in batch) >= config.batch_size:
                yield from flush()
                batch = []
        if batch:
            yield from flush()
    finally:
        perceivers.close()


def _solution(question: Question) -> str:
    answer = question.answer
    if isinstance(answer, float) and answer.is_integer():
        answer = int(answer)
    return str(answer)


def build_record(item: Item, model: str, split: str, fold: int | None = None) -> dict[str, Any]:
    """One data-set record (:mod:`.schema`): the chat prompt as the node builds it, the solution and
    provenance; ``fold`` only with ``--folds``."""
    from embodied_r_ros.perception import parse_descriptions
    from embodied_r_ros.reasoning.messages import reasoning_messages

    question = item.question
    descriptions = parse_descriptions(item.keyframes, item.replies or [])
    messages = reasoning_messages(descriptions, question.question, question.options)
    return make_record(
        id=question.id,
        prompt=[{"role": m.role, "content": m.joined_text} for m in messages],
        solution=_solution(question),
        task=question.task,
        form=question.form,
        question=question.question,
        options=list(question.options),
        unit=question.unit,
        scene=item.scene,
        bag=str(item.bag),
        start_ns=question.start_ns,
        end_ns=question.end_ns,
        keyframe_stamps_ns=[k.frame.stamp_ns for k in item.keyframes],
        vlm=model,
        prompt_version=prompts.PROMPT_VERSION,
        split=split,
        **({"fold": fold} if fold is not None else {}),
    )


def run_prepare(config: PrepareConfig) -> PrepareResult:
    """Build the records of all questions (no files written; see :func:`write_dataset`)."""
    failures: list[Failure] = []
    questions = _load_questions(config, failures)
    # Splits from every question's scene before any work, so they do not depend on what fails, and a
    # --folds the scenes cannot fill fails at once.
    scenes = sorted({question.bag for question, _ in questions})
    splits = split_scenes(scenes, config.seed, config.fractions) if scenes else {}
    try:
        folds = fold_scenes(scenes, config.folds, config.seed) if config.folds and scenes else {}
    except ValueError as exc:
        raise ConfigError(f"{exc}; lower --folds or add scenes") from exc
    stats = VlmStats()
    records = []
    items = describe_items(
        config, iter_items(config, questions, failures), DescriptionCache(config.cache), stats, failures
    )
    for item in items:
        fold = folds[item.scene] if folds else None
        records.append(build_record(item, config.perception_label, splits[item.scene], fold))
    records.sort(key=lambda r: r["id"])
    return PrepareResult(
        records, failures, stats.calls, stats.requests, stats.cache_hits, config.perception_label
    )


def write_dataset(out: Path, result: PrepareResult) -> dict[str, Any]:
    """Write the splits (jsonl + parquet), failures and summary into ``out``; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        write_split(out, split, [r for r in result.records if r["split"] == split])
    with (out / "failures.jsonl").open("w", encoding="utf-8") as handle:
        for failure in result.failures:
            handle.write(json.dumps({"what": failure.what, "reason": failure.reason}) + "\n")
    per_task: dict[str, Counter[str]] = defaultdict(Counter)
    for record in result.records:
        per_task[record["task"]][record["split"]] += 1
    summary = {
        "records": len(result.records),
        "failures": len(result.failures),
        "vlm_calls": result.vlm_calls,
        "vlm_requests": result.vlm_requests,
        "cache_hits": result.cache_hits,
        "perception": result.perception,
        "tasks": {task: dict(counts) for task, counts in sorted(per_task.items())},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def summary_table(summary: dict[str, Any]) -> str:
    """The per-task table printed at the end of a run."""
    lines = [f"{'task':<20}" + "".join(f"{s:>7}" for s in SPLITS) + f"{'total':>7}"]
    for task, counts in summary["tasks"].items():
        row = [counts.get(s, 0) for s in SPLITS]
        lines.append(f"{task:<20}" + "".join(f"{n:>7}" for n in row) + f"{sum(row):>7}")
    counts = f"{summary['records']} records, {summary['failures']} failures, "
    perception = summary.get("perception", "")
    if perception.startswith(LABEL_PREFIX):
        lines.append(f"descriptions: {perception}, {DESCRIPTION}")
        lines.append(counts + f"{summary['vlm_requests']} key frames described from the scene geometry")
    else:
        lines.append(
            counts + f"{summary['vlm_calls']} VLM calls ({summary['vlm_requests']} requests), "
            f"{summary['cache_hits']} cache hits"
        )
    return "\n".join(lines)
