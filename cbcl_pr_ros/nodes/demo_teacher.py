"""The main job's scripted teacher: a client of the nodes, as a user's script would be.

It drives the simulated world through its services (``place_object``, ``clear_objects``,
``arrange_objects``, ``set_light``, ``render_view``, ``pause_camera``) and the arm like any
controller (``joint_command``, waiting on ``joint_states``); it teaches through the learner's
``teach_class`` (:class:`~cbcl_pr_ros.nodes.learner_client.LearnerClient`), listens to
``detections`` and asks the arm's ``point_at``. Nothing here reaches into a node. Scoring against
the simulator's ground truth is :mod:`cbcl_pr_ros.robot.demo_scoring` (no ROS).
"""
from __future__ import annotations

import math
import threading
from typing import Any, Sequence

import numpy as np
from geometry_msgs.msg import Vector3
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState, RegionOfInterest
from std_msgs.msg import Header
from std_srvs.srv import SetBool

from cbcl_pr_ros.nodes.conversions import image_msg_to_rgb
from cbcl_pr_ros.nodes.qos import service_qos
from cbcl_pr_ros.nodes.service_call import call_service
from cbcl_pr_ros.robot.demo_scoring import TruthObject, ViewTruth
from cbcl_pr_ros.robot.world import random_light
from cbcl_pr_ros.srv import ArrangeObjects, ClearObjects, PlaceObject, PointAt, RenderView, SetLight, TeachClass

__all__ = ["WorldClient", "teach_request", "rgb_of", "SHOW_SPOT"]

SHOW_SPOT = (0.66, 0.14)  # where the teacher holds objects up, clear of the table scene


