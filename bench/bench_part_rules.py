"""What the side-piece rule of ``objects.pieces.nested_parts`` joins (issue 20, outcome 6).

Two checks, each with the rule on and off (``side_piece_m=0``):

1. Main-job detections (dumps of ``bench_tracks.py --dump``): every pair of detections of one frame
   that lie within the scoring gate of a true object, as two proposals; a pair on one object that
   the rule makes one is a duplicate track saved, a pair on two objects so joined would be an object lost.
2. The real set (``bench/real_rgbd``): depth proposals made a part without names, and labelled objects
   whose only match (IoU >= 0.5) is such a part (an object the tracks would lose).

Run: ``source scripts/env.sh && python -P bench/bench_part_rules.py --dumps /tmp/a.json ... --frames DIR``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402
from cbcl_pr_ros.objects.pieces import PIECES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OFF = {"policy": replace(PIECES, side_piece_m=0.0)}


def dump_pairs(path: str, gate_m: float = 0.08) -> dict:
    """Pairs of one frame's detections on one object / on two objects, and those each rule joins."""
    from scipy.spatial.transform import Rotation

    from cbcl_pr_ros.objects.pieces import nested_parts
    from cbcl_pr_ros.perception import Proposal

    d = json.loads(Path(path).read_text())
    poses = {int(k): v for k, v in d["poses"].items()}
    count = {"one_object": 0, "two_objects": 0, "one_object_joined": 0, "two_objects_joined": 0,
             "one_object_joined_before": 0, "two_objects_joined_before": 0}
    for stamp, objs in d["frames"]:
        seg = max((i for i, (start, _) in enumerate(d["segments"]) if start < stamp), default=None)
        if seg is None or stamp not in poses:
            continue
        layout = d["segments"][seg][1]
        names, centres = list(layout), np.array(list(layout.values()), float)
        rot, pos = Rotation.from_quat(poses[stamp][1]), np.asarray(poses[stamp][0])
        dets = []
        for _, c, info in objs:
            c = np.asarray(c, float)
            if not np.all(np.isfinite(c)):
                continue
            gap = np.linalg.norm(centres[:, :2] - (rot.apply(c) + pos)[:2], axis=1)
            if gap.min() <= gate_m:
                dets.append((names[int(np.argmin(gap))], info["label"],
                             Proposal(tuple(info["box"]), None, c, np.asarray(info["size"], float), 1.0)))
        for a in range(len(dets)):
            for b in range(a + 1, len(dets)):
                kind = "one_object" if dets[a][0] == dets[b][0] else "two_objects"
                props, labels = [dets[a][2], dets[b][2]], [dets[a][1], dets[b][1]]
                count[kind] += 1
                count[kind + "_joined"] += bool(nested_parts(props, labels))
                count[kind + "_joined_before"] += bool(nested_parts(props, labels, **OFF))
    return count


def real_parts(labels: str, frames_dir: str) -> dict:
    """Real-set proposals that become parts (no names), and labelled objects lost with them."""
    from real_rgbd_set import load_frames
    from cbcl_pr_ros.objects.pieces import nested_parts
    from cbcl_pr_ros.perception import box_iou, propose

    out = {"frames": 0, "objects": 0, "proposals": 0, "parts": 0, "parts_before": 0, "objects_lost": 0,
           "objects_lost_before": 0}
    for fr in load_frames(labels, frames_dir):
        props = propose(fr.rgb, fr.depth_m, fr.intrinsics)
        out["frames"] += 1
        out["objects"] += len(fr.objects)
        out["proposals"] += len(props)
        for key, parts in (("", nested_parts(props)), ("_before", nested_parts(props, **OFF))):
            out["parts" + key] += len(parts)
            kept = [p.box for i, p in enumerate(props) if i not in parts]
            out["objects_lost" + key] += sum(
                max((box_iou(k, box) for k in kept), default=0.0) < 0.5 <= max(box_iou(p.box, box) for p in props)
                for _, box in fr.objects) if props else 0
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dumps", nargs="*", default=[], help="bench_tracks.py --dump files")
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")))
    ap.add_argument("--out", default=str(out_path("part_rules.json")))
    args = ap.parse_args()
    result = {"loadavg": [round(v, 2) for v in os.getloadavg()],
              "main_job": {Path(p).name: dump_pairs(p) for p in args.dumps},
              "real": real_parts(args.labels, args.frames)}
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
