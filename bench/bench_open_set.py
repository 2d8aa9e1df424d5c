"""Open-set benchmark: how well the learner says "unknown" on real features, and calibration.

Protocol (seeded): teach a random half of the classes of a data set few-shot (5 and 10 shots from
the training pool) through ``CBCLPRLearner`` with the default config, then score held-out test
images of the taught classes (should be *known*) and all test images of the other half (should be
*unknown*).  Each candidate score is swept over its threshold: AUROC, the known-acceptance (TPR)
at 5% / 10% of unknowns accepted (FPR), the distance factor that accepts 90% / 95% of known test
images and the unknowns it then accepts, and the default rule's operating point.  Calibration of
the head's confidence on the known test images: expected calibration error (15 bins) at T = 1 and
with the temperature the learner fits from its memory.

Features come from the evaluation layer's cache (EfficientNet-Lite0 via ``cbcl-eval``; nothing is
recomputed when the cache is warm).  ``--synthetic`` runs the same on a Gaussian-mixture set.

    python bench/bench_open_set.py [--seeds 5] [--synthetic]   # -> runs/bench/open_set.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.open_set import class_spreads, expected_calibration_error
from cbcl_pr_ros.evaluation.experiments import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

FACTORS = (0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.3, 1.5, 2.0)




def load_feature_sets(synthetic: bool, cache_dir: str, data_root: str) -> list:
    from cbcl_pr_ros.evaluation.featureset import extract_feature_set, synthetic_feature_set

    if synthetic:
        return [synthetic_feature_set(n_classes=10, dim=64, train_per_class=60, test_per_class=60, seed=0)]
    from cbcl_pr_ros.evaluation.datasets import discover, load_dataset
    from cbcl_pr_ros.features import backbones

    present, _ = discover(data_root)
    bb = backbones.make_backbone("efficientnet_lite0", runtime="onnx", threads=1,
                                 cache_dir=str(Path(cache_dir).parent / "onnx"))
    out = []
    for name in ("fashion-mnist", "rendered-objects"):
        if name in present:
            out.append(extract_feature_set(load_dataset(name, present[name]), bb, cache_dir, 300, 200))
    return out


def auroc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a known > score of an unknown), ties counted half (Mann-Whitney)."""
    allv = np.concatenate([pos, neg])
    order = allv.argsort(kind="mergesort")
    ranks = np.empty(len(allv))
    ranks[order] = np.arange(1, len(allv) + 1)
    # average ranks over ties
    _, inv, cnt = np.unique(allv, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, ranks)
    ranks = (sums / cnt)[inv]
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def tpr_at_fpr(pos: np.ndarray, neg: np.ndarray, fpr: float) -> float:
    thr = np.quantile(neg, 1.0 - fpr)
    return float((pos > thr).mean())


