"""The robot's durable mission memory: the store, its search, background descriptions."""
