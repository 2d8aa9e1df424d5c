"""The main job: teach a simulated Baxter household objects, then have it classify and point at them.

One process runs the simulated world, the feature extractor, the learner and the arm node on a
MultiThreadedExecutor (built by :mod:`cbcl_pr_ros.nodes.session`'s registry). A scripted teacher:

1. shows each object to the hand camera from several views and calls ``teach_class`` with the
   frames (2 classes per increment, 5 shots each, then 5 more each to make 10);
2. puts other objects of the same classes on the table in a shuffled layout;
3. moves the hand camera over each object; the learner's ``prediction`` for that frame is the
   robot's answer (the arm node locates the object from the frame's depth at the same time);
4. asks ``point_at`` for every class and checks the arm points at the right object;
5. prints a transcript and writes ``scene.png`` (predictions and the pointing arm) and
   ``transcript.json`` under ``--out``.

Parameters come from ``config/cbcl_pr.yaml``, ``config/sim_world.yaml`` and ``config/arm.yaml``
(the installed copies), then a per-node override file for what this run sets (see
:func:`demo_ros_args`).

Run: ``run_demo_session`` (or ``python -m cbcl_pr_ros.nodes.demo --classes 6 --seed 0``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from cbcl_pr_ros.service.node_configs import params_files

__all__ = ["main", "run_demo", "parse_args", "demo_ros_args"]

DEFAULT_CLASSES = ("mug", "can", "duck", "bottle", "teddy", "ball", "cereal", "lemon")
SHOW_SPOT = (0.66, -0.12)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="run_demo_session", description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", type=int, default=6, help="how many object classes to teach (2 per increment)")
    ap.add_argument("--shots", type=int, nargs="+", default=[5, 10], help="cumulative shots per class per phase")
    ap.add_argument("--out", default="runs/demo", help="directory for scene.png and transcript.json")
    ap.add_argument("--rate-hz", type=float, default=4.0, help="camera rate of the simulated world")
    ap.add_argument("--timeout-s", type=float, default=20.0, help="longest wait for a service or a prediction")
    return ap.parse_args(argv)


def demo_ros_args(opts: argparse.Namespace, memory_path: str) -> list[str]:
    """rclpy arguments: the nodes' YAML files, then the demo's own values for named nodes only.

    The overrides go in a params file keyed by node (a global ``-p`` would also hit every other node
    with a parameter of that name, e.g. the arm's ``rate_hz`` or the learner's ``seed``).
    """
    import yaml

    overrides = {
        "/**/learner": {"ros__parameters": {"memory_path": memory_path}},
        "/**/feature_extractor": {"ros__parameters": {"no_frame_warning_s": 0.0}},  # the camera pauses while teaching
        "/**/sim_world": {"ros__parameters": {"rate_hz": float(opts.rate_hz), "seed": int(opts.seed),
                                              "max_joint_velocity": 6.0}},
    }
    over = Path(memory_path).parent / "demo_overrides.params.yaml"
    over.write_text(yaml.safe_dump(overrides))
    args = ["run_demo_session", "--ros-args"]
    for f in params_files(["world", "extractor", "learner", "arm"]):  # each node's own YAML
        args += ["--params-file", f]
    return args + ["--params-file", str(over)]


def _wait_future(fut: Any, timeout: float) -> Any:
    t0 = time.monotonic()
    while not fut.done():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("service call timed out")
        time.sleep(0.01)
    return fut.result()


def run_demo(opts: argparse.Namespace) -> dict:
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions

    from cbcl_pr_ros.msg import Prediction
    from cbcl_pr_ros.nodes.conversions import rgb_to_image_msg
    from cbcl_pr_ros.nodes.session import SessionContext, build_nodes
    from cbcl_pr_ros.nodes.spin import spin_until, stop_executor
    from cbcl_pr_ros.robot.assets import CATALOGUE
    from cbcl_pr_ros.robot.kinematics import BaxterKinematics, Unreachable
    from cbcl_pr_ros.robot.world import sample_instances
    from cbcl_pr_ros.srv import PointAt, TeachClass

    if not 2 <= opts.classes <= len(CATALOGUE):
        raise ValueError(f"--classes must be in [2, {len(CATALOGUE)}], got {opts.classes}")
    rng = np.random.default_rng(opts.seed)
    pool = list(DEFAULT_CLASSES) + [c for c in CATALOGUE if c not in DEFAULT_CLASSES]
    classes = [pool[i] for i in sorted(rng.choice(min(len(pool), max(opts.classes, len(DEFAULT_CLASSES))),
                                                   opts.classes, replace=False))]
    rng.shuffle(classes)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    mem = os.path.join(tempfile.mkdtemp(prefix="cbcl_demo_"), "memory.cbclpr")
    t_start = time.perf_counter()
    args = demo_ros_args(opts, mem)
    transcript: dict[str, Any] = {"seed": opts.seed, "classes": classes, "phases": []}
    # Ctrl-C: Python's KeyboardInterrupt, so the finally below stops executor and nodes before
    # the context goes (rclpy's own handler would shut the context down under running publishers)
    with rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO):
        ctx = SessionContext()
        nodes = build_nodes(["extractor", "learner", "world", "arm"], ctx)
        world_node = ctx.nodes["world"]
        teacher = Node("teacher")
        latest: list[Any] = []
        teacher.create_subscription(Prediction, "prediction", latest.append, 10)
        teach = teacher.create_client(TeachClass, "teach_class")
        point = teacher.create_client(PointAt, "point_at")
        executor = MultiThreadedExecutor(num_threads=8)
        for n in [*nodes, teacher]:
            executor.add_node(n)
        stop_spin = threading.Event()
        spin = threading.Thread(target=spin_until, args=(executor, stop_spin), daemon=True)
        spin.start()
        kin = BaxterKinematics(world_node.world.config.camera_side)
        try:
            for c in (teach, point):
                if not c.wait_for_service(timeout_sec=opts.timeout_s):
                    raise RuntimeError(f"service {c.srv_name} not available")
            world = world_node.world
            # ---- objects: teaching objects and (different) table objects of each class
            insts = {c: sample_instances(c, 2, np.random.default_rng([opts.seed, i])) for i, c in enumerate(classes)}

            def aim(eye, target):
                with world_node.world_lock:
                    seed = world.joint_positions(kin.joint_names)
                sol = kin.aim_camera(eye, target, seed=seed)
                world_node.set_joints_now(sol.as_dict())

            def show_views(inst, n, view_rng) -> list:
                """The teacher holds the object under the camera and turns it; one frame per view."""
                frames = []
                with world_node.world_lock:
                    obj = world.add_object(inst, SHOW_SPOT, 0.0)
                try:
                    for _ in range(n):
                        with world_node.world_lock:
                            world.move_object(inst.name, np.add(SHOW_SPOT, view_rng.uniform(-0.015, 0.015, 2)),
                                              float(view_rng.uniform(-math.pi, math.pi)))
                            world.randomize_light(view_rng)
                        d = max(0.16, 4.0 * float(obj.half_extents.max()))
                        el, az = view_rng.uniform(math.radians(60), math.radians(85)), view_rng.uniform(-2.5, 2.5)
                        eye = obj.position + d * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
                        try:
                            aim(eye, obj.position)
                        except Unreachable:
                            aim(obj.position + np.array([0.0, 0.0, d]), obj.position)
                        with world_node.world_lock:
                            frames.append(world.render().rgb)
                finally:
                    with world_node.world_lock:
                        world.remove_object(inst.name)
                return frames

            # ---- teaching phases
            taught = {c: 0 for c in classes}
            table = [insts[c][1] for c in classes]
            placed = False
            for phase, shots in enumerate(opts.shots):
                ph: dict[str, Any] = {"shots": shots, "teach": [], "classify": [], "point": []}
                world_node.paused = True
                for inc in range(0, len(classes), 2):
                    for c in classes[inc:inc + 2]:
                        n_new = shots - taught[c]
                        if n_new <= 0:
                            continue
                        frames = show_views(insts[c][0], n_new, np.random.default_rng([opts.seed, phase, len(ph["teach"])]))
                        req = TeachClass.Request(label=c, images=[rgb_to_image_msg(f) for f in frames])
                        t0 = time.perf_counter()
                        res = _wait_future(teach.call_async(req), opts.timeout_s * 3)
                        taught[c] = shots
                        ph["teach"].append({"label": c, "views": n_new, "success": res.success, "message": res.message,
                                            "seconds": round(time.perf_counter() - t0, 3)})
                        print(f"[teach] {c:12s} +{n_new} views -> {res.message}")
                # ---- table: shuffle the objects, classify each through the camera stream
                with world_node.world_lock:
                    if not placed:
                        for inst in table:
                            world.add_object(inst, (0.7, 0.0), 0.0)
                        placed = True
                    world.arrange([i.name for i in table], np.random.default_rng([opts.seed, 99, phase]))
                world_node.paused = False
                correct = 0
                for inst in table:
                    with world_node.world_lock:
                        pos = next(o.position for o in world.objects if o.name == inst.name).copy()
                    aim(pos + np.array([0.0, 0.0, 0.30]), pos)
                    t_move = world_node.get_clock().now().nanoseconds
                    t0 = time.perf_counter()
                    pred = None
                    while time.perf_counter() - t0 < opts.timeout_s:
                        fresh = [m for m in list(latest) if m.header.stamp.sec * 10**9 + m.header.stamp.nanosec > t_move]
                        if fresh:
                            pred = fresh[0]
                            break
                        time.sleep(0.02)
                    if pred is None:
                        label = "(no prediction)"
                    else:  # an empty label is the learner saying it does not know the object
                        label = pred.label or "unknown"
                    ok = label == inst.category
                    correct += ok
                    ph["classify"].append({"object": inst.name, "truth": inst.category, "predicted": label,
                                           "confidence": round(float(pred.confidence), 3) if pred else 0.0,
                                           "correct": ok, "seconds": round(time.perf_counter() - t0, 3)})
                    print(f"[classify] {inst.name:14s} -> {label:14s} {'ok' if ok else 'WRONG'}")
                    time.sleep(1.5 / opts.rate_hz)  # let the arm node see the frame's depth too
                ph["accuracy"] = correct / len(table)
                # ---- point at every class on request
                for c in classes:
                    t0 = time.perf_counter()
                    res = _wait_future(point.call_async(PointAt.Request(label=c)), opts.timeout_s)
                    entry = {"label": c, "success": res.success, "message": res.message,
                             "seconds": round(time.perf_counter() - t0, 3)}
                    if res.success:
                        tgt = np.array([res.target.point.x, res.target.point.y, res.target.point.z])
                        with world_node.world_lock:
                            nearest = min(world.objects, key=lambda o: np.linalg.norm(o.position[:2] - tgt[:2]))
                        entry.update({"pointed_at": nearest.name, "pointed_category": nearest.category,
                                      "right_object": nearest.category == c,
                                      "ray_error_m": round(float(res.pointing_error_m), 4),
                                      "localisation_error_m": round(float(np.linalg.norm(nearest.position[:2] - tgt[:2])), 4)})
                    ph["point"].append(entry)
                    print(f"[point] {c:12s} -> {entry.get('pointed_at', '-'):14s} {res.message}")
                transcript["phases"].append(ph)
                print(f"[phase] {shots} shots: accuracy {ph['accuracy']:.2f}")
            # ---- scene picture: let the arm reach its last target, then render an overview
            t0 = time.perf_counter()
            while not world_node.joints_settled() and time.perf_counter() - t0 < 5:
                time.sleep(0.05)
            world_node.paused = True
            last = transcript["phases"][-1]
            _write_scene(world_node, last, out / "scene.png")
        finally:
            kin.close()
            stop_spin.set()  # then let queued callbacks finish before the nodes go (cbcl_pr_ros.nodes.spin)
            spin.join(timeout=5)
            stop_executor(executor)
            for n in [teacher, *reversed(nodes)]:
                n.destroy_node()
    transcript["wall_time_s"] = round(time.perf_counter() - t_start, 2)
    (out / "transcript.json").write_text(json.dumps(transcript, indent=1))
    return transcript


def _write_scene(world_node: Any, phase: dict, path: Path) -> None:
    """Overview picture with each object's prediction written over it and the arm pointing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cbcl_pr_ros.robot.world import CameraConfig, quaternion_to_matrix

    world = world_node.world
    cam = CameraConfig(960, 720, 55.0)
    with world_node.world_lock:
        # in front of the table, to the robot's right, looking back at the robot and the table
        world.set_free_camera([1.3, -0.75, 0.55], [0.55, -0.12, -0.08], up_hint=(0.0, 0.0, 1.0))
        frame = world.render(cam)
        pos, quat = world.camera_pose()
        side = world.config.camera_side
        hand, hand_q = world.link_pose(f"{side}_hand")
        world.use_hand_camera()
        objs = {o.name: o.position.copy() for o in world.objects}
        tops = {o.name: o.position + np.array([0.0, 0.0, o.half_extents[2] + 0.02]) for o in world.objects}
    R = quaternion_to_matrix(quat)
    K = cam.intrinsics()

    def px(p: np.ndarray) -> tuple[float, float]:
        pc = R.T @ (np.asarray(p, float) - pos)
        return K[0, 0] * pc[0] / pc[2] + K[0, 2], K[1, 1] * pc[1] / pc[2] + K[1, 2]

    fig, ax = plt.subplots(figsize=(9.6, 7.2), dpi=100)
    ax.imshow(frame.rgb)
    ax.axis("off")
    for rec in phase["classify"]:
        u, v = px(tops[rec["object"]])  # the label sits just above the object
        colour = "lime" if rec["correct"] else "red"
        ax.text(u, v, f"{rec['predicted']}\n(is {rec['truth']})", color=colour, fontsize=9, ha="center",
                va="bottom", bbox={"facecolor": "black", "alpha": 0.6, "pad": 2})
    pointed = [p for p in phase["point"] if p.get("success")]
    title = f"{phase['shots']} shots per class: classification accuracy {phase['accuracy']:.0%}"
    if pointed:
        last = pointed[-1]
        target = objs[last["pointed_at"]]
        ray = quaternion_to_matrix(hand_q)[:, 2]
        end = hand + ray * float(np.dot(target - hand, ray))  # the ray up to the object's depth along it
        (u0, v0), (u1, v1) = px(hand), px(end)
        ax.plot([u0, u1], [v0, v1], color="yellow", lw=2, ls="--")
        ax.plot([u1], [v1], "o", ms=14, mfc="none", mec="yellow", mew=2)
        title += (f"\narm asked to point at '{last['label']}': points at {last['pointed_at']} "
                  f"({'right' if last['right_object'] else 'WRONG'} object, ray {last['ray_error_m'] * 100:.1f} cm "
                  f"from its located centre)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def print_summary(tr: dict, out: str) -> None:
    """The transcript's short form: per phase what was taught, predicted and pointed at, and times."""
    print("\n=== teaching session transcript ===")
    print(f"seed {tr['seed']}; classes (taught 2 per increment): {', '.join(tr['classes'])}")
    for ph in tr["phases"]:
        teach_s = sum(t["seconds"] for t in ph["teach"])
        print(f"\n-- {ph['shots']} shots per class (this phase taught {sum(t['views'] for t in ph['teach'])} new "
              f"views in {len(ph['teach'])} TeachClass calls, {teach_s:.1f} s in the learner) --")
        pointed = {p["label"]: p for p in ph["point"]}
        print(f"{'object':14s} {'truth':10s} {'predicted':12s} {'conf':>5s}  {'point_at(truth) ->':20s} {'ray cm':>6s}")
        for c in ph["classify"]:
            p = pointed.get(c["truth"], {})
            at = p.get("pointed_at", "refused") if p else "-"
            mark = "" if not p.get("success") else "ok" if p.get("right_object") else "WRONG"
            ray = f"{p['ray_error_m'] * 100:.1f}" if "ray_error_m" in p else "-"
            print(f"{c['object']:14s} {c['truth']:10s} {c['predicted']:12s} {c['confidence']:5.2f}  "
                  f"{at + ' ' + mark:20s} {ray:>6s}")
        pts = [p for p in ph["point"] if p["success"]]
        right = sum(p.get("right_object", False) for p in pts)
        err = np.mean([p["ray_error_m"] for p in pts]) * 100 if pts else float("nan")
        loc = np.mean([p["localisation_error_m"] for p in pts if p.get("right_object")] or [np.nan]) * 100
        cls_s = np.mean([c["seconds"] for c in ph["classify"]])
        pt_s = np.mean([p["seconds"] for p in ph["point"]])
        print(f"classification accuracy {ph['accuracy']:.2f} ({sum(c['correct'] for c in ph['classify'])}/"
              f"{len(ph['classify'])}); pointed at the right object {right}/{len(ph['point'])} "
              f"({len(ph['point']) - len(pts)} refused); ray error {err:.2f} cm, localisation error {loc:.1f} cm; "
              f"{cls_s:.1f} s per classification, {pt_s:.1f} s per point_at")
    print(f"\nwall time {tr['wall_time_s']:.1f} s; scene picture and transcript in {out}/")


def main(argv: list[str] | None = None) -> int:
    from rclpy.utilities import remove_ros_args

    argv = list(sys.argv if argv is None else argv)
    opts = parse_args([a for a in remove_ros_args(argv)[1:] if a != "--"])
    try:
        tr = run_demo(opts)
    except (ValueError, RuntimeError, TimeoutError) as exc:
        print(f"run_demo_session: {exc}", file=sys.stderr)
        return 1
    print_summary(tr, opts.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
