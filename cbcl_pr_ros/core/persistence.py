"""One file per learner: safetensors tensors + JSON metadata, checksummed, written atomically.

Layout: a standard safetensors file.  Its ``__metadata__`` holds one key, ``"cbcl_pr"``, a JSON
document with the format version, backbone, feature dimension, class names, learner config, model
version, D, increments, classifier kind and a SHA-256.  Tensors: ``counts`` (N,), ``means`` (N, d),
``owner`` (N,) class index of each cluster; full mode ``ranks`` (N,) and ``factors`` (d, sum of
ranks); diagonal mode ``diag`` (N, d); a linear head adds ``head.weight`` (C, d) and ``head.bias`` (C,).

Format 3 stores each class in the dtype its memory chose (:mod:`.clustering`, "Storage
precision"): ``storage`` (C,) uint8 says which (0 float32, 1 float16); ``means``/``factors``/``diag``
hold the float32 classes' clusters as before and ``means.f16``/``factors.f16``/``diag.f16`` the
float16 classes' (in cluster order within each group; ``ranks`` still covers every cluster).  Every
one of these tensors is always present (possibly empty), so the layout is fixed by the covariance
mode.  Files of formats 1 and 2 (everything float32) are read unchanged.

Format 4 adds the teach-time views' spread shared by all classes (:mod:`.view_spread`): tensor
``view_spread`` (d, r <= 64) float16, always present (r = 0 when no views were taught), and metadata
``view_spread_images``.  Files of formats 1-3 are read with no view spread.

Format 5 adds metadata ``provenance``: per class, the list of its contributions (robot,
Unix time, shots, id; :mod:`.provenance`), checked like every other field (exactly the stored
classes, 1-64 entries each, bounded names, times and shots, at least the shots the class holds).
Files of formats 1-4 are read with no provenance (the learner gives each class one entry of an
unknown robot, :func:`.provenance.legacy_contribution`).

Format 6 adds the open-set gate's negatives (:mod:`.negatives`): tensor ``negatives``
(m, d) float16, always present (m = 0 when none), m at most the config's ``negatives_capacity``,
feature vectors only (never images), and metadata ``negatives_offered`` (>= m).  Files of formats
1-5 are read with an empty store.

Integrity: format 2's SHA-256 covers the metadata (canonical JSON without the digest) *and* every
tensor's name, dtype, shape and bytes, so an edited class name, D, K or head is as corrupt as a
flipped tensor byte.  Format 1 files (digest over the tensors only) are still read, with every
structural check below applied.  The digest is not a signature: whoever can write the memory
directory can forge a file (docs/security.md), which is why every field is also checked for
consistency: shapes against ``feature_dim``, classes and clusters, dtypes, finite values, unique
valid class names, D > 0, K >= classes, the head's shape.

This module knows the file format and :class:`LearnerState` only; it never touches a learner's
internals (``CBCLPRLearner.to_state``/``from_state`` do), so it does not import the learner.

Writing: a temporary file in the target directory, fsync, ``os.replace`` over the target, fsync of
the directory, so a crash leaves either the old file or the new one, never a torn file.  No pickle
anywhere: a refused file runs no code.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from cbcl_pr_ros.plurals import counted

from .classifiers.base import LinearSnapshot
from .clustering import COVARIANCE_MODES, ClassClusters
from .memory import ClusterMemory
from .negatives import MAX_NEGATIVES, NegativeStore
from .provenance import Contribution, legacy_contribution, provenance_from_json, provenance_to_json
from .validation import check_label
from .calibration import MAX_TEMPERATURE_WEIGHT
from .view_spread import MAX_IMAGES, MAX_RANK, ViewSpread

__all__ = [
    "FORMAT_VERSION", "MAX_FEATURE_DIM", "MemoryFileError", "CorruptMemoryFileError",
    "IncompatibleMemoryFileError", "LearnerState", "state_to_bytes", "state_from_bytes",
    "write_atomic", "save_state", "load_state", "read_metadata", "filled_provenance", "checked_bytes",
    "repaired_bytes", "MAX_COUNTER", "CONFIG_RANGES", "EXTRA_RANGES",
]

FORMAT_VERSION = 6
MAX_FEATURE_DIM = 65536  # wider than any backbone; refuses absurd widths before any allocation
_META_KEY = "cbcl_pr"
_FLOAT_TENSORS = ("means", "factors", "diag", "means.f16", "factors.f16", "diag.f16", "head.weight", "head.bias",
                  "view_spread", "negatives")
_HALF = {"float32": 0, "float16": 1}
#: the largest counter a file may hold (model version, increments, negatives offered): far beyond any
#: use, with room below int64 so that counting on from a loaded value never overflows
MAX_COUNTER = 2**62


class MemoryFileError(ValueError):
    """A memory file cannot be used."""


class CorruptMemoryFileError(MemoryFileError):
    """The file is truncated, unparsable, inconsistent or fails its checksum."""


class IncompatibleMemoryFileError(MemoryFileError):
    """The file is sound but made for another backbone, feature width or a newer format."""


@dataclass(frozen=True)
class LearnerState:
    """Everything a learner is, as plain data: what is saved, and what a learner is rebuilt from.

    ``config`` is the LearnerConfig as a dict; ``head`` the trained linear head (None when the
    classifier is refitted from the memory in closed form).
    """

    backbone: str
    feature_dim: int
    config: dict
    memory: ClusterMemory
    distance_threshold: float | None
    increments: int
    model_version: int
    head: LinearSnapshot | None = None
    # the open-set gate's distance prior and the calibrated temperature (JSON numbers);
    # saved as metadata "learner_state", None in files written before it existed
    learner_state: dict | None = None
    # the teach-time views' shared spread (format 4): tensor "view_spread", metadata "view_spread_images"
    view_spread: ViewSpread | None = None
    # per class, where its statistics came from (format 5): metadata "provenance"; None before it
    provenance: dict[str, tuple[Contribution, ...]] | None = None
    # the open-set gate's negatives (format 6): tensor "negatives", metadata "negatives_offered"
    negatives: NegativeStore | None = None


def filled_provenance(state: LearnerState) -> dict[str, tuple[Contribution, ...]]:
    """``state``'s provenance with an entry of unknown origin for every class that has none."""
    prov = dict(state.provenance or {})
    return {c: tuple(prov.get(c) or (legacy_contribution(cc.counts, cc.means),)) for c, cc in state.memory.items()}


