"""A view-nuisance projection learned from real multi-view objects of other tables: does it help the gate?

The gate confuses another view of a taught object with another object; if view changes move Lite0
vectors along a few directions shared by objects, removing those directions should separate the
two. On the real RGB-D set's cached masked-crop vectors (``bench_first_shot.py``'s cache), in the
learner's space (power 0.5, then L2), an *instance* is a name seen in two or more frames of one
source; its views' deviations from their mean are the within-instance scatter. Fitted on the
other sources only, for each held-out source:

* ``nap`` k: the scatter's top-k principal directions projected out (nuisance attribute projection);
* ``wccn`` a: whitening by the within-instance covariance shrunk towards a scaled identity
  (``(1 - a) W + a tr(W)/d I``), a soft version of the same;

then L2 again. ``identity`` (k = 0) is the plain space served the same way, a check that the
serving path reproduces the shipped learner. The learner is given the projected vectors with the
"l2" transform and the gate prior rescaled as the shipped one was measured: 0.77 times the ratio
of the RMS within-class pair distance in the projected and the plain space, on the train splits of
Fashion-MNIST and the rendered objects.

Measured, held out source by source:

* the AUROC of the gate distance, taught instances' other views vs never-taught objects
  (``eval_adapter.py``'s protocol: 1 shot, the teaching frame's other objects as negatives, 5
  seeds), per source and pooled over the held-out sources, with a paired bootstrap interval of the
  difference to the plain vectors (``eval_adapter.paired_bootstrap``); each fixed k / a, and k / a
  chosen on the training sources only (an inner leave-one-source-out over them, by the pooled AUROC
  of the distance to the nearest shot);
* ``bench_first_shot.py``'s 1-shot figures with the shipped veto and the one-place rule: teaching-frame
  protocol (negatives ``frames``) and stream protocol (``frames+stream_covisible``);
* the benchmark sets' few-shot accuracy (``bench_accuracy.py``'s protocol, no teach-time views,
  1 / 5 shots) with the projection fitted on every real source (k / a chosen leave-one-source-out
  over all of them: what would ship), paired by seed.

Needs ``cache/real_first_shot.pkl`` and, for the accuracy check, the benchmark sets (Fashion-MNIST
from the Debian package; the rendered objects under ``data/``; Lite0 vectors cached in
``cache/eval``). Run:

    source scripts/env.sh && python -P bench/eval_nuisance.py --results bench/results/nuisance.json
    # -> runs/bench/eval_nuisance.json (everything) and the compact copy
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_common import out_path  # noqa: E402

NAP_K = (4, 8, 16, 32, 64)
WCCN_A = (0.05, 0.2, 0.5)
PRIOR = 0.77  # the shipped Lite0 prior (power 0.5, L2)
FIRST_SHOT_REGIMES = (("teaching_frame", "frames"), ("stream", "frames+stream_covisible"))


def tukey_l2(x: np.ndarray) -> np.ndarray:
    """The learner's default transform, float64."""
    t = np.sign(x) * np.sqrt(np.abs(np.asarray(x, np.float64)))
    return t / np.maximum(np.linalg.norm(t, axis=-1, keepdims=True), 1e-12)


def _renorm(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)).astype(np.float32)


def within_scatter(frs: list[dict]) -> np.ndarray:
    """Deviations from their instance's mean of the views of every instance (name, source) seen in
    two or more frames, in the learner's space: (m, d)."""
    views: dict = defaultdict(list)
    for f in frs:
        for name, x in zip(f["names"], f["obj"]):
            views[(f["source"], name)].append(x)
    devs = [tukey_l2(np.stack(v)) for v in views.values() if len(v) >= 2]
    return np.concatenate([z - z.mean(0) for z in devs]) if devs else np.zeros((0, frs[0]["obj"].shape[1]))


