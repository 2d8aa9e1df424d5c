"""A view-nuisance transform learned from our renders alone: does it help the gate on real held-out crops?

``eval_nuisance.py`` fitted the within-instance scatter on the real set's other sources (64 objects,
169 views). Here it comes from the simulator: every rendered object's views (and jittered-box copies
of each view, the proposal's box error) from ``bench/train_adapter.py --render-only`` (thousands of
views of hundreds of objects, no real image), in the learner's space (power 0.5, L2). Transforms
(``eval_nuisance.Basis``): ``nap`` k (the scatter's top-k directions projected out) and ``wccn`` a
(whitening by the scatter shrunk towards a scaled identity, ``(1 - a) W + a tr(W)/d I``; a -> 1 is the
plain space), then L2 again. The gate prior is rescaled as the shipped one was measured (the benchmark
sets' train splits, ``eval_nuisance.PriorRef``).

The transform is fixed before any real crop is seen; only the choice of k / a per method uses real
crops, and then only the *other* sources (the pooled nearest-shot AUROC over them), so every figure is
held out. Measured per held-out source:

* the gate distance's AUROC, taught instances' other views vs never-taught objects
  (``eval_adapter.auroc_table``: 1 shot, the teaching frame's other objects as negatives), with a
  paired bootstrap interval of the difference to the plain vectors;
* ``bench_first_shot.py``'s default regime (stream, covisible negatives, the taught object's track
  views as the product takes them) and the teaching-frame protocol, shipped veto, at 1 / 5 / 10 shots;
* the benchmark sets' few-shot accuracy (``bench_accuracy.py``'s protocol, no teach-time views) with
  k / a chosen on every real source (what would ship), paired by seed.

Run (renders first; about 17 min rendering on 2 busy cores, cached):

    source scripts/env.sh && python -P bench/train_adapter.py --instances 24 --views 8 --jitter 1 --render-only
    python -P bench/eval_render_whitening.py --results bench/results/render_whitening.json
    python -P bench/eval_render_whitening.py --combine OUT.json RUN.json ...   # several runs' figures in one file
"""
from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT / "bench"))
from bench_common import out_path  # noqa: E402
from eval_nuisance import Basis, Patched, PriorRef, cname, make_learner_fn, mapped_frames, nearest_shot, \
    rejected_at, tukey_l2  # noqa: E402

NAP_K = (4, 8, 16, 32, 64, 128)
WCCN_A = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7)
CANDIDATES = (("identity", 0),) + tuple(("nap", k) for k in NAP_K) + tuple(("wccn", a) for a in WCCN_A)
# bench_first_shot's default regime first
REGIMES = (("stream", "frames+stream_covisible"), ("teaching_frame", "frames"))
KEYS = ("taught_correct", "taught_accepted", "untaught_rejected")


def render_basis(path: Path, copies: bool = True) -> tuple[Basis, dict]:
    """The within-object scatter of the renders (every crop, or one per view without ``copies``)."""
    d = np.load(path)
    X, inst = d["X"], d["inst"]
    if not copies and "view" in d:
        _, first = np.unique(np.stack([inst, d["view"]], 1), axis=0, return_index=True)
        X, inst = X[np.sort(first)], inst[np.sort(first)]
    T = tukey_l2(X)
    devs = [T[inst == i] - T[inst == i].mean(0) for i in np.unique(inst) if (inst == i).sum() >= 2]
    D = np.concatenate(devs)
    _, s, vt = np.linalg.svd(D, full_matrices=False)
    keep = s > 1e-9 * s.max()
    info = {"render_vectors": int(len(X)), "render_objects": int(len(np.unique(inst))),
            "deviations": int(len(D)),
            "top_4_16_64_128_variance_share": [round(float(v), 4) for v in
                                               (np.cumsum(s ** 2) / (s ** 2).sum())[np.minimum([3, 15, 63, 127], len(s) - 1)]]}
    return Basis(vt[keep], s[keep] ** 2 / len(D), D.shape[1]), info


