"""Per-object perception on rendered cluttered tables: proposals, classification, fusion, 3D, rate.

Per seed (a fresh PyBullet table world, ``cbcl_pr_ros.robot.scenes``):

1. ``--classes`` categories are drawn from the catalogue. Each is taught from one teaching object
   seen alone on the table from 10 hand-camera views (as the main job's teacher shows it); the
   first 5 or all 10 views are the 5- and 10-shot sets. The teaching input is either the crop of the
   proposal a teacher means (``select_teaching_proposal``: the largest, most central one) or the
   whole frame (what TeachClass used before issue 12). Features: EfficientNet-Lite0 (ONNX) via
   ``features.make_backbone``; learner: the core ``CBCLPRLearner`` with its default configuration.
2. ``--scenes`` scenes of 3-10 *other* instances of those categories (held-out tints, scales and,
   for categories with several meshes, meshes), placed close (some touching, some partly hidden),
   each seen from ``--views`` nearby poses. Ground truth from PyBullet's segmentation mask.
3. Per frame: proposals with depth and RGB-only (recall at IoU 0.5 against every visible object),
   3D localisation error of matched depth proposals (centroid vs the object's box centre), one
   batched backbone call on all crops, the learner's scores, and an ``ObjectTracker`` per learner.
   Per-object accuracy: a ground-truth object counts correct when its matched proposal's label
   (single frame) or its track's fused label (fusion) is its category; "of_detected" divides by the
   matched objects, "end_to_end" by all visible objects (a missed object is wrong). Closed-set
   accuracy uses the best class; ``open_set`` also needs the learner to call it known. Label
   stability: how often an object's label changes from one view to the next, single frame vs fused.
4. Rate: 640x480 frames of a 6-object scene through proposals + crops + one batched backbone call +
   classify + track, sequentially; latency from the start of processing (the image stamp) to the
   tracks, p50/p95.

Writes runs/bench/detections.json. Run: ``source scripts/env.sh && python -P bench/bench_detections.py``
(``--seeds 1 --scenes 1`` for a quick look). The machine is shared: the load average is recorded
beside every timing.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

from cbcl_pr_ros.evaluation.experiments import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("bench_detections")


def _match(props, gt_objects, thr: float = 0.5) -> list[int | None]:
    """For each ground-truth object, the index of the proposal of best IoU (>= thr), else None."""
    from cbcl_pr_ros.perception import box_iou

    out = []
    for o in gt_objects:
        ious = [box_iou(p.box, o.box) for p in props]
        j = int(np.argmax(ious)) if ious else -1
        out.append(j if j >= 0 and ious[j] >= thr else None)
    return out


def _teaching_inputs(world, categories, rng, n_views, K_cfg, bb):
    """{category: (crop_features (n, d), whole_features (n, d))} and crop-selection stats."""
    from cbcl_pr_ros.perception import CameraIntrinsics, crop_images, propose, select_teaching_proposal
    from cbcl_pr_ros.robot.scenes import render_object_views
    from cbcl_pr_ros.robot.world import sample_instances

    feats, fallbacks, crop_iou = {}, 0, []
    for cat in categories:
        inst = sample_instances(cat, 1, rng, prefix=f"teach_{cat}")[0]
        views = render_object_views(world, inst, n_views, rng, camera=K_cfg)
        crops, wholes = [], []
        for v in views:
            f = v.frame
            props = propose(f.rgb, f.depth, CameraIntrinsics.from_k(f.K))
            i = select_teaching_proposal(props, f.rgb.shape)
            if i is None:
                fallbacks += 1
                crops.append(f.rgb)
            else:
                crops.append(crop_images(f.rgb, [props[i]])[0])
                if v.objects:
                    from cbcl_pr_ros.perception import box_iou

                    crop_iou.append(box_iou(props[i].box, v.objects[0].box))
            wholes.append(f.rgb)
        X = bb.extract(crops + wholes)
        feats[cat] = (X[: len(crops)], X[len(crops):])
    return feats, fallbacks, crop_iou


def _learner(feats: dict, shots: int, which: int, seed: int, dim: int):
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    learner = CBCLPRLearner(LearnerConfig(seed=seed), backbone="efficientnet_lite0", feature_dim=dim)
    learner.teach_increment({c: f[which][:shots] for c, f in feats.items()})
    return learner


def run_seed(seed: int, args, bb) -> dict:
    from cbcl_pr_ros.perception import (
        CameraIntrinsics,
        ObjectObservation,
        ObjectTracker,
        ProposalConfig,
        crop_images,
        propose,
    )
    from cbcl_pr_ros.robot.assets import CATALOGUE
    from cbcl_pr_ros.robot.scenes import SceneSpec, make_scene, render_scene_views, table_world
    from cbcl_pr_ros.robot.world import CameraConfig

    rng = np.random.default_rng(np.random.SeedSequence([seed, 1212]))
    cats = [str(c) for c in rng.choice(sorted(CATALOGUE), size=args.classes, replace=False)]
    cam = CameraConfig(640, 480, 60.0)
    world = table_world(seed, cam)
    t0 = time.perf_counter()
    try:
        feats, fallbacks, crop_iou = _teaching_inputs(world, cats, rng, max(args.shots), cam, bb)
        dim = next(iter(feats.values()))[0].shape[1]
        learners = {(s, name): _learner(feats, s, w, seed, dim) for s in args.shots for w, name in ((0, "crops"), (1, "whole"))}
        spec = SceneSpec(camera=cam, view_step_deg=args.view_step)
        res = {k: {"single": [], "single_open": [], "fused_last": [], "fused_last_open": [], "single_last": [],
                   "single_last_open": [], "gt_last": 0, "gt_all": 0, "flips_single": 0, "flips_fused": 0,
                   "transitions": 0} for k in learners}
        recall = {"depth": [0, 0], "rgb": [0, 0]}
        n_props = {"depth": [], "rgb": []}
        loc_err, n_objects = [], []
        for s in range(args.scenes):
            make_scene(world, cats, rng, spec, prefix=f"s{s}_")
            n_objects.append(len(world.objects))
            frames = render_scene_views(world, rng, args.views, spec)
            trackers = {k: ObjectTracker(window=args.views) for k in learners}
            previous: dict = {k: {} for k in learners}  # object name -> (single label, fused label) of its last view
            for vi, sf in enumerate(frames):
                f = sf.frame
                K = CameraIntrinsics.from_k(f.K)
                props = propose(f.rgb, f.depth, K)
                props_rgb = propose(f.rgb, None, None, ProposalConfig(method="rgb"))
                n_props["depth"].append(len(props))
                n_props["rgb"].append(len(props_rgb))
                m = _match(props, sf.objects)
                for name, pp, mm in (("depth", props, m), ("rgb", props_rgb, _match(props_rgb, sf.objects))):
                    recall[name][0] += sum(j is not None for j in mm)
                    recall[name][1] += len(mm)
                for o, j in zip(sf.objects, m):
                    if j is not None and props[j].has_depth:
                        loc_err.append(float(np.linalg.norm(props[j].centroid - o.centre_cam)))
                X = bb.extract(crop_images(f.rgb, props)) if props else np.zeros((0, dim), np.float32)
                last = vi == len(frames) - 1
                for key, learner in learners.items():
                    r = res[key]
                    preds = learner.predict(X, top_k=len(cats)) if len(X) else []
                    obs = [ObjectObservation(p, dict(zip(pr.top_labels, pr.top_scores)), pr.known) for p, pr in zip(props, preds)]
                    tracks = trackers[key].update(obs, f.stamp)
                    by_prop = {id(t.proposal): t for t in tracks}
                    r["gt_all"] += len(sf.objects)
                    if last:
                        r["gt_last"] += len(sf.objects)
                    for o, j in zip(sf.objects, m):
                        if j is None:
                            continue
                        pr, tr = preds[j], by_prop[id(props[j])]
                        before = previous[key].get(o.name)
                        if before is not None:  # label changes between consecutive views of one object
                            r["transitions"] += 1
                            r["flips_single"] += before[0] != pr.nearest_label
                            r["flips_fused"] += before[1] != tr.nearest_label
                        previous[key][o.name] = (pr.nearest_label, tr.nearest_label)
                        r["single"].append(pr.nearest_label == o.category)
                        r["single_open"].append(pr.known and pr.label == o.category)
                        if last:
                            r["single_last"].append(pr.nearest_label == o.category)
                            r["single_last_open"].append(pr.known and pr.label == o.category)
                            r["fused_last"].append(tr.nearest_label == o.category)
                            r["fused_last_open"].append(tr.known and tr.label == o.category)
    finally:
        world.close()
    out = {"seed": seed, "classes": cats, "objects_per_scene": n_objects, "teach_crop_fallbacks": fallbacks,
           "teach_crop_iou_mean": round(float(np.mean(crop_iou)), 4) if crop_iou else None,
           "recall_iou50": {k: round(v[0] / max(v[1], 1), 4) for k, v in recall.items()},
           "visible_objects": recall["depth"][1],
           "proposals_per_frame": {k: round(float(np.mean(v)), 3) for k, v in n_props.items()},
           "loc_err_m": [round(e, 4) for e in loc_err], "seconds": round(time.perf_counter() - t0, 1), "accuracy": {}}
    for (shots, name), r in res.items():
        det = max(len(r["single"]), 1)
        det_last = max(len(r["fused_last"]), 1)
        out["accuracy"][f"{shots}shot_{name}"] = {
            "single_frame_of_detected": round(sum(r["single"]) / det, 4),
            "single_frame_end_to_end": round(sum(r["single"]) / max(r["gt_all"], 1), 4),
            "single_frame_open_set_of_detected": round(sum(r["single_open"]) / det, 4),
            "last_view_single_of_detected": round(sum(r["single_last"]) / det_last, 4),
            "last_view_fused_of_detected": round(sum(r["fused_last"]) / det_last, 4),
            "last_view_fused_end_to_end": round(sum(r["fused_last"]) / max(r["gt_last"], 1), 4),
            "last_view_single_open_set": round(sum(r["single_last_open"]) / det_last, 4),
            "last_view_fused_open_set": round(sum(r["fused_last_open"]) / det_last, 4),
            "label_changes_per_view_single": round(r["flips_single"] / max(r["transitions"], 1), 4),
            "label_changes_per_view_fused": round(r["flips_fused"] / max(r["transitions"], 1), 4),
        }
    return out


def pipeline_rate(args, bb, n_frames: int) -> dict:
    """Sequential full pipeline on 640x480 frames of a 6-object scene."""
    from cbcl_pr_ros.perception import CameraIntrinsics, ObjectObservation, ObjectTracker, crop_images, propose
    from cbcl_pr_ros.robot.assets import CATALOGUE
    from cbcl_pr_ros.robot.scenes import SceneSpec, make_scene, render_scene_views, render_object_views, table_world
    from cbcl_pr_ros.robot.world import CameraConfig, sample_instances

    rng = np.random.default_rng(77)
    cam = CameraConfig(640, 480, 60.0)
    cats = [str(c) for c in rng.choice(sorted(CATALOGUE), size=6, replace=False)]
    world = table_world(77, cam)
    try:
        teach = {c: bb.extract([v.frame.rgb for v in render_object_views(world, sample_instances(c, 1, rng)[0], 3, rng, cam)])
                 for c in cats}
        spec = SceneSpec(n_objects=(6, 6), camera=cam)
        make_scene(world, cats, rng, spec)
        frames = render_scene_views(world, rng, 5, spec)
    finally:
        world.close()
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    learner = CBCLPRLearner(LearnerConfig(), backbone="efficientnet_lite0", feature_dim=next(iter(teach.values())).shape[1])
    learner.teach_increment(teach)
    tracker = ObjectTracker()
    stages = {"proposals": [], "crops": [], "backbone": [], "classify": [], "track": []}
    lat, cpu, n_props = [], [], []
    load_before = os.getloadavg()
    for i in range(n_frames + 3):
        f = frames[i % len(frames)].frame
        c0 = time.process_time()
        t0 = time.perf_counter()
        props = propose(f.rgb, f.depth, CameraIntrinsics.from_k(f.K))
        t1 = time.perf_counter()
        crops = crop_images(f.rgb, props)
        t2 = time.perf_counter()
        X = bb.extract(crops)
        t3 = time.perf_counter()
        preds = learner.predict(X, top_k=3)
        t4 = time.perf_counter()
        tracker.update([ObjectObservation(p, dict(zip(pr.top_labels, pr.top_scores)), pr.known)
                        for p, pr in zip(props, preds)], float(i))
        t5 = time.perf_counter()
        c5 = time.process_time()
        if i < 3:  # warm-up
            continue
        lat.append(t5 - t0)
        cpu.append(c5 - c0)
        n_props.append(len(props))
        for k, a, b in (("proposals", t0, t1), ("crops", t1, t2), ("backbone", t2, t3), ("classify", t3, t4), ("track", t4, t5)):
            stages[k].append(b - a)
    lat_ms = np.array(lat) * 1000
    return {"frames": n_frames, "image": "640x480", "objects_in_scene": 6,
            "proposals_per_frame_mean": round(float(np.mean(n_props)), 2),
            "rate_hz": round(float(1000.0 / lat_ms.mean()), 2),
            "latency_ms_p50": round(float(np.percentile(lat_ms, 50)), 1),
            "latency_ms_p95": round(float(np.percentile(lat_ms, 95)), 1),
            "stage_ms_mean": {k: round(float(np.mean(v)) * 1000, 2) for k, v in stages.items()},
            # CPU time of this process per frame (all its threads): on a shared machine the wall time
            # includes waiting for a core; this does not
            "cpu_ms_per_frame_mean": round(float(np.mean(cpu)) * 1000, 1),
            "backbone_threads": args.threads,
            "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in os.getloadavg()]}


def summarise(seeds: list[dict]) -> dict:
    def ms(vals):
        a = np.asarray(vals, float)
        return {"mean": round(float(a.mean()), 4), "std": round(float(a.std()), 4)}

    errs = np.concatenate([s["loc_err_m"] for s in seeds]) * 1000
    out = {"recall_iou50": {k: ms([s["recall_iou50"][k] for s in seeds]) for k in ("depth", "rgb")},
           "proposals_per_frame": {k: ms([s["proposals_per_frame"][k] for s in seeds]) for k in ("depth", "rgb")},
           "visible_objects_total": int(sum(s["visible_objects"] for s in seeds)),
           "loc_err_mm": {"median": round(float(np.median(errs)), 1), "mean": round(float(errs.mean()), 1),
                          "p90": round(float(np.percentile(errs, 90)), 1), "n": int(len(errs))},
           "accuracy": {}}
    for key in seeds[0]["accuracy"]:
        out["accuracy"][key] = {m: ms([s["accuracy"][key][m] for s in seeds]) for m in seeds[0]["accuracy"][key]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--scenes", type=int, default=2, help="scenes per seed")
    ap.add_argument("--views", type=int, default=5, help="views per scene (the fusion window)")
    ap.add_argument("--shots", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--view-step", type=float, default=4.0, help="degrees of azimuth between a scene's views")
    ap.add_argument("--threads", type=int, default=2, help="backbone threads")
    ap.add_argument("--rate-frames", type=int, default=60)
    ap.add_argument("--out", default=str(out_path("detections.json")))
    ap.add_argument("--rate-only", action="store_true",
                    help="only measure the pipeline rate again and add it to an existing --out file as 'pipeline_rerun'")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from cbcl_pr_ros.features import make_backbone

    bb = make_backbone("efficientnet_lite0", runtime="onnx", threads=args.threads)
    t0 = time.perf_counter()
    rate = pipeline_rate(args, bb, args.rate_frames)
    if args.rate_only:
        out = Path(args.out)
        result = json.loads(out.read_text()) if out.exists() else {}
        result.setdefault("pipeline_rerun", []).append(rate)
        out.write_text(json.dumps(result, indent=1))
        print(json.dumps(rate, indent=1))
        return 0
    log.info("pipeline: %.1f Hz, p50 %.0f ms, p95 %.0f ms (load %s)", rate["rate_hz"], rate["latency_ms_p50"],
             rate["latency_ms_p95"], rate["loadavg_after"])
    seeds = []
    for seed in range(args.seeds):
        seeds.append(run_seed(seed, args, bb))
        s = seeds[-1]
        log.info("seed %d/%d: recall depth %.3f rgb %.3f, 10-shot crops fused %.3f single %.3f, %.0f s (load %.2f)",
                 seed + 1, args.seeds, s["recall_iou50"]["depth"], s["recall_iou50"]["rgb"],
                 s["accuracy"].get("10shot_crops", {}).get("last_view_fused_of_detected", float("nan")),
                 s["accuracy"].get("10shot_crops", {}).get("last_view_single_of_detected", float("nan")),
                 s["seconds"], os.getloadavg()[0])
    result = {
        "benchmark": "bench_detections", "machine": machine_info(),
        "note": "the 2-core machine was shared with other helpers' jobs during this run; see loadavg",
        "params": {"seeds": args.seeds, "classes": args.classes, "scenes_per_seed": args.scenes, "views_per_scene": args.views, "view_step_deg": args.view_step,
                   "shots": args.shots, "backbone": "efficientnet_lite0 (onnx)", "backbone_threads": args.threads,
                   "image": "640x480, 60 deg vertical fov", "objects_per_scene": "3-10", "match_iou": 0.5,
                   "teaching": "one teaching object per class, alone on the table, 10 hand-camera views; test objects are other instances"},
        "pipeline": rate, "summary": summarise(seeds), "seeds": seeds,
        "seconds_total": round(time.perf_counter() - t0, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps({"pipeline": rate, "summary": result["summary"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
