"""Issue 15 figures: the default head against the frozen-feature peers at 1, 5 and 10 shots, its
calibration (ECE, reliability plots), the open-set gate after a one-shot start and the memory per class.

Protocol (the issue's): no base session, 2 new classes per increment, seeds 0..N-1 (class order and
shots), top-1 over the test images of the classes seen so far after every increment; a run's figure is
the mean over its increments; differences are *paired* (same seed, same shots) and given as mean ± std
over seeds.  Features: the evaluation layer's cached EfficientNet-Lite0 features (``cbcl-eval``'s
subsample) and, for the augmentation rows, the same images flipped left-right through the same
backbone.  No hyperparameter was chosen on these test images (docs/core.md says where each came from).

    python -P bench/bench_accuracy.py --dataset fashion-mnist --seeds 10      # one data set -> JSON
    python -P bench/bench_accuracy.py --report                                 # JSON(s) -> markdown

Writes ``runs/bench/accuracy/<dataset>.json``, ``accuracy.md`` and ``reliability_<dataset>.png``.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.classifiers.base import softmax
from cbcl_pr_ros.core.open_set import expected_calibration_error
from cbcl_pr_ros.evaluation.experiments import machine_info
from cbcl_pr_ros.evaluation.featureset import FeatureSet
from cbcl_pr_ros.evaluation.methods import PEERS, MethodContext, make_method
from cbcl_pr_ros.evaluation.protocols import few_shot_incremental
from cbcl_pr_ros.settings.params import PARAMS

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import auroc, out_path  # noqa: E402

_LOG = logging.getLogger("bench_accuracy")
OUT = out_path("accuracy")
BACKBONE = "efficientnet_lite0"
# the learner configurations measured beside each other (name -> config overrides)
# "default" is the product default end to end: the learner's default config taught each shot and
# TEACH_VIEWS jittered views of it (the learner node's ``teach_views``, 8 by default), through the
# same backbone (views cached by bench_levers.py extract), kept by the learner as spread, not shots;
# one row turns the views off, one keeps them unrecentred; the peers get the raw shots.
TEACH_VIEWS = next(p.default for p in PARAMS if p.name == "teach_views")
VIEW_SPREAD = next(p.default for p in PARAMS if p.name == "teach_view_spread")
VIEWS_DIR = "cache/eval-views"
LEARNERS = {
    "default": {},
    "default without teach views (teach_views=0)": {"teach_views": 0},
    "default with teach_views=8 (spread 0.5)": {"teach_views": 8},
    "teach_views=8, not recentred": {"teach_views": 8, "teach_view_spread": None},
    "paper (faithful: linear_sgd, raw, no views)": "paper",
    "default, no transform": {"transform": "none", "calibrate": False},  # T changes no argmax
    "previous default (gaussian, raw)": {"classifier": "gaussian", "transform": "none", "calibrate": False,
                                         "teach_views": 0},
    # outcome 5: the default stores each class in float16 when faithful; this row keeps float32
    "default, float32 memory": {"memory_precision": "float32", "calibrate": False},  # T moves no argmax
}
# --ablations: the transform for the other heads, and the paper's head
ABLATIONS = {
    "LDA head (gaussian), tukey_l2": {"classifier": "gaussian"},
    "NCM, tukey_l2": {"classifier": "ncm"},
    "paper (linear_sgd, raw)": "paper",
    "paper head, tukey_l2": {"classifier": "linear_sgd", "epochs_per_increment": 2},
}


# ---------------------------------------------------------------- features
class _Flipped:
    """Left-right mirror of a lazy image sequence."""

    def __init__(self, seq) -> None:
        self.seq = seq

    def __len__(self) -> int:
        return len(self.seq)

    def __getitem__(self, i: int) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(self.seq[i])[:, ::-1])


def _unrelated_images(size: int = 224, n: int = 12, seed: int = 0) -> list[np.ndarray]:
    """Blank frames (black, white, greys, one colour each) and noise frames (uniform, blurred)."""
    rng = np.random.default_rng(seed)
    out = [np.full((size, size, 3), v, np.uint8) for v in np.linspace(0, 255, n // 2).astype(int)]
    for i in range(n - n // 2):
        noise = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        if i % 2:
            k = 8
            noise = np.kron(rng.integers(0, 256, (size // k, size // k, 3), dtype=np.uint8), np.ones((k, k, 1), np.uint8))
        out.append(noise)
    return out


def load_views(name: str, n_train: int, dim: int, views_dir: str | None) -> np.ndarray | None:
    """Cached teach-time views of the train subsample (bench_levers.py extract): (n_train, k, d),
    NaN where a train image was never a shot; None when not extracted."""
    path = Path(views_dir or VIEWS_DIR) / f"{name}-train-views8.npz"
    if not path.exists():
        return None
    z = np.load(path)
    views = np.full((n_train, z["x"].shape[1], dim), np.nan, np.float32)
    views[z["pos"]] = z["x"]
    return views


def load_features(name: str, data_root: str, cache: str, flips: bool) -> dict:
    """Feature sets of ``name``: plain, flipped (or None) and the blank/noise frames."""
    from cbcl_pr_ros.evaluation.datasets import discover, load_dataset
    from cbcl_pr_ros.evaluation.datasets.base import ImageDataset
    from cbcl_pr_ros.evaluation.featureset import extract_feature_set
    from cbcl_pr_ros.features import backbones

    present, missing = discover(data_root, {})
    if name not in present:
        raise SystemExit(f"{name} is not present: {missing.get(name)}")
    bb = backbones.make_backbone(BACKBONE, runtime="onnx", threads=2, cache_dir=str(Path(cache).parent / "onnx"))
    ds = load_dataset(name, present[name])
    fs = extract_feature_set(ds, bb, cache, 300, 200)
    flip = None
    if flips:
        fl = ImageDataset(ds.name + "-hflip", ds.classes, _Flipped(ds.train_images), ds.train_labels,
                          _Flipped(ds.test_images), ds.test_labels, dict(ds.meta))
        flip = extract_feature_set(fl, bb, cache, 300, 200)
    junk = bb.extract(_unrelated_images())
    return {"fs": fs, "flip": flip, "junk": np.asarray(junk, np.float32)}


# ---------------------------------------------------------------- runs
def _config(over, seed: int) -> LearnerConfig:
    if over == "paper":
        return LearnerConfig.paper(seed=seed)
    return LearnerConfig(seed=seed, **{k: v for k, v in over.items() if not k.startswith("teach_view")})


def _views_of(over) -> tuple[int, float | None]:
    """Teach-time views per shot of a learner row and their spread (None: not recentred): the
    product default unless the row says."""
    if over == "paper":
        return 0, None
    return int(over.get("teach_views", TEACH_VIEWS)), over.get("teach_view_spread", VIEW_SPREAD)


def _with_views(fs: FeatureSet, idx: np.ndarray, views: np.ndarray | None, k: int,
                spread: float | None = VIEW_SPREAD) -> tuple[np.ndarray, np.ndarray | None]:
    """The shots and their first ``k`` cached views (n, k, d), recentred as the learner node does."""
    from cbcl_pr_ros.features.augment import recentre_views

    x = fs.train_x[idx]
    if not k:
        return x, None
    if views is None or views.shape[1] < k or np.isnan(views[idx, :k]).any():
        raise SystemExit("teach-time views missing for some shots: run bench/bench_levers.py extract first")
    v = views[idx, :k]
    return x, (v if spread is None else recentre_views(x, v, spread).reshape(v.shape))


def run_learner(fs: FeatureSet, shots: int, seed: int, over, flip: FeatureSet | None = None, fuse: bool = False,
                extra: dict | None = None, views: np.ndarray | None = None) -> dict:
    """One run of a learner config; with ``flip`` the shots' mirrored views are taught too; with
    ``views`` each shot's first ``teach_views`` cached jittered views (the product's teach path)."""
    sch = few_shot_incremental(fs.train_y, 2, shots, seed)
    learner = CBCLPRLearner(_config(over, seed), BACKBONE, fs.dim)
    k, spread = _views_of(over)
    accs, confs, raw_confs, oks = [], [], [], []
    seen: list[int] = []
    for step in sch.steps:
        data, spread_of = {}, {}
        for c, idx in step.train_indices.items():
            x, v = _with_views(fs, idx, views, k, spread)
            data[str(c)] = np.vstack([x, flip.train_x[idx]]) if flip is not None else x
            if v is not None:
                spread_of[str(c)] = v
        learner.teach_increment(data, spread_of or None)
        seen += list(step.new_classes)
        m = np.isin(fs.test_y, seen)
        prob = learner.predict_scores(fs.test_x[m])
        if fuse and flip is not None:
            prob = 0.5 * (prob + learner.predict_scores(flip.test_x[m]))
        names = np.array(learner.classes_).astype(int)
        pred = names[prob.argmax(1)]
        ok = pred == fs.test_y[m]
        accs.append(float(ok.mean()))
        confs.append(prob.max(1))
        oks.append(ok)
        head = learner._served.head
        if hasattr(head, "logits") and hasattr(head, "temperature"):
            raw_confs.append(softmax(head.logits(learner.transform(fs.test_x[m]))).max(1))
    out = {"acc": float(np.mean(accs)), "per_increment": accs}
    if extra is not None:  # calibration figures (default only)
        conf, ok = np.concatenate(confs), np.concatenate(oks)
        out["ece"] = expected_calibration_error(conf, ok)
        out["temperature"] = float(getattr(learner, "temperature_", 1.0))
        if raw_confs:
            out["ece_uncalibrated"] = expected_calibration_error(np.concatenate(raw_confs), ok)
        extra.setdefault("conf", []).append(conf)
        extra.setdefault("raw", []).append(np.concatenate(raw_confs) if raw_confs else conf)
        extra.setdefault("ok", []).append(ok)
        out["memory"] = [{"class": ci.name, "shots": ci.shots, "clusters": ci.clusters, "bytes": ci.memory_bytes,
                          "storage": ci.storage, "raw_bytes": ci.shots * fs.dim * 4} for ci in learner.class_info()]
    return out


def run_peer(name: str, fs: FeatureSet, shots: int, seed: int, flip: FeatureSet | None = None) -> dict:
    sch = few_shot_incremental(fs.train_y, 2, shots, seed)
    method = make_method(name, seed, MethodContext(few_shot=True))
    accs, seen = [], []
    for step in sch.steps:
        feats = {c: (np.vstack([fs.train_x[i], flip.train_x[i]]) if flip is not None else fs.train_x[i])
                 for c, i in step.train_indices.items()}
        method.fit_increment(feats)
        seen += list(step.new_classes)
        m = np.isin(fs.test_y, seen)
        accs.append(float((method.predict(fs.test_x[m]) == fs.test_y[m]).mean()))
    return {"acc": float(np.mean(accs)), "per_increment": accs}


def _auroc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties half."""
    return auroc(pos, neg)


