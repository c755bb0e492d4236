"""Several cameras on one robot: which cameras a node takes, and a question's key frames drawn from them.

A drone with a forward and a downward camera, or a ground robot with three, runs one node that shares its
VLM and LM between the cameras (one node per camera loads both models once per camera). Each camera keeps a
history (and a durable memory) of its own; a question names one camera or asks over all of them. Over
all of them, the key frames of every camera are merged in time (:func:`merge_keyframes`) and each
observation starts with the camera it came from (:func:`label_cameras`): "Seen by the down camera: ...".
The motion between two key frames is the robot body's (the node takes body poses with several cameras), so
it reads the same whichever camera took them. A count's tally from the memories is one over all the cameras
asked (:func:`~embodied_r_ros.memory.sightings.merged_tally`): an object two cameras saw counts once.

With one camera nothing here changes what the reasoner reads: the paper's prompt stays as it is.

Plain Python, no ROS: the node's parameter ``cameras`` (:func:`parse_cameras`) is checked where ROS is not
installed, and the merge and the labels are tested without DDS.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .keyframes import KeyFrame
from .perception import Description

CAMERA_NAME = re.compile(r"[a-z][a-z0-9_]*")
# What may follow a camera's topic after ":" (each once at most): its transport and its QoS profile.
TRANSPORTS = ("raw", "compressed")
QOS_OPTIONS = ("sensor_data", "reliable")
# The start of an observation from a named camera; :func:`without_camera` reads it back.
LABEL_PATTERN = re.compile(r"^Seen by the (?P<camera>[a-z][a-z0-9_]*) camera: ")


class CameraListError(ValueError):
    """The ``cameras`` parameter cannot be read; the message names the entry and the form it needs."""


@dataclass(frozen=True)
class CameraSpec:
    """One camera of a node: its name ("" for the one camera of a node without ``cameras``), its image
    topic, whether it publishes CompressedImage, and its QoS profile (sensor_data or reliable)."""

    name: str
    topic: str
    compressed: bool = False
    qos: str = "sensor_data"

    @property
    def label(self) -> str:
        """How logs and /diagnostics name it: "camera front", or "camera" for the unnamed one."""
        return f"camera {self.name}" if self.name else "camera"


def parse_cameras(text: str, compressed: bool = False, qos: str = "sensor_data") -> list[CameraSpec]:
    """The cameras of the ``cameras`` parameter: ``NAME=TOPIC[:OPTION...]`` entries separated by spaces or
    commas, e.g. ``"front=/drone/front/image_raw down=/drone/down/image_raw:compressed:reliable"``.

    OPTIONs: ``compressed`` or ``raw`` (default: the argument ``compressed``, the node's
    ``camera.compressed``) and ``sensor_data`` or ``reliable`` (default: ``qos``, the node's ``camera.qos``).
    Names are lower case (letters, digits, _), each once. Empty text: no cameras (the
    node's one camera is ``camera.*``). Raises :class:`CameraListError` naming the entry and the fix.
    """
    cameras: list[CameraSpec] = []
    for entry in (part for part in re.split(r"[\s,]+", text.strip()) if part):
        name, sep, rest = entry.partition("=")
        if not sep or not rest:
            raise CameraListError(
                f"cameras entry {entry!r} needs the form NAME=TOPIC (e.g. front=/front/image_raw)"
            )
        if not CAMERA_NAME.fullmatch(name):
            raise CameraListError(
                f"cameras entry {entry!r}: the name {name!r} must start with a lower-case letter and hold "
                "only lower-case letters, digits and _ (it names the camera in questions and files)"
            )
        if any(camera.name == name for camera in cameras):
            raise CameraListError(f"cameras names {name!r} twice; give each camera its own name")
        topic, *options = rest.split(":")
        if not topic.strip("/"):
            raise CameraListError(f"cameras entry {entry!r} has no topic")
        spec = CameraSpec(name, topic, compressed, qos)
        for option in options:
            if option in TRANSPORTS:
                spec = dataclasses.replace(spec, compressed=option == "compressed")
            elif option in QOS_OPTIONS:
                spec = dataclasses.replace(spec, qos=option)
            else:
                raise CameraListError(
                    f"cameras entry {entry!r}: unknown option {option!r}; after the topic come "
                    f"{' or '.join(TRANSPORTS)} and {' or '.join(QOS_OPTIONS)}"
                )
        cameras.append(spec)
    return cameras


def unknown_camera_problem(asked: str, names: Sequence[str]) -> str | None:
    """Why a question may not name camera ``asked`` on a node with cameras ``names`` (None: it may; ""
    asks over all of them)."""
    if not asked or asked in names:
        return None
    if names == [""] or list(names) == [""]:
        return (
            f"this node has one camera and no camera names (the cameras parameter is empty): ask without "
            f"a camera, not {asked!r}"
        )
    return f"no camera named {asked!r} on this node; its cameras: {', '.join(names)} (or none: all of them)"


@dataclass(frozen=True)
class Source:
    """Where one key frame of a merged sequence came from: its camera and the key frame as that camera's
    history gave it (its own stamp: what the evidence reports and the camera's memory knows it by)."""

    camera: str
    keyframe: KeyFrame


def merge_keyframes(groups: Mapping[str, Sequence[KeyFrame]]) -> tuple[list[KeyFrame], dict[int, Source]]:
    """The key frames of several cameras as one sequence in time, and the :class:`Source` of each by its
    stamp in that sequence.

    Inside the pipeline every key frame needs a stamp of its own (the prompt fitting and the descriptions
    match key frames by stamp), so a frame stamped exactly like one already taken (cameras triggered
    together) is moved 1 ns later there; its Source keeps the real stamp. Ties keep the order of ``groups``.
    """
    tagged = sorted(
        ((keyframe.frame.stamp_ns, order, name, keyframe)
         for order, (name, keyframes) in enumerate(groups.items())
         for keyframe in keyframes),
        key=lambda item: item[:2],
    )  # fmt: skip
    merged: list[KeyFrame] = []
    sources: dict[int, Source] = {}
    last = None
    for stamp, _, name, original in tagged:
        keyframe = original
        if last is not None and stamp <= last:
            stamp = last + 1
            frame = dataclasses.replace(original.frame, stamp_ns=stamp)
            keyframe = dataclasses.replace(original, frame=frame)
        merged.append(keyframe)
        sources[stamp] = Source(name, original)
        last = stamp
    return merged, sources


def label_cameras(descriptions: Sequence[Description], cameras: Mapping[int, str]) -> list[Description]:
    """``descriptions`` with each observation started by the camera its key frame came from (matched by
    stamp, see :func:`merge_keyframes`); one without a camera is kept as it is."""
    labelled = []
    for description in descriptions:
        name = cameras.get(description.stamp_ns)
        if name:
            observation = f"Seen by the {name} camera: {description.observation}"
            description = dataclasses.replace(description, observation=observation)
        labelled.append(description)
    return labelled


def keep_measured_motion(
    descriptions: Sequence[Description], cameras: Mapping[int, str]
) -> list[Description]:
    """``descriptions`` without the VLM's motion labels between key frames of two different cameras: with
    no pose there, the VLM compared one camera's view with another's, and its label says nothing about how
    the robot moved. Motion measured from the poses (the body's) stays."""
    kept = []
    for j, description in enumerate(descriptions):
        previous = descriptions[j - 1] if j else None
        if (
            previous is not None
            and description.action is not None
            and description.action_source == "vlm"
            and cameras.get(previous.stamp_ns) != cameras.get(description.stamp_ns)
        ):
            description = dataclasses.replace(description, action=None, action_source="none")
        kept.append(description)
    return kept


def without_camera(observation: str) -> str:
    """An observation without the camera label :func:`label_cameras` put first (the memory keeps the
    VLM's own words, once per camera file)."""
    return LABEL_PATTERN.sub("", observation, count=1)
