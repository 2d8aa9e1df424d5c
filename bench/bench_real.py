"""Object perception on real RGB-D frames of tables (issue 20): proposals and recognition.

The set: bench/real_rgbd/labels.json (62 frames from 9 public sources, 306 labelled objects;
assemble the frames first with bench/real_rgbd/assemble.py). Per frame:

1. Proposals (``perception.propose``) with depth and RGB-only: recall and precision at IoU 0.5,
   merges (an unmatched proposal holding two or more labelled objects), CPU milliseconds per frame
   (one OpenCV thread, best of 3, scaled to 640x480 by pixel count; process CPU time, so a loaded
   shared machine inflates it little; the 1-minute load average is recorded beside it). With
   ``--ransac-seeds 0,1,2,3`` the depth proposals are also scored under each RANSAC seed (``ransac_seeds``:
   per seed, and min / mean / max), since the support plane and its noise threshold follow the sample. Every
   figure is also given per source, and **leave-one-source-out** (``leave_one_source_out``): the height test's
   noise multiples are chosen on the other sources from ``LOSO_GRID`` and scored on the held-out one
   (``--skip-loso`` leaves it out; ``--loso-also KEY=V1,V2`` adds a setting to choose among, so whether the
   other sources would turn a rule on is measured too). ``bad_frames``: each frame's depth made bad (holes everywhere, a wall at
   30 cm, random readings, the camera upside down): CPU time and how many proposals claim 3D. Per-frame pictures with the
   labelled boxes (green), matched proposals (blue) and the others (red) go to --pictures.
2. Recognition from the hand-drawn boxes: per source, instances seen in two or more frames are split
   in half (seeded); one half is taught from its first frame (1 shot = the labelled box; 5 shots = the
   box and four shifted/scaled copies of it, as a teacher's boxes differ), the other half and the
   instances seen once are never taught. Tested on every other frame: taught instances should get
   their name (accuracy, and the share accepted as known), never-taught ones should be answered
   unknown (open-set rejection). Confidence: ECE of the best class's confidence on taught instances
   and the share of (wrong, right) pairs where the wrong answer is less confident. EfficientNet-Lite0
   (ONNX) features; the core ``CBCLPRLearner`` with its default configuration, all taught classes of a
   source in one ``teach_increment`` (no teach-time views).

   The open-set gate with negatives (issue 20): the never-taught instances are split in half per
   seed, "seen" ones may be given to the learner as negatives (``CBCLPRLearner.add_negatives``) and
   "unseen" ones never are; rejection is reported for both, for no negatives, the other objects and
   background crops of the teaching frames, the same from the teaching frame and the next frame each
   taught instance is seen in (``second_frames``: the robot looks once more), and the whole stream
   (background of every frame and every view of the seen instances).
   ``untaught_*_rejected_at_90_accepted``: what the best single threshold on the gate's distance
   would reject while accepting 90 % of the taught views (the limit of one radius for all classes).

   Crops (``--crops``): ``masked`` (default) as the extractor crops a proposal, the pixels outside the
   object's mask set to a neutral grey, the mask from the depth proposal matching the labelled box
   (or the proposals' foreground inside it; ``mask_sources`` counts them); ``plain``: the box as it is.

Writes runs/bench/real.json (``--only-recognition``: recognition alone, to
runs/bench/real_gate.json). Run:
``source scripts/env.sh && python -P bench/bench_real.py [--skip-recognition] [--pictures DIR]``.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import cv2
import numpy as np

from cbcl_pr_ros.evaluation.experiments import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import auroc, out_path  # noqa: E402
from real_rgbd_set import ProposalScore, failure_kinds, load_frames, score_proposals  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("bench_real")


def _draw(frame, props, score, path: Path) -> None:
    img = cv2.cvtColor(frame.rgb, cv2.COLOR_RGB2BGR)
    used = set(score.matched.values())
    for b in frame.ignore:
        cv2.rectangle(img, b[:2], (b[2] - 1, b[3] - 1), (160, 160, 160), 1)
    for i, p in enumerate(props):
        x0, y0, x1, y1 = p.box
        cv2.rectangle(img, (x0, y0), (x1 - 1, y1 - 1), (255, 128, 0) if i in used else (0, 0, 255), 2)
    for name, (x0, y0, x1, y1) in frame.objects:
        cv2.rectangle(img, (x0, y0), (x1 - 1, y1 - 1), (0, 200, 0), 1)
    cv2.putText(img, f"{frame.id}: {score.hits}/{score.objects} found, {score.proposals} proposals, "
                f"{score.merges} merges", (6, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 2)
    cv2.imwrite(str(path), img)


def bench_proposals(frames, config, pictures: Path | None, repeats: int = 3) -> dict:
    from cbcl_pr_ros.perception import propose

    out = {}
    for method in ("depth", "rgb"):
        cfg = config(method)
        total, per_source, per_frame, times = ProposalScore(), defaultdict(ProposalScore), {}, []
        kinds: dict = defaultdict(lambda: (defaultdict(int), defaultdict(int)))  # source -> (objects, proposals)
        for fr in frames:
            props = propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)
            t = []
            for _ in range(repeats):
                t0 = time.process_time()  # CPU time of this process: what one core spends, whatever the load
                propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)
                t.append(time.process_time() - t0)
            # time per 640x480 frame: larger frames are reported scaled by their pixel count
            times.append(min(t) * (640 * 480) / (fr.rgb.shape[0] * fr.rgb.shape[1]))
            s = score_proposals([p.box for p in props], [b for _, b in fr.objects], fr.ignore)
            total.add(s)
            per_source[fr.source].add(s)
            for counts, add in zip(kinds[fr.source], failure_kinds([p.box for p in props], [b for _, b in fr.objects],
                                                                   fr.ignore, s)):
                for k, v in add.items():
                    counts[k] += v
            per_frame[fr.id] = {"objects": s.objects, "found": s.hits, "proposals": s.proposals, "merges": s.merges,
                                "with_depth": sum(p.has_depth for p in props)}
            if pictures is not None:
                pictures.mkdir(parents=True, exist_ok=True)
                _draw(fr, props, s, pictures / f"{fr.id}_{method}.png")
        out[method] = {
            "recall_iou50": round(total.recall, 3), "precision_iou50": round(total.precision, 3),
            "objects": total.objects, "found": total.hits, "proposals": total.proposals,
            "merges": total.merges, "merges_per_10_frames": round(10 * total.merges / len(frames), 2),
            "cpu_ms_per_640x480_frame": {"median": round(1000 * float(np.median(times)), 1),
                                     "p90": round(1000 * float(np.quantile(times, 0.9)), 1)},
            "per_source": {k: _figures(v, sum(f.source == k for f in frames)) for k, v in sorted(per_source.items())},
            "per_frame": per_frame,
            "failure_kinds": {src: {"objects": dict(o), "unmatched_proposals": dict(u)}
                              for src, (o, u) in sorted(kinds.items())},
        }
        log.info("%s: recall %.3f precision %.3f merges %d, %.1f ms", method, total.recall, total.precision,
                 total.merges, 1000 * float(np.median(times)))
    return out


# the settings leave-one-source-out chooses among: the two noise multiples of the height test (the rest of the
# proposal rules are fixed by geometry or by the rendered tables, not by these frames)
LOSO_GRID = {"height_sigmas": (4.0, 6.0, 8.0), "seed_sigmas": (10.0, 13.0, 16.0)}


def _figures(score: ProposalScore, frames: int) -> dict:
    return {"recall": round(score.recall, 3), "precision": round(score.precision, 3), "merges": score.merges,
            "merges_per_10_frames": round(10 * score.merges / max(frames, 1), 2), "objects": score.objects,
            "frames": frames}


def _objective(score: ProposalScore, frames: int) -> float:
    """What a choice is made on: F1 at IoU 0.5, less 0.05 per merge in 10 frames."""
    r, p = score.recall, score.precision
    f1 = 2 * r * p / (r + p) if r + p > 0 else 0.0
    return f1 - 0.05 * 10 * score.merges / max(frames, 1)


def leave_one_source_out(frames, overrides: dict, grid: dict = LOSO_GRID) -> dict:
    """Every setting of ``grid`` scored per source; for each source, the setting best on the *other*
    sources (``_objective``) and its figures on the held-out one, beside the shipped defaults'. A figure
    measured on the frames a choice was made on is no result; this one is not."""
    from itertools import product

    from cbcl_pr_ros.perception import ProposalConfig, propose

    keys = sorted(grid)
    settings = [dict(zip(keys, vals)) for vals in product(*(grid[k] for k in keys))]
    sources = sorted({f.source for f in frames})
    n_frames = {s: sum(f.source == s for f in frames) for s in sources}
    per = []  # per setting: source -> ProposalScore
    for setting in settings:
        cfg = ProposalConfig.with_overrides(method="depth", **(overrides | setting))
        by_source = defaultdict(ProposalScore)
        for fr in frames:
            props = propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)
            by_source[fr.source].add(score_proposals([p.box for p in props], [b for _, b in fr.objects], fr.ignore))
        per.append(by_source)
    out = {}
    for held in sources:
        def pooled(i: int, held: str = held) -> ProposalScore:
            total = ProposalScore()
            for s in sources:
                if s != held:
                    total.add(per[i][s])
            return total
        rest_frames = sum(n for s, n in n_frames.items() if s != held)
        best = max(range(len(settings)), key=lambda i: (_objective(pooled(i), rest_frames), -i))
        out[held] = {"chosen_on_the_others": settings[best],
                     "others": _figures(pooled(best), rest_frames),
                     "held_out": _figures(per[best][held], n_frames[held])}
    total = ProposalScore()
    for held in sources:
        total.add(per[settings.index(out[held]["chosen_on_the_others"])][held])
    return {"grid": grid, "objective": "F1 at IoU 0.5 less 0.05 per merge in 10 frames, on the other sources",
            "per_source": out, "held_out_pooled": _figures(total, len(frames))}


def _bad_variants(fr, rng) -> dict:
    """Bad versions of a real frame's depth (metres, NaN = hole): what a camera sends on a bad day."""
    d = fr.depth_m
    holes = d.copy()
    holes[rng.random(d.shape) < 0.97] = np.nan
    wall = (0.30 + rng.normal(0.0, 0.0005, d.shape)).astype(np.float32)  # a wall filling the view at 30 cm
    noise = rng.uniform(0.3, 3.0, d.shape).astype(np.float32)  # readings with no surface in them
    return {"holes_everywhere": holes, "wall_at_30_cm": wall, "random_depths": noise,
            "upside_down": np.ascontiguousarray(d[::-1, ::-1])}


