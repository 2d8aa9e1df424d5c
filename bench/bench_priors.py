"""Issue 15, outcome 2: backbone priors from images unrelated to both data sets, measured.

    python -P bench/bench_priors.py --dataset fashion-mnist --seeds 10

Can a prior learned once for the backbone beat FeCAM at one shot, where the default *is* FeCAM's
rule (nearest mean after Tukey + L2)?  Two priors, both from labelled images that ship inside
installed packages and share nothing with Fashion-MNIST or the rendered objects: scikit-learn's
1,797 digits (10 classes) and scikit-image's sample photos (24 photos; each photo and each of its
quarters a class of 16 jittered views, 120 classes):

* ``covariance``: their class-balanced within-class covariance (Tukey + L2 space, trace-normalised)
  as the shrinkage target of the pooled covariance instead of the identity, mixed with the identity
  (``prior:mix``);
* ``centre``: their mean (Tukey space) subtracted before the L2 normalisation.

``centre:self`` subtracts the *data set's own* train mean instead: unlabelled in-domain images,
which the issue's protocol (no base session) does not give; it is the upper bound of a centring
prior, not a candidate.  Results: ``runs/bench/levers/priors_<dataset>.{json,md}``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402
import bench_accuracy as ba  # noqa: E402

from cbcl_pr_ros.core import transform as transform_mod  # noqa: E402
from cbcl_pr_ros.core.classifiers import gaussian  # noqa: E402
from cbcl_pr_ros.evaluation.experiments import machine_info  # noqa: E402

OUT = out_path("levers")
PHOTOS = ("astronaut", "brick", "camera", "cat", "cell", "chelsea", "clock", "coffee", "coins", "colorwheel",
          "grass", "gravel", "horse", "hubble_deep_field", "immunohistochemistry", "logo", "moon", "page",
          "retina", "rocket", "text", "binary_blobs", "checkerboard", "shepp_logan_phantom")


def _rgb(im: np.ndarray) -> np.ndarray:
    im = np.asarray(im)
    if im.dtype == bool or im.dtype != np.uint8:
        im = im.astype(np.float64)
        im = (255 * (im - im.min()) / max(float(np.ptp(im)), 1e-9)).astype(np.uint8)
    if im.ndim == 2:
        im = np.repeat(im[:, :, None], 3, 2)
    return np.ascontiguousarray(im[:, :, :3])


def prior_features(cache: Path, onnx_dir: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(features, labels) of the digits and of the photos' jittered crops, cached."""
    path = cache / "prior-features.npz"
    if not path.exists():
        import skimage.data
        from sklearn.datasets import load_digits

        from cbcl_pr_ros.features import backbones
        from cbcl_pr_ros.features.augment import teach_views

        bb = backbones.make_backbone(ba.BACKBONE, runtime="onnx", threads=2, cache_dir=onnx_dir)
        digits = load_digits()
        xd = bb.extract([_rgb(im * 255.0 / 16.0) for im in digits.images])
        xs, ys = [], []
        for photo in PHOTOS:
            im = _rgb(getattr(skimage.data, photo)())
            h, w = im.shape[:2]
            for crop in [im] + [im[i * h // 2:(i + 1) * h // 2, j * w // 2:(j + 1) * w // 2] for i in (0, 1) for j in (0, 1)]:
                crop = np.ascontiguousarray(crop)
                xs.append(bb.extract([crop] + teach_views(crop, 15, seed=len(ys))))
                ys.append(len(ys))
        cache.mkdir(parents=True, exist_ok=True)
        np.savez(path, xd=xd, yd=digits.target, xp=np.concatenate(xs), yp=np.repeat(ys, 16))
    z = np.load(path)
    return {"digits": (z["xd"], z["yd"]), "photos": (z["xp"], z["yp"])}


def _tukey(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.abs(x) ** 0.5


def covariance_prior(sets: dict) -> np.ndarray:
    """Mean of the two sets' trace-normalised within-class covariances (Tukey + L2), unit mean eigenvalue."""
    tf = transform_mod.FeatureTransform(0.5, True)
    out = 0.0
    for x, y in sets.values():
        x = tf(x.astype(np.float32)).astype(np.float64)
        s = sum(np.cov(x[y == c], rowvar=False) for c in np.unique(y)) / len(np.unique(y))
        out = out + s / np.trace(s)
    out = out / len(sets) * out.shape[0] / np.trace(out)
    w, v = np.linalg.eigh(out)
    return (v * np.maximum(w, 1e-2)) @ v.T  # the within-class scatter of 1,797 digits is near singular


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="fashion-mnist")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--shots", default="1,5")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--cache-dir", default="cache/eval")
    ap.add_argument("--test-per-class", type=int, default=100)
    args = ap.parse_args(argv)
    t0 = time.time()
    sets = prior_features(Path(args.cache_dir).parent / "eval-priors", str(Path(args.cache_dir).parent / "onnx"))
    prior = covariance_prior(sets)
    means = {k: _tukey(x).mean(0) for k, (x, _) in sets.items()}
    means["digits+photos"] = 0.5 * (means["digits"] + means["photos"])
    fs = ba._cap_test(ba.load_features(args.dataset, args.data_root, args.cache_dir, flips=False)["fs"],
                      args.test_per_class)
    means["self (in-domain, not a candidate)"] = _tukey(fs.train_x).mean(0)
    original_shrunk, original_call = gaussian.shrunk_pooled, transform_mod.FeatureTransform.__call__

    def with_prior(mix: float):
        def shrunk(moments, shrinkage, shared=None):
            cov = moments.covariance() + (0 if shared is None else shared)
            d = len(cov)
            target = mix * prior + (1 - mix) * np.eye(d)
            scale = np.trace(cov) / d
            return np.array(target) if scale <= 0 else (1 - shrinkage) * cov + shrinkage * scale * target
        return shrunk

    def centred(mu: np.ndarray):
        def call(self, x):
            y = _tukey(np.asarray(x, np.float32)) - mu.astype(np.float32)
            return (y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)).astype(np.float32)
        return call

    rows = {"default": (None, None)}
    rows.update({f"covariance prior, mix {m}": (with_prior(m), None) for m in (1.0, 0.3, 0.1)})
    rows.update({f"centre: {k}": (None, centred(mu)) for k, mu in means.items()})
    res: dict = {"dataset": args.dataset, "seeds": args.seeds, "machine": machine_info(), "shots": {}}
    for shots in [int(s) for s in args.shots.split(",")]:
        out = {}
        for name, (shrunk, call) in rows.items():
            gaussian.shrunk_pooled = shrunk or original_shrunk
            transform_mod.FeatureTransform.__call__ = call or original_call
            try:  # views off: the priors alone, against the default on raw shots
                out[name] = [ba.run_learner(fs, shots, s, {"calibrate": False, "teach_views": 0})["acc"]
                             for s in range(args.seeds)]
            finally:
                gaussian.shrunk_pooled, transform_mod.FeatureTransform.__call__ = original_shrunk, original_call
            print(f"{args.dataset} {shots} shots {name}: {100 * np.mean(out[name]):.2f}", flush=True)
        res["shots"][str(shots)] = out
    res["seconds"] = time.time() - t0
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"priors_{args.dataset}.json").write_text(json.dumps(res))
    lines = [f"# Backbone priors from unrelated images: {args.dataset} ({args.seeds} seeds, "
             f"{args.test_per_class} test images per class; bench/bench_priors.py)", "",
             f"Machine: {res['machine'].get('cpu', '')}; {res['seconds']:.0f} s. Δ = paired difference to the default "
             "(no teach views), points, mean ± std over seeds.", "",
             "| row | " + " | ".join(f"{s} shots | Δ" for s in res["shots"]) + " |", "|---|" + "---|---|" * len(res["shots"])]
    for name in rows:
        cells = []
        for s, out in res["shots"].items():
            a, b = 100 * np.array(out[name]), 100 * np.array(out["default"])
            cells += [f"{a.mean():.2f}", "" if name == "default" else f"{(a - b).mean():+.2f} ± {(a - b).std():.2f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    (OUT / f"priors_{args.dataset}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
