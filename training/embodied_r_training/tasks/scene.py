"""What a scene task's generator reads and writes: the rendered scene with its numbers
(:class:`SceneContext`) and the questions before their options are placed (:class:`Draft`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embodied_r_ros.config import KeyFrameConfig
from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.keyframes import candidate_indices
from embodied_r_ros.question_file import MC, NUMERIC

from ..synth.trajectory import Trajectory
from ..synth.visibility import DEFAULT_MIN_FRACTION, Visibility
from ..synth.world import INDOOR, SceneObject, World

# Random draws of objects per task: many are dropped when their key frames miss an object (the screen).
DRAFT_TRIES = 200


@dataclass(frozen=True)
class QuestionConfig:
    """How many questions of each task and form per scene, the visibility threshold and the key-frame
    candidate rate (windows start and end on its grid)."""

    per_task: int = 2
    min_fraction: float = DEFAULT_MIN_FRACTION
    forms: tuple[str, ...] = (MC, NUMERIC)
    candidate_fps: float = KeyFrameConfig().candidate_fps

    def __post_init__(self) -> None:
        if self.per_task < 1:
            raise ValueError(f"per_task must be >= 1, got {self.per_task}")
        if not self.candidate_fps > 0:
            raise ValueError(f"candidate_fps must be > 0, got {self.candidate_fps}")
        if not 0 < self.min_fraction < 1:
            raise ValueError(f"min_fraction must be in (0, 1), got {self.min_fraction}")
        unknown = set(self.forms) - {MC, NUMERIC}
        if unknown or not self.forms:
            raise ValueError(f"forms must be a non-empty subset of ({MC!r}, {NUMERIC!r}), got {self.forms}")


@dataclass
class Draft:
    """A question before its options are ordered: the correct option text (or numeric value) and the
    distractors."""

    task: str
    form: str
    text: str
    window: tuple[float, float]
    correct: str | float | int
    distractors: list[str] = field(default_factory=list)
    unit: str = ""
    objects: tuple[int, ...] = ()


@dataclass
class SceneContext:
    """What the task generators share: the scene, its seen objects and the numbers of a window. The clip is
    the frames of ``visibility`` up to ``end_s`` (seconds from the bag start, which is at ``start_ns``)."""

    world: World
    trajectory: Trajectory
    visibility: Visibility
    end_s: float
    config: QuestionConfig
    rng: np.random.Generator
    start_ns: int = 0
    indoor: bool = field(init=False)
    scale: float = field(init=False)
    seen: list[SceneObject] = field(init=False)
    grid: np.ndarray | list = field(init=False)

    def __post_init__(self) -> None:
        self.indoor = self.world.kind == INDOOR
        self.scale = 1.0 if self.indoor else 8.0  # outdoor distances are about this much larger
        seen = self.visibility.seen_ids(0.0, self.end_s, self.config.min_fraction)
        self.seen = [self.world.object(i) for i in seen]
        stamps = [self.start_ns + round(float(t) * NS_PER_S) for t in self.visibility.times_s]
        # The key-frame candidates (and the clip's last frame): windows start and end on them.
        candidates = candidate_indices(stamps, self.config.candidate_fps) if stamps else []
        self.grid = self.visibility.times_s[candidates] if stamps else []

    def snap(self, t0: float, t1: float, inward: bool) -> tuple[float, float] | None:
        """[t0, t1] moved onto the candidate grid, inside it (``inward``) or around it; None when nothing
        of two candidates is left."""
        grid = np.asarray(self.grid, dtype=np.float64)
        if len(grid) < 2:
            return None
        if inward:
            lo, hi = grid[grid >= t0 - 1e-9], grid[grid <= t1 + 1e-9]
            a, b = (float(lo[0]) if len(lo) else None), (float(hi[-1]) if len(hi) else None)
        else:
            lo, hi = grid[grid <= t0 + 1e-9], grid[grid >= t1 - 1e-9]
            a = float(lo[-1]) if len(lo) else float(grid[0])
            b = float(hi[0]) if len(hi) else float(grid[-1])
        return (a, b) if a is not None and b is not None and b > a else None

    def the(self, obj: SceneObject) -> str:
        """How a question names ``obj`` in a list ("the red chair")."""
        return f"the {obj.name}"

    def sample(self, items: list, k: int) -> list:
        """``k`` of ``items`` drawn without replacement, in their order (all of them if there are no more)."""
        if len(items) <= k:
            return list(items)
        return [items[i] for i in sorted(self.rng.choice(len(items), size=k, replace=False))]
