"""A PNG contact sheet of a synthetic scene, so a person can see what was generated.

Left: a top-down map (x to the right, y up) with the room or plaza, every object (footprint in its colour,
labelled), the camera path coloured from blue (start) to red (end) and numbered markers with the heading
where the strip's frames were taken. Right: those frames in a grid, each labelled with its number and time.
Drawn with OpenCV; no plotting library needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from .trajectory import Trajectory
from .world import CYLINDER, World

MAP_PX = 560
TITLE_PX = 28
_FONT = cv2.FONT_HERSHEY_SIMPLEX


def _map_extent(world: World) -> tuple[float, float, float, float]:
    if world.room is not None:
        sx, sy, _ = world.room.size
        return -sx / 2 - 0.3, sx / 2 + 0.3, -sy / 2 - 0.3, sy / 2 + 0.3
    corners = np.vstack(
        [o.corners()[:, :2] for o in world.objects] + [np.array(world.bounds).reshape(2, 2).T]
    )
    lo, hi = corners.min(axis=0) - 2.0, corners.max(axis=0) + 2.0
    return float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1])


def _bgr(rgb: Sequence[int]) -> tuple[int, int, int]:
    return int(rgb[2]), int(rgb[1]), int(rgb[0])


def top_down_map(
    world: World, trajectory: Trajectory, end_s: float, marks: Sequence[float], size: int = MAP_PX
) -> np.ndarray:
    """The map panel (BGR uint8, ``size`` x ``size``); ``marks`` are the times of the strip's frames."""
    x0, x1, y0, y1 = _map_extent(world)
    scale = (size - 20) / max(x1 - x0, y1 - y0)
    ox = (size - (x1 - x0) * scale) / 2
    oy = (size - (y1 - y0) * scale) / 2

    def px(x: float, y: float) -> tuple[int, int]:
        return int(round(ox + (x - x0) * scale)), int(round(size - oy - (y - y0) * scale))

    canvas = np.full((size, size, 3), 245, np.uint8)
    if world.room is not None:
        sx, sy, _ = world.room.size
        cv2.rectangle(canvas, px(-sx / 2, sy / 2), px(sx / 2, -sy / 2), _bgr(world.floor_rgb), -1)
        cv2.rectangle(canvas, px(-sx / 2, sy / 2), px(sx / 2, -sy / 2), (40, 40, 40), 3)
    else:
        bx0, bx1, by0, by1 = world.bounds
        canvas[:] = _bgr(world.wall_rgb)
        cv2.rectangle(canvas, px(bx0 - 3, by1 + 3), px(bx1 + 3, by0 - 3), _bgr(world.floor_rgb), -1)
    for obj in world.objects:
        colour = _bgr(obj.rgb)
        if obj.shape == CYLINDER:
            centre = px(obj.position[0], obj.position[1])
            radius = max(2, int(round(obj.size[0] / 2 * scale)))
            cv2.circle(canvas, centre, radius, colour, -1, cv2.LINE_AA)
            cv2.circle(canvas, centre, radius, (20, 20, 20), 1, cv2.LINE_AA)
        else:
            foot = obj.corners()[::2, :2][[0, 1, 3, 2]]  # the four bottom corners, in order around the box
            poly = np.array([px(x, y) for x, y in foot], np.int32)
            cv2.fillPoly(canvas, [poly], colour, cv2.LINE_AA)
            cv2.polylines(canvas, [poly], True, (20, 20, 20), 1, cv2.LINE_AA)
    times = np.arange(0.0, end_s + 1e-9, 0.1)
    points = [px(*trajectory.position(t)[:2]) for t in times]
    for i, (a, b) in enumerate(zip(points, points[1:], strict=False)):
        f = i / max(1, len(points) - 2)
        cv2.line(canvas, a, b, (int(255 * (1 - f)), 60, int(255 * f)), 2, cv2.LINE_AA)
    if points:
        cv2.circle(canvas, points[0], 6, (0, 160, 0), -1, cv2.LINE_AA)
        cv2.rectangle(
            canvas,
            (points[-1][0] - 5, points[-1][1] - 5),
            (points[-1][0] + 5, points[-1][1] + 5),
            (0, 0, 200),
            -1,
        )
    arrow = 0.09 * size
    for n, t in enumerate(marks):
        x, y, _ = trajectory.position(t)
        yaw = math.radians(trajectory.yaw_deg(t))
        a = px(x, y)
        b = (int(round(a[0] + arrow * math.cos(yaw))), int(round(a[1] - arrow * math.sin(yaw))))
        cv2.arrowedLine(canvas, a, b, (0, 0, 0), 2, cv2.LINE_AA, tipLength=0.3)
        cv2.putText(canvas, str(n), (a[0] + 5, a[1] + 14), _FONT, 0.5, (0, 0, 0), 2, cv2.LINE_AA)
        cv2.putText(canvas, str(n), (a[0] + 5, a[1] + 14), _FONT, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
    for obj in world.objects:  # labels last, on top of everything
        lx, ly = px(obj.position[0], obj.position[1])
        cv2.putText(canvas, obj.name, (lx - 20, ly - 4), _FONT, 0.36, (255, 255, 255), 3, cv2.LINE_AA)
        cv2.putText(canvas, obj.name, (lx - 20, ly - 4), _FONT, 0.36, (0, 0, 0), 1, cv2.LINE_AA)
    return canvas


def contact_sheet(
    world: World,
    trajectory: Trajectory,
    frames: Sequence[tuple[float, np.ndarray]],
    end_s: float,
    title: str = "",
) -> np.ndarray:
    """The whole sheet (BGR uint8): map on the left, ``frames`` ((time s, RGB image) pairs) in a grid."""
    marks = [t for t, _ in frames]
    panel = top_down_map(world, trajectory, end_s, marks)
    columns = 3 if len(frames) > 4 else 2
    rows = max(1, math.ceil(len(frames) / columns))
    h0, w0 = frames[0][1].shape[:2] if frames else (240, 320)
    cell_h = MAP_PX // rows
    cell_w = int(round(cell_h * w0 / h0))
    grid = np.full((MAP_PX, cell_w * columns, 3), 255, np.uint8)
    for n, (t, image) in enumerate(frames):
        r, c = divmod(n, columns)
        tile = cv2.resize(
            cv2.cvtColor(image, cv2.COLOR_RGB2BGR), (cell_w - 4, cell_h - 4), interpolation=cv2.INTER_AREA
        )
        label = f"{n}  t={t:.1f} s"
        cv2.putText(tile, label, (6, 18), _FONT, 0.5, (0, 0, 0), 3, cv2.LINE_AA)
        cv2.putText(tile, label, (6, 18), _FONT, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
        grid[r * cell_h + 2 : (r + 1) * cell_h - 2, c * cell_w + 2 : (c + 1) * cell_w - 2] = tile
    sheet = np.concatenate([panel, grid], axis=1)
    header = np.full((TITLE_PX, sheet.shape[1], 3), 255, np.uint8)
    cv2.putText(header, title, (8, 20), _FONT, 0.55, (0, 0, 0), 1, cv2.LINE_AA)
    return np.concatenate([header, sheet], axis=0)


def write_preview(
    path: str | Path,
    world: World,
    trajectory: Trajectory,
    frames: Sequence[tuple[float, np.ndarray]],
    end_s: float,
    title: str = "",
) -> Path:
    """Write the contact sheet as PNG to ``path``; returns the path."""
    path = Path(path)
    if not cv2.imwrite(str(path), contact_sheet(world, trajectory, frames, end_s, title)):
        raise OSError(
            f"could not write the preview PNG {path}; check that its directory exists and is writable"
        )
    return path