# ------------------------------------------------------------------ encoding
def _tensor_digest(h: Any, tensors: dict[str, np.ndarray]) -> None:
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())


def _checksum(tensors: dict[str, np.ndarray], meta: dict | None) -> str:
    """Format 2: metadata (without the digest) + tensors; format 1 (``meta`` None): tensors only."""
    h = hashlib.sha256()
    if meta is not None:
        body = {k: v for k, v in meta.items() if k != "sha256"}
        h.update(json.dumps(body, sort_keys=True, allow_nan=False).encode())
        h.update(b"\x00")
    _tensor_digest(h, tensors)
    return h.hexdigest()


def _pack(state: LearnerState) -> tuple[dict[str, np.ndarray], dict]:
    mem, d = state.memory, state.feature_dim
    items = list(mem.items())
    tensors: dict[str, np.ndarray] = {
        "counts": np.concatenate([cc.counts for _, cc in items]).astype(np.int64) if items
        else np.zeros(0, np.int64),
        "owner": np.concatenate([np.full(cc.n_clusters, i, np.int64) for i, (_, cc) in enumerate(items)])
        if items else np.zeros(0, np.int64),
        "storage": np.array([_HALF[cc.storage] for _, cc in items], np.uint8),
    }
    if mem.covariance == "full":
        tensors["ranks"] = np.array([f.shape[1] for _, cc in items for f in cc.factors], np.int64)
    for suffix, dtype in (("", np.float32), (".f16", np.float16)):
        group = [cc for _, cc in items if cc.means.dtype == dtype]
        tensors["means" + suffix] = (np.concatenate([cc.means for cc in group]).astype(dtype) if group
                                     else np.zeros((0, d), dtype))
        if mem.covariance == "full":
            facs = [f for cc in group for f in cc.factors]
            tensors["factors" + suffix] = (np.ascontiguousarray(np.concatenate(facs, axis=1), dtype) if facs
                                           else np.zeros((d, 0), dtype))
        else:
            tensors["diag" + suffix] = (np.concatenate([cc.diag for cc in group]).astype(dtype) if group
                                        else np.zeros((0, d), dtype))
    spread = state.view_spread or ViewSpread.empty(d)
    tensors["view_spread"] = np.ascontiguousarray(spread.factor, np.float16)
    negatives = state.negatives or NegativeStore.empty(d, 0)
    tensors["negatives"] = np.ascontiguousarray(negatives.vectors, np.float16).reshape(-1, d)
    head_kind = None
    if state.head is not None:
        head_kind = state.head.kind
        tensors["head.weight"] = np.ascontiguousarray(state.head.weight, np.float32)
        tensors["head.bias"] = np.ascontiguousarray(state.head.bias, np.float32)
    meta = {
        "format_version": FORMAT_VERSION,
        "backbone": state.backbone,
        "feature_dim": int(d),
        "classes": list(mem.classes),
        "config": dict(state.config),
        "model_version": int(state.model_version),
        "increments": int(state.increments),
        "distance_threshold": None if state.distance_threshold is None else float(state.distance_threshold),
        "head_kind": head_kind,
        "view_spread_images": int(spread.images),
        "negatives_offered": int(negatives.offered),
        "provenance": provenance_to_json(filled_provenance(state)),
    }
    if state.learner_state is not None:
        meta["learner_state"] = dict(state.learner_state)
    meta["sha256"] = _checksum(tensors, meta)
    return tensors, meta


