"""Issue 20, outcome 4: EfficientNet-Lite0 against Lite1 and Lite2, accuracy against time and memory.

    python -P bench/bench_backbones.py features --data-root data     # extract (cached) features
    python -P bench/bench_backbones.py priors   --data-root data     # gate prior D per backbone
    python -P bench/bench_backbones.py accuracy --data-root data --seeds 5
    python -P bench/bench_backbones.py real     --frames data/real_rgbd --seeds 5
    python -P bench/bench_backbones.py timing   --rounds 5
    python -P bench/bench_backbones.py report                         # JSON -> markdown table

Every part writes its section into ``runs/bench/backbones_lite.json`` (the others are kept).

* **Accuracy** (benchmark sets): the evaluation layer's seeded subsample (300 train / 200 test images
  per class), features through each backbone (ONNX, cached); no base session, 2 new classes per
  increment, 1 and 5 shots, top-1 over the test images of the classes seen so far, mean over
  increments; the core learner with its default configuration but no teach-time views (those would
  need each backbone's jittered views extracted too), and the nearest-class-mean peer (no
  hyperparameter, so it shows the features alone). Paired differences to Lite0 (same seed, same shots).
* **Real RGB-D set**: ``bench_real.bench_recognition`` (1 and 5 shots from the hand-drawn boxes) with
  each backbone.
* **Gate prior**: the RMS within-class pair distance after the learner's transform (Tukey 0.5 + L2) on
  the *train* split, the way Lite0's 0.77 was measured (docs/core.md "Open set").
* **Time and memory**: one fresh process per backbone and round (order rotated every round), ONNX
  Runtime on the CPU: one 640x480 frame; 6 object crops in one batch; the frame and its 6 crops in
  one batch of 7 (what the detector sends through the backbone per frame). Wall and process CPU time
  (medians of ``--reps``), resident memory after loading and at peak. The machine is shared, so the
  1-minute load average is recorded and ratios to Lite0 of the same round are given.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = out_path("backbones_lite.json")
BACKBONES = ("efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2")
DATASETS = ("fashion-mnist", "rendered-objects")
SHOTS = (1, 5)
# stream targets of the issue: frame predictions at 30 Hz; 10 Hz with 6 objects (frame + 6 crops)
FRAME_BUDGET_MS, OBJECTS_BUDGET_MS = 1000 / 30, 1000 / 10
_LOG = logging.getLogger("bench_backbones")


def _load_json() -> dict:
    return json.loads(OUT.read_text()) if OUT.exists() else {}


def _save(section: str, value) -> None:
    res = _load_json()
    res[section] = value
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=1) + "\n")


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


# ---------------------------------------------------------------- features and accuracy
def feature_sets(name: str, data_root: str, cache: str) -> dict:
    """The benchmark sets' cached features under backbone ``name`` (dataset -> FeatureSet)."""
    from cbcl_pr_ros.evaluation.datasets import discover, load_dataset
    from cbcl_pr_ros.evaluation.featureset import extract_feature_set
    from cbcl_pr_ros.features import make_backbone

    present, missing = discover(data_root, {})
    bb = make_backbone(name, runtime="onnx", threads=2, device="cpu", cache_dir=str(Path(cache).parent / "onnx"))
    out = {}
    for ds_name in DATASETS:
        if ds_name not in present:
            _LOG.warning("%s not present: %s", ds_name, missing.get(ds_name))
            continue
        out[ds_name] = extract_feature_set(load_dataset(ds_name, present[ds_name]), bb, cache, 300, 200)
    return out


def within_class_rms(x: np.ndarray, y: np.ndarray) -> float:
    """RMS distance between two vectors of one class, pooled over classes (pair distance^2 = 2 x the
    summed per-dimension variance)."""
    from cbcl_pr_ros.core.transform import FeatureTransform

    z = FeatureTransform(0.5, True)(np.asarray(x, np.float64))
    var = [((z[y == c] - z[y == c].mean(0)) ** 2).sum(1).sum() / (np.sum(y == c) - 1) for c in np.unique(y)]
    return float(np.sqrt(2.0 * np.mean(var)))


