"""The main job's scripted teacher (:class:`ScriptedTeacher`): a client of the nodes, as a user's script would be.

It drives the simulated world through its services (``place_object``, ``clear_objects``,
``arrange_objects``, ``set_light``, ``render_view``, ``pause_camera``) and the arm like any
controller (``joint_command``, waiting on ``joint_states``); it teaches through the learner's
``teach_class`` (:class:`~cbcl_pr_ros.nodes.learner_client.LearnerClient`), listens to
``detections`` and asks the arm's ``point_at``. Nothing here reaches into a node. Scoring against
the simulator's ground truth is :mod:`cbcl_pr_ros.robot.demo_scoring` (no ROS).
"""
from __future__ import annotations

import argparse
import math
import threading
import time
from typing import Any, Sequence

import numpy as np
from geometry_msgs.msg import Vector3
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState, RegionOfInterest
from std_msgs.msg import Header
from std_srvs.srv import SetBool

from cbcl_pr_ros.nodes.conversions import image_msg_to_rgb
from cbcl_pr_ros.nodes.detections_msgs import draw_detections
from cbcl_pr_ros.nodes.learner_client import LearnerClient
from cbcl_pr_ros.nodes.qos import service_qos
from cbcl_pr_ros.nodes.service_call import call_service, wait_ready
from cbcl_pr_ros.plurals import counted
from cbcl_pr_ros.robot.demo_scoring import TableScore, TruthObject, ViewTruth
from cbcl_pr_ros.robot.kinematics import BaxterKinematics, Unreachable
from cbcl_pr_ros.robot.world import random_light
from cbcl_pr_ros.srv import ArrangeObjects, ClearObjects, PlaceObject, PointAt, RenderView, SetLight, TeachClass

__all__ = ["ScriptedTeacher", "WorldClient", "teach_request", "rgb_of", "SHOW_SPOT", "SCENE_REGION"]

SHOW_SPOT = (0.66, 0.14)  # where the teacher holds objects up, clear of the table scene
SCENE_REGION = (0.57, 0.85, -0.52, -0.12)  # x0, x1, y0, y1 of the table scene (base frame)


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
            if not wait_ready(client, self.timeout_s):
                raise RuntimeError(f"service {client.srv_name} not available")

    def call(self, name: str, request: Any, must_succeed: bool = True) -> Any:
        attempts = 1 if name == "place_object" else 2  # the others do the same when sent twice
        res = call_service(self._srv[name], request, self.timeout_s, name, attempts=attempts)
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
        """Command ``target`` on joint_command and wait until joint_states shows it reached (the
        command is repeated every half second: a message sent before the world subscribed is lost)."""
        msg = JointState(name=list(target), position=list(target.values()))
        end = time.monotonic() + self.timeout_s
        with self._joints_seen:
            while time.monotonic() < end:
                self._command.publish(msg)
                if self._joints_seen.wait_for(
                        lambda: all(abs(self._joints.get(n, math.inf) - v) <= tol for n, v in target.items()), 0.5):
                    return
        raise TimeoutError(f"the arm did not reach its target within {self.timeout_s:g} s")

    # ------------------------------------------------------------------ the scene
    def place(self, name: str, category: str, instance: int, xy: Sequence[float], seed: Sequence[int] = ()) -> None:
        self.call("place_object", PlaceObject.Request(category=category, instance=int(instance), name=name,
                                                      x=float(xy[0]), y=float(xy[1]), seed=[int(v) for v in seed]))

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


