"""Merging two learners' memories: what one robot was taught, another robot knows.

A class in memory is a few Gaussian clusters (counts, means, scatters): sufficient statistics of
its shots.  Two memories of the same backbone, feature transform, width and covariance mode can
therefore be merged into one, without any shot:

* a class only one side holds is taken as it is;
* a class both sides hold becomes one class with the union of both sides' clusters, so its count
  is the sum, its mean the count-weighted mean and its scatter the scatter of the union: exactly the
  statistics of all its shots (:meth:`.clustering.ClassClusters.merged` keeps them exact when a
  reduction then merges clusters);
* the budget K is applied once, after the union, with the paper's reduction
  (:meth:`.memory.ClusterMemory.reduced_to`); K smaller than the number of classes is refused;
* the views' shared spread pools image-weighted (:meth:`.view_spread.ViewSpread.pooled`), the
  calibrated temperature pools by its weight, and the head is refitted once (by the caller, from the
  merged state).

The negatives store (:mod:`.negatives`) is the receiving side's: it describes what this robot's
camera saw that is not taught, and a merge never empties it.  Counters saturate at the file's limits
(:data:`.persistence.MAX_COUNTER`), so a merged memory can always be saved and taught again.

A *peer's* class (a fleet update: ``peer`` given, :class:`PeerRules`) changes only that class:

* the memory-wide fields (temperature and its weight, the views' shared spread, increments, model
  version) stay the receiver's; a D and gate prior are taken only by a memory that has none, within
  a factor :data:`PEER_D_RANGE` of the backbone's tabulated prior when there is one;
* the class after the merge counts at most ``max(2 own, own + min_shots)`` shots, ``own`` being the
  shots this robot itself taught it: a heavier peer copy is scaled down (counts and scatters by the
  same factor, so each cluster keeps its mean and covariance), so no count can outweigh the
  robot's own classes in the pooled covariance;
* each peer cluster's mean squared radius is at most ``(spread_factor D)^2`` (D: the receiver's),
  the scale Agg-Var clusters at, so no spread can flatten every class's confidence;
* a contribution in this robot's name that the robot does not hold is refused (a peer cannot speak
  for it), and classes known only from peers are limited to ``max_peer_classes``;
* a peer's copy of a class this robot was taught never replaces ours, even when its provenance
  claims all of ours (contribution ids are no secret): it is pooled, at most as many shots as the
  teaching it holds that we lack, so our own clusters stay exactly as taught.

Provenance (:mod:`.provenance`) decides what "both sides hold" means: if one copy's contributions
already include all of the other's (the same teaching came back, or a newer copy of it), the
larger copy is kept instead of counting the same shots twice (a class whose contributions are all
held here under another name, renamed here, is not added back); if they share some contributions
but neither holds all of the other's, the merge is refused.  The receiving side (``a``) keeps its
configuration, its D (the other's when it has none) and its class order; the other's new classes
follow in their order.

>>> import numpy as np
>>> from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
>>> rng = np.random.default_rng(0)
>>> a = CBCLPRLearner(LearnerConfig(distance_threshold=1.0), "synthetic", 4)
>>> b = CBCLPRLearner(LearnerConfig(distance_threshold=1.0), "synthetic", 4)
>>> _ = a.teach("mug", rng.normal(0, 1, (5, 4))); _ = b.teach("mug", rng.normal(0, 1, (3, 4)))
>>> report = a.merge(b.to_state())
>>> report.pooled, a.memory["mug"].n_samples
(('mug',), 8)
>>> a.merge(b.to_state()).unchanged   # b's teaching is already in a: nothing counts twice
True
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cbcl_pr_ros.plurals import counted

from .calibration import pooled_temperature
from .clustering import ClassClusters
from .distance_threshold import distance_prior
from .memory import ClusterMemory
from .persistence import MAX_COUNTER, LearnerState, filled_provenance
from .provenance import MAX_SHOTS, Contribution, ids, own_shots, united
from .transform import FeatureTransform
from .view_spread import ViewSpread

__all__ = ["MergeError", "MergeReport", "PeerRules", "check_compatible", "merge_states", "pool_classes", "covers",
           "one_class_state", "bounded_class", "PEER_MIN_SHOTS", "PEER_SPREAD_FACTOR", "PEER_D_RANGE"]

#: shots a class learned from peers alone may count (and a peer may add to a class this robot taught
#: with fewer shots): a few teaches' worth
PEER_MIN_SHOTS = 32
#: a peer cluster's RMS radius may be this many times the receiver's D (Agg-Var keeps clusters within D)
PEER_SPREAD_FACTOR = 2.0
#: a D (or gate prior) taken from a peer by an empty memory stays within this factor of the backbone's prior
PEER_D_RANGE = 4.0


@dataclass(frozen=True)
class PeerRules:
    """How a fleet peer's class enters this memory (module docstring): ``robot`` is this robot's name;
    ``max_peer_classes``: the most classes known from peers alone (None: no limit); ``sender``: the
    peer's name, recorded for its teaching of unknown origin (so that only this robot's own teaching,
    in its name or from before it had one, counts as its own)."""

    robot: str
    max_peer_classes: int | None = None
    sender: str = "peer"
    min_shots: int = PEER_MIN_SHOTS
    spread_factor: float = PEER_SPREAD_FACTOR


class MergeError(ValueError):
    """Two memories cannot be merged; the message says why."""


@dataclass(frozen=True)
class MergeReport:
    """What a merge did, per class, and what it cost."""

    added: tuple[str, ...] = ()  # classes only the other side held
    pooled: tuple[str, ...] = ()  # classes both held, taught separately: statistics pooled
    replaced: tuple[str, ...] = ()  # the other's copy contained all of ours: taken instead
    kept: tuple[str, ...] = ()  # our copy contained all of the other's: nothing to add
    clusters_before: int = 0
    clusters_after: int = 0
    reduced: bool = False  # the budget K was applied
    seconds: float = 0.0
    details: dict = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        return not (self.added or self.pooled or self.replaced)

    def summary(self) -> str:
        parts = [f"{len(v)} {k}" for k, v in (("added", self.added), ("pooled", self.pooled),
                                               ("replaced", self.replaced), ("already known", self.kept)) if v]
        red = f", reduced to K={self.details.get('K')}" if self.reduced else ""
        return f"{', '.join(parts) or 'nothing'}; clusters {self.clusters_before} -> {self.clusters_after}{red}"


def _transform_of(config: Mapping) -> FeatureTransform:
    return FeatureTransform.named(config.get("transform", "none"), config.get("transform_power", 0.5))


def check_compatible(a: LearnerState, b: LearnerState) -> None:
    """MergeError unless ``a`` and ``b`` describe vectors of the same space, stored the same way."""
    if a.backbone != b.backbone:
        raise MergeError(f"different backbones ({a.backbone!r} and {b.backbone!r}): their feature vectors "
                         "do not live in the same space")
    if a.feature_dim != b.feature_dim:
        raise MergeError(f"different feature widths ({a.feature_dim} and {b.feature_dim})")
    ta, tb = _transform_of(a.config), _transform_of(b.config)
    if ta != tb:
        raise MergeError(f"different feature transforms (power {ta.power}, l2 {ta.l2} and power {tb.power}, "
                         f"l2 {tb.l2}): the stored statistics are of differently transformed vectors")
    if a.memory.covariance != b.memory.covariance:
        raise MergeError(f"different covariance modes ({a.memory.covariance!r} and {b.memory.covariance!r})")


def covers(theirs: tuple[Contribution, ...], ours: tuple[Contribution, ...]) -> bool:
    """True when ``theirs`` includes every contribution of ``ours`` (so theirs replaces ours safely)."""
    return ids(ours) <= ids(theirs)


def pool_classes(a: ClassClusters, b: ClassClusters) -> ClassClusters:
    """One class from two separately taught copies: the union of their clusters (exact statistics)."""
    total = a.n_samples + b.n_samples
    if total > MAX_SHOTS or max(a.counts.max(initial=0), b.counts.max(initial=0)) > MAX_SHOTS:
        raise MergeError(f"pooled class would count {total} shots, more than the {MAX_SHOTS} allowed (overflow)")
    counts = np.concatenate([a.counts, b.counts]).astype(np.int64)
    means = np.concatenate([a.means.astype(np.float64), b.means.astype(np.float64)])
    scatters = [cc.scatter(i) for cc in (a, b) for i in range(cc.n_clusters)]
    return ClassClusters.from_stats(counts, means, a.mode, scatters)


def _shares(counts: np.ndarray, total: int) -> np.ndarray:
    """``total`` (>= len(counts)) shots shared out in proportion to ``counts``, each at least one, summing
    to ``total`` exactly (largest remainders)."""
    raw = (total - len(counts)) * counts / counts.sum()
    out = 1 + np.floor(raw).astype(np.int64)
    short = int(total - out.sum())
    if short > 0:
        out[np.argsort(-(raw - np.floor(raw)), kind="stable")[:short]] += 1
    return out


def bounded_class(cc: ClassClusters, max_shots: int, max_radius: float | None) -> ClassClusters:
    """``cc`` with at most ``max_shots`` shots and each cluster's mean squared radius at most
    ``max_radius**2``: counts and scatters scaled by the same factor (means and covariances kept; with
    fewer shots allowed than clusters, the heaviest clusters only); ``cc`` itself when within both."""
    counts = cc.counts.astype(np.int64)
    total, changed = max(1, int(max_shots)), False
    if int(counts.sum()) > total:
        if total < cc.n_clusters:
            cc = cc.subset(np.sort(np.argsort(-counts, kind="stable")[:total]))
            counts = cc.counts.astype(np.int64)
        new, changed = _shares(counts, total), True
    else:
        new = counts
    scatters = []
    for i in range(cc.n_clusters):
        s = cc.scatter(i)
        f = float(new[i]) / float(counts[i])  # scatter per shot unchanged: the cluster's covariance is kept
        power = float((s * s).sum()) if cc.mode == "full" else float(s.sum())  # trace of the scatter
        if max_radius is not None and power * f > float(new[i]) * max_radius ** 2:
            f, changed = float(new[i]) * max_radius ** 2 / power, True
        scatters.append(s * np.sqrt(f) if cc.mode == "full" else s * f)
    if not changed:
        return cc
    return ClassClusters.from_stats(new, cc.means.astype(np.float64), cc.mode, scatters)


def _own_shots(prov: tuple[Contribution, ...], robot: str, held: int) -> int:
    """Shots of this robot's own teaching in a class's provenance (:func:`.provenance.own_shots`), at
    most those the class holds."""
    return min(held, own_shots(prov, robot))


def _peer_scale(a: LearnerState, b: LearnerState) -> tuple[float | None, float | None]:
    """(D, gate prior) of a merge of a peer's class: the receiver's; an empty memory takes the peer's,
    within PEER_D_RANGE of the backbone's tabulated prior when there is one."""
    dist, prior = a.distance_threshold, (a.learner_state or {}).get("distance_prior")
    t = _transform_of(a.config)
    ref = distance_prior(a.backbone, t.power, t.l2)

    def bounded(v: float | None) -> float | None:
        if v is None or ref is None:
            return v
        return float(min(max(float(v), ref / PEER_D_RANGE), ref * PEER_D_RANGE))

    if dist is None:
        dist = bounded(b.distance_threshold)
    if prior is None:
        prior = bounded((b.learner_state or {}).get("distance_prior"))
    return dist, prior


