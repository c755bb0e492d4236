"""The training package's ``embodied-r`` commands: synth, import-video, prepare, train, eval, compare.

Each module's ``register(subparsers)`` is an entry point of group ``embodied_r_ros.commands``
(training/setup.cfg), so ``embodied-r`` lists and runs them where this package is installed. They are the
command line of the library modules they name: argparse lives here, flags become configs with
:mod:`embodied_r_ros.cli.flags` (the one part of the command line they use), the library takes configs.
"""
