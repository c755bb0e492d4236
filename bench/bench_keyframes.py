"""Benchmark of streaming key-frame selection: speed on one core and agreement with the full-resolution rule.

A reproducible synthetic moving camera (a pinhole, about 65 degrees wide) looks at a large random
textured wall, so the true motion between frames is a homography with perspective: still parts, slow
pans, sideways moves, fast turns, moving closer/farther, rolls, tilts and a random walk, one 640x480
frame per second (every frame is a candidate at 1 fps), with motion blur, exposure changes and sensor
noise. The streaming selector with the configured ``match_width`` is timed with ``cv2.setNumThreads(1)``
and its keep/drop decisions are compared with the paper's rule as written (full resolution, the same
ORB feature budget, plain RANSAC with OpenCV's default 2000 iterations; the selector uses MAGSAC++):

- "independent runs": both selectors run on their own; share of candidates with the same decision
  (a differing decision changes the later reference, so this includes the knock-on effect);
- "same reference": the fast matcher judges each candidate against the reference the full-resolution
  run used at that point (the effect of the resolution and the estimator alone);
- "truth": the bench knows every camera pose, so the true overlap of two frames is the paper's measure
  computed with the exact homography between them. Each side is compared with a selector that uses the
  true overlaps (independent runs), and each decision of the same-reference pass with the true decision
  against that reference: where the two matchers disagree, this says which one is wrong.

Two kinds of imagery (``--imagery``): the synthetic wall above, and a natural photo no one here tuned the
selector to (matplotlib's sample ``grace_hopper.jpg``, enlarged 2x and tiled over the same wall, seen along
the same kind of camera path: panned, rotated, zoomed; ``--photo-scale`` changes the enlargement).
``--busy N`` keeps N other processes spinning during the timing, as on a robot where the node shares the
cores (the rule and the selector are timed under the same load).

Usage: ``python bench/bench_keyframes.py [--frames N] [--seed S] [--match-width W] [--imagery synthetic|photo]
[--photo-scale X] [--busy N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

# Run from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from embodied_r_ros.config import KeyFrameConfig  # noqa: E402
from embodied_r_ros.frames import NS_PER_S, Frame  # noqa: E402
from embodied_r_ros.keyframes import FrameMatcher, StreamingKeyFrameSelector, projected_overlap  # noqa: E402

WIDTH, HEIGHT = 640, 480
FOCAL = 500.0  # pixels: about 65 degrees horizontal field of view


def make_texture(rng: np.random.Generator, width: int = 4096, height: int = 3072) -> np.ndarray:
    """A large RGB texture: random rectangles, discs and lines over a smooth background with fine grain."""
    shading = rng.integers(40, 220, (height // 64, width // 64, 3), dtype=np.uint8)
    texture = cv2.resize(shading, (width, height), interpolation=cv2.INTER_CUBIC)
    texture = cv2.add(texture, rng.integers(0, 24, (height, width, 3), dtype=np.uint8))
    for _ in range(width * height // 4000):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        kind = rng.integers(0, 3)
        if kind == 0:
            w, h = int(rng.integers(6, 80)), int(rng.integers(6, 80))
            cv2.rectangle(texture, (x, y), (x + w, y + h), colour, -1)
        elif kind == 1:
            cv2.circle(texture, (x, y), int(rng.integers(4, 40)), colour, -1)
        else:
            end = (x + int(rng.integers(-80, 80)), y + int(rng.integers(-80, 80)))
            cv2.line(texture, (x, y), end, colour, int(rng.integers(1, 5)))
    return texture


@dataclass
class Camera:
    """A pinhole camera (focal ``FOCAL`` px) looking at the textured wall: position in texture pixels,
    ``distance`` to the wall (``FOCAL`` = texture at native scale) and yaw/pitch/roll in degrees."""

    x: float = 2048.0
    y: float = 1536.0
    distance: float = FOCAL
    yaw: float = 0.0
    pitch: float = 0.0
    roll: float = 0.0

    def homography(self) -> np.ndarray:
        """Maps image pixels to texture pixels (ray through the pixel, rotated, hits the wall)."""
        yaw, pitch, roll = np.radians([self.yaw, self.pitch, self.roll])
        ry = np.array([[np.cos(yaw), 0, np.sin(yaw)], [0, 1, 0], [-np.sin(yaw), 0, np.cos(yaw)]])
        rx = np.array([[1, 0, 0], [0, np.cos(pitch), -np.sin(pitch)], [0, np.sin(pitch), np.cos(pitch)]])
        rz = np.array([[np.cos(roll), -np.sin(roll), 0], [np.sin(roll), np.cos(roll), 0], [0, 0, 1]])
        k_inv = np.linalg.inv(np.array([[FOCAL, 0, WIDTH / 2], [0, FOCAL, HEIGHT / 2], [0, 0, 1]]))
        wall = np.array([[self.distance, 0, self.x], [0, self.distance, self.y], [0, 0, 1]])
        return wall @ ry @ rx @ rz @ k_inv


def camera_path(rng: np.random.Generator, n: int) -> list[tuple[Camera, float]]:
    """Camera poses, one per second, each with its motion-blur length in pixels."""
    cam = Camera()
    path: list[tuple[Camera, float]] = []
    segments = ("still", "slow_pan", "strafe", "fast_turn", "zoom", "roll", "tilt", "walk")
    while len(path) < n:
        kind = segments[int(rng.integers(0, len(segments)))]
        sign = float(rng.choice([-1.0, 1.0]))
        for _ in range(int(rng.integers(4, 10))):
            before = (cam.x, cam.yaw)
            if kind == "still":
                cam.yaw += float(rng.normal(0, 0.3))
            elif kind == "slow_pan":
                cam.yaw += sign * 8.0
            elif kind == "strafe":
                cam.x += sign * 0.35 * WIDTH * cam.distance / FOCAL
                cam.y += float(rng.normal(0, 10))
            elif kind == "fast_turn":
                cam.yaw += sign * float(rng.uniform(25, 45))
                cam.x += sign * float(rng.uniform(0.3, 0.8)) * WIDTH
            elif kind == "zoom":
                cam.distance *= 0.8 if sign > 0 else 1.25
            elif kind == "roll":
                cam.roll += sign * 12.0
            elif kind == "tilt":
                cam.pitch += sign * 7.0
            else:  # walk: a bit of everything, overlaps spread around the threshold
                cam.x += float(rng.uniform(-0.6, 0.6)) * WIDTH
                cam.y += float(rng.uniform(-0.3, 0.3)) * HEIGHT
                cam.yaw += float(rng.normal(0, 8))
                cam.roll += float(rng.normal(0, 3))
            cam.x, cam.y = _reflect(cam.x, 900.0, 3196.0), _reflect(cam.y, 900.0, 2172.0)
            cam.yaw, cam.pitch = _reflect(cam.yaw, -30.0, 30.0), _reflect(cam.pitch, -15.0, 15.0)
            cam.distance = _reflect(cam.distance, 0.6 * FOCAL, 1.6 * FOCAL)
            speed = abs(cam.x - before[0]) + FOCAL * abs(np.radians(cam.yaw - before[1]))
            path.append((replace(cam), min(9.0, speed / 60.0)))
    return path[:n]


def _reflect(value: float, lo: float, hi: float) -> float:
    """Fold ``value`` into [lo, hi] like a ball bouncing between walls (keeps the camera over the texture)."""
    span = hi - lo
    folded = (value - lo) % (2 * span)
    return lo + (folded if folded <= span else 2 * span - folded)


def render(texture: np.ndarray, camera: Camera, blur: float, rng: np.random.Generator) -> np.ndarray:
    """The 640x480 view of the texture, with horizontal motion blur, exposure change and sensor noise."""
    view = cv2.warpPerspective(
        texture,
        camera.homography(),
        (WIDTH, HEIGHT),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_REFLECT101,
    )
    if blur >= 2:
        view = cv2.blur(view, (int(blur), 1))
    gain = float(rng.uniform(0.85, 1.15))
    noise = rng.normal(0, 4, view.shape)
    return np.clip(view * gain + noise, 0, 255).astype(np.uint8)


def photo_texture(width: int = 4096, height: int = 3072, scale: float = 2.0) -> np.ndarray:
    """matplotlib's sample photo (a portrait, natural imagery, 512x600) enlarged ``scale`` times and tiled,
    mirrored, over a ``width`` x ``height`` wall.

    At 2x the camera sees the photo's own detail. Stretched over the whole wall (8x) it leaves so little
    texture that both matchers fail on most pairs and keep 3-5x the frames the true overlaps call for
    (BENCHMARKS.md); mirrored tiles put similar content side by side, as repeated structure does indoors.
    """
    import matplotlib.cbook

    bgr = cv2.imread(str(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)))
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    tile = cv2.resize(rgb, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    across, down = -(-width // tile.shape[1]), -(-height // tile.shape[0])
    row = np.concatenate([tile if i % 2 == 0 else tile[:, ::-1] for i in range(across)], axis=1)
    wall = np.concatenate([row if j % 2 == 0 else row[::-1] for j in range(down)], axis=0)
    return np.ascontiguousarray(wall[:height, :width])


def make_sequence(
    n: int, seed: int = 0, imagery: str = "synthetic", photo_scale: float = 2.0
) -> tuple[list[Frame], list[np.ndarray]]:
    """``n`` frames of the moving camera over ``imagery`` ("synthetic" or "photo"), one per second, and
    each frame's homography (image pixels -> wall pixels)."""
    rng = np.random.default_rng(seed)
    texture = make_texture(rng) if imagery == "synthetic" else photo_texture(scale=photo_scale)
    path = camera_path(rng, n)
    frames = [Frame(render(texture, cam, blur, rng), i * NS_PER_S) for i, (cam, blur) in enumerate(path)]
    return frames, [cam.homography() for cam, _ in path]


