"""Ground-truth perception: what a perfect VLM would say about key frames of a synthetic scene.

A measuring instrument, never a VLM: for bags written by ``embodied-r synth`` it computes the descriptions
from the scene's geometry (``scene.json``), so the reasoner can be trained and evaluated apart from
perception errors, as the paper's analysis separates reasoning from perception. Every task's evidence is
in the text (``embodied_r_training.tasks.oracle`` answers from it alone); the generator keeps only the
questions whose key frames carry it.

For each key frame, its stamp gives t = (stamp_ns - scene start_ns) / 1e9 and the TRUE camera pose at t
from the scene's trajectory (not the odometry the frame may carry). The id mask rendered at that pose (at
``render_width`` pixels across, 160 by default, for speed) says which objects are in view: an object is
in view when it covers at least ``min_fraction`` of the image (0.2 %, the threshold questions use for
"seen", see :mod:`.visibility`), so occlusion counts. Each object is named as questions name it (colour +
category, e.g. "red chair") and described as ``<name> <direction>, <near|far>, <distance> m``:

- direction, from the centre of its visible pixels: the horizontal angle off the optical axis gives
  ahead (< 8 deg), ahead-left / ahead-right (< 22 deg), left / right (beyond); a ray more than 40 deg
  below (above) the horizon adds "below" ("above");
- near or far: nearer than 2.5 m indoors, 20 m outdoors, is near;
- distance from the camera to the object's CENTRE (3D), rounded as a person would read it: to 0.5 m
  below 5 m (at least 0.5 m), to whole metres beyond.

Question objects (see below) also get ``, longest side <s> m, at (<x>, <y>, <z>)``: the longest of the
object's length, width and height (what object_size asks), and its centre on a map fixed at the first key
frame: x metres ahead of and y metres to the left of where the camera stood (horizontally, along its
heading then), z metres above the floor (outdoors: the ground). Metres are given to 0.01 m indoors and
0.1 m outdoors, so that distances between centres (abs_distance, relative_distance) and directions between
objects (relative_direction) follow from the positions to within a few percent.

Replies are written in exactly the form the VLM prompts ask for (:mod:`embodied_r_ros.reasoning.prompts`) and
parsed
by the same :func:`~embodied_r_ros.perception.parse_descriptions`:

- key frame 0: ``I see <the nearest MAX_SCENE objects and every question object in view>.`` (nearest
  first) or ``No objects in view.``; for the memory's question-agnostic description
  (:data:`embodied_r_ros.memory.describer.AGNOSTIC_QUESTION`, which asks for every object) the nearest
  MAX_MEMORY; ``Positions are metres from where I stand: x ahead, y left, z above
  the floor.`` when the question names objects; ``The room is <X> m by <Y> m.`` (its floor's two sides)
  when the question asks about the room (indoors);
- key frame j >= 1: ``Action: <one of the paper's ten labels, from the true motion between the two poses
  (embodied_r_ros.poses.ego_motion)>`` and ``Observation:`` with, in this order:

  * ``Path: <what I did since key frame j-1>.`` when the question asks about my motion (travel, turns,
    walking, flying, altitude): the trajectory's pieces in order, "walked D m" / "flew D m (up Z m)"
    (D the distance along the path, Z the change of altitude), "climbed Z m" / "descended Z m", "turned
    left A deg" (the heading's change; consecutive pieces of one kind merged; pauses and camera tilts
    left out; "stood still" when nothing remains). Summed over the key frames they give the distance
    travelled, the net turn, the altitude change and the turns between legs;
  * ``First seen: <objects in view now and at no earlier key frame>.`` (the nearest MAX_NEW and every
    question object) or ``Nothing new.``;
  * ``Seen again: the same <name> as in frame <k>; ...`` for question objects back in view after an
    absence (k: the key frame that first showed it), so that no object is listed as new twice.

Question objects are found from the question and option TEXT, as a VLM would: an object's name (or
"colour + plural"), or its category alone (singular or plural: every object of that category). Texts are
kept short: the reasoner is small and prompt length sets training time. Deterministic; a key frame costs one
low-resolution id render (a few ms).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embodied_r_ros.frames import NS_PER_S, Pose
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.memory.describer import AGNOSTIC_QUESTION
from embodied_r_ros.poses.ego_motion import STILL_LABEL, ego_motion, quaternion_to_matrix

from .render import CameraModel, Renderer
from .replying_perceiver import ReplyingPerceiver
from .trajectory import CLIMB, FLY, LOOK, TURN, WALK, Trajectory
from .visibility import DEFAULT_MIN_FRACTION
from .world import INDOOR, SceneObject, World, plural

logger = logging.getLogger(__name__)

DEFAULT_SCENE_FILE = "scene.json"  # what `embodied-r synth` writes beside each scene's bag directory
LABEL_PREFIX = "ground-truth:"
DESCRIPTION = "ground-truth perception (simulator geometry, not a VLM)"
RENDER_WIDTH = 160
MAX_SCENE = 4  # objects listed at key frame 0 besides the question's
MAX_NEW = 3  # newly visible objects listed at a later key frame besides the question's
# Objects a memory's question-agnostic description lists (the describer asks for every object in view): the
# sightings index counts and finds "last seen" from these listings, so four would hide most of a busy room.
MAX_MEMORY = 12
AHEAD_DEG = 8.0
AHEAD_SIDE_DEG = 22.0
ABOVE_BELOW_DEG = 40.0
NEAR_INDOOR_M = 2.5
NEAR_OUTDOOR_M = 20.0
STAMP_SLACK_S = 0.5  # a key frame may lie this far outside the scene's recording (rounding, a late frame)
# Questions that ask about my own motion get the path account (see the module docstring).
MOTION_WORDS = re.compile(r"\b(travel\w*|turn\w*|walk\w*|fly|flew|flight|altitude|route)\b", re.IGNORECASE)
ROOM_WORDS = re.compile(r"\broom\b", re.IGNORECASE)


class GroundTruthError(ValueError):
    """A scene file that cannot be used, or key frames that do not belong to it; the message says which."""


@dataclass(frozen=True)
class Scene:
    """What ground truth needs from a ``scene.json``: the world, the camera's path and the timing."""

    path: Path
    world: World
    trajectory: Trajectory
    start_ns: int
    width: int
    height: int
    hfov_deg: float


