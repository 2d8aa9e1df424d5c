"""All compared methods behind one interface, built by name.

``make_method(name, seed, context)`` builds a fresh method; ``context`` carries what a protocol
decides (``few_shot``: the paper's FSIL rehearsal; ``distance_threshold``/``d_scale``; budget ``K``
and ``reduction``).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from cbcl_pr_ros.core import LearnerConfig

from .adapter import LearnerClassifier
from .base import IncrementalMethod, check_features, check_increment
from .core_methods import FineTune, LearnerMethod
from .flb import FLB
from .hybrids import ClusteringHybrid, cluster_labels
from .joint import JointLogisticRegression, PooledLDA
from .peers import FeCAM, StreamingLDA

__all__ = ["IncrementalMethod", "check_features", "check_increment", "LearnerClassifier", "LearnerMethod", "FineTune",
           "FLB", "ClusteringHybrid", "cluster_labels", "FeCAM", "StreamingLDA", "JointLogisticRegression",
           "PooledLDA", "MethodContext", "learner_config", "METHODS", "METHOD_LABELS", "PEERS", "make_method",
           "describe_method"]


@dataclass(frozen=True)
class MethodContext:
    """Protocol-dependent settings shared by all methods of one experiment."""

    few_shot: bool = True
    distance_threshold: float | None = None
    d_scale: float = 1.0
    max_clusters: int | None = None
    reduction: str = "kmeans"
    fast: bool = False  # fewer epochs for smoke tests
    # the backbone the features come from: the learner reads per-backbone priors (the distance prior of
    # the default's transform) by this name, so the evaluation must give the real one, as the nodes do
    backbone: str = "evaluation"
    extra: dict = field(default_factory=dict)


def learner_config(ctx: MethodContext, seed: int, base: LearnerConfig | None = None) -> LearnerConfig:
    """``base`` (the product default when None) with what the protocol decides: the seed, D, the budget
    K and its reduction, the rehearsal (the paper's FSIL rehearsal in few-shot protocols, 'full' with
    all data) and, for smoke runs, 3 epochs. Threads are left to the caller (``cbcl-eval
    --compute-threads``), which changes no prediction."""
    base = base if base is not None else LearnerConfig()
    over = dict(seed=int(seed), distance_threshold=ctx.distance_threshold, max_clusters=ctx.max_clusters,
                reduction=ctx.reduction, rehearsal="few_shot" if ctx.few_shot else "full", fit_threads=None)
    if ctx.fast:
        over.update(epochs=3, epochs_per_increment=0)
    return dataclasses.replace(base, **over)


def _learner(name: str, base: Callable[[], LearnerConfig]) -> Callable[[int, MethodContext], IncrementalMethod]:
    return lambda s, c: LearnerMethod(learner_config(c, s, base()), c.d_scale, name, backbone=c.backbone)


def _hybrid(kind: str, pr: bool) -> Callable[[int, MethodContext], IncrementalMethod]:
    base = LearnerConfig.paper(covariance="diagonal", classifier="linear_sgd" if pr else "cbcl_vote")
    return lambda s, c: ClusteringHybrid(kind, pr, learner_config(c, s, base), c.d_scale)


_FLB_EPOCHS = lambda c: dict(epochs=3 if c.fast else 25, epochs_per_increment=0 if c.fast else 2)  # noqa: E731

METHODS: dict[str, Callable[[int, MethodContext], IncrementalMethod]] = {
    # the product's learner, through the adapter: its default, and the paper's and CBCL's heads
    "cbcl-pr-default": _learner("cbcl-pr-default", LearnerConfig),
    "cbcl-pr": _learner("cbcl-pr", lambda: LearnerConfig.paper(covariance="full")),
    "cbcl-pr-diag": _learner("cbcl-pr-diag", lambda: LearnerConfig.paper(covariance="diagonal")),
    # the other heads on the paper's raw features (LearnerConfig.paper: no transform, no calibration)
    "fast": _learner("fast", lambda: LearnerConfig.paper(classifier="gaussian", covariance="full")),
    "cbcl": _learner("cbcl", lambda: LearnerConfig.paper(classifier="cbcl_vote", covariance="diagonal")),
    "cbcl-1nn": _learner("cbcl-1nn", lambda: LearnerConfig.paper(classifier="cbcl_vote", covariance="diagonal",
                                                                 vote_neighbours=1)),
    "ncm": _learner("ncm", lambda: LearnerConfig.paper(classifier="ncm", covariance="diagonal")),
    # peers on the same features
    "flb": lambda s, c: FLB(seed=s, **_FLB_EPOCHS(c)),
    "ft": lambda s, c: FineTune(epochs=3 if c.fast else 25, seed=s),
    "fecam": lambda s, c: FeCAM(seed=s),
    "slda": lambda s, c: StreamingLDA(seed=s),
    "logreg": lambda s, c: JointLogisticRegression(seed=s),
    "lda": lambda s, c: PooledLDA(seed=s),
    # the ablation's hybrids (another clustering in place of Agg-Var)
    "trad-agg-pr": _hybrid("trad-agg", True),
    "kmeans-pr": _hybrid("kmeans", True),
    "trad-agg": _hybrid("trad-agg", False),
    "kmeans": _hybrid("kmeans", False),
}

PEERS = ("ncm", "flb", "fecam", "slda", "logreg", "lda")

METHOD_LABELS = {
    "cbcl-pr-default": f"CBCL-PR default ({LearnerConfig().classifier} head)",
    "cbcl-pr": "CBCL-PR paper head (SGD, full cov.)", "cbcl-pr-diag": "CBCL-PR_D paper head (diagonal cov.)",
    "fast": "CBCL-PR closed-form LDA head", "cbcl": "CBCL (weighted vote, 5 nearest)",
    "cbcl-1nn": "CBCL (nearest centroid)", "ncm": "NCM", "flb": "FLB (batch, all data so far)",
    "ft": "FT (fine-tuning)", "trad-agg-pr": "Trad-Agg-PR", "kmeans-pr": "k-means-PR", "trad-agg": "Trad-Agg",
    "kmeans": "k-means", "fecam": "FeCAM", "slda": "SLDA (streaming LDA)",
    "logreg": "logistic regression (all shots so far)", "lda": "pooled-covariance LDA (all shots so far)",
}


def make_method(name: str, seed: int, context: MethodContext | None = None) -> IncrementalMethod:
    """A fresh method by registry name (see ``METHODS``)."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    return METHODS[name](seed, context or MethodContext())


