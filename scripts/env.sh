# Source this file to get the project's environment: the venv, the ROS 2 underlay it holds,
# and the built package. With --no-install it only sets variables (used by scripts/setup).
_cbcl_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
case $- in *u*) set +u; source "$_cbcl_root/.venv/bin/activate"; set -u ;;
           *) source "$_cbcl_root/.venv/bin/activate" ;; esac
export AMENT_PREFIX_PATH="$_cbcl_root/.venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$_cbcl_root/.venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
# Large images over shared memory without loss (see docs/nodes.md, "QoS choices and transport").
export FASTDDS_DEFAULT_PROFILES_FILE="${FASTDDS_DEFAULT_PROFILES_FILE:-$_cbcl_root/config/fastdds_profile.xml}"
mkdir -p "$_cbcl_root/log"
if [ "${1:-}" != "--no-install" ] && [ -f "$_cbcl_root/install/setup.bash" ]; then
  # colcon's setup does not chain the venv; it is sourced after the venv for that reason.
  # shellcheck disable=SC1091
  # colcon's and the venv's scripts read unset variables; callers may run under `set -u`.
  case $- in *u*) set +u; source "$_cbcl_root/install/setup.bash"; set -u ;;
             *) source "$_cbcl_root/install/setup.bash" ;; esac
fi
# The package's executables (what `ros2 run cbcl_pr_ros <name>` would start) and its command-line tools
# (cbcl-eval, cbcl-memory, cbcl-bag-eval, cbcl-bag-record, cbcl-render-dataset: bin/), by name.
export PATH="$_cbcl_root/install/cbcl_pr_ros/lib/cbcl_pr_ros:$PATH"
unset _cbcl_root