def load_scene(path: str | Path) -> Scene:
    """Read a ``scene.json`` written by ``embodied-r synth``; raises :class:`GroundTruthError` naming it."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise GroundTruthError(
            f"scene file {path} does not exist; ground-truth perception needs the scene.json that "
            "`embodied-r synth` wrote beside the bag (scene_NNNN/scene.json for scene_NNNN/bag)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        camera = data["camera"]
        width, height, fx = int(camera["width"]), int(camera["height"]), float(camera["k"][0])
        return Scene(
            path=path,
            world=World.from_dict(data["world"]),
            trajectory=Trajectory.from_dict(data["trajectory"]),
            start_ns=int(data["start_ns"]),
            width=width,
            height=height,
            hfov_deg=math.degrees(2 * math.atan(width / 2 / fx)),
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise GroundTruthError(
            f"{path} is not a scene file of `embodied-r synth` ({type(exc).__name__}: {exc}); point the "
            "ground-truth VLM at scene_NNNN/scene.json"
        ) from exc


@dataclass(frozen=True)
class ObjectView:
    """One object in view at one key frame: its share of the image, where it is, how far (see module)."""

    object: SceneObject
    fraction: float
    bearing_deg: float  # horizontal angle off the optical axis, positive = left
    elevation_deg: float  # angle of its visible centre above the horizon (negative: below)
    distance_m: float  # camera to the object's centre

    @property
    def id(self) -> int:
        """The object's id in its world."""
        return self.object.id


def round_distance(metres: float) -> float:
    """Metres as a person reads them: to 0.5 m below 5 m (at least 0.5), to whole metres beyond."""
    if metres < 4.75:
        return max(0.5, round(metres * 2) / 2)
    return float(round(metres))