def run_one(fs, shots: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, shots])
    classes = np.unique(fs.train_y)
    taught = np.sort(rng.permutation(classes)[: len(classes) // 2])
    learner = CBCLPRLearner(LearnerConfig(seed=seed), backbone="bench", feature_dim=fs.dim)
    teach = {}
    for c in taught:
        idx = rng.permutation(np.flatnonzero(fs.train_y == c))[:shots]
        teach[fs.classes[c]] = fs.train_x[idx]
    learner.teach_increment(teach)
    served = learner._served
    known_mask = np.isin(fs.test_y, taught)
    x = fs.test_x.astype(np.float64)
    preds = learner.predict(x, top_k=1)
    D = learner.distance_threshold_
    best = np.array([learner.classes_.index(p.nearest_label) for p in preds])
    conf = np.array([p.confidence for p in preds])
    d_pred = np.array([p.distance for p in preds])
    cent_all = np.concatenate([cc.means for _, cc in learner.memory.items()]).astype(np.float64)
    d2 = (x ** 2).sum(1)[:, None] - 2 * x @ cent_all.T + (cent_all ** 2).sum(1)[None]
    d_any = np.sqrt(np.maximum(d2.min(1), 0))
    spread = class_spreads(learner.memory, D)
    logits = served.head.logits(x).astype(np.float64)
    T = served.temperature if hasattr(served, "temperature") else 1.0
    scores = {
        "distance_pred/D": -d_pred / D,
        "distance_any/D": -d_any / D,
        "distance_pred/class_spread": -d_pred / spread[best],
        "max_softmax": conf,
        "max_softmax_T": _softmax(logits / T).max(1),
        "max_logit": logits.max(1),
    }
    label_of = {name: i for i, name in enumerate(fs.classes)}
    truth = np.array([label_of[n] for n in learner.classes_])[best]
    correct = truth == fs.test_y
    out = {"D": D, "taught": [fs.classes[c] for c in taught], "temperature": T,
           "known_acc": float(correct[known_mask].mean()),
           "default_known_rate": float(np.mean([p.known for p, k in zip(preds, known_mask) if k])),
           "default_unknown_accepted": float(np.mean([p.known for p, k in zip(preds, known_mask) if not k])),
           "scores": {}}
    for name, s in scores.items():
        pos, neg = s[known_mask], s[~known_mask]
        out["scores"][name] = {"auroc": auroc(pos, neg), "tpr@fpr5": tpr_at_fpr(pos, neg, 0.05),
                               "tpr@fpr10": tpr_at_fpr(pos, neg, 0.10)}
    r = d_pred / D
    rk, ru = r[known_mask], r[~known_mask]
    out["factor_sweep"] = {f"{f:g}": {"known_rate": float((rk < f).mean()), "unknown_accepted": float((ru < f).mean())}
                           for f in FACTORS}
    for q in (0.90, 0.95):
        f = float(np.quantile(rk, q))
        out[f"factor_for_known{int(q * 100)}"] = f
    # calibration on known-class test images (correctness of the top-1 class)
    ck = correct[known_mask]
    out["ece_T1"] = expected_calibration_error(_softmax(logits[known_mask]).max(1), ck)
    out["ece_T"] = expected_calibration_error(_softmax(logits[known_mask] / T).max(1), ck)
    grid = np.exp(np.linspace(np.log(0.05), np.log(200), 80))
    nll = [_nll(logits[known_mask] / t, np.array([label_of[n] for n in learner.classes_]), fs.test_y[known_mask]) for t in grid]
    t_or = float(grid[int(np.argmin(nll))])
    out["oracle_T"] = t_or
    w = served.head.weight.astype(np.float64)
    pair = np.sqrt(((w[:, None] - w[None]) ** 2).sum(-1))[np.triu_indices(len(w), 1)]
    out["T_candidate_pairD"] = float(D * np.median(pair))
    t_c = 0.03 * out["T_candidate_pairD"]  # diagnostic only: a data-free temperature, constant read off this bench
    out["ece_T_candidate"] = expected_calibration_error(_softmax(logits[known_mask] / t_c).max(1), ck)
    out["ece_oracle_T"] = expected_calibration_error(_softmax(logits[known_mask] / t_or).max(1), ck)
    out["mean_conf_T1"] = float(_softmax(logits[known_mask]).max(1).mean())
    out["mean_conf_T"] = float(_softmax(logits[known_mask] / T).max(1).mean())
    return out


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def _nll(z: np.ndarray, col_label: np.ndarray, y: np.ndarray) -> float:
    z = z - z.max(1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(1, keepdims=True))
    col = np.array([np.flatnonzero(col_label == t)[0] for t in y])
    return float(-lp[np.arange(len(y)), col].mean())


def _mean(rows: list[dict], key) -> dict:
    vals = np.array([key(r) for r in rows], float)
    return {"mean": float(vals.mean()), "std": float(vals.std())}


def summarise(runs: list[dict]) -> dict:
    s = {k: _mean(runs, lambda r, k=k: r[k]) for k in
         ("known_acc", "default_known_rate", "default_unknown_accepted", "factor_for_known90", "factor_for_known95",
          "temperature", "oracle_T", "T_candidate_pairD", "ece_T1", "ece_T", "ece_oracle_T", "ece_T_candidate", "mean_conf_T1", "mean_conf_T")}
    s["scores"] = {name: {m: _mean(runs, lambda r, n=name, m=m: r["scores"][n][m]) for m in ("auroc", "tpr@fpr5", "tpr@fpr10")}
                   for name in runs[0]["scores"]}
    s["factor_sweep"] = {f: {m: _mean(runs, lambda r, f=f, m=m: r["factor_sweep"][f][m]) for m in ("known_rate", "unknown_accepted")}
                         for f in runs[0]["factor_sweep"]}
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--shots", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--cache-dir", default="cache/eval")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--out", default=str(out_path("open_set.json")))
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    load0 = os.getloadavg()
    t0 = time.time()
    results = {"machine": {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(), "loadavg_start": load0,
                           "python": sys.version.split()[0]},
               "protocol": "half the classes taught few-shot (default LearnerConfig), known = test images of "
                           "taught classes, unknown = test images of the others; score higher = more known",
               "config": LearnerConfig().to_dict(), "datasets": {}}
    for fs in load_feature_sets(args.synthetic, args.cache_dir, args.data_root):
        per = {}
        for shots in args.shots:
            runs = [run_one(fs, shots, seed) for seed in range(args.seeds)]
            per[f"{shots}-shot"] = {"summary": summarise(runs), "runs": runs}
            s = per[f"{shots}-shot"]["summary"]
            print(f"{fs.name} {shots}-shot: acc {s['known_acc']['mean']:.3f} default known {s['default_known_rate']['mean']:.3f} "
                  f"unknown acc {s['default_unknown_accepted']['mean']:.3f} f90 {s['factor_for_known90']['mean']:.2f} "
                  f"f95 {s['factor_for_known95']['mean']:.2f} T {s['temperature']['mean']:.2f} oracleT {s['oracle_T']['mean']:.2f} Tcand {s['T_candidate_pairD']['mean']:.2f} "
                  f"ECE {s['ece_T1']['mean']:.3f}->{s['ece_T']['mean']:.3f} (oracle {s['ece_oracle_T']['mean']:.3f}, 0.03*D*|dw| {s['ece_T_candidate']['mean']:.3f})")
            for name, m in s["scores"].items():
                print(f"   {name:28s} AUROC {m['auroc']['mean']:.3f}±{m['auroc']['std']:.3f}  TPR@5 {m['tpr@fpr5']['mean']:.3f}  "
                      f"TPR@10 {m['tpr@fpr10']['mean']:.3f}")
            print("   sweep f: " + "  ".join(f"{f}:{v['known_rate']['mean']:.2f}/{v['unknown_accepted']['mean']:.2f}"
                                           for f, v in s["factor_sweep"].items()))
        results["datasets"][fs.name] = {"n_classes": len(fs.classes), "train_pool": int(len(fs.train_y)),
                                        "test": int(len(fs.test_y)), "feature_dim": fs.dim,
                                        "backbone": fs.meta.get("backbone"), **per}
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["seconds"] = time.time() - t0
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out} in {results['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
