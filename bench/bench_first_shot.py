"""From the first shot: taught objects named, never-taught ones unknown, on real tables (real RGB-D set).

Per source (table) and seed, as ``bench_real.py``'s recognition test: half of the instances seen in two
or more frames are taught from their first frame (1 shot = the labelled box; 5 / 10 shots = the box
and shifted/scaled copies of it, one view), and every object of the other frames is classified. The
learner's negatives are what a robot has at the teach: the *other objects of the teaching frames*
(no background crops, nothing from other frames). Figures: taught correct (known and named right),
taught accepted, never-taught rejected (all; and split into those that stood in a teaching frame and
those never seen), and the confidence: ECE and the share of (wrong, right) answer pairs where the wrong
one is less confident, over every classified object (a never-taught object's best class is wrong).

Leave-one-source-out: the gate's veto ratio (``negatives.VETO``) is chosen on the three other sources
(the largest never-taught rejection with >= 0.90 taught accepted at 1 shot) and scored on the held-out
one; the fixed shipped value is reported beside it.

Features are EfficientNet-Lite0 (ONNX) of masked crops, cached in ``--cache`` (a pickle of vectors,
rebuilt when missing). Run:

    source scripts/env.sh && python -P bench/bench_first_shot.py   # -> bench/results/first_shot.json
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
sys.path.insert(0, str(ROOT / "bench"))  # bench_common
from bench_common import out_path  # noqa: E402

VETOS = (0.9, 0.95, 1.0, 1.02, 1.03, 1.05, 1.07, 1.1)


def build_cache(labels: str, frames_dir: str, path: Path) -> list[dict]:
    """Vectors of every labelled object's masked crop and of 9 jittered copies of each box, per frame."""
    from bench_real import MaskedCrops, _jitter_boxes

    from cbcl_pr_ros.evaluation.real_rgbd import load_frames
    from cbcl_pr_ros.features import make_backbone

    bb = make_backbone("efficientnet_lite0", runtime="onnx", threads=2)
    crops, out = MaskedCrops(), []
    for i, fr in enumerate(load_frames(labels, frames_dir)):
        obj = np.asarray(bb.extract(crops(fr, [b for _, b in fr.objects])), np.float32)
        jit = []
        for k, (_, b) in enumerate(fr.objects):
            boxes = _jitter_boxes(b, fr.rgb.shape, 10, np.random.default_rng([i, k, 99]))[1:]
            jit.append(np.asarray(bb.extract(crops(fr, boxes)), np.float32))
        out.append(dict(id=fr.id, source=fr.source, names=[n for n, _ in fr.objects], obj=obj, jit=np.stack(jit)))
    path.write_bytes(pickle.dumps(out))
    return out


def _conf_quality(conf: list[float], right: list[bool], bins: int = 10) -> dict:
    c, ok = np.asarray(conf), np.asarray(right, float)
    if not len(c):
        return {}
    idx = np.minimum((c * bins).astype(int), bins - 1)
    ece = sum(abs(c[idx == b].mean() - ok[idx == b].mean()) * (idx == b).mean()
              for b in range(bins) if (idx == b).any())
    r, w = c[ok > 0], c[ok == 0]
    pairs = float((w[:, None] < r[None, :]).mean()) if len(r) and len(w) else float("nan")
    return {"ece": round(float(ece), 3), "wrong_below_right_pairs": round(pairs, 3),
            "mean_confidence": round(float(c.mean()), 3), "right": round(float(ok.mean()), 3), "n": len(c)}


