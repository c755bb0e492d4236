"""What a camera stamp far from the stream's newest means: one bad stamp, or a new time base.

A bag that loops or a simulation that restarts sends stamps that jump back and stay there: the history
must be cleared. One stale frame (30 s back) or one stamp a day in the future is a glitch: clearing the
history for it would lose everything the robot saw, and taking it as the newest frame would make every
later, correct frame look like a jump. So a jump is believed only when it persists: ``confirm`` frames in
a row, each a little after the one before, all far from the old time base. Until then those frames are
dropped and counted; the confirming frame starts the new stream (a lone stale frame never becomes the
first key frame of anything).
"""

from __future__ import annotations

from .frames import NS_PER_S

OK, SUSPECT, RESTART = "ok", "suspect", "restart"
# A camera that pauses resumes with a forward gap: only a gap this long is doubted (a clock a day ahead is
# a glitch, a camera restarted after a minute is not).
FORWARD_JUMP_S = 60.0
CONFIRM_FRAMES = 3
STEP_S = 2.0  # consecutive frames of a new time base are at most this far apart


class StampGuard:
    """Classifies each camera stamp against the newest accepted one (see the module docstring)."""

    def __init__(
        self, back_s: float, forward_s: float = FORWARD_JUMP_S, confirm: int = CONFIRM_FRAMES
    ) -> None:
        if confirm < 1:
            raise ValueError(f"confirm must be >= 1, got {confirm}")
        self.back_ns = round(back_s * NS_PER_S)  # 0: never doubted (camera.jump_back_reset_s = 0)
        self.forward_ns = round(forward_s * NS_PER_S)
        self.confirm = confirm
        self._suspects: list[int] = []

    def check(self, stamp_ns: int, newest_ns: int | None) -> str:
        """OK (take it), SUSPECT (drop it, a jump not confirmed yet) or RESTART (the jump persisted: clear
        the history and take this frame as the first of a new stream)."""
        back = self.back_ns and newest_ns is not None and stamp_ns < newest_ns - self.back_ns
        forward = newest_ns is not None and stamp_ns > newest_ns + self.forward_ns
        if not (back or forward):
            self._suspects.clear()
            return OK
        last = self._suspects[-1] if self._suspects else None
        if last is None or not 0 < stamp_ns - last <= STEP_S * NS_PER_S:
            self._suspects = [stamp_ns]  # the start of another candidate time base
        else:
            self._suspects.append(stamp_ns)
        if len(self._suspects) >= self.confirm:
            self._suspects.clear()
            return RESTART
        return SUSPECT

    def reset(self) -> None:
        """Forget the frames doubted so far (the history was cleared)."""
        self._suspects.clear()
