"""The synthetic world: scenes, rendering, trajectories, visibility, questions, bags."""