def _peer_class(name: str, what: str, mine: ClassClusters | None, theirs: ClassClusters,
                own: int, rules: PeerRules, dist: float | None, extra: int | None = None) -> ClassClusters:
    """The peer's copy of ``name`` bounded for a merge of kind ``what`` (module docstring); ``extra``:
    the most shots it may add (the teaching it holds that we lack)."""
    budget = max(2 * own, own + rules.min_shots)
    if what == "pooled" and mine is not None:
        budget = max(1, budget - mine.n_samples)
    if extra is not None:
        budget = max(1, min(budget, extra))
    radius = None if dist is None else rules.spread_factor * float(dist)
    return bounded_class(theirs, budget, radius)


def _check_peer(a: LearnerState, b: LearnerState, rules: PeerRules, held: frozenset[str]) -> None:
    """MergeError when the peer's memory speaks for this robot (a contribution in its name it does not hold)."""
    for name, prov in filled_provenance(b).items():
        if any(rules.robot and c.robot == rules.robot and c.id not in held for c in prov):
            raise MergeError(f"class {name!r} carries teaching in this robot's name ({rules.robot!r}) that this "
                             "robot does not hold: a peer cannot speak for it")


def _decide(name: str, pa: tuple[Contribution, ...], pb: tuple[Contribution, ...]) -> str:
    """"kept", "replaced" or "pooled" for a class both sides hold; MergeError when ambiguous."""
    if covers(pa, pb):
        return "kept"
    if covers(pb, pa):
        return "replaced"
    if ids(pa) & ids(pb):
        raise MergeError(f"class {name!r}: both memories hold part of the same teaching but neither holds all of "
                         "the other's; pooling would count the shared shots twice")
    return "pooled"


