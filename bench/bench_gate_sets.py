"""Open-set gate on the benchmark sets, with and without negatives (issue 20, outcome 3).

A learner of one data set (Fashion-MNIST or the rendered objects) is taught 2 classes per increment
(1, 5 or 10 shots, no teach-time views) until all 10 are known; after each increment: the share of
the taught classes' test images accepted as known, and of *another* data set's test images rejected.
``negatives``: the gate is given ``--negatives`` images of the other data set's *train* split first
(:meth:`CBCLPRLearner.add_negatives`), so the rejected test images are other images than the ones
it saw ("none": no negatives, the gate of ``1.3 D_gate`` alone).  ``--negatives-from real``: the
negatives come from a third data set instead, the ones a robot has: crops of real tables
(``bench_first_shot.py``'s cache of the real RGB-D set's masked object crops and jittered copies).  Also the confidence: ECE of the best
class's confidence on the taught classes' test images, and with T = 1 where no held-out shot exists
yet (what a one-shot learner answered before issue 20).

``--other-from real``: the images to reject are crops of one real table (``--other-table``), never
given as negatives; with ``--negatives-from real`` the negatives are the other tables' crops (the
rendered objects alone need no download: ``--sets rendered-objects``).

    python -P bench/bench_gate_sets.py [--seeds 5]   # -> runs/bench/gate_sets.json
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
from cbcl_pr_ros.core.open_set import expected_calibration_error
from cbcl_pr_ros.evaluation.experiments import machine_info
from cbcl_pr_ros.evaluation.protocols import few_shot_incremental

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

SETS = ("fashion-mnist", "rendered-objects")


def load(data_root: str, cache: str, sets: tuple[str, ...] = SETS) -> dict:
    from cbcl_pr_ros.evaluation.datasets import discover, load_dataset
    from cbcl_pr_ros.evaluation.featureset import extract_feature_set
    from cbcl_pr_ros.features import backbones

    present, missing = discover(data_root, {})
    bb = backbones.make_backbone("efficientnet_lite0", runtime="onnx", threads=2, cache_dir=str(Path(cache).parent / "onnx"))
    out = {}
    for name in sets:
        if name not in present:
            raise SystemExit(f"{name} is not present: {missing.get(name)}")
        out[name] = extract_feature_set(load_dataset(name, present[name]), bb, cache, 300, 200)
    return out


def curve_eces(learner, x: np.ndarray, right: np.ndarray) -> dict[str, float]:
    """ECE of the taught images' answers under each confidence curve of the gate that
    ``bench_first_shot.confidence_loso`` compares (``"softness@centre"``; single images: no one-place
    rule), from the best class's probability and the answer's ratio."""
    from bench_first_shot import CENTRES, SOFTNESSES, gate_confidence

    served = learner._served
    xt = learner.transform(x)
    scores = served.head.scores(xt)
    best = scores.argmax(axis=1)
    parts = np.stack([scores[np.arange(len(xt)), best], served.gate.ratios(xt, best), np.full(len(xt), np.nan)], 1)
    return {f"{s}@{c}": expected_calibration_error(gate_confidence(parts, s, c), right)
            for s in SOFTNESSES for c in CENTRES}


def run(fs, other, shots: int, seed: int, negatives: int, overrides: dict | None = None,
        pool: np.ndarray | None = None, curves: bool = False) -> dict:
    rng = np.random.default_rng([seed, 99])
    learner = CBCLPRLearner(LearnerConfig(seed=seed, **(overrides or {})), "efficientnet_lite0", fs.dim)
    pool = other.train_x if pool is None else pool
    if negatives:
        learner.add_negatives(pool[rng.choice(len(pool), min(negatives, len(pool)), replace=False)])
    rows, seen = [], []
    for step in few_shot_incremental(fs.train_y, 2, shots, seed).steps:
        learner.teach_increment({str(c): fs.train_x[i] for c, i in step.train_indices.items()})
        seen += [str(c) for c in step.new_classes]
        known = np.isin(fs.test_y.astype(str), seen)
        pk = learner.predict(fs.test_x[known], top_k=1)
        po = learner.predict(other.test_x[:400], top_k=1)
        truth = fs.test_y[known].astype(str)
        conf = np.array([p.confidence for p in pk])
        right = np.array([p.nearest_label == t for p, t in zip(pk, truth)])
        # before issue 20 a learner with no held-out shot (1 shot per class) answered with T = 1
        head = learner._served.head
        before = (head.with_temperature(1.0).scores(learner.transform(fs.test_x[known])).max(axis=1)
                  if learner.temperature_weight_ == 0 else conf)
        rows.append({"classes": len(seen), "accepted_taught": float(np.mean([p.known for p in pk])),
                     "rejected_other_set": float(np.mean([not p.known for p in po])),
                     "ece": expected_calibration_error(conf, right),
                     "ece_before_issue20": expected_calibration_error(before, right), "accuracy": float(right.mean())})
        if curves:
            rows[-1] |= {f"ece_curve_{k}": v for k, v in curve_eces(learner, fs.test_x[known], right).items()}
    return {"first": rows[0], "last": rows[-1],
            "mean": {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--shots", default="1,5,10")
    ap.add_argument("--negatives", type=int, default=128, help="other-set train images given as negatives")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--cache-dir", default="cache/eval")
    ap.add_argument("--out", default=str(out_path("gate_sets.json")))
    ap.add_argument("--learner", nargs="*", default=[], metavar="KEY=VALUE",
                    help="LearnerConfig overrides, e.g. negative_rank=6")
    ap.add_argument("--negatives-from", choices=("other", "real"), default="other",
                    help="other: the other set's train images; real: crops of real tables (a third set)")
    ap.add_argument("--real-cache", default="cache/real_first_shot.pkl", help="bench_first_shot.py's feature cache")
    ap.add_argument("--sets", default=",".join(SETS), help="the sets taught")
    ap.add_argument("--other-from", choices=("set", "real"), default="set",
                    help="set: the other benchmark set's test images to reject; real: a real table's crops "
                         "(--other-table), never given as negatives (the negatives then come from the other tables)")
    ap.add_argument("--other-table", default="ucn", help="the real set's source whose crops are rejected")
    ap.add_argument("--curves", action="store_true",
                    help="also the ECE under each confidence curve bench_first_shot.py --confidence-loso compares")
    args = ap.parse_args()
    if args.other_from == "real" and args.negatives_from != "real":
        ap.error("--other-from real needs --negatives-from real (a table's crops have no train split)")
    pool, other_real = None, None
    if args.negatives_from == "real" or args.other_from == "real":
        import pickle
        from types import SimpleNamespace

        frames = pickle.loads(Path(args.real_cache).read_bytes())

        def crops(fs: list) -> np.ndarray:
            return np.concatenate([np.concatenate([f["obj"], f["jit"].reshape(-1, f["obj"].shape[1])]) for f in fs])

        held = args.other_table if args.other_from == "real" else None
        pool = crops([f for f in frames if f["source"] != held]) if args.negatives_from == "real" else None
        if held is not None:
            rows = crops([f for f in frames if f["source"] == held])
            other_real = SimpleNamespace(test_x=rows[np.random.default_rng(5).choice(len(rows), min(400, len(rows)),
                                                                                      replace=False)])
    over = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.learner)}
    t0, load0 = time.perf_counter(), os.getloadavg()
    taught = tuple(args.sets.split(","))
    sets = load(args.data_root, args.cache_dir, taught if args.other_from == "real" else SETS)
    res: dict = {"benchmark": "bench_gate_sets", "machine": machine_info(), "loadavg_before": [round(v, 2) for v in load0],
                 "seeds": args.seeds, "negatives": args.negatives, "negatives_from": args.negatives_from,
                 "learner_overrides": over, "results": {}}
    res["other_from"] = args.other_from if args.other_from == "set" else f"real:{args.other_table}"
    for name in taught:
        other = other_real if other_real is not None else sets[[n for n in SETS if n != name][0]]
        for shots in (int(s) for s in args.shots.split(",")):
            for neg in (0, args.negatives):
                runs = [run(sets[name], other, shots, seed, neg, over, pool, args.curves) for seed in range(args.seeds)]
                key = f"{name}/{shots}_shot/" + ("negatives" if neg else "none")
                res["results"][key] = {part: {k: round(float(np.mean([r[part][k] for r in runs])), 3) for k in runs[0][part]}
                                       for part in ("first", "mean", "last")}
                print(key, json.dumps(res["results"][key]), flush=True)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
