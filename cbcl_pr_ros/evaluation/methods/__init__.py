"""All compared methods behind one interface, built by name.

``make_method(name, seed, context)`` builds a fresh method; ``context`` carries what a protocol
decides (``few_shot``: the paper's FSIL rehearsal; ``distance_threshold``/``d_scale``; budget ``K``
and ``reduction``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .base import IncrementalMethod, check_features, check_increment
from .core_methods import ClusterMemoryMethod, FineTune
from .flb import FLB
from .hybrids import ClusteringHybrid, cluster_labels
from .peers import MahalanobisPrototypes, StreamingLDA

__all__ = ["IncrementalMethod", "check_features", "check_increment", "ClusterMemoryMethod", "FineTune", "FLB",
           "ClusteringHybrid", "cluster_labels", "MahalanobisPrototypes", "StreamingLDA", "MethodContext",
           "METHODS", "METHOD_LABELS", "make_method"]


@dataclass(frozen=True)
class MethodContext:
    """Protocol-dependent settings shared by all methods of one experiment."""

    few_shot: bool = True
    distance_threshold: float | None = None
    d_scale: float = 1.0
    max_clusters: int | None = None
    reduction: str = "kmeans"
    fast: bool = False  # fewer epochs for smoke tests
    extra: dict = field(default_factory=dict)


def _cm(ctx: MethodContext, seed: int, **kw) -> dict:
    kw.setdefault("rehearsal", "few_shot" if ctx.few_shot else "full")
    if ctx.fast:
        kw.setdefault("epochs", 3)
        kw.setdefault("epochs_per_increment", 0)
    return dict(distance_threshold=ctx.distance_threshold, d_scale=ctx.d_scale, max_clusters=ctx.max_clusters,
                reduction=ctx.reduction, seed=seed, **kw)


def _named(method: IncrementalMethod, name: str) -> IncrementalMethod:
    method.name = name
    return method


METHODS: dict[str, Callable[[int, MethodContext], IncrementalMethod]] = {
    "cbcl-pr": lambda s, c: _named(ClusterMemoryMethod("linear_sgd", "full", **_cm(c, s)), "cbcl-pr"),
    "cbcl-pr-diag": lambda s, c: _named(ClusterMemoryMethod("linear_sgd", "diagonal", **_cm(c, s)), "cbcl-pr-diag"),
    "fast": lambda s, c: _named(ClusterMemoryMethod("gaussian", "full", **_cm(c, s)), "fast"),
    "cbcl": lambda s, c: _named(ClusterMemoryMethod("vote", "diagonal", **_cm(c, s)), "cbcl"),
    "cbcl-1nn": lambda s, c: _named(ClusterMemoryMethod("vote", "diagonal", n_neighbours=1, **_cm(c, s)), "cbcl-1nn"),
    "ncm": lambda s, c: _named(ClusterMemoryMethod("ncm", "diagonal", **_cm(c, s)), "ncm"),
    "flb": lambda s, c: FLB(epochs=3 if c.fast else 25, epochs_per_increment=0 if c.fast else 2, seed=s),
    "ft": lambda s, c: FineTune(epochs=3 if c.fast else 25, seed=s),
    "trad-agg-pr": lambda s, c: ClusteringHybrid("trad-agg", True, covariance="diagonal", **_cm(c, s)),
    "kmeans-pr": lambda s, c: ClusteringHybrid("kmeans", True, covariance="diagonal", **_cm(c, s)),
    "trad-agg": lambda s, c: ClusteringHybrid("trad-agg", False, covariance="diagonal", **_cm(c, s)),
    "kmeans": lambda s, c: ClusteringHybrid("kmeans", False, covariance="diagonal", **_cm(c, s)),
    "mahalanobis": lambda s, c: MahalanobisPrototypes(seed=s),
    "slda": lambda s, c: StreamingLDA(seed=s),
}

METHOD_LABELS = {
    "cbcl-pr": "CBCL-PR (full cov.)", "cbcl-pr-diag": "CBCL-PR_D (diagonal cov.)", "fast": "fast default (closed form)",
    "cbcl": "CBCL (weighted vote, 5 nearest)", "cbcl-1nn": "CBCL (nearest centroid)", "ncm": "NCM", "flb": "FLB (batch, all data so far)", "ft": "FT (fine-tuning)",
    "trad-agg-pr": "Trad-Agg-PR", "kmeans-pr": "k-means-PR", "trad-agg": "Trad-Agg", "kmeans": "k-means",
    "mahalanobis": "Mahalanobis prototypes (as FeCAM)", "slda": "Streaming LDA",
}


def make_method(name: str, seed: int, context: MethodContext | None = None) -> IncrementalMethod:
    """A fresh method by registry name (see ``METHODS``)."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    return METHODS[name](seed, context or MethodContext())
