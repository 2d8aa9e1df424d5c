"""Two identical objects side by side: does "pieces joined by recognition" make them one? (issue 20)

The learner joins two touching proposals when their union looks at least as much like the larger
piece's class as the larger piece alone (``objects.pieces.recognised_joins``). Since
``PiecePolicy.join_slack`` the union may also lie up to 3 % *farther* from the class when the smaller piece is
named that class too. That tolerance was meant for one object cut in two; the case it could
break is two copies of one object touching: both pieces carry the same name, and two mugs may be
only a little less "mug" than one. This bench measures how often that happens, without ROS:

1. One rendered table (``robot.scenes.table_world``), the learner built as the learner node builds
   it from ``config/cbcl_pr.yaml`` (``learner_factory`` in a RAM-only ``LearnerController``), the
   extractor's backbone, proposals, candidate pairs and crops (the same functions, shipped settings).
   Every catalogue category is taught from 5 views of one copy alone on the table (camera 0.43 m
   above it, azimuth varied by up to 20 degrees): the proposal best matching the object's
   ground-truth box, cropped as the extractor crops it, ``controller.teach(category, rows)`` (the
   object-in-view path: one shot per view, no teach-time views, no negatives).
2. For each category, two copies of the same instance are put side by side, touching (the
   distance at which their 3D convex hulls meet, less 3 mm), along lines at 0, 45, 90 and 135
   degrees, both at yaw 0; one overview frame from 0.43 m above the table, 0.15 m back.
3. Each proposal belongs to the copy covering most of its mask, or to both where it holds 30 % or
   more of each copy's visible pixels (the proposer already made them one); every candidate pair
   (``join_candidates`` 3) is a *twin* pair (one piece of each copy), a *same-object* pair (two
   pieces of one copy) or another (a piece holding both copies, or one of neither). Pieces and
   unions are classified in one batch (top-k = all classes, as the object stream does) and each
   pair is judged by the *strict* rule (union known as the larger piece's class and nearer it than
   that piece) and the *shipped* rule (``recognised_joins``, nothing held).

Writes runs/bench/twin_joins.json. Run:
``source scripts/env.sh && python -P bench/bench_twin_joins.py [--seeds 0 1 2 3] [--out PATH]``.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("bench_twin_joins")

CAMERA_HEIGHT_M = 0.43  # above the table top, as the main job's overview
CAMERA_BACK_M = 0.15  # horizontal offset of the eye from the target
TEACH_AZIMUTHS_DEG = (-20.0, -10.0, 0.0, 10.0, 20.0)  # around "from the robot's side" (-x)
DIRECTIONS_DEG = (0.0, 45.0, 90.0, 135.0)  # yaw of the line joining the twins
OVERLAP_M = 0.003  # the twins are put this much closer than where their hulls meet
MERGED_SHARE = 0.3  # a proposal holding >= this share of each copy's visible pixels holds both


# ---------------------------------------------------------------- the shipped pieces
class Pipeline:
    """The extractor's backbone, crop settings and join check, and the learner node's controller."""

    def __init__(self, threads: int = 1) -> None:
        from cbcl_pr_ros.bags.offline_eval import learner_params
        from cbcl_pr_ros.features import make_backbone
        from dataclasses import replace

        from cbcl_pr_ros.objects.pieces import PIECES
        from cbcl_pr_ros.service.controller import LearnerController
        from cbcl_pr_ros.settings.params import feature_dim_for, learner_factory

        p = learner_params()  # defaults, then config/cbcl_pr.yaml (extractor and learner sections)
        self.params = p
        self.backbone = make_backbone(p["backbone"], runtime=p["runtime"], threads=threads, device="cpu",
                                      precision=p["precision"])
        self.controller = LearnerController(make_learner=learner_factory(p), backbone=p["backbone"],
                                            feature_dim=feature_dim_for(p), store=None,
                                            cluster_budget=p["max_clusters"])
        self.policy = replace(PIECES, join_candidates=int(p["join_candidates"]))
        self.margin, self.mask = float(p["crop_margin"]), bool(p["mask_crops"])
        self.max_objects = int(p["max_objects"])

    def proposals(self, frame: Any) -> tuple[list, list[tuple[int, int]], list]:
        """As ``objects.extract.frame_proposals``: proposals, candidate pairs and their unions."""
        from cbcl_pr_ros.objects.pieces import candidate_pairs, union_proposal
        from cbcl_pr_ros.perception import CameraIntrinsics, propose

        K = CameraIntrinsics.from_k(frame.K)
        props = propose(frame.rgb, frame.depth, K)[:self.max_objects]
        pairs = candidate_pairs(props, frame.depth, K, self.policy)
        return props, pairs, [union_proposal(props[i], props[j]) for i, j in pairs]

    def features(self, rgb: np.ndarray, proposals: list) -> np.ndarray:
        """Vectors of the proposals' crops, cropped as the extractor crops them (no mirror averaging)."""
        from cbcl_pr_ros.perception import crop_images

        if not proposals:
            return np.zeros((0, self.controller.feature_dim), np.float32)
        crops = crop_images(rgb, proposals, self.margin, mask_background=self.mask)
        return np.asarray(self.backbone.extract(crops), np.float32)

    def classify(self, rows: np.ndarray) -> list:
        """Core predictions of ``rows``, top-k over every class as the object stream asks."""
        out = self.controller.classify(rows, top_k=len(self.controller.classes))
        if not out.success:
            raise RuntimeError(f"classify failed: {out.message}")
        return list(out.predictions)


