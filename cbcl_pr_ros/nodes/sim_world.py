"""Simulated world node: a headless PyBullet Baxter at a table, seen by its hand camera.

Publishes (relative names, remappable): ``image`` (sensor_msgs/Image rgb8), ``camera_info``,
``depth`` (32FC1, metres), ``camera_pose`` (geometry_msgs/PoseStamped of the optical frame in
``base``; all four share one stamp, the pose goes out first) at ``rate_hz``, and ``joint_states``
at ``joint_state_rate_hz``.

Takes joint commands the way the real arms do: ``joint_command`` (sensor_msgs/JointState, positions
by name, as a Baxter's position mode takes them), ``joint_trajectory`` (trajectory_msgs/
JointTrajectory, as a ros2_control controller takes them) and, when ``baxter_core_msgs`` is
installed, Baxter's own ``/robot/limb/<side>/joint_command``. Joints move towards their targets at
``max_joint_velocity``; commands outside the joint limits are refused with a log line.

Services put objects on the table and take them off, so a session of separate
processes (``ros2 launch cbcl_pr_ros sim_teaching_demo.launch.py``) can set a scene:
``place_object`` (cbcl_pr_ros/PlaceObject: category, instance, x/y/yaw or a random free spot) and
``clear_objects`` (cbcl_pr_ros/ClearObjects: names, or all). What a simulator also offers a script
(the scripted teacher of the main job uses these and the topics, nothing inside the node):
``arrange_objects`` (cbcl_pr_ros/ArrangeObjects: move objects to given poses, or shuffle them into a
region), ``set_light`` (cbcl_pr_ros/SetLight), ``render_view`` (cbcl_pr_ros/RenderView: the hand
camera's view now with its ground truth) and ``pause_camera`` (std_srvs/SetBool: no frames while true).
A frame is rendered only while something subscribes to the camera's topics.
"""
from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
from geometry_msgs.msg import Point, PoseStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState, RegionOfInterest
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory

from cbcl_pr_ros.nodes.cli_help import exit_on_help
from cbcl_pr_ros.nodes.guard import guard_callback, guard_service
from cbcl_pr_ros.nodes.ros_params import declare_read_only
from cbcl_pr_ros.nodes.spin import run_node
from cbcl_pr_ros.robot.baxter import joint_command_topic
from cbcl_pr_ros.robot.kinematics import BaxterKinematics
from cbcl_pr_ros.robot.look_poses import look_target, solve_look
from cbcl_pr_ros.robot.scenes import ground_truth
from cbcl_pr_ros.robot.world import MAX_OBJECTS, CameraConfig, Frame, SimWorld, WorldConfig
from cbcl_pr_ros.settings.robot_params import SIM_WORLD_PARAMS
from cbcl_pr_ros.srv import ArrangeObjects, ClearObjects, PlaceObject, RenderView, SetLight
from cbcl_pr_ros.plurals import counted

__all__ = ["SimWorldNode", "anyone_listens", "frame_messages", "main"]

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


def anyone_listens(*publishers: Any) -> bool:
    """Whether any of ``publishers`` has a subscriber (in this process or another)."""
    return any(pub.get_subscription_count() > 0 for pub in publishers)