def bad_frames(frames, config) -> dict:
    """Per bad variant of every real frame: CPU milliseconds per 640x480 frame (median and max), how many
    proposals came out, and how many of them claimed 3D, so a bad frame's cost and answers are bounded."""
    from cbcl_pr_ros.perception import CameraIntrinsics, propose

    rng = np.random.default_rng(7)
    out: dict = defaultdict(lambda: {"ms": [], "proposals": 0, "with_3d": 0})
    for fr in frames:
        for name, depth in _bad_variants(fr, rng).items():
            rgb, K = fr.rgb, fr.intrinsics
            if name == "upside_down":  # the same camera turned over: the image and its principal point turn
                h, w = rgb.shape[:2]
                rgb, K = np.ascontiguousarray(rgb[::-1, ::-1]), CameraIntrinsics(K.fx, K.fy, w - 1 - K.cx, h - 1 - K.cy)
            t = []
            for _ in range(2):  # best of 2, as above: the first call of a process also loads code
                t0 = time.process_time()
                props = propose(rgb, depth, K, config)
                t.append(time.process_time() - t0)
            out[name]["ms"].append(min(t) * 1000 * (640 * 480) / (rgb.shape[0] * rgb.shape[1]))
            out[name]["proposals"] += len(props)
            out[name]["with_3d"] += sum(p.has_depth for p in props)
    return {k: {"frames": len(v["ms"]), "cpu_ms_median": round(float(np.median(v["ms"])), 1),
                "cpu_ms_max": round(float(np.max(v["ms"])), 1), "proposals": v["proposals"], "with_3d": v["with_3d"]}
            for k, v in out.items()}


