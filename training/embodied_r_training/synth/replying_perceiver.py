"""A perceiver that writes each key-frame query's raw replies itself, as a VLM would reply.

The scene's ground truth (:class:`~.ground_truth.GroundTruthPerceiver`) and the mission's
(:mod:`.mission_ground_truth`) are two: each writes the replies, and this class makes several queries and
parsed descriptions of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from embodied_r_ros.keyframes import KeyFrame
from embodied_r_ros.perception import Description, PerceptionQuery, parse_descriptions


class ReplyingPerceiver:
    """A perceiver that writes each query's raw replies itself (:meth:`replies_for`, as a VLM would reply):
    several queries and the parsed descriptions follow from it, through the VLM replies' parser."""

    def replies_for(
        self, keyframes: Sequence[KeyFrame], question: str, options: Sequence[str] = ()
    ) -> list[str]:
        raise NotImplementedError

    def replies(self, queries: Sequence[PerceptionQuery]) -> list[list[str]]:
        """The raw replies of several queries (each computed on its own; there is no batch to share)."""
        return [self.replies_for(q.keyframes, q.question, q.options) for q in queries]

    def describe(
        self, keyframes: Sequence[KeyFrame], question: str, options: Sequence[str] = ()
    ) -> list[Description]:
        """The parsed descriptions, through the same parser as a VLM's replies (odometry actions included)."""
        return parse_descriptions(keyframes, self.replies_for(keyframes, question, options))
