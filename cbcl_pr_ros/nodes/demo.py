"""The main job: teach a simulated Baxter household objects, then have it name every object on a table and point at each.

One process runs the simulated world, the feature extractor, the learner and the arm node on a
its own executor (built by :mod:`cbcl_pr_ros.nodes.session`'s registry). A scripted teacher:

1. shows one object of each class to the hand camera from several views and calls ``teach_class``
   with the frames in MODE_OBJECT: the learner crops the object in view and learns the crop, not the
   table (2 classes per increment, 5 shots each, then 5 more each to make 10);
2. puts other objects of the same classes (held-out instances) close together on the table, some
   touching or partly hidden behind others;
3. looks at the table from a few hand-camera poses; the extractor proposes the objects of each
   frame and the learner names every one of them (``detections``: tracked, scores fused over frames);
4. asks ``point_at`` for every object's class; the arm points at the best detection of that label;
5. prints each step as it happens and a transcript (per-object accuracy, localisation error, time per
   view), and writes ``scene.png`` (every box with its label, green right, red wrong) and
   ``transcript.json`` under ``--out``.

Parameters come from ``config/cbcl_pr.yaml``, ``config/sim_world.yaml`` and ``config/arm.yaml``
(the installed copies), then a per-node override file for what this run sets (see
:func:`demo_ros_args`).

Run: ``run_demo_session`` (or ``python -m cbcl_pr_ros.nodes.demo --classes 6 --seed 0``).
"""
from __future__ import annotations

import argparse
import collections
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

from cbcl_pr_ros.settings.node_configs import params_files
from cbcl_pr_ros.stamps import stamp_to_ns

__all__ = ["main", "run_demo", "parse_args", "demo_ros_args"]

DEFAULT_CLASSES = ("mug", "can", "duck", "bottle", "teddy", "ball", "cereal", "lemon")
SHOW_SPOT = (0.66, 0.14)  # where the teacher holds objects up, clear of the table scene
SCENE_REGION = (0.57, 0.85, -0.52, -0.12)  # x0, x1, y0, y1 of the table scene (base frame)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="run_demo_session", description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="seed of the classes, objects, layout and world")
    ap.add_argument("--classes", type=int, default=10,
                    help="object classes to teach (2 per increment); one held-out object of each goes on the table")
    ap.add_argument("--shots", type=int, nargs="+", default=[5, 10], help="cumulative shots per class per phase")
    ap.add_argument("--out", default="runs/demo", help="directory for scene.png and transcript.json")
    ap.add_argument("--rate-hz", type=float, default=4.0, help="camera rate of the simulated world")
    ap.add_argument("--timeout-s", type=float, default=20.0, help="longest wait for a service or detections")
    ap.add_argument("--views", type=int, default=3, help="hand-camera poses the robot looks at the table from")
    ap.add_argument("--frames-per-view", type=int, default=3,
                    help="detection frames per view; the learner fuses each track's scores over this many frames")
    ap.add_argument("--teach-crop", choices=("object", "box", "frame"), default="object",
                    help="what TeachClass learns from each view: the learner's own choice of the object in "
                         "view (MODE_OBJECT: RGB proposals, largest and most central), the teacher's box "
                         "around the object (rois), or the whole frame (MODE_FRAME, as before issue 12)")
    return ap.parse_args(argv)