def state_to_bytes(state: LearnerState) -> bytes:
    """The file's bytes for ``state`` (nothing written)."""
    tensors, meta = _pack(state)
    return st_save(tensors, metadata={_META_KEY: json.dumps(meta, sort_keys=True, allow_nan=False)})


def write_atomic(path: str | os.PathLike, blob: bytes) -> Path:
    """Write ``blob`` to ``path`` through a temporary file + fsync + rename (+ directory fsync)."""
    path = Path(path)
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


def checked_bytes(state: LearnerState, where: str = "the memory to write") -> bytes:
    """The file's bytes for ``state`` once read back with every rule of :func:`state_from_bytes`:
    a state that load would refuse is never written (MemoryFileError says why, nothing written)."""
    try:
        blob = state_to_bytes(state)
    except (TypeError, ValueError, OverflowError) as exc:
        raise CorruptMemoryFileError(f"{where}: cannot be stored ({type(exc).__name__}: {str(exc)[:200]})") from None
    state_from_bytes(blob, where)
    return blob


def save_state(state: LearnerState, path: str | os.PathLike) -> Path:
    """Atomically write ``state`` to ``path`` (checked as load checks it); returns the path."""
    return write_atomic(path, checked_bytes(state, str(path)))


# ------------------------------------------------------------------ decoding
def _parse(blob: bytes, where: str) -> tuple[dict[str, np.ndarray], dict]:
    if len(blob) < 8:
        raise CorruptMemoryFileError(f"{where}: not a memory file ({len(blob)} bytes, truncated?)")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > len(blob) - 8:
        raise CorruptMemoryFileError(f"{where}: header claims {hlen} bytes but the file has "
                                     f"{len(blob) - 8} (truncated?)")
    try:
        header = json.loads(blob[8:8 + hlen])
        meta = json.loads(header["__metadata__"][_META_KEY])
        tensors = st_load(blob)
    except Exception as exc:
        raise CorruptMemoryFileError(f"{where}: unreadable memory file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(meta, dict):
        raise CorruptMemoryFileError(f"{where}: metadata is not a JSON object")
    return tensors, meta


def _bad(where: str, what: str) -> CorruptMemoryFileError:
    return CorruptMemoryFileError(f"{where}: inconsistent memory file: {what}")


def _int(meta: dict, key: str, where: str, lo: int, hi: int) -> int:
    v = meta.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _bad(where, f"{key} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


# Ranges of every numeric config field a memory file may carry (docs/security.md): a file is
# refused at once when one is outside, so a forged file cannot ask for unbounded work at load or at
# the next teach (1e9 SGD epochs, a billion rehearsal samples). They match the node parameters'
# ranges where one exists (test_params checks it) and sit well above every value in use otherwise.
# name: (low, high, integer, None allowed)
CONFIG_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "distance_threshold": (1e-12, 1e15, False, True),  # a large D only means fewer clusters: no work
    "max_clusters": (1, 10_000_000, True, True),
    "exemplars_per_class": (1, 100_000, True, False),
    "singleton_jitter": (0.0, 1e3, False, False),
    "shrinkage": (0.0, 1.0, False, False),
    "blend": (0.0, 1e3, False, False),
    "transform_power": (1e-3, 10.0, False, False),
    "distance_prior": (1e-12, 1e6, False, True),
    "epochs": (1, 1000, True, False),
    "epochs_per_increment": (0, 1000, True, False),
    "lr": (1e-12, 100.0, False, False),
    "momentum": (0.0, 1.0, False, False),
    "weight_decay": (0.0, 100.0, False, False),
    "batch_size": (1, 100_000, True, False),
    "vote_neighbours": (1, 10_000, True, False),
    "unknown_distance_factor": (1e-3, 1000.0, False, False),
    "min_confidence": (0.0, 1.0, False, False),
    "negatives_capacity": (0, MAX_NEGATIVES, True, False),
    "negative_quantile": (0.0, 1.0, False, False),
    "negative_margin": (1e-3, 1.0, False, False),
    "negative_rank": (0, MAX_NEGATIVES, True, False),
    "seed": (0, 2**63 - 1, True, False),
    "fit_threads": (1, 256, True, True),
}
# learner_state fields (scales and counters; the metadata's D is checked in _check_meta, <= 1e15)
EXTRA_RANGES: dict[str, tuple[float, float]] = {
    "distance_prior": (1e-12, 1e6), "temperature": (1e-6, 1e6), "temperature_weight": (0.0, MAX_TEMPERATURE_WEIGHT),
}


def _in_range(value: Any, lo: float, hi: float, integer: bool) -> bool:
    kinds = (int,) if integer else (int, float)
    return (not isinstance(value, bool) and isinstance(value, kinds) and math.isfinite(value)
            and lo <= value <= hi)


def _check_ranges(meta: dict, config: dict, where: str) -> None:
    """Every numeric field of the config and of the learner state within its range."""
    for key, (lo, hi, integer, none_ok) in CONFIG_RANGES.items():
        if key not in config or (config[key] is None and none_ok):
            continue
        if not _in_range(config[key], lo, hi, integer):
            raise _bad(where, f"config {key} must be {'an integer' if integer else 'a number'} in "
                              f"[{lo:g}, {hi:g}], got {str(config[key])[:40]}")
    extra = meta.get("learner_state")
    if isinstance(extra, dict):
        for key, (lo, hi) in EXTRA_RANGES.items():
            if extra.get(key) is not None and not _in_range(extra[key], lo, hi, False):
                raise _bad(where, f"learner_state {key} must be a number in [{lo:g}, {hi:g}], "
                                  f"got {str(extra[key])[:40]}")


def _check_meta(meta: dict, where: str) -> tuple[int, list[str], str, str | None]:
    """Types and ranges of the metadata fields; returns (d, classes, covariance, head_kind)."""
    backbone = meta.get("backbone")
    if not isinstance(backbone, str) or not backbone:
        raise _bad(where, f"backbone must be a non-empty string, got {backbone!r}")
    d = _int(meta, "feature_dim", where, 1, MAX_FEATURE_DIM)
    _int(meta, "model_version", where, 0, MAX_COUNTER)
    _int(meta, "increments", where, 0, MAX_COUNTER)
    classes = meta.get("classes")
    if not isinstance(classes, list):
        raise _bad(where, "classes must be a list of names")
    for c in classes:
        try:
            check_label(c, name="class name")
        except (TypeError, ValueError) as exc:
            raise _bad(where, str(exc)) from None
    if len(set(classes)) != len(classes):
        dup = sorted({c for c in classes if classes.count(c) > 1})
        raise _bad(where, f"duplicate class names {dup}")
    config = meta.get("config")
    if not isinstance(config, dict):
        raise _bad(where, "config must be a JSON object")
    _check_ranges(meta, config, where)
    covariance = config.get("covariance", "full")
    if covariance not in COVARIANCE_MODES:
        raise _bad(where, f"config covariance must be one of {COVARIANCE_MODES}, got {covariance!r}")
    k = config.get("max_clusters")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < max(1, len(classes))):
        raise _bad(where, f"cluster budget K={k!r} is smaller than the {counted(len(classes), 'class')}")
    dist = meta.get("distance_threshold")
    if dist is None:
        if classes:
            raise _bad(where, "distance threshold D is missing although classes are stored")
    elif isinstance(dist, bool) or not isinstance(dist, (int, float)) or not math.isfinite(dist) or dist <= 0 \
            or dist > 1e15:
        raise _bad(where, f"distance threshold D must be a finite number > 0 and <= 1e15, got {str(dist)[:40]}")
    head_kind = meta.get("head_kind")
    if head_kind is not None and not isinstance(head_kind, str):
        raise _bad(where, f"head_kind must be a string or null, got {head_kind!r}")
    return d, list(classes), covariance, head_kind


