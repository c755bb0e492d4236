"""Evaluation: ``embodied-r eval``, ``compare``, statistics and plots."""
