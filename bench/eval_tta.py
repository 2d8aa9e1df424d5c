"""Test-time augmentation of the crop features: does averaging views of one crop help the open-set gate?

On the real RGB-D set (``bench_first_shot.py``'s frames and masked crops), each object's Lite0 vector
is replaced by the mean of the vectors of:

* ``mirror``: the masked crop and its horizontal mirror (2 backbone passes per object);
* ``mirror_scales``: the crop at context margins 0.1 (the shipped crop) and 0.25 of the box's
  longer side, each with its mirror (4 passes).

Measured per variant beside the shipped vector (``lite0``), 1 shot, the shipped veto rule:

* the AUROC of the gate distance, taught instances' other views vs never-taught objects, per source
  (``eval_adapter.py``'s protocol: the teaching frame's other objects as negatives, 5 seeds), with
  a paired bootstrap of the difference; leave-one-source-out, the variant chosen by pooled AUROC on
  the other sources and scored on the held-out one;
* ``bench_first_shot.py``'s figures: teaching-frame protocol (negatives ``frames``) and stream
  protocol (negatives ``frames+stream_covisible``), per source and all;
* the backbone time per object of each variant (ms, batch per frame, 2 threads, with the load);
* with ``--accuracy``, the benchmark sets' 1/5-shot accuracy with mirror-averaged vectors.

Only the shot (first-frame) vectors change; the jittered copies stay as cached, so shots > 1 are not
compared. The variant vectors are cached in ``--tta-cache``. Run:

    source scripts/env.sh && python -P bench/eval_tta.py   # -> runs/bench/eval_tta.json
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_common import out_path  # noqa: E402

MARGINS = (0.1, 0.25)
VARIANTS = {"lite0": (("m0.1", False),), "mirror": (("m0.1", False), ("m0.1", True)),
            "mirror_scales": tuple((f"m{m}", f) for m in MARGINS for f in (False, True))}


def masked_crops(fr, props, margin: float) -> list[np.ndarray]:
    """The labelled boxes cropped as ``bench_real.MaskedCrops`` does, at context ``margin``."""
    from cbcl_pr_ros.perception import crop_images, mask_for_box
    from cbcl_pr_ros.perception.types import Proposal

    out = []
    for _, b in fr.objects:
        mask, _ = mask_for_box(props, b, fr.rgb.shape)
        centre = np.zeros(3) if mask is not None else np.full(3, np.nan)
        out += crop_images(fr.rgb, [Proposal(tuple(int(v) for v in b), mask, centre, np.full(3, np.nan), 1.0)],
                           margin=margin)
    return out


def build_tta_cache(labels: str, frames_dir: str, path: Path) -> dict:
    """Per frame id, the vectors of every object's crop at each margin, plain and mirrored; and the
    backbone seconds spent on each kind of crop."""
    from real_rgbd_set import load_frames
    from cbcl_pr_ros.features import make_backbone
    from cbcl_pr_ros.perception import propose

    bb = make_backbone("efficientnet_lite0", runtime="onnx", threads=2)
    vecs, secs, n = {}, defaultdict(float), 0
    for fr in load_frames(labels, frames_dir):
        props = propose(fr.rgb, fr.depth_m, fr.intrinsics)
        row = {}
        for m in MARGINS:
            crops = masked_crops(fr, props, m)
            for flip in (False, True):
                imgs = [np.ascontiguousarray(c[:, ::-1]) for c in crops] if flip else crops
                t = time.perf_counter()
                row[(f"m{m}", flip)] = np.asarray(bb.extract(imgs), np.float32)
                secs[(f"m{m}", flip)] += time.perf_counter() - t
        vecs[fr.id] = row
        n += len(fr.objects)
    out = {"vecs": vecs, "seconds": {f"{k[0]}{'_flip' if k[1] else ''}": v for k, v in secs.items()}, "objects": n,
           "loadavg": [round(v, 2) for v in os.getloadavg()]}
    path.write_bytes(pickle.dumps(out))
    return out


def variant_frames(data: list[dict], tta: dict, views) -> list[dict]:
    """The cached frames with each object's vector the mean of ``views``' vectors."""
    return [f | {"obj": np.mean([tta["vecs"][f["id"]][v] for v in views], axis=0).astype(np.float32)}
            for f in data]


def by_source(frs: list[dict]) -> dict:
    out = defaultdict(list)
    for f in frs:
        out[f["source"]].append(f)
    return out


def first_shot_figures(src_frames: dict, seeds: int, stream_seeds: int) -> dict:
    """bench_first_shot's 1-shot figures with the shipped rule, all sources and per source."""
    import bench_first_shot as bfs

    keys = ("taught_correct", "taught_accepted", "untaught_rejected")
    out = {}
    for protocol, negatives, n in (("teaching_frame", "frames", seeds), ("stream", "frames+stream_covisible", stream_seeds)):
        per = {(src, s): bfs.run_source(frs, s, 1, None, protocol, negatives)
               for src, frs in src_frames.items() for s in range(n)}
        summ = bfs.summary(list(per.values()))
        out[f"{protocol}/{negatives}"] = {k: summ.get(k) for k in keys} | {
            "per_source": {src: {k: bfs.summary([v for (s2, _), v in per.items() if s2 == src]).get(k) for k in keys}
                           for src in src_frames}}
    return out