def _expect(tensors: dict[str, np.ndarray], name: str, dtype: Any, shape: tuple, where: str) -> np.ndarray:
    arr = tensors[name]
    if arr.dtype != np.dtype(dtype):
        raise _bad(where, f"tensor {name} has dtype {arr.dtype}, expected {np.dtype(dtype)}")
    if arr.shape != shape:
        raise _bad(where, f"tensor {name} has shape {arr.shape}, expected {shape}")
    return arr


def _check_tensors(tensors: dict[str, np.ndarray], d: int, classes: list[str], covariance: str,
                   head_kind: str | None, k: int | None, where: str, version: int,
                   negatives_capacity: int = MAX_NEGATIVES) -> np.ndarray:
    """Every structural check; returns each cluster's storage (0 float32, 1 float16)."""
    want = {"counts", "means", "owner"} | ({"ranks", "factors"} if covariance == "full" else {"diag"})
    if version >= 3:
        want |= {"storage", "means.f16"} | ({"factors.f16"} if covariance == "full" else {"diag.f16"})
    if version >= 4:
        want |= {"view_spread"}
    if version >= 6:
        want |= {"negatives"}
    if head_kind is not None:
        want |= {"head.weight", "head.bias"}
    if set(tensors) != want:
        raise _bad(where, f"tensors {sorted(tensors)} do not match the layout {sorted(want)}")
    n = tensors["counts"].shape[0] if tensors["counts"].ndim == 1 else -1
    if n < 0:
        raise _bad(where, f"tensor counts has shape {tensors['counts'].shape}, expected (N,)")
    counts = _expect(tensors, "counts", np.int64, (n,), where)
    owner = _expect(tensors, "owner", np.int64, (n,), where)
    if n and counts.min() < 1:
        raise _bad(where, "every cluster must count at least one vector")
    if k is not None and n > k:
        raise _bad(where, f"{n} clusters exceed the cluster budget K={k}")
    if n and (owner.min() < 0 or owner.max() >= len(classes)):
        raise _bad(where, f"cluster owners must index the {counted(len(classes), 'class')}")
    if len(np.unique(owner)) != len(classes):
        raise _bad(where, "every class must own at least one cluster")
    half = np.zeros(n, bool)
    if version >= 3:
        storage = _expect(tensors, "storage", np.uint8, (len(classes),), where)
        if storage.size and storage.max() > 1:
            raise _bad(where, "class storage must be 0 (float32) or 1 (float16)")
        half = storage[owner].astype(bool) if n else half
    groups = (("", np.float32, ~half), (".f16", np.float16, half)) if version >= 3 else (("", np.float32, ~half),)
    if covariance == "full":
        ranks = _expect(tensors, "ranks", np.int64, (n,), where)
        if n and (ranks.min() < 0 or ranks.max() > d):
            raise _bad(where, f"factor ranks must be in [0, {d}]")
    for suffix, dtype, sel in groups:
        _expect(tensors, "means" + suffix, dtype, (int(sel.sum()), d), where)
        if covariance == "full":
            _expect(tensors, "factors" + suffix, dtype, (d, int(ranks[sel].sum())), where)
        else:
            diag = _expect(tensors, "diag" + suffix, dtype, (int(sel.sum()), d), where)
            if diag.size and diag.min() < 0:
                raise _bad(where, "diagonal scatters must be >= 0")
    if version >= 4:
        vs = tensors["view_spread"]
        if vs.dtype != np.float16 or vs.ndim != 2 or vs.shape[0] != d or vs.shape[1] > MAX_RANK:
            raise _bad(where, f"tensor view_spread has {vs.dtype} {vs.shape}, expected float16 ({d}, <= {MAX_RANK})")
    if version >= 6:
        neg = tensors["negatives"]
        cap = negatives_capacity
        if neg.dtype != np.float16 or neg.ndim != 2 or neg.shape[1] != d or neg.shape[0] > cap:
            raise _bad(where, f"tensor negatives has {neg.dtype} {neg.shape}, expected float16 (<= {cap}, {d})")
    if head_kind is not None:
        _expect(tensors, "head.weight", np.float32, (len(classes), d), where)
        _expect(tensors, "head.bias", np.float32, (len(classes),), where)
    for name in _FLOAT_TENSORS:
        if name in tensors and not np.all(np.isfinite(tensors[name])):
            raise _bad(where, f"tensor {name} holds NaN or infinite values")
    return half