def direction_words(bearing_deg: float, elevation_deg: float) -> str:
    """ "ahead", "ahead-left", "left", ... (and " below"/" above") for a bearing and an elevation."""
    side = "left" if bearing_deg > 0 else "right"
    magnitude = abs(bearing_deg)
    words = "ahead" if magnitude < AHEAD_DEG else f"ahead-{side}" if magnitude < AHEAD_SIDE_DEG else side
    if elevation_deg < -ABOVE_BELOW_DEG:
        words += " below"
    elif elevation_deg > ABOVE_BELOW_DEG:
        words += " above"
    return words


def mentioned_objects(world: World, question: str, options: Sequence[str] = ()) -> list[SceneObject]:
    """The objects the question and option texts name: "red chair" (or "red chairs"), else a category
    alone ("lamp", "chairs": every object of it). Longer names are matched first, so "lamp post" is not a
    "lamp". Returned in id order."""
    text = " ".join([question, *options]).lower()
    found: set[int] = set()

    def take(phrases: list[str]) -> bool:
        nonlocal text
        pattern = r"\b(?:" + "|".join(re.escape(p) for p in phrases) + r")\b"
        text, hits = re.subn(pattern, " | ", text)  # blank the match: "red chair" is not also "chair"
        return hits > 0

    for obj in sorted(world.objects, key=lambda o: (-len(o.name), o.id)):
        if take([obj.name, f"{obj.colour} {plural(obj.category)}"]):
            found.add(obj.id)
    for category in sorted({o.category for o in world.objects}, key=lambda c: (-len(c), c)):
        if take([category, plural(category)]):
            found.update(o.id for o in world.objects if o.category == category)
    return [world.object(i) for i in sorted(found)]


class SceneViews:
    """Which objects are in view from any pose of one scene: low-resolution id renders of its world."""

    def __init__(
        self,
        scene: Scene,
        render_width: int = RENDER_WIDTH,
        min_fraction: float = DEFAULT_MIN_FRACTION,
    ) -> None:
        self.scene = scene
        self.min_fraction = min_fraction
        width = min(render_width, scene.width)
        height = max(8, round(scene.height * width / scene.width))
        self.camera = CameraModel.from_fov(width, height, scene.hfov_deg)
        self._renderer = Renderer(scene.world, self.camera)
        columns, rows = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
        self._columns, self._rows = columns.ravel(), rows.ravel()

    def pose_at(self, stamp_ns: int) -> Pose:
        """The true camera pose at a bag stamp; raises :class:`GroundTruthError` outside the recording."""
        scene = self.scene
        t = (stamp_ns - scene.start_ns) / NS_PER_S
        if not -STAMP_SLACK_S <= t <= scene.trajectory.duration_s + STAMP_SLACK_S:
            raise GroundTruthError(
                f"key frame stamp {stamp_ns} is {t:.1f} s from the start of scene {scene.path} (recorded "
                f"0 to {scene.trajectory.duration_s:.1f} s): the frames are not from this scene's bag; "
                "set the ground-truth VLM's model to the scene.json of the bag being played"
            )
        return scene.trajectory.pose(t)

    def views(self, pose: Pose) -> list[ObjectView]:
        """The objects in view from ``pose`` (>= ``min_fraction`` of the image), nearest first."""
        ids = self._renderer.render(pose).ids.ravel().astype(np.int64)
        n = len(self.scene.world.objects) + 1
        counts = np.bincount(ids, minlength=n)
        sum_u = np.bincount(ids, weights=self._columns, minlength=n)
        sum_v = np.bincount(ids, weights=self._rows, minlength=n)
        cam = self.camera
        rotation = quaternion_to_matrix(pose.orientation)
        position = np.asarray(pose.position, dtype=np.float64)
        found = []
        for k in np.nonzero(counts >= self.min_fraction * ids.size)[0]:
            if k == 0:
                continue
            obj = self.scene.world.object(int(k))
            u, v = sum_u[k] / counts[k], sum_v[k] / counts[k]
            ray = rotation @ np.array([1.0, (cam.cx - u) / cam.fx, (cam.cy - v) / cam.fy])
            found.append(
                ObjectView(
                    object=obj,
                    fraction=float(counts[k]) / ids.size,
                    bearing_deg=math.degrees(math.atan2(cam.cx - u, cam.fx)),
                    elevation_deg=math.degrees(math.asin(ray[2] / np.linalg.norm(ray))),
                    distance_m=float(np.linalg.norm(np.asarray(obj.position) - position)),
                )
            )
        return sorted(found, key=lambda view: (view.distance_m, view.id))


