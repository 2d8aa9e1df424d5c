"""One file per learner: safetensors tensors + JSON metadata, checksummed, written atomically.

Layout: a standard safetensors file.  Its ``__metadata__`` holds one key, ``"cbcl_pr"``, a JSON
document with the format version, backbone, feature dimension, class names, learner config, model
version, D, increments, classifier kind and the SHA-256 of the tensors (name, dtype, shape and bytes
of every tensor, in name order).  Tensors: ``counts`` (N,), ``means`` (N, d), ``owner`` (N,) class
index of each cluster; full mode ``ranks`` (N,) and ``factors`` (d, sum of ranks); diagonal mode
``diag`` (N, d); a linear head adds ``head.weight`` and ``head.bias``.

Writing: a temporary file in the target directory, fsync, ``os.replace`` over the target, fsync of
the directory, so a crash leaves either the old file or the new one, never a torn file.  Reading
refuses (with :class:`MemoryFileError` subclasses) a file that does not parse, fails the checksum,
comes from a newer format, another backbone or another feature width; the caller's current learner
is never touched by a failed load because loading builds a new object.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from .classifiers.base import LinearSnapshot
from .clustering import ClassClusters
from .memory import ClusterMemory

if TYPE_CHECKING:
    from .learner import CBCLPRLearner

__all__ = [
    "FORMAT_VERSION", "MemoryFileError", "CorruptMemoryFileError", "IncompatibleMemoryFileError",
    "save_learner", "load_learner", "read_metadata",
]

FORMAT_VERSION = 1
_META_KEY = "cbcl_pr"


class MemoryFileError(ValueError):
    """A memory file cannot be used."""


class CorruptMemoryFileError(MemoryFileError):
    """The file is truncated, unparsable or fails its checksum."""


class IncompatibleMemoryFileError(MemoryFileError):
    """The file is sound but made for another backbone, feature width or a newer format."""


def _checksum(tensors: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def _pack(learner: "CBCLPRLearner") -> tuple[dict[str, np.ndarray], dict]:
    mem = learner.memory
    d = learner.feature_dim
    items = list(mem.items())
    counts = [cc.counts for _, cc in items]
    tensors: dict[str, np.ndarray] = {
        "counts": np.concatenate(counts) if counts else np.zeros(0, np.int64),
        "means": np.concatenate([cc.means for _, cc in items]) if items else np.zeros((0, d), np.float32),
        "owner": np.concatenate([np.full(cc.n_clusters, i, np.int64) for i, (_, cc) in enumerate(items)])
        if items else np.zeros(0, np.int64),
    }
    if mem.covariance == "full":
        facs = [f for _, cc in items for f in cc.factors]
        tensors["ranks"] = np.array([f.shape[1] for f in facs], np.int64)
        tensors["factors"] = np.ascontiguousarray(np.concatenate(facs, axis=1)) if facs else np.zeros((d, 0), np.float32)
    else:
        tensors["diag"] = np.concatenate([cc.diag for _, cc in items]) if items else np.zeros((0, d), np.float32)
    served = learner._served
    head_kind = None
    if isinstance(served.head, LinearSnapshot):
        head_kind = served.head.kind
        tensors["head.weight"] = np.ascontiguousarray(served.head.weight)
        tensors["head.bias"] = np.ascontiguousarray(served.head.bias)
    meta = {
        "format_version": FORMAT_VERSION,
        "backbone": learner.backbone,
        "feature_dim": d,
        "classes": list(mem.classes),
        "config": learner.config.to_dict(),
        "model_version": served.model_version,
        "increments": learner.increments_,
        "distance_threshold": learner.distance_threshold_,
        "head_kind": head_kind,
        "sha256": _checksum(tensors),
    }
    return tensors, meta


def save_learner(learner: "CBCLPRLearner", path: str | os.PathLike) -> Path:
    """Atomically write ``learner`` to ``path``; returns the path."""
    path = Path(path)
    with learner._write_lock:  # a consistent memory + head
        tensors, meta = _pack(learner)
    blob = st_save(tensors, metadata={_META_KEY: json.dumps(meta, sort_keys=True)})
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories
        return path
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def read_metadata(path: str | os.PathLike) -> dict:
    """The JSON metadata of a memory file (no checksum verification)."""
    return _parse(Path(path).read_bytes(), Path(path))[1]


def _parse(blob: bytes, path: Path) -> tuple[dict[str, np.ndarray], dict]:
    if len(blob) < 8:
        raise CorruptMemoryFileError(f"{path}: not a memory file ({len(blob)} bytes, truncated?)")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > len(blob) - 8:
        raise CorruptMemoryFileError(f"{path}: header claims {hlen} bytes but the file has {len(blob) - 8} (truncated?)")
    try:
        header = json.loads(blob[8:8 + hlen])
        meta = json.loads(header["__metadata__"][_META_KEY])
        tensors = st_load(blob)
    except Exception as exc:
        raise CorruptMemoryFileError(f"{path}: unreadable memory file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(meta, dict):
        raise CorruptMemoryFileError(f"{path}: metadata is not a JSON object")
    return tensors, meta


def load_learner(path: str | os.PathLike, expected_backbone: str | None = None,
                 expected_feature_dim: int | None = None) -> "CBCLPRLearner":
    """Read and verify a memory file and build a new learner from it."""
    from .learner import CBCLPRLearner, LearnerConfig, _Served

    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise MemoryFileError(f"{path}: cannot read memory file: {exc}") from exc
    tensors, meta = _parse(blob, path)
    version = meta.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise IncompatibleMemoryFileError(
            f"{path}: format version {version!r} is not supported (this code reads up to {FORMAT_VERSION})")
    if meta.get("sha256") != _checksum(tensors):
        raise CorruptMemoryFileError(f"{path}: checksum mismatch; the file is corrupt")
    if expected_backbone is not None and meta.get("backbone") != expected_backbone:
        raise IncompatibleMemoryFileError(
            f"{path}: memory was made with backbone {meta.get('backbone')!r}, expected {expected_backbone!r}")
    if expected_feature_dim is not None and meta.get("feature_dim") != expected_feature_dim:
        raise IncompatibleMemoryFileError(
            f"{path}: memory has feature_dim {meta.get('feature_dim')!r}, expected {expected_feature_dim}")
    try:
        config = LearnerConfig.from_dict(meta["config"])
        learner = CBCLPRLearner(config, backbone=meta["backbone"], feature_dim=int(meta["feature_dim"]))
        classes = [str(c) for c in meta["classes"]]
        counts, means, owner = tensors["counts"], tensors["means"], tensors["owner"]
        if config.covariance == "full":
            ranks = tensors["ranks"]
            offsets = np.concatenate([[0], np.cumsum(ranks)])
            factors = tensors["factors"]
        per_class = {}
        for ci, name in enumerate(classes):
            idx = np.flatnonzero(owner == ci)
            if config.covariance == "full":
                scat = [factors[:, offsets[i]:offsets[i + 1]].astype(np.float64) for i in idx]
            else:
                scat = [tensors["diag"][i].astype(np.float64) for i in idx]
            per_class[name] = ClassClusters.from_stats(counts[idx], means[idx].astype(np.float64),
                                                       config.covariance, scat)
        memory = ClusterMemory(learner.feature_dim, config.covariance, config.max_clusters,
                               config.reduction, config.seed, per_class)
        learner._memory = memory
        learner.distance_threshold_ = meta["distance_threshold"]
        learner.increments_ = int(meta["increments"])
        head = None
        if meta.get("head_kind") is not None:
            head = LinearSnapshot(meta["head_kind"], tuple(classes), tensors["head.weight"].copy(),
                                  tensors["head.bias"].copy())
        learner._served = learner._build(memory, learner.distance_threshold_, learner.increments_,
                                         head=head, version=int(meta["model_version"]))
        if len(memory) == 0:
            learner._served = _Served((), None, None, int(meta["model_version"]))
    except MemoryFileError:
        raise
    except Exception as exc:
        raise CorruptMemoryFileError(f"{path}: inconsistent memory file ({type(exc).__name__}: {exc})") from exc
    return learner