def demo_ros_args(opts: argparse.Namespace, memory_path: str) -> list[str]:
    """rclpy arguments: the nodes' YAML files, then the demo's own values for named nodes only.

    The overrides go in a params file keyed by node (a global ``-p`` would also hit every other node
    with a parameter of that name, e.g. the arm's ``rate_hz`` or the learner's ``seed``).
    """
    import yaml

    overrides = {
        # fuse a track over the frames of one view: the tracker works in the camera frame, so after a
        # move an old track can pick up another object; its old scores leave the window in that many frames
        "/**/learner": {"ros__parameters": {"memory_path": memory_path,
                                            "track_window": int(getattr(opts, "frames_per_view", 3))}},
        "/**/feature_extractor": {"ros__parameters": {"no_frame_warning_s": 0.0}},  # the camera pauses while teaching
        # no shadows: half the rendering time on 2 cores (teaching and table views alike)
        "/**/sim_world": {"ros__parameters": {"rate_hz": float(opts.rate_hz), "seed": int(opts.seed),
                                              "max_joint_velocity": 6.0, "shadows": False}},
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


def _view_targets(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Camera eye and target of each of ``n`` views over the table scene (base frame)."""
    x0, x1, y0, y1 = SCENE_REGION
    z = -0.18
    out = []
    for y in np.linspace(y0 + 0.08, y1 - 0.08, n) if n > 1 else [(y0 + y1) / 2]:
        target = np.array([(x0 + x1) / 2 + 0.02, float(y), z])
        out.append((target + np.array([-0.12, 0.0, 0.46]), target))
    return out


def _match(det_boxes: list, truth: list, min_iou: float = 0.3) -> list[int | None]:
    """Index of the ground-truth object of each detection box (greedy by IoU), or None."""
    from cbcl_pr_ros.perception import box_iou

    pairs = sorted(((box_iou(b, g.box), i, j) for i, b in enumerate(det_boxes) for j, g in enumerate(truth)),
                   reverse=True)
    out: list[int | None] = [None] * len(det_boxes)
    used: set[int] = set()
    for iou, i, j in pairs:
        if iou < min_iou or out[i] is not None or j in used:
            continue
        out[i], _ = j, used.add(j)
    return out


def run_demo(opts: argparse.Namespace) -> dict:
    import rclpy
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import RegionOfInterest

    from cbcl_pr_ros.msg import Detections
    from cbcl_pr_ros.nodes.conversions import rgb_to_image_msg
    from cbcl_pr_ros.nodes.detections_msgs import draw_detections
    from cbcl_pr_ros.nodes.guard import guard_callback
    from cbcl_pr_ros.nodes.qos import service_qos
    from cbcl_pr_ros.nodes.session import SessionContext, build_nodes
    from cbcl_pr_ros.nodes.spin import executor_for, spin_until, stop_executor
    from cbcl_pr_ros.robot.assets import CATALOGUE
    from cbcl_pr_ros.robot.kinematics import BaxterKinematics, Unreachable
    from cbcl_pr_ros.robot.scenes import ground_truth
    from cbcl_pr_ros.robot.world import quaternion_to_matrix, sample_instances
    from cbcl_pr_ros.srv import PointAt, TeachClass

    if not 2 <= opts.classes <= len(CATALOGUE):
        raise ValueError(f"--classes must be in [2, {len(CATALOGUE)}], got {opts.classes}")
    if not 1 <= opts.views <= 6:
        raise ValueError(f"--views must be in [1, 6], got {opts.views}")
    rng = np.random.default_rng(opts.seed)
    pool = list(DEFAULT_CLASSES) + [c for c in CATALOGUE if c not in DEFAULT_CLASSES]
    classes = [pool[i] for i in sorted(rng.choice(min(len(pool), max(opts.classes, len(DEFAULT_CLASSES) + 4)),
                                                   opts.classes, replace=False))]
    rng.shuffle(classes)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    mem = os.path.join(tempfile.mkdtemp(prefix="cbcl_demo_"), "memory.cbclpr")
    t_start = time.perf_counter()
    args = demo_ros_args(opts, mem)
    transcript: dict[str, Any] = {"seed": opts.seed, "classes": classes, "teach_crop": opts.teach_crop, "phases": []}
    print(f"[demo] {len(classes)} classes: {', '.join(classes)}; starting the nodes", flush=True)
    # Ctrl-C: Python's KeyboardInterrupt, so the finally below stops executor and nodes before
    # the context goes (rclpy's own handler would shut the context down under running publishers)
    with rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO):
        ctx = SessionContext()
        nodes = build_nodes(["extractor", "learner", "world", "arm"], ctx)
        world_node = ctx.nodes["world"]
        teacher = Node("teacher")
        latest: collections.deque[Any] = collections.deque(maxlen=64)  # bounded between clears
        # a Python function, not the builtin append: rclpy reads the callback's signature
        teacher.create_subscription(Detections, "detections",
                                    guard_callback(teacher, lambda m: latest.append(m), "detections"), 10)
        teach = teacher.create_client(TeachClass, "teach_class", qos_profile=service_qos())
        point = teacher.create_client(PointAt, "point_at", qos_profile=service_qos())
        # one executor per node: one executor over all of them starves the camera path (docs/nodes.md)
        executors = [executor_for(n, 3) for n in [*nodes, teacher]]
        stop_spin = threading.Event()
        spins = []
        for ex, n in zip(executors, [*nodes, teacher]):
            ex.add_node(n)
            spins.append(threading.Thread(target=spin_until, args=(ex, stop_spin), daemon=True))
            spins[-1].start()
        kin = BaxterKinematics(world_node.world.config.camera_side)
        try:
            for c in (teach, point):
                if not c.wait_for_service(timeout_sec=opts.timeout_s):
                    raise RuntimeError(f"service {c.srv_name} not available")
            world = world_node.world
            # ---- objects: a teaching object and a different (held-out) table object of each class
            insts = {c: sample_instances(c, 2, np.random.default_rng([opts.seed, i])) for i, c in enumerate(classes)}

            def aim(eye, target):
                with world_node.world_lock:
                    seed = world.joint_positions(kin.joint_names)
                sol = kin.aim_camera(eye, target, seed=seed)
                world_node.set_joints_now(sol.as_dict())

            def show_views(inst, n, view_rng) -> list:
                """The teacher holds the object up to the camera and turns it: (frame, box of the object)."""
                views = []
                with world_node.world_lock:
                    obj = world.add_object(inst, SHOW_SPOT, 0.0)
                try:
                    for _ in range(n):
                        with world_node.world_lock:
                            world.move_object(inst.name, np.add(SHOW_SPOT, view_rng.uniform(-0.015, 0.015, 2)),
                                              float(view_rng.uniform(-math.pi, math.pi)))
                            world.randomize_light(view_rng)
                        # about as far as the table views, so an object's crop has the same resolution there
                        d = float(view_rng.uniform(0.3, 0.45))
                        el, az = view_rng.uniform(math.radians(55), math.radians(85)), view_rng.uniform(-2.5, 2.5)
                        eye = obj.position + d * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
                        try:
                            aim(eye, obj.position)
                        except Unreachable:
                            aim(obj.position + np.array([0.0, 0.0, d]), obj.position)
                        with world_node.world_lock:
                            frame = world.render()
                        idx = frame.object_names.index(inst.name)
                        ys, xs = np.nonzero(frame.segmentation == idx)
                        box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1) if len(xs) else None
                        views.append((frame.rgb, box))
                finally:
                    with world_node.world_lock:
                        world.remove_object(inst.name)
                        world.randomize_light(np.random.default_rng(opts.seed))
                return views

            def teach_request(label, views) -> Any:
                req = TeachClass.Request(label=label, images=[rgb_to_image_msg(f) for f, _ in views])
                if opts.teach_crop == "frame":
                    req.mode = TeachClass.Request.MODE_FRAME
                elif opts.teach_crop == "object":
                    req.mode = TeachClass.Request.MODE_OBJECT
                else:
                    h, w = views[0][0].shape[:2]
                    req.rois = [RegionOfInterest(x_offset=b[0], y_offset=b[1], width=b[2] - b[0], height=b[3] - b[1])
                                if b else RegionOfInterest(x_offset=0, y_offset=0, width=w, height=h)
                                for _, b in views]
                return req

            # ---- the table scene: held-out objects close together (some touch or hide others)
            table = [insts[c][1] for c in classes]
            with world_node.world_lock:
                world.randomize_light(np.random.default_rng(opts.seed))
            placed = False
            taught: dict[str, int] = {}
            pictures: list[np.ndarray] = []
            for phase, shots in enumerate(opts.shots):
                ph: dict[str, Any] = {"shots": shots, "teach": [], "views": [], "objects": [], "point": []}
                world_node.paused = True
                with world_node.world_lock:  # the teacher takes the table objects away while teaching
                    for inst in table:
                        if placed:
                            world.move_object(inst.name, (1.6, 0.0))
                for inc in range(0, len(classes), 2):
                    for c in classes[inc:inc + 2]:
                        n_new = shots - taught.get(c, 0)
                        if n_new <= 0:
                            continue
                        views = show_views(insts[c][0], n_new, np.random.default_rng([opts.seed, phase, len(ph["teach"])]))
                        t0 = time.perf_counter()
                        res = _wait_future(teach.call_async(teach_request(c, views)), opts.timeout_s * 3)
                        taught[c] = shots
                        ph["teach"].append({"label": c, "views": n_new, "success": res.success, "message": res.message,
                                            "seconds": round(time.perf_counter() - t0, 3)})
                        print(f"[teach] {c:12s} +{n_new} views -> {res.message}", flush=True)
                with world_node.world_lock:
                    if not placed:
                        for k, inst in enumerate(table):
                            world.add_object(inst, (1.6 + 0.3 * k, 0.0), 0.0)
                        placed = True
                    region = SCENE_REGION
                    for _ in range(6):  # a crowded draw that does not fit gets a little more room
                        try:
                            world.arrange([i.name for i in table], np.random.default_rng([opts.seed, 99]),
                                          region=region, min_gap=-0.01)
                            break
                        except ValueError:
                            region = (region[0] - 0.02, region[1] + 0.02, region[2] - 0.03, region[3] + 0.02)
                    else:
                        raise ValueError(f"cannot fit {len(table)} objects on the table")
                    truth_pos = {o.name: o.position.copy() for o in world.objects}
                    truth_cat = {o.name: o.category for o in world.objects}
                world_node.paused = False
                # ---- look at the table from a few poses; every detection of the last fused frame counts
                best: dict[str, dict] = {}
                votes: dict[str, dict[str, float]] = {}
                single: list[bool] = []  # every matched detection of every view: single-view answers
                for v, (eye, target) in enumerate(_view_targets(opts.views)):
                    t0 = time.perf_counter()
                    try:
                        aim(eye, target)
                    except Unreachable as exc:
                        print(f"[view {v}] skipped: {exc}", flush=True)
                        continue
                    t_move = world_node.get_clock().now().nanoseconds
                    fresh: list = []
                    while time.perf_counter() - t0 < opts.timeout_s:
                        fresh = [m for m in list(latest) if stamp_to_ns(m.header.stamp) > t_move]
                        if len(fresh) >= opts.frames_per_view:
                            break
                        time.sleep(0.02)
                    latest.clear()
                    seconds = time.perf_counter() - t0
                    if not fresh:
                        print(f"[view {v}] no detections within {opts.timeout_s:.0f} s", flush=True)
                        continue
                    det = fresh[-1]
                    with world_node.world_lock:
                        frame = world.render()  # the same pose and scene: the frame those detections are of
                    gts = list(ground_truth(world, frame, min_visible_px=150))
                    match = _match([(o.x0, o.y0, o.x1, o.y1) for o in det.objects], gts)
                    R = quaternion_to_matrix(frame.camera_quaternion)
                    h, w = frame.rgb.shape[:2]
                    ok_flags = []
                    for o, j in zip(det.objects, match):
                        if j is None:
                            ok_flags.append(None)
                            continue
                        g = gts[j]
                        label = o.label or "unknown"
                        ok_flags.append(label == g.category)
                        c = np.array([o.centroid.x, o.centroid.y, o.centroid.z])
                        loc = float(np.linalg.norm((R @ c + frame.camera_position)[:2] - truth_pos[g.name][:2])) \
                            if np.all(np.isfinite(c)) else float("nan")
                        border = min(o.x0, o.y0, w - o.x1, h - o.y1)
                        rec = {"object": g.name, "truth": g.category, "predicted": label,
                               "confidence": round(float(o.confidence), 3), "track": int(o.id), "view": v,
                               "correct": label == g.category, "localisation_error_m": round(loc, 4),
                               "visible_px": int(g.pixels), "border_px": int(border)}
                        # across views every answer votes with its fused confidence (a quarter at the
                        # image border, where only part of the object shows), as the arm node does
                        v_weight = float(o.confidence) * (0.25 if border <= 2 else 1.0)
                        votes.setdefault(g.name, {})
                        votes[g.name][label] = votes[g.name].get(label, 0.0) + v_weight
                        single.append(label == g.category)
                        old = best.get(g.name)
                        # localisation from the view that shows the object best: off the border, most visible
                        if old is None or (min(border, 20), g.pixels) > (min(old["border_px"], 20), old["visible_px"]):
                            best[g.name] = rec
                    ph["views"].append({"view": v, "objects_detected": len(det.objects),
                                        "matched": sum(m is not None for m in match), "visible": len(gts),
                                        "frames_fused": len(fresh), "seconds": round(seconds, 3)})
                    ph.setdefault("_pictures", []).append(draw_detections(frame.rgb, det, ok_flags))
                    named = ", ".join(f"{o.label or 'unknown'}{'' if ok is None else (' ok' if ok else ' WRONG')}"
                                      for o, ok in zip(det.objects, ok_flags))
                    print(f"[view {v}] {len(det.objects)} objects in {seconds:.1f} s: {named}", flush=True)
                for inst in table:  # objects no view detected count as wrong
                    rec = best.get(inst.name) or {"object": inst.name, "truth": inst.category, "predicted": "(not found)",
                                                  "confidence": 0.0, "track": 0, "view": -1, "correct": False,
                                                  "localisation_error_m": float("nan")}
                    vt = votes.get(inst.name)
                    if vt:
                        label = max(vt, key=lambda k: (vt[k], k))
                        rec.update({"predicted": label, "correct": label == inst.category,
                                    "confidence": round(vt[label] / max(sum(vt.values()), 1e-9), 3),
                                    "votes": {k: round(x, 3) for k, x in vt.items()}})
                    ph["objects"].append(rec)
                ph["accuracy"] = float(np.mean([r["correct"] for r in ph["objects"]]))
                ph["single_view_accuracy"] = float(np.mean(single)) if single else float("nan")
                # ---- point at every object's class on request
                for inst in table:
                    c = inst.category
                    t0 = time.perf_counter()
                    res = _wait_future(point.call_async(PointAt.Request(label=c)), opts.timeout_s)
                    entry = {"label": c, "object": inst.name, "success": res.success, "message": res.message,
                             "seconds": round(time.perf_counter() - t0, 3)}
                    if res.success:
                        tgt = np.array([res.target.point.x, res.target.point.y, res.target.point.z])
                        nearest = min(truth_pos, key=lambda n: np.linalg.norm(truth_pos[n][:2] - tgt[:2]))
                        entry.update({"pointed_at": nearest, "pointed_category": truth_cat[nearest],
                                      "right_object": nearest == inst.name,
                                      "ray_error_m": round(float(res.pointing_error_m), 4),
                                      "localisation_error_m": round(float(np.linalg.norm(truth_pos[nearest][:2] - tgt[:2])), 4)})
                    ph["point"].append(entry)
                    print(f"[point] {c:12s} -> {entry.get('pointed_at', '-'):14s} {res.message}", flush=True)
                pictures = ph.pop("_pictures", [])
                transcript["phases"].append(ph)
                print(f"[phase] {shots} shots: per-object accuracy {ph['accuracy']:.2f}", flush=True)
            world_node.paused = True
            _write_scene(pictures, transcript["phases"][-1], out / "scene.png")
        finally:
            kin.close()
            stop_spin.set()  # then let queued callbacks finish before the nodes go (cbcl_pr_ros.nodes.spin)
            for t in spins:
                t.join(timeout=5)
            for ex in executors:
                stop_executor(ex)
            for n in [teacher, *reversed(nodes)]:
                n.destroy_node()
    transcript["wall_time_s"] = round(time.perf_counter() - t_start, 2)
    (out / "transcript.json").write_text(json.dumps(transcript, indent=1))
    return transcript


def _write_scene(pictures: list[np.ndarray], phase: dict, path: Path) -> None:
    """The views of the last phase side by side, every box labelled (green right, red wrong), with a title."""
    import cv2

    if not pictures:
        return
    h = min(p.shape[0] for p in pictures)
    row = np.concatenate([p[:h] for p in pictures], axis=1)
    bar = np.full((44, row.shape[1], 3), 255, np.uint8)
    pts = [p for p in phase["point"] if p.get("success")]
    title = (f"{phase['shots']} shots per class: {sum(r['correct'] for r in phase['objects'])}/{len(phase['objects'])} "
             f"objects named right; point_at chose the right object {sum(p.get('right_object', False) for p in pts)}/"
             f"{len(phase['point'])}  (green: right, red: wrong, orange: matches no object)")
    cv2.putText(bar, title, (8, 28), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 0, 0), 1, cv2.LINE_AA)
    img = np.concatenate([bar, row], axis=0)
    cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))


def print_summary(tr: dict, out: str) -> None:
    """The transcript's short form: per phase every object's answer, pointing, and the times."""
    print("\n=== teaching session transcript ===")
    print(f"seed {tr['seed']}; classes (taught 2 per increment, teaching crops: {tr.get('teach_crop', 'object')}): "
          f"{', '.join(tr['classes'])}")
    for ph in tr["phases"]:
        teach_s = sum(t["seconds"] for t in ph["teach"])
        print(f"\n-- {ph['shots']} shots per class ({sum(t['views'] for t in ph['teach'])} new views in "
              f"{len(ph['teach'])} TeachClass calls, {teach_s:.1f} s in the learner) --")
        pointed = {p["object"]: p for p in ph["point"]}
        print(f"{'object':14s} {'truth':10s} {'predicted':12s} {'vote':>5s} {'view':>4s} {'loc cm':>6s}  "
              f"{'point_at(truth) ->':22s} {'ray cm':>6s}")
        for r in ph["objects"]:
            p = pointed.get(r["object"], {})
            at = p.get("pointed_at", "refused") if p else "-"
            mark = "" if not p.get("success") else "ok" if p.get("right_object") else "WRONG"
            ray = f"{p['ray_error_m'] * 100:.1f}" if "ray_error_m" in p else "-"
            loc = r["localisation_error_m"]
            print(f"{r['object']:14s} {r['truth']:10s} {r['predicted']:12s} {r['confidence']:5.2f} {r['view']:4d} "
                  f"{'-' if not np.isfinite(loc) else f'{loc * 100:.1f}':>6s}  {at + ' ' + mark:22s} {ray:>6s}")
        pts = [p for p in ph["point"] if p["success"]]
        right = sum(p.get("right_object", False) for p in pts)
        locs = [r["localisation_error_m"] for r in ph["objects"] if np.isfinite(r["localisation_error_m"])]
        loc = np.mean(locs) * 100 if locs else float("nan")
        view_s = [v["seconds"] for v in ph["views"]]
        pt_s = np.mean([p["seconds"] for p in ph["point"]]) if ph["point"] else float("nan")
        print(f"per-object accuracy {ph['accuracy']:.2f} ({sum(r['correct'] for r in ph['objects'])}/"
              f"{len(ph['objects'])}; single views, each track fused over its frames: "
              f"{ph.get('single_view_accuracy', float('nan')):.2f}); localisation error {loc:.1f} cm (horizontal, {len(locs)} objects located); "
              f"{np.mean(view_s) if view_s else float('nan'):.1f} s per view ({len(view_s)} views, "
              f"{ph['views'][0]['frames_fused'] if ph['views'] else 0} frames fused each); pointed at the right "
              f"object {right}/{len(ph['point'])} ({len(ph['point']) - len(pts)} refused), {pt_s:.2f} s per point_at")
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
