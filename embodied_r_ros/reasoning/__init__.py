"""Reasoning: prompts, fitting them to the LM, the reasoner's messages, option letters and reading the
answers."""
