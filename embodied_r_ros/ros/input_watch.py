"""Inputs that do not come, said once: a camera without frames, poses that do not come, a topic whose
publishers have another type.

The node's inputs (:mod:`.node_inputs`) describe each input they subscribe as an :class:`InputCheck` on
every tick of the diagnostics timer (wall time, on the executor: the ROS graph is never queried on an
input's own thread), and :class:`InputWatch` judges it:

- a topic whose publishers (other nodes') have another type than the subscription's: DDS never matches
  them, so nothing will come; said at once, with the setting that takes that type where there is one
  (``camera.compressed``, ``pose.source``);
- no usable message for ``warn_after_s``: the camera since activation or its last frame, poses while
  camera frames come (with TF: no pose for the camera frame, with the last lookup's reason).

Each problem names the topic and the topics of the expected type that ARE published (other nodes'
publishers, from ``get_topic_names_and_types``), so a wrong name, namespace or remap shows itself. It is
logged once as a WARN when it starts (again when it changes kind, or clears and comes back) and as an INFO
when it clears; /diagnostics carries the current text in every message (:attr:`InputWatch.problems`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MISSING, WRONG_TYPE = "missing", "wrong_type"


@dataclass(frozen=True)
class InputCheck:
    """One input as the node sees it on a tick."""

    key: str  # "camera" or "poses": /diagnostics reports it as inputs.<key>
    what: str  # what it carries, for the text: "camera frames", "poses", "camera poses from TF"
    topics: tuple[str, ...]  # the resolved topics the node subscribes
    type_name: str  # their type as the ROS graph names it: "sensor_msgs/msg/Image"
    parameter: str  # the parameter that names the topic (the fix for a wrong name); "" for TF: a remap
    silent_s: float | None  # seconds without a usable message; None: not judged now
    warn_after_s: float
    detail: str = ""  # what else the node knows ("the last lookup: ...")
    # Other types worth naming when published, each with the setting that takes it.
    also: tuple[tuple[str, str], ...] = ()


def graph_type(type_name: str) -> str:
    """A type as the ROS graph names it: "nav_msgs/Odometry" -> "nav_msgs/msg/Odometry"."""
    package, _, name = type_name.rpartition("/")
    return type_name if package.endswith("/msg") else f"{package}/msg/{name}"


class InputWatch:
    """Judges the :class:`InputCheck` of ``node``'s inputs and says what is missing (see the module
    docstring); :attr:`problems` maps an input's key to its current problem."""

    def __init__(self, node: Any) -> None:
        self._node = node
        self.problems: dict[str, str] = {}
        self._kinds: dict[str, str] = {}  # key -> the kind of problem last logged

    def check(self, checks: list[InputCheck]) -> dict[str, str]:
        """Judge ``checks`` now; log what started, changed kind or cleared; returns :attr:`problems`."""
        logger = self._node.get_logger()
        problems: dict[str, str] = {}
        for check in checks:
            kind, text = self._judge(check)
            before = self._kinds.get(check.key, "")
            if kind and kind != before:
                logger.warning(text)
            elif before and not kind:
                logger.info(f"{check.what} on {', '.join(check.topics)} again")
            self._kinds[check.key] = kind
            if kind:
                problems[check.key] = text
        for key in set(self._kinds) - {check.key for check in checks}:
            del self._kinds[key]  # an input no longer subscribed
        self.problems = problems
        return problems

    def clear(self) -> None:
        """Forget every problem without a word (the node stopped taking its inputs)."""
        self.problems, self._kinds = {}, {}

    # ---------------------------------------------------------------------------------------------

    def _judge(self, check: InputCheck) -> tuple[str, str]:
        """(kind, text) of ``check``'s problem, ("", "") when there is none."""
        for topic in check.topics:
            others = {t: n for t, n in self._publisher_types(topic).items() if t != check.type_name}
            if others:
                return WRONG_TYPE, self._wrong_type(check, topic, others)
        if check.silent_s is None or check.silent_s < check.warn_after_s:
            return "", ""
        topics = ", ".join(check.topics)
        detail = f": {check.detail}" if check.detail else ""
        silent = f"no {check.what} on {topics} for {check.silent_s:.0f} s{detail}"
        publishers = sum(len(self._others(topic)) for topic in check.topics)
        there = (
            f"{publishers} publisher{'s' * (publishers != 1)} there sent nothing usable (check its rate, "
            "QoS and stamps)"
            if publishers
            else "nothing publishes there"
        )
        return MISSING, f"{silent}; {there}; {self._published(check)}"

    def _wrong_type(self, check: InputCheck, topic: str, others: dict[str, int]) -> str:
        found = ", ".join(f"{t} ({n} publisher{'s' * (n != 1)})" for t, n in sorted(others.items()))
        settings = [setting for type_name, setting in check.also if type_name in others]
        elsewhere = f"set {check.parameter} to" if check.parameter else "remap it to"
        fix = (
            f"set {settings[0]}"
            if settings
            else f"publish {check.type_name} there, or {elsewhere} a topic that carries it"
        )
        return (
            f"{topic} is published as {found}, not {check.type_name}: the node cannot take {check.what} "
            f"from it; {fix}; {self._published(check)}"
        )

    def _published(self, check: InputCheck) -> str:
        """Where else the expected type (and the ``also`` types) are published now, for the fix."""
        topics = [topic for topic in self._topics_of_type(check.type_name) if topic not in check.topics]
        fix = f"set {check.parameter}, or remap" if check.parameter else "remap the node's topics to them"
        text = (
            f"{check.type_name} is published on {', '.join(topics)} ({fix})"
            if topics
            else f"no other topic carries {check.type_name}"
        )
        for type_name, setting in check.also:
            other = self._topics_of_type(type_name)
            if other:
                text += f"; {type_name} is published on {', '.join(other)} ({setting})"
        return text

    # The ROS graph, other nodes' publishers only (the node's own ~/keyframes is an Image too).

    def _others(self, topic: str) -> list[Any]:
        node = self._node
        return [
            info
            for info in node.get_publishers_info_by_topic(topic)
            if (info.node_name, info.node_namespace) != (node.get_name(), node.get_namespace())
        ]

    def _publisher_types(self, topic: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for info in self._others(topic):
            counts[info.topic_type] = counts.get(info.topic_type, 0) + 1
        return counts

    def _topics_of_type(self, type_name: str) -> list[str]:
        return sorted(
            name
            for name, types in self._node.get_topic_names_and_types()
            if type_name in types and any(info.topic_type == type_name for info in self._others(name))
        )