# ---------------------------------------------------------------- geometry and camera
def _obj_vertices(path: str) -> np.ndarray:
    """The ``v`` lines of an OBJ mesh, (n, 3)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return np.array([[float(v) for v in ln.split()[1:4]] for ln in fh if ln.startswith("v ")], float)


def body_points(obj: Any) -> np.ndarray:
    """Hull vertices of a placed object's mesh in its body frame (yaw 0), scaled and centred as
    ``SimWorld._visual`` places the mesh; checked against the object's half extents."""
    from scipy.spatial import ConvexHull

    from cbcl_pr_ros.robot.world import quaternion_to_matrix
    import pybullet as pb

    inst = obj.instance
    model = inst.model
    v = _obj_vertices(str(model.mesh_path()))
    R = quaternion_to_matrix(pb.getQuaternionFromEuler(model.up_euler))
    lo, hi = v.min(0), v.max(0)
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]) @ R.T
    s = model.size_m / float((corners.max(0) - corners.min(0)).max()) * inst.scale
    centre = (corners.min(0) + corners.max(0)) * s / 2
    pts = (v @ R.T) * s - centre
    half = (pts.max(0) - pts.min(0)) / 2
    if not np.allclose(half, obj.half_extents, atol=1e-4):
        raise RuntimeError(f"{inst.name}: mesh extent {half} differs from the world's {obj.half_extents}")
    return pts[ConvexHull(pts).vertices]


def touching_distance(points: np.ndarray, yaw: float, direction: float, most: int = 400) -> float:
    """Centre distance along ``direction`` (radians) at which two copies of the convex hull of
    ``points`` (both rotated by ``yaw``) meet: the radial extent of the difference body K - K."""
    from scipy.spatial import ConvexHull

    c, s = math.cos(yaw), math.sin(yaw)
    pts = points @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]).T
    if len(pts) > most:
        pts = pts[np.linspace(0, len(pts) - 1, most).astype(int)]
    diff = (pts[:, None, :] - pts[None, :, :]).reshape(-1, 3)
    eq = ConvexHull(diff).equations  # n . x + b <= 0 inside, n outward
    u = np.array([math.cos(direction), math.sin(direction), 0.0])
    nu = eq[:, :3] @ u
    ok = nu > 1e-12
    return float(np.min(-eq[ok, 3] / nu[ok]))


