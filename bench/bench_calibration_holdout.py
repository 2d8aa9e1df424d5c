"""Checks the calibration's one constant (``calibration.SHOT_EXPONENT``) without test images.

The exponent was first picked on test-set ECE; this bench measures ECE on *held-out train images*
instead (train images of the seen classes that were not drawn as shots), for exponents 0, 1 and 2,
same protocol as bench_accuracy (no base session, 2 classes per increment, mean over seeds).

    python -P bench/bench_calibration_holdout.py --dataset fashion-mnist --seeds 5 --shots 5,10
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402
from bench_accuracy import load_features  # noqa: E402

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig  # noqa: E402
from cbcl_pr_ros.core import calibration  # noqa: E402
from cbcl_pr_ros.core.open_set import expected_calibration_error  # noqa: E402
from cbcl_pr_ros.evaluation.experiments import machine_info  # noqa: E402
from cbcl_pr_ros.evaluation.protocols import few_shot_incremental  # noqa: E402

OUT = out_path("calibration_holdout")


def run(fs, shots: int, seed: int, exponent: float) -> float:
    """ECE over every increment's predictions on the held-out train vectors of the seen classes."""
    calibration.SHOT_EXPONENT = exponent
    sch = few_shot_incremental(fs.train_y, 2, shots, seed)
    drawn = np.concatenate([i for s in sch.steps for i in s.train_indices.values()])
    held = np.setdiff1d(np.arange(len(fs.train_y)), drawn)
    learner = CBCLPRLearner(LearnerConfig(seed=seed), "efficientnet_lite0", fs.dim)
    conf, ok, seen = [], [], []
    for step in sch.steps:
        learner.teach_increment({str(c): fs.train_x[i] for c, i in step.train_indices.items()})
        seen += list(step.new_classes)
        m = held[np.isin(fs.train_y[held], seen)]
        prob = learner.predict_scores(fs.train_x[m])
        names = np.array(learner.classes_).astype(int)
        conf.append(prob.max(1))
        ok.append(names[prob.argmax(1)] == fs.train_y[m])
    return expected_calibration_error(np.concatenate(conf), np.concatenate(ok))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--shots", default="5,10")
    ap.add_argument("--exponents", default="0,1,2")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--cache-dir", default="cache/eval")
    args = ap.parse_args()
    t0 = time.time()
    fs = load_features(args.dataset, args.data_root, args.cache_dir, flips=False)["fs"]
    rows = {}
    for shots in [int(s) for s in args.shots.split(",")]:
        for e in [float(x) for x in args.exponents.split(",")]:
            eces = [run(fs, shots, seed, e) for seed in range(args.seeds)]
            rows[f"{shots} shots, exponent {e:g}"] = {"mean": float(np.mean(eces)), "std": float(np.std(eces)),
                                                     "per_seed": eces}
            print(f"{args.dataset} {shots} shots exponent {e:g}: ECE {np.mean(eces):.3f} ± {np.std(eces):.3f}",
                  flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    out = {"dataset": args.dataset, "seeds": args.seeds, "eval": "held-out train images (never test images)",
           "machine": machine_info(), "seconds": time.time() - t0, "loadavg_after": list(os.getloadavg()),
           "ece": rows}
    (OUT / f"{args.dataset}.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
