"""Taught objects found where the proposals miss them: proposals only vs proposals + the window search.

On the real RGB-D set (``bench/real_rgbd/labels.json``), per source (table) and seed, as
``bench_first_shot.py``: half of the instances seen in two or more frames are taught from their
first frame (1 shot: the labelled box, cropped and masked as the extractor crops a proposal); the
learner's negatives are the other objects of the teaching frames. On every other frame of that
source each taught instance standing there is a *target*:

* **proposals only**: found when a shipped depth proposal (``perception.propose``, the first 16, as
  the extractor keeps) matches its labelled box and the learner names that proposal's crop right
  (known, the instance's name);
* **proposals + search**: also found when ``objects.taught_search.search_taught`` (searching the
  taught classes no proposal of the frame was named as) returns a box of that name matching it.

Two match rules, both reported: ``iou50`` (IoU >= 0.5 with the labelled box) and ``centre`` (the
found box's centre inside the labelled box: the windows' boxes are coarser than a proposal's mask).
**False finds**: search boxes that match no labelled instance of their class by that rule, per
frame, split by where their centre lies: on the right object with too loose a box (``loose_box``,
iou50 only), on another taught object, on a never-taught one, on background.

Variants (``VARIANTS``): the shipped ``SearchSettings`` (windows of 0.15-0.4 of the shorter side, two
refinement rounds); larger windows (0.25-0.6) with one round, two rounds, one round and the box
fitted to the depth surface; smaller windows (0.1-0.28). ``MAP_VARIANTS``: the shipped and the
larger windows scored from EfficientNet-Lite0's dense feature map of the whole frame (PyTorch, the
frame's shorter side at ``MAP_SHORT_SIDE``, each window the mean of the cells under it; only the
refinements are cropped). Each is run at every ``min_confidence`` of
``GRID``. The choice is made **leave-one-source-out**, per
variant and over all of them (``any``), per match rule: for each source, the setting with the
highest recall on the *other* sources among those whose false finds there stay at or below
``FALSE_CAP`` per frame and that find more than the proposals alone (else the search is off for
that source), scored on the held-out one. Every setting's figures over all sources are also given
(``sweep_all_sources_not_a_result``): chosen on themselves, they are not results.

Time: CPU milliseconds of one search per frame (process time, ONNX Runtime on one thread, the
backbone uncached) on the first frame of each source, per variant, and the backbone images it took.
Backbone vectors are cached by crop content in ``--cache`` for the recall figures (the same crop
gives the same vector). Run:

    source scripts/env.sh && python -P bench/bench_taught_search.py   # -> runs/bench/taught_search.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # bench_common
from bench_common import out_path  # noqa: E402

GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
FALSE_CAP = 0.1  # false finds per frame the choice allows on the other sources
LARGE = {"scales": (0.25, 0.4, 0.6), "max_windows": 64, "refine": 1}
VARIANTS = {"large_windows": LARGE, "large_windows_refine2": LARGE | {"refine": 2},
            "large_windows_depth_fit": LARGE | {"fit_depth": True}, "shipped": {},
            "smaller_windows": {"scales": (0.1, 0.17, 0.28), "max_windows": 160}}
#: variants whose windows are scored from the backbone's dense map of the whole frame (refinements cropped)
MAP_VARIANTS = {"dense_map": {}, "dense_map_large_windows": LARGE}
MAP_SHORT_SIDE = 448  # the frame's shorter side for the dense map (14 cells of 32 pixels)
KINDS = ("loose_box", "taught_other", "never_taught", "background")
MAX_PROPOSALS = 16  # the extractor's max_objects default


class CachedBackbone:
    """A backbone whose vectors are kept by crop content: the same pixels give the same vector."""

    def __init__(self, backbone, path: Path) -> None:
        self.backbone, self.path = backbone, path
        self.store: dict = pickle.loads(path.read_bytes()) if path.exists() else {}
        self.computed = 0

    @staticmethod
    def _key(img: np.ndarray) -> bytes:
        return hashlib.sha1(np.ascontiguousarray(img).tobytes() + str(img.shape).encode()).digest()

    def extract(self, images) -> np.ndarray:
        keys = [self._key(im) for im in images]
        todo = [i for i, k in enumerate(keys) if k not in self.store]
        if todo:
            vecs = self.backbone.extract([images[i] for i in todo])
            for i, v in zip(todo, vecs):
                self.store[keys[i]] = np.asarray(v, np.float32)
            self.computed += len(todo)
        return np.stack([self.store[k] for k in keys]) if keys else np.empty((0, 1280), np.float32)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(pickle.dumps(self.store))


def _centre_in(box, target) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return target[0] <= cx < target[2] and target[1] <= cy < target[3]


def _match(box, target, rule: str) -> bool:
    from cbcl_pr_ros.perception.boxes import box_iou

    return box_iou(box, target) >= 0.5 if rule == "iou50" else _centre_in(box, target)


class DenseMap:
    """EfficientNet-Lite0's (1280, rows, cols) feature map of a whole frame, before pooling (PyTorch,
    one thread): the frame resized to ``MAP_SHORT_SIDE`` on its shorter side, sides multiples of 32."""

    def __init__(self) -> None:
        import torch

        from cbcl_pr_ros.features.backbones import build_torch_model, resolve_weights

        torch.set_num_threads(1)
        self.torch = torch
        self.model, _ = build_torch_model("efficientnet_lite0", resolve_weights("efficientnet_lite0"))

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        import cv2

        h, w = rgb.shape[:2]
        k = MAP_SHORT_SIDE / min(h, w)
        size = (max(32, int(round(w * k / 32)) * 32), max(32, int(round(h * k / 32)) * 32))
        x = (cv2.resize(rgb, size, interpolation=cv2.INTER_AREA).astype(np.float32) - 127.0) / 128.0  # Lite0's spec
        with self.torch.no_grad():
            return self.model.net.extract_features(self.torch.from_numpy(x.transpose(2, 0, 1)[None].copy()))[0].numpy()


def prepare(frames, bb) -> dict:
    """Per frame: the proposals, their masked crops' vectors, the labelled boxes' teaching vectors and
    the dense feature map."""
    from bench_real import MaskedCrops

    from cbcl_pr_ros.perception import crop_images, propose

    crops, out, dense = MaskedCrops(), {}, DenseMap()
    for fr in frames:
        props = propose(fr.rgb, fr.depth_m, fr.intrinsics)[:MAX_PROPOSALS]
        pf = bb.extract(crop_images(fr.rgb, props, 0.1, mask_background=True)) if props else np.empty((0, 1280))
        teach = bb.extract(crops(fr, [b for _, b in fr.objects]))
        out[fr.id] = dict(props=props, prop_feats=pf, teach=teach, map=dense(fr.rgb))
    return out


def teach(frames, prep, seed: int):
    """The learner of one source and seed, the taught names and each one's teaching frame (None when the
    source has fewer than two instances seen twice)."""
    from bench_first_shot import taught_split

    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    split = taught_split([{"id": f.id, "names": [n for n, _ in f.objects]} for f in frames], seed)
    if split is None:
        return None
    seen, taught = split
    shots, teach_frame, negs = {}, {}, []
    for name in sorted(taught):
        f = next(f for f in frames if f.id == seen[name][0])
        k = [n for n, _ in f.objects].index(name)
        shots[name] = prep[f.id]["teach"][k:k + 1]
        teach_frame[name] = f.id
    for f in frames:
        if f.id in teach_frame.values():
            rows = [i for i, (n, _) in enumerate(f.objects) if n not in taught]
            if rows:
                negs.append(prep[f.id]["teach"][rows])
    learner = CBCLPRLearner(LearnerConfig(seed=seed), backbone="efficientnet_lite0", feature_dim=1280)
    learner.teach_increment(shots)
    if negs:
        learner.add_negatives(np.concatenate(negs))
    return learner, taught, teach_frame


def score_frame(fr, prep, learner, taught, teach_frame, bb, settings_list) -> dict:
    """Counts of one frame: targets, found by proposals, found with the search (per setting and rule),
    false finds by kind."""
    from cbcl_pr_ros.objects.taught_search import search_taught

    p = prep[fr.id]
    preds = learner.predict(p["prop_feats"], top_k=1) if len(p["props"]) else []
    named = {q.label for q in preds if q.known}
    targets = [(n, b) for n, b in fr.objects if n in taught and teach_frame[n] != fr.id]
    out: dict = defaultdict(int)
    out["frames"] = 1
    out["targets"] = len(targets)
    props_found = {}
    for rule in ("iou50", "centre"):
        props_found[rule] = {n for n, b in targets for pr, q in zip(p["props"], preds)
                             if q.known and q.label == n and _match(pr.box, b, rule)}
        out[f"{rule}/found_props"] = len(props_found[rule])
        out[f"{rule}/false_names_props"] = sum(
            1 for pr, q in zip(p["props"], preds) if q.known
            and not any(n == q.label and _match(pr.box, b, rule) for n, b in fr.objects))
    out["located_props"] = sum(any(_match(pr.box, b, "iou50") for pr in p["props"]) for _, b in targets)
    search_for = sorted(set(taught) - named)
    for tag, s, use_map in settings_list:
        finds = search_taught(fr.rgb, bb, lambda x: learner.predict(x, top_k=1), search_for, p["props"],
                              fr.depth_m, fr.intrinsics, s, p["map"] if use_map else None)
        out[f"{tag}/finds"] = len(finds)
        out[f"{tag}/finds_with_3d"] = sum(bool(np.all(np.isfinite(f.centroid))) for f in finds)
        for rule in ("iou50", "centre"):
            got = set(props_found[rule])
            for f in finds:
                hit = [n for n, b in fr.objects if n == f.label and _match(f.box, b, rule)]
                if hit:
                    got.add(f.label)
                    continue
                on = [n for n, b in fr.objects if _centre_in(f.box, b)]
                kind = ("background" if not on else "loose_box" if f.label in on
                        else "taught_other" if any(n in taught for n in on) else "never_taught")
                out[f"{tag}/{rule}/false_{kind}"] += 1
                out[f"{tag}/{rule}/false"] += 1
            out[f"{tag}/{rule}/found"] = len(got & {n for n, _ in targets})
    return out


def figures(c: dict, tag: str, rule: str) -> dict:
    """Recall of the targets with proposals only and with the search (setting ``tag``), false finds."""
    g = lambda k: c.get(k, 0)  # noqa: E731
    t, fr = max(g("targets"), 1), max(g("frames"), 1)
    return {"targets": g("targets"), "frames": g("frames"),
            "recall_proposals": round(g(f"{rule}/found_props") / t, 3),
            "recall_with_search": round(g(f"{tag}/{rule}/found") / t, 3),
            "false_finds_per_frame": round(g(f"{tag}/{rule}/false") / fr, 3),
            "false_finds": {k: g(f"{tag}/{rule}/false_{k}") for k in KINDS},
            "located_by_proposals": round(g("located_props") / t, 3),
            "proposal_false_names_per_frame": round(g(f"{rule}/false_names_props") / fr, 3)}


def add(into: dict, c: dict) -> None:
    for k, v in c.items():
        into[k] = into.get(k, 0) + v


RULES = ("iou50", "centre")


def loso(counts: dict, tags: list[str], rule: str) -> dict:
    """Leave-one-source-out: per held-out source, the setting among ``tags`` with the highest recall on
    the other sources among those whose false finds there stay within ``FALSE_CAP`` per frame and
    that find more than the proposals alone (else the search is off), scored on the held-out one."""
    per, pooled = {}, {}
    for held in sorted(counts):
        others: dict = {}
        for s, c in counts.items():
            if s != held:
                add(others, c)
        ok = [(figures(others, t, rule), t) for t in tags]
        ok = [(f["recall_with_search"], -i, t) for i, (f, t) in enumerate(ok)
              if f["false_finds_per_frame"] <= FALSE_CAP and f["recall_with_search"] > f["recall_proposals"]]
        chosen = max(ok)[2] if ok else None
        c = counts[held]
        keep = {k: c.get(k, 0) for k in ("targets", "frames", "located_props", f"{rule}/found_props",
                                          f"{rule}/false_names_props")}
        if chosen is None:  # the search off: what the proposals found, no false finds
            mine = {"held/" + rule + "/found": c.get(f"{rule}/found_props", 0)}
        else:
            mine = {f"held/{rule}/{k}": c.get(f"{chosen}/{rule}/{k}", 0)
                    for k in ("found", "false", *(f"false_{x}" for x in KINDS))}
        add(pooled, keep | mine)
        per[held] = {"chosen": chosen, **figures(keep | mine, "held", rule)}
    return {"per_source": per, "pooled": figures(pooled, "held", rule)}


def time_search(frames, prep, settings: dict) -> dict:
    """CPU ms of one uncached search per frame (first frame of each source) per named (setting, from
    the dense map): the learner of seed 0 of its source; every taught class not named by a proposal
    searched; with the map, its forward pass included."""
    from cbcl_pr_ros.features import make_backbone
    from cbcl_pr_ros.objects.taught_search import search_taught

    bb = make_backbone("efficientnet_lite0", runtime="onnx", threads=1)
    bb.extract([frames[0].rgb[:64, :64]])  # warm
    dense = DenseMap()

    class Counting:
        images = 0

        def extract(self, images):
            Counting.images += len(images)
            return bb.extract(images)

    by_source = defaultdict(list)
    for f in frames:
        by_source[f.source].append(f)
    out: dict = {}
    for src, frs in sorted(by_source.items()):
        taught = teach(frs, prep, 0)
        if taught is None:
            continue
        learner, names, _ = taught
        fr, p = frs[0], prep[frs[0].id]
        named = {q.label for q in learner.predict(p["prop_feats"], top_k=1) if q.known} if len(p["props"]) else set()
        for name, (s, use_map) in settings.items():
            Counting.images = 0
            t0 = time.process_time()
            fmap = dense(fr.rgb) if use_map else None  # the map's forward pass counts
            search_taught(fr.rgb, Counting(), lambda x: learner.predict(x, top_k=1), sorted(set(names) - named),
                          p["props"], fr.depth_m, fr.intrinsics, s, fmap)
            out.setdefault(name, {})[fr.id] = {"cpu_ms": round(1000 * (time.process_time() - t0), 1),
                                              "backbone_images": Counting.images, "image": list(fr.rgb.shape[:2])}
    return {name: {"per_frame": v, "median_cpu_ms": round(float(np.median([x["cpu_ms"] for x in v.values()])), 1),
                   "max_cpu_ms": round(float(max(x["cpu_ms"] for x in v.values())), 1)} for name, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")))
    ap.add_argument("--cache", default=str(ROOT / "cache/taught_search_vectors.pkl"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--skip-time", action="store_true")
    ap.add_argument("--sources", default="", help="comma-separated sources (default: all)")
    ap.add_argument("--out", default=str(out_path("taught_search.json")))
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from real_rgbd_set import load_frames

    from cbcl_pr_ros.evaluation.experiments import machine_info
    from cbcl_pr_ros.features import make_backbone
    from cbcl_pr_ros.objects.taught_search import SearchSettings

    t0, load0 = time.perf_counter(), os.getloadavg()
    ids = None
    if args.sources:
        ids = [f["id"] for f in json.loads(Path(args.labels).read_text())["frames"]
               if f["source"] in args.sources.split(",")]
    frames = load_frames(args.labels, args.frames, ids)
    bb = CachedBackbone(make_backbone("efficientnet_lite0", runtime="onnx", threads=1), Path(args.cache))
    prep = prepare(frames, bb)
    base = SearchSettings()
    settings_list = [(f"{name}/{v}", replace(base, min_confidence=v, **over), name in MAP_VARIANTS)
                     for name, over in (VARIANTS | MAP_VARIANTS).items() for v in GRID]
    by_source = defaultdict(list)
    for f in frames:
        by_source[f.source].append(f)
    counts: dict = {}  # source -> counts summed over seeds and frames
    for src, frs in sorted(by_source.items()):
        c: dict = {}
        for seed in range(args.seeds):
            taught = teach(frs, prep, seed)
            if taught is None:
                continue
            learner, names, teach_frame = taught
            for fr in frs:
                add(c, score_frame(fr, prep, learner, names, teach_frame, bb, settings_list))
        if c:
            counts[src] = c
            print(src, json.dumps(figures(c, "shipped/0.8", "centre")), flush=True)
        bb.save()
    res: dict = {"benchmark": "bench_taught_search", "machine": machine_info(),
                 "loadavg_before": [round(v, 2) for v in load0], "seeds": args.seeds, "grid": list(GRID),
                 "variants": VARIANTS, "map_variants": MAP_VARIANTS, "map_short_side": MAP_SHORT_SIDE,
                 "false_cap_per_frame": FALSE_CAP,
                 "settings": {k: getattr(base, k) for k in base.__dataclass_fields__},
                 "backbone_vectors_computed": bb.computed}
    total: dict = {}
    for c in counts.values():
        add(total, c)
    res["sweep_all_sources_not_a_result"] = {tag: {rule: figures(total, tag, rule) for rule in RULES}
                                             for tag, _, _ in settings_list}
    res["leave_one_source_out"] = {}
    for name in [*VARIANTS, *MAP_VARIANTS, "any"]:
        tags = [t for t, _, _ in settings_list if name == "any" or t.startswith(name + "/")]
        res["leave_one_source_out"][name] = {rule: loso(counts, tags, rule) for rule in RULES}
        print("loso", name, json.dumps({r: v["pooled"] for r, v in res["leave_one_source_out"][name].items()}),
              flush=True)
    if not args.skip_time:
        res["time_per_frame"] = time_search(frames, prep, {n: (replace(base, **o), n in MAP_VARIANTS)
                                                           for n, o in (VARIANTS | MAP_VARIANTS).items()})
        print("time", json.dumps({n: {k: v for k, v in t.items() if k != "per_frame"}
                                  for n, t in res["time_per_frame"].items()}), flush=True)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