def look(world: Any, target_xy: np.ndarray, azimuth_deg: float = 0.0) -> Any:
    """Render from 0.43 m above the table, 0.15 m back from ``target_xy`` (from -x, turned by
    ``azimuth_deg``), looking at the table top there."""
    z = world.config.table_height
    target = np.array([target_xy[0], target_xy[1], z])
    az = math.pi + math.radians(azimuth_deg)
    eye = target + np.array([CAMERA_BACK_M * math.cos(az), CAMERA_BACK_M * math.sin(az), CAMERA_HEIGHT_M])
    world.set_free_camera(eye, target)
    return world.render()


# ---------------------------------------------------------------- teaching
def best_proposal(props: list, box: tuple[int, int, int, int]) -> int | None:
    """Index of the proposal whose box best matches ``box`` (IoU), None when none overlaps it."""
    from cbcl_pr_ros.perception import box_iou

    ious = [box_iou(p.box, box) for p in props]
    return int(np.argmax(ious)) if ious and max(ious) > 0 else None


def teach_category(pipe: Pipeline, world: Any, category: str, seed: int) -> dict:
    """Teach ``category`` from 5 views of copy 0 alone at the table's centre; what was taught."""
    from cbcl_pr_ros.perception import box_iou
    from cbcl_pr_ros.robot.scenes import ground_truth

    world.clear_objects()
    centre = np.asarray(world.config.table_center, float)
    obj = world.place(category, 0, f"{category}_teach", xy=centre, yaw=0.0, seed=seed)
    rows, ious = [], []
    for az in TEACH_AZIMUTHS_DEG:
        frame = look(world, centre, az)
        truth = [o for o in ground_truth(world, frame, 1) if o.name == obj.name]
        props, _, _ = pipe.proposals(frame)
        k = best_proposal(props, truth[0].box) if truth else None
        if k is None:
            continue
        ious.append(round(box_iou(props[k].box, truth[0].box), 3))
        rows.append(pipe.features(frame.rgb, [props[k]])[0])
    world.clear_objects()
    if not rows:
        return {"taught": False, "views": 0}
    out = pipe.controller.teach(category, np.stack(rows))
    return {"taught": bool(out.success), "views": len(rows), "iou": ious, "message": out.message}


# ---------------------------------------------------------------- twin scenes
def place_twins(world: Any, category: str, seed: int, direction_deg: float,
                points: dict[str, np.ndarray]) -> tuple[np.ndarray, float]:
    """Two copies of instance 0 touching along ``direction_deg`` around the table's centre, yaw 0;
    (their midpoint, centre distance)."""
    world.clear_objects()
    mid = np.asarray(world.config.table_center, float)
    a = world.place(category, 0, f"{category}_a", xy=mid, yaw=0.0, seed=seed)
    if category not in points:
        points[category] = body_points(a)
    th = math.radians(direction_deg)
    d = touching_distance(points[category], 0.0, th) - OVERLAP_M
    u = np.array([math.cos(th), math.sin(th)])
    world.move_object(a.name, mid - u * d / 2, 0.0)
    world.place(category, 0, f"{category}_b", xy=mid + u * d / 2, yaw=0.0, seed=seed)
    return mid, d


def owners(frame: Any, props: list, names: tuple[str, str]) -> tuple[list[int], bool]:
    """Per proposal: -2 where it holds both copies (>= MERGED_SHARE of each copy's visible pixels),
    else 0 or 1 (the copy covering most of its mask) or -1 (none); and whether any holds both."""
    seg = frame.segmentation
    ids = [frame.object_names.index(n) for n in names]
    visible = [max(1, int((seg == i).sum())) for i in ids]
    out, merged = [], False
    for p in props:
        if p.mask is None:
            out.append(-1)
            continue
        inside = seg[p.mask]
        n = max(1, inside.size)
        counts = [int((inside == i).sum()) for i in ids]
        best = int(np.argmax(counts))
        both = all(c >= MERGED_SHARE * v for c, v in zip(counts, visible))
        out.append(-2 if both else best if counts[best] > n / 2 else -1)
        merged |= both
    return out, merged


def _pred(pr: Any) -> dict:
    return {"label": pr.label, "known": bool(pr.known), "nearest": pr.nearest_label,
            "distance": round(float(pr.distance), 4)}


