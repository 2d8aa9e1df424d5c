"""Track ids in the main job: id switches and duplicate tracks per 100 frames (issue 20, outcome 6).

Runs the main job (``cbcl_pr_ros.nodes.demo``: world, extractor, learner and arm in one process, the
scripted teacher moving the hand camera between views and while pointing) with a teacher that also
records every ``detections`` message, every ``camera_pose`` and, each time it sets the table, where
the simulator put every object. Afterwards each frame's centroids go to the base frame with the
pose of the frame's stamp and are scored against the true centres
(``bench/track_scoring.py``).

``--track-frame base`` (the default) lets the learner track in the base frame (its
``camera_pose_topic`` on); ``camera`` turns the pose off, so tracks live in the camera frame as
before issue 20. Results are merged into runs/bench/tracks.json under ``--label`` (default: the
track frame). Run: ``source scripts/env.sh && nice -n 5 python -P bench/bench_tracks.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402
import ros_testing as H  # noqa: E402  (fresh_domain, ros_env: a ROS domain no other run on this machine uses)


def make_teacher_class() -> type:
    """The scripted teacher, recording detections, camera poses and the true layout (ROS imports here)."""
    from geometry_msgs.msg import PoseStamped
    from rclpy.callback_groups import ReentrantCallbackGroup

    from cbcl_pr_ros.msg import Detections
    from cbcl_pr_ros.nodes.demo_teacher import ScriptedTeacher
    from cbcl_pr_ros.nodes.qos import result_qos
    from cbcl_pr_ros.stamps import stamp_to_ns

    class RecordingTeacher(ScriptedTeacher):
        def __init__(self, node: Any, *args: Any) -> None:
            super().__init__(node, *args)
            self.lock = threading.Lock()
            self.frames: list[tuple[int, list]] = []
            self.poses: dict[int, tuple] = {}
            self.segments: list[tuple[int, dict]] = []
            group = ReentrantCallbackGroup()
            node.create_subscription(Detections, "detections", self._on_detections, result_qos(200),
                                     callback_group=group)
            node.create_subscription(PoseStamped, "camera_pose", self._on_pose, 200, callback_group=group)

        def _on_detections(self, msg: Any) -> None:
            objs = [(int(o.id), (o.centroid.x, o.centroid.y, o.centroid.z),
                     {"box": [o.x0, o.y0, o.x1, o.y1], "size": [o.size.x, o.size.y, o.size.z], "label": o.label,
                      "score": round(float(o.proposal_score), 3)}) for o in msg.objects]
            with self.lock:
                self.frames.append((stamp_to_ns(msg.header.stamp), objs))

        def _on_pose(self, msg: Any) -> None:
            p, q = msg.pose.position, msg.pose.orientation
            with self.lock:
                self.poses[stamp_to_ns(msg.header.stamp)] = ((p.x, p.y, p.z), (q.x, q.y, q.z, q.w))

        def set_table(self) -> None:
            super().set_table()  # the camera is paused: every later frame shows this layout
            res, _ = self.world.render()
            with self.lock:
                self.segments.append((self.world.now_ns(), {n: (p.x, p.y, p.z)
                                                            for n, p in zip(res.names, res.positions)}))

    return RecordingTeacher


def score(teacher: Any, gate_m: float) -> dict:
    """The recorded frames against the true layout of their segment."""
    from scipy.spatial.transform import Rotation

    from track_scoring import TrackFrame, TrackScore  # beside this script

    truth = {i: dict(layout) for i, (_, layout) in enumerate(teacher.segments)}
    ts = TrackScore(truth, gate_m=gate_m)
    skipped = {"before_first_table": 0, "without_pose": 0}
    for stamp, objs in sorted(teacher.frames, key=lambda f: f[0]):
        seg = max((i for i, (start, _) in enumerate(teacher.segments) if start < stamp), default=None)
        if seg is None:
            skipped["before_first_table"] += 1
            continue
        pose = teacher.poses.get(stamp)
        if pose is None:
            skipped["without_pose"] += 1
            continue
        rot, pos = Rotation.from_quat(pose[1]), np.asarray(pose[0])
        ts.add(TrackFrame(seg, [(tid, rot.apply(np.asarray(c, float)) + pos) for tid, c, _ in objs]))
    return {**ts.summary(), "frames_skipped": skipped, "segments": len(truth),
            "objects_per_segment": [len(v) for v in truth.values()]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--track-frame", choices=("base", "camera"), default="base")
    ap.add_argument("--label", default="", help="name of this run in the results (default: the track frame)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gate-m", type=float, default=0.08, help="largest horizontal distance detection -> object")
    ap.add_argument("--no-pose-param", action="store_true",
                    help="set no learner parameter (code from before issue 20 has no camera_pose_topic)")
    ap.add_argument("--out", default=str(out_path("tracks.json")))
    ap.add_argument("--dump", default="", help="also write every recorded frame, pose and layout here (JSON)")
    args = ap.parse_args()
    from cbcl_pr_ros.nodes.demo import parse_args, run_demo

    opts = parse_args(["--seed", str(args.seed), "--out", "/tmp/cbcl-bench-tracks"])
    if not args.no_pose_param:
        opts.learner_params = {"camera_pose_topic": "camera_pose" if args.track_frame == "base" else ""}
    holder: dict[str, Any] = {}
    base = make_teacher_class()

    class Teacher(base):  # type: ignore[misc, valid-type]
        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            holder["teacher"] = self

    os.environ.update(H.ros_env(H.fresh_domain()))  # held until this process ends
    load0, t0 = os.getloadavg(), time.perf_counter()
    transcript = run_demo(opts, teacher_class=Teacher)
    result = {"track_frame": "camera (no pose parameter)" if args.no_pose_param else args.track_frame,
              "seed": args.seed, "loadavg_start": [round(v, 2) for v in load0],
              "loadavg_end": [round(v, 2) for v in os.getloadavg()], "wall_s": round(time.perf_counter() - t0, 1),
              "main_job_accuracy": [ph["accuracy"] for ph in transcript["phases"]],
              **score(holder["teacher"], args.gate_m)}
    if args.dump:
        t = holder["teacher"]
        Path(args.dump).write_text(json.dumps({"frames": t.frames, "poses": {str(k): v for k, v in t.poses.items()},
                                               "segments": t.segments}))
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {}
    data.setdefault("runs", {})[args.label or args.track_frame] = result
    data["what"] = ("main job (scripts/run-demo defaults), detections scored against the simulator's object "
                    "centres; rates per 100 detection frames; bench/bench_tracks.py")
    out.write_text(json.dumps(data, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "events"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
