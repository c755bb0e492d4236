"""mission_last_place (mc, 4 options): "Where was the X when I last saw it?", a place on the odometry map.

Options are places "(x, y)" in whole metres of the mission (odometry) frame: the centre of the object of the
name's last sighting, and three distractors drawn the same way for other names (where each of three other
names was last seen), every option at least :data:`SEPARATION_M` from every other. The options are thus
four draws of one kind, so nothing in them alone tells the answer (an earlier draft's distractors, other
objects of the name and any seen object, let a reader of the options pick the place farthest along the
corridor: 0.72-0.90 accuracy blind). A name whose last sighting shows two of its objects at once is not
asked about (which one is meant?).

The prompt must carry, for the key frame that last lists the name, its place line with the odometry position
and heading ("at (3.1, -2.0) m, facing 90 deg", :mod:`embodied_r_ros.memory.mission_time`) and the name's
listing ("red chair ahead-left, near, 2.5 m"): the oracle puts the object at the listing's direction and
distance from there (:func:`embodied_r_ros.memory.sightings.place_from`, as the memory's sightings index does)
and picks the nearest option. It abstains when the name is never listed, or that frame has no position or
heading.
"""

from __future__ import annotations

import math
import re

from embodied_r_ros.memory.sightings import mentions, place_from
from embodied_r_ros.reasoning.options import OPTION_LETTERS

from ..task import Answer, QuestionTask, Template, Unanswerable
from .context import Evidence, MissionContext, MissionDraft, NameSighting
from .reading import MissionReading, last_listed

NAME = "mission_last_place"
TEMPLATE = Template("Where was the {} when I last saw it (x, y in metres on the odometry map)?")
SEPARATION_M = 6.0  # options at least this far apart: the oracle's place is good to ~2 m at 10 m
_OPTION = re.compile(r"^\((-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)\)$")


def format_place(x: float, y: float) -> str:
    """A place as options show it: "(12, -3)" (whole metres; never "-0")."""
    return f"({round(x) + 0}, {round(y) + 0})"


def generate(m: MissionContext) -> list[MissionDraft]:
    """One question per name whose last sighting shows one of its objects alone; its distractors the last
    places of other such names, drawn at random."""
    count = m.counts[NAME]
    last_of: dict[str, NameSighting] = {}
    for name, sightings in m.by_name.items():
        count.candidates += 1
        last = max(sightings, key=lambda s: (s.t1, s.object_id))
        if any(s.object_id != last.object_id and s.t0 <= last.t1 and s.t1 >= last.t0 for s in sightings):
            count.drop("two_of_the_name_in_view")
        else:
            last_of[name] = last
    drafts = []
    for name, last in last_of.items():
        truth = _position(m, last.object_id)
        chosen = [truth]
        for other in m.rng.permutation(list(last_of)).tolist():
            where = _position(m, last_of[other].object_id)
            if other != name and all(math.dist(where, p) >= SEPARATION_M for p in chosen):
                chosen.append(where)
            if len(chosen) == 4:
                break
        if len(chosen) < 4:
            count.drop("too_few_far_apart_places")
            continue
        rooms = {s.room for s in m.by_name[name]}
        evidence = Evidence((m.stamps(last),), (last.object_id,), {"recurring": len(rooms) > 1})
        correct, distractors = format_place(*truth), tuple(format_place(*p) for p in chosen[1:])
        text, objects = TEMPLATE.format(name), (last.object_id,)
        drafts.append(MissionDraft(NAME, text, correct, objects, evidence, distractors=distractors))
    count.usable = len(drafts)
    return drafts


def _position(m: MissionContext, object_id: int) -> tuple[float, float]:
    """The object's centre in the mission (odometry) frame: its room's offset plus its place in the room."""
    room, obj = m.objects[object_id]
    ox, oy = m.plan.offsets[room]
    return (obj.position[0] + ox, obj.position[1] + oy)


def solve(reading: MissionReading, match: re.Match[str]) -> tuple[str, Answer]:
    """The object placed from the last key frame listing it; the option nearest to that place."""
    name = match.group(1)
    frame, where = last_listed(reading, name)
    if where is None or where.position is None or where.heading_deg is None:
        raise Unanswerable(f"frame {frame}, the last to describe the {name}, has no position and heading")
    listed = next((item for item in mentions(reading.observations[frame]) if item.name == name), None)
    if listed is None:
        raise Unanswerable(f"frame {frame} lists the {name} without a direction and distance")
    x, y = place_from(listed, *where.position, math.radians(where.heading_deg))
    places = [_OPTION.match(option.strip()) for option in reading.options]
    if not places or None in places:
        raise Unanswerable("the options are not places (x, y)")
    gaps = [math.dist((x, y), (float(p.group(1)), float(p.group(2)))) for p in places if p is not None]
    nearest = min(range(len(gaps)), key=gaps.__getitem__)
    letter = OPTION_LETTERS[nearest]
    px, py = where.position
    text = (
        f"The {name} is last described in frame {frame}, {listed.distance_m:g} m away, "
        f"{listed.bearing_deg:+g} deg from my heading; I stood at ({px:.1f}, {py:.1f}) facing "
        f"{where.heading_deg:g} deg, so it was at ({x:.1f}, {y:.1f}). The nearest option is "
        f"{reading.options[nearest]}, option {letter}."
    )
    return text, letter


TASK = QuestionTask(NAME, TEMPLATE, generate, solve)