def action_label(previous: Pose, current: Pose) -> str:
    """The paper's label for the true motion between two poses (the dominant component, as odometry
    labels it; a motion under the usual thresholds takes its largest component, "stay still" only when
    the camera did not move at all)."""
    motion = ego_motion(previous, current)
    label = motion.label()
    if label == STILL_LABEL:
        label = motion.label(min_distance_m=0.01, min_angle_deg=0.5)
    return label


def format_metres(metres: float, indoor: bool) -> str:
    """Metres as measurements are written: to 0.01 m indoors, to 0.1 m outdoors (never "-0.00")."""
    text = f"{metres:.2f}" if indoor else f"{metres:.1f}"
    return text[1:] if text.lstrip("-0.") == "" and text.startswith("-") else text


def heading_deg(pose: Pose) -> float:
    """The horizontal heading of a camera pose (degrees, counter-clockwise from the world's x axis)."""
    forward = quaternion_to_matrix(pose.orientation)[:, 0]
    return math.degrees(math.atan2(forward[1], forward[0]))


def map_position(origin: Pose, point: Sequence[float]) -> tuple[float, float, float]:
    """``point`` (world metres) on the map of ``origin``: metres ahead of and left of where the camera
    stood, along its heading, and the world height (above the floor or the ground)."""
    yaw = math.radians(heading_deg(origin))
    dx, dy = point[0] - origin.position[0], point[1] - origin.position[1]
    ahead = math.cos(yaw) * dx + math.sin(yaw) * dy
    left = -math.sin(yaw) * dx + math.cos(yaw) * dy
    return ahead, left, float(point[2])


@dataclass(frozen=True)
class PathPiece:
    """One piece of the camera's path between two key frames: ``kind`` walk, fly, climb or turn;
    ``metres`` along the path (walk, fly), ``up_m`` the change of altitude (fly, climb), ``turn_deg`` the
    change of heading (turn, positive = left)."""

    kind: str
    metres: float = 0.0
    up_m: float = 0.0
    turn_deg: float = 0.0


def path_pieces(trajectory: Trajectory, t0: float, t1: float) -> list[PathPiece]:
    """The pieces of the path between ``t0`` and ``t1`` seconds, in order, consecutive ones of one kind
    merged; pauses and camera tilts (no travel, no heading change) are left out."""
    pieces: list[PathPiece] = []
    for segment, (a, b) in zip(trajectory.segments, trajectory.segment_bounds, strict=True):
        lo, hi = max(a, t0), min(b, t1)
        if hi <= lo:
            continue
        up = float(trajectory.position(hi)[2] - trajectory.position(lo)[2])
        if segment.kind in (WALK, FLY):
            piece = PathPiece(segment.kind, trajectory.path_length(lo, hi), up)
        elif segment.kind == CLIMB:
            piece = PathPiece(CLIMB, up_m=up)
        elif segment.kind in (TURN, LOOK):
            piece = PathPiece(TURN, turn_deg=trajectory.yaw_deg(hi) - trajectory.yaw_deg(lo))
        else:
            continue
        if pieces and pieces[-1].kind == piece.kind:
            last = pieces[-1]
            piece = PathPiece(
                piece.kind, last.metres + piece.metres, last.up_m + piece.up_m, last.turn_deg + piece.turn_deg
            )
            pieces[-1] = piece
        else:
            pieces.append(piece)
    return pieces


