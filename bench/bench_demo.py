"""Figures of the robot experiment: teaching-session accuracy, pointing error, the main job's wall time.

1. Teaching-session accuracy (the paper's robot experiment, on the rendered object set): the set is
   rendered once (``cbcl_pr_ros.cli.render_dataset``) into a cache dir and its features extracted once
   (features layer backbone + FeatureCache). Per seed: classes shuffled, taught 2 per increment with
   5 or 10 shots (random views of the class; the class's other views are held out) to a fresh
   ``CBCLPRLearner``; after each increment, accuracy on the held-out views of every class seen so far.
2. Pointing error: IK pointing at random reachable table positions, checked by forward kinematics.
3. The main job (``python -m cbcl_pr_ros.nodes.demo``) run once: wall time, its accuracies, its
   pointing and localisation errors.

Writes runs/bench/demo.json. Run: ``source scripts/env.sh && python -P bench/bench_demo.py``
(``--demo-transcript runs/demo/transcript.json`` reuses a finished run instead of running the job).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from cbcl_pr_ros.evaluation.experiments import machine_info as _shared_machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict:
    info = _shared_machine_info()
    return {"cpu": info["cpu"], "nproc": info["nproc"], "python": info["python"], "platform": info["os"]}


def rendered_set(cache: Path, seed: int) -> Path:
    """Render the default object set once (22 classes x 30 views, 10 train + 20 test per class)."""
    root = cache / f"sim_objects_seed{seed}"
    if not (root / "manifest.json").exists():
        subprocess.run([sys.executable, "-P", "-m", "cbcl_pr_ros.cli.render_dataset", str(root), "--seed", str(seed),
                        "--overwrite"], check=True)
    return root


def features(root: Path, cache: Path, threads: int) -> tuple[dict, dict]:
    """{class: (30, d)} features of every view (train and test splits together), computed once."""
    from cbcl_pr_ros.features import make_backbone
    from cbcl_pr_ros.features.cache import FeatureCache

    manifest = json.loads((root / "manifest.json").read_text())
    bb = make_backbone("efficientnet_lite0", runtime="onnx", threads=threads)
    files = [root / r["file"] for r in manifest["images"]]
    t0 = time.perf_counter()
    fc = FeatureCache(cache / "features")
    X = fc.features_for_files(bb, files)
    info = {"backbone": bb.name, "feature_dim": int(X.shape[1]), "images": len(files),
            "seconds": round(time.perf_counter() - t0, 2), "cache_hits": fc.hits, "cache_misses": fc.misses}
    views: dict[str, list] = {}
    for r, x in zip(manifest["images"], X):
        views.setdefault(r["class"], []).append(x)
    return {c: np.stack(v) for c, v in views.items()}, info


def teaching_sessions(views: dict, shots: int, seeds: int, per_inc: int = 2, open_set: str = "none") -> dict:
    """Accuracy after each increment; ``open_set="none"`` is the paper's closed-set figure, the nodes'
    default ("distance") may also answer "unknown", which counts as wrong.

    Per seed and class, ``shots`` of the class's views are taught and the others held out (the rendered
    set's fixed 10-view train split would make every 10-shot session see the same views)."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    curves, finals = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        classes = list(rng.permutation(sorted(views)))
        split = {c: rng.permutation(len(views[c])) for c in classes}
        train = {c: views[c][split[c][:shots]] for c in classes}
        test = {c: views[c][split[c][shots:]] for c in classes}
        learner = CBCLPRLearner(LearnerConfig(seed=seed, fit_threads=1, open_set=open_set), backbone="efficientnet_lite0",
                                feature_dim=next(iter(views.values())).shape[1])
        curve = []
        for i in range(0, len(classes), per_inc):
            batch = {c: train[c] for c in classes[i:i + per_inc]}
            learner.teach_increment(batch)
            seen = classes[: i + per_inc]
            X = np.concatenate([test[c] for c in seen])
            y = np.concatenate([[c] * len(test[c]) for c in seen])
            pred = np.array([p.label for p in learner.predict(X)])
            curve.append(float(np.mean(pred == y)))
        curves.append(curve)
        finals.append(curve[-1])
    C = np.array(curves)
    return {"shots": shots, "open_set": open_set, "seeds": seeds, "classes": len(views),
            "held_out_views_per_class": len(next(iter(views.values()))) - shots, "classes_per_increment": per_inc,
            "final_accuracy_mean": round(float(np.mean(finals)), 4), "final_accuracy_std": round(float(np.std(finals)), 4),
            "mean_over_increments_mean": round(float(C.mean(1).mean()), 4),
            "mean_over_increments_std": round(float(C.mean(1).std()), 4),
            "curve_mean": C.mean(0).round(4).tolist(), "curve_std": C.std(0).round(4).tolist()}


