"""My own motion over a window, three tasks that share their windows:

- ego_distance (mc, numeric): the distance the camera travelled along its path (m);
- ego_turn (mc): the net turn, its direction and rough angle (options: a side and an amount each);
- ego_altitude (mc, numeric; outdoor only): the altitude change, up or down and by how many metres.

Windows are random ones and ones around runs of segments, on the key-frame candidate grid; turn and
altitude options draw their amounts like the truth and their sides at random. The oracle sums the "Path:"
accounts: the distances walked, flown, climbed and descended; the turns; the ups and downs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from embodied_r_ros.question_file import MC, NUMERIC

from ..synth.ground_truth import PathPiece
from ..synth.trajectory import CLIMB, FLY, TURN, WALK
from .amounts import Distractors, numeric_drafts, shown_as, signed_options
from .reading import Reading, answer, metres, option_nearest, running_sum, steps
from .scene import Draft, SceneContext
from .task import Answer, QuestionTask, Template, Unanswerable

DISTANCE_TEMPLATE = Template("How far did I travel during this clip, measured along my path, in metres?")
TURN_TEMPLATE = Template("Which way did I turn in total during this clip, and by about how much?")
ALTITUDE_TEMPLATE = Template(  # variants: mc, numeric
    "Did I fly up or down during this clip, and by about how much?",
    "By how many metres did my altitude change during this clip (up or down)?",
)
TRAVEL_WINDOWS = 40  # random windows drawn per scene


def _windows(ctx: SceneContext, n: int, min_s: float, max_s: float) -> list[tuple[float, float]]:
    """``n`` random windows of about [min_s, max_s] seconds inside the clip, on the candidate grid."""
    times = ctx.visibility.times_s
    windows: list[tuple[float, float]] = []
    if len(times) < 2 or times[-1] < min_s:
        return windows
    for _ in range(n):
        length = float(ctx.rng.uniform(min_s, min(max_s, times[-1])))
        t0 = float(ctx.rng.uniform(0.0, max(0.0, times[-1] - length)))
        window = ctx.snap(t0, min(t0 + length, float(times[-1])), inward=False)
        if window is not None:
            windows.append(window)
    return windows


def _segment_windows(ctx: SceneContext, most_apart: int) -> list[tuple[float, float]]:
    """Windows from the start of a segment to the end of one at most ``most_apart`` later, around on the
    candidate grid."""
    traj = ctx.trajectory
    inside = [i for i, _ in traj.segments_in(0.0, ctx.end_s)]
    windows = []
    for first, last in itertools.combinations_with_replacement(inside, 2):
        if last - first > most_apart:
            continue
        window = ctx.snap(traj.segment_bounds[first][0], traj.segment_bounds[last][1], inward=False)
        if window is not None and window not in windows:
            windows.append(window)
    return windows


def _motion_windows(ctx: SceneContext, most_apart: int) -> list[tuple[float, float]]:
    """Windows for questions about my turns and altitude: around runs of segments (:func:`_segment_windows`)
    and random windows (:func:`_windows`), distinct, in order."""
    return sorted(set(_segment_windows(ctx, most_apart)) | set(_windows(ctx, TRAVEL_WINDOWS, 4.0, 15.0)))


def _turn_text(side: str, degrees: float) -> str:
    return f"{side}, about {degrees:.0f} degrees"


def _altitude_text(side: str, amount_m: float) -> str:
    return f"{side}, about {amount_m:.0f} m"


def _sides_sum(
    reading: Reading,
    amount: Callable[[PathPiece], float | None],
    sides: tuple[str, str],
    shown: Callable[[float], str],
    unit: str,
) -> tuple[list[str], float]:
    """The path pieces' signed ``amount`` (None: the piece has none; positive: ``sides[0]``), each copied
    on a line in the prompt's words ("Frame 2: left 35"), each side added up one addition a line, then the
    smaller side taken from the larger ("Right 198 - left 113 = 85"); and the signed sum.

    No step adds numbers of opposite signs: a running sum that crosses zero ("53 - 66 = -13") is where the
    135M reasoner went wrong (issue 42)."""
    lines: list[str] = []
    by_side: dict[str, list[float]] = {side: [] for side in sides}
    for j, pieces in steps(reading):
        for piece in pieces:
            value = amount(piece)
            if value is not None:
                side = sides[0] if value > 0 else sides[1]
                lines.append(f"Frame {j}: {side} {shown(abs(value))}")
                by_side[side].append(abs(value))
    totals = {}
    for side, values in by_side.items():
        sums, totals[side] = running_sum(values, shown) if values else ([], 0.0)
        head = f"{side.capitalize()}: "
        if not sums:
            lines.append(head + (shown(totals[side]) if values else "none"))
        else:
            lines += [head + sums[0], *sums[1:]]
    big, small = sorted(sides, key=lambda side: (-totals[side], sides.index(side)))
    net = totals[big] - totals[small]
    if totals[small] > 0:
        larger, smaller = shown(totals[big]), shown(totals[small])
        lines.append(f"{big.capitalize()} {larger} - {small} {smaller} = {shown(net)}")
    lines.append(f"In total {big} {shown(net)} {unit}.")
    return lines, net if big == sides[0] else -net


# ------------------------------------------------------------------------------------------ ego_distance


def generate_distance(ctx: SceneContext) -> list[Draft]:
    """Random windows in which I travelled at least 1 m (8 m outdoors)."""
    drafts = []
    windows = sorted(set(_windows(ctx, TRAVEL_WINDOWS, 4.0, 15.0)))
    windows = [w for w in windows if ctx.trajectory.path_length(*w) >= 1.0 * ctx.scale]
    distances = [ctx.trajectory.path_length(*w) for w in windows]
    distractors = Distractors(distances, ctx.rng, shown_as("m"))
    text = DISTANCE_TEMPLATE.format()
    for window, distance in zip(windows, distances, strict=True):
        drafts += numeric_drafts(ctx, "ego_distance", text, distance, "m", window, (), distractors)
    return drafts


def solve_distance(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The distances walked, flown, climbed and descended: each step's copied, then added up."""
    lines: list[str] = []
    moves: list[float] = []
    for j, pieces in steps(reading):
        moved = sum(p.metres if p.kind in (WALK, FLY) else abs(p.up_m) if p.kind == CLIMB else 0.0
                    for p in pieces)  # fmt: skip
        if moved:
            lines.append(f"Frame {j}: {moved:g} m")
            moves.append(moved)
    sums, total = running_sum(moves, metres)
    lines = ["Along my path:", *(lines or ["nothing"]), *sums, f"In total {metres(total)} m."]
    sentence, found = answer(reading, total)
    return "\n".join([*lines, sentence]), found