def run_open_set(fs: FeatureSet, other: np.ndarray, junk: np.ndarray, shots: int, seed: int,
                 views: np.ndarray | None = None) -> dict:
    """Gate of the default learner: accepted taught-class views, rejected other-set / blank / noise
    images, AUROC taught vs not-yet-taught classes (gate distance), after each increment."""
    sch = few_shot_incremental(fs.train_y, 2, shots, seed)
    learner = CBCLPRLearner(LearnerConfig(seed=seed, calibrate=False), BACKBONE, fs.dim)  # T moves no gate
    rows, seen = [], []
    for t, step in enumerate(sch.steps[:-1]):  # the last step leaves no unseen class
        pairs = {str(c): _with_views(fs, i, views, TEACH_VIEWS) for c, i in step.train_indices.items()}
        learner.teach_increment({c: x for c, (x, _) in pairs.items()},
                                {c: v for c, (_, v) in pairs.items() if v is not None} or None)
        seen += list(step.new_classes)
        known = np.isin(fs.test_y, seen)

        def dist(x):
            return np.array([p.distance for p in learner.predict(x)])

        d_known, d_unseen = dist(fs.test_x[known]), dist(fs.test_x[~known])
        radius = learner._served.gate.radius
        rows.append({"step": t, "accepted_taught": float((d_known < radius).mean()),
                     "rejected_other_set": float((dist(other) >= radius).mean()),
                     "rejected_blank_noise": float((dist(junk) >= radius).mean()),
                     "rejected_unseen_class": float((d_unseen >= radius).mean()),
                     "auroc_taught_vs_unseen": _auroc(-d_known, -d_unseen), "gate_D": float(learner._served.gate.distance_threshold)})
    return {"first": rows[0], "mean": {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}}