def path_text(pieces: Sequence[PathPiece], indoor: bool) -> str:
    """The path account of one step: "walked 1.20 m, turned left 90 deg"; "stood still" when no piece
    survives the rounding."""
    words = []
    for piece in pieces:
        if piece.kind == TURN:
            if round(abs(piece.turn_deg)) >= 1:
                side = "left" if piece.turn_deg > 0 else "right"
                words.append(f"turned {side} {abs(piece.turn_deg):.0f} deg")
            continue
        up = format_metres(abs(piece.up_m), indoor)
        flat = float(up) == 0.0
        if piece.kind == CLIMB:
            if not flat:
                words.append(f"{'climbed' if piece.up_m > 0 else 'descended'} {up} m")
            continue
        metres = format_metres(piece.metres, indoor)
        if float(metres) == 0.0:
            continue
        verb = "walked" if piece.kind == WALK else "flew"
        words.append(
            f"{verb} {metres} m" + ("" if flat else f" ({'up' if piece.up_m > 0 else 'down'} {up} m)")
        )
    return ", ".join(words) if words else "stood still"


class GroundTruthPerceiver(ReplyingPerceiver):
    """Perception of one synthetic scene from its geometry (a :class:`KeyFramePerceiver`; see the module).

    ``scene_json`` is the scene's ``scene.json``; ``render_width`` the width of the id renders,
    ``min_fraction`` the share of the image an object must cover to be in view.
    """

    def __init__(
        self,
        scene_json: str | Path,
        *,
        render_width: int = RENDER_WIDTH,
        min_fraction: float = DEFAULT_MIN_FRACTION,
    ) -> None:
        self.scene = load_scene(scene_json)
        self.views = SceneViews(self.scene, render_width, min_fraction)
        self.indoor = self.scene.world.kind == INDOOR
        self._near_m = NEAR_INDOOR_M if self.indoor else NEAR_OUTDOOR_M

    @property
    def label(self) -> str:
        """What data sets and logs record instead of a VLM name: "ground-truth:scene.json"."""
        return LABEL_PREFIX + self.scene.path.name

    def phrase(self, view: ObjectView) -> str:
        """One object in words: "red chair ahead-left, near, 1.5 m"."""
        nearness = "near" if view.distance_m < self._near_m else "far"
        direction = direction_words(view.bearing_deg, view.elevation_deg)
        return f"{view.object.name} {direction}, {nearness}, {round_distance(view.distance_m):g} m"

    def measured_phrase(self, view: ObjectView, origin: Pose) -> str:
        """A question object in words, with its longest side and its centre on the map of ``origin``:
        "red chair ahead, near, 2 m, longest side 0.90 m, at (2.00, 0.00, 0.45)"."""
        position = ", ".join(
            format_metres(v, self.indoor) for v in map_position(origin, view.object.position)
        )
        size = format_metres(view.object.longest_dimension, self.indoor)
        return f"{self.phrase(view)}, longest side {size} m, at ({position})"

    def replies_for(
        self, keyframes: Sequence[KeyFrame], question: str, options: Sequence[str] = ()
    ) -> list[str]:
        """The raw replies for one query's key frames, in the form the VLM prompts ask for."""
        asked = {o.id for o in mentioned_objects(self.scene.world, question, options)}
        motion = MOTION_WORDS.search(question) is not None
        room = self.indoor and self.scene.world.room is not None and ROOM_WORDS.search(question) is not None
        times = [self._time_s(k.frame.stamp_ns) for k in keyframes]
        poses = [self.views.pose_at(k.frame.stamp_ns) for k in keyframes]
        seen = [self.views.views(pose) for pose in poses]
        first: dict[int, int] = {}  # object id -> the key frame that first showed it
        replies = []
        for j, views in enumerate(seen):
            if j == 0:
                most = MAX_MEMORY if question == AGNOSTIC_QUESTION else MAX_SCENE
                replies.append(self._scene_reply(views, asked, poses[0], room, most))
            else:
                account = path_text(path_pieces(self.scene.trajectory, times[j - 1], times[j]), self.indoor)
                before = {view.id for view in seen[j - 1]}
                observation = self._step_observation(j, views, before, first, asked, poses[0])
                if motion:
                    observation = f"Path: {account}. {observation}"
                replies.append(f"Action: {action_label(poses[j - 1], poses[j])}\nObservation: {observation}")
            for view in views:
                first.setdefault(view.id, j)
        return replies

    def _time_s(self, stamp_ns: int) -> float:
        return (stamp_ns - self.scene.start_ns) / NS_PER_S

    def _listed(self, views: list[ObjectView], asked: set[int], most: int, origin: Pose) -> list[str]:
        """The phrases of the nearest ``most`` of ``views`` and of every question object among them."""
        return [
            self.measured_phrase(v, origin) if v.id in asked else self.phrase(v)
            for i, v in enumerate(views)
            if i < most or v.id in asked
        ]

    def _scene_reply(
        self, views: list[ObjectView], asked: set[int], origin: Pose, room: bool, most: int = MAX_SCENE
    ) -> str:
        listed = self._listed(views, asked, most, origin)
        parts = ["I see " + "; ".join(listed) + "." if listed else "No objects in view."]
        if asked:
            floor = "the floor" if self.indoor else "the ground"
            parts.append(f"Positions are metres from where I stand: x ahead, y left, z above {floor}.")
        if room and self.scene.world.room is not None:
            x, y = (format_metres(v, self.indoor) for v in self.scene.world.room.size[:2])
            parts.append(f"The room is {x} m by {y} m.")
        return " ".join(parts)

    def _step_observation(
        self,
        j: int,
        views: list[ObjectView],
        before: set[int],
        first: dict[int, int],
        asked: set[int],
        origin: Pose,
    ) -> str:
        new = [v for v in views if v.id not in first]
        listed = self._listed(new, asked, MAX_NEW, origin)
        parts = ["First seen: " + "; ".join(listed) + "." if listed else "Nothing new."]
        again = [
            f"the same {v.object.name} as in frame {first[v.id]}"
            for v in views
            if v.id in asked and v.id in first and v.id not in before
        ]
        if again:
            parts.append("Seen again: " + "; ".join(again) + ".")
        return " ".join(parts)

    def close(self) -> None:
        """Nothing to release (no model); for the perceiver interface."""


