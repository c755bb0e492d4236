"""The time window a question asks about, checked against the history the node holds.

A question names its window in one of three ways (``AskSpatial``/``AnswerSpatial``; zero means unset):

* ``window_seconds`` only: the last N seconds up to the newest frame (0: the node's ``query.window_s``);
  a window longer than the history simply covers all of it.
* ``start_stamp`` and ``end_stamp``: that interval of camera time, e.g. 10:02-10:05 or a bag's older part;
* only ``end_stamp``: the ``window_seconds`` before it; only ``start_stamp``: from it to the newest frame.

An absolute interval the node cannot answer from its history fails with a message that says why and what
to do: it starts before the oldest frame still held (``buffer.history_s``, or the node started or was
reset later; with a durable memory, the oldest frame the memory holds), or it lies in the future (after the
newest frame).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .frames import NS_PER_S

# Stamps within this of the history's ends count as inside: a question's start may name the bag's start,
# a little before its first frame, and a clock a little ahead of the camera's is not "the future".
TOLERANCE_NS = NS_PER_S


class WindowError(ValueError):
    """A window that cannot be answered; the message names the fields and the fix."""


@dataclass(frozen=True)
class Window:
    """What a question asked for (stamps in ns, 0 = unset; seconds 0 = the node's default)."""

    seconds: float = 0.0
    start_ns: int = 0
    end_ns: int = 0

    @property
    def absolute(self) -> bool:
        """Whether the question named camera stamps (and not only "the last N seconds")."""
        return bool(self.start_ns or self.end_ns)

    def check(self) -> None:
        """Raise :class:`WindowError` for values that mean nothing (checked before the question queues)."""
        if not math.isfinite(self.seconds) or self.seconds < 0:
            raise WindowError(
                f"window_seconds must be a finite number of seconds >= 0 (0: the node's default window), "
                f"got {self.seconds}"
            )
        if self.start_ns < 0 or self.end_ns < 0:
            raise WindowError(
                f"start_stamp and end_stamp must be camera stamps (0: unset), got {self.start_ns} and "
                f"{self.end_ns} ns"
            )
        if self.start_ns and self.end_ns and self.start_ns > self.end_ns:
            raise WindowError(
                f"start_stamp {format_stamp(self.start_ns)} is after end_stamp {format_stamp(self.end_ns)}; "
                "swap them"
            )

    def bounds(self, default_s: float, newest_ns: int) -> tuple[int, int]:
        """The window as [start, end] camera stamps, unchecked (see :meth:`resolve`)."""
        length_ns = round((self.seconds or default_s) * NS_PER_S)
        end = self.end_ns or newest_ns
        return self.start_ns or end - length_ns, end

    def resolve(
        self,
        default_s: float,
        oldest_ns: int,
        newest_ns: int,
        history_s: float,
        *,
        held: str = "",
        fix: str = "",
    ) -> tuple[int, int]:
        """The window as [start, end] camera stamps, given the history held ([oldest, newest]).

        Raises :class:`WindowError` when an absolute interval lies outside that history; ``held`` says
        what bounds the history and ``fix`` how to reach further back (default: ``buffer.history_s``).
        """
        self.check()
        start, end = self.bounds(default_s, newest_ns)
        if not self.absolute:
            return start, end
        if start > newest_ns + TOLERANCE_NS or end > newest_ns + TOLERANCE_NS:
            raise WindowError(
                f"the interval {format_stamp(start)} - {format_stamp(end)} reaches into the future: the "
                f"newest camera frame is at {format_stamp(newest_ns)}; ask again later or end it earlier"
            )
        if start < oldest_ns - TOLERANCE_NS:
            held = held or f"it keeps buffer.history_s = {history_s:g} s and forgets everything at a reset"
            raise WindowError(
                f"the interval {format_stamp(start)} - {format_stamp(end)} starts before the oldest frame "
                f"the node still holds ({format_stamp(oldest_ns)}; {held}); ask about a later interval or "
                f"{fix or 'raise buffer.history_s'}"
            )
        return start, end


def format_stamp(stamp_ns: int) -> str:
    """A camera stamp as seconds, e.g. ``1700000012.500 s``."""
    return f"{stamp_ns / NS_PER_S:.3f} s"