_SEED_KEYS = ("recall_iou50", "precision_iou50", "merges_per_10_frames")


def seed_spread(frames, seeds: list[int], overrides: dict, first: dict) -> dict:
    """Depth proposals under each RANSAC seed (the support plane, hence the noise threshold, follows the
    sampled plane): per-seed figures, and their min / mean / max, so a result that holds for one seed only shows."""
    from cbcl_pr_ros.perception import ProposalConfig, propose

    per_seed = {str(seeds[0]): {k: first[k] for k in _SEED_KEYS} | {"merges": first["merges"]}}
    for seed in seeds[1:]:
        cfg = ProposalConfig.with_overrides(method="depth", **(overrides | {"seed": seed}))
        total = ProposalScore()
        for fr in frames:
            props = propose(fr.rgb, fr.depth_m, fr.intrinsics, cfg)
            total.add(score_proposals([p.box for p in props], [b for _, b in fr.objects], fr.ignore))
        per_seed[str(seed)] = {"recall_iou50": round(total.recall, 3), "precision_iou50": round(total.precision, 3),
                               "merges_per_10_frames": round(10 * total.merges / len(frames), 2), "merges": total.merges}
    spread = {k: {"min": min(v[k] for v in per_seed.values()), "mean": round(float(np.mean([v[k] for v in per_seed.values()])), 3),
                  "max": max(v[k] for v in per_seed.values())} for k in _SEED_KEYS}
    return {"seeds": seeds, "per_seed": per_seed, "spread": spread}


