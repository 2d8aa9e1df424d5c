"""Parameters of the arm, simulated-world and teaching-page nodes: defaults, descriptions and ranges (ROS-free).

These nodes read their parameters once, at start: the motion stream, the camera, the world and the
page are built from them. The nodes therefore declare them read-only (``ros2 param set`` is refused with
"read-only" instead of silently doing nothing) and refuse to start on a value out of range, with the
parameter's name in the message.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cbcl_pr_ros.settings.params import ParamSpec, check_value
from cbcl_pr_ros.stamps import check_frame_name

__all__ = ["ARM", "SIM_WORLD", "PAGE", "ARM_PARAMS", "SIM_WORLD_PARAMS", "PAGE_PARAMS", "check_parameters",
           "check_robot_parameter", "on_set_check"]

ARM = "arm"
SIM_WORLD = "sim_world"
PAGE = "teaching_page"

ARM_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("backend", "sim", "Where commands go", (ARM,), choices=("sim", "baxter", "trajectory")),
    ParamSpec("side", "right", "Which arm points", (ARM,), choices=("left", "right")),
    ParamSpec("command_topic", "", "Command topic ('' = joint_command for sim, Baxter's topic for baxter, "
                                   "joint_trajectory for trajectory)", (ARM,)),
    ParamSpec("rate_hz", 20.0, "Baxter backend: command streaming rate (Baxter needs more than 5 Hz)", (ARM,),
              min=5.01, max=1000.0),
    ParamSpec("hold_s", 3.0, "Baxter backend: seconds to keep streaming a target", (ARM,), min=0.1, max=600.0),
    ParamSpec("max_joint_velocity", 0.8, "trajectory backend: fastest joint speed of the planned motion (rad/s)",
              (ARM,), min=0.01, max=10.0),
    ParamSpec("table_height", -0.18, "z of the table top in the base frame (for the named look poses)", (ARM,),
              min=-5.0, max=5.0),
    ParamSpec("pointing_tolerance_m", 0.03, "Largest accepted distance from the object centre to the pointing ray",
              (ARM,), min=1e-4, max=1.0),
    ParamSpec("min_confidence", 0.0, "Detections below this fused confidence are no pointing target", (ARM,), min=0.0, max=1.0),
    ParamSpec("object_poses", ["none:0,0,0"],
              "Configured object positions 'label:x,y,z' (for robots without depth)", (ARM,)),
    ParamSpec("base_frame", "base", "The fixed frame the arm points in: detections are used only when their "
              "position_frame is this frame (the frame_id of the learner's camera_pose_topic); others are "
              "ignored with a warning", (ARM,)),
)

SIM_WORLD_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("rate_hz", 5.0, "Camera frames per second (rgb, depth, camera_info, camera_pose)", (SIM_WORLD,),
              min=0.1, max=120.0),
    ParamSpec("joint_state_rate_hz", 20.0, "JointState publishing and joint control rate", (SIM_WORLD,),
              min=1.0, max=1000.0),
    ParamSpec("width", 640, "Camera image width in pixels", (SIM_WORLD,), min=16, max=4096),
    ParamSpec("height", 480, "Camera image height in pixels", (SIM_WORLD,), min=16, max=4096),
    ParamSpec("fov_deg", 60.0, "Camera vertical field of view in degrees", (SIM_WORLD,), min=1.0, max=170.0),
    ParamSpec("seed", 0, "World seed (table texture, lighting); the same seed gives the same images", (SIM_WORLD,),
              min=0, max=2**31 - 1),
    ParamSpec("camera_side", "right", "Which hand carries the camera", (SIM_WORLD,), choices=("left", "right")),
    ParamSpec("frame_id", "base", "Frame of joint targets and poses (Baxter's base)", (SIM_WORLD,)),
    ParamSpec("camera_frame_id", "right_hand_camera", "frame_id of the published images", (SIM_WORLD,)),
    ParamSpec("publish_depth", True, "Publish depth and camera_pose (the learner places tracks in the base "
              "frame with them; the arm points at those)",
              (SIM_WORLD,)),
    ParamSpec("max_joint_velocity", 2.0, "Joint speed (rad/s) towards commanded positions", (SIM_WORLD,),
              min=0.01, max=100.0),
    ParamSpec("shadows", True, "Render shadows (slower)", (SIM_WORLD,)),
    ParamSpec("start_look_pose", "table", "Look pose of the hand camera at start (robot/look_poses.py); "
              "'neutral' keeps Baxter's untucked pose", (SIM_WORLD,),
              choices=("table", "table_left", "table_right", "table_near", "table_far", "neutral")),
)


PAGE_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("address", "127.0.0.1", "Address the page listens on; 127.0.0.1 = this machine only. Any other "
              "address needs 'token'", (PAGE,)),
    ParamSpec("port", 8080, "TCP port of the page (0 = any free port, logged)", (PAGE,), min=0, max=65535),
    ParamSpec("token", "", "Access token (at least 8 characters), required when address is not a loopback "
              "address: open http://HOST:PORT/?token=...", (PAGE,)),
    ParamSpec("host_names", "", "Names besides its address that the page answers to, comma-separated (e.g. "
              "'robot1.local'); a request naming any other host is refused (DNS rebinding). localhost and "
              "IP addresses need no entry", (PAGE,)),
    ParamSpec("max_pages", 8, "Most pages open at once (websockets); one more is refused with 503 and says so",
              (PAGE,), min=1, max=256),
    ParamSpec("jpeg_quality", 80, "JPEG quality of the pictures sent to the page", (PAGE,), min=10, max=100),
    ParamSpec("max_fps", 5.0, "Most pictures per second sent to the pages", (PAGE,), min=0.1, max=120.0),
    ParamSpec("max_image_pixels", 4096 * 4096, "Most pixels (width x height) of a camera frame the page "
              "shows; a larger one is not decoded (one throttled warning)", (PAGE,), min=1, max=2**31 - 1),
    ParamSpec("plain_after_s", 2.0, "Show the plain camera picture when no detections came for this long",
              (PAGE,), min=0.0, max=3600.0),
    ParamSpec("teach_timeout_s", 60.0, "Wait this long for the learner's answer to a teach", (PAGE,),
              min=0.1, max=3600.0),
    ParamSpec("call_timeout_s", 10.0, "Wait this long for the answer to rename, forget, list and point", (PAGE,),
              min=0.1, max=3600.0),
)


def check_robot_parameter(spec: ParamSpec, value: Any) -> str | None:
    """None when ``value`` fits ``spec`` (type, range, choices, the list and frame rules), else why."""
    reason = check_value(spec, value)
    if reason is None and isinstance(value, list) and not all(isinstance(v, str) for v in value):
        reason = f"{spec.name} must be a list of strings"
    if reason is None and spec.name in ("frame_id", "camera_frame_id", "base_frame") and not str(value).strip():
        reason = f"{spec.name} must not be empty"
    if reason is None and spec.name in ("frame_id", "camera_frame_id", "base_frame"):  # a learner's rule
        try:
            check_frame_name(value, spec.name)
        except ValueError as exc:
            reason = str(exc)
    return reason


def check_parameters(specs: Iterable[ParamSpec], value_of: Callable[[str], Any]) -> None:
    """Raise ValueError naming every parameter whose value (``value_of(name)``) is out of its spec."""
    problems = [r for r in (check_robot_parameter(spec, value_of(spec.name)) for spec in specs) if r]
    if problems:
        raise ValueError("invalid parameters: " + "; ".join(problems))


def on_set_check(specs: Iterable[ParamSpec]) -> Callable[[str, Any, dict], str | None]:
    """The check for ``nodes.ros_params.install_validation`` (a later set is validated like a start value)."""
    by_name = {spec.name: spec for spec in specs}
    return lambda name, value, _current: check_robot_parameter(by_name[name], value) if name in by_name else None