@dataclass(frozen=True)
class Basis:
    """The within-instance scatter's principal directions and variances (per deviation)."""

    vt: np.ndarray  # (r, d)
    var: np.ndarray  # (r,)
    dim: int

    @classmethod
    def fit(cls, frs: list[dict]) -> "Basis":
        D = within_scatter(frs)
        _, s, vt = np.linalg.svd(D, full_matrices=False)
        keep = s > 1e-9 * max(s.max(initial=0.0), 1e-30)
        return cls(vt[keep], s[keep] ** 2 / max(len(D), 1), D.shape[1])

    def apply(self, cand: tuple[str, float], x: np.ndarray) -> np.ndarray:
        """``x`` (already in the learner's space) mapped by candidate ``(method, param)``, L2 again."""
        method, p = cand
        if method == "identity" or not len(self.vt):
            return _renorm(x)
        if method == "nap":
            v = self.vt[: int(p)]
            return _renorm(x - (x @ v.T) @ v)
        s0 = p * self.var.sum() / self.dim  # the shrinkage's floor variance
        scale = 1.0 / np.sqrt((1.0 - p) * self.var + s0) - 1.0 / np.sqrt(s0)
        return _renorm(x / np.sqrt(s0) + ((x @ self.vt.T) * scale) @ self.vt)


CANDIDATES = (("identity", 0),) + tuple(("nap", k) for k in NAP_K) + tuple(("wccn", a) for a in WCCN_A)


def cname(c: tuple[str, float]) -> str:
    return c[0] if c[0] == "identity" else f"{c[0]}_{c[1]:g}"


def mapped_frames(frs: list[dict], basis: Basis, cand) -> list[dict]:
    out = []
    for f in frs:
        j = f["jit"]
        out.append(f | {"obj": basis.apply(cand, tukey_l2(f["obj"])),
                        "jit": basis.apply(cand, tukey_l2(j.reshape(-1, j.shape[-1]))).reshape(j.shape)})
    return out


def nearest_shot(frs: list[dict], seeds: int) -> tuple[list[float], list[float]]:
    """Distance to the nearest taught shot of taught instances' other views and never-taught objects
    (``eval_adapter.distances``' split, no learner): the inner choice's score."""
    from bench_first_shot import taught_split

    pos, neg = [], []
    for seed in range(seeds):
        split = taught_split(frs, seed)
        if split is None:
            continue
        seen, taught = split
        first = {n: seen[n][0] for n in taught}
        by_id = {f["id"]: f for f in frs}
        S = np.stack([by_id[first[n]]["obj"][by_id[first[n]]["names"].index(n)] for n in sorted(taught)])
        for f in frs:
            d = np.sqrt(np.maximum(((f["obj"][:, None] - S[None]) ** 2).sum(-1), 0)).min(1)
            for name, di in zip(f["names"], d):
                if name in taught and f["id"] == first[name]:
                    continue
                (pos if name in taught else neg).append(float(di))
    return pos, neg


def inner_choice(by_source: dict, held: str | None, seeds: int) -> dict:
    """Per method, the parameter with the best pooled nearest-shot AUROC over an inner
    leave-one-source-out on the sources other than ``held``."""
    from eval_adapter import _auroc

    train = [s for s in by_source if s != held]
    pool = {c: ([], []) for c in CANDIDATES}
    for t in train:
        basis = Basis.fit([f for s in train if s != t for f in by_source[s]])
        for c in CANDIDATES:
            p, n = nearest_shot(mapped_frames(by_source[t], basis, c), seeds)
            pool[c][0].extend(p)
            pool[c][1].extend(n)
    score = {cname(c): round(_auroc(*pool[c]), 4) for c in CANDIDATES}
    best = {m: max((c for c in CANDIDATES if c[0] == m), key=lambda c: score[cname(c)]) for m in ("nap", "wccn")}
    return {"scores": score, "chosen": best}


