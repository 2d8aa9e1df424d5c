"""Issue 15, outcome 2: levers for the default head, measured fast (few seeds, capped test set).

    python -P bench/bench_levers.py extract --dataset rendered-objects     # augmented views -> cache
    python -P bench/bench_levers.py explore --dataset fashion-mnist --seeds 3 --test-per-class 100
    python -P bench/bench_levers.py tune --dataset fashion-mnist            # held-out part of TRAIN

``extract`` passes ``VIEWS`` jittered copies (:func:`cbcl_pr_ros.features.augment.teach_views`) of every
train image that any schedule here uses as a shot through the same backbone, and three fixed views of
the test images (mirror, centre zoom, both) for the fusion lever; they are cached under
``--views-dir`` (``cache/eval-views``).  ``tune`` never looks at test images: shots from
the first half of each class's train subsample, evaluation on the second half.  ``explore`` measures
each lever on the test images with the settings ``tune`` chose.  Results: ``runs/bench/levers/``.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402
import bench_accuracy as ba  # noqa: E402

from cbcl_pr_ros.evaluation.experiments import machine_info  # noqa: E402
from cbcl_pr_ros.evaluation.featureset import FeatureSet, subsample_per_class  # noqa: E402
from cbcl_pr_ros.evaluation.protocols import few_shot_incremental  # noqa: E402

_LOG = logging.getLogger("bench_levers")
OUT = out_path("levers")
VIEWS = 8
TRAIN_PER_CLASS, TEST_PER_CLASS = 300, 200  # bench_accuracy's subsample
SHOTS = (1, 5, 10)
TUNE_SEEDS = (100, 101, 102)


def _tune_split(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the first / second half of each class in the train subsample."""
    a, b = [], []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        a.append(idx[: len(idx) // 2])
        b.append(idx[len(idx) // 2:])
    return np.sort(np.concatenate(a)), np.sort(np.concatenate(b))


def needed_train_positions(y: np.ndarray, seeds: range) -> np.ndarray:
    """Train-subsample positions that some schedule (test seeds and tuning seeds) uses as a shot."""
    pos: set[int] = set()
    for shots in SHOTS:
        for seed in seeds:
            if np.bincount(y).min() >= shots:
                for st in few_shot_incremental(y, 2, shots, seed).steps:
                    for v in st.train_indices.values():
                        pos.update(int(i) for i in v)
        a, _ = _tune_split(y)
        if np.bincount(y[a]).min() >= shots:
            for seed in TUNE_SEEDS:
                for st in few_shot_incremental(y[a], 2, shots, seed).steps:
                    for v in st.train_indices.values():
                        pos.update(int(a[i]) for i in v)
    return np.array(sorted(pos), np.int64)


def _fixed_views(rgb: np.ndarray) -> list[np.ndarray]:
    """Mirror, centre zoom (85 % of each side) and both: the fusion lever's test views."""
    import cv2

    h, w = rgb.shape[:2]
    dh, dw = int(round(0.075 * h)), int(round(0.075 * w))
    zoom = cv2.resize(rgb[dh:h - dh, dw:w - dw], (w, h), interpolation=cv2.INTER_LINEAR)
    return [np.ascontiguousarray(rgb[:, ::-1]), zoom, np.ascontiguousarray(zoom[:, ::-1])]


def extract(name: str, data_root: str, onnx_dir: str, views_dir: Path, seeds: int, train_fixed: bool = False) -> None:
    from tqdm import tqdm

    from cbcl_pr_ros.evaluation.datasets import discover, load_dataset
    from cbcl_pr_ros.features import backbones
    from cbcl_pr_ros.features.augment import teach_views

    present, missing = discover(data_root, {})
    ds = load_dataset(name, present[name])
    bb = backbones.make_backbone(ba.BACKBONE, runtime="onnx", threads=2, cache_dir=onnx_dir)
    tr = subsample_per_class(ds.train_labels, TRAIN_PER_CLASS, 0)
    te = subsample_per_class(ds.test_labels, TEST_PER_CLASS, 1)
    y = ds.train_labels[tr]
    views_dir.mkdir(parents=True, exist_ok=True)
    path = views_dir / f"{name}-train-views{VIEWS}.npz"
    have = dict(np.load(path)) if path.exists() else {"pos": np.zeros(0, np.int64),
                                                        "x": np.zeros((0, VIEWS, 1280), np.float32)}
    need = np.setdiff1d(needed_train_positions(y, range(seeds)), have["pos"])
    _LOG.info("%s: %d train images need %d views each (%d cached)", name, len(need), VIEWS, len(have["pos"]))
    xs = []
    for p in tqdm(need, desc=f"{name} train views"):
        xs.append(bb.extract(teach_views(ds.train_images[int(tr[p])], VIEWS, seed=int(p))))
    if len(need):
        pos = np.concatenate([have["pos"], need])
        x = np.concatenate([have["x"], np.stack(xs).astype(np.float32)])
        order = np.argsort(pos)
        np.savez(path, pos=pos[order], x=x[order])
    fpath = views_dir / f"{name}-train-fixed3.npz"
    if train_fixed and not fpath.exists():
        pos = needed_train_positions(y, range(seeds))
        x = np.stack([bb.extract(_fixed_views(ds.train_images[int(tr[p])])) for p in tqdm(pos, desc=f"{name} train fixed")])
        np.savez(fpath, pos=pos, x=x.astype(np.float32))
    tpath = views_dir / f"{name}-test-fixed3.npy"
    if not tpath.exists():
        fs_y = ds.test_labels[te]
        keep = np.sort(np.concatenate([np.flatnonzero(fs_y == c)[:100] for c in np.unique(fs_y)]))
        out = np.full((len(te), 3, 1280), np.nan, np.float32)
        for k in tqdm(keep, desc=f"{name} test views"):
            out[k] = bb.extract(_fixed_views(ds.test_images[int(te[k])]))
        np.save(tpath, out)


# ---------------------------------------------------------------- data
def load(name: str, args, tune: bool) -> dict:
    """Features (test capped as bench_accuracy does), their cached train views and test views.

    ``tune``: the test set is the second half of each class's *train* subsample (no test image)."""
    feats = ba.load_features(name, args.data_root, args.cache_dir, flips=False)
    fs = feats["fs"]
    vpath = Path(args.views_dir) / f"{name}-train-views{VIEWS}.npz"
    views = np.full((len(fs.train_y), VIEWS, fs.dim), np.nan, np.float32)
    if vpath.exists():
        z = np.load(vpath)
        views[z["pos"]] = z["x"]
    if tune:
        a, b = _tune_split(fs.train_y)
        keep = np.sort(np.concatenate([b[fs.train_y[b] == c][:50] for c in np.unique(fs.train_y)]))
        sub = FeatureSet(fs.name, fs.classes, fs.train_x[a], fs.train_y[a], fs.train_x[keep], fs.train_y[keep],
                         dict(fs.meta), [fs.train_refs[i] for i in a])
        return {"fs": sub, "views": views[a], "test_views": None, "train_fused": None}
    keep = np.sort(np.concatenate([np.flatnonzero(fs.test_y == c)[:args.test_per_class] for c in np.unique(fs.test_y)]))
    tv = None
    tpath = Path(args.views_dir) / f"{name}-test-fixed3.npy"
    if tpath.exists():
        tv = np.load(tpath)[keep]
        if np.isnan(tv).any():
            tv = None
    sub = FeatureSet(fs.name, fs.classes, fs.train_x, fs.train_y, fs.test_x[keep], fs.test_y[keep], dict(fs.meta),
                     fs.train_refs)
    fpath = Path(args.views_dir) / f"{name}-train-fixed3.npz"
    fused = None
    if fpath.exists():  # the shots as the extractor-side fusion would give them: mean of 4 views' raw features
        z = np.load(fpath)
        fused = np.full_like(fs.train_x, np.nan)
        fused[z["pos"]] = (fs.train_x[z["pos"]] + z["x"].sum(1)) / (1 + z["x"].shape[1])
    return {"fs": sub, "views": views, "test_views": tv, "train_fused": fused}


# ---------------------------------------------------------------- heads (bench-only ones)
class RandomProjectionRidge:
    """RanPAC-style head: ``h = relu(x W)`` (W fixed Gaussian, d x M), ridge regression of one-hot
    targets on h, from the streamed Gram ``H^T H`` and class sums ``H^T Y`` (solved here in its dual,
    which gives the same weights while the shots are fewer than M)."""

    def __init__(self, dim: int, m: int, lam: float, power: float = 0.5, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.w = rng.standard_normal((dim, m)).astype(np.float32)
        self.lam, self.power = lam * m / 2, power
        self.x: list[np.ndarray] = []
        self.y: list[int] = []
        self.classes: list[int] = []

    def _h(self, x: np.ndarray) -> np.ndarray:
        from cbcl_pr_ros.core.transform import FeatureTransform

        return np.maximum(FeatureTransform(self.power, True)(np.asarray(x, np.float32)) @ self.w, 0)

    def fit_increment(self, data: dict[int, np.ndarray]) -> None:
        for c, x in data.items():
            if c not in self.classes:
                self.classes.append(c)
            self.x.append(self._h(x))
            self.y += [self.classes.index(c)] * len(x)
        self.h = np.vstack(self.x).astype(np.float64)
        y = np.eye(len(self.classes))[self.y]
        self.alpha = np.linalg.solve(self.h @ self.h.T + self.lam * np.eye(len(self.h)), y)

    def logits(self, x: np.ndarray) -> np.ndarray:
        return (self._h(x) @ self.h.T) @ self.alpha


# ---------------------------------------------------------------- runs
def _shots_with_views(fs: FeatureSet, views: np.ndarray, idx: np.ndarray, k: int, alpha: float | None = None) -> np.ndarray:
    """The shots and ``k`` views of each; ``alpha``: views recentred on their shot and scaled,
    ``x + alpha (v - mean_k v)`` (the class mean stays the shots' mean, the views give spread only).

    Taught as plain vectors, as the learner took them when these levers were measured (it now takes
    views apart, ``teach_increment(shots, views)``; with ``calibrate=False`` only the first teach's D
    estimate differs)."""
    x = fs.train_x[idx]
    if k == 0:
        return x
    from cbcl_pr_ros.features.augment import recentre_views

    v = views[idx, :k]
    v = v.reshape(-1, fs.dim) if alpha is None else recentre_views(x, v, alpha)
    if np.isnan(v).any():
        raise RuntimeError("views missing for some shots: run `extract` with enough seeds first")
    return np.vstack([x, v])


def run(fs: FeatureSet, views: np.ndarray, test_views: np.ndarray | None, shots: int, seed: int, spec: dict,
        train_fused: np.ndarray | None = None) -> dict:
    """One run of a lever ``spec``: head ("learner" with config overrides, or "ridge"), ``k`` teach views
    per shot, ``fuse`` (average logits over the test image and its 3 fixed views)."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    sch = few_shot_incremental(fs.train_y, 2, shots, seed)
    k = spec.get("k", 0)
    if spec.get("fuse") == "features-all":  # shots fused too (extractor-side fusion), teach views not
        fs = FeatureSet(fs.name, fs.classes, train_fused, fs.train_y, fs.test_x, fs.test_y, fs.meta, fs.train_refs)
        spec = {**spec, "fuse": "features"}
    if spec.get("head", "learner") == "ridge":
        model = RandomProjectionRidge(fs.dim, spec.get("m", 5000), spec.get("lam", 1.0), spec.get("power", 0.5), seed)
        teach = lambda d: model.fit_increment({int(c): x for c, x in d.items()})  # noqa: E731
        logits = model.logits
        names = lambda: np.array(model.classes)  # noqa: E731
    else:
        learner = CBCLPRLearner(LearnerConfig(seed=seed, calibrate=False, **spec.get("over", {})), ba.BACKBONE, fs.dim)
        teach = learner.teach_increment
        logits = lambda x: learner._served.head.logits(learner.transform(x))  # noqa: E731
        names = lambda: np.array(learner.classes_).astype(int)  # noqa: E731
    accs, seen = [], []
    for step in sch.steps:
        teach({str(c): _shots_with_views(fs, views, i, k, spec.get("alpha")) for c, i in step.train_indices.items()})
        seen += list(step.new_classes)
        m = np.isin(fs.test_y, seen)
        if spec.get("fuse") == "features" and test_views is not None:  # one vector: the mean raw feature
            z = logits((fs.test_x[m] + test_views[m].sum(1)) / (1 + test_views.shape[1]))
        else:
            z = logits(fs.test_x[m])
        if spec.get("fuse") is True and test_views is not None:
            for j in range(test_views.shape[1]):
                z = z + logits(test_views[m, j])
        accs.append(float((names()[z.argmax(1)] == fs.test_y[m]).mean()))
    return {"acc": float(np.mean(accs)), "per_increment": accs}


def variants(kind: str) -> dict[str, dict]:
    """The levers measured: ``tune`` compares settings on the train split; ``explore`` the levers."""
    if kind == "tune":
        out = {}
        for k in (0, 4, 8):
            for bl in (1.0, 4.0):
                for sh in (0.2, 0.5):
                    out[f"k{k} blend{bl} shrink{sh}"] = {"over": {"blend": bl, "shrinkage": sh}, "k": k}
        for a in (1.0, 0.75, 0.5, 0.25):
            out[f"k8 recentred alpha{a}"] = {"k": 8, "alpha": a}
        for p in (0.3, 0.7):
            out[f"k8 blend1.0 shrink0.5 power{p}"] = {"over": {"transform_power": p}, "k": 8}
        for lam in (0.1, 1.0):
            out[f"ridge M5000 lam{lam}"] = {"head": "ridge", "m": 5000, "lam": lam}
            out[f"ridge M5000 lam{lam} k8"] = {"head": "ridge", "m": 5000, "lam": lam, "k": 8}
        return out
    return {
        "default": {},
        "default + fused test views": {"fuse": True},
        "teach views k2": {"k": 2},
        "teach views k4": {"k": 4},
        "teach views k8": {"k": 8},
        "teach views k8 + fused test views": {"k": 8, "fuse": True},
        "teach views k8 recentred": {"k": 8, "alpha": 1.0},
        "teach views k8 recentred, alpha 0.5": {"k": 8, "alpha": 0.5},
        "default + fused test features": {"fuse": "features"},
        "default, fused shots and test features": {"fuse": "features-all"},
        "teach views k8, fused shots and test features": {"k": 8, "fuse": "features-all"},
        "teach views k8 + fused test views, power 0.3": {"k": 8, "fuse": True, "over": {"transform_power": 0.3}},
        "teach views k8, power 0.3": {"k": 8, "over": {"transform_power": 0.3}},
        "teach views k8 + fused test features": {"k": 8, "fuse": "features"},
        "ridge M5000": {"head": "ridge", "m": 5000, "lam": 0.1},
        "ridge M5000 + views k8": {"head": "ridge", "m": 5000, "lam": 0.1, "k": 8},
    }


def measure(name: str, args, kind: str) -> dict:
    d = load(name, args, tune=kind == "tune")
    fs = d["fs"]
    shots_list = [s for s in (int(s) for s in args.shots.split(",")) if np.bincount(fs.train_y).min() >= s]
    seeds = list(TUNE_SEEDS[: args.seeds]) if kind == "tune" else list(range(args.seeds))
    res = {"dataset": name, "kind": kind, "seeds": seeds, "machine": machine_info(), "n_test": int(len(fs.test_y)),
           "shots": {}}
    t0 = time.time()
    specs = variants(kind)
    if args.only:
        specs = {k: v for k, v in specs.items() if k in args.only.split(";")}
    for shots in shots_list:
        runs: dict[str, list[dict]] = {}
        for seed in seeds:
            for label, spec in specs.items():
                runs.setdefault(label, []).append(run(fs, d["views"], d["test_views"], shots, seed, spec,
                                                      d["train_fused"]))
            if kind == "explore" and not args.no_peers:
                for peer in (args.peers.split(",") if args.peers else ba.PEERS):
                    runs.setdefault(f"peer {peer}", []).append(ba.run_peer(peer, fs, shots, seed))
            _LOG.info("%s %s %d-shot seed %d (%.0f s, load %s)", name, kind, shots, seed, time.time() - t0,
                      os.getloadavg())
        res["shots"][str(shots)] = runs
    res["seconds"], res["load_after"] = time.time() - t0, os.getloadavg()
    return res


def summary(res: dict) -> str:
    """Markdown table: mean accuracy and the paired difference to the default (and the best peer)."""
    lines = [f"### {res['dataset']} ({res['kind']}, seeds {res['seeds']}, {res['n_test']} eval images)", "",
             f"Machine: {res['machine'].get('cpu')}; load after {np.round(res['load_after'], 1).tolist()}; "
             f"{res['seconds']:.0f} s.", ""]
    shots = list(res["shots"])
    first = res["shots"][shots[0]]
    ref = next((r for r in ("default", "k0 blend1.0 shrink0.5") if r in first), next(iter(first)))
    lines += ["| lever | " + " | ".join(f"{s} shots | Δ vs {ref} | Δ vs best peer" for s in shots) + " |",
              "|---|" + "---|---|---|" * len(shots)]
    for name in first:
        cells = []
        for s in shots:
            runs = res["shots"][s]
            acc = 100 * np.array([r["acc"] for r in runs[name]])
            d = acc - 100 * np.array([r["acc"] for r in runs[ref]])
            peers = [n for n in runs if n.startswith("peer ")]
            if peers:
                best = max(peers, key=lambda n: np.mean([r["acc"] for r in runs[n]]))
                dp = acc - 100 * np.array([r["acc"] for r in runs[best]])
                bp = f"{dp.mean():+.2f} ± {dp.std():.2f} ({best[5:]})"
            else:
                bp = ""
            cells += [f"{acc.mean():.2f}", f"{d.mean():+.2f} ± {d.std():.2f}", bp]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def confirm(name: str, args) -> dict:
    """The default and the opt-in teach views through ``bench_accuracy.run_learner`` (calibration on):
    accuracy, ECE and temperature per seed, a check of the code after a rebase."""
    feats = ba.load_features(name, args.data_root, args.cache_dir, flips=False)
    fs = ba._cap_test(feats["fs"], args.test_per_class)
    views = ba.load_views(name, len(fs.train_y), fs.dim, args.views_dir)
    res = {"dataset": name, "kind": "confirm", "seeds": list(range(args.seeds)), "machine": machine_info(),
           "n_test": int(len(fs.test_y)), "shots": {}}
    t0 = time.time()
    for shots in (int(s) for s in args.shots.split(",")):
        runs: dict[str, list[dict]] = {}
        for seed in range(args.seeds):
            for label, over in (("default", {}), ("opt-in: teach_views=8 (spread 0.5)", {"teach_views": 8})):
                r = ba.run_learner(fs, shots, seed, over, extra={}, views=views)
                runs.setdefault(label, []).append({k: r[k] for k in ("acc", "per_increment", "ece", "temperature")
                                                   if k in r})
            _LOG.info("%s confirm %d-shot seed %d (%.0f s, load %s)", name, shots, seed, time.time() - t0,
                      os.getloadavg())
        res["shots"][str(shots)] = runs
    res["seconds"], res["load_after"] = time.time() - t0, os.getloadavg()
    return res


def report(out: Path) -> None:
    """All runs' tables into ``levers.md`` and one bar chart per data set of the explore levers'
    paired difference to the default (mean ± std over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = ["# Issue 15, outcome 2: levers (bench/bench_levers.py)", "",
             "Exploration on the test images (capped at 100 per class); `tune` rows: shots from the first half "
             "of each class's train subsample, evaluation on the second half (no test image). "
             "Δ = paired difference, mean ± std over seeds.", ""]
    for path in sorted(out.glob("*.json")):
        res = json.loads(path.read_text())
        parts.append(summary(res))
        if res["kind"] != "explore":
            continue
        names = [n for n in next(iter(res["shots"].values())) if n != "default"]
        shots = list(res["shots"])
        fig, ax = plt.subplots(figsize=(9, 0.35 * len(names) * len(shots) + 1.5))
        y = 0
        ticks, labels = [], []
        for n in names:
            for j, s in enumerate(shots):
                runs = res["shots"][s]
                d = 100 * (np.array([r["acc"] for r in runs[n]]) - np.array([r["acc"] for r in runs["default"]]))
                ax.barh(y, d.mean(), xerr=d.std(), color=f"C{j}", label=f"{s} shots" if y < len(shots) else None)
                y += 1
            ticks.append(y - len(shots) / 2 - 0.5)
            labels.append(n)
            y += 0.6
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(ticks, labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("accuracy − default head (raw shots), points (paired, mean ± std over seeds)")
        load = np.round(res["load_after"], 1).tolist()
        ax.set_title(f"{res['dataset']}: {len(res['seeds'])} seeds; {res['machine'].get('cpu')}, load {load}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        png = out / f"{path.stem}.png"
        fig.savefig(png, dpi=80)
        plt.close(fig)
        parts += [f"![{path.stem}]({png.name})", ""]
    (out / "levers.md").write_text("\n".join(parts) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=["extract", "explore", "tune", "report", "confirm"])
    ap.add_argument("--dataset", action="append", default=[])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--shots", default="1,5,10")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--cache-dir", default="cache/eval")
    ap.add_argument("--views-dir", default="cache/eval-views")
    ap.add_argument("--test-per-class", type=int, default=100)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--only", default="", help="semicolon-separated lever names to run")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--peers", default="", help="comma-separated peers (default: all)")
    ap.add_argument("--train-fixed", action="store_true", help="extract: also the fixed views of the shots")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("cbcl_pr_ros").setLevel(logging.WARNING)
    if args.cmd == "report":
        report(Path(args.out))
        return 0
    for name in args.dataset:
        if args.cmd == "extract":
            extract(name, args.data_root, str(Path(args.cache_dir).parent / "onnx"), Path(args.views_dir), args.seeds,
                    args.train_fixed)
            continue
        res = confirm(name, args) if args.cmd == "confirm" else measure(name, args, args.cmd)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.cmd}_{name}{args.tag}.json").write_text(json.dumps(res))
        text = summary(res)
        (out / f"{args.cmd}_{name}{args.tag}.md").write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
