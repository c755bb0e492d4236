"""Camera frames lost before they reached the node: gaps in each publisher's DDS sequence numbers.

A frame the middleware drops (a full best-effort queue, a lost UDP fragment, a callback that ran late) never
reaches the camera callback, so no "dropped" counter can see it. Each DDS writer numbers its samples
1, 2, 3, ... (rclpy hands the number to a callback that takes ``MessageInfo``), so a jump from 7 to 10 in
one publisher's numbers means two frames were published and never arrived. The frames a publisher sent
before the first one that reached the node (numbers 1 .. first - 1: sent before the subscription matched, or
before the node started) are counted apart, so that received + lost + before-first is what was published.
Plain Python, no ROS.
"""

from __future__ import annotations

from collections import OrderedDict

MAX_PUBLISHERS = 64  # writers remembered (a restarted camera driver is a new writer)


class SequenceGaps:
    """Counts samples missing from each publisher's sequence numbers, as they arrive."""

    def __init__(self) -> None:
        self.missed = 0
        self.before_first = 0  # numbered before the first sample that arrived, over all publishers
        self._last: OrderedDict[bytes, int] = OrderedDict()

    def observe(self, publisher: bytes, sequence: int | None) -> int:
        """Record one received sample of ``publisher`` (its GID) numbered ``sequence``; returns how many of
        that publisher's samples went missing just before it (0 without a number: not every middleware
        gives one). A repeated or older number (a late sample) counts nothing."""
        if not sequence or sequence < 0:
            return 0
        last = self._last.get(publisher)
        if last is not None and sequence <= last:
            return 0
        self._last[publisher] = sequence
        self._last.move_to_end(publisher)
        while len(self._last) > MAX_PUBLISHERS:
            self._last.popitem(last=False)
        if last is None:
            self.before_first += sequence - 1
            return 0
        gap = sequence - last - 1
        self.missed += gap
        return gap

    def clear(self) -> None:
        """Forget the publishers (the counts stay: they are the node's lifetime totals)."""
        self._last.clear()
