"""The robot's poses: transforms, the transform tree, pose history and ego-motion."""