# ---------------------------------------------------------------- driver
def _cap_test(fs: FeatureSet, per_class: int | None) -> FeatureSet:
    """The first ``per_class`` test vectors of each class (of the cached seeded subsample)."""
    if not per_class:
        return fs
    keep = np.sort(np.concatenate([np.flatnonzero(fs.test_y == c)[:per_class] for c in np.unique(fs.test_y)]))
    return FeatureSet(fs.name, fs.classes, fs.train_x, fs.train_y, fs.test_x[keep], fs.test_y[keep], dict(fs.meta),
                      fs.train_refs)


def measure(name: str, seeds: int, shots_list: list[int], data_root: str, cache: str, other_name: str | None,
            flips: bool = False, ablations: bool = False, test_per_class: int | None = None,
            open_set: bool = True, checkpoint: Path | None = None, peers: bool = True,
            views_dir: str | None = None) -> dict:
    feats = load_features(name, data_root, cache, flips=flips)
    fs, flip, junk = _cap_test(feats["fs"], test_per_class), feats["flip"], feats["junk"]
    views = load_views(name, len(fs.train_y), fs.dim, views_dir)
    if flip is not None:
        flip = _cap_test(flip, test_per_class)
    other = None
    if other_name and open_set:
        try:
            other = load_features(other_name, data_root, cache, flips=False)["fs"].test_x[:400]
        except SystemExit as exc:
            _LOG.warning("no other data set for the open-set test: %s", exc)
    res = {"dataset": name, "seeds": seeds, "machine": machine_info(), "n_test": int(len(fs.test_y)),
           "classes": len(fs.classes), "shots": {}}
    if TEACH_VIEWS:
        res["note"] = (f"The row 'default' teaches {TEACH_VIEWS} views per shot (recentred, spread {VIEW_SPREAD}); the "
                       "learner pools their spread into one covariance shared by all classes (rank <= 64: 327,680 "
                       "bytes in RAM, 163,840 in the file, whatever the number of classes), not into the classes' memory.")
    t0 = time.time()
    for shots in shots_list:
        runs: dict[str, list[dict]] = {}
        calib: dict = {}
        for seed in range(seeds):
            for label, over in {**LEARNERS, **(ABLATIONS if ablations else {})}.items():
                if over != "paper" and label != "default" and "teach_views" in over and len(over) == 1 \
                        and over["teach_views"] == TEACH_VIEWS:
                    continue  # the default row itself
                runs.setdefault(label, []).append(
                    run_learner(fs, shots, seed, over, extra=calib if label == "default" else None, views=views))
            if flip is not None:
                runs.setdefault("default + flipped shots", []).append(run_learner(fs, shots, seed, {"teach_views": 0}, flip))
                runs.setdefault("default + flipped shots + flipped test view", []).append(
                    run_learner(fs, shots, seed, {"teach_views": 0}, flip, fuse=True))
                runs.setdefault("peer fecam + flipped shots", []).append(run_peer("fecam", fs, shots, seed, flip))
            for peer in PEERS if peers else ():
                runs.setdefault(f"peer {peer}", []).append(run_peer(peer, fs, shots, seed))
            if other is not None:
                runs.setdefault("open set", []).append(run_open_set(fs, other, junk, shots, seed, views))
            _LOG.info("%s %d-shot seed %d done (%.0f s, load %s)", name, shots, seed, time.time() - t0, os.getloadavg())
            res["shots"][str(shots)] = {"runs": runs, "reliability": {k: [a.tolist() for a in v] for k, v in calib.items()}}
            if checkpoint is not None:  # a run cut short still leaves the seeds it finished
                res["seeds"], res["seconds"], res["load_after"] = seed + 1, time.time() - t0, os.getloadavg()
                checkpoint.write_text(json.dumps(res))
    res["seconds"] = time.time() - t0
    res["load_after"] = os.getloadavg()
    return res