class Mapper:
    """``Basis.apply`` and, for candidates ``("residual", i)``, the i-th trained residual adapter."""

    def __init__(self, basis: Basis, adapters: list):
        self.basis, self.adapters = basis, adapters

    def apply(self, cand, x: np.ndarray) -> np.ndarray:
        if cand[0] != "residual":
            return self.basis.apply(cand, x)
        import torch

        with torch.no_grad():
            z = self.adapters[int(cand[1])](torch.from_numpy(np.asarray(x, np.float32))).numpy()
        return (z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def first_shot(frs: list[dict], seeds: int, stream_seeds: int, shots_list, track, learner_fn=None) -> dict:
    """Per regime and number of shots, the per-seed outcomes of one source (shipped veto)."""
    import bench_first_shot as bfs
    import cbcl_pr_ros.core as core

    orig = core.CBCLPRLearner
    if learner_fn is not None:
        core.CBCLPRLearner = Patched(learner_fn)
    try:
        return {f"{'/'.join(reg)}/{n}_shot": [bfs.run_source(frs, s, n, None, *reg, track)
                                             for s in range(seeds if reg[0] == "teaching_frame" else stream_seeds)]
                for reg in REGIMES for n in shots_list}
    finally:
        core.CBCLPRLearner = orig


def fs_summary(runs: dict) -> dict:
    """``runs``: source -> key -> outcomes; per key the pooled figures and per source."""
    import bench_first_shot as bfs

    out = {}
    for key in next(iter(runs.values())):
        s = bfs.summary([p for r in runs.values() for p in r[key]])
        out[key] = {k: s.get(k) for k in KEYS} | {f"n_{k}": s.get(f"n_{k}") for k in KEYS} | {
            "per_source": {src: {k: bfs.summary(r[key]).get(k) for k in KEYS} for src, r in runs.items()}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / "cache/real_first_shot.pkl"))
    ap.add_argument("--renders", default=str(ROOT / "cache/adapter/sim_features_s0_i24_v8_j1.npz"))
    ap.add_argument("--views-only", action="store_true", help="the scatter of one crop per view (no box copies)")
    ap.add_argument("--residual", default="", help="comma-separated residual adapters (train_adapter.py --arch residual)")
    ap.add_argument("--methods", default="nap,wccn", help="of nap, wccn, residual")
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--eval-cache", default=str(ROOT / "cache/eval"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stream-seeds", type=int, default=10)
    ap.add_argument("--shots", default="1,5,10")
    ap.add_argument("--accuracy", default="fashion-mnist,rendered-objects", help="benchmark sets ('' for none)")
    ap.add_argument("--acc-seeds", type=int, default=3)
    ap.add_argument("--loso", default="", help="only bench_first_shot's veto chosen leave-one-source-out (1 shot), "
                                               "plain and with this one candidate (e.g. wccn_0.7) on every source")
    ap.add_argument("--out", default=str(out_path("eval_render_whitening.json")))
    ap.add_argument("--results", default="", help="also write the figures without per-object lists here")
    args = ap.parse_args()
    import bench_accuracy as ba
    from eval_adapter import _auroc, auroc_table, paired_bootstrap
    from eval_nuisance import _auroc_ranks
    from cbcl_pr_ros.core.one_place import GUARD
    from cbcl_pr_ros.evaluation.experiments import machine_info

    t0 = time.perf_counter()
    data = pickle.loads(Path(args.cache).read_bytes())
    by_source: dict = defaultdict(list)
    for f in data:
        by_source[f["source"]].append(f)
    shots_list = [int(s) for s in args.shots.split(",")]
    basis, info = render_basis(Path(args.renders), not args.views_only)
    adapters = []
    if args.residual:
        from eval_adapter import load_adapter

        adapters = [load_adapter(Path(p))[0] for p in args.residual.split(",")]
        info["residual"] = args.residual.split(",")
    basis = Mapper(basis, adapters)
    methods = tuple(args.methods.split(","))
    cands = tuple(c for c in CANDIDATES if c[0] in methods + ("identity",)) + tuple(
        ("residual", i) for i in range(len(adapters)))
    names = [n for n in args.accuracy.split(",") if n]
    feats = {n: ba.load_features(n, args.data, args.eval_cache, flips=False)["fs"]
             for n in dict.fromkeys(names + ["fashion-mnist", "rendered-objects"])}
    prior_ref = PriorRef([(fs.train_x, fs.train_y) for fs in (feats["fashion-mnist"], feats["rendered-objects"])])
    priors = {cname(c): prior_ref.prior(basis, c) for c in cands}
    res: dict = {"benchmark": "eval_render_whitening", "machine": machine_info(),
                 "loadavg_before": [round(v, 2) for v in os.getloadavg()], "renders": Path(args.renders).name,
                 "views_only": args.views_only, "render_scatter": info, "seeds": args.seeds,
                 "stream_seeds": args.stream_seeds, "track": GUARD, "candidates": [cname(c) for c in cands],
                 "priors": {k: round(v, 4) for k, v in priors.items()}}
    print(json.dumps(res["render_scatter"]), json.dumps(res["priors"]), flush=True)

    if args.loso:
        import bench_first_shot as bfs
        import cbcl_pr_ros.core as core

        cand = next(c for c in cands if cname(c) == args.loso)
        regimes = {reg: args.seeds if reg[0] == "teaching_frame" else args.stream_seeds for reg in bfs.LOSO_REGIMES}
        out = {"plain": bfs.loso(by_source, regimes, GUARD)["1_shot_loso"]}
        print("loso plain", json.dumps(out["plain"]), flush=True)
        mapped = {s: mapped_frames(frs, basis, cand) for s, frs in by_source.items()}
        orig = core.CBCLPRLearner
        core.CBCLPRLearner = Patched(make_learner_fn(priors[args.loso]))
        try:
            out[args.loso] = bfs.loso(mapped, regimes, GUARD)["1_shot_loso"]
        finally:
            core.CBCLPRLearner = orig
        print("loso", args.loso, json.dumps(out[args.loso]), flush=True)
        res["loso_1_shot"] = out
        res["seconds"] = round(time.perf_counter() - t0, 1)
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
        return

    # the inner score of every candidate on every source (the transform does not depend on the source)
    inner = {src: {cname(c): nearest_shot(mapped_frames(frs, basis, c), args.seeds) for c in cands}
             for src, frs in by_source.items()}

    def choose(held: str | None) -> dict:
        score = {}
        for c in cands:
            pos = sum((inner[s][cname(c)][0] for s in by_source if s != held), [])
            neg = sum((inner[s][cname(c)][1] for s in by_source if s != held), [])
            score[cname(c)] = _auroc(pos, neg)
        return {m: max((c for c in cands if c[0] == m), key=lambda c: score[cname(c)]) for m in methods}

    def plain_fn(seed, *a, **k):
        from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

        return CBCLPRLearner(LearnerConfig(seed=seed), backbone="efficientnet_lite0", feature_dim=1280)

    tables: dict = defaultdict(dict)
    fs_runs: dict = defaultdict(dict)
    chosen = {}
    for held, frs in by_source.items():
        ch = choose(held)
        chosen[held] = {m: cname(c) for m, c in ch.items()}
        spaces = {cname(c): c for c in cands} | {f"{m}_chosen": c for m, c in ch.items()}
        for label, c in spaces.items():
            plain = label == "identity"
            fn = plain_fn if plain else make_learner_fn(priors[cname(c)])
            mapped = frs if plain else mapped_frames(frs, basis, c)
            t = auroc_table({held: mapped}, args.seeds, fn)
            if held in t:
                tables[label][held] = t[held]
            if label == "identity" or label.endswith("_chosen"):
                fs_runs[label][held] = first_shot(mapped, args.seeds, args.stream_seeds, shots_list, GUARD,
                                                  None if plain else fn)
        print(held, chosen[held], {k: v[held]["gate_distance_pooled"] for k, v in tables.items() if held in v},
              round(time.perf_counter() - t0), flush=True)
    res["chosen_per_held_out_source"] = chosen

    def with_pool(tab: dict) -> dict:
        return tab | {"pooled": {"_pos": sum((r["_pos"] for r in tab.values()), []),
                                 "_neg": sum((r["_neg"] for r in tab.values()), [])}}

    auroc = {}
    for label, tab in tables.items():
        pos, neg = sum((r["_pos"] for r in tab.values()), []), sum((r["_neg"] for r in tab.values()), [])
        row = {s: r["gate_distance_pooled"] for s, r in tab.items()}
        row |= {"pooled": round(_auroc(pos, neg), 3), "rejected_at_0.90_accepted": round(rejected_at(pos, neg), 3)}
        if label != "identity":
            boot = paired_bootstrap(with_pool(tables["identity"]), with_pool(tab), score=_auroc_ranks)
            row["minus_plain_diff_p05_p95"] = {s: [d["diff"], d["p05"], d["p95"]] for s, d in boot.items()}
        auroc[label] = row
    res["auroc_held_out"] = auroc
    print("auroc", json.dumps({k: {s: v for s, v in r.items() if s != "minus_plain_diff_p05_p95"}
                               for k, r in auroc.items()}), flush=True)
    res["first_shot_held_out"] = {label: fs_summary(r) for label, r in fs_runs.items()}
    for label, r in res["first_shot_held_out"].items():
        print("first shot", label, json.dumps({k: [v[m] for m in KEYS] for k, v in r.items()}), flush=True)
    if names:
        ship = choose(None)
        res["chosen_on_all_sources"] = {m: cname(c) for m, c in ship.items()}
        acc = {}
        for name in names:
            fs = feats[name]
            for shots in shots_list:
                raw = [ba.run_learner(fs, shots, s, {"teach_views": 0})["acc"] for s in range(args.acc_seeds)]
                row = {"plain": round(float(np.mean(raw)), 4)}
                for m, c in ship.items():
                    fp = replace(fs, train_x=basis.apply(c, tukey_l2(fs.train_x)),
                                 test_x=basis.apply(c, tukey_l2(fs.test_x)))
                    over = {"teach_views": 0, "transform": "l2", "distance_prior": priors[cname(c)]}
                    a = [ba.run_learner(fp, shots, s, over)["acc"] for s in range(args.acc_seeds)]
                    row[m] = {"candidate": cname(c), "acc": round(float(np.mean(a)), 4),
                              "minus_plain": round(float(np.mean(np.subtract(a, raw))), 4)}
                acc[f"{name}_{shots}_shot"] = row
                print(name, shots, json.dumps(row), flush=True)
        res["accuracy"] = acc
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print("->", args.out)
    if args.results:
        Path(args.results).write_text(json.dumps(compact(res), indent=1) + "\n")
        print("->", args.results)