def state_from_bytes(blob: bytes, where: str = "memory file", expected_backbone: str | None = None,
                     expected_feature_dim: int | None = None) -> LearnerState:
    """Verify a memory file's bytes completely and return its state; MemoryFileError otherwise.

    ``where`` names the file in messages (callers pass a name that reveals nothing they should not).
    """
    tensors, meta = _parse(blob, where)
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise IncompatibleMemoryFileError(
            f"{where}: format version {version!r} is not supported (this code reads up to {FORMAT_VERSION})")
    if meta.get("sha256") != _checksum(tensors, meta if version >= 2 else None):
        raise CorruptMemoryFileError(f"{where}: checksum mismatch; the file is corrupt")
    if expected_backbone is not None and meta.get("backbone") != expected_backbone:
        raise IncompatibleMemoryFileError(
            f"{where}: memory was made with backbone {meta.get('backbone')!r}, expected {expected_backbone!r}")
    if expected_feature_dim is not None and meta.get("feature_dim") != expected_feature_dim:
        raise IncompatibleMemoryFileError(
            f"{where}: memory has feature_dim {meta.get('feature_dim')!r}, expected {expected_feature_dim}")
    d, classes, covariance, head_kind = _check_meta(meta, where)
    config = meta["config"]
    k = config.get("max_clusters")
    cap = config.get("negatives_capacity", MAX_NEGATIVES)  # its range is checked with the config's
    half = _check_tensors(tensors, d, classes, covariance, head_kind, k, where, version,
                          cap if isinstance(cap, int) and not isinstance(cap, bool) else MAX_NEGATIVES)
    counts, owner = tensors["counts"], tensors["owner"]
    # each cluster's row in its dtype group's means/diag, and its columns in that group's factors
    row = np.zeros(len(counts), np.int64)
    start = np.zeros(len(counts), np.int64)
    ranks = tensors.get("ranks", np.zeros(len(counts), np.int64))
    for sel in (~half, half):
        row[sel] = np.arange(int(sel.sum()))
        start[sel] = np.concatenate([[0], np.cumsum(ranks[sel])[:-1]]) if sel.any() else []
    per_class = {}
    try:
        for ci, name in enumerate(classes):
            idx = np.flatnonzero(owner == ci)
            sfx = ".f16" if half[idx].all() and idx.size else ""
            if half[idx].any() != half[idx].all():
                raise ValueError(f"class {name!r} mixes storage dtypes")
            means = tensors["means" + sfx][row[idx]].copy()
            if covariance == "full":
                fac = tensors["factors" + sfx]
                per_class[name] = ClassClusters(counts[idx].copy(), means, covariance, tuple(
                    np.ascontiguousarray(fac[:, start[i]:start[i] + ranks[i]]) for i in idx))
            else:
                per_class[name] = ClassClusters(counts[idx].copy(), means, covariance, (),
                                                tensors["diag" + sfx][row[idx]].copy())
        memory = ClusterMemory(d, covariance, k, config.get("reduction", "kmeans"),
                               config.get("seed", 0), per_class, config.get("memory_precision", "float32"))
        head = None
        if head_kind is not None:
            head = LinearSnapshot(head_kind, tuple(classes), tensors["head.weight"].copy(),
                                  tensors["head.bias"].copy())
    except (TypeError, ValueError) as exc:
        raise _bad(where, f"{type(exc).__name__}: {exc}") from exc
    spread = None
    if version >= 4:
        images = _int(meta, "view_spread_images", where, 0, MAX_IMAGES)
        try:
            spread = ViewSpread(tensors["view_spread"].astype(np.float32), images)
        except ValueError as exc:
            raise _bad(where, str(exc)) from exc
    provenance = None
    if version >= 5:
        try:
            provenance = provenance_from_json(meta.get("provenance"), classes,
                                              {c: cc.n_samples for c, cc in memory.items()})
        except (TypeError, ValueError) as exc:
            raise _bad(where, str(exc)[:200]) from None
    negatives = None
    if version >= 6:
        offered = _int(meta, "negatives_offered", where, len(tensors["negatives"]), MAX_COUNTER)
        negatives = NegativeStore(tensors["negatives"].copy(), cap if isinstance(cap, int) else MAX_NEGATIVES,
                                  offered)
    dist = meta.get("distance_threshold")
    extra = meta.get("learner_state")
    if extra is not None and not isinstance(extra, dict):
        raise _bad(where, "learner_state must be a JSON object")
    return LearnerState(meta["backbone"], d, dict(config), memory,
                        None if dist is None else float(dist), int(meta["increments"]),
                        int(meta["model_version"]), head, extra, spread, provenance, negatives)


