"""Simulated world node: a headless PyBullet Baxter at a table, seen by its hand camera.

Publishes (relative names, remappable): ``image`` (sensor_msgs/Image rgb8), ``camera_info``,
``depth`` (32FC1, metres), ``camera_pose`` (geometry_msgs/PoseStamped of the optical frame in
``base``; all four share one stamp) at ``rate_hz``, and ``joint_states`` at ``joint_state_rate_hz``.

Takes joint commands the way the real arms do: ``joint_command`` (sensor_msgs/JointState, positions
by name, as a Baxter's position mode takes them), ``joint_trajectory`` (trajectory_msgs/
JointTrajectory, as a ros2_control controller takes them) and, when ``baxter_core_msgs`` is
installed, Baxter's own ``/robot/limb/<side>/joint_command``. Joints move towards their targets at
``max_joint_velocity``; commands outside the joint limits are refused with a log line.

Services (issue 12) put objects on the table and take them off, so a session of separate
processes (``ros2 launch cbcl_pr_ros sim_teaching_demo.launch.py``) can set a scene:
``place_object`` (cbcl_pr_ros/PlaceObject: category, instance, x/y/yaw or a random free spot) and
``clear_objects`` (cbcl_pr_ros/ClearObjects: names, or all). The scripted teacher (the demo) also
arranges objects in-process under ``world_lock``.
"""
from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory

from cbcl_pr_ros.nodes.ros_params import declare_read_only
from cbcl_pr_ros.settings.robot_params import SIM_WORLD_PARAMS
from cbcl_pr_ros.nodes.cli_help import exit_on_help
from cbcl_pr_ros.nodes.guard import guard_callback, guard_service
from cbcl_pr_ros.nodes.spin import run_node
from cbcl_pr_ros.robot.world import MAX_OBJECTS, CameraConfig, Frame, SimWorld, WorldConfig
from cbcl_pr_ros.srv import ClearObjects, PlaceObject

__all__ = ["SimWorldNode", "frame_messages", "main"]

_PARAMS = {spec.name: (spec.default, spec.description) for spec in SIM_WORLD_PARAMS}


def short_list(names: list[str], limit: int = 200) -> str:
    """Names for a message, cut to ``limit`` characters (a request's names are not echoed whole)."""
    text = ", ".join(repr(n[:40]) for n in names[:10]) + (f" (+{len(names) - 10} more)" if len(names) > 10 else "")
    return text[:limit]


def frame_messages(frame: Frame, header: Header) -> tuple[Image, CameraInfo, Image, PoseStamped]:
    """ROS messages of one rendered frame, all with ``header`` (pure conversion)."""
    h, w = frame.rgb.shape[:2]
    img = Image(header=header, height=h, width=w, encoding="rgb8", is_bigendian=0, step=3 * w)
    img.data = frame.rgb.tobytes()
    info = CameraInfo(header=header, height=h, width=w, distortion_model="plumb_bob")
    K = frame.K
    info.d = [0.0] * 5
    info.k = [float(v) for v in K.ravel()]
    info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    info.p = [float(K[0, 0]), 0.0, float(K[0, 2]), 0.0, 0.0, float(K[1, 1]), float(K[1, 2]), 0.0, 0.0, 0.0, 1.0, 0.0]
    depth = Image(header=header, height=h, width=w, encoding="32FC1", is_bigendian=0, step=4 * w)
    depth.data = np.ascontiguousarray(frame.depth, dtype="<f4").tobytes()
    pose = PoseStamped()
    pose.header.stamp = header.stamp
    pose.header.frame_id = "base"
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = (float(v) for v in frame.camera_position)
    q = frame.camera_quaternion
    pose.pose.orientation.x, pose.pose.orientation.y, pose.pose.orientation.z, pose.pose.orientation.w = (float(v) for v in q)
    return img, info, depth, pose