def true_overlap(current: np.ndarray, reference: np.ndarray) -> float | None:
    """The paper's overlap of two frames from their exact homographies (image -> wall) instead of features."""
    image_to_reference = np.linalg.inv(reference) @ current
    return projected_overlap(image_to_reference, WIDTH, HEIGHT, WIDTH, HEIGHT)


def truth_rule(homographies: list[np.ndarray], config: KeyFrameConfig) -> list[bool]:
    """Keep/drop per candidate with the true overlaps (what a perfect matcher would decide)."""
    kept: list[bool] = []
    reference = None
    for current in homographies:
        overlap = None if reference is None else true_overlap(current, reference)
        keep = reference is None or overlap is None or overlap < config.overlap_threshold
        if keep:
            reference = current
        kept.append(keep)
    return kept


def paper_rule(frames: list[Frame], config: KeyFrameConfig) -> list[bool]:
    """Keep/drop per candidate under the paper's rule as written: full resolution, uncapped RANSAC."""
    matcher = FrameMatcher(config, full_resolution=True, ransac_max_iters=2000, method=cv2.RANSAC)
    kept: list[bool] = []
    reference = None
    for frame in frames:
        features = matcher.features(frame.image)
        overlap = None if reference is None else matcher.overlap(features, reference)
        keep = reference is None or overlap is None or overlap < config.overlap_threshold
        if keep:
            reference = features
        kept.append(keep)
    return kept


