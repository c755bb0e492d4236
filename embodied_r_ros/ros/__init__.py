"""The ROS 2 layer: the node, its parameters, message conversion, the query worker."""