class SimWorldNode(Node):
    """ROS face of :class:`~cbcl_pr_ros.robot.world.SimWorld`. ``world`` may be injected (tests, demo)."""

    def __init__(self, world: SimWorld | None = None, *, node_name: str = "sim_world",
                 namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(node_name, namespace=namespace, **kwargs)
        g = declare_read_only(self, SIM_WORLD_PARAMS)  # read once, here (settings/robot_params.py)
        if g("camera_side") not in ("left", "right"):
            raise ValueError(f"camera_side must be left or right, got {g('camera_side')!r}")
        cam = CameraConfig(int(g("width")), int(g("height")), float(g("fov_deg")))
        self.world = world or SimWorld(WorldConfig(camera=cam, camera_side=g("camera_side"), shadows=bool(g("shadows"))),
                                       seed=int(g("seed")))
        self.world_lock = threading.RLock()
        if world is None and g("start_look_pose") != "neutral":  # an injected world is arranged by its owner
            self._look_at_start(g("start_look_pose"), g("camera_side"))
        self.camera_frame_id = g("camera_frame_id")
        self.publish_depth = bool(g("publish_depth"))
        self.max_velocity = float(g("max_joint_velocity"))
        self._targets: dict[str, float] = {}
        self.frames_published = 0
        self.commands_refused = 0
        self.paused = False

        self._render_group = MutuallyExclusiveCallbackGroup()
        self._control_group = MutuallyExclusiveCallbackGroup()
        self.image_pub = self.create_publisher(Image, "image", 2)
        self.info_pub = self.create_publisher(CameraInfo, "camera_info", 2)
        self.depth_pub = self.create_publisher(Image, "depth", 2)
        self.pose_pub = self.create_publisher(PoseStamped, "camera_pose", 2)
        self.joint_pub = self.create_publisher(JointState, "joint_states", 10)
        gc = lambda fn, what: guard_callback(self, fn, what)  # noqa: E731
        self.create_subscription(JointState, "joint_command", gc(self._on_joint_command, "joint_command"), 10,
                                 callback_group=self._control_group)
        self.create_subscription(JointTrajectory, "joint_trajectory", gc(self._on_trajectory, "joint_trajectory"),
                                 10, callback_group=self._control_group)
        self._subscribe_baxter()
        self._seed = int(g("seed"))
        self._place_rng = np.random.default_rng([self._seed, 12])
        self.create_service(PlaceObject, "place_object", guard_service(self, self._on_place, "place_object"), callback_group=self._control_group)
        self.create_service(ClearObjects, "clear_objects", guard_service(self, self._on_clear, "clear_objects"), callback_group=self._control_group)
        self._dt = 1.0 / float(g("joint_state_rate_hz"))
        self.create_timer(1.0 / float(g("rate_hz")), gc(self.publish_frame, "render"),
                          callback_group=self._render_group)
        self.create_timer(self._dt, gc(self._control_step, "control step"), callback_group=self._control_group)
        self.get_logger().info(f"simulated world ready: camera {cam.width}x{cam.height} at {g('rate_hz')} Hz on "
                               f"'{self.image_pub.topic_name}', seed {g('seed')}, table texture {self.world.table_texture}")

    def _look_at_start(self, pose: str, side: str) -> None:
        """Start with the hand camera on the table (a named look pose), not on the floor."""
        from cbcl_pr_ros.robot.kinematics import BaxterKinematics
        from cbcl_pr_ros.robot.look_poses import look_target, solve_look

        kin = BaxterKinematics(side)
        try:
            sol = solve_look(kin, look_target(pose, self.world.config.table_height),
                             seed=self.world.joint_positions(kin.joint_names))
        finally:
            kin.close()
        self.world.set_joint_positions(sol.as_dict())

    def _subscribe_baxter(self) -> None:
        try:
            from baxter_core_msgs.msg import JointCommand  # type: ignore
        except ImportError:
            return
        from cbcl_pr_ros.robot.baxter import joint_command_topic

        for side in ("left", "right"):
            self.create_subscription(JointCommand, joint_command_topic(side),
                                     guard_callback(self, lambda m: self._set_targets(list(m.names),
                                                                                      list(m.command)),
                                                    "baxter joint command"), 10,
                                     callback_group=self._control_group)

    # ------------------------------------------------------------------ commands
    def _set_targets(self, names: list[str], positions: list[float]) -> bool:
        if len(names) != len(positions):
            self.get_logger().warning(f"joint command refused: {len(names)} names but {len(positions)} positions")
            self.commands_refused += 1
            return False
        try:
            with self.world_lock:
                checked = self.world.check_joint_command(dict(zip(names, positions)))
        except ValueError as exc:
            self.get_logger().warning(f"joint command refused: {exc}")
            self.commands_refused += 1
            return False
        with self.world_lock:
            self._targets.update(checked)
        return True

    def _on_joint_command(self, msg: JointState) -> None:
        self._set_targets(list(msg.name), list(msg.position))

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if not msg.points:
            return
        self._set_targets(list(msg.joint_names), list(msg.points[-1].positions))

    def set_joints_now(self, positions: dict[str, float]) -> None:
        """Teleport joints (used by the scripted demo) and make them the new targets."""
        with self.world_lock:
            self.world.set_joint_positions(positions)
            self._targets.update(self.world.check_joint_command(positions))

    def _control_step(self) -> None:
        with self.world_lock:
            if self._targets:
                if self.world.step_towards(self._targets, self._dt, self.max_velocity):
                    self._targets.clear()
            pos = self.world.joint_positions()
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(pos)
        msg.position = list(pos.values())
        self.joint_pub.publish(msg)

    def joints_settled(self) -> bool:
        with self.world_lock:
            return not self._targets

    # ------------------------------------------------------------------ objects (services)
    def _on_place(self, req: Any, resp: Any) -> Any:
        xy = None if req.random_spot else (float(req.x), float(req.y))
        try:
            with self.world_lock:
                obj = self.world.place(req.category.strip(), int(req.instance), req.name, xy, float(req.yaw),
                                       rng=self._place_rng, seed=self._seed)
        except ValueError as exc:
            resp.success, resp.message = False, f"nothing placed: {exc}"
            return resp
        resp.success, resp.name = True, obj.name
        resp.position.header.frame_id = "base"
        resp.position.header.stamp = self.get_clock().now().to_msg()
        resp.position.point.x, resp.position.point.y, resp.position.point.z = (float(v) for v in obj.position)
        resp.message = f"placed {obj.name} ({obj.category}) at {np.round(obj.position, 3).tolist()}"
        self.get_logger().info(resp.message)
        return resp

    def _on_clear(self, req: Any, resp: Any) -> Any:
        """Remove the named objects (each name once), or all; the answer lists what was removed."""
        asked = list(dict.fromkeys(req.names))  # a name given twice is removed once
        if len(asked) > MAX_OBJECTS:
            resp.success, resp.message = False, (f"nothing removed: {len(asked)} names, the table holds at most "
                                                 f"{MAX_OBJECTS} objects")
            return resp
        removed: list[str] = []
        with self.world_lock:
            present = [o.name for o in self.world.objects]
            names = asked or present
            missing = [n for n in names if n not in present]
            if missing:
                resp.success = False
                resp.message = (f"nothing removed: no object named {short_list(missing)} "
                                f"(present: {short_list(present) if present else 'none'})")
                return resp
            try:
                for n in names:
                    self.world.remove_object(n)
                    removed.append(n)
            except Exception as exc:  # the simulator failed mid-way: say exactly what was done
                resp.success, resp.removed = False, removed
                resp.message = (f"removed {len(removed)} of {len(names)} object(s); removing "
                                f"{short_list([n])} failed ({type(exc).__name__})")
                self.get_logger().error(resp.message)
                return resp
        resp.success, resp.removed = True, removed
        resp.message = f"removed {len(removed)} object(s)"
        return resp

    # ------------------------------------------------------------------ camera
    def publish_frame(self) -> Header | None:
        """Render and publish one frame; returns its header."""
        if self.paused:
            return None
        header = Header(frame_id=self.camera_frame_id)
        with self.world_lock:
            # stamped when the scene is fixed, not after rendering: a frame stamped after a move under
            # world_lock always shows the scene after that move
            header.stamp = self.get_clock().now().to_msg()
            frame = self.world.render()
        img, info, depth, pose = frame_messages(frame, header)
        self.image_pub.publish(img)
        self.info_pub.publish(info)
        if self.publish_depth:
            self.depth_pub.publish(depth)
            self.pose_pub.publish(pose)
        self.frames_published += 1
        return header

    def destroy_node(self) -> None:
        try:
            self.world.close()
        finally:
            super().destroy_node()


def main(args: list[str] | None = None) -> int:
    exit_on_help(sys.argv if args is None else args, "sim_world_node", __doc__, _PARAMS)
    return run_node(SimWorldNode, threads=4, args=args)


if __name__ == "__main__":
    sys.exit(main())
