"""The shipped object proposals on real RGB-D frames no choice of this project was made on.

The nine sources of bench/real_rgbd/labels.json chose the proposal rules (leave-one-source-out keeps each
figure off its own source, but every rule was picked looking at those nine). The sources of
bench/real_rgbd/unseen.json (a tote of the Amazon Robotics Challenge 2017 rig, a shelf bin of the Amazon
Picking Challenge 2016, the LINEMOD office desk) were labelled after the rules were fixed and nothing is
tuned on them: this script only measures. Assemble them first::

    python -P bench/real_rgbd/assemble.py --snapshots DIR --labels bench/real_rgbd/unseen.json

(into data/real_rgbd, or --out, beside the main set's frames: the ids differ.)

Per method, ``hybrid`` (the extractor's default ``object_proposals``: the shipped segmenter refereed by the
geometry, the geometry alone where the depth is unusable) and ``depth`` (the geometry alone), each without
the camera's pose (the largest plane's normal taken as up) and, as ``hybrid_pose`` / ``depth_pose``, with the
world's up from the source's camera pose where it gives one (a frame's ``up``; the extractor does the same
with a robot's pose: ``ProposalConfig.up_axis``), scored as
bench_real scores the main set: recall and precision at IoU 0.5, merges per 10 frames, per source and
pooled over the frames with objects; the failure kinds per source; the proposals on the empty bins (frames
tagged ``empty``: each one is a false one); CPU milliseconds per 640x480 frame (one thread, best of
``--repeats``, process CPU time); whether the same frame twice gives the same proposals bit for bit; and
whether each proposal that claims 3D places its centroid where its pixels are (in front of the camera,
within 5 cm of its own readings, projecting into its box).

Writes runs/bench/unseen.json (``--out``); ``--summary PATH`` also writes the small per-source copy
curated in bench/results. Run: ``source scripts/env.sh && python -P bench/bench_unseen.py``.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core: the time reported is what one core spends

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import REPO, out_path, vga_cpu_ms  # noqa: E402
from bench_real import _draw, _figures  # noqa: E402
from real_rgbd_set import ProposalScore, failure_kinds, load_frames, score_proposals  # noqa: E402

UNSEEN_LABELS = REPO / "bench" / "real_rgbd" / "unseen.json"


def _same(a: list, b: list) -> bool:
    """Two proposal lists equal bit for bit (boxes, scores, masks, centroids, sizes)."""
    if len(a) != len(b):
        return False
    for p, q in zip(a, b):
        if p.box != q.box or p.score != q.score:
            return False
        if (p.mask is None) != (q.mask is None) or (p.mask is not None and not np.array_equal(p.mask, q.mask)):
            return False
        if not (np.array_equal(p.centroid, q.centroid, equal_nan=True)
                and np.array_equal(p.size, q.size, equal_nan=True)):
            return False
    return True


def placement_problems(props: list, depth: np.ndarray, K, far_m: float = 0.05) -> dict:
    """Proposals claiming 3D whose centroid is not where their pixels are: not finite or behind the
    camera, farther than ``far_m`` from every reading under its mask, or projecting outside its box
    widened by a quarter on each side. Counts, so a wrong position reported as valid shows. (A centroid
    sits half-way between an object's top and its feet on the support, so it may lie a few centimetres
    behind the readings the camera sees; ``far_m`` leaves room for that.)"""
    out = {"with_3d": 0, "not_finite_or_behind": 0, "far_from_own_readings": 0, "projects_outside_box": 0}
    for p in props:
        if not p.has_depth:
            continue
        out["with_3d"] += 1
        c = np.asarray(p.centroid, float)
        if not np.isfinite(c).all() or c[2] <= 0:
            out["not_finite_or_behind"] += 1
            continue
        if p.mask is not None:
            vv, uu = np.nonzero(p.mask & np.isfinite(depth))
            if vv.size:
                z = depth[vv, uu].astype(float)
                pts = np.stack([(uu - K.cx) * z / K.fx, (vv - K.cy) * z / K.fy, z], axis=1)
                if float(np.min(np.linalg.norm(pts - c, axis=1))) > far_m:
                    out["far_from_own_readings"] += 1
        u, v = K.fx * c[0] / c[2] + K.cx, K.fy * c[1] / c[2] + K.cy
        x0, y0, x1, y1 = p.box
        mx, my = 0.25 * (x1 - x0), 0.25 * (y1 - y0)
        if not (x0 - mx <= u <= x1 + mx and y0 - my <= v <= y1 + my):
            out["projects_outside_box"] += 1
    return out


def run_method(name: str, run, frames: list, repeats: int, pictures: Path | None) -> dict:
    """One method over every frame: scores, failure kinds, empty-bin proposals, time, determinism, 3D."""
    per_source, per_frame = defaultdict(ProposalScore), {}
    kinds: dict = defaultdict(lambda: (defaultdict(int), defaultdict(int)))
    empty: dict = defaultdict(lambda: {"frames": 0, "proposals": 0})
    times, differ, fell_back = [], [], 0
    placement: dict = defaultdict(int)
    for fr in frames:
        props, fb = run(fr)
        again, _ = run(fr)
        if not _same(props, again):
            differ.append(fr.id)
        fell_back += fb
        times.append(vga_cpu_ms(run, fr, repeats))
        for k, v in placement_problems(props, fr.depth_m, fr.intrinsics).items():
            placement[k] += v
        boxes, objects = [p.box for p in props], [b for _, b in fr.objects]
        s = score_proposals(boxes, objects, fr.ignore)
        per_frame[fr.id] = {"objects": s.objects, "found": s.hits, "proposals": s.proposals, "merges": s.merges,
                            "with_depth": sum(p.has_depth for p in props)}
        if pictures is not None:
            pictures.mkdir(parents=True, exist_ok=True)
            _draw(fr, props, s, pictures / f"{fr.id}_{name}.png")
        if not objects:
            empty[fr.source]["frames"] += 1
            empty[fr.source]["proposals"] += s.proposals
            continue
        per_source[fr.source].add(s)
        for counts, add in zip(kinds[fr.source], failure_kinds(boxes, objects, fr.ignore, s)):
            for k, v in add.items():
                counts[k] += v
    n_frames = {src: sum(f.source == src and bool(f.objects) for f in frames) for src in per_source}
    pooled = ProposalScore()
    for v in per_source.values():
        pooled.add(v)
    out = {"pooled": _figures(pooled, sum(n_frames.values())),
           "per_source": {k: _figures(v, n_frames[k]) for k, v in sorted(per_source.items())},
           "failure_kinds": {src: {"objects": dict(o), "unmatched_proposals": dict(u)}
                             for src, (o, u) in sorted(kinds.items())},
           "empty_frames": dict(empty),
           "cpu_ms_per_640x480_frame": {"median": round(float(np.median(times)), 1),
                                        "p90": round(float(np.quantile(times, 0.9)), 1),
                                        "max": round(float(np.max(times)), 1)},
           "same_proposals_twice": not differ, "frames_that_differed": differ,
           "fell_back_to_geometry": fell_back, "placement": dict(placement), "per_frame": per_frame}
    print(f"{name}: recall {pooled.recall:.3f} precision {pooled.precision:.3f} merges {pooled.merges}; "
          f"empty-bin proposals {sum(e['proposals'] for e in empty.values())}; "
          f"{out['cpu_ms_per_640x480_frame']['median']} ms median; same twice: {not differ}", flush=True)
    return out


def brief(out: dict) -> dict:
    """The curated copy: no per-frame figures."""
    keep = ("pooled", "per_source", "failure_kinds", "empty_frames", "cpu_ms_per_640x480_frame",
            "same_proposals_twice", "fell_back_to_geometry", "placement")
    return {k: v for k, v in out.items() if k != "methods"} | {
        "methods": {m: {k: r[k] for k in keep} for m, r in out["methods"].items()}}


def brief_text(b: dict) -> str:
    """The curated copy as JSON with one line per method (a few KB, and a diff shows which method moved)."""
    head = json.dumps({k: v for k, v in b.items() if k != "methods"}, indent=1)[:-2]
    methods = ",\n".join(f"  {json.dumps(m)}: {json.dumps(r)}" for m, r in b["methods"].items())
    return f"{head},\n \"methods\": {{\n{methods}\n }}\n}}\n"


def main() -> None:
    from cbcl_pr_ros.evaluation.experiments import machine_info
    from cbcl_pr_ros.objects.extract import proposal_segmenter
    from cbcl_pr_ros.perception import ProposalConfig, propose
    from cbcl_pr_ros.perception.segmenter import propose_hybrid

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=Path, default=Path(os.environ.get("CBCL_REAL_RGBD", REPO / "data" / "real_rgbd")),
                    help="the assembled frames (beside the main set's: the ids differ)")
    ap.add_argument("--labels", type=Path, default=UNSEEN_LABELS)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--summary", type=Path, default=None, help="also write the small per-source copy here")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per frame and method (best one kept)")
    ap.add_argument("--pictures", type=Path, default=None, help="per frame and method: boxes drawn on the frame")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    frames = load_frames(args.labels, args.frames)
    seg = proposal_segmenter("hybrid")  # what the extractor loads for its default object_proposals

    labels = json.loads(args.labels.read_text())
    up = {f["id"]: tuple(float(v) for v in f["up"]) for f in labels["frames"] if "up" in f}

    def config(fr, pose: bool):
        return ProposalConfig(up_axis=up[fr.id]) if pose and fr.id in up else None

    def hybrid(pose: bool):
        def run(fr):
            cfg = config(fr, pose)
            props = propose_hybrid(seg, fr.rgb, fr.depth_m, fr.intrinsics, cfg)
            return (props, 0) if props is not None else (propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg), 1)
        return run

    def depth(pose: bool):
        return lambda fr: (propose(fr.rgb, fr.depth_m, fr.intrinsics, config(fr, pose)), 0)

    out = {"labels": str(args.labels.relative_to(REPO)) if args.labels.is_relative_to(REPO) else str(args.labels),
           "frames": len(frames), "frames_with_pose": len(up),
           "frames_with_objects": sum(bool(f.objects) for f in frames),
           "objects": sum(len(f.objects) for f in frames),
           "sources": {k: {"repo": s["repo"], "commit": s["commit"]} for k, s in labels["sources"].items()},
           "scoring": "one-to-one matches at IoU >= 0.5, a proposal mostly inside an ignore box not counted; "
                      "recall/precision/merges over the frames with objects; empty frames: proposals counted",
           "machine": machine_info(), "load_average_1min_before": round(os.getloadavg()[0], 2), "methods": {}}
    for name, run in (("hybrid", hybrid(False)), ("depth", depth(False)), ("hybrid_pose", hybrid(True)),
                      ("depth_pose", depth(True))):
        out["methods"][name] = run_method(name, run, frames, args.repeats, args.pictures)
    out["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    path = args.out or out_path("unseen.json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"-> {path}")
    if args.summary is not None:
        args.summary.write_text(brief_text(brief(out)))
        print(f"-> {args.summary}")


if __name__ == "__main__":
    main()
