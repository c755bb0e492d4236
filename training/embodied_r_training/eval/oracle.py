"""The oracle reasoner, under its former name: it lives in :mod:`embodied_r_training.tasks.oracle` (one
layer below eval, so that synth and rl use it too). This name stays for the command line's yardstick
(``embodied_r_ros/cli/yardstick.py``) until it imports from there."""

from __future__ import annotations

from ..tasks.oracle import oracle_answer, oracle_trace, question_task

__all__ = ["oracle_answer", "oracle_trace", "question_task"]
