"""Questions about the robot's past, and the one reader and writer of their file (``questions.jsonl``).

One question per entry. ``embodied-r synth`` and ``import-video`` write these files, ``embodied-r prepare``
turns them into training data, ``embodied-r ask --questions`` asks a running node. Keys:

=============== =========================================================================================
``question``    the text (required)
``options``     multiple-choice option texts, no letters (absent or empty: a numeric question)
``answer``      the ground truth: the correct option's letter or a number (``ground_truth`` is accepted)
``id``          a unique name
``bag``         the rosbag2 directory, relative to the questions file
``start_ns``    the window in camera time: the images' stamps in nanoseconds
``end_ns``
``start_s``     the window in seconds from the bag's first message; optional when start_ns/end_ns
``end_s``       are given (a label on a robot's own bag needs only the stamps)
``window_s``    ``ask`` only: the last N seconds, when no interval is given
``task``        the task (synth: appearance_order, route, ...), ``form`` mc or numeric, ``unit`` of a
                numeric answer, ``answer_text`` the answer in words, ``objects`` the scene objects named
=============== =========================================================================================

JSON lines is the format tools write; a JSON list, or YAML (a list or ``questions:`` with one), reads too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MC = "mc"
NUMERIC = "numeric"
# The keys of a question's JSON object, in the order they are written.
KEY_ORDER = (
    "id", "bag", "start_s", "end_s", "start_ns", "end_ns", "window_s", "task", "form", "question", "options",
    "answer", "unit", "answer_text", "objects",
)  # fmt: skip


@dataclass(frozen=True)
class Question:
    """One question, with its ground truth and window when known (see the module docstring)."""

    question: str
    options: tuple[str, ...] = ()
    answer: str | float | int | None = None
    id: str = ""
    bag: str = ""
    start_ns: int = 0  # 0 = unset
    end_ns: int = 0
    start_s: float | None = None
    end_s: float | None = None
    window_s: float = 0.0
    task: str = ""
    form: str = ""
    unit: str = ""
    answer_text: str = ""
    objects: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.form:  # a question without options is numeric
            object.__setattr__(self, "form", MC if self.options else NUMERIC)

    @property
    def ground_truth(self) -> str | None:
        """The answer as text (a letter or a number), None when unknown."""
        return None if self.answer is None else str(self.answer)

    def has_window(self) -> bool:
        """Whether the question names its window, in camera stamps or in seconds from the bag's start."""
        return bool(self.start_ns or self.end_ns) or (self.start_s is not None and self.end_s is not None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this question, keys in a fixed order; unset optional keys are left out."""
        data = dataclasses.asdict(self)
        data.update(options=list(self.options), objects=list(self.objects))
        unset = {"window_s"} if not self.window_s else set()
        if self.start_s is None or self.end_s is None:
            unset |= {"start_s", "end_s"}
        return {key: data[key] for key in KEY_ORDER if key not in unset}

    @classmethod
    def from_dict(cls, data: Any) -> Question:
        """A question from its JSON object; raises ValueError naming what is missing or malformed."""
        if not isinstance(data, dict) or not str(data.get("question", "")).strip():
            raise ValueError("the entry has no 'question'")
        try:
            start_s, end_s = data.get("start_s"), data.get("end_s")
            return cls(
                question=str(data["question"]),
                options=tuple(str(o) for o in data.get("options") or ()),
                answer=data.get("answer", data.get("ground_truth")),
                id=str(data.get("id", "")),
                bag=str(data.get("bag", "")),
                start_ns=int(data.get("start_ns", 0) or 0),
                end_ns=int(data.get("end_ns", 0) or 0),
                start_s=None if start_s is None else float(start_s),
                end_s=None if end_s is None else float(end_s),
                window_s=float(data.get("window_s", 0.0) or 0.0),
                task=str(data.get("task", "")),
                form=str(data.get("form", "")),
                unit=str(data.get("unit", "")),
                answer_text=str(data.get("answer_text", "")),
                objects=tuple(int(i) for i in data.get("objects") or ()),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"window_s, start_ns, end_ns, start_s, end_s and objects must be numbers ({exc})"
            ) from None


def read_questions(path: str | Path) -> list[Question]:
    """The questions of a file (JSON lines, JSON or YAML); ``bag`` stays relative (see :func:`bag_path`).

    Raises FileNotFoundError for a missing file and ValueError naming the file and the entry otherwise.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"questions file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        entries = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    entries.append((f"{path}:{number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not a JSON line: {exc}") from None
    else:
        import yaml

        try:
            loaded = yaml.safe_load(text)  # YAML reads JSON too
        except yaml.YAMLError as exc:
            raise ValueError(f"{path} is not JSON lines, JSON or YAML: {exc}") from None
        listed = loaded if isinstance(loaded, list) else (loaded or {}).get("questions", [])
        entries = [(f"{path}: entry {n}", entry) for n, entry in enumerate(listed, start=1)]
    questions = []
    for where, entry in entries:
        try:
            questions.append(Question.from_dict(entry))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return questions


def write_questions(path: str | Path, questions: Iterable[Question]) -> None:
    """Write ``questions`` as JSON lines (UTF-8, "\\n" endings, stable key order)."""
    lines = [json.dumps(q.to_dict(), ensure_ascii=False) + "\n" for q in questions]
    Path(path).write_text("".join(lines), encoding="utf-8")


def bag_path(questions_file: str | Path, question: Question) -> Path:
    """The bag directory of ``question``: its ``bag`` field is relative to the questions file."""
    return Path(questions_file).resolve().parent / question.bag