def rendered_views(seeds: int, scenes: int = 2, views: int = 3) -> list:
    """The rendered table frames ``rendered_recall`` scores (as bench_detections draws them), made once so
    that several proposers can be scored on the same ones."""
    from cbcl_pr_ros.robot.assets import CATALOGUE
    from cbcl_pr_ros.robot.scenes import SceneSpec, make_scene, render_scene_views, table_world
    from cbcl_pr_ros.robot.world import CameraConfig

    out = []
    cam = CameraConfig(640, 480, 60.0)
    for seed in range(seeds):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 1212]))
        cats = [str(c) for c in rng.choice(sorted(CATALOGUE), size=10, replace=False)]
        world = table_world(seed, cam)
        try:
            spec = SceneSpec(camera=cam)
            for s in range(scenes):
                make_scene(world, cats, rng, spec, prefix=f"s{s}_")
                out.extend(render_scene_views(world, rng, views, spec))
        finally:
            world.close()
    return out


def rendered_recall(config, seeds: int, scenes: int = 2, views: int = 3, proposer=None, rendered=None) -> dict:
    """Depth-proposal recall at IoU 0.5 on rendered tables (as bench_detections draws them), so a change
    made for real frames is checked on the simulated ones too; and how many objects come out in two or
    more pieces that each would get a track (not a part by ``nested_parts``; a piece: 60 % or more of
    its mask on the object, at least 5 % of the object's pixels): the source of duplicate tracks.
    ``proposer(rgb, depth, K, config)`` gives the proposals (default ``propose``; e.g. the learned ones);
    ``rendered``: the frames of ``rendered_views(seeds, scenes, views)`` made before (else made here)."""
    from cbcl_pr_ros.objects.pieces import nested_parts
    from cbcl_pr_ros.perception import CameraIntrinsics, box_iou, propose

    hits = total = n_props = frames = in_pieces = 0
    for sf in rendered if rendered is not None else rendered_views(seeds, scenes, views):
        props = (proposer or propose)(sf.frame.rgb, sf.frame.depth, CameraIntrinsics.from_k(sf.frame.K), config) or []
        hits += sum(max((box_iou(p.box, o.box) for p in props), default=0.0) >= 0.5 for o in sf.objects)
        in_pieces += _objects_in_pieces(sf, props, nested_parts(props))
        total += len(sf.objects)
        n_props += len(props)
        frames += 1
    return {"seeds": seeds, "frames": frames, "objects": total, "recall_iou50": round(hits / max(total, 1), 3),
            "proposals_per_frame": round(n_props / max(frames, 1), 2), "objects_in_pieces": in_pieces}


def _objects_in_pieces(sf, props, parts: set[int]) -> int:
    """Objects of a rendered frame covered by two or more proposals that are not parts (see rendered_recall)."""
    seg, names = sf.frame.segmentation, sf.frame.object_names
    count = 0
    for o in sf.objects:
        obj = seg == names.index(o.name)
        n_obj = int(obj.sum())
        pieces = 0
        for k, p in enumerate(props):
            if k in parts or p.mask is None:
                continue
            inter = int((p.mask & obj).sum())
            pieces += inter >= 0.6 * max(1, int(p.mask.sum())) and inter >= 0.05 * n_obj
        count += pieces >= 2
    return count