def taught_split(frs: list[dict], seed: int) -> tuple[dict, set[str]] | None:
    """The frames each instance stands in, and the half of the instances seen in two or more frames
    that a seed teaches (None when fewer than two such instances)."""
    rng = np.random.default_rng(seed)
    seen: dict = defaultdict(list)
    for f in frs:
        for n in f["names"]:
            if f["id"] not in seen[n]:
                seen[n].append(f["id"])
    multi = sorted(n for n, ids in seen.items() if len(ids) >= 2)
    if len(multi) < 2:
        return None
    return seen, {str(x) for x in rng.permutation(multi)[: max(1, len(multi) // 2)]}


def run_source(frs: list[dict], seed: int, shots: int, veto: float | None) -> dict:
    """One table, one seed: the per-object outcomes (lists of booleans and confidences)."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    import cbcl_pr_ros.core.learner as learner_mod

    out: dict = defaultdict(list)
    split = taught_split(frs, seed)
    if split is None:
        return out
    seen, taught = split
    shots_of, teach_frame = {}, {}
    for name in sorted(taught):
        f = next(f for f in frs if f["id"] == seen[name][0])
        k = f["names"].index(name)
        shots_of[name] = np.concatenate([f["obj"][k:k + 1], f["jit"][k][: shots - 1]])
        teach_frame[name] = f["id"]
    if veto is not None and hasattr(learner_mod, "VETO"):
        learner_mod.VETO = veto
    learner = CBCLPRLearner(LearnerConfig(seed=seed), backbone="efficientnet_lite0", feature_dim=1280)
    learner.teach_increment(shots_of)
    in_teach = set()
    negs = []
    for f in frs:
        if f["id"] in teach_frame.values():
            rows = [i for i, n in enumerate(f["names"]) if n not in taught]
            in_teach |= {f["names"][i] for i in rows}
            if rows:
                negs.append(f["obj"][rows])
    if negs:
        learner.add_negatives(np.concatenate(negs))
    out["negatives_kept"].append(len(learner.negatives_))
    for f in frs:
        preds = learner.predict(f["obj"], top_k=1)
        for name, p in zip(f["names"], preds):
            if name in taught and f["id"] == teach_frame[name]:
                continue
            right = name in taught and p.nearest_label == name
            out["conf"].append(float(p.confidence))
            out["conf_right"].append(bool(right))
            if name in taught:
                out["taught_correct"].append(bool(p.known and p.label == name))
                out["taught_accepted"].append(bool(p.known))
                out["taught_best_correct"].append(bool(right))
            else:
                out["untaught_rejected"].append(not p.known)
                part = "in_teaching_frame" if name in in_teach else "never_seen"
                out[f"untaught_{part}_rejected"].append(not p.known)
    return out


def summary(parts: list[dict]) -> dict:
    agg: dict = defaultdict(list)
    for p in parts:
        for k, v in p.items():
            agg[k] += v
    res = {k: round(float(np.mean(v)), 3) for k, v in agg.items() if k not in ("conf", "conf_right") and v}
    res |= {f"n_{k}": len(v) for k, v in agg.items() if k.startswith(("taught", "untaught"))}
    res["confidence"] = _conf_quality(agg["conf"], agg["conf_right"])
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=str(ROOT / "data/real_rgbd"))
    ap.add_argument("--cache", default=str(ROOT / "cache/real_first_shot.pkl"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--shots", default="1,5,10")
    ap.add_argument("--out", default=str(out_path("first_shot.json")))
    ap.add_argument("--no-loso", action="store_true", help="the shipped rule only (also for a tree without the veto)")
    args = ap.parse_args()
    t0, load0 = time.perf_counter(), os.getloadavg()
    cache = Path(args.cache)
    if cache.exists():
        data = pickle.loads(cache.read_bytes())
    else:
        cache.parent.mkdir(parents=True, exist_ok=True)
        data = build_cache(args.labels, args.frames, cache)
    by_source = defaultdict(list)
    for f in data:
        by_source[f["source"]].append(f)
    import cbcl_pr_ros.core.learner as learner_mod
    shipped = getattr(learner_mod, "VETO", None)
    from cbcl_pr_ros.evaluation.experiments import machine_info
    res: dict = {"benchmark": "bench_first_shot", "machine": machine_info(),
                 "loadavg_before": [round(v, 2) for v in os.getloadavg()], "seeds": args.seeds,
                 "shipped_veto": shipped, "results": {}}
    for shots in (int(s) for s in args.shots.split(",")):
        per = {(src, seed): run_source(frs, seed, shots, shipped) for src, frs in by_source.items()
               for seed in range(args.seeds)}
        res["results"][f"{shots}_shot"] = summary(list(per.values())) | {
            "per_source": {src: summary([v for (s, _), v in per.items() if s == src]) for src in by_source}}
        print(shots, "shipped", json.dumps(res["results"][f"{shots}_shot"]), flush=True)
    if not args.no_loso and shipped is not None:
        sweep = {v: {(src, seed): run_source(frs, seed, 1, v) for src, frs in by_source.items()
                     for seed in range(args.seeds)} for v in VETOS}
        learner_mod.VETO = shipped
        held, chosen = [], {}
        for src in by_source:
            def score(v):
                s = summary([x for (s2, _), x in sweep[v].items() if s2 != src])
                ok = s.get("taught_accepted", 0) >= 0.90
                return (ok, s.get("untaught_rejected", 0) if ok else s.get("taught_accepted", 0))
            best = max(VETOS, key=score)
            chosen[src] = best
            held += [x for (s2, _), x in sweep[best].items() if s2 == src]
        res["results"]["1_shot_loso"] = summary(held) | {"veto_chosen": chosen}
        res["results"]["1_shot_veto_sweep"] = {str(v): {k: w for k, w in summary(list(sweep[v].values())).items()
                                                         if not k.startswith("n_")} for v in VETOS}
        print("loso", json.dumps(res["results"]["1_shot_loso"]), flush=True)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
