"""Embodied spatial reasoning for ROS 2 robots (Embodied-R, arXiv 2504.12680).

The core modules (frames, clip_buffer, keyframes, perception, reasoning, answers, backends) are plain
Python. The generated ROS interfaces (``embodied_r_ros.msg``, ``.srv``, ``.action``) exist after the
package is built with colcon; they may live in another directory of the same package name (the colcon
install), which ``extend_path`` merges in when the sources are imported directly.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
__version__ = "0.1.0"