def _jitter_boxes(box, shape, n: int, rng) -> list[tuple[int, int, int, int]]:
    """``box`` and n-1 copies shifted by up to 8 % and scaled by 0.9-1.1 (clipped to the image)."""
    from cbcl_pr_ros.perception import clip_box

    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    out = [tuple(box)]
    while len(out) < n:
        s = rng.uniform(0.9, 1.1)
        cx, cy = (x0 + x1) / 2 + rng.uniform(-0.08, 0.08) * w, (y0 + y1) / 2 + rng.uniform(-0.08, 0.08) * h
        b = clip_box((cx - s * w / 2, cy - s * h / 2, cx + s * w / 2, cy + s * h / 2), shape)
        if b is not None:
            out.append(b)
    return out


def _confidence_quality(pairs: list[tuple[float, bool]], bins: int = 10) -> dict:
    """Does the confidence mean something? ECE of the best class's confidence (10 equal-width bins) and
    the share of (wrong, right) answer pairs where the wrong one is less confident."""
    if not pairs:
        return {}
    conf = np.array([c for c, _ in pairs])
    ok = np.array([r for _, r in pairs], float)
    idx = np.minimum((conf * bins).astype(int), bins - 1)
    ece = sum(abs(conf[idx == b].mean() - ok[idx == b].mean()) * (idx == b).mean() for b in range(bins) if (idx == b).any())
    right, wrong = conf[ok > 0], conf[ok == 0]
    ranked = float((wrong[:, None] < right[None, :]).mean()) if len(right) and len(wrong) else float("nan")
    return {"ece": round(float(ece), 3), "wrong_below_right_pairs": round(ranked, 3),
            "mean_confidence": round(float(conf.mean()), 3), "accuracy": round(float(ok.mean()), 3), "n": len(pairs)}


def _background_boxes(frame, n: int, rng) -> list[tuple[int, int, int, int]]:
    """Up to ``n`` random boxes, sized like the frame's objects, holding at most 20 % of any labelled
    object's area: crops of table and background, the robot's free negatives."""
    from cbcl_pr_ros.perception import clip_box

    h, w = frame.rgb.shape[:2]
    sizes = [(b[2] - b[0], b[3] - b[1]) for _, b in frame.objects]
    out: list = []
    for _ in range(50 * n):
        if len(out) >= n:
            break
        bw, bh = sizes[int(rng.integers(len(sizes)))]
        s = rng.uniform(0.8, 1.5)
        bw, bh = min(w - 1, int(bw * s)), min(h - 1, int(bh * s))
        x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
        b = clip_box((x0, y0, x0 + bw, y0 + bh), frame.rgb.shape)
        if b is None:
            continue
        inside = [max(0, min(b[2], o[2]) - max(b[0], o[0])) * max(0, min(b[3], o[3]) - max(b[1], o[1]))
                  / ((o[2] - o[0]) * (o[3] - o[1])) for _, o in frame.objects]
        if max(inside) <= 0.2:
            out.append(b)
    return out


def _auroc(pos, neg) -> float:
    """P(a taught view's gate distance < a never-taught one's), ties half."""
    return auroc(neg, pos)


# the negatives a learner is given (``stream`` variants of bench_recognition):
#   none            : no negatives (the gate of factor * D_gate alone)
#   teaching_frames : the other objects of the teaching frames and background crops of them
#   stream          : background crops of every frame and every view of the "seen" untaught instances
#   second_frames   : as teaching_frames, from the teaching frame and the next frame each taught instance
#                     is seen in (the robot looks around once more; the taught instance is no negative)
# never the instances the rejection is tested on as "unseen"
NEGATIVE_STREAMS = ("none", "teaching_frames", "second_frames", "stream")


def _plain_crops(fr, boxes) -> list[np.ndarray]:
    """The labelled boxes cropped as they are (table, floor and neighbours included)."""
    from cbcl_pr_ros.perception import crop_images
    from cbcl_pr_ros.perception.types import Proposal

    props = [Proposal(tuple(int(v) for v in b), None, np.full(3, np.nan), np.full(3, np.nan), 1.0) for b in boxes]
    return crop_images(fr.rgb, props)


