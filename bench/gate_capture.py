"""Capture what the open-set gate sees, so gate rules can be compared offline (bench_gate_rules.py).

One learner per (source, seed, protocol, negatives, shots) of ``bench_first_shot.py`` and per
(seed, shots, increment) of ``bench_gate_sets.py``'s rendered-objects stand-in (``--what gate_sets``) and of
both benchmark sets with the other set to reject (``--what benchmark_sets``); kept per run: the
gate's centroids and D, the stored negatives, and each classified vector (transformed) with its
best class and what it is (taught and right, taught, never-taught and where it was seen).
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def _gate_state(learner) -> dict:
    from cbcl_pr_ros.core.open_set import class_extents

    gate = learner._served.gate
    return {"extent": class_extents(learner._memory) / gate.distance_threshold,
            "cents": [np.asarray(c, np.float32) for c in gate.centroids], "D": float(gate.distance_threshold),
            "factor": float(gate.factor), "neg": np.asarray(learner.negatives_.vectors, np.float32),
            "classes": tuple(learner._served.classes)}


def capture_first_shot(frs: list[dict], seed: int, shots: int, protocol: str, negatives: str) -> dict | None:
    """As bench_first_shot._run_source, the gate's inputs instead of its answers."""
    from bench_first_shot import taught_learner

    built = taught_learner(frs, seed, shots, protocol, negatives)
    if built is None:
        return None
    plan, learner, in_teach, in_stream = built
    taught = plan.taught
    out = _gate_state(learner)
    xs, best, kind = [], [], []
    for f in plan.test:
        preds = learner.predict(f["obj"], top_k=1)
        xt = learner.transform(f["obj"])
        for i, (name, p) in enumerate(zip(f["names"], preds)):
            if name in taught and f["id"] == plan.teach_frame[name]:
                continue
            xs.append(xt[i])
            best.append(out["classes"].index(p.nearest_label))
            if name in taught:
                kind.append("taught_right" if p.nearest_label == name else "taught_wrong")
            else:
                kind.append("in_stream" if name in in_stream else "in_teaching_frame" if name in in_teach
                            else "never_seen")
    out |= {"x": np.asarray(xs, np.float32).reshape(-1, out["cents"][0].shape[1]), "best": np.asarray(best, int),
            "kind": np.asarray(kind)}
    return out


def capture_gate_sets(fs, other_x: np.ndarray, shots: int, seed: int, pool: np.ndarray, negatives: int = 128) -> list[dict]:
    """As bench_gate_sets.run: per increment the gate's inputs, the taught classes' test vectors
    (kind ``taught_right``/``taught_wrong``) and the other set's (kind ``other``)."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.evaluation.protocols import few_shot_incremental

    rng = np.random.default_rng([seed, 99])
    learner = CBCLPRLearner(LearnerConfig(seed=seed), "efficientnet_lite0", fs.dim)
    learner.add_negatives(pool[rng.choice(len(pool), min(negatives, len(pool)), replace=False)])
    seen, res = [], []
    for step in few_shot_incremental(fs.train_y, 2, shots, seed).steps:
        learner.teach_increment({str(c): fs.train_x[i] for c, i in step.train_indices.items()})
        seen += [str(c) for c in step.new_classes]
        known = np.isin(fs.test_y.astype(str), seen)
        st = _gate_state(learner)
        pk = learner.predict(fs.test_x[known], top_k=1)
        po = learner.predict(other_x[:400], top_k=1)
        truth = fs.test_y[known].astype(str)
        x = np.concatenate([learner.transform(fs.test_x[known]), learner.transform(other_x[:400])])
        best = [st["classes"].index(p.nearest_label) for p in pk + po]
        kind = ["taught_right" if p.nearest_label == t else "taught_wrong" for p, t in zip(pk, truth)] + ["other"] * len(po)
        res.append(st | {"x": np.asarray(x, np.float32), "best": np.asarray(best, int), "kind": np.asarray(kind)})
    return res


def main() -> None:
    import argparse
    import pickle

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / "cache/real_first_shot.pkl"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stream-seeds", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "cache/gate_capture.pkl"))
    ap.add_argument("--what", default="first_shot,gate_sets")
    ap.add_argument("--gate-seeds", type=int, default=3)
    args = ap.parse_args()
    data = pickle.loads(Path(args.cache).read_bytes())
    by_source = defaultdict(list)
    for f in data:
        by_source[f["source"]].append(f)
    out = pickle.loads(Path(args.out).read_bytes()) if Path(args.out).exists() else {}
    if "first_shot" in args.what:
        regimes = [("teaching_frame", "frames", args.seeds)] + [
            ("stream", n, args.stream_seeds) for n in ("frames", "frames+stream", "frames+stream_covisible")]
        for shots in (1, 5, 10):
            for protocol, negatives, seeds in regimes:
                key = ("first_shot", protocol, negatives, shots)
                out[key] = {(src, seed): capture_first_shot(frs, seed, shots, protocol, negatives)
                            for src, frs in by_source.items() for seed in range(seeds)}
                print(key, flush=True)
                Path(args.out).write_bytes(pickle.dumps(out))
    if "gate_sets" in args.what:
        from bench_gate_sets import load

        sets = load("data", "cache/eval", ("rendered-objects",))
        frames = data

        def crops(fs: list) -> np.ndarray:
            return np.concatenate([np.concatenate([f["obj"], f["jit"].reshape(-1, f["obj"].shape[1])]) for f in fs])

        pool = crops([f for f in frames if f["source"] != "ucn"])
        rows = crops([f for f in frames if f["source"] == "ucn"])
        other = rows[np.random.default_rng(5).choice(len(rows), min(400, len(rows)), replace=False)]
        for shots in (1, 5, 10):
            key = ("gate_sets", "rendered-objects", "real", shots)
            out[key] = {seed: capture_gate_sets(sets["rendered-objects"], other, shots, seed, pool)
                        for seed in range(args.gate_seeds)}
            print(key, flush=True)
            Path(args.out).write_bytes(pickle.dumps(out))
    if "benchmark_sets" in args.what:
        # bench_gate_sets.py --negatives-from real (other set: the other benchmark set's test images):
        # each set taught with the other one to reject and 128 crops of every real table as negatives
        from bench_gate_sets import SETS, load

        sets = load("data", "cache/eval", SETS)
        pool = np.concatenate([np.concatenate([f["obj"], f["jit"].reshape(-1, f["obj"].shape[1])]) for f in data])
        for name in SETS:
            other = sets[[n for n in SETS if n != name][0]]
            for shots in (1, 5, 10):
                key = ("gate_sets", name, "set", shots)
                out[key] = {seed: capture_gate_sets(sets[name], other.test_x, shots, seed, pool)
                            for seed in range(args.gate_seeds)}
                print(key, flush=True)
                Path(args.out).write_bytes(pickle.dumps(out))


if __name__ == "__main__":
    main()
