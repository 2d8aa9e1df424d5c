"""Does the trained instance adapter (bench/train_adapter.py) help the open-set gate on real crops?

On the real RGB-D set's cached Lite0 vectors (``bench_first_shot.py``'s cache: masked crops of every
labelled object and jittered copies), with and without the adapter:

* AUROC of the gate distance, taught instances' other views vs never-taught objects, per source
  (``bench_first_shot.py``'s protocol: half of the multi-frame instances taught from their first
  frame, 1 shot, the teaching frame's other objects as negatives, 5 seeds), and the same for a plain
  learner-free score (cosine distance to the nearest taught shot);
* ``bench_first_shot.py``'s figures (1/5/10 shots with the shipped veto; 1 shot leave-one-source-out).

The adapted space gets the learner's "l2" transform (the adapter's output is already L2-normalised)
and the gate prior measured on the renders (the training log's ``distance_prior_adapted``).
Needs ``cache/real_first_shot.pkl`` (``bench_first_shot.py`` builds it from ``data/real_rgbd``) and,
for the accuracy check, the benchmark sets under ``data/`` (their Lite0 vectors are cached in
``cache/eval``). Run after training:

    source scripts/env.sh && python -P bench/eval_adapter.py   # -> runs/bench/eval_adapter_<adapter>.json
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
from bench_common import auroc  # noqa: E402


def load_adapter(path: Path):
    """The adapter module and its training log."""
    import torch
    from safetensors.numpy import load_file

    from train_adapter import build

    log = json.loads(path.with_suffix(".json").read_text())
    a = log["args"]
    model = build(a["arch"], a["dim"], a["hidden"])
    model.load_state_dict({k: torch.from_numpy(v) for k, v in load_file(str(path)).items()})
    model.eval()
    return model, log


def concat(model, X: np.ndarray) -> np.ndarray:
    """The transformed Lite0 vector and the adapted one side by side, equal weight, L2-normalised."""
    from train_adapter import adapt, tukey_l2

    return np.hstack([tukey_l2(np.asarray(X, np.float32)), adapt(model, X)]) / np.sqrt(2.0)


def adapted_frames(data: list[dict], model, adapt=None) -> list[dict]:
    if adapt is None:
        from train_adapter import adapt

    out = []
    for f in data:
        j = f["jit"]
        out.append(f | {"obj": adapt(model, f["obj"]),
                        "jit": adapt(model, j.reshape(-1, j.shape[-1])).reshape(j.shape[0], j.shape[1], -1)})
    return out


def _auroc(pos, neg) -> float:
    """P(a taught view's gate distance < a never-taught one's), ties half."""
    return auroc(neg, pos)


def distances(frs: list[dict], seed: int, make_learner) -> dict:
    """Gate distance and cosine-to-nearest-shot of taught (other views) and never-taught objects."""
    from bench_first_shot import taught_split

    out: dict = defaultdict(list)
    split = taught_split(frs, seed)
    if split is None:
        return out
    seen, taught = split
    shots, teach_frame = {}, {}
    for name in sorted(taught):
        f = next(f for f in frs if f["id"] == seen[name][0])
        shots[name] = f["obj"][f["names"].index(name)][None]
        teach_frame[name] = f["id"]
    learner = make_learner(seed)
    learner.teach_increment(shots)
    negs = [f["obj"][[i for i, n in enumerate(f["names"]) if n not in taught]] for f in frs if f["id"] in teach_frame.values()]
    negs = [x for x in negs if len(x)]
    if negs:
        learner.add_negatives(np.concatenate(negs))
    S = np.concatenate(list(shots.values()))
    S = S / np.linalg.norm(S, axis=1, keepdims=True)
    for f in frs:
        preds = learner.predict(f["obj"], top_k=1)
        X = f["obj"] / np.linalg.norm(f["obj"], axis=1, keepdims=True)
        cos = 1.0 - (X @ S.T).max(axis=1)
        for name, p, c in zip(f["names"], preds, cos):
            if name in taught and f["id"] == teach_frame[name]:
                continue
            key = "taught" if name in taught else "untaught"
            out[key].append(float(p.distance))
            out[key + "_cos"].append(float(c))
    return out


def auroc_table(by_source: dict, seeds: int, make_learner) -> dict:
    """Per source: the mean over seeds of each seed's AUROC, and the AUROC of all seeds' distances
    pooled; ``all``: every source and seed pooled."""
    res, pool = {}, defaultdict(list)
    for src, frs in by_source.items():
        runs = [distances(frs, s, make_learner) for s in range(seeds)]
        if not any(r["taught"] for r in runs):
            continue
        row = {}
        for k, suf in (("gate_distance", ""), ("cosine_nearest_shot", "_cos")):
            per = [_auroc(r["taught" + suf], r["untaught" + suf]) for r in runs if r["taught" + suf]]
            pos = sum((r["taught" + suf] for r in runs), [])
            neg = sum((r["untaught" + suf] for r in runs), [])
            pool[k + "_pos"] += pos
            pool[k + "_neg"] += neg
            row[k] = round(float(np.nanmean(per)), 3)
            row[k + "_pooled"] = round(_auroc(pos, neg), 3)
        row["n_taught_views"], row["n_untaught"] = len(pos), len(neg)
        row["_pos"], row["_neg"] = sum((r["taught"] for r in runs), []), sum((r["untaught"] for r in runs), [])
        res[src] = row
    res["all"] = {k: round(_auroc(pool[k + "_pos"], pool[k + "_neg"]), 3) for k in ("gate_distance", "cosine_nearest_shot")}
    return res


def paired_bootstrap(a: dict, b: dict, n: int = 1000, seed: int = 0, score=_auroc) -> dict:
    """AUROC(b) - AUROC(a) of the gate distance per source, with a 90 % interval from resampling the
    same objects in both spaces (the lists are aligned: same frames, seeds and taught sets); ``score``
    computes the AUROC of (taught, never-taught) distances."""
    rng, out = np.random.default_rng(seed), {}
    for src in a:
        if src == "all" or src not in b:
            continue
        pa, na, pb, nb = (np.asarray(x) for x in (a[src]["_pos"], a[src]["_neg"], b[src]["_pos"], b[src]["_neg"]))
        diffs = []
        for _ in range(n):
            i, j = rng.integers(0, len(pa), len(pa)), rng.integers(0, len(na), len(na))
            diffs.append(score(pb[i], nb[j]) - score(pa[i], na[j]))
        out[src] = {"diff": round(score(pb, nb) - score(pa, na), 3),
                    "p05": round(float(np.percentile(diffs, 5)), 3), "p95": round(float(np.percentile(diffs, 95)), 3)}
    return out


def first_shot(by_source: dict, seeds: int, shots_list=(1, 5, 10)) -> dict:
    """bench_first_shot's figures, teaching-frame protocol (the learner's class is patched by the caller)."""
    import bench_first_shot as bfs

    out = {}
    for shots in shots_list:
        per = [bfs.run_source(frs, s, shots) for frs in by_source.values() for s in range(seeds)]
        out[f"{shots}_shot"] = {k: v for k, v in bfs.summary(per).items() if not k.startswith("n_")}
    loso = bfs.loso(by_source, {("teaching_frame", "frames"): seeds})["1_shot_loso"]
    out["1_shot_loso"] = {k: v for k, v in loso["teaching_frame/frames"].items() if not k.startswith("n_")} | {
        "rule_chosen": loso["rule_chosen"]}
    return out


def accuracy(names: list[str], model, prior: float, prior_cat: float, seeds: int, shots_list: list[int]) -> dict:
    """The benchmark sets' few-shot accuracy (bench_accuracy.py's protocol, no teach-time views) on
    Lite0 and adapted vectors, paired by seed."""
    from dataclasses import replace

    import bench_accuracy as ba

    out = {}
    for name in names:
        fs = ba.load_features(name, str(ROOT / "data"), str(ROOT / "cache/eval"), flips=False)["fs"]
        from train_adapter import adapt

        fa = replace(fs, train_x=adapt(model, fs.train_x), test_x=adapt(model, fs.test_x))
        for shots in shots_list:
            raw = [ba.run_learner(fs, shots, s, {"teach_views": 0})["acc"] for s in range(seeds)]
            ada = [ba.run_learner(fa, shots, s, {"teach_views": 0, "transform": "l2", "distance_prior": prior})["acc"]
                   for s in range(seeds)]
            fc = replace(fs, train_x=concat(model, fs.train_x), test_x=concat(model, fs.test_x))
            cat = [ba.run_learner(fc, shots, s, {"teach_views": 0, "transform": "l2", "distance_prior": prior_cat})["acc"]
                   for s in range(seeds)]
            out[f"{name}_{shots}_shot"] = {"lite0": round(float(np.mean(raw)), 4), "adapted": round(float(np.mean(ada)), 4),
                                           "concat": round(float(np.mean(cat)), 4),
                                           "adapted_minus_lite0": round(float(np.mean(np.subtract(ada, raw))), 4),
                                           "concat_minus_lite0": round(float(np.mean(np.subtract(cat, raw))), 4)}
            print(name, shots, out[f"{name}_{shots}_shot"], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / "cache/real_first_shot.pkl"))
    ap.add_argument("--adapter", default=str(ROOT / "runs/adapter/adapter_mlp128.safetensors"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--no-first-shot", action="store_true")
    ap.add_argument("--accuracy", default="fashion-mnist,rendered-objects", help="benchmark sets ('' for none)")
    ap.add_argument("--acc-seeds", type=int, default=3)
    args = ap.parse_args()
    import cbcl_pr_ros.core as core
    from bench_common import out_path

    t0 = time.perf_counter()
    data = pickle.loads(Path(args.cache).read_bytes())
    model, log = load_adapter(Path(args.adapter))
    Orig, Config = core.CBCLPRLearner, core.LearnerConfig
    prior = log["distance_prior_adapted"]
    dim = log["args"]["dim"]

    def raw_learner(seed, *a, **k):
        return Orig(Config(seed=seed), backbone="efficientnet_lite0", feature_dim=1280)

    def adapted_learner(seed, *a, **k):
        return Orig(Config(seed=seed, transform="l2", distance_prior=prior), backbone="efficientnet_lite0_adapted",
                    feature_dim=dim)

    class Patched:  # bench_first_shot builds CBCLPRLearner(LearnerConfig(seed=...), ...)
        def __init__(self, fn):
            self.fn = fn

        def __call__(self, config, *a, **k):
            return self.fn(config.seed)

    res = {"benchmark": "eval_adapter", "adapter": str(args.adapter), "seeds": args.seeds,
           "loadavg_before": [round(v, 2) for v in os.getloadavg()], "training": {k: v for k, v in log.items() if k != "log"}}
    from train_adapter import rms_within

    a = log["args"]
    sim = np.load(Path(a["cache"]) / f"sim_features_s{a['seed']}_i{a['instances']}_v{a['views']}.npz")
    prior_cat = rms_within(concat(model, sim["X"]), sim["cat"], np.random.default_rng(a["seed"]))

    def concat_learner(seed, *a, **k):
        return Orig(Config(seed=seed, transform="l2", distance_prior=prior_cat), backbone="efficientnet_lite0_concat",
                    feature_dim=1280 + dim)

    spaces = {"adapted": (adapted_frames(data, model), adapted_learner),
              "concat": (adapted_frames(data, model, lambda m, X: concat(m, X)), concat_learner)}
    res["prior_concat"] = round(prior_cat, 4)
    if not args.skip_baseline:
        spaces = {"lite0": (data, raw_learner)} | spaces
    raw: dict = {}
    for name, (frs, fn) in spaces.items():
        by_source = defaultdict(list)
        for f in frs:
            by_source[f["source"]].append(f)
        table = auroc_table(by_source, args.seeds, fn)
        raw[name] = table
        res[name] = {"auroc": {s: {k: v for k, v in r.items() if not k.startswith("_")} for s, r in table.items()}}
        print(name, "auroc", json.dumps(res[name]["auroc"]), flush=True)
        if name != "lite0" and "lite0" in raw:
            res[name]["auroc_minus_lite0"] = paired_bootstrap(raw["lite0"], table)
            print(name, "minus lite0", json.dumps(res[name]["auroc_minus_lite0"]), flush=True)
        if not args.no_first_shot:
            core.CBCLPRLearner = Patched(fn)
            try:
                res[name]["first_shot"] = first_shot(by_source, args.seeds)
            finally:
                core.CBCLPRLearner = Orig
            print(name, "first_shot", json.dumps(res[name]["first_shot"]), flush=True)
    if args.accuracy:
        res["accuracy"] = accuracy(args.accuracy.split(","), model, prior, prior_cat, args.acc_seeds, [1, 5])
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    path = out_path(f"eval_adapter_{Path(args.adapter).stem}.json")
    Path(path).write_text(json.dumps(res, indent=1) + "\n")
    print("->", path)


if __name__ == "__main__":
    main()