class MaskedCrops:
    """The labelled boxes cropped as the extractor crops a proposal: pixels outside the object's mask set
    to the neutral colour (``perception.crop_images``). The mask is the one the node would have: the
    depth proposal matching the box (IoU >= 0.5), else the proposals' foreground inside the box, else
    none (``perception.mask_for_box``); ``sources`` counts which."""

    def __init__(self) -> None:
        self._props: dict = {}
        self.sources: dict = defaultdict(int)

    def __call__(self, fr, boxes) -> list[np.ndarray]:
        from cbcl_pr_ros.perception import crop_images, mask_for_box, propose
        from cbcl_pr_ros.perception.types import Proposal

        if fr.id not in self._props:
            self._props[fr.id] = propose(fr.rgb, fr.depth_m, fr.intrinsics)
        out = []
        for b in boxes:
            mask, source = mask_for_box(self._props[fr.id], b, fr.rgb.shape)
            self.sources[source] += 1
            box = tuple(int(v) for v in b)
            # a mask comes only from proposals found with depth: the crop carries a (placeholder) 3D centroid
            centre = np.zeros(3) if mask is not None else np.full(3, np.nan)
            out += crop_images(fr.rgb, [Proposal(box, mask, centre, np.full(3, np.nan), 1.0)])
        return out