# ------------------------------------------------------------------ repair
def _clamped(value: Any, lo: float, hi: float, integer: bool) -> float | int | None:
    """``value`` moved into [lo, hi] (None when it is no finite number: the field is dropped)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    v = min(max(value, lo), hi)
    return int(min(max(round(v), math.ceil(lo)), math.floor(hi))) if integer else float(v)


def _clamp_fields(table: dict, ranges: dict, label: str, notes: list[str]) -> None:
    """Clamp (or drop) each field of ``table`` that ``ranges`` refuses; one note per field."""
    for key, spec in ranges.items():
        lo, hi = spec[0], spec[1]
        integer, none_ok = (spec[2], spec[3]) if len(spec) > 2 else (False, True)
        v = table.get(key)
        if key not in table or (v is None and none_ok) or _in_range(v, lo, hi, integer):
            continue
        fixed = _clamped(v, lo, hi, integer)
        shown = str(v)[:40].encode("unicode_escape").decode("ascii")
        if fixed is None:
            del table[key]
            notes.append(f"{label} {key}: {shown} is no finite number: dropped (the default applies)")
        else:
            table[key] = fixed
            notes.append(f"{label} {key}: {shown} clamped to {fixed:g}")


def _repair_meta(tensors: dict[str, np.ndarray], meta: dict, version: int, notes: list[str]) -> None:
    """Every metadata field load refuses by range, clamped into it (see :func:`repaired_bytes`)."""
    config = meta.get("config")
    if isinstance(config, dict):
        _clamp_fields(config, CONFIG_RANGES, "config", notes)
    if isinstance(meta.get("learner_state"), dict):
        _clamp_fields(meta["learner_state"], EXTRA_RANGES, "learner_state", notes)
    neg = tensors.get("negatives")
    spread = tensors.get("view_spread")
    counters = {"model_version": (0, MAX_COUNTER, True, False), "increments": (0, MAX_COUNTER, True, False),
                "distance_threshold": (1e-12, 1e15, False, True)}
    if version >= 4:
        counters["view_spread_images"] = (int(spread is not None and spread.ndim == 2 and spread.shape[1] > 0),
                                          MAX_IMAGES, True, False)
    if version >= 6:
        counters["negatives_offered"] = (len(neg) if neg is not None else 0, MAX_COUNTER, True, False)
    _clamp_fields(meta, counters, "metadata", notes)
    classes = meta.get("classes") if isinstance(meta.get("classes"), list) else []
    counts, owner = tensors.get("counts"), tensors.get("owner")
    k = config.get("max_clusters") if isinstance(config, dict) else None
    n = int(counts.shape[0]) if counts is not None and counts.ndim == 1 else 0
    if isinstance(k, int) and not isinstance(k, bool) and k < max(1, len(classes), n):
        config["max_clusters"] = min(max(1, len(classes), n), int(CONFIG_RANGES["max_clusters"][1]))
        notes.append(f"config max_clusters: {k} raised to {config['max_clusters']}, the clusters and classes held")
    if version < 5 or counts is None or owner is None or counts.shape != owner.shape:
        return
    shots = {c: int(counts[owner == i].sum()) for i, c in enumerate(classes)}
    try:
        provenance_from_json(meta.get("provenance"), classes, shots)
    except (TypeError, ValueError) as exc:
        fresh = {c: (Contribution("", 0.0, min(max(shots[c], 1), 2**40),
                                  hashlib.sha256(f"{c}|{shots[c]}".encode()).hexdigest()[:16]),)
                 for c in classes if isinstance(c, str)}
        meta["provenance"] = provenance_to_json(fresh)
        notes.append(f"provenance refused ({str(exc)[:80]}): every class now has one entry of unknown origin")


def repaired_bytes(blob: bytes, where: str = "memory file") -> tuple[bytes, list[str]]:
    """A memory file made loadable, and what was changed (one line each; none: it loaded as it was).

    Only what load refuses by range is repaired: numeric config and learner-state fields are clamped
    into their ranges (dropped when they are no finite number: the default applies), counters and D
    likewise, K raised to the clusters held, a refused provenance replaced by one entry of unknown
    origin per class.  The classes' statistics (the tensors) are never changed, and a file whose
    checksum fails (torn or edited) is not repaired: CorruptMemoryFileError says why.  The result is
    written in the current format and checked as load checks it.
    """
    tensors, meta = _parse(blob, where)
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise IncompatibleMemoryFileError(f"{where}: format version {version!r} is not supported")
    if meta.get("sha256") != _checksum(tensors, meta if version >= 2 else None):
        raise CorruptMemoryFileError(f"{where}: checksum mismatch: the file is torn or was edited; not repaired")
    notes: list[str] = []
    _repair_meta(tensors, meta, version, notes)
    meta["sha256"] = _checksum(tensors, meta if version >= 2 else None)
    try:
        fixed = st_save(tensors, metadata={_META_KEY: json.dumps(meta, sort_keys=True, allow_nan=False)})
    except (TypeError, ValueError) as exc:
        raise CorruptMemoryFileError(f"{where}: cannot be repaired ({str(exc)[:120]})") from None
    try:
        state = state_from_bytes(fixed, where)
    except MemoryFileError as exc:
        raise type(exc)(f"{exc} (not something repair changes)") from None
    return checked_bytes(state, where), notes


def load_state(path: str | os.PathLike, expected_backbone: str | None = None,
               expected_feature_dim: int | None = None) -> LearnerState:
    """Read and verify a memory file (trusted path: the caller chose it)."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise MemoryFileError(f"{path}: cannot read memory file: {exc}") from exc
    return state_from_bytes(blob, str(path), expected_backbone, expected_feature_dim)


def read_metadata(path: str | os.PathLike) -> dict:
    """The JSON metadata of a memory file (no checksum verification)."""
    return _parse(Path(path).read_bytes(), str(path))[1]