def _paired(a: list[dict], b: list[dict]) -> tuple[float, float]:
    d = 100 * (np.array([r["acc"] for r in a]) - np.array([r["acc"] for r in b]))
    return float(d.mean()), float(d.std())


def _reliability_png(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shots = [s for s in res["shots"] if s != "1"]
    if not shots:  # one shot per class gives no held-out shot and no temperature: nothing to plot
        return
    fig, axes = plt.subplots(1, len(shots), figsize=(4.2 * len(shots), 4), squeeze=False)
    edges = np.linspace(0, 1, 11)
    for ax, s in zip(axes[0], shots):
        rel = res["shots"][s]["reliability"]
        ok = np.concatenate([np.asarray(v, bool) for v in rel["ok"]])
        for key, lab in (("raw", "T = 1"), ("conf", "fitted T (held-out folds)")):
            conf = np.concatenate([np.asarray(v) for v in rel[key]])
            which = np.clip(np.digitize(conf, edges) - 1, 0, 9)
            xs = [conf[which == b].mean() for b in range(10) if (which == b).any()]
            ys = [ok[which == b].mean() for b in range(10) if (which == b).any()]
            ax.plot(xs, ys, "o-", label=f"{lab}, ECE of all seeds pooled {expected_calibration_error(conf, ok):.3f}")
        ax.plot([0, 1], [0, 1], "k:", lw=1)
        ax.set(title=f"{res['dataset']}, {s} shots ({res.get('calibrated_row', 'default')})", xlabel="confidence", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1))
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def report(out: Path) -> str:
    lines = ["# Issue 15: default head vs frozen-feature peers (bench/bench_accuracy.py)", ""]
    for path in sorted(out.glob("*.json*")):  # finished runs and checkpoints of runs still going
        res = json.loads(path.read_text())
        m = res["machine"]
        lines += [f"## {path.name.split('.json')[0]}{' (run still going)' if path.suffix == '.part' else ''} ({res['classes']} classes, {res['n_test']} test images, {res['seeds']} seeds)", "",
                  f"Machine: {m.get('cpu', m)}; load before {m.get('loadavg', '')}, after {res['load_after']}; "
                  f"{res['seconds']:.0f} s.", "",
                  "Mean accuracy over increments (2 classes per increment, no base session), % (mean ± std over seeds); "
                  "Δ = paired difference to the default.", "",
                  "| method | " + " | ".join(f"{s} shots | Δ" for s in res["shots"]) + " |",
                  "|---|" + "---|---|" * len(res["shots"])]
        names = list(next(iter(res["shots"].values()))["runs"])
        for name in [n for n in names if n != "open set"]:
            cells = []
            for s, block in res["shots"].items():
                runs = block["runs"]
                acc = 100 * np.array([r["acc"] for r in runs[name]])
                dm, ds = _paired(runs[name], runs["default"])
                cells += [f"{acc.mean():.1f} ± {acc.std():.1f}", "" if name == "default" else f"{dm:+.1f} ± {ds:.1f}"]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", "Default minus the best peer (the peer with the highest mean at that shot count), paired:", ""]
        for s, block in res["shots"].items():
            runs = block["runs"]
            peers = [n for n in runs if n.startswith("peer ") and "flipped" not in n]
            if not peers:
                continue
            best = max(peers, key=lambda n: np.mean([r["acc"] for r in runs[n]]))
            dm, ds = _paired(runs["default"], runs[best])
            line = f"- {s} shots: best peer **{best[5:]}**; default {dm:+.2f} ± {ds:.2f} points"
            for opt in [n for n in runs if n.startswith("default without teach views")]:
                am, asd = _paired(runs[opt], runs[best])
                line += f"; {opt} {am:+.2f} ± {asd:.2f} points"
            if "default + flipped shots + flipped test view" in runs:
                am, asd = _paired(runs["default + flipped shots + flipped test view"], runs[best])
                line += f"; default with flipped shots and test view {am:+.2f} ± {asd:.2f} points"
            lines.append(line)
        cal = res.get("calibrated_row", "default")  # the row whose calibration, memory and open set were recorded
        if res.get("note"):
            lines += ["", res["note"]]
        lines += ["", f"Calibration of the row '{cal}' (ECE over all increments' test predictions, mean over seeds):", "",
                  "| shots | ECE, T = 1 | ECE, fitted T | T after the last increment (median) |", "|---|---|---|---|"]
        for s, block in res["shots"].items():
            d = block["runs"][cal]
            lines.append(f"| {s} | {np.mean([r.get('ece_uncalibrated', np.nan) for r in d]):.3f} | "
                         f"{np.mean([r['ece'] for r in d]):.3f} | {np.median([r['temperature'] for r in d]):.3g} |")
        stem = path.name.split(".json")[0]
        if any(s != "1" for s in res["shots"]):
            lines += ["", f"![reliability](reliability_{stem}.png)", ""]
        if "open set" in next(iter(res["shots"].values()))["runs"]:
            lines += [f"Open set of the row '{cal}' (gate: distance to the predicted class's nearest centroid < 1.3 D_gate); "
                      "after the first increment / mean over increments:", "",
                      "| shots | taught views accepted | other data set rejected | blank+noise rejected | "
                      "unseen classes rejected | AUROC taught vs unseen class | D_gate |", "|---|---|---|---|---|---|---|"]
            for s, block in res["shots"].items():
                o = block["runs"]["open set"]

                def f(key, o=o):
                    a = np.mean([r["first"][key] for r in o])
                    b = np.mean([r["mean"][key] for r in o])
                    return f"{a:.3f} / {b:.3f}"

                lines.append(f"| {s} | {f('accepted_taught')} | {f('rejected_other_set')} | {f('rejected_blank_noise')} | "
                             f"{f('rejected_unseen_class')} | {f('auroc_taught_vs_unseen')} | {f('gate_D')} |")
            lines.append("")
        lines += [f"Memory of the row '{cal}' (full covariance) per class after the last increment, seed 0 "
                  "(bytes: the class's stored arrays, in RAM and in the file; storage: the dtype the learner chose):", "",
                  "vectors: what the class's clusters hold (the shots; teach-time views are not stored per class); "
                  "raw shots' bytes: the shots alone, float32", "",
                  "| shots | class | vectors | clusters | storage | bytes | raw shots' bytes | ratio |",
                  "|---|---|---|---|---|---|---|---|"]
        for s, block in res["shots"].items():
            for row in block["runs"][cal][0]["memory"]:
                raw = int(s) * row["raw_bytes"] // row["shots"]  # the JSON's raw_bytes count every vector
                lines.append(f"| {s} | {row['class']} | {row['shots']} | {row['clusters']} | "
                             f"{row.get('storage', 'float32')} | {row['bytes']} | {raw} | {row['bytes'] / raw:.3f} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", action="append", default=[])
    ap.add_argument("--other", default=None, help="data set whose test images are 'unrelated' for the open-set test")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--shots", default="1,5,10")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--cache-dir", default="cache/eval")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--views-dir", default=VIEWS_DIR, help="teach-time views cached by bench_levers.py extract")
    ap.add_argument("--flips", action="store_true", help="also teach mirrored shots (extracts mirrored features)")
    ap.add_argument("--ablations", action="store_true", help="also the transform on the other heads, paper head")
    ap.add_argument("--test-per-class", type=int, default=None, help="cap on test images per class (time)")
    ap.add_argument("--no-open-set", action="store_true", help="skip the open-set runs")
    ap.add_argument("--no-peers", action="store_true", help="only the learner rows (calibration, memory)")
    ap.add_argument("--tag", default="", help="suffix of the JSON name (separate runs of one data set)")
    ap.add_argument("--teach-views", type=int, default=None,
                    help="teach-time views of the 'default' row (and its calibration, open set and memory "
                         "tables); the learner node's default when not given")
    ap.add_argument("--report", action="store_true", help="only write accuracy.md and the plots from the JSONs")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("cbcl_pr_ros").setLevel(logging.WARNING)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.teach_views is not None:
        global TEACH_VIEWS
        TEACH_VIEWS = args.teach_views
    for name in args.dataset:
        res = measure(name, args.seeds, [int(s) for s in args.shots.split(",")], args.data_root, args.cache_dir,
                      args.other, args.flips, args.ablations, args.test_per_class, not args.no_open_set,
                      out / f"{name}{args.tag}.json.part", not args.no_peers, args.views_dir)
        res["tag"] = args.tag
        (out / f"{name}{args.tag}.json").write_text(json.dumps(res))
        (out / f"{name}{args.tag}.json.part").unlink(missing_ok=True)
    for path in sorted(out.glob("*.json*")):
        _reliability_png(json.loads(path.read_text()), out / f"reliability_{path.name.split('.json')[0]}.png")
    (out / "accuracy.md").write_text(report(out))
    print((out / "accuracy.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
