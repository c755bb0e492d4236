"""The ROS-side subcommands of ``embodied-r``, registered together: ``run`` (the node), ``ask`` (a client)
and ``play`` (a bag player). Each lives in its own module; their ROS imports happen when they run."""

from __future__ import annotations

import argparse

from . import ask, play, run


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``embodied-r run``, ``embodied-r ask`` and ``embodied-r play``."""
    for module in (run, ask, play):
        module.register(subparsers)
