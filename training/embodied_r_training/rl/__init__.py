"""Reinforcement learning: rewards, their schedule, the training config and ``embodied-r train``."""
