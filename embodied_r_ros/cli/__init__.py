"""The ``embodied-r`` command: the entry point (main) and one module per subcommand."""