# the learner settings worth naming in a table's legend (the rest are the same for every CBCL-PR row)
_SHOWN = ("classifier", "covariance", "transform", "calibrate", "rehearsal", "epochs", "epochs_per_increment",
          "vote_neighbours", "max_clusters", "reduction")


def describe_method(name: str, context: MethodContext | None = None) -> str:
    """One line saying what ``name`` runs under ``context``: for the learner family the
    ``LearnerConfig`` it is built from (``default`` or ``paper``) and its main settings, else the
    peer's class. Stored with each experiment so a table row names its configuration."""
    method = make_method(name, 0, context or MethodContext())
    config = getattr(method, "config", None)
    if not isinstance(config, LearnerConfig):
        return type(method).__name__
    origin = ("LearnerConfig() (the shipped default)" if name == "cbcl-pr-default"
              else "LearnerConfig.paper(...)")
    skip = set()
    if config.max_clusters is None:
        skip |= {"max_clusters", "reduction"}
    if config.classifier != "linear_sgd":
        skip |= {"epochs", "epochs_per_increment"}
    if config.classifier != "cbcl_vote":
        skip.add("vote_neighbours")
    shown = ", ".join(f"{k}={getattr(config, k)!r}" for k in _SHOWN if k not in skip)
    what = "ablation hybrid on " if isinstance(method, ClusteringHybrid) else ""
    return f"{what}{origin}: {shown}"