def pointing(n: int, seed: int = 0) -> dict:
    """IK pointing at random table positions (object centres 3-12 cm above the table)."""
    from cbcl_pr_ros.robot.kinematics import BaxterKinematics, Unreachable, ray_distance
    from cbcl_pr_ros.robot.world import quaternion_to_matrix

    rng = np.random.default_rng(seed)
    kin = BaxterKinematics("right")
    errs, refused, secs = [], 0, []
    try:
        for _ in range(n):
            tgt = np.array([rng.uniform(0.55, 0.85), rng.uniform(-0.45, 0.15), -0.18 + rng.uniform(0.03, 0.12)])
            t0 = time.perf_counter()
            try:
                sol = kin.point_at(tgt)
            except Unreachable:
                refused += 1
                continue
            finally:
                secs.append(time.perf_counter() - t0)
            hp, hq = kin.link_pose(sol.as_dict(), "right_hand")  # independent FK check
            errs.append(ray_distance(hp, quaternion_to_matrix(hq)[:, 2], tgt))
    finally:
        kin.close()
    e = np.array(errs) * 100
    return {"targets": n, "refused": refused, "ray_error_cm_mean": round(float(e.mean()), 3),
            "ray_error_cm_p95": round(float(np.percentile(e, 95)), 3), "ray_error_cm_max": round(float(e.max()), 3),
            "solve_seconds_mean": round(float(np.mean(secs)), 3)}


def main_job(transcript: str | None) -> dict:
    if transcript is None:
        out = Path(tempfile.mkdtemp(prefix="cbcl_bench_demo_"))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-P", "-m", "cbcl_pr_ros.nodes.demo", "--out", str(out)], check=True,
                       cwd=ROOT, timeout=1800)
        process_s = time.perf_counter() - t0
        path = out / "transcript.json"
        source = "run by this benchmark"
    else:
        path, process_s, source = Path(transcript), None, f"reused {transcript}"
    tr = json.loads(path.read_text())
    phases = []
    for ph in tr["phases"]:
        pts = [p for p in ph["point"] if p["success"]]
        phases.append({
            "shots": ph["shots"], "classification_accuracy": ph["accuracy"],
            "pointed_right_object": sum(p.get("right_object", False) for p in pts), "asked": len(ph["point"]),
            "refused": len(ph["point"]) - len(pts),
            "ray_error_cm_mean": round(float(np.mean([p["ray_error_m"] for p in pts]) * 100), 3) if pts else None,
            "localisation_error_cm_mean": round(float(np.mean([p["localisation_error_m"] for p in pts
                                                               if p.get("right_object")] or [np.nan]) * 100), 2)})
    return {"source": source, "wall_time_s": tr["wall_time_s"], "process_seconds": process_s and round(process_s, 1),
            "classes": tr["classes"], "phases": phases}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--shots", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "cbcl-bench-demo"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pointing-targets", type=int, default=40)
    ap.add_argument("--demo-transcript", default=None, help="reuse this transcript.json instead of running the job")
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--out", default=str(out_path("demo.json")))
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    res: dict = {"machine": machine(), "loadavg_start": os.getloadavg()}
    t0 = time.perf_counter()
    root = rendered_set(cache, 0)
    res["dataset"] = {"root": str(root), "render_seconds": json.loads((root / "manifest.json").read_text())["render_seconds"]}
    views, res["features"] = features(root, cache, args.threads)
    res["dataset"].update({"classes": len(views), "views_per_class": len(next(iter(views.values())))})
    res["teaching"] = [teaching_sessions(views, s, args.seeds, open_set=o)
                       for o in ("none", "distance") for s in args.shots]
    for t in res["teaching"]:
        print(f"{t['shots']:>2} shots, open set {t['open_set']:8s}, {t['seeds']} seeds: final accuracy {t['final_accuracy_mean']:.3f} ± "
              f"{t['final_accuracy_std']:.3f} over {t['classes']} classes; mean over increments "
              f"{t['mean_over_increments_mean']:.3f} ± {t['mean_over_increments_std']:.3f}")
    res["pointing"] = pointing(args.pointing_targets)
    print("pointing:", res["pointing"])
    if not args.skip_demo:
        res["main_job"] = main_job(args.demo_transcript)
        print("main job:", res["main_job"])
    res["loadavg_end"] = os.getloadavg()
    res["bench_seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