def strict_join(pair: tuple[int, int], props: list, pieces: list, union: Any) -> bool:
    """The rule before the join slack: union known as the larger piece's class and nearer it."""
    from cbcl_pr_ros.objects.pieces import _volume

    i, j = pair
    big = i if _volume(props[i]) >= _volume(props[j]) else j
    p = pieces[big]
    return bool(p.known and union.known and union.label == p.label
                and math.isfinite(float(p.distance)) and float(union.distance) < float(p.distance))


def twin_scene(pipe: Pipeline, world: Any, category: str, seed: int, direction_deg: float,
               points: dict[str, np.ndarray]) -> dict:
    """One twin scene: its frame's proposals, candidate pairs, predictions and both rules' joins."""
    from cbcl_pr_ros.objects.pieces import _volume, recognised_joins

    mid, d = place_twins(world, category, seed, direction_deg, points)
    frame = look(world, mid)
    names = (f"{category}_a", f"{category}_b")
    props, pairs, unions = pipe.proposals(frame)
    own, merged = owners(frame, props, names)
    scene = {"category": category, "direction_deg": direction_deg, "centre_distance_m": round(d, 4),
             "proposals": len(props), "owners": own, "merged_proposal": merged,
             "both_separate": 0 in own and 1 in own, "pairs": []}
    if not pairs:
        return scene
    preds = pipe.classify(pipe.features(frame.rgb, [*props, *unions]))
    pieces, union_preds = preds[:len(props)], preds[len(props):]
    shipped = set(recognised_joins(pairs, props, pieces, union_preds, held=()))
    for k, (i, j) in enumerate(pairs):
        big, small = (i, j) if _volume(props[i]) >= _volume(props[j]) else (j, i)
        a, b = own[i], own[j]
        kind = ("twin" if {a, b} == {0, 1} else "same_object" if a == b and a >= 0
                else "with_both_copies_piece" if -2 in (a, b) else "other")
        ratio = float(union_preds[k].distance) / float(pieces[big].distance)
        scene["pairs"].append({
            "pair": [i, j], "kind": kind, "larger": _pred(pieces[big]), "smaller": _pred(pieces[small]),
            "union": _pred(union_preds[k]), "union_over_larger": round(ratio, 4),
            "strict": strict_join((i, j), props, pieces, union_preds[k]), "shipped": k in shipped})
    return scene


def _ratios(values: list[float]) -> dict:
    vals = sorted(v for v in values if math.isfinite(v))
    if not vals:
        return {"n": 0}
    return {"n": len(vals), "min": round(vals[0], 4), "median": round(float(np.median(vals)), 4),
            "max": round(vals[-1], 4), "list": [round(v, 4) for v in vals]}


def summarise(scenes: list[dict]) -> dict:
    """The counts the report asks for, over every scene."""
    pairs = [p for s in scenes for p in s["pairs"]]
    twins = [p for p in pairs if p["kind"] == "twin"]
    same = [p for p in pairs if p["kind"] == "same_object"]
    other = [p for p in pairs if p["kind"] not in ("twin", "same_object")]
    alike = [p for p in twins if p["larger"]["known"] and p["smaller"]["known"]
             and p["larger"]["label"] == p["smaller"]["label"]]
    return {
        "scenes": len(scenes),
        "frames_both_copies_separate": sum(s["both_separate"] for s in scenes),
        "frames_copies_in_one_proposal": sum(s["merged_proposal"] for s in scenes),
        "twin_pairs": len(twins),
        "twin_pairs_joined_strict": sum(p["strict"] for p in twins),
        "twin_pairs_joined_shipped": sum(p["shipped"] for p in twins),
        "twin_pairs_both_pieces_named_alike": len(alike),
        "twin_joined_shipped_only": [f"{s['category']}@{s['direction_deg']:g}" for s in scenes for p in s["pairs"]
                                     if p["kind"] == "twin" and p["shipped"] and not p["strict"]],
        "same_object_pairs": len(same),
        "same_object_joined_strict": sum(p["strict"] for p in same),
        "same_object_joined_shipped": sum(p["shipped"] for p in same),
        "other_pairs": len(other),  # a piece holding both copies, or of neither copy
        "other_joined_strict": sum(p["strict"] for p in other),
        "other_joined_shipped": sum(p["shipped"] for p in other),
        "twin_union_over_larger": _ratios([p["union_over_larger"] for p in twins]),
        "twin_named_alike_union_over_larger": _ratios([p["union_over_larger"] for p in alike]),
        "same_object_union_over_larger": _ratios([p["union_over_larger"] for p in same]),
    }