def bench_recognition(frames, seeds: int, shots_list=(1, 5), streams=NEGATIVE_STREAMS,
                      config_overrides: dict | None = None, backbone: str = "efficientnet_lite0",
                      crops=_plain_crops, flip: bool = False, grow: bool = False) -> dict:
    """Taught instances from other views and never-taught ones rejected, per negatives stream.

    ``grow``: the negatives store carries over from table to table (sources in a fixed order, per
    seed), as a robot's lifelong store does; the classes are still taught afresh at each table.
    Without it each table starts with an empty store."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.features import make_backbone

    bb = make_backbone(backbone, runtime="onnx", threads=2)

    def feats(fr, boxes):
        images = crops(fr, boxes)
        f = np.asarray(bb.extract(images), np.float32)
        if flip:
            f = (f + np.asarray(bb.extract([np.ascontiguousarray(x[:, ::-1]) for x in images]), np.float32)) / 2
        return f

    # features of every labelled object once, and of a dozen background crops per frame
    obj_feats = {fr.id: feats(fr, [b for _, b in fr.objects]) for fr in frames}
    bg_feats = {fr.id: feats(fr, _background_boxes(fr, 12, np.random.default_rng([i, 4242])))
                for i, fr in enumerate(frames)}
    over = dict(config_overrides or {})
    by_source = defaultdict(list)
    for fr in frames:
        by_source[fr.source].append(fr)
    results = {}
    conf_pairs: dict = defaultdict(list)
    for shots, stream in [(s, v) for s in shots_list for v in streams]:
        agg, pooled = defaultdict(list), defaultdict(list)
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            carried: list[np.ndarray] = []  # negatives offered at the earlier tables (grow only)
            for source, frs in by_source.items():
                seen = defaultdict(list)
                for fr in frs:
                    for name, _ in fr.objects:
                        if fr.id not in seen[name]:
                            seen[name].append(fr.id)
                multi = sorted(n for n, ids in seen.items() if len(ids) >= 2)
                if len(multi) < 2:
                    continue
                taught = {str(x) for x in rng.permutation(multi)[: max(1, len(multi) // 2)]}
                # the never-taught instances: half may be seen as negatives, the other half never is
                rest = sorted(n for n in seen if n not in taught)
                seen_neg = {str(x) for x in np.random.default_rng([seed, 7]).permutation(rest)[: len(rest) // 2]}
                teach_frame, shots_of = {}, {}
                for name in sorted(taught):
                    fid = seen[name][0]
                    fr = next(f for f in frs if f.id == fid)
                    box = next(b for n, b in fr.objects if n == name)
                    shots_of[name] = feats(fr, _jitter_boxes(box, fr.rgb.shape, shots, rng))
                    teach_frame[name] = fid
                learner = CBCLPRLearner(LearnerConfig(seed=seed, **over), backbone=backbone,
                                        feature_dim=next(iter(shots_of.values())).shape[1])
                learner.teach_increment(shots_of)
                neg_ids = set(teach_frame.values())
                if stream == "second_frames":
                    neg_ids |= {seen[name][1] for name in taught}
                from_frames = [f for f in frs if stream == "stream" or f.id in neg_ids]
                negatives = [bg_feats[f.id] for f in from_frames if stream != "none"] + \
                    [obj_feats[f.id][[i for i, (n, _) in enumerate(f.objects) if n in seen_neg]]
                     for f in from_frames if stream != "none"]
                negatives = [x for x in negatives if len(x)]
                if grow:
                    negatives, carried = carried + negatives, carried + negatives
                if negatives:
                    learner.add_negatives(np.concatenate(negatives))
                    agg["negatives_kept"].append(len(learner.negatives_))
                dist = defaultdict(list)
                for fr in frs:
                    X = obj_feats[fr.id]
                    preds = learner.predict(X, top_k=1)
                    for (name, _), pr in zip(fr.objects, preds):
                        if name in taught:
                            if fr.id == teach_frame[name]:
                                continue  # the teaching view itself
                            agg["taught_correct"].append(pr.known and pr.label == name)
                            agg["taught_best_correct"].append(pr.nearest_label == name)
                            agg["taught_accepted"].append(bool(pr.known))
                            conf_pairs[shots, stream].append((float(pr.confidence), pr.nearest_label == name))
                            dist["taught"].append(pr.distance)
                        else:
                            agg["untaught_rejected"].append(not pr.known)
                            part = "seen" if name in seen_neg else "unseen"
                            agg[f"untaught_{part}_rejected"].append(not pr.known)
                            dist[part].append(pr.distance)
                for part in ("seen", "unseen"):
                    agg[f"auroc_distance_taught_vs_{part}"].append(_auroc(dist["taught"], dist[part]))
                    pooled[part] += dist[part]
                pooled["taught"] += dist["taught"]
        key = f"{shots}_shot" + ("" if stream == "none" else f"_negatives_{stream}") + \
            ("_grown" if grow and stream != "none" else "")
        results[key] = {k: round(float(np.nanmean(v)), 3) for k, v in agg.items()} | \
            {f"n_{k}": len(v) for k, v in agg.items() if not k.startswith(("auroc", "negatives"))}
        results[key]["confidence"] = _confidence_quality(conf_pairs[shots, stream])
        # the best any threshold on this distance could do: never-taught rejected at 90 % of taught accepted
        thr = float(np.quantile(pooled["taught"], 0.9)) if pooled["taught"] else float("nan")
        for part in ("seen", "unseen"):
            rejected = float(np.mean(np.asarray(pooled[part]) > thr))
            results[key][f"untaught_{part}_rejected_at_90_accepted"] = round(rejected, 3)
        log.info("%s: %s", key, results[key])
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")))
    ap.add_argument("--pictures", default=str(out_path("real_pictures")),
                    help="write per-frame pictures with boxes here (git-ignored: the frames may not be redistributed); \"\" = none")
    ap.add_argument("--skip-recognition", action="store_true")
    ap.add_argument("--skip-loso", action="store_true", help="no leave-one-source-out choice of the height test")
    ap.add_argument("--loso-also", nargs="*", default=[], metavar="KEY=V1,V2",
                    help="more settings leave-one-source-out chooses among, beside the height test's, e.g. "
                         "unseen_ring_share=0,0.6: whether the other sources would turn a rule on")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rendered-seeds", type=int, default=3, help="rendered tables checked (0 = none)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="ProposalConfig overrides for both methods, e.g. depth_edges=grey fold_turn=0 (ProposalRules names too)")
    ap.add_argument("--out", default=str(out_path("real.json")))
    ap.add_argument("--ransac-seeds", default="0",
                    help="comma-separated RANSAC seeds of the depth proposals; the first gives the full report, "
                         "all of them the per-seed figures and their spread, e.g. 0,1,2,3")
    ap.add_argument("--only-recognition", action="store_true",
                    help="recognition and the open-set gate only, written to --gate-out")
    ap.add_argument("--gate-out", default=str(out_path("real_gate.json")))
    ap.add_argument("--shots", default="1,5", help="shot counts of the recognition test")
    ap.add_argument("--crops", choices=("masked", "plain"), default="masked",
                    help="recognition crops: masked as the extractor crops depth proposals (default), or plain boxes")
    ap.add_argument("--flip", action="store_true",
                    help="average each crop's vector with its mirror image's (two backbone passes; not shipped)")
    ap.add_argument("--grow", choices=("no", "yes", "both"), default="both",
                    help="negatives store: fresh at each table (no), carried over from table to table as a "
                         "robot's lifelong store (yes), or both reported")
    ap.add_argument("--learner", nargs="*", default=[], metavar="KEY=VALUE",
                    help="LearnerConfig overrides for recognition, e.g. negative_margin=0.9")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cv2.setNumThreads(1)
    from cbcl_pr_ros.perception import ProposalConfig

    overrides = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        overrides[k] = json.loads(v) if v[:1] in "-0123456789[tfn" else v
    learner_over = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.learner)}
    frames = load_frames(args.labels, args.frames)
    load0 = os.getloadavg()
    crops = MaskedCrops() if args.crops == "masked" else _plain_crops
    if args.only_recognition:
        t0 = time.perf_counter()
        res = {"benchmark": "bench_real --only-recognition", "machine": machine_info(),
               "loadavg_before": [round(v, 2) for v in load0], "frames": len(frames), "seeds": args.seeds,
               "learner_overrides": learner_over,
               "protocol": "per source: half of the instances seen in 2+ frames taught from their first frame; "
                           "the never-taught ones split in half (seeded): 'seen' may be given as negatives, "
                           "'unseen' never is; negatives streams: " + ", ".join(NEGATIVE_STREAMS) +
                           "; '_grown': the store carried over from table to table (sources in order), a robot's "
                           "lifelong store; otherwise a fresh store at each table",
               "crops": args.crops + (" + mirror averaging" if args.flip else ""),
               "recognition": {},
               "seconds": None, "loadavg_after": None}
        for grow in {"no": (False,), "yes": (True,), "both": (False, True)}[args.grow]:
            streams = NEGATIVE_STREAMS if not grow else NEGATIVE_STREAMS[1:]
            res["recognition"] |= bench_recognition(frames, args.seeds, tuple(int(v) for v in args.shots.split(",")),
                                                    streams, config_overrides=learner_over, crops=crops,
                                                    flip=args.flip, grow=grow)
        res["seconds"] = round(time.perf_counter() - t0, 1)
        res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
        if isinstance(crops, MaskedCrops):
            res["mask_sources"] = dict(crops.sources)
        Path(args.gate_out).write_text(json.dumps(res, indent=1) + "\n")
        return
    seeds = [int(v) for v in args.ransac_seeds.split(",")]
    if len(seeds) > 1 and "seed" in overrides:
        ap.error("give the seeds either with --ransac-seeds or with --set seed=N, not both")
    overrides.setdefault("seed", seeds[0])
    res = {"benchmark": "bench_real", "machine": machine_info(), "loadavg_before": [round(v, 2) for v in load0],
           "frames": len(frames), "objects": sum(len(f.objects) for f in frames),
           "sources": sorted({f.source for f in frames}),
           "config_overrides": overrides,
           "proposals": bench_proposals(frames, lambda m: ProposalConfig.with_overrides(method=m, **overrides),
                                        Path(args.pictures) if args.pictures else None)}
    res["bad_frames"] = bad_frames(frames, ProposalConfig.with_overrides(method="auto", **overrides))
    log.info("bad frames: %s", res["bad_frames"])
    if not args.skip_loso:
        grid = dict(LOSO_GRID)
        for kv in args.loso_also:
            k, v = kv.split("=", 1)
            grid[k] = tuple(json.loads(x) for x in v.split(","))
        res["leave_one_source_out"] = leave_one_source_out(frames, overrides, grid)
        for src, v in res["leave_one_source_out"]["per_source"].items():
            log.info("held out %s: %s -> %s", src, v["chosen_on_the_others"], v["held_out"])
    if len(seeds) > 1:
        res["ransac_seeds"] = seed_spread(frames, seeds, overrides, res["proposals"]["depth"])
        log.info("RANSAC seeds: %s", res["ransac_seeds"]["spread"])
    if args.rendered_seeds > 0:
        res["rendered"] = rendered_recall(ProposalConfig.with_overrides(method="depth", **overrides), args.rendered_seeds)
        log.info("rendered: %s", res["rendered"])
    if not args.skip_recognition:
        res["crops"] = args.crops
        res["recognition"] = bench_recognition(frames, args.seeds, crops=crops, flip=args.flip)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res["proposals"]["depth"].items() if k != "per_frame"}, indent=1))
    print(json.dumps({k: v for k, v in res["proposals"]["rgb"].items() if k not in ("per_frame", "per_source")}))


if __name__ == "__main__":
    main()
