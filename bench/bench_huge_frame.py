"""What one ``object_features`` frame costs the learner, by the number of objects it carries.

A learner node is built in-process (RAM only, backbone "test", 64-d vectors, three classes taught
through its controller); frames of N objects scattered over a 640x480 picture (random boxes and
centroids, random vectors near the classes) are handed, serialized as DDS delivers them, to its
``object_features`` callback (``LearnerNode._on_objects``, which builds the message) one after
another, and the wall time of each call is recorded. A frame above the extractor's cap
(``MAX_FRAME_OBJECTS``) is refused before it is built; ``--no-cap`` lifts the cap (monkeypatched)
to show what the same frame cost without it; ``--crowded`` puts every object within 2 cm of one point
and its box over one spot of the picture (every pair is near enough for the part rules to be tried,
the worst case of ``nested_parts``). Also timed: building the message from its bytes.

Writes runs/bench/huge_frame.json (``bench_common.out_path``; the curated copy is
bench/results/huge_frame.json). Run:
``source scripts/env.sh && python -P bench/bench_huge_frame.py [--sizes 16 256 2000] [--no-cap]``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import sys

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import REPO as ROOT, out_path  # noqa: E402

DIM = 64


def _frame_msg(n: int, rng: np.random.Generator, stamp_ns: int, centres: np.ndarray, crowded: bool = False) -> Any:
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg
    from cbcl_pr_ros.perception import Proposal

    h = Header(frame_id="camera")
    h.stamp.sec, h.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    props = []
    for _ in range(n):
        if crowded:
            x, y = int(rng.integers(300, 320)), int(rng.integers(220, 240))
            c = np.array([0.0, 0.0, 0.6]) + rng.uniform(-0.01, 0.01, 3)
        else:
            x, y = int(rng.integers(0, 600)), int(rng.integers(0, 440))
            c = np.array([rng.uniform(-0.3, 0.3), rng.uniform(-0.2, 0.2), rng.uniform(0.4, 0.8)])
        props.append(Proposal((x, y, x + 40, y + 40), None, c, np.full(3, 0.04), float(rng.uniform(0.5, 1.0))))
    feats = centres[rng.integers(0, len(centres), n)] + 0.05 * rng.standard_normal((n, DIM))
    return make_object_features_msg(h, "test", "", props, feats.astype(np.float32), (480, 640))


def run(sizes: list[int], repeats: int, cap: bool, crowded: bool = False) -> dict[str, Any]:
    import rclpy
    from rclpy.parameter import Parameter
    from rclpy.serialization import deserialize_message, serialize_message

    import cbcl_pr_ros.nodes.detections_msgs as dm
    from cbcl_pr_ros.msg import ObjectFeatures
    from cbcl_pr_ros.nodes.learner import LearnerNode

    if not cap:
        dm.MAX_FRAME_OBJECTS = 10**9
    rclpy.init()
    node = LearnerNode(feature_source=object(), parameter_overrides=[
        Parameter("memory_path", value=""), Parameter("backbone", value="test"),
        Parameter("feature_dim", value=DIM), Parameter("camera_pose_topic", value="")])
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((3, DIM)).astype(np.float32)
    for name, c in zip(("mug", "bottle", "cup"), centres):
        out = node.session.controller.teach(name, c + 0.05 * rng.standard_normal((5, DIM)).astype(np.float32))
        assert out.success, out.message
    rows, stamp = [], 1_000_000_000
    try:
        for n in sizes:
            msg = _frame_msg(n, rng, stamp, centres, crowded)
            raw = serialize_message(msg)
            t0 = time.perf_counter()
            deserialize_message(raw, ObjectFeatures)
            deser = time.perf_counter() - t0
            times = []
            for _ in range(repeats):
                stamp += 100_000_000
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
                before, data = node.session.detections_published, serialize_message(msg)
                t0 = time.perf_counter()
                node._on_objects(data)
                times.append(time.perf_counter() - t0)
                answered = node.session.detections_published > before
            rows.append({"objects": n, "message_bytes": len(raw), "deserialise_s": round(deser, 5),
                         "callback_s": [round(t, 5) for t in times], "callback_median_s": round(float(np.median(times)), 5),
                         "answered": answered})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        node.destroy_node()
        rclpy.shutdown()
    return {"cap": cap, "crowded": crowded, "max_frame_objects": dm.MAX_FRAME_OBJECTS if cap else None, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 500, 2000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-cap", action="store_true", help="lift the cap: what the frames cost without it")
    ap.add_argument("--crowded", action="store_true", help="every object near one point: every pair tried")
    ap.add_argument("--out", type=Path, default=out_path("huge_frame.json"))
    args = ap.parse_args()
    result = run(args.sizes, args.repeats, not args.no_cap, args.crowded)
    result["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(),
                         "load_avg": os.getloadavg()}
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    old[("capped" if result["cap"] else "uncapped") + ("_crowded" if args.crowded else "")] = result
    args.out.write_text(json.dumps(old, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
