"""The main job: teach a simulated Baxter household objects, then have it name every object on a table and point at each.

One process runs the simulated world, the feature extractor, the learner and the arm node, each on
its own executor (built by :mod:`cbcl_pr_ros.nodes.session`'s registry, spun by
:func:`cbcl_pr_ros.nodes.spin.spinning`). The scripted teacher (:class:`~cbcl_pr_ros.nodes.demo_teacher.ScriptedTeacher`) is a
client of those nodes, as a user's script would be: it sets the scene with the world's services,
moves the arm with ``joint_command``, teaches through ``teach_class``, reads ``detections`` and
asks ``point_at``; it scores the answers against the
world's ``render_view`` ground truth (:mod:`cbcl_pr_ros.robot.demo_scoring`). The teacher:

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
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cbcl_pr_ros.nodes.demo_teacher import ScriptedTeacher
from cbcl_pr_ros.nodes.session import SessionContext, build_nodes
from cbcl_pr_ros.nodes.spin import own_args, spinning
from cbcl_pr_ros.plurals import counted
from cbcl_pr_ros.robot.assets import CATALOGUE
from cbcl_pr_ros.settings.node_configs import params_files

__all__ = ["main", "run_demo", "parse_args", "demo_ros_args"]

DEFAULT_CLASSES = ("mug", "can", "duck", "bottle", "teddy", "ball", "cereal", "lemon")


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
                         "around the object (rois), or the whole frame (MODE_FRAME)")
    return ap.parse_args(argv)


def demo_ros_args(opts: argparse.Namespace, memory_path: str) -> list[str]:
    """rclpy arguments: the nodes' YAML files, then the demo's own values for named nodes only.

    The overrides go in a params file keyed by node (a global ``-p`` would also hit every other node
    with a parameter of that name, e.g. the arm's ``rate_hz`` or the learner's ``seed``).
    """
    import yaml

    overrides = {
        # fuse a track over the frames of one view: with camera_pose the tracks live in the base frame,
        # without it an old track can pick up another object after a move; either way a
        # view's label comes from that view's frames
        "/**/learner": {"ros__parameters": {"memory_path": memory_path,
                                            "track_window": int(getattr(opts, "frames_per_view", 3)),
                                            **dict(getattr(opts, "learner_params", None) or {})}},
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


def _choose_classes(opts: argparse.Namespace) -> list[str]:
    if not 2 <= opts.classes <= len(CATALOGUE):
        raise ValueError(f"--classes must be in [2, {len(CATALOGUE)}], got {opts.classes}")
    if not 1 <= opts.views <= 6:
        raise ValueError(f"--views must be in [1, 6], got {opts.views}")
    rng = np.random.default_rng(opts.seed)
    pool = list(DEFAULT_CLASSES) + [c for c in CATALOGUE if c not in DEFAULT_CLASSES]
    classes = [pool[i] for i in sorted(rng.choice(min(len(pool), max(opts.classes, len(DEFAULT_CLASSES) + 4)),
                                                   opts.classes, replace=False))]
    rng.shuffle(classes)
    return classes


def _camera_side() -> str:
    """The hand camera's arm, as the world's YAML sets it (the IK must aim that arm)."""
    import yaml

    for f in params_files(["world"]):
        for entry in (yaml.safe_load(Path(f).read_text()) or {}).values():
            side = (entry or {}).get("ros__parameters", {}).get("camera_side")
            if side:
                return str(side)
    return "right"


def run_demo(opts: argparse.Namespace, teacher_class: type | None = None) -> dict:
    """Start the nodes in this process, run the scripted teacher against them, return the transcript.

    ``teacher_class``: a ScriptedTeacher subclass (a bench's teacher that also records what it sees);
    ``opts.learner_params`` (optional dict): learner parameters this run sets besides the demo's own.
    """
    import rclpy
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions


    classes = _choose_classes(opts)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    # the demo teaches a memory of its own, gone with the run (a robot's memory is never touched)
    scratch = tempfile.TemporaryDirectory(prefix="cbcl_demo_")
    mem = os.path.join(scratch.name, "memory.cbclpr")
    t_start = time.perf_counter()
    transcript: dict[str, Any] = {"seed": opts.seed, "classes": classes, "teach_crop": opts.teach_crop, "phases": []}
    print(f"[demo] {counted(len(classes), 'class')}: {', '.join(classes)}; starting the nodes", flush=True)
    # Ctrl-C: Python's KeyboardInterrupt, so the finally below stops executors and nodes before
    # the context goes (rclpy's own handler would shut the context down under running publishers)
    try:
        with rclpy.init(args=demo_ros_args(opts, mem), signal_handler_options=SignalHandlerOptions.NO):
            nodes = build_nodes(["extractor", "learner", "world", "arm"], SessionContext())
            teacher: Any = None
            try:
                nodes.append(Node("teacher"))
                teacher = (teacher_class or ScriptedTeacher)(nodes[-1], opts, classes, _camera_side())
                # one executor per node: one executor over all of them starves the camera path (docs/nodes.md)
                with spinning(nodes, 3):
                    pictures = teacher.run(transcript)
                _write_scene(pictures, transcript["phases"][-1], out / "scene.png")
            finally:
                if teacher is not None:
                    teacher.kin.close()
                for n in reversed(nodes):
                    n.destroy_node()
    finally:
        scratch.cleanup()  # after the context: the learner's last save is done by then
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
    title = (f"{counted(phase['shots'], 'shot')} per class: "
             f"{sum(r['correct'] for r in phase['objects'])}/{len(phase['objects'])} "
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
        new_views = counted(sum(t["views"] for t in ph["teach"]), "new view")
        print(f"\n-- {counted(ph['shots'], 'shot')} per class ({new_views} in "
              f"{counted(len(ph['teach']), 'TeachClass call')}, {teach_s:.1f} s in the learner) --")
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
              f"{ph.get('single_view_accuracy', float('nan')):.2f}); localisation error {loc:.1f} cm "
              f"(horizontal, {counted(len(locs), 'object')} located); "
              f"{np.mean(view_s) if view_s else float('nan'):.1f} s per view ({counted(len(view_s), 'view')}, "
              f"{counted(ph['views'][0]['frames_fused'] if ph['views'] else 0, 'frame')} fused each); "
              f"pointed at the right "
              f"object {right}/{len(ph['point'])} ({len(ph['point']) - len(pts)} refused), {pt_s:.2f} s per point_at")
    print(f"\nwall time {tr['wall_time_s']:.1f} s; scene picture and transcript in {out}/")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    opts = parse_args([a for a in own_args(argv, "run_demo_session")[1:] if a != "--"])
    try:
        tr = run_demo(opts)
    except (ValueError, RuntimeError, TimeoutError) as exc:
        print(f"run_demo_session: {exc}", file=sys.stderr)
        return 1
    print_summary(tr, opts.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