def rms_within(Z: np.ndarray, y: np.ndarray, per: int = 200, seed: int = 0) -> float:
    """RMS within-class pair distance of rows of ``Z`` (at most ``per`` per class)."""
    rng, sq = np.random.default_rng(seed), []
    for c in np.unique(y):
        z = Z[y == c]
        z = z[rng.permutation(len(z))[:per]].astype(np.float64)
        g = (z * z).sum(1)
        d = g[:, None] + g[None] - 2 * z @ z.T
        sq.append(d[np.triu_indices(len(z), 1)])
    return float(np.sqrt(np.maximum(np.concatenate(sq), 0).mean()))


class PriorRef:
    """The benchmark sets' train vectors in the learner's space, to rescale the gate prior."""

    def __init__(self, sets: list[tuple[np.ndarray, np.ndarray]]):
        self.sets = [(tukey_l2(x), y) for x, y in sets]
        self.plain = float(np.mean([rms_within(x, y) for x, y in self.sets]))

    def prior(self, basis: Basis, cand) -> float:
        if cand[0] == "identity":
            return PRIOR
        return PRIOR * float(np.mean([rms_within(basis.apply(cand, x), y) for x, y in self.sets])) / self.plain


def _auroc_ranks(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a taught view's distance < a never-taught one's), ties half, by the rank sum (fast)."""
    from scipy.stats import rankdata

    r = rankdata(np.r_[pos, neg])[len(pos):]
    return float((r.sum() - len(neg) * (len(neg) + 1) / 2) / (len(pos) * len(neg)))


def rejected_at(pos, neg, accepted: float = 0.9) -> float:
    """Never-taught rejected when the gate distance's threshold accepts ``accepted`` of the taught
    views (an operating point that does not depend on the served prior)."""
    if not len(pos) or not len(neg):
        return float("nan")
    return float(np.mean(np.asarray(neg) > np.quantile(pos, accepted)))


def compact(res: dict) -> dict:
    """The figures without the per-fold detail, for bench/results/."""
    out = {k: res[k] for k in ("benchmark", "machine", "loadavg_before", "loadavg_after", "seconds", "seeds",
                               "stream_seeds", "candidates", "fitted_on_all", "accuracy") if k in res}
    out["chosen_per_held_out_source"] = {s: f["chosen"] for s, f in res["folds"].items()}
    out["auroc_held_out"] = {
        label: {"pooled": row["pooled"], "rejected_at_0.90_accepted": row["rejected_at_0.90_accepted"]}
        | {s: r["gate_distance_pooled"] for s, r in row.items() if isinstance(r, dict) and "gate_distance_pooled" in r}
        | ({"minus_lite0_diff_p05_p95": {s: [d["diff"], d["p05"], d["p95"]] for s, d in row["minus_lite0"].items()}}
           if "minus_lite0" in row else {})
        for label, row in res["auroc_held_out"].items()}
    out["first_shot_1_shot_held_out"] = res.get("first_shot_1_shot_held_out", {})
    return out


def make_learner_fn(prior: float):
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    def fn(seed, *a, **k):
        return CBCLPRLearner(LearnerConfig(seed=seed, transform="l2", distance_prior=prior),
                             backbone="efficientnet_lite0_projected", feature_dim=1280)
    return fn


class Patched:
    """Stands in for ``CBCLPRLearner`` where bench_first_shot builds one from a config."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, config, *a, **k):
        return self.fn(config.seed)


def first_shot_runs(frs: list[dict], seeds: int, stream_seeds: int, learner_fn=None) -> dict:
    """bench_first_shot's 1-shot per-seed outcomes on one source, for each regime (shipped veto)."""
    import bench_first_shot as bfs
    import cbcl_pr_ros.core as core

    orig = core.CBCLPRLearner
    if learner_fn is not None:
        core.CBCLPRLearner = Patched(learner_fn)
    try:
        return {"/".join(reg): [bfs.run_source(frs, s, 1, None, *reg)
                                for s in range(seeds if reg[0] == "teaching_frame" else stream_seeds)]
                for reg in FIRST_SHOT_REGIMES}
    finally:
        core.CBCLPRLearner = orig


