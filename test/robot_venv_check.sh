#!/usr/bin/env bash
# The robot install of docs/robot.md#install, as far as a machine without an apt ROS can run it (slow: about a
# minute; not part of the suite). Run from the repository root after `make venv`:
#   bash test/robot_venv_check.sh [WORK_DIR]
#
# What stands in for what:
# - BASE_PYTHON (default /usr/bin/python3.11, Debian 12's system Python) is the robot's system Python: marked
#   externally managed (PEP 668) like Ubuntu 24.04's, so `pip install` into it is refused.
# - The project's .venv site-packages (ROS 2 from PyPI wheels, torch, transformers, ...) stands for what the
#   robot has below the venv: /opt/ros (rclpy), apt's python3-* packages and the robot's own torch. It is added
#   as a site directory of the new venv (a .pth file), after the venv's own site-packages, which is where
#   --system-site-packages puts the system's. The environment variables that `source /opt/ros/<distro>/
#   setup.bash` sets (AMENT_PREFIX_PATH, CMAKE_PREFIX_PATH, LD_LIBRARY_PATH) point at it.
# Then the documented commands run as written: a `python3 -m venv --system-site-packages` venv with a
# COLCON_IGNORE inside the workspace, `pip install -r requirements-robot.txt` (here --no-index: everything must
# already be satisfied from below the venv, torch included, so nothing is downloaded or replaced),
# `python -m colcon build`, `source install/setup.bash`, and the installed `embodied-r` runs on the venv's
# Python. Not run here: rosdep (needs an apt ROS), `--packages-select` (the PyPI colcon has no
# colcon-package-selection; the workspace holds one package), `ros2 launch` (no launch package on PyPI).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BASE_PYTHON=${BASE_PYTHON:-/usr/bin/python3.11}
BELOW=$(cd "$REPO/.venv" && pwd -P)  # the shared venv, resolved: it stands for /opt/ros + apt + the robot's torch
WORK=${1:-$(mktemp -d /tmp/robot_venv_check.XXXXXX)}
WS=$WORK/ros2_ws
step() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

PYVER=$("$BASE_PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
SITE=$BELOW/lib/python$PYVER/site-packages
[ -d "$SITE" ] || fail "$BASE_PYTHON is Python $PYVER but $BELOW has no lib/python$PYVER (the wheels are cp311)"

step "the workspace: $WS (the repository's tracked files, results/ left out)"
rm -rf "$WS" && mkdir -p "$WS/src/embodied_r_ros"
(cd "$REPO" && git ls-files -z -- . ':!results' | xargs -0 cp --parents -t "$WS/src/embodied_r_ros")
cd "$WS"

step "PEP 668: pip into the system Python is refused"
if "$BASE_PYTHON" -c 'import sys, sysconfig, os; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    if out=$("$BASE_PYTHON" -m pip install --no-index --dry-run xxhash 2>&1); then
        fail "pip into $BASE_PYTHON was not refused"
    fi
    grep -q "externally-managed-environment" <<<"$out" || fail "refused for another reason: $out"
    echo "refused: externally-managed-environment"
else
    echo "skipped: $BASE_PYTHON is not marked externally managed"
fi

step "python3 -m venv --system-site-packages venv && touch venv/COLCON_IGNORE && source venv/bin/activate"
"$BASE_PYTHON" -m venv --system-site-packages venv
touch venv/COLCON_IGNORE
VENV_SITE=$WS/venv/lib/python$PYVER/site-packages
# Python 3.12's venv (Ubuntu 24.04) has no setuptools of its own; 3.11's old one would hide the newer one
# below (torch requires setuptools >= 77), and --no-index could not replace it. (Before the .pth: pip must
# see only the venv's own copy.)
"$WS/venv/bin/python" -m pip uninstall --quiet --yes setuptools
echo "import site; site.addsitedir('$SITE')" >"$VENV_SITE/zz_below_the_venv.pth"
set +u
source venv/bin/activate
set -u
# What `source /opt/ros/<distro>/setup.bash` sets, for the stand-in (and the wheels' own re-exec switched off:
# it would add the venv's lib/, not the stand-in's).
export AMENT_PREFIX_PATH=$BELOW CMAKE_PREFIX_PATH=$BELOW _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
LD_LIBRARY_PATH=$BELOW/lib:$(find "$SITE" -maxdepth 1 -type d -name 'ros_*.libs' | tr '\n' ':')
export LD_LIBRARY_PATH ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$((RANDOM % 100 + 100))}
[ "$(command -v python3)" = "$WS/venv/bin/python3" ] || fail "python3 is $(command -v python3), not the venv's"

