"""Ground-truth perception of a whole mission (:mod:`.mission_writer`): a measuring instrument, not a VLM.

A mission has no single scene.json (one world per file): it is cut into pieces, each a room visit or the
hall walked between two rooms, each written as a scene the ground-truth perceiver of one scene loads
(``pieces/piece_NNNN.json``, listed with their stamp intervals in ``mission.json``). This perceiver routes
each key frame to the piece its stamp lies in (a boundary belongs to the later piece, as the plan's
``piece_at``). Consecutive key frames of one piece are described together, exactly as that piece's scene
perceiver describes them; where a query's key frames go from one piece into another (a question over two
rooms, or over intervals a memory search retrieved), the first key frame of the next piece is described as
a first frame is ("I see ..."), after the true motion between the two key frames on the mission's path
(``Action: <label>``), so the replies keep the form a VLM's take. Positions given for question objects are
then relative to the first key frame of each piece's run, not of the whole query, and an object is named
"the same X as in frame k" (k counted in the whole query) only when seen again within one piece's run, not
on a revisit in another piece: limits of the instrument, stated here rather than hidden.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

from embodied_r_ros.frames import NS_PER_S
from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.perception import ImageEncoder

from .ground_truth import (
    LABEL_PREFIX,
    GroundTruthError,
    GroundTruthPerceiver,
    action_label,
)
from .replying_perceiver import ReplyingPerceiver
from .trajectory import Trajectory

MISSION_FILE = "mission.json"
_FRAME_REF = re.compile(r"(as in frame )(\d+)")  # ground_truth's "Seen again: the same X as in frame k"
PIECES_LOADED = 8  # piece perceivers kept loaded (each holds a renderer): a few rooms around the question


def is_mission_file(path: str | Path) -> bool:
    """Whether ``path`` is a mission's mission.json (and not one scene's scene.json)."""
    path = Path(path)
    if path.name == MISSION_FILE:
        return True
    try:
        with path.open(encoding="utf-8") as f:
            head = f.read(4096)
    except OSError:
        return False
    return '"pieces"' in head and '"rooms"' in head


def _shift_frame_refs(reply: str, offset: int) -> str:
    """``reply`` with each "as in frame k" (an identity line, counted within one piece's run) as the frame's
    number in the whole query: ``k + offset``."""
    return _FRAME_REF.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + offset}", reply)


class MissionGroundTruth(ReplyingPerceiver):
    """The ground-truth perceiver of one mission (a :class:`KeyFramePerceiver`; see the module docstring).

    ``mission_json``: the mission.json :func:`~.mission_writer.write_mission` wrote; its pieces are loaded
    when a key frame first needs them, at most :data:`PIECES_LOADED` at a time.
    """

    def __init__(self, mission_json: str | Path) -> None:
        self.path = Path(mission_json)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            pieces = data["pieces"]
            self.start_ns, self.end_ns = int(data["start_ns"]), int(data["end_ns"])
            self.trajectory = Trajectory.from_dict(data["trajectory"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise GroundTruthError(
                f"{self.path} is not a mission.json of `embodied-r synth` missions ({exc}); give the file "
                "bench/make_mission.py wrote"
            ) from exc
        self._starts = [int(p["interval"][0]) for p in pieces]
        self._scenes = [self.path.parent / p["scene"] for p in pieces]
        self._loaded: OrderedDict[int, GroundTruthPerceiver] = OrderedDict()

    @property
    def label(self) -> str:
        """What data sets and logs record instead of a VLM name: "ground-truth:mission.json"."""
        return LABEL_PREFIX + self.path.name

    def piece_of(self, stamp_ns: int) -> int:
        """The index of the piece a stamp lies in; raises :class:`GroundTruthError` outside the mission."""
        if not self.start_ns <= stamp_ns <= self.end_ns:
            raise GroundTruthError(
                f"key frame stamp {stamp_ns} lies outside mission {self.path} ({self.start_ns} .. "
                f"{self.end_ns}): the key frames come from another recording"
            )
        return max(0, bisect.bisect_right(self._starts, stamp_ns) - 1)

    def _piece(self, index: int) -> GroundTruthPerceiver:
        if index in self._loaded:
            self._loaded.move_to_end(index)
        else:
            self._loaded[index] = GroundTruthPerceiver(self._scenes[index])
            if len(self._loaded) > PIECES_LOADED:
                self._loaded.popitem(last=False)
        return self._loaded[index]

    def _mission_pose(self, stamp_ns: int):
        return self.trajectory.pose((stamp_ns - self.start_ns) / NS_PER_S)

    def replies_for(
        self, keyframes: Sequence[KeyFrame], question: str, options: Sequence[str] = ()
    ) -> list[str]:
        """The raw replies for one query's key frames, in the form the VLM prompts ask for."""
        runs: list[tuple[int, list[KeyFrame]]] = []
        for keyframe in keyframes:
            index = self.piece_of(keyframe.frame.stamp_ns)
            if runs and runs[-1][0] == index:
                runs[-1][1].append(keyframe)
            else:
                runs.append((index, [keyframe]))
        replies: list[str] = []
        previous: KeyFrame | None = None
        for index, run in runs:
            part = self._piece(index).replies_for(run, question, options)
            if replies:  # the piece numbers its run's frames from 0; in the query they follow the others
                part = [_shift_frame_refs(reply, len(replies)) for reply in part]
            if previous is not None:  # into another piece: the true motion, then what is in view
                before = self._mission_pose(previous.frame.stamp_ns)
                now = self._mission_pose(run[0].frame.stamp_ns)
                part[0] = f"Action: {action_label(before, now)}\nObservation: {part[0]}"
            replies.extend(part)
            previous = run[-1]
        return replies

    def pre_encoder(self) -> ImageEncoder | None:
        """Nothing to encode ahead: ground truth reads the key frames' stamps, not their pixels."""
        return None

    def close(self) -> None:
        """Drops the loaded pieces."""
        self._loaded.clear()