def scene_file_for_bag(bag: str | Path, scene: str = DEFAULT_SCENE_FILE) -> Path:
    """The scene file of a bag: ``scene`` with a directory part is that file for every bag; a bare file
    name is looked up beside the bag directory (scene_NNNN/scene.json for scene_NNNN/bag)."""
    given = Path(scene).expanduser()
    if given.parent != Path("."):
        return given
    return Path(bag).resolve().parent / given


class GroundTruthScenes:
    """Ground-truth perceivers per bag (for ``embodied-r prepare``): each bag's scene loaded once."""

    def __init__(
        self,
        scene: str = DEFAULT_SCENE_FILE,
        *,
        render_width: int = RENDER_WIDTH,
        min_fraction: float = DEFAULT_MIN_FRACTION,
    ) -> None:
        self.scene = scene or DEFAULT_SCENE_FILE
        self._render_width, self._min_fraction = render_width, min_fraction
        self._perceivers: dict[Path, GroundTruthPerceiver] = {}

    @property
    def label(self) -> str:
        """What the data set's ``vlm`` column says: "ground-truth:scene.json"."""
        return LABEL_PREFIX + Path(self.scene).name

    def for_bag(self, bag: str | Path) -> GroundTruthPerceiver:
        """The perceiver of ``bag``'s scene; raises :class:`GroundTruthError` when it has no scene file."""
        path = scene_file_for_bag(bag, self.scene)
        if path not in self._perceivers:
            self._perceivers[path] = GroundTruthPerceiver(
                path, render_width=self._render_width, min_fraction=self._min_fraction
            )
        return self._perceivers[path]
