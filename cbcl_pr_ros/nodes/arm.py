"""Arm node: points Baxter's arm (real, Gazebo/ros2_control, or simulated) at a classified object.

Services ``point_at`` (cbcl_pr_ros/PointAt) and ``look_at`` (cbcl_pr_ros/LookAt: aim the hand
camera at a named look pose such as ``table``, or at a point of the base frame; robot/look_poses.py).
Subscribes ``detections`` (the learner's tracked objects, placed in the base frame) and
``camera_info`` to locate them, and ``joint_states`` for the IK seed. Commands go out
through the backend chosen by ``backend``:

- ``sim``: sensor_msgs/JointState positions by name on ``command_topic`` (default ``joint_command``,
  what the simulated world node takes);
- ``baxter``: baxter_core_msgs/JointCommand in position mode on ``/robot/limb/<side>/joint_command``,
  repeated at ``rate_hz`` (> 5 Hz) for ``hold_s`` seconds (needs baxter_core_msgs installed);
- ``trajectory``: trajectory_msgs/JointTrajectory on ``command_topic`` (e.g.
  ``/arm_controller/joint_trajectory``).
An unknown label or an unreachable target answers success=false and nothing is published.
Every callback is guarded (:mod:`.guard`); a malformed camera_info is dropped.

``detections`` carry each object's base-frame ``position`` and the camera pose of their stamp,
placed by the learner with its checked pose history (perception/camera_pose.py); the arm keeps them
per track (:class:`~cbcl_pr_ros.robot.detected_objects.DetectedObjects`) and ``point_at(label)``
aims at the object that was detected as that label most, else at a configured ``object_poses``
entry. Only detections whose ``position_frame`` is ``base_frame`` (the fixed frame of the learner's
camera poses) are used: those without one (the learner knew no camera pose for their stamp, or
another publisher sent them) or in another frame are ignored with a throttled warning saying which,
since a position in a frame the arm does not know says nothing about where it should point. The
learner's proposals and tracks are the one segmentation and association.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from cbcl_pr_ros.nodes.ros_params import declare_read_only
from cbcl_pr_ros.settings.robot_params import ARM_PARAMS
from cbcl_pr_ros.nodes.detections_msgs import built_within_bounds, detections_from_serialized
from cbcl_pr_ros.nodes.guard import guard_callback, guard_service
from cbcl_pr_ros.nodes.spin import run_node
from cbcl_pr_ros.msg import Detections
from cbcl_pr_ros.perception.types import CameraIntrinsics, intrinsics_for_image
from cbcl_pr_ros.robot.arm_logic import ArmController, PointingRefused, parse_object_poses
from cbcl_pr_ros.robot.detected_objects import camera_problem
from cbcl_pr_ros.robot.backends import BaxterCommandStream, check_backend, load_baxter_joint_command, plan_trajectory
from cbcl_pr_ros.robot.look_poses import LookRefused, look_target, solve_look
from cbcl_pr_ros.request_checks import RequestError, check_label, quote
from cbcl_pr_ros.srv import LookAt, PointAt
from cbcl_pr_ros.stamps import stamp_to_s
from cbcl_pr_ros.nodes.cli_help import exit_on_help

__all__ = ["ArmNode", "main"]

_PARAMS = {spec.name: (spec.default, spec.description) for spec in ARM_PARAMS}


def _unusable(msg: Detections, base_frame: str) -> str | None:
    """Why the arm cannot aim at ``msg``'s positions, or None when they are in ``base_frame`` with a
    camera pose a learner sends."""
    if not msg.position_frame:
        return _unplaced(msg)
    if msg.position_frame != base_frame:
        return (f"their positions are in frame {quote(msg.position_frame)}, not in this arm's base_frame "
                f"{quote(base_frame)} (is the learner's camera_pose_topic in another frame?)")
    c = msg.camera_pose
    return camera_problem((c.position.x, c.position.y, c.position.z),
                          (c.orientation.x, c.orientation.y, c.orientation.z, c.orientation.w))


def _unplaced(msg: Detections) -> str:
    """Why detections without a ``position_frame`` say nothing the arm can aim at, as far as the message
    shows: a learner leaves the frame empty (and the positions NaN) only when it had no camera pose for
    the stamp; positions without a frame come from some other publisher."""
    placed = any(np.isfinite([o.position.x, o.position.y, o.position.z]).all() for o in msg.objects)
    if placed:
        return ("their objects have positions but position_frame is empty, so they are in no known frame "
                "(not placed by a learner, which always names the frame it placed objects in)")
    return ("position_frame is empty and no object has a position: their sender had no camera pose for "
            "their stamp (a learner's comes from its camera_pose_topic: is it published?)")


class ArmNode(Node):
    """ROS adapter around :class:`~cbcl_pr_ros.robot.arm_logic.ArmController`."""

    def __init__(self, *, node_name: str = "arm", namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(node_name, namespace=namespace, **kwargs)
        g = declare_read_only(self, ARM_PARAMS)  # read once, here: a later set is refused rather than ignored
        self.backend = check_backend(g("backend"))
        self.side = g("side")
        poses = parse_object_poses([e for e in g("object_poses") if not e.startswith("none:")])
        self.logic = ArmController(self.side, float(g("table_height")), float(g("pointing_tolerance_m")), poses,
                                   float(g("min_confidence")))
        self.max_velocity = float(g("max_joint_velocity"))
        self.base_frame = str(g("base_frame"))
        self._lock = threading.Lock()
        self._logic_lock = threading.Lock()  # the controller is not thread-safe
        self._joints: dict[str, float] = {}
        self._joint_set = frozenset(self.logic.joint_names)
        self._camera: tuple[np.ndarray, tuple[int, int]] | None = None  # K and (width, height), set together
        self.commands_sent = 0
        self.detections_used = 0
        self.last_target: dict[str, float] | None = None
        self._make_command_publisher(g("command_topic"), float(g("rate_hz")), float(g("hold_s")))
        self._subscribe_and_serve()
        self.get_logger().info(f"arm ready: {self.side} arm, backend '{self.backend}' on '{self.command_pub.topic_name}'")

    def _make_command_publisher(self, topic: str, rate_hz: float, hold_s: float) -> None:
        """The backend's publisher (and, for Baxter, the timer that repeats its command)."""
        self._stream: BaxterCommandStream | None = None
        if self.backend == "baxter":
            self._msg_type = load_baxter_joint_command()
            self._stream = BaxterCommandStream(self.side, rate_hz, hold_s)
            self.command_pub = self.create_publisher(self._msg_type, topic or self._stream.topic, 10)
            self.create_timer(self._stream.period_s, guard_callback(self, self._stream_tick, "command stream"))
        elif self.backend == "trajectory":
            self.command_pub = self.create_publisher(JointTrajectory, topic or "joint_trajectory", 10)
        else:
            self.command_pub = self.create_publisher(JointState, topic or "joint_command", 10)

    def _subscribe_and_serve(self) -> None:
        """Sensors in one group; detections and each service in their own, so a backlog of detections
        never delays point_at (the controller itself is serialised by ``_logic_lock``).

        The topics spin on a single-threaded executor of their own (``stream_callback_groups``,
        nodes/spin.py), the services on the pool: on the pool, ``joint_states`` at 20 Hz woke the spin
        thread about 20 times a message and kept 6-8 % of a core busy on a robot doing nothing."""
        sensors, detections = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        self.stream_callback_groups = (sensors, detections)
        gc = lambda fn, what: guard_callback(self, fn, what)  # noqa: E731
        self.create_subscription(JointState, "joint_states", gc(self._on_joints, "joint_states"), 10,
                                 callback_group=sensors)
        self.create_subscription(CameraInfo, "camera_info", gc(self._on_info, "camera_info"), 5,
                                 callback_group=sensors)
        self.create_subscription(Detections, "detections", gc(self._on_detections, "detections"), 2,
                                 callback_group=detections, raw=True)  # counted, then built
        self.create_service(PointAt, "point_at", guard_service(self, self._on_point_at, "point_at"),
                            callback_group=MutuallyExclusiveCallbackGroup())
        self.create_service(LookAt, "look_at", guard_service(self, self._on_look_at, "look_at"),
                            callback_group=MutuallyExclusiveCallbackGroup())

    # ------------------------------------------------------------------ inputs
    def _on_joints(self, msg: JointState) -> None:
        """Only this arm's joints are kept (the IK seed): a stranger's million names grow nothing."""
        known = self._joint_set
        pairs = [(n, float(p)) for n, p in zip(msg.name, msg.position) if n in known and np.isfinite(p)]
        with self._lock:
            self._joints.update(pairs)

    def _on_info(self, msg: CameraInfo) -> None:
        """Keep the camera's K unless no camera has it for its image (as the extractor judges it): fx
        1e-300 would put every place in front of the camera in view, and an empty detections message
        would then drop every remembered object."""
        try:
            intrinsics = CameraIntrinsics.from_k(msg.k)
        except ValueError:
            return
        size = (int(msg.height), int(msg.width))
        if all(size) and intrinsics_for_image(intrinsics, None, size)[0] is None:
            return
        if all(size):  # one assignment: a detections callback never pairs a new K with the old size
            self._camera = (np.array(msg.k, float).reshape(3, 3), (size[1], size[0]))

    def _on_detections(self, msg: Detections | bytes) -> None:
        """Remember the detected objects by their base-frame positions (the learner placed them). The
        subscription delivers the serialized bytes: a message of more objects than a learner sends is
        refused before it is built."""
        msg = built_within_bounds(msg, detections_from_serialized, self.get_logger(), "detections")
        if msg is None:
            return
        why = _unusable(msg, self.base_frame)
        if why is not None:
            # unplaced and empty (a learner's first frames before its first camera pose): nothing to aim at
            # and nothing wrong, so no warning
            if msg.objects or msg.position_frame:
                self.get_logger().warning(f"detections ignored: {why}", throttle_duration_sec=10.0)
            return
        objs = [(o.id, o.label, o.known, o.confidence, (o.position.x, o.position.y, o.position.z),
                 (o.x0, o.y0, o.x1, o.y1)) for o in msg.objects]
        c = msg.camera_pose
        camera = ((c.position.x, c.position.y, c.position.z),
                  (c.orientation.x, c.orientation.y, c.orientation.z, c.orientation.w))
        k, size = self._camera or (None, None)
        with self._logic_lock:
            self.logic.detected.update(objs, stamp_to_s(msg.header.stamp), camera, k, size, int(msg.model_version))
        self.detections_used += 1

    # ------------------------------------------------------------------ pointing
    def point(self, label: str) -> tuple[bool, str, Any]:
        """Solve and command; returns (success, message, (target, solution) or None)."""
        with self._lock:
            current = {n: self._joints[n] for n in self.logic.joint_names if n in self._joints}
        try:
            with self._logic_lock:
                target, sol = self.logic.point_at(label, current)
                which = self.logic.which(label)
        except PointingRefused as exc:
            self.get_logger().info(f"point_at {label!r} refused: {exc}")
            return False, str(exc), None
        self._command(dict(zip(sol.joint_names, sol.joint_positions)), current)
        return True, (f"pointing the {self.side} arm at {which}, at {np.round(target, 3).tolist()} "
                      f"(ray misses the centre by {sol.error_m * 100:.1f} cm)"), (target, sol)

    def _command(self, target: dict[str, float], current: dict[str, float]) -> None:
        self.last_target = target
        self.commands_sent += 1
        if self.backend == "baxter":
            assert self._stream is not None
            self._stream.set_target(target, time.monotonic())
            self._stream_tick()
        elif self.backend == "trajectory":
            plan = plan_trajectory({**target, **current}, target, self.max_velocity)
            self.command_pub.publish(plan.fill(JointTrajectory(), JointTrajectoryPoint, Duration))
        else:
            msg = JointState(name=list(target), position=list(target.values()))
            msg.header.stamp = self.get_clock().now().to_msg()
            self.command_pub.publish(msg)

    def _stream_tick(self) -> None:
        assert self._stream is not None
        cmd = self._stream.tick(time.monotonic())
        if cmd is not None:
            self.command_pub.publish(cmd.fill(self._msg_type()))

    def _on_point_at(self, req: PointAt.Request, resp: PointAt.Response) -> PointAt.Response:
        try:  # the services' rule for a name: an answer or log line never carries a megabyte back
            label = check_label(req.label, "label")
        except RequestError as exc:
            resp.success, resp.message = False, str(exc)
            return resp
        ok, message, result = self.point(label)
        resp.success, resp.message = ok, message
        if result is not None:
            target, sol = result
            resp.target.header.frame_id = self.base_frame
            resp.target.header.stamp = self.get_clock().now().to_msg()
            resp.target.point.x, resp.target.point.y, resp.target.point.z = (float(v) for v in target)
            resp.joint_names = list(sol.joint_names)
            resp.joint_positions = [float(v) for v in sol.joint_positions]
            resp.pointing_error_m = float(sol.error_m)
        return resp

    def _on_look_at(self, req: LookAt.Request, resp: LookAt.Response) -> LookAt.Response:
        with self._lock:
            current = {n: self._joints[n] for n in self.logic.joint_names if n in self._joints}
        height = float(req.height_m) or 0.48
        try:
            pose = req.pose.strip()
            target = (look_target(pose, self.logic.table_height) if pose
                      else (float(req.target.x), float(req.target.y), float(req.target.z)))
            with self._logic_lock:
                sol = solve_look(self.logic.kin, target, height, seed=current)
        except LookRefused as exc:
            self.get_logger().warning(f"look_at refused: {exc}")
            resp.success, resp.message = False, str(exc)
            return resp
        self._command(dict(zip(sol.joint_names, sol.joint_positions)), current)
        resp.success = True
        resp.target.x, resp.target.y, resp.target.z = (float(v) for v in target)
        resp.eye.x, resp.eye.y, resp.eye.z = (float(v) for v in sol.hand_position)  # the camera, for aim_camera
        resp.joint_names = list(sol.joint_names)
        resp.joint_positions = [float(v) for v in sol.joint_positions]
        resp.message = (f"{self.side} hand camera looks at {np.round(target, 3).tolist()}"
                        + (f" ({req.pose.strip()})" if req.pose.strip() else ""))
        return resp

    def destroy_node(self) -> None:
        try:
            if hasattr(self, "logic"):  # not when a start value was refused before it was made
                self.logic.close()
        finally:
            super().destroy_node()


def main(args: list[str] | None = None) -> int:
    exit_on_help(sys.argv if args is None else args, "arm_node", __doc__, _PARAMS)
    return run_node(ArmNode, threads=4, args=args)


if __name__ == "__main__":
    sys.exit(main())