def run(frames: list[Frame], homographies: list[np.ndarray], config: KeyFrameConfig) -> dict[str, float]:
    """Time the streaming selector on ``frames`` (all candidates) and compare it with the paper's rule."""
    selector = StreamingKeyFrameSelector(config)
    fast_kept: list[bool] = []
    elapsed = 0.0
    for frame in frames:
        t = time.perf_counter()
        keyframe = selector.push(frame)
        elapsed += time.perf_counter() - t
        fast_kept.append(keyframe is not None)
    if selector.candidates_seen != len(frames):
        raise RuntimeError("every bench frame must be a candidate; check the stamps and candidate_fps")

    t = time.perf_counter()
    full_kept = paper_rule(frames, config)
    full_elapsed = time.perf_counter() - t

    # Same reference: the fast matcher judges each candidate against the paper rule's reference.
    # Against the truth too: which side is wrong where they differ.
    matcher = FrameMatcher(config)
    reference: int | None = None
    same = fast_true = rule_true = 0
    for i, (frame, kept) in enumerate(zip(frames, full_kept, strict=True)):
        keep = truth = True
        if reference is not None:
            reference_features = matcher.features(frames[reference].image)
            overlap = matcher.overlap(matcher.features(frame.image), reference_features)
            keep = overlap is None or overlap < config.overlap_threshold
            true = true_overlap(homographies[i], homographies[reference])
            truth = true is None or true < config.overlap_threshold
        same += keep == kept
        fast_true += keep == truth
        rule_true += kept == truth
        if kept:
            reference = i
    true_kept = truth_rule(homographies, config)

    n = len(frames)
    return {
        "candidates": n,
        "candidates_per_s": n / elapsed,
        "ms_per_candidate": 1e3 * elapsed / n,
        "paper_rule_candidates_per_s": n / full_elapsed,
        "kept_fast": int(sum(fast_kept)),
        "kept_paper_rule": int(sum(full_kept)),
        "agreement_independent": sum(a == b for a, b in zip(fast_kept, full_kept, strict=True)) / n,
        "agreement_same_reference": same / n,
        "kept_truth": int(sum(true_kept)),
        "fast_vs_truth_independent": sum(a == b for a, b in zip(fast_kept, true_kept, strict=True)) / n,
        "paper_rule_vs_truth_independent": sum(a == b for a, b in zip(full_kept, true_kept, strict=True)) / n,
        "fast_vs_truth_same_reference": fast_true / n,
        "paper_rule_vs_truth_same_reference": rule_true / n,
    }


