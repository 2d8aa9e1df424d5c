"""A disk cache of data-set features, so evaluations never run the backbone twice on the same data.

The key covers everything that changes a feature vector: backbone name, preprocessing id,
weights hash, a hash of the data (image bytes, or the file list with sizes and mtimes) and,
for anything but float32 on a CPU, the runtime, device and precision (``Backbone.numerics_id``:
CUDA fp32 differs from the CPU by up to 1e-4 relative, TF32 ~1e-3, fp16 ~4e-3). On a CPU the
runtime is left out on purpose: ONNX and PyTorch features agree to ~1e-6 there. Entries are
``<key>.npy`` (float32, (n, d)) with a ``<key>.json`` describing them; both written atomically.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .backbones import Backbone, default_cache_dir
from .prefetch import extract_prefetched
from .preprocessing import load_image_file

__all__ = ["FeatureCache", "hash_arrays", "hash_files"]

_LOG = logging.getLogger(__name__)
_FORMAT_VERSION = 1


def hash_arrays(images: Sequence[np.ndarray] | np.ndarray) -> str:
    """SHA-256 over each image's dtype, shape and bytes, in order."""
    h = hashlib.sha256()
    for img in images:
        a = np.ascontiguousarray(img)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def hash_files(paths: Sequence[str | os.PathLike[str]], hash_contents: bool = False) -> str:
    """SHA-256 over the ordered file list: absolute path, size, mtime (or the file bytes if ``hash_contents``)."""
    h = hashlib.sha256()
    for p in paths:
        ap = os.path.abspath(os.fspath(p))
        st = os.stat(ap)  # FileNotFoundError names the missing file
        h.update(f"{ap}\0{st.st_size}\0".encode())
        if hash_contents:
            with open(ap, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        else:
            h.update(f"{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


class FeatureCache:
    """Features of data sets on disk, keyed by backbone, preprocessing, weights and data.

    ``hits`` and ``misses`` count lookups (useful in reports and tests).
    """

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir("features")
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(backbone: Backbone, data_hash: str) -> str:
        """Cache key for ``data_hash`` seen through ``backbone``."""
        parts = [_FORMAT_VERSION, backbone.name, backbone.preprocessing_id, backbone.weights_sha256, data_hash]
        numerics = getattr(backbone, "numerics_id", "")
        if numerics:  # float32 on a CPU keeps the key it always had
            parts.append(numerics)
        ident = json.dumps(parts)
        return f"{backbone.name}-{hashlib.sha256(ident.encode()).hexdigest()[:32]}"

    def path(self, key: str) -> Path:
        return self.cache_dir / f"{key}.npy"

    def load(self, key: str, feature_dim: int | None = None) -> np.ndarray | None:
        """The cached (n, d) array, or None when absent or unreadable (then it is recomputed)."""
        p = self.path(key)
        if not p.is_file():
            return None
        try:
            arr = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as exc:
            _LOG.warning("ignoring unreadable feature cache file %s: %s", p, exc)
            return None
        if arr.ndim != 2 or arr.dtype != np.float32 or (feature_dim is not None and arr.shape[1] != feature_dim):
            _LOG.warning("ignoring feature cache file %s with shape %s dtype %s", p, arr.shape, arr.dtype)
            return None
        return arr

    def save(self, key: str, features: np.ndarray, meta: dict[str, Any] | None = None) -> Path:
        """Write features (and a JSON description) atomically; returns the .npy path."""
        feats = np.ascontiguousarray(features, dtype=np.float32)
        if feats.ndim != 2:
            raise ValueError(f"features must be a 2-D (n, d) array, got shape {feats.shape}")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        p = self.path(key)
        self._atomic(p, lambda f: np.save(f, feats, allow_pickle=False), binary=True)
        info = {"key": key, "shape": list(feats.shape), **(meta or {})}
        self._atomic(p.with_suffix(".json"), lambda f: f.write(json.dumps(info, indent=2)), binary=False)
        return p

    def _atomic(self, path: Path, write: Callable[[Any], Any], binary: bool) -> None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb" if binary else "w") as f:
                write(f)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def get_or_compute(self, backbone: Backbone, data_hash: str, compute: Callable[[], np.ndarray],
                       meta: dict[str, Any] | None = None) -> np.ndarray:
        """Cached features for ``data_hash``, or ``compute()`` them once and store them."""
        key = self.key(backbone, data_hash)
        cached = self.load(key, backbone.feature_dim)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        feats = np.asarray(compute(), dtype=np.float32)
        if feats.ndim != 2 or feats.shape[1] != backbone.feature_dim:
            raise ValueError(f"computed features have shape {feats.shape}, expected (n, {backbone.feature_dim})")
        full_meta = {
            "backbone": backbone.name,
            "preprocessing_id": backbone.preprocessing_id,
            "weights_sha256": backbone.weights_sha256,
            "data_hash": data_hash,
            "runtime": backbone.runtime,
            "device": getattr(backbone, "device", ""),
            "precision": getattr(backbone, "precision", ""),
            **(meta or {}),
        }
        self.save(key, feats, full_meta)
        return feats

    def features_for_arrays(self, backbone: Backbone, images: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
        """Features of in-memory RGB uint8 images, keyed by their bytes."""
        return self.get_or_compute(
            backbone, hash_arrays(images), lambda: backbone.extract(images), {"n": len(images), "source": "arrays"}
        )

    def features_for_files(
        self,
        backbone: Backbone,
        paths: Sequence[str | os.PathLike[str]],
        *,
        loader: Callable[[str], np.ndarray] = load_image_file,
        hash_contents: bool = False,
        workers: int | None = None,
    ) -> np.ndarray:
        """Features of image files (rows in the order given), keyed by the file list with sizes/mtimes;
        ``workers`` threads decode and crop the next batch while the backbone runs (see ``prefetch``)."""
        paths = [os.fspath(p) for p in paths]

        def compute() -> np.ndarray:
            return extract_prefetched(backbone, len(paths), lambda i: loader(paths[i]), workers=workers)

        return self.get_or_compute(
            backbone, hash_files(paths, hash_contents), compute, {"n": len(paths), "source": "files"}
        )