def first_shot_summary(runs: dict[str, dict]) -> dict:
    """Per regime: all held-out sources and per source (``runs``: source -> regime -> outcomes)."""
    import bench_first_shot as bfs

    keys = ("taught_correct", "taught_accepted", "untaught_rejected")
    out = {}
    for reg in ("/".join(r) for r in FIRST_SHOT_REGIMES):
        summ = bfs.summary([p for r in runs.values() for p in r[reg]])
        out[reg] = {k: summ.get(k) for k in keys} | {f"n_{k}": summ.get(f"n_{k}") for k in keys} | {
            "per_source": {s: {k: bfs.summary(r[reg]).get(k) for k in keys} for s, r in runs.items()}}
    return out


def accuracy(names: list[str], basis: Basis, cands: dict, prior_ref: PriorRef, seeds: int,
             feats: dict, shots_list=(1, 5)) -> dict:
    """The benchmark sets' few-shot accuracy, plain and with each projection, paired by seed."""
    import bench_accuracy as ba

    out = {}
    for name in names:
        fs = feats[name]
        for shots in shots_list:
            raw = [ba.run_learner(fs, shots, s, {"teach_views": 0})["acc"] for s in range(seeds)]
            row = {"lite0": round(float(np.mean(raw)), 4)}
            for label, c in cands.items():
                fp = replace(fs, train_x=basis.apply(c, tukey_l2(fs.train_x)), test_x=basis.apply(c, tukey_l2(fs.test_x)))
                over = {"teach_views": 0, "transform": "l2", "distance_prior": prior_ref.prior(basis, c)}
                acc = [ba.run_learner(fp, shots, s, over)["acc"] for s in range(seeds)]
                row[label] = {"candidate": cname(c), "acc": round(float(np.mean(acc)), 4),
                              "minus_lite0": round(float(np.mean(np.subtract(acc, raw))), 4)}
            out[f"{name}_{shots}_shot"] = row
            print(name, shots, json.dumps(row), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / "cache/real_first_shot.pkl"))
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--eval-cache", default=str(ROOT / "cache/eval"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stream-seeds", type=int, default=10)
    ap.add_argument("--accuracy", default="fashion-mnist,rendered-objects", help="benchmark sets ('' for none)")
    ap.add_argument("--acc-seeds", type=int, default=3)
    ap.add_argument("--first-shot", default="chosen", choices=("chosen", "all", "none"),
                    help="first-shot figures for the plain and the chosen projections, or every candidate")
    ap.add_argument("--out", default=str(out_path("eval_nuisance.json")))
    ap.add_argument("--results", default="", help="also write a compact copy of the figures to this path (the curated copy)")
    args = ap.parse_args()
    import bench_accuracy as ba
    from eval_adapter import _auroc, auroc_table, paired_bootstrap
    from cbcl_pr_ros.evaluation.experiments import machine_info

    t0 = time.perf_counter()
    data = pickle.loads(Path(args.cache).read_bytes())
    by_source: dict = defaultdict(list)
    for f in data:
        by_source[f["source"]].append(f)
    names = [n for n in args.accuracy.split(",") if n]
    feats = {n: ba.load_features(n, args.data, args.eval_cache, flips=False)["fs"]
             for n in dict.fromkeys(names + ["fashion-mnist", "rendered-objects"])}
    prior_ref = PriorRef([(fs.train_x, fs.train_y) for fs in (feats["fashion-mnist"], feats["rendered-objects"])])
    res: dict = {"benchmark": "eval_nuisance", "machine": machine_info(),
                 "loadavg_before": [round(v, 2) for v in os.getloadavg()], "seeds": args.seeds,
                 "stream_seeds": args.stream_seeds, "candidates": [cname(c) for c in CANDIDATES],
                 "prior_reference_plain_rms": round(prior_ref.plain, 4)}

    def plain_fn(seed, *a, **k):
        from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
        return CBCLPRLearner(LearnerConfig(seed=seed), backbone="efficientnet_lite0", feature_dim=1280)

    tables: dict = defaultdict(dict)  # space -> source -> auroc row
    fs_runs: dict = defaultdict(dict)  # space -> source -> regime -> outcomes
    folds = {}
    for held, frs in by_source.items():
        tf = time.perf_counter()
        choice = inner_choice(by_source, held, args.seeds)
        basis = Basis.fit([f for s in by_source if s != held for f in by_source[s]])
        spaces = {cname(c): c for c in CANDIDATES} | {f"{m}_chosen": c for m, c in choice["chosen"].items()}
        fold = {"inner_scores": choice["scores"], "chosen": {m: cname(c) for m, c in choice["chosen"].items()},
                "within_scatter_rank": int(len(basis.vt)), "priors": {}}
        t = auroc_table({held: frs}, args.seeds, plain_fn)
        if held in t:
            tables["lite0"][held] = t[held]
        if args.first_shot != "none":
            fs_runs["lite0"][held] = first_shot_runs(frs, args.seeds, args.stream_seeds)
        for label, c in spaces.items():
            mapped = mapped_frames(frs, basis, c)
            prior = prior_ref.prior(basis, c)
            fold["priors"][label] = round(prior, 4)
            t = auroc_table({held: mapped}, args.seeds, make_learner_fn(prior))
            if held in t:
                tables[label][held] = t[held]
            if args.first_shot == "all" or (args.first_shot == "chosen" and label.endswith("_chosen")):
                fs_runs[label][held] = first_shot_runs(mapped, args.seeds, args.stream_seeds, make_learner_fn(prior))
        fold["seconds"] = round(time.perf_counter() - tf, 1)
        folds[held] = fold
        print(held, json.dumps({k: v for k, v in fold.items() if k != "inner_scores"}),
              {k: v[held]["gate_distance_pooled"] for k, v in tables.items() if held in v}, flush=True)
    res["folds"] = folds

    def with_pool(tab: dict) -> dict:
        return tab | {"pooled": {"_pos": sum((r["_pos"] for r in tab.values()), []),
                                 "_neg": sum((r["_neg"] for r in tab.values()), [])}}

    auroc = {}
    for label, tab in tables.items():
        row = {s: {k: v for k, v in r.items() if not k.startswith("_")} for s, r in tab.items()}
        pos, neg = sum((r["_pos"] for r in tab.values()), []), sum((r["_neg"] for r in tab.values()), [])
        row["pooled"] = round(_auroc(pos, neg), 3)
        row["rejected_at_0.90_accepted"] = round(rejected_at(pos, neg), 3)
        if label != "lite0":
            row["minus_lite0"] = paired_bootstrap(with_pool(tables["lite0"]), with_pool(tab), score=_auroc_ranks)
        auroc[label] = row
    res["auroc_held_out"] = auroc
    print("auroc pooled", {k: (v["pooled"], v["rejected_at_0.90_accepted"]) for k, v in auroc.items()}, flush=True)
    if fs_runs:
        res["first_shot_1_shot_held_out"] = {label: first_shot_summary(r) for label, r in fs_runs.items()}
        for label, r in res["first_shot_1_shot_held_out"].items():
            print("first shot", label, json.dumps({k: {m: w for m, w in v.items() if m != "per_source"}
                                                   for k, v in r.items()}), flush=True)
    if names:
        choice = inner_choice(by_source, None, args.seeds)
        basis = Basis.fit(data)
        ship = {f"{m}_chosen": c for m, c in choice["chosen"].items()}
        res["fitted_on_all"] = {"inner_scores": choice["scores"], "chosen": {k: cname(c) for k, c in ship.items()},
                                "priors": {k: round(prior_ref.prior(basis, c), 4) for k, c in ship.items()}}
        res["accuracy"] = accuracy(names, basis, ship, prior_ref, args.acc_seeds, feats)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print("->", args.out)
    if args.results:
        Path(args.results).write_text(json.dumps(compact(res), indent=1) + "\n")
        print("->", args.results)


if __name__ == "__main__":
    main()
