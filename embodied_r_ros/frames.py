"""Frames and clips: the data that enters the pipeline from the camera.

A :class:`Frame` is one RGB image with its stamp and, when the robot has odometry, its pose. A
:class:`Clip` is an ordered run of frames (a time window of the robot's history). Everything downstream
(key frames, perception, reasoning) works on these two types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NS_PER_S = 1_000_000_000


class FrameError(ValueError):
    """An image or stamp that cannot be a Frame; the message names the problem and the fix."""


@dataclass(frozen=True)
class Pose:
    """Pose of the robot body in a fixed (odometry) frame, REP-103 axes: x forward, y left, z up.

    ``position`` is in metres; ``orientation`` is a unit quaternion (x, y, z, w).
    """

    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    orientation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)


@dataclass(frozen=True)
class Frame:
    """One camera image: ``image`` is HxWx3 uint8 RGB, ``stamp_ns`` an int in nanoseconds."""

    image: np.ndarray
    stamp_ns: int
    pose: Pose | None = None

    def __post_init__(self) -> None:
        validate_image(self.image)
        if isinstance(self.stamp_ns, bool) or not isinstance(self.stamp_ns, (int, np.integer)):
            raise FrameError(
                f"frame stamp must be an int in nanoseconds, got {type(self.stamp_ns).__name__}; "
                "convert seconds with int(seconds * 1e9)"
            )
        if self.stamp_ns < 0:
            raise FrameError(f"frame stamp must be >= 0 ns, got {self.stamp_ns}")

    @property
    def stamp_s(self) -> float:
        """The stamp in seconds (float), for printing and prompts."""
        return self.stamp_ns / NS_PER_S

    @property
    def height(self) -> int:
        return int(self.image.shape[0])

    @property
    def width(self) -> int:
        return int(self.image.shape[1])


def validate_image(image: object) -> None:
    """Raise :class:`FrameError` unless ``image`` is a non-empty HxWx3 uint8 array."""
    if not isinstance(image, np.ndarray):
        raise FrameError(f"frame image must be a numpy array (HxWx3 uint8 RGB), got {type(image).__name__}")
    if image.ndim != 3 or image.shape[2] != 3:
        raise FrameError(
            f"frame image must have shape HxWx3 (RGB), got {image.shape}; "
            "convert grey or RGBA images to RGB first"
        )
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise FrameError(f"frame image is empty (shape {image.shape})")
    if image.dtype != np.uint8:
        raise FrameError(
            f"frame image must be uint8, got {image.dtype}; scale 16-bit or float images to 0..255 first"
        )


@dataclass(frozen=True)
class Clip:
    """Frames of one time window, oldest first."""

    frames: tuple[Frame, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        stamps = [f.stamp_ns for f in self.frames]
        if any(b < a for a, b in zip(stamps, stamps[1:], strict=False)):
            raise FrameError("clip frames must be ordered by stamp, oldest first")

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def duration_s(self) -> float:
        if not self.frames:
            return 0.0
        return (self.frames[-1].stamp_ns - self.frames[0].stamp_ns) / NS_PER_S