def merge_states(a: LearnerState, b: LearnerState, peer: PeerRules | None = None) -> tuple[LearnerState, MergeReport]:
    """``a`` with ``b`` merged in (see the module docstring), and what was done; the state has no
    head, so the learner built from it refits its head once; ``a``'s negatives are kept.  ``peer``:
    ``b`` is a fleet peer's (its memory-wide fields are ignored, its classes bounded).  MergeError
    when refused."""
    t0 = time.perf_counter()
    check_compatible(a, b)
    mem_a, mem_b = a.memory, b.memory
    prov_a, prov_b = filled_provenance(a), filled_provenance(b)
    classes = dict(mem_a.items())
    prov = dict(prov_a)
    done: dict[str, list[str]] = {"added": [], "pooled": [], "replaced": [], "kept": []}
    held = frozenset().union(*(ids(p) for p in prov_a.values()))
    dist, prior = (a.distance_threshold, (a.learner_state or {}).get("distance_prior")) if peer is None \
        else _peer_scale(a, b)
    if peer is not None:
        _check_peer(a, b, peer, held)
        prov_b = {c: tuple(x if x.robot else dataclasses.replace(x, robot=peer.sender) for x in p)
                  for c, p in prov_b.items()}
    for name, cc in mem_b.items():
        if name not in classes and ids(prov_b[name]) <= held:
            done["kept"].append(name)  # all its teaching is here under another name (renamed here)
            continue
        what = "added" if name not in classes else _decide(name, prov_a[name], prov_b[name])
        extra = None
        if peer is not None and what == "replaced" and (cc.n_samples < classes[name].n_samples
                                                        or _own_shots(prov_a[name], peer.robot, 1) > 0):
            # a peer's copy never overwrites this robot's own teaching (it could claim our ids, which
            # are no secret), nor shrinks a class (a copy scaled on the way): it adds the shots of the
            # teaching we lack, at its statistics, and our clusters stay as they are
            what, extra = "pooled", sum(c.shots for c in prov_b[name] if c.id not in ids(prov_a[name]))
        done[what].append(name)
        if what == "kept":
            continue
        if peer is not None:
            mine = classes.get(name)
            own = _own_shots(prov_a.get(name, ()), peer.robot, mine.n_samples if mine is not None else 0)
            cc = _peer_class(name, what, mine, cc, own, peer, dist, extra)
        if what in ("added", "replaced"):
            classes[name], prov[name] = cc, prov_b[name]
        else:
            pooled = pool_classes(classes[name], cc)
            classes[name] = pooled.compacted() if mem_a.precision == "auto" else pooled
            prov[name] = united(prov_a[name], prov_b[name])
    k = mem_a.max_clusters
    if k is not None and len(classes) > k:
        raise MergeError(f"the merged memory would hold {len(classes)} classes, more than the budget K={k}")
    if peer is not None and peer.max_peer_classes is not None and done["added"]:
        foreign = sum(1 for c in classes if _own_shots(prov[c], peer.robot, 1) == 0)
        if foreign > peer.max_peer_classes:
            raise MergeError(f"the memory would hold {counted(foreign, 'class')} known from peers alone, more than the "
                             f"{peer.max_peer_classes} allowed, so that this robot's own teaching keeps room")
    memory = ClusterMemory(mem_a.feature_dim, mem_a.covariance, k, mem_a.reduction, mem_a.seed, classes,
                           mem_a.precision)
    before = memory.n_clusters
    reduced = k is not None and before > k
    if reduced:
        memory = memory.reduced_to(k, protect=())
    extra_a, extra_b = dict(a.learner_state or {}), dict(b.learner_state or {})
    if peer is None:
        t, w = pooled_temperature(float(extra_a.get("temperature", 1.0)),
                                  float(extra_a.get("temperature_weight", 0.0)),
                                  float(extra_b.get("temperature", 1.0)), float(extra_b.get("temperature_weight", 0.0)))
        prior = extra_b.get("distance_prior") if prior is None else prior
        spread = (a.view_spread or ViewSpread.empty(a.feature_dim)).pooled(b.view_spread or
                                                                           ViewSpread.empty(b.feature_dim))
        dist = b.distance_threshold if dist is None else dist
        increments = min(int(a.increments) + int(b.increments), MAX_COUNTER)
        version = max(int(a.model_version), int(b.model_version))
    else:  # the memory-wide fields are this robot's alone
        t, w = float(extra_a.get("temperature", 1.0)), float(extra_a.get("temperature_weight", 0.0))
        spread = a.view_spread or ViewSpread.empty(a.feature_dim)
        increments, version = int(a.increments), int(a.model_version)
    state = LearnerState(a.backbone, a.feature_dim, dict(a.config), memory, dist, increments, version,
                         None, {"distance_prior": prior, "temperature": t, "temperature_weight": w}, spread,
                         {c: prov[c] for c in memory.classes}, a.negatives)
    report = MergeReport(*(tuple(done[x]) for x in ("added", "pooled", "replaced", "kept")),
                         clusters_before=before, clusters_after=memory.n_clusters, reduced=reduced,
                         seconds=time.perf_counter() - t0, details={"K": k})
    return state, report


def one_class_state(state: LearnerState, name: str) -> LearnerState:
    """``state`` reduced to the class ``name`` (for export, or a fleet update): its statistics,
    provenance, D and the gate's prior; no head.  The views' shared spread and the temperature
    belong to the whole memory, not to a class, so they stay behind (weight 0): merging many class
    updates must not pool them once per class.  KeyError when ``name`` is unknown."""
    cc = state.memory[name]
    mem = state.memory
    memory = ClusterMemory(mem.feature_dim, mem.covariance, mem.max_clusters, mem.reduction, mem.seed,
                           {name: cc}, mem.precision)
    prior = (state.learner_state or {}).get("distance_prior")
    return LearnerState(state.backbone, state.feature_dim, dict(state.config), memory, state.distance_threshold,
                        0, 0, None, {"distance_prior": prior, "temperature": 1.0, "temperature_weight": 0.0},
                        ViewSpread.empty(state.feature_dim), {name: filled_provenance(state)[name]})
