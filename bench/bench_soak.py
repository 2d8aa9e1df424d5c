#!/usr/bin/env python3
"""Soak of the per-object pipeline (issue 22): does an hour of work leak anything?

The simulated world (camera at ``--rate`` Hz, 6 objects on the table, the hand camera aimed at
them), the feature extractor (``detect_objects: on``) and the learner run as separate processes on a
fresh ROS domain, as the sim launch file starts them. Every ``--teach-every`` seconds one object is
taught from its track (TeachClass with ``track_id``, 5 frames), cycling over the six. Each minute the
script records, per node: RSS (``/proc/<pid>/status`` VmRSS) and, for the streams, messages received
by a monitor node (``image``, ``object_features``, ``detections``) and the drops between stages; plus
the machine's load average. The JSON is rewritten every minute, so a stopped run keeps its minutes.

The verdict: RSS growth of every node over the last 40 minutes (the minute-20 value against the
last), against the 5 % budget. A teach makes the learner's RSS jump for a minute or two (the retrain's
arrays, then freed), so two more figures are given that a single sample cannot swing: the growth of
the lowest RSS of the first and of the last 10 of those 40 minutes, and a straight-line fit over the
40 minutes (its rise over 40 minutes, relative to its start). The learner's memory grows with
what it is taught (new clusters, each with its covariance): its size (``status.memory_bytes``) is
recorded each minute, and the learner's growth is also given net of it: a leak is what remains.

    nice -n 5 python -P bench/bench_soak.py [--minutes 60] [--rate 30] [--teach-every 120]
    python -P bench/bench_soak.py --summarise runs/bench/soak_objects.json   # recompute the verdict

Writes runs/bench/soak_objects.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from cbcl_pr_ros.evaluation.experiments import machine_info

REPO = Path(__file__).resolve().parents[1]
CATEGORIES = ("mug", "duck", "can", "ball", "bottle", "teddy")
SPOTS = ((0.62, -0.08), (0.72, -0.08), (0.82, -0.08), (0.62, -0.24), (0.72, -0.24), (0.82, -0.24))
NODES = ("sim_world", "feature_extractor", "learner")


sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402
import ros_testing as H  # noqa: E402  (Proc, Client, ros_env, fresh_domain: the tests' own helpers)


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        return None
    return None


def start(module: str, domain: int, work: Path, params: dict) -> object:
    cfg = {"sim_world": "sim_world.yaml"}.get(module, "cbcl_pr.yaml")
    over = work / f"{module}.params.yaml"
    over.write_text(yaml.safe_dump({f"/**/{module}": {"ros__parameters": params}}))
    args = [sys.executable, "-P", "-m", f"cbcl_pr_ros.nodes.{module}", "--ros-args",
            "--params-file", str(REPO / "config" / cfg), "--params-file", str(over)]
    return H.Proc(args, H.ros_env(domain), work / f"{module}.log")


def aim_joints(eye, target) -> dict[str, float]:
    from cbcl_pr_ros.robot.kinematics import BaxterKinematics

    kin = BaxterKinematics("right")
    try:
        return kin.aim_camera(eye, target).as_dict()
    finally:
        kin.close()


class Counter:
    """Messages per topic, counted by a subscription callback (thread-safe enough: one executor)."""

    def __init__(self) -> None:
        self.n = 0
        self.last: object = None

    def __call__(self, msg: object) -> None:
        self.n += 1
        self.last = msg


def fitted_growth(series: list[float]) -> float | None:
    """Rise of a least-squares line over ``series`` from its first to its last point, relative to its start."""
    import numpy as np

    vals = np.array([v for v in series if v], float)
    if len(vals) < 3:
        return None
    slope, start = np.polyfit(np.arange(len(vals)), vals, 1)
    return round(float(slope * (len(vals) - 1) / start), 4)


def growth(series: list[float]) -> float | None:
    """Relative RSS growth between the first and the last value of ``series`` (None: too short)."""
    vals = [v for v in series if v]
    if len(vals) < 2:
        return None
    return round((vals[-1] - vals[0]) / vals[0], 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--teach-every", type=float, default=120.0)
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--out", default=str(out_path("soak_objects.json")))
    ap.add_argument("--summarise", metavar="JSON", help="recompute the verdict of a finished run's JSON and exit")
    args = ap.parse_args()
    if args.summarise:
        path = Path(args.summarise)
        result = json.loads(path.read_text())
        write(result, path)
        print(json.dumps(result["rss_verdict"], indent=2))
        return 0
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image, JointState

    from cbcl_pr_ros.msg import Detections, LearnerStatus, ObjectFeatures
    from cbcl_pr_ros.nodes.qos import status_qos
    from cbcl_pr_ros.srv import PlaceObject, TeachClass

    out_file = Path(args.out)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    domain = H.fresh_domain()
    work = Path(tempfile.mkdtemp(prefix="bench_soak_"))
    world = start("sim_world", domain, work, {"rate_hz": args.rate, "width": args.width, "height": args.height,
                                              "shadows": False, "max_joint_velocity": 8.0})
    extractor = start("feature_extractor", domain, work, {"detect_objects": "on", "no_frame_warning_s": 0.0,
                                                          "threads": 1})
    learner = start("learner", domain, work, {"memory_dir": str(work / "mem"), "fit_threads": 1})
    procs = dict(zip(NODES, (world, extractor, learner)))
    cli = H.Client(domain, "soak_monitor")
    counters = {t: Counter() for t in ("image", "object_features", "detections")}
    node = cli.node
    node.create_subscription(Image, "image", counters["image"], qos_profile_sensor_data)
    node.create_subscription(ObjectFeatures, "object_features", counters["object_features"], qos_profile_sensor_data)
    node.create_subscription(Detections, "detections", counters["detections"], 10)
    status = Counter()  # the learner's latest status: how large its memory has grown by teaching
    node.create_subscription(LearnerStatus, "status", status, status_qos())
    result: dict = {"config": {"minutes": args.minutes, "rate_hz": args.rate, "image": f"{args.width}x{args.height}",
                               "objects": list(CATEGORIES), "teach_every_s": args.teach_every,
                               "nice": os.nice(0), "nodes": list(NODES), "threads_per_backbone": 1},
                    "machine_start": machine_info(), "minutes": [], "teaches": []}
    try:
        assert cli.wait_for_service(PlaceObject, "place_object", 180, world), world.output()[-3000:]
        assert cli.wait_for_service(TeachClass, "teach_class", 180, learner), learner.output()[-3000:]
        for cat, (x, y) in zip(CATEGORIES, SPOTS):
            r = cli.call(PlaceObject, "place_object", PlaceObject.Request(category=cat, instance=1, x=x, y=y))
            if not r.success:
                r = cli.call(PlaceObject, "place_object", PlaceObject.Request(category=cat, instance=1,
                                                                            random_spot=True))
            progress(r.message)
        q = aim_joints((0.60, -0.16, 0.32), (0.72, -0.16, -0.18))
        pub = node.create_publisher(JointState, "joint_command", 10)
        H.wait_until(lambda: node.count_subscribers("joint_command") >= 1, 60)
        for _ in range(3):
            pub.publish(JointState(name=list(q), position=list(q.values())))
            time.sleep(1.0)
        assert H.wait_until(lambda: counters["detections"].n > 5, 300), learner.output()[-3000:]
        t0 = time.monotonic()
        prev = {k: c.n for k, c in counters.items()}
        next_teach, k = t0 + 30.0, 0
        minute = 0
        while time.monotonic() - t0 < args.minutes * 60:
            end = t0 + (minute + 1) * 60
            while time.monotonic() < end:
                if time.monotonic() >= next_teach:
                    next_teach += args.teach_every
                    result["teaches"].append(teach_one(cli, counters["detections"].last, k, time.monotonic() - t0))
                    k += 1
                time.sleep(max(0.0, min(1.0, end - time.monotonic())))
            minute += 1
            now = {k2: c.n for k2, c in counters.items()}
            d = {k2: now[k2] - prev[k2] for k2 in now}
            prev = now
            alive = {n: p.popen.poll() is None for n, p in procs.items()}
            last_det = counters["detections"].last
            row = {"minute": minute, "rss_mb": {n: rss_mb(p.popen.pid) for n, p in procs.items()},
                   "received_per_s": {k2: round(v / 60.0, 2) for k2, v in d.items()},
                   "dropped_extractor": d["image"] - d["object_features"],
                   "dropped_learner": d["object_features"] - d["detections"],
                   "objects_in_last_detections": len(last_det.objects) if last_det is not None else 0,
                   "alive": alive, "loadavg": [round(x, 2) for x in os.getloadavg()]}
            if status.last is not None:
                row["learner_memory_mb"] = round(int(status.last.memory_bytes) / 2 ** 20, 2)
                row["learner_clusters"] = int(status.last.num_clusters)
            result["minutes"].append(row)
            progress(json.dumps(row))
            write(result, out_file)
            if not all(alive.values()):
                result["stopped_early"] = f"a node ended: {alive}"
                break
    finally:
        cli.close()
        codes = {n: p.stop() for n, p in procs.items()}
        result["exit_codes"] = codes
        result["machine_end"] = machine_info()
        write(result, out_file)
    progress(f"wrote {out_file}")
    return 0


def teach_one(cli, det, k: int, at_s: float) -> dict:
    from cbcl_pr_ros.srv import TeachClass

    label = CATEGORIES[k % len(CATEGORIES)]
    objs = list(det.objects) if det is not None else []
    if not objs:
        return {"at_s": round(at_s, 1), "label": label, "success": False, "message": "no detections to teach from"}
    o = objs[k % len(objs)]
    t = time.monotonic()
    try:
        r = cli.call(TeachClass, "teach_class", TeachClass.Request(label=label, track_id=int(o.id), num_frames=5),
                     timeout=120)
        return {"at_s": round(at_s, 1), "label": label, "success": bool(r.success), "message": r.message[:200],
                "round_trip_s": round(time.monotonic() - t, 2), "classes": int(r.num_classes)}
    except TimeoutError as exc:
        return {"at_s": round(at_s, 1), "label": label, "success": False, "message": str(exc)[:200]}


def write(result: dict, path: Path) -> None:
    rows = result["minutes"]
    verdict = {}
    for n in NODES:
        series = [r["rss_mb"][n] for r in rows]
        last = series[-41:] if len(series) >= 41 else []
        verdict[n] = {"rss_first_mb": series[0] if series else None, "rss_last_mb": series[-1] if series else None,
                      "growth_last_40_min": growth(last) if last else None,
                      "growth_of_window_minimum_last_40_min": growth([min(last[:10]), min(last[-10:])]) if last else None,
                      "fitted_growth_last_40_min": fitted_growth(last) if last else None,
                      "rss_max_mb": max(series) if series else None,
                      "growth_whole_run": growth(series)}
    mem = [r.get("learner_memory_mb") for r in rows]
    if len(rows) >= 41 and None not in mem[-41:]:
        # the learner's memory grows with what it is taught (more clusters); that is not a leak
        learned = mem[-1] - mem[-41]
        v = verdict["learner"]
        v["memory_growth_mb_last_40_min"] = round(learned, 2)
        v["growth_last_40_min_net_of_memory"] = (v["rss_last_mb"] - learned) / rows[-41]["rss_mb"]["learner"] - 1.0
    result["rss_verdict"] = {"budget": 0.05, "nodes": verdict,
                             "all_under_budget": all(v["growth_last_40_min"] is not None and v["growth_last_40_min"] < 0.05
                                                     for v in verdict.values()) if len(rows) >= 41 else None}
    result["teaches_succeeded"] = sum(t["success"] for t in result["teaches"])
    path.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