def accuracy(names: list[str], seeds: int, shots_list=(1, 5)) -> dict:
    """The benchmark sets' few-shot accuracy (bench_accuracy.py's protocol, no teach-time views) with
    each image's vector and with the mean of it and its mirror's, paired by seed."""
    from dataclasses import replace

    import bench_accuracy as ba

    out = {}
    for name in names:
        f = ba.load_features(name, str(ROOT / "data"), str(ROOT / "cache/eval"), flips=True)
        fs, fl = f["fs"], f["flip"]
        fm = replace(fs, train_x=(fs.train_x + fl.train_x) / 2, test_x=(fs.test_x + fl.test_x) / 2)
        for shots in shots_list:
            raw = [ba.run_learner(fs, shots, s, {"teach_views": 0})["acc"] for s in range(seeds)]
            mir = [ba.run_learner(fm, shots, s, {"teach_views": 0})["acc"] for s in range(seeds)]
            out[f"{name}_{shots}_shot"] = {"lite0": round(float(np.mean(raw)), 4), "mirror": round(float(np.mean(mir)), 4),
                                           "mirror_minus_lite0": round(float(np.mean(np.subtract(mir, raw))), 4)}
            print(name, shots, out[f"{name}_{shots}_shot"], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")))
    ap.add_argument("--cache", default=str(ROOT / "cache/real_first_shot.pkl"))
    ap.add_argument("--tta-cache", default=str(ROOT / "cache/real_tta.pkl"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stream-seeds", type=int, default=10)
    ap.add_argument("--accuracy", default="", help="benchmark sets, comma-separated ('' for none)")
    ap.add_argument("--acc-seeds", type=int, default=3)
    args = ap.parse_args()
    from eval_adapter import auroc_table, paired_bootstrap
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.evaluation.experiments import machine_info

    t0 = time.perf_counter()
    data = pickle.loads(Path(args.cache).read_bytes())
    tp = Path(args.tta_cache)
    tta = pickle.loads(tp.read_bytes()) if tp.exists() else build_tta_cache(args.labels, args.frames, tp)
    res = {"benchmark": "eval_tta", "machine": machine_info(), "loadavg_before": [round(v, 2) for v in os.getloadavg()],
           "seeds": args.seeds, "stream_seeds": args.stream_seeds, "objects": tta["objects"],
           "cache_build_loadavg": tta["loadavg"]}
    # the shipped crop recomputed here must be the cached vector (same crops, same backbone)
    res["shipped_crop_max_abs_diff"] = float(max(np.abs(tta["vecs"][f["id"]][("m0.1", False)] - f["obj"]).max() for f in data))
    per_pass = {k: 1000 * v / tta["objects"] for k, v in tta["seconds"].items()}
    res["backbone_ms_per_object"] = {name: round(sum(per_pass[f"{m}{'_flip' if fl else ''}"] for m, fl in views), 1)
                                     for name, views in VARIANTS.items()}
    print("ms/object", res["backbone_ms_per_object"], "shipped-crop diff", res["shipped_crop_max_abs_diff"], flush=True)

    def learner(seed, *a, **k):
        return CBCLPRLearner(LearnerConfig(seed=seed), backbone="efficientnet_lite0", feature_dim=1280)

    tables, srcs = {}, None
    for name, views in VARIANTS.items():
        frs = by_source(variant_frames(data, tta, views))
        srcs = list(frs)
        tables[name] = auroc_table(frs, args.seeds, learner)
        res[name] = {"auroc": {s: {k: v for k, v in r.items() if not k.startswith("_")} for s, r in tables[name].items()}}
        if name != "lite0":
            res[name]["auroc_minus_lite0"] = paired_bootstrap(tables["lite0"], tables[name])
        res[name]["first_shot_1_shot"] = first_shot_figures(frs, args.seeds, args.stream_seeds)
        print(name, json.dumps(res[name]), flush=True)
    # leave-one-source-out: the variant with the best pooled gate AUROC on the other sources
    from eval_adapter import _auroc

    def pooled(name, keep):
        t = tables[name]
        return _auroc(sum((t[s]["_pos"] for s in t if s != "all" and keep(s)), []),
                      sum((t[s]["_neg"] for s in t if s != "all" and keep(s)), []))

    loso = {}
    for held in srcs:
        if held not in tables["lite0"]:
            continue
        pick = max(VARIANTS, key=lambda v: pooled(v, lambda s: s != held))
        loso[held] = {"chosen": pick, "held_out_auroc": round(pooled(pick, lambda s: s == held), 3),
                      "lite0_held_out_auroc": round(pooled("lite0", lambda s: s == held), 3)}
    res["loso_variant"] = loso
    print("loso", json.dumps(loso), flush=True)
    if args.accuracy:
        res["accuracy"] = accuracy(args.accuracy.split(","), args.acc_seeds)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    path = out_path("eval_tta.json")
    Path(path).write_text(json.dumps(res, indent=1) + "\n")
    print("->", path)


if __name__ == "__main__":
    main()