def run_fsil(fs, name: str, shots: int, seed: int) -> dict:
    """Default learner (no teach views) and the NCM peer on one seeded few-shot incremental run."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.evaluation.methods import MethodContext, make_method
    from cbcl_pr_ros.evaluation.protocols import few_shot_incremental

    sch = few_shot_incremental(fs.train_y, 2, shots, seed)
    learner = CBCLPRLearner(LearnerConfig(seed=seed), name, fs.dim)
    ncm = make_method("ncm", seed, MethodContext(few_shot=True))
    acc_l, acc_n, seen = [], [], []
    for step in sch.steps:
        learner.teach_increment({str(c): fs.train_x[i] for c, i in step.train_indices.items()})
        ncm.fit_increment({c: fs.train_x[i] for c, i in step.train_indices.items()})
        seen += list(step.new_classes)
        m = np.isin(fs.test_y, seen)
        pred = np.array(learner.classes_).astype(int)[learner.predict_scores(fs.test_x[m]).argmax(1)]
        acc_l.append(float((pred == fs.test_y[m]).mean()))
        acc_n.append(float((ncm.predict(fs.test_x[m]) == fs.test_y[m]).mean()))
    return {"learner": float(np.mean(acc_l)), "ncm": float(np.mean(acc_n))}


def cmd_features(args) -> None:
    for name in args.backbones:
        t0 = time.time()
        sets = feature_sets(name, args.data_root, args.cache)
        _LOG.info("%s: %s in %.0f s, load %s", name, {k: v.train_x.shape for k, v in sets.items()},
                  time.time() - t0, _load())


def cmd_priors(args) -> None:
    res = {"what": "RMS within-class pair distance after Tukey 0.5 + L2, train split (300 per class)",
           "load": _load()}
    for name in args.backbones:
        res[name] = {ds: round(within_class_rms(fs.train_x, fs.train_y), 4)
                     for ds, fs in feature_sets(name, args.data_root, args.cache).items()}
        _LOG.info("%s prior: %s", name, res[name])
    _save("priors", res)


def cmd_accuracy(args) -> None:
    res = {"protocol": "no base session, 2 classes per increment, mean top-1 over increments; default learner "
                       "without teach-time views, and the NCM peer; 300 train / 200 test per class subsample",
           "seeds": args.seeds, "load_before": _load(), "datasets": {}}
    t0 = time.time()
    for name in args.backbones:
        for ds, fs in feature_sets(name, args.data_root, args.cache).items():
            block = res["datasets"].setdefault(ds, {})
            for shots in SHOTS:
                runs = [run_fsil(fs, name, shots, seed) for seed in range(args.seeds)]
                block.setdefault(name, {})[f"{shots}_shot"] = {
                    k: [round(r[k], 4) for r in runs] for k in ("learner", "ncm")}
            _LOG.info("%s %s: %s (%.0f s)", name, ds, block[name], time.time() - t0)
    res["load_after"], res["seconds"] = _load(), round(time.time() - t0)
    _save("accuracy", res)


def cmd_real(args) -> None:
    import bench_real

    from real_rgbd_set import load_frames

    frames = load_frames(args.labels, args.frames)
    res = {"frames": len(frames), "objects": sum(len(f.objects) for f in frames), "seeds": args.seeds,
           "load_before": _load(), "backbones": {}}
    for name in args.backbones:
        res["backbones"][name] = bench_real.bench_recognition(frames, args.seeds, backbone=name)
    res["load_after"] = _load()
    _save("real_rgbd", res)


# ---------------------------------------------------------------- time and memory
def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _frame_and_crops(seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """A smooth, photo-like 640x480 frame and 6 object-sized crops of it (60 to 200 px)."""
    import cv2

    rng = np.random.default_rng(seed)
    frame = cv2.resize(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8), (640, 480), interpolation=cv2.INTER_CUBIC)
    crops = []
    for k in range(6):
        s = 60 + 28 * k
        y, x = int(rng.integers(0, 480 - s)), int(rng.integers(0, 640 - s))
        crops.append(np.ascontiguousarray(frame[y:y + s, x:x + s + 10 * (k % 3)]))
    return frame, crops


def _timed(fn, reps: int) -> dict:
    walls, cpus = [], []
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(1e3 * (time.perf_counter() - w0))
        cpus.append(1e3 * (time.process_time() - c0))
    return {"wall_ms_p50": round(float(np.median(walls)), 2), "wall_ms_p90": round(float(np.percentile(walls, 90)), 2),
            "cpu_ms_p50": round(float(np.median(cpus)), 2)}


def timing_worker(name: str, threads: int, reps: int, cache: str) -> dict:
    """One backbone in this (fresh) process: load, then time the three stream calls."""
    import cv2

    cv2.setNumThreads(1)
    import onnxruntime  # noqa: F401 - imported before the baseline, as every node has it

    from cbcl_pr_ros.features import make_backbone

    rss0 = _rss_mib()
    t0 = time.perf_counter()
    bb = make_backbone(name, runtime="onnx", threads=threads, device="cpu", cache_dir=cache)
    load_s = time.perf_counter() - t0
    rss_loaded = _rss_mib()
    frame, crops = _frame_and_crops()
    for _ in range(3):
        bb.extract([frame, *crops])
    res = {"backbone": name, "threads": threads, "input": bb.spec.crop, "load_s": round(load_s, 2),
           "load_before": _load(),
           "frame": _timed(lambda: bb.extract([frame]), reps),
           "crops6": _timed(lambda: bb.extract(crops), reps),
           "frame_plus_6": _timed(lambda: bb.extract([frame, *crops]), reps),
           "rss_baseline_mib": round(rss0, 1), "rss_loaded_mib": round(rss_loaded, 1),
           "rss_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    res["backbone_rss_mib"] = round(res["rss_peak_mib"] - rss0, 1)
    return res


def cmd_timing(args) -> None:
    # the exports first, so no round pays for one
    for name in args.backbones:
        subprocess.run([sys.executable, "-P", "-c", "import sys; from cbcl_pr_ros.features import make_backbone; "
                        f"make_backbone({name!r}, runtime='onnx', device='cpu', cache_dir={args.onnx_cache!r})"],
                       check=True)
    rounds = []
    for r in range(args.rounds):
        order = list(args.backbones[r % len(args.backbones):]) + list(args.backbones[:r % len(args.backbones)])
        row = {}
        for name in order:
            out = subprocess.run([sys.executable, "-P", __file__, "timing-worker", "--name", name, "--threads",
                                  str(args.threads), "--reps", str(args.reps), "--onnx-cache", args.onnx_cache],
                                 check=True, capture_output=True, text=True).stdout
            row[name] = json.loads(out.strip().splitlines()[-1])
            _LOG.info("round %d %s: frame %s, frame+6 %s, peak RSS %s MiB", r, name, row[name]["frame"],
                      row[name]["frame_plus_6"], row[name]["rss_peak_mib"])
        rounds.append(row)
    summary = {}
    base = args.backbones[0]
    for name in args.backbones:
        s = {"input_px": rounds[0][name]["input"]}
        for call in ("frame", "crops6", "frame_plus_6"):
            for k in ("wall_ms_p50", "cpu_ms_p50"):
                vals = [rd[name][call][k] for rd in rounds]
                s[f"{call}_{k}"] = round(float(np.median(vals)), 2)
                s[f"{call}_{k}_ratio_to_{base}"] = round(float(np.median(
                    [rd[name][call][k] / rd[base][call][k] for rd in rounds])), 3)
        for k in ("rss_loaded_mib", "rss_peak_mib", "backbone_rss_mib"):
            s[k] = round(float(np.median([rd[name][k] for rd in rounds])), 1)
        summary[name] = s
    _save(f"timing_threads{args.threads}", {"rounds": rounds, "summary": summary, "reps": args.reps,
                                            "cpu": _cpu_model(), "cores": os.cpu_count(), "load_after": _load(),
                                            "budgets_ms": {"frame_30hz": round(FRAME_BUDGET_MS, 1),
                                                           "frame_plus_6_objects_10hz": OBJECTS_BUDGET_MS}})


def _cpu_model() -> str:
    try:
        return next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


# ---------------------------------------------------------------- report
def cmd_report(args) -> None:
    """The docs table: learner accuracy % (paired difference to Lite0 ± std over seeds); real set: best
    class right on taught instances / never-taught ones rejected; stream calls; memory; prior."""
    res = _load_json()
    acc, real, pri = res.get("accuracy", {}), res.get("real_rgbd", {}), res.get("priors", {})
    lines = ["| backbone | input | " + " | ".join(f"{ds} {s}-shot" for ds in acc.get("datasets", {}) for s in SHOTS)
             + " | real 1-shot | real 5-shot | frame ms wall (CPU), CPU x Lite0 | frame + 6 crops ms wall (CPU), CPU x Lite0 "
             "| peak RSS MiB | prior D (FM, rendered) |",
             "|---|---|" + "---|" * (2 * len(acc.get("datasets", {})) + 6)]
    for name in BACKBONES:
        cells = [name]
        t = res.get(f"timing_threads{args.threads}", {}).get("summary", {}).get(name, {})
        cells.append(f"{t.get('input_px', '')}")
        for ds, block in acc.get("datasets", {}).items():
            for s in SHOTS:
                runs = block.get(name, {}).get(f"{s}_shot")
                if not runs:
                    cells.append("—")
                    continue
                a = 100 * np.array(runs["learner"])
                cell = f"{a.mean():.1f}"
                if name != BACKBONES[0] and BACKBONES[0] in block:
                    d = a - 100 * np.array(block[BACKBONES[0]][f"{s}_shot"]["learner"])
                    cell += f" ({d.mean():+.1f} ± {d.std():.1f})"
                cells.append(cell)
        for s in SHOTS:
            r = real.get("backbones", {}).get(name, {}).get(f"{s}_shot")
            cells.append(f"{r['taught_best_correct']:.2f} / {r['untaught_rejected']:.2f}" if r else "—")
        for call in ("frame", "frame_plus_6"):
            cells.append(f"{t[f'{call}_wall_ms_p50']:.0f} ({t[f'{call}_cpu_ms_p50']:.0f}), x{t[f'{call}_cpu_ms_p50_ratio_to_{BACKBONES[0]}']:.2f}"
                         if t else "—")
        cells.append(f"{t['rss_peak_mib']:.0f}" if t else "—")
        p = pri.get(name, {})
        cells.append(", ".join(f"{v:.3f}" for v in p.values()) if p else "—")
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("features", "priors", "accuracy", "real", "timing", "timing-worker", "report"))
    ap.add_argument("--backbones", nargs="+", default=list(BACKBONES))
    ap.add_argument("--data-root", default=str(ROOT / "data"))
    ap.add_argument("--cache", default=str(ROOT / "cache/eval"))
    ap.add_argument("--onnx-cache", default=str(ROOT / "cache/onnx"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--name", default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.command == "timing-worker":
        print(json.dumps(timing_worker(args.name, args.threads, args.reps, args.onnx_cache)))
        return
    {"features": cmd_features, "priors": cmd_priors, "accuracy": cmd_accuracy, "real": cmd_real,
     "timing": cmd_timing, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    main()
