"""Features of a (subsampled) data set, computed once with a frozen backbone and cached on disk
(the features layer's ``FeatureCache``).

Every protocol, method and seed then works on the same arrays, so comparisons are on identical
features and a rerun costs seconds. The cache key holds everything that changes the numbers:
data set, source, subsample, backbone name, preprocessing id and weights hash.
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cbcl_pr_ros.features.cache import FeatureCache
from cbcl_pr_ros.features.prefetch import extract_prefetched

from .datasets import ImageDataset

__all__ = ["FeatureSet", "subsample_per_class", "extract_feature_set", "feature_set_key", "synthetic_feature_set"]

_LOG = logging.getLogger(__name__)


@dataclass
class FeatureSet:
    """Train/test feature arrays with integer labels indexing ``classes``."""

    name: str
    classes: tuple[str, ...]
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    train_refs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.train_x.ndim != 2 or self.test_x.ndim != 2 or self.train_x.shape[1] != self.test_x.shape[1]:
            raise ValueError(f"feature arrays must be (n, d) with one d: {self.train_x.shape} {self.test_x.shape}")
        if len(self.train_x) != len(self.train_y) or len(self.test_x) != len(self.test_y):
            raise ValueError("features and labels differ in length")

    @property
    def dim(self) -> int:
        return int(self.train_x.shape[1])

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, train_x=self.train_x, train_y=self.train_y, test_x=self.test_x,
                            test_y=self.test_y, classes=np.array(self.classes), train_refs=np.array(self.train_refs),
                            meta=np.array(json.dumps({"name": self.name, **self.meta})))
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> "FeatureSet":
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            name = meta.pop("name")
            return cls(name, tuple(str(c) for c in z["classes"]), z["train_x"], z["train_y"].astype(np.int64),
                       z["test_x"], z["test_y"].astype(np.int64), meta, [str(r) for r in z["train_refs"]])


def subsample_per_class(labels: np.ndarray, per_class: int | None, seed: int) -> np.ndarray:
    """Sorted indices of at most ``per_class`` examples of each class (a fixed seeded choice)."""
    y = np.asarray(labels)
    if per_class is None:
        return np.arange(len(y))
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1 or None, got {per_class}")
    rng = np.random.default_rng(seed)
    keep = [rng.permutation(np.flatnonzero(y == c))[:per_class] for c in np.unique(y)]
    return np.sort(np.concatenate(keep))


def _extract(backbone, images, idx: np.ndarray, desc: str, batch: int = 64) -> np.ndarray:
    """Features of ``images[idx]``: worker threads load (decode) and stage the next batches while the
    backbone runs (the features layer's ``extract_prefetched``)."""
    from tqdm import tqdm


    with tqdm(total=len(idx), desc=desc, unit="img", leave=False) as bar:
        return extract_prefetched(backbone, len(idx), lambda k: images[int(idx[k])], batch_size=batch,
                                  progress=bar.update)


def feature_set_key(ds: ImageDataset, backbone, train_per_class: int | None, test_per_class: int | None,
                    subsample_seed: int) -> str:
    """What identifies the images of a subsampled data set (the backbone's identity is added by the
    features layer's cache): name, source, sizes and the subsample."""
    key = json.dumps({"ds": ds.name, "src": ds.meta.get("source"), "ntr": len(ds.train_labels),
                      "nte": len(ds.test_labels), "tr": train_per_class, "te": test_per_class, "seed": subsample_seed},
                     sort_keys=True)
    return "evaluation-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def extract_feature_set(ds: ImageDataset, backbone, cache_dir: str | Path | None = None,
                        train_per_class: int | None = None, test_per_class: int | None = None,
                        subsample_seed: int = 0) -> FeatureSet:
    """Features of ``ds`` (subsampled per class) with ``backbone``, through the features layer's
    ``FeatureCache`` (one entry for the train and one for the test images), so a rerun costs nothing."""
    cache = FeatureCache(cache_dir)
    data_hash = feature_set_key(ds, backbone, train_per_class, test_per_class, subsample_seed)
    tr = subsample_per_class(ds.train_labels, train_per_class, subsample_seed)
    te = subsample_per_class(ds.test_labels, test_per_class, subsample_seed + 1)
    info = {"dataset": ds.name, "source": ds.meta.get("source")}
    train_x = cache.get_or_compute(backbone, data_hash + "-train",
                                   lambda: _extract(backbone, ds.train_images, tr, f"{ds.name} train"),
                                   {**info, "split": "train", "n": int(len(tr))})
    test_x = cache.get_or_compute(backbone, data_hash + "-test",
                                  lambda: _extract(backbone, ds.test_images, te, f"{ds.name} test"),
                                  {**info, "split": "test", "n": int(len(te))})
    if len(train_x) != len(tr) or len(test_x) != len(te):
        raise ValueError(f"cached features of {ds.name} do not match the subsample ({len(train_x)} vs {len(tr)})")
    _LOG.info("features of %s: cache hits %d, misses %d", ds.name, cache.hits, cache.misses)
    return FeatureSet(ds.name, ds.classes, train_x, ds.train_labels[tr], test_x, ds.test_labels[te],
                      meta={"backbone": backbone.name, "preprocessing": getattr(backbone, "preprocessing_id", ""),
                            "train_per_class": train_per_class, "test_per_class": test_per_class,
                            "subsample_seed": subsample_seed, "full_train": int(len(ds.train_labels)),
                            "full_test": int(len(ds.test_labels)), "source": ds.meta.get("source")},
                      train_refs=[ds.train_ref(int(i)) for i in tr])


def synthetic_feature_set(n_classes: int = 10, dim: int = 32, train_per_class: int = 60, test_per_class: int = 30,
                          seed: int = 0, spread: float = 1.0, modes: int = 2) -> FeatureSet:
    """Gaussian-mixture features (each class ``modes`` blobs, non-negative like post-ReLU CNN features):
    for tests and for smoke runs of the CLI without any image data."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 4, (n_classes, modes, dim))
    def draw(n):
        y = np.repeat(np.arange(n_classes), n)
        m = rng.integers(0, modes, len(y))
        x = centres[y, m] + rng.normal(0, spread, (len(y), dim))
        return np.maximum(x, 0).astype(np.float32), y
    xtr, ytr = draw(train_per_class)
    xte, yte = draw(test_per_class)
    return FeatureSet("synthetic", tuple(f"c{i}" for i in range(n_classes)), xtr, ytr, xte, yte,
                      {"backbone": "none (synthetic Gaussian mixture)", "train_per_class": train_per_class,
                       "test_per_class": test_per_class, "subsample_seed": seed},
                      [str(i) for i in range(len(ytr))])