def _spin(stop: Any) -> None:
    """A busy process: burns one core until ``stop`` is set."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300, help="candidate frames (one per second)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--match-width", type=int, default=KeyFrameConfig.match_width)
    parser.add_argument("--orb-features", type=int, default=KeyFrameConfig.orb_features)
    parser.add_argument("--threads", type=int, default=1, help="OpenCV threads (the target is one core)")
    parser.add_argument("--imagery", choices=["synthetic", "photo"], default="synthetic")
    parser.add_argument("--photo-scale", type=float, default=2.0, help="enlargement of the photo's tiles")
    parser.add_argument("--busy", type=int, default=0, help="other processes kept busy during the timing")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args()

    cv2.setNumThreads(args.threads)
    config = KeyFrameConfig(match_width=args.match_width, orb_features=args.orb_features)
    frames, homographies = make_sequence(args.frames, args.seed, args.imagery, args.photo_scale)
    stop = multiprocessing.Event()
    busy = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.busy)]
    for process in busy:
        process.start()
    try:
        figures = run(frames, homographies, config)
    finally:
        stop.set()
        for process in busy:
            process.join()
    figures.update(
        match_width=args.match_width,
        orb_features=args.orb_features,
        threads=args.threads,
        seed=args.seed,
        opencv=cv2.__version__,
        imagery=args.imagery,
        photo_scale=args.photo_scale if args.imagery == "photo" else None,
        busy=args.busy,
    )

    print(f"{'figure':<38}{'value':>10}")
    for key in (
        "candidates",
        "candidates_per_s",
        "ms_per_candidate",
        "paper_rule_candidates_per_s",
        "kept_fast",
        "kept_paper_rule",
        "agreement_independent",
        "agreement_same_reference",
        "kept_truth",
        "fast_vs_truth_independent",
        "paper_rule_vs_truth_independent",
        "fast_vs_truth_same_reference",
        "paper_rule_vs_truth_same_reference",
    ):
        value = figures[key]
        print(f"{key:<38}{value:>10.3f}" if isinstance(value, float) else f"{key:<38}{value:>10}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
