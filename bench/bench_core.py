"""Benchmark of the core library -> runs/bench/core.json.

1. Teach one new 10-shot class when 100 classes are known (1280-d synthetic features): clustering +
   rehearsal + retrain until the learner is ready, for the fast default and the paper's schedule
   (retrains on ``fit_threads=1``, the default); without ``--quick`` also the fast default with
   ``fit_threads=None`` (BLAS / torch on ``--threads`` threads during the retrain).
2. Prediction time of one feature vector vs number of stored clusters (100 .. 10,000) for CBCL's
   weighted vote and CBCL-PR's linear head.
3. Memory bytes per class, full vs diagonal covariance, few-shot (10) and full-data (500) classes.

Run: ``python bench/bench_core.py [--threads 2] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.classifiers import fit_gaussian_head, fit_weighted_vote
from cbcl_pr_ros.core.clustering import ClassClusters
from cbcl_pr_ros.core.memory import ClusterMemory
from cbcl_pr_ros.evaluation.experiments import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

DIM = 1280




def synthetic(rng, n_classes, shots):
    means = np.abs(rng.normal(0, 1, (n_classes, DIM))) * 2.0  # post-ReLU-like, non-negative
    return {f"c{i}": np.abs(means[i] + rng.normal(0, 0.7, (shots, DIM))) for i in range(n_classes)}


def bench_teach(config: LearnerConfig, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    known = synthetic(rng, 100, 10)
    new = synthetic(np.random.default_rng(1), repeats, 10)
    times = []
    for i, (name, x) in enumerate(new.items()):
        learner = CBCLPRLearner(config, "synthetic", DIM)
        learner.teach_increment(known)
        t0 = time.perf_counter()
        learner.teach(f"new{i}", x)
        times.append(time.perf_counter() - t0)
    return {"classifier": config.classifier, "epochs_per_increment": config.epochs_per_increment,
            "fit_threads": config.fit_threads, "loadavg_1min_after": os.getloadavg()[0],
            "seconds_median": float(np.median(times)), "seconds_all": times,
            "clusters_in_memory": learner.n_clusters_, "distance_threshold": learner.distance_threshold_}


def memory_with_clusters(n_clusters: int, per_class: int = 10) -> ClusterMemory:
    rng = np.random.default_rng(2)
    classes = {}
    for c in range(n_clusters // per_class):
        means = rng.normal(0, 1, (per_class, DIM)).astype(np.float32)
        classes[f"c{c}"] = ClassClusters.from_stats(np.full(per_class, 5), means, "diagonal",
                                                    list(np.full((per_class, DIM), 4.0)))
    return ClusterMemory(DIM, "diagonal", classes=classes)


def time_one(fn, x, reps) -> float:
    fn(x)
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(x)
        t.append(time.perf_counter() - t0)
    return float(np.median(t)) * 1e3


def bench_predict(sizes, reps) -> list[dict]:
    out = []
    x = np.random.default_rng(3).normal(0, 1, (1, DIM))
    for n in sizes:
        mem = memory_with_clusters(n)
        vote = fit_weighted_vote(mem, 5)
        head = fit_gaussian_head(mem)
        learner = CBCLPRLearner(LearnerConfig(distance_threshold=10.0), "synthetic", DIM)
        learner._memory = mem
        learner._served = learner._build(mem, 10.0, 1, head=head)
        out.append({"clusters": n, "classes": len(mem),
                    "cbcl_vote_ms": time_one(vote.scores, x, reps),
                    "cbcl_pr_linear_ms": time_one(head.scores, x, reps),
                    "cbcl_pr_learner_predict_ms": time_one(lambda v: learner.predict(v), x, reps)})
    return out


def bench_bytes() -> list[dict]:
    out = []
    rng = np.random.default_rng(4)
    for shots in (10, 500):
        x = np.abs(rng.normal(2, 1, (shots, DIM)))
        for mode in ("full", "diagonal"):
            learner = CBCLPRLearner(LearnerConfig(covariance=mode), "synthetic", DIM)
            learner.teach("a", x)
            info = learner.class_info()[0]
            out.append({"shots": shots, "covariance": mode, "clusters": info.clusters,
                        "bytes_per_class": info.memory_bytes,
                        "dense_full_covariance_bytes_would_be": info.clusters * DIM * DIM * 4})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    ap.add_argument("--out", default=str(out_path("core.json")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load_start = os.getloadavg()
    reps = 3 if args.quick else 5
    res = {
        "machine": {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(), "torch_threads": args.threads,
                    "python": platform.python_version(), "torch": torch.__version__,
                    "loadavg_start": load_start},
        "teach_one_10shot_class_100_known": [
            bench_teach(LearnerConfig(seed=0), reps),
            bench_teach(LearnerConfig.paper(seed=0), reps),
        ] + ([] if args.quick else [
            # the process's own thread settings during the retrain (the pre-fit_threads behaviour)
            bench_teach(LearnerConfig(seed=0, fit_threads=None), 3),
        ]),
        "predict_one_vector_vs_clusters": bench_predict(
            [100, 1000, 10000] if args.quick else [100, 300, 1000, 3000, 10000], 50 if args.quick else 200),
        "memory_bytes_per_class": bench_bytes(),
    }
    res["machine"]["loadavg_end"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