def compact(res: dict) -> dict:
    """A run's figures without the per-source first-shot detail and the confidence bins (for bench/results/)."""
    out = {k: v for k, v in res.items() if k not in ("first_shot_held_out", "loso_1_shot", "auroc_held_out")}
    if "auroc_held_out" in res:  # the bootstrap intervals of the two large tables and of the pooled AUROC
        out["auroc_held_out"] = {label: {s: v if s != "minus_plain_diff_p05_p95" else
                                         {t: d for t, d in v.items() if t in ("ucn", "osd", "pooled")}
                                         for s, v in row.items()} for label, row in res["auroc_held_out"].items()}
    if "first_shot_held_out" in res:
        out["first_shot_held_out"] = {label: {k: {m: w for m, w in v.items() if m != "per_source"}
                                              for k, v in r.items()} for label, r in res["first_shot_held_out"].items()}
    if "loso_1_shot" in res:
        out["loso_1_shot"] = {label: {reg: ({m: v[m] for m in KEYS} if isinstance(v, dict) and "taught_correct" in v else v)
                                      for reg, v in r.items()} for label, r in res["loso_1_shot"].items()}
    return out


def combine(out: str, runs: list[str]) -> None:
    """Several runs' compact figures in one file, keyed by each run's file name."""
    Path(out).write_text(json.dumps({Path(p).stem: compact(json.loads(Path(p).read_text())) for p in runs}) + "\n")
    print("->", out)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--combine":  # --combine OUT RUN.json ...: the curated copy
        combine(sys.argv[2], sys.argv[3:])
    else:
        main()