class SimWorldNode(Node):
    """ROS face of :class:`~cbcl_pr_ros.robot.world.SimWorld`. ``world`` may be injected (tests)."""

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
        # the 20 Hz control step (and the commands and scene services it serialises) spins on a
        # single-threaded executor of its own (nodes/spin.py): on the pool its timer kept the spin thread
        # waking some 350 times a second with the camera paused; the render timer stays on the pool
        self.stream_callback_groups = (self._control_group,)
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
        self._serve_scene()
        self._dt = 1.0 / float(g("joint_state_rate_hz"))
        self.create_timer(1.0 / float(g("rate_hz")), gc(self.publish_frame, "render"),
                          callback_group=self._render_group)
        self.create_timer(self._dt, gc(self._control_step, "control step"), callback_group=self._control_group)
        self.get_logger().info(f"simulated world ready: camera {cam.width}x{cam.height} at {g('rate_hz')} Hz on "
                               f"'{self.image_pub.topic_name}', seed {g('seed')}, table texture {self.world.table_texture}")

    def _look_at_start(self, pose: str, side: str) -> None:
        """Start with the hand camera on the table (a named look pose), not on the floor."""
        kin = BaxterKinematics(side)
        try:
            sol = solve_look(kin, look_target(pose, self.world.config.table_height),
                             seed=self.world.joint_positions(kin.joint_names))
        finally:
            kin.close()
        self.world.set_joint_positions(sol.as_dict())

    def _serve_scene(self) -> None:
        """The scene services, in the control group (one at a time, between control steps)."""
        from std_srvs.srv import SetBool

        for srv, name, fn in ((PlaceObject, "place_object", self._on_place),
                              (ClearObjects, "clear_objects", self._on_clear),
                              (ArrangeObjects, "arrange_objects", self._on_arrange),
                              (SetLight, "set_light", self._on_set_light),
                              (RenderView, "render_view", self._on_render_view),
                              (SetBool, "pause_camera", self._on_pause)):
            self.create_service(srv, name, guard_service(self, fn, name), callback_group=self._control_group)

    def _subscribe_baxter(self) -> None:
        try:
            from baxter_core_msgs.msg import JointCommand  # type: ignore
        except ImportError:
            return

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

    # ------------------------------------------------------------------ objects (services)
    def _on_place(self, req: Any, resp: Any) -> Any:
        xy = None if req.random_spot else (float(req.x), float(req.y))
        try:
            with self.world_lock:
                obj = self.world.place(req.category.strip(), int(req.instance), req.name, xy, float(req.yaw),
                                       rng=self._place_rng, seed=self._seed, instance_seed=list(req.seed))
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
                resp.message = (f"removed {len(removed)} of {counted(len(names), 'object')}; removing "
                                f"{short_list([n])} failed ({type(exc).__name__})")
                self.get_logger().error(resp.message)
                return resp
        resp.success, resp.removed = True, removed
        resp.message = f"removed {counted(len(removed), 'object')}"
        return resp

    def _on_arrange(self, req: Any, resp: Any) -> Any:
        """Given poses, or a shuffle into ``region``; nothing moves when the request cannot be met."""
        names = list(req.names)
        try:
            if len(names) > MAX_OBJECTS or len(req.seed) > 8:
                raise ValueError(f"at most {MAX_OBJECTS} names and 8 seed numbers")
            if any(int(v) < 0 for v in req.seed):
                raise ValueError("seed numbers must be >= 0")
            with self.world_lock:
                if len(req.x):
                    if not len(req.x) == len(req.y) == len(req.yaw):
                        raise ValueError(f"{len(req.x)} x, {len(req.y)} y and {len(req.yaw)} yaw values")
                    self.world.move_objects(names, list(zip(req.x, req.y, req.yaw)))
                else:
                    region = tuple(float(v) for v in req.region)
                    self.world.arrange(names, np.random.default_rng([int(v) for v in req.seed]),
                                       region=region if any(region) else None, min_gap=float(req.min_gap))
                objs = {o.name: o for o in self.world.objects}
        except ValueError as exc:
            resp.success, resp.message = False, f"nothing moved: {str(exc)[:300]}"
            return resp
        resp.positions = [Point(x=float(objs[n].position[0]), y=float(objs[n].position[1]),
                                z=float(objs[n].position[2])) for n in names]
        resp.yaws = [float(objs[n].yaw) for n in names]
        resp.success, resp.message = True, f"moved {counted(len(names), 'object')}"
        return resp

    def _on_set_light(self, req: Any, resp: Any) -> Any:
        d = req.direction
        try:
            with self.world_lock:
                self.world.set_light((d.x, d.y, d.z), req.ambient, req.diffuse, req.specular)
        except ValueError as exc:
            resp.success, resp.message = False, f"light unchanged: {exc}"
            return resp
        resp.success, resp.message = True, "light set"
        return resp

    def _on_render_view(self, req: Any, resp: Any) -> Any:
        with self.world_lock:
            frame = self.world.render()
            truth = ground_truth(self.world, frame, min_visible_px=int(req.min_visible_px) or 150)
            objects = [(o.name, o.category, o.position.copy()) for o in self.world.objects]
        resp.image = frame_messages(frame, Header(stamp=self.get_clock().now().to_msg(),
                                                  frame_id=self.camera_frame_id))[0]
        p, q = frame.camera_position, frame.camera_quaternion
        resp.camera_pose.position.x, resp.camera_pose.position.y, resp.camera_pose.position.z = (float(v) for v in p)
        o = resp.camera_pose.orientation
        o.x, o.y, o.z, o.w = (float(v) for v in q)
        resp.visible_names, resp.visible_categories = [g.name for g in truth], [g.category for g in truth]
        resp.visible_boxes = [RegionOfInterest(x_offset=int(g.box[0]), y_offset=int(g.box[1]), width=int(g.box[2] - g.box[0]),
                                               height=int(g.box[3] - g.box[1])) for g in truth]
        resp.visible_pixels = [int(g.pixels) for g in truth]
        resp.names, resp.categories = [n for n, _, _ in objects], [c for _, c, _ in objects]
        resp.positions = [Point(x=float(x), y=float(y), z=float(z)) for _, _, (x, y, z) in objects]
        resp.success, resp.message = True, f"{len(truth)} of {len(objects)} objects in view"
        return resp

    def _on_pause(self, req: Any, resp: Any) -> Any:
        self.paused = bool(req.data)
        resp.success, resp.message = True, "camera paused" if self.paused else "camera running"
        return resp

    # ------------------------------------------------------------------ camera
    def publish_frame(self) -> Header | None:
        """Render and publish one frame; returns its header. Nothing is rendered while nobody subscribes
        to any of the camera's topics: a 640x480 frame with shadows costs a fifth of a second of CPU."""
        if self.paused:
            return None
        camera = (self.image_pub, self.info_pub) + ((self.depth_pub, self.pose_pub) if self.publish_depth else ())
        if not anyone_listens(*camera):
            return None
        header = Header(frame_id=self.camera_frame_id)
        with self.world_lock:
            # stamped when the scene is fixed, not after rendering: a frame stamped after a move under
            # world_lock always shows the scene after that move
            header.stamp = self.get_clock().now().to_msg()
            frame = self.world.render()
        img, info, depth, pose = frame_messages(frame, header)
        if self.publish_depth:  # the pose first: a node looks its frame's pose up as soon as the depth is in
            self.pose_pub.publish(pose)
        self.image_pub.publish(img)
        self.info_pub.publish(info)
        if self.publish_depth:
            self.depth_pub.publish(depth)
        self.frames_published += 1
        return header

    def destroy_node(self) -> None:
        try:
            if hasattr(self, "world"):  # not when a start value was refused before it was made
                self.world.close()
        finally:
            super().destroy_node()


def main(args: list[str] | None = None) -> int:
    exit_on_help(sys.argv if args is None else args, "sim_world_node", __doc__, _PARAMS)
    return run_node(SimWorldNode, threads=4, args=args)


if __name__ == "__main__":
    sys.exit(main())
