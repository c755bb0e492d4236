"""A short synthetic egocentric clip: a camera panning across a textured panorama, with poses.

Small and dependency-free, for the demo, tests and benchmarks of the core. (The full synthetic world with
rooms, objects and ground-truth questions lives in ``embodied_r_training``.)
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from ..frames import NS_PER_S, Clip, Frame, Pose

# Panorama pixels per degree of yaw: 360 deg span the whole panorama width.
_PANORAMA_WIDTH = 3600
_PANORAMA_HEIGHT = 600
_HFOV_DEG = 60.0


def panorama(seed: int = 0) -> np.ndarray:
    """A 360-degree RGB panorama rich in ORB features: noise texture, bands and coloured shapes."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(_PANORAMA_HEIGHT // 8, _PANORAMA_WIDTH // 8, 3), dtype=np.uint8)
    image = cv2.resize(coarse, (_PANORAMA_WIDTH, _PANORAMA_HEIGHT), interpolation=cv2.INTER_LINEAR)
    image = (image // 2 + 64).astype(np.uint8)
    image[_PANORAMA_HEIGHT * 2 // 3 :] //= 2  # a darker floor band below the horizon
    for _ in range(160):
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        x, y = int(rng.integers(0, _PANORAMA_WIDTH)), int(rng.integers(0, _PANORAMA_HEIGHT))
        w, h = int(rng.integers(20, 140)), int(rng.integers(20, 140))
        if rng.random() < 0.5:
            cv2.rectangle(image, (x, y), (x + w, y + h), colour, thickness=-1)
        else:
            cv2.circle(image, (x, y), w // 2, colour, thickness=-1)
        cv2.rectangle(image, (x, y), (x + w, y + h), (0, 0, 0), thickness=2)
    return image


def synthetic_clip(
    seconds: float = 12.0,
    fps: float = 10.0,
    size: tuple[int, int] = (320, 240),
    yaw_rate_deg: float = 15.0,
    speed_m_s: float = 0.3,
    seed: int = 0,
    start_ns: int = 1_700_000_000 * NS_PER_S,
) -> Clip:
    """A clip of a robot walking forward while turning right at ``yaw_rate_deg``; poses included.

    ``size`` is (width, height). Turning right pans the view to the right across the panorama.
    """
    if seconds <= 0 or fps <= 0:
        raise ValueError("seconds and fps must be > 0")
    width, height = size
    world = panorama(seed)
    px_per_deg = _PANORAMA_WIDTH / 360.0
    view_w = int(_HFOV_DEG * px_per_deg)
    view_h = int(view_w * height / width)
    top = (_PANORAMA_HEIGHT - view_h) // 2
    # Wrap horizontally so the view can pan past the panorama's seam.
    wrapped = np.concatenate([world, world[:, :view_w]], axis=1)
    frames = []
    for i in range(int(round(seconds * fps))):
        t = i / fps
        yaw_deg = -yaw_rate_deg * t  # turning right = negative yaw (REP-103)
        left = int(round(-yaw_deg * px_per_deg)) % _PANORAMA_WIDTH
        view = wrapped[top : top + view_h, left : left + view_w]
        image = cv2.resize(view, (width, height), interpolation=cv2.INTER_AREA)
        yaw = math.radians(yaw_deg)
        # Forward motion follows the current heading.
        distance = speed_m_s * t
        heading = yaw / 2  # mean heading over a constant-rate turn
        position = (distance * math.cos(heading), distance * math.sin(heading), 0.0)
        orientation = (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))
        frames.append(
            Frame(
                np.ascontiguousarray(image), start_ns + int(round(t * NS_PER_S)), Pose(position, orientation)
            )
        )
    return Clip(tuple(frames))