# ---------------------------------------------------------------------------------------------- ego_turn


def generate_turn(ctx: SceneContext) -> list[Draft]:
    """Windows with a net turn of 30 to 330 deg, its amount rounded to 15 deg."""
    drafts = []
    traj = ctx.trajectory
    windows = [(t0, t1, traj.yaw_deg(t1) - traj.yaw_deg(t0)) for t0, t1 in _motion_windows(ctx, 3)]
    windows = [w for w in windows if 30.0 <= abs(w[2]) <= 330.0]
    amounts = [int(round(abs(change) / 15.0) * 15) for _, _, change in windows]
    pool = Distractors(amounts, ctx.rng, float)
    for i, (t0, t1, change) in enumerate(windows):
        side, opposite = ("left", "right") if change > 0 else ("right", "left")
        others = pool.draw(amounts[i])
        if others is None:
            continue
        distractors = signed_options(side, opposite, others, _turn_text, ctx.rng)
        text = TURN_TEMPLATE.format()
        drafts.append(Draft("ego_turn", MC, text, (t0, t1), _turn_text(side, amounts[i]), distractors))
    return drafts


def solve_turn(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The turns to each side summed, the smaller side taken from the larger; the option on that side
    nearest in amount."""
    lines, total = _sides_sum(reading, _turn, ("left", "right"), _degrees, "deg")
    if not reading.options or abs(total) < 1.0:
        raise Unanswerable("no net turn to name")
    side = "left" if total > 0 else "right"
    lines = ["My turns:", *lines]
    sentence, letter = option_nearest(reading, abs(total), prefix=f"{side},", shown=f"{abs(total):g}")
    return "\n".join([*lines, sentence]), letter


# ------------------------------------------------------------------------------------------ ego_altitude


def generate_altitude(ctx: SceneContext) -> list[Draft]:
    """Windows (outdoors) with an altitude change of at least 2 m."""
    if ctx.indoor:
        return []
    drafts = []
    traj = ctx.trajectory
    windows = [
        (t0, t1, float(traj.position(t1)[2] - traj.position(t0)[2])) for t0, t1 in _motion_windows(ctx, 2)
    ]
    windows = [w for w in windows if abs(w[2]) >= 2.0]
    amounts = [abs(change) for _, _, change in windows]
    pool = Distractors(amounts, ctx.rng, lambda v: float(round(v)))
    for i, (t0, t1, change) in enumerate(windows):
        side, opposite = ("up", "down") if change > 0 else ("down", "up")
        others = pool.draw(amounts[i])
        if MC in ctx.config.forms and others is not None:
            distractors = signed_options(side, opposite, others, _altitude_text, ctx.rng)
            text_mc = ALTITUDE_TEMPLATE.format(variant=0)
            correct = _altitude_text(side, amounts[i])
            drafts.append(Draft("ego_altitude", MC, text_mc, (t0, t1), correct, distractors))
        if NUMERIC in ctx.config.forms:
            text = ALTITUDE_TEMPLATE.format(variant=1)
            drafts.append(Draft("ego_altitude", NUMERIC, text, (t0, t1), round(amounts[i], 3), [], "m"))
    return drafts


def solve_altitude(reading: Reading, match: re.Match[str]) -> tuple[str, Answer]:
    """The ups and the downs summed, the smaller taken from the larger; the option on that side nearest in
    amount, or the amount."""
    lines, total = _sides_sum(reading, lambda piece: piece.up_m or None, ("up", "down"), _tenths, "m")
    if abs(total) < 0.05:
        raise Unanswerable("no altitude change to name")
    side = "up" if total > 0 else "down"
    lines = ["My altitude changes:", *lines]
    if reading.options:
        sentence, letter = option_nearest(reading, abs(total), prefix=f"{side},", shown=f"{abs(total):.1f}")
        return "\n".join([*lines, sentence]), letter
    sentence, found = answer(reading, abs(total))
    return "\n".join([*lines, sentence]), found


def _turn(piece: PathPiece) -> float | None:
    return piece.turn_deg if piece.kind == TURN else None


def _degrees(value: float) -> str:
    return f"{value:g}"


def _tenths(value: float) -> str:
    return f"{value:.1f}"


EGO_DISTANCE = QuestionTask("ego_distance", DISTANCE_TEMPLATE, generate_distance, solve_distance)
EGO_TURN = QuestionTask("ego_turn", TURN_TEMPLATE, generate_turn, solve_turn)
EGO_ALTITUDE = QuestionTask("ego_altitude", ALTITUDE_TEMPLATE, generate_altitude, solve_altitude)