def run(seed: int, threads: int) -> dict:
    """Teach every category, then every twin scene; the JSON report."""
    from cbcl_pr_ros.evaluation.experiments import machine_info
    from cbcl_pr_ros.objects.pieces import PIECES
    from cbcl_pr_ros.robot.assets import CATALOGUE
    from cbcl_pr_ros.robot.scenes import table_world

    t0 = time.perf_counter()
    pipe = Pipeline(threads)
    world = table_world(seed)
    taught, scenes, points = {}, [], {}
    try:
        for cat in sorted(CATALOGUE):
            taught[cat] = teach_category(pipe, world, cat, seed)
        log.info("taught %d of %d categories (%.0f s)", sum(t["taught"] for t in taught.values()),
                 len(taught), time.perf_counter() - t0)
        for cat in sorted(CATALOGUE):
            mine = [twin_scene(pipe, world, cat, seed, deg, points) for deg in DIRECTIONS_DEG]
            scenes += mine
            tw = [p for s in mine for p in s["pairs"] if p["kind"] == "twin"]
            log.info("%-13s separate %d/4, merged %d, twin pairs %d (strict %d, shipped %d), ratios %s, "
                     "same-object pairs %d (%.0f s)", cat, sum(s["both_separate"] for s in mine),
                     sum(s["merged_proposal"] for s in mine), len(tw), sum(p["strict"] for p in tw),
                     sum(p["shipped"] for p in tw), [p["union_over_larger"] for p in tw],
                     sum(p["kind"] == "same_object" for s in mine for p in s["pairs"]), time.perf_counter() - t0)
    finally:
        world.close()
    p = pipe.params
    return {
        "summary": summarise(scenes),
        "settings": {"seed": seed, "join_slack": PIECES.join_slack, "join_candidates": p["join_candidates"],
                     "backbone": p["backbone"], "runtime": p["runtime"], "threads": threads,
                     "crop_margin": p["crop_margin"], "mask_crops": p["mask_crops"],
                     "camera": {"height_m": CAMERA_HEIGHT_M, "back_m": CAMERA_BACK_M,
                                "teach_azimuths_deg": list(TEACH_AZIMUTHS_DEG)},
                     "directions_deg": list(DIRECTIONS_DEG), "overlap_m": OVERLAP_M, "merged_share": MERGED_SHARE,
                     "teaching": "controller.teach(category, rows): one row per view, no teach-time views, "
                                 "no negatives"},
        "taught": taught,
        "scenes": scenes,
        "machine": machine_info(),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    """Parse the arguments, run each seed, print the summaries and write the JSON (one run per seed
    and the summary over all of them)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="world and instance seeds")
    ap.add_argument("--threads", type=int, default=1, help="backbone CPU threads")
    ap.add_argument("--out", type=Path, default=out_path("twin_joins.json"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    log.setLevel(logging.INFO)  # this bench's progress; the learner's per-teach lines stay quiet
    runs = {str(seed): run(seed, args.threads) for seed in args.seeds}
    total = summarise([sc for r in runs.values() for sc in r["scenes"]])
    for name, s in [*((f"seed {k}", r["summary"]) for k, r in runs.items()), ("all seeds", total)]:
        print(name, json.dumps({k: v for k, v in s.items() if not k.endswith("over_larger")}))
        for key in ("twin_union_over_larger", "twin_named_alike_union_over_larger", "same_object_union_over_larger"):
            r = s[key]
            print(f"  {key}: n={r['n']} min={r.get('min')} median={r.get('median')} max={r.get('max')}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": total, "runs": runs}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