class WorldClient:
    """The simulated world and the arm, by their services and topics, from a node spun elsewhere."""

    def __init__(self, node: Node, joint_names: Sequence[str], timeout_s: float) -> None:
        self.node, self.timeout_s = node, float(timeout_s)
        self.joint_names = list(joint_names)
        group = ReentrantCallbackGroup()
        mk = lambda t, n: node.create_client(t, n, qos_profile=service_qos(), callback_group=group)  # noqa: E731
        self._srv = {"place_object": mk(PlaceObject, "place_object"), "clear_objects": mk(ClearObjects, "clear_objects"),
                     "arrange_objects": mk(ArrangeObjects, "arrange_objects"), "set_light": mk(SetLight, "set_light"),
                     "render_view": mk(RenderView, "render_view"), "pause_camera": mk(SetBool, "pause_camera"),
                     "point_at": mk(PointAt, "point_at")}
        self._joints: dict[str, float] = {}
        self._joints_seen = threading.Condition()
        node.create_subscription(JointState, "joint_states", self._on_joints, 10, callback_group=group)
        self._command = node.create_publisher(JointState, "joint_command", 10)

    def wait_until_ready(self) -> None:
        for name, client in self._srv.items():
            if not client.wait_for_service(timeout_sec=self.timeout_s):
                raise RuntimeError(f"service {client.srv_name} not available")

    def call(self, name: str, request: Any, must_succeed: bool = True) -> Any:
        res = call_service(self._srv[name], request, self.timeout_s, name)
        if must_succeed and not res.success:
            raise RuntimeError(f"{name}: {res.message}")
        return res

    def now_ns(self) -> int:
        return self.node.get_clock().now().nanoseconds

    # ------------------------------------------------------------------ the arm, as any controller
    def _on_joints(self, msg: JointState) -> None:
        with self._joints_seen:
            self._joints.update(zip(msg.name, msg.position))
            self._joints_seen.notify_all()

    def joints(self) -> dict[str, float]:
        """The arm's joint positions (the IK seed), once joint_states has given them."""
        with self._joints_seen:
            if not self._joints_seen.wait_for(lambda: all(n in self._joints for n in self.joint_names),
                                              self.timeout_s):
                raise TimeoutError("no joint_states from the world")
            return {n: self._joints[n] for n in self.joint_names}

    def move_joints(self, target: dict[str, float], tol: float = 1e-6) -> None:
        """Command ``target`` on joint_command and wait until joint_states shows it reached."""
        self._command.publish(JointState(name=list(target), position=list(target.values())))
        with self._joints_seen:
            if not self._joints_seen.wait_for(
                    lambda: all(abs(self._joints.get(n, math.inf) - v) <= tol for n, v in target.items()),
                    self.timeout_s):
                raise TimeoutError(f"the arm did not reach its target within {self.timeout_s:g} s")

    # ------------------------------------------------------------------ the scene
    def place(self, name: str, category: str, instance: int, xy: Sequence[float]) -> None:
        self.call("place_object", PlaceObject.Request(category=category, instance=int(instance), name=name,
                                                      x=float(xy[0]), y=float(xy[1])))

    def clear(self, names: Sequence[str]) -> None:
        if names:
            self.call("clear_objects", ClearObjects.Request(names=list(names)))

    def move(self, name: str, xy: Sequence[float], yaw: float) -> np.ndarray:
        """Put one object at ``xy`` with heading ``yaw``; returns its centre."""
        res = self.call("arrange_objects", ArrangeObjects.Request(names=[name], x=[float(xy[0])], y=[float(xy[1])],
                                                                  yaw=[float(yaw)]))
        p = res.positions[0]
        return np.array([p.x, p.y, p.z])

    def arrange(self, names: Sequence[str], seed: Sequence[int], region: Sequence[float], min_gap: float) -> bool:
        """Shuffle objects into ``region``; False (nothing moved) when they do not fit."""
        req = ArrangeObjects.Request(names=list(names), region=[float(v) for v in region], min_gap=float(min_gap),
                                     seed=[int(s) for s in seed])
        return bool(self.call("arrange_objects", req, must_succeed=False).success)

    def light(self, rng: np.random.Generator) -> None:
        """A light drawn from ``rng`` (the draws the world's own randomize_light makes)."""
        L = random_light(rng)
        d = L["direction"]
        self.call("set_light", SetLight.Request(direction=Vector3(x=d[0], y=d[1], z=d[2]), ambient=L["ambient"],
                                                diffuse=L["diffuse"], specular=L["specular"]))

    def pause_camera(self, paused: bool) -> None:
        self.call("pause_camera", SetBool.Request(data=bool(paused)))

    def render(self, min_visible_px: int = 150) -> tuple[Any, ViewTruth]:
        """The hand camera's view now (RenderView response) and its ground truth."""
        res = self.call("render_view", RenderView.Request(min_visible_px=int(min_visible_px)))
        objs = [TruthObject(n, c, (b.x_offset, b.y_offset, b.x_offset + b.width, b.y_offset + b.height), int(px))
                for n, c, b, px in zip(res.visible_names, res.visible_categories, res.visible_boxes,
                                       res.visible_pixels)]
        p, q = res.camera_pose.position, res.camera_pose.orientation
        return res, ViewTruth(objs, np.array([p.x, p.y, p.z]), np.array([q.x, q.y, q.z, q.w]),
                              (int(res.image.width), int(res.image.height)))

    def point_at(self, label: str) -> Any:
        return self.call("point_at", PointAt.Request(label=label), must_succeed=False)


def teach_request(label: str, views: list[tuple[Image, tuple | None]], teach_crop: str) -> TeachClass.Request:
    """TeachClass of the shown views: the learner's object in view, the teacher's boxes, or whole frames."""
    images = [Image(header=Header(), height=im.height, width=im.width, encoding=im.encoding,
                    is_bigendian=im.is_bigendian, step=im.step, data=im.data) for im, _ in views]
    req = TeachClass.Request(label=label, images=images)
    if teach_crop == "frame":
        req.mode = TeachClass.Request.MODE_FRAME
    elif teach_crop == "object":
        req.mode = TeachClass.Request.MODE_OBJECT
    else:
        h, w = images[0].height, images[0].width
        req.rois = [RegionOfInterest(x_offset=b[0], y_offset=b[1], width=b[2] - b[0], height=b[3] - b[1])
                    if b else RegionOfInterest(x_offset=0, y_offset=0, width=w, height=h) for _, b in views]
    return req


def rgb_of(res: Any) -> np.ndarray:
    """The colour image of a RenderView answer."""
    return image_msg_to_rgb(res.image)