def _view_targets(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Camera eye and target of each of ``n`` views over the table scene (base frame)."""
    x0, x1, y0, y1 = SCENE_REGION
    z = -0.18
    out = []
    for y in np.linspace(y0 + 0.08, y1 - 0.08, n) if n > 1 else [(y0 + y1) / 2]:
        target = np.array([(x0 + x1) / 2 + 0.02, float(y), z])
        out.append((target + np.array([-0.12, 0.0, 0.46]), target))
    return out


class ScriptedTeacher:
    """The teacher of the main job: shows objects, sets the table, looks, asks; a client of the nodes.

    Each class has two objects, instances 0 (shown while teaching, ``<class>_00``) and 1 (held out,
    on the table, ``<class>_01``) drawn from the seed sequence (``--seed``, the class's index).
    """

    def __init__(self, node: Any, opts: argparse.Namespace, classes: list[str], camera_side: str) -> None:
        self.opts, self.classes = opts, classes
        self.kin = BaxterKinematics(camera_side)
        self.world = WorldClient(node, self.kin.joint_names, opts.timeout_s)
        self.learner = LearnerClient(node, timeout_s=opts.timeout_s, teach_timeout_s=opts.timeout_s * 3)
        self.table = [(f"{c}_01", c) for c in classes]

    def instance_seed(self, category: str) -> list[int]:
        """The seed sequence a class's objects are drawn from (the same objects for the same --seed)."""
        return [int(self.opts.seed), self.classes.index(category)]

    def aim(self, eye: np.ndarray, target: np.ndarray) -> None:
        """Aim the hand camera (IK here, joints by joint_command); raises Unreachable."""
        sol = self.kin.aim_camera(eye, target, seed=self.world.joints())
        self.world.move_joints(sol.as_dict())

    def aim_at_held(self, pos: np.ndarray, rng: np.random.Generator) -> None:
        """Aim the camera at an object held up at ``pos``, from about as far as the table views (an
        object's crop has the same resolution there): a drawn direction, else straight above, else
        from two more drawn directions a little nearer; raises the last Unreachable (a tall object
        beside the arm's reach, such as a cereal box, may have no reachable view)."""
        def towards(d: float, el: float, az: float) -> np.ndarray:
            return pos + d * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])

        d = float(rng.uniform(0.3, 0.45))
        eye = towards(d, rng.uniform(math.radians(55), math.radians(85)), rng.uniform(-2.5, 2.5))
        for attempt in range(4):  # more draws only when needed: a reachable view draws what it always did
            try:
                return self.aim(eye, pos)
            except Unreachable:
                if attempt == 3:
                    raise
            eye = pos + np.array([0.0, 0.0, d]) if attempt == 0 else towards(
                0.3, rng.uniform(math.radians(45), math.radians(85)), rng.uniform(-math.pi, math.pi))

    def show_views(self, category: str, n: int, rng: np.random.Generator) -> list:
        """The teacher holds an object up to the camera and turns it: (image, box of the object) per view."""
        name, views = f"{category}_00", []
        self.world.place(name, category, 0, SHOW_SPOT, self.instance_seed(category))
        try:
            for _ in range(n):
                pos = self.world.move(name, np.add(SHOW_SPOT, rng.uniform(-0.015, 0.015, 2)),
                                      float(rng.uniform(-math.pi, math.pi)))
                self.world.light(rng)
                try:
                    self.aim_at_held(pos, rng)
                except Unreachable as exc:
                    print(f"[teach] {category}: a view skipped, no camera pose reaches it ({exc})", flush=True)
                    continue
                res, truth = self.world.render(min_visible_px=1)
                boxes = [g.box for g in truth.objects if g.name == name]
                views.append((res.image, boxes[0] if boxes else None))
        finally:
            self.world.clear([name])
            self.world.light(np.random.default_rng(self.opts.seed))
        return views

    def teach_phase(self, phase: int, shots: int, taught: dict[str, int]) -> list[dict]:
        """Teach every class up to ``shots`` views, 2 classes per increment."""
        records: list[dict] = []
        for c in self.classes:
            n_new = shots - taught.get(c, 0)
            if n_new <= 0:
                continue
            views = self.show_views(c, n_new, np.random.default_rng([self.opts.seed, phase, len(records)]))
            t0 = time.perf_counter()
            res = self.learner.teach(teach_request(c, views, self.opts.teach_crop))
            taught[c] = shots
            records.append({"label": c, "views": n_new, "success": res.success, "message": res.message,
                            "seconds": round(time.perf_counter() - t0, 3)})
            print(f"[teach] {c:12s} +{counted(n_new, 'view')} -> {res.message}", flush=True)
        return records

    def set_table(self) -> None:
        """The held-out objects close together on the table (some touch or hide others)."""
        x0, x1, y0, y1 = region = SCENE_REGION
        for name, c in self.table:
            self.world.place(name, c, 1, ((x0 + x1) / 2, (y0 + y1) / 2), self.instance_seed(c))
        for _ in range(6):  # a crowded draw that does not fit gets a little more room
            if self.world.arrange([n for n, _ in self.table], [self.opts.seed, 99], region, -0.01):
                return
            region = (region[0] - 0.02, region[1] + 0.02, region[2] - 0.03, region[3] + 0.02)
        raise ValueError(f"cannot fit {len(self.table)} objects on the table")

    def look(self, v: int, eye: np.ndarray, target: np.ndarray, score: Any, ph: dict) -> np.ndarray | None:
        """One view of the table: wait for fresh detections, score them; returns the labelled picture."""
        t0 = time.perf_counter()
        self.world.pause_camera(True)  # no frames of the way there: the camera shows the table from this pose only
        try:
            self.aim(eye, target)
        except Unreachable as exc:
            print(f"[view {v}] skipped: {exc}", flush=True)
            return None
        finally:
            self.world.pause_camera(False)
        fresh = self.learner.detections_after(self.world.now_ns(), self.opts.frames_per_view, self.opts.timeout_s)
        seconds = time.perf_counter() - t0
        if not fresh:
            print(f"[view {v}] no detections within {self.opts.timeout_s:.0f} s", flush=True)
            return None
        det = fresh[-1]
        res, truth = self.world.render()  # the same pose and scene: the frame those detections are of
        flags = score.add_view(v, det.objects, truth)
        ph["views"].append({"view": v, "objects_detected": len(det.objects),
                            "matched": sum(f is not None for f in flags), "visible": len(truth.objects),
                            "frames_fused": len(fresh), "seconds": round(seconds, 3)})
        named = ", ".join(f"{o.label or 'unknown'}{'' if ok is None else (' ok' if ok else ' WRONG')}"
                          for o, ok in zip(det.objects, flags))
        print(f"[view {v}] {len(det.objects)} objects in {seconds:.1f} s: {named}", flush=True)
        return draw_detections(rgb_of(res), det, flags)

    def point_all(self, positions: dict[str, np.ndarray], categories: dict[str, str]) -> list[dict]:
        """``point_at`` every table object's class; which object the arm chose, by the nearest true centre."""
        out = []
        for name, c in self.table:
            t0 = time.perf_counter()
            res = self.world.point_at(c)
            entry = {"label": c, "object": name, "success": res.success, "message": res.message,
                     "seconds": round(time.perf_counter() - t0, 3)}
            if res.success:
                tgt = np.array([res.target.point.x, res.target.point.y, res.target.point.z])
                nearest = min(positions, key=lambda n: np.linalg.norm(positions[n][:2] - tgt[:2]))
                entry.update({"pointed_at": nearest, "pointed_category": categories[nearest],
                              "right_object": nearest == name,
                              "ray_error_m": round(float(res.pointing_error_m), 4),
                              "localisation_error_m": round(float(np.linalg.norm(positions[nearest][:2] - tgt[:2])), 4)})
            out.append(entry)
            print(f"[point] {c:12s} -> {entry.get('pointed_at', '-'):14s} {res.message}", flush=True)
        return out

    def run_phase(self, phase: int, shots: int, taught: dict[str, int]) -> tuple[dict, list[np.ndarray]]:
        """Teach (camera paused, table cleared), set the table, look from every pose, point at each class."""
        ph: dict[str, Any] = {"shots": shots, "teach": [], "views": [], "objects": [], "point": []}
        self.world.pause_camera(True)
        if phase:  # the teacher takes the table objects away while teaching
            self.world.clear([n for n, _ in self.table])
        ph["teach"] = self.teach_phase(phase, shots, taught)
        self.set_table()
        res, _ = self.world.render()
        positions = {n: np.array([p.x, p.y, p.z]) for n, p in zip(res.names, res.positions)}
        categories = dict(zip(res.names, res.categories))
        self.world.pause_camera(False)
        score, pictures = TableScore(positions), []
        for v, (eye, target) in enumerate(_view_targets(self.opts.views)):
            picture = self.look(v, eye, target, score, ph)
            if picture is not None:
                pictures.append(picture)
        ph["objects"] = score.answers(self.table)
        ph["accuracy"] = float(np.mean([r["correct"] for r in ph["objects"]]))
        ph["single_view_accuracy"] = float(np.mean(score.single)) if score.single else float("nan")
        ph["point"] = self.point_all(positions, categories)
        print(f"[phase] {counted(shots, 'shot')}: per-object accuracy {ph['accuracy']:.2f}", flush=True)
        return ph, pictures

    def run(self, transcript: dict) -> list[np.ndarray]:
        """Every phase into ``transcript``; returns the last phase's labelled views."""
        self.world.wait_until_ready()
        self.learner.wait_until_ready(self.opts.timeout_s)
        self.world.light(np.random.default_rng(self.opts.seed))
        taught: dict[str, int] = {}
        pictures: list[np.ndarray] = []
        for phase, shots in enumerate(self.opts.shots):
            ph, pictures = self.run_phase(phase, shots, taught)
            transcript["phases"].append(ph)
        self.world.pause_camera(True)
        return pictures