step "pip install -r src/embodied_r_ros/requirements-robot.txt (--no-index: all satisfied from below the venv)"
# Less its numpy<2 line: the stand-in holds requirements.txt's NumPy 2; on a robot apt's NumPy 1.x meets it.
grep -v '^numpy' src/embodied_r_ros/requirements-robot.txt >"$WORK/requirements-robot.txt"
torch_before=$(python -c 'import torch; print(torch.__file__)')
pip install --no-index --quiet -r "$WORK/requirements-robot.txt"
[ "$(python -c 'import torch; print(torch.__file__)')" = "$torch_before" ] || fail "pip replaced torch"
installed=$(find "$VENV_SITE" -maxdepth 1 -name '*.dist-info' ! -name 'pip-*' -printf '%f ')
[ -z "$installed" ] || fail "pip installed into the venv: $installed"
python -c 'import transformers.utils as u, torch; assert u.is_torch_available(), torch.__version__'
echo "nothing installed into the venv; torch $(python -c 'import torch; print(torch.__version__)') kept and enabled"

step "python -m colcon build (the venv's Python runs colcon, and CMake finds the venv's Python)"
python -m colcon build --event-handlers console_direct- >"$WORK/colcon.log" 2>&1 || {
    tail -30 "$WORK/colcon.log"
    fail "colcon build"
}
grep -q "^_Python3_EXECUTABLE:INTERNAL=$WS/venv/bin/python3\$" build/embodied_r_ros/CMakeCache.txt ||
    fail "CMake used $(grep '^_Python3_EXECUTABLE' build/embodied_r_ros/CMakeCache.txt)"
echo "built with $WS/venv/bin/python3"

step "source install/setup.bash; the installed commands run on the venv's Python"
set +u
source install/setup.bash
set -u
head -1 install/embodied_r_ros/bin/embodied-r
embodied-r --help >/dev/null
embodied-r models merge --help >/dev/null
python - "$WS" "$SITE" <<'EOF'
import sys

import rclpy
import torch
import embodied_r_ros
from embodied_r_ros.srv import AskSpatial

ws, below = sys.argv[1], sys.argv[2]
assert sys.prefix == f"{ws}/venv", sys.prefix
assert embodied_r_ros.__file__.startswith(f"{ws}/install/"), embodied_r_ros.__file__
assert rclpy.__file__.startswith(below) and torch.__file__.startswith(below), (rclpy.__file__, torch.__file__)
rclpy.init()
node = rclpy.create_node("robot_venv_check")
client = node.create_client(AskSpatial, "/embodied_r/ask")
print(f"python {sys.prefix}; embodied_r_ros from install/; rclpy and torch {torch.__version__} from below the "
      f"venv; a node made a {client.srv_type.__name__} client")
node.destroy_node()
rclpy.shutdown()
EOF

step "without the venv, /usr/bin/env python3 is the system Python, which lacks the packages"
if env PATH="/usr/bin:/bin" VIRTUAL_ENV= install/embodied_r_ros/bin/embodied-r --help >/dev/null 2>&1; then
    echo "note: the system python3 runs embodied-r too (it has the packages)"
else
    echo "fails, as the docs say: activate the venv in every shell that starts the node"
fi
printf '\nPASS: the robot venv layout (work dir %s)\n' "$WORK"
