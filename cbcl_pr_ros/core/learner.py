"""The CBCL-PR learner: the one object the nodes, the evaluation tool and the bag tools use.

It owns a :class:`~.memory.ClusterMemory`, the Agg-Var threshold ``D`` and an immutable *served*
snapshot (classifier + class list + open-set gate + model version).  Every change (teach, forget,
rename, load) builds the new memory and snapshot off to the side and then swaps them in with one
attribute assignment, so:

* ``predict`` may run in one thread while ``teach`` runs in another; it always sees one consistent
  snapshot (old or new, never a mix);
* a call that raises (bad input, K too small, ...) leaves the learner exactly as it was.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> centres = rng.uniform(0, 4, (3, 16))                  # non-negative, like pooled CNN features
>>> shots = lambda i, n: np.maximum(centres[i] + rng.normal(0, 0.3, (n, 16)), 0)
>>> learner = CBCLPRLearner(LearnerConfig(seed=0), backbone="synthetic", feature_dim=16)
>>> _ = learner.teach("mug", shots(0, 10))
>>> _ = learner.teach_increment({"cup": shots(1, 10), "box": shots(2, 10)})
>>> learner.classes_
('mug', 'cup', 'box')
>>> p = learner.predict(shots(1, 1), top_k=2)[0]
>>> p.label, p.known, p.top_labels[0]
('cup', True, 'cup')
>>> learner.predict(np.eye(16)[:1] * 50.0)[0].label   # unlike everything taught
''
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cbcl_pr_ros.plurals import counted

from .calibration import (POOL_ROWS, SAME_VIEW, fit_temperature, head_prior_temperature, held_out_fold_logits,
                          pooled_temperature)
from .classifiers.base import LinearSnapshot, Snapshot
from .classifiers.blended import ANCHOR_MIN_CLASSES, BlendedSnapshot, fit_blended_head_factor
from .classifiers.gaussian import PooledMoments, fit_gaussian_head
from .classifiers.ncm import fit_ncm
from .classifiers.vote import fit_weighted_vote
from .clustering import COVARIANCE_MODES
from .distance_threshold import distance_prior, estimate_distance_threshold, memory_distance
from .memory import PRECISIONS, REDUCTIONS, ClusterMemory
from .merge import merge_states
from .negatives import (MAX_NEGATIVES, MAX_OFFERED, MIN_NEGATIVES, RADIUS_MIN_EXTENT, RADIUS_MIN_NEGATIVES,
                        SAME_OBJECT, NegativeStore, class_radii, veto_ratio)
from . import one_place as one_place_rule
from .open_set import OPEN_SET_MODES, DistanceGate, class_extents, inside_probability
from .persistence import MAX_COUNTER, CorruptMemoryFileError, LearnerState, filled_provenance, load_state, save_state
from .provenance import Contribution, check_robot_name, new_contribution, united
from .rehearsal import REHEARSAL_MODES
from .threads import fit_threads, frame_threads
from .transform import TRANSFORMS, FeatureTransform
from .validation import UnknownClassError, check_features, check_label
from .view_spread import ViewSpread

if TYPE_CHECKING:
    from .merge import MergeReport

__all__ = ["CLASSIFIERS", "ROBOT_SETTINGS", "LearnerConfig", "TeachResult", "Prediction", "ClassInfo", "CBCLPRLearner",
           "save_learner", "load_learner"]

_log = logging.getLogger(__name__)
# a stored negative closer than this many D_gate to a newly taught shot (or an offered one this close
# to a taught class) is dropped: it was most likely the very object; and no negative narrows a
# class's radius below this many D_gate, so a class always stays teachable
NEAR_NEGATIVE = 0.5
# the open-set gate's D never falls below this share of the backbone's prior, however alike the shots
GATE_FLOOR = 0.9
# a class whose shots lie closer than this many of the prior's D (RMS) to their mean (one view: jittered
# or still-frame copies of one crop lie 0.2-0.35 from it; RADIUS_MIN_EXTENT, 0.375) may add nothing to
# the gate's D, so that copies of one view leave it as one shot does. Measured (docs/core.md "More
# shots of one view never shrink the gate"): it accepts a little more with the robot's stream as
# negatives but lets more never-taught objects in without it (the copies' mean lies nearer every
# object), so none is applied: 0 counts every class, and GATE_FLOOR bounds what copies can do
GATE_MIN_EXTENT = 0.0

CLASSIFIERS = ("blended", "gaussian", "linear_sgd", "cbcl_vote", "ncm")
# config keys older memory files carry that no longer mean anything (torch_threads: fit_threads governs
# every retrain's threads); a file with them still loads
RETIRED_CONFIG_KEYS = frozenset({"torch_threads"})
# the settings a robot user may change: the learner node's parameters of the same names (the first
# group of LearnerConfig; the others are the evaluation's or one head's)
ROBOT_SETTINGS = ("distance_threshold", "max_clusters", "covariance", "reduction", "classifier", "open_set",
                  "unknown_distance_factor", "min_confidence", "seed", "fit_threads", "negatives_capacity",
                  "negative_quantile", "negative_margin", "negative_rank")


@dataclass(frozen=True)
class LearnerConfig:
    """Hyperparameters of the learner, all checked here (and nowhere else).

    Grouped by who uses them. The first group (the robot's settings) reaches the learner node as ROS
    parameters of the same names (docs/nodes.md "Parameters"); the others are the evaluation's.

    Every head:
    distance_threshold : Agg-Var ``D`` (> 0), or None to estimate it from the first data taught.
    max_clusters : the budget ``K`` (>= number of classes at all times), or None for unlimited.
    covariance : "full" (exact low-rank) or "diagonal" (the paper's CBCL-PR_D).
    reduction : "kmeans" (paper's proportional reduction, count-weighted) or "remove".
    classifier : "blended" (default: per-class Gaussians, own covariance ``blend`` x + shrunk pooled,
        closed form), "gaussian" (shared-covariance LDA, closed form), "linear_sgd" (the paper's
        schedule), "cbcl_vote" (CBCL weighted vote), "ncm" (nearest class mean).
    open_set / unknown_distance_factor / min_confidence : see :mod:`.open_set`; a vector is known when it
        is closer than ``unknown_distance_factor * D_gate`` to a centroid of its predicted class, with
        ``D_gate`` the prior refined by every class's spread (or the given ``distance_threshold``);
        the default 1.3 is the 97th percentile of within-class pair distances on train splits, see
        docs/core.md "Open set".
    negatives_capacity / negative_quantile / negative_margin : the negatives store
        (:mod:`.negatives`): at most ``negatives_capacity`` feature vectors of things that are not
        taught (0 = none kept), fed by :meth:`CBCLPRLearner.add_negatives`; with enough of them a
        class's radius becomes ``min(factor * D_gate, margin * quantile(negatives' distances to it))``.
    negative_rank : when >= 1, the quantile is replaced by the distance of the class's
        ``negative_rank``-th nearest negative: far negatives joining a growing store then do not
        loosen a radius (docs/core.md "Open set"); 0 = the quantile rule.
    seed : seed of every random draw (pseudo-exemplars, SGD).
    fit_threads : BLAS and torch threads used *during* a retrain, restored afterwards (None: leave
        the process settings).  1 by default: a retrain's matrices are small and extra threads
        only spin against each other on a busy machine (see :mod:`.threads`).

    Representation (evaluation's; the node keeps the defaults):
    transform / transform_power : feature transform applied to every vector before it is stored or
        classified (:mod:`.transform`): "tukey_l2" (default, power 0.5 then L2 norm), "l2", "none".
    memory_precision : "auto" (default: each class stored in float16 when that is faithful, about
        half its raw shots' bytes; :meth:`.clustering.ClassClusters.compacted`) or "float32".
    distance_prior : prior RMS within-class distance in the transformed space (None: the backbone's
        tabulated value, else the first data's estimate); see :mod:`.distance_threshold`.

    Closed-form heads only (blended, gaussian):
    shrinkage : weight of the identity in the shrunk pooled covariance.
    blend : weight of each class's own covariance (blended head).
    calibrate : fit the softmax temperature on held-out logits of the taught shots ("blended"
        head only; :mod:`.calibration`).

    linear_sgd head only (the paper's; nothing else reads them):
    rehearsal : "few_shot" (``exemplars_per_class`` per class, all classes) or "full" (m_i per cluster,
        real vectors for the classes being taught).
    exemplars_per_class, singleton_jitter : pseudo-exemplars per class, and noise for one-shot clusters.
    epochs, epochs_per_increment, lr, momentum, weight_decay, batch_size : the SGD schedule.

    cbcl_vote head only:
    vote_neighbours : clusters that vote.
    """

    # every head (the robot's settings: ROS parameters of the same names)
    distance_threshold: float | None = None
    max_clusters: int | None = None
    covariance: str = "full"
    reduction: str = "kmeans"
    classifier: str = "blended"
    open_set: str = "distance"
    unknown_distance_factor: float = 1.3
    min_confidence: float = 0.0
    negatives_capacity: int = 128
    negative_quantile: float = 0.1
    negative_margin: float = 0.95
    negative_rank: int = 0
    seed: int = 0
    fit_threads: int | None = 1
    # representation (evaluation's)
    transform: str = "tukey_l2"
    transform_power: float = 0.5
    memory_precision: str = "auto"
    distance_prior: float | None = None
    # closed-form heads (blended, gaussian)
    shrinkage: float = 0.5
    blend: float = 1.0
    calibrate: bool = True
    # linear_sgd head only
    rehearsal: str = "few_shot"
    exemplars_per_class: int = 40
    singleton_jitter: float = 0.0
    epochs: int = 25
    epochs_per_increment: int = 0
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 5e-4
    batch_size: int = 64
    # cbcl_vote head only
    vote_neighbours: int = 5

    def __post_init__(self) -> None:
        def choice(name: str, allowed: tuple[str, ...]) -> None:
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

        def positive(name: str, *, integer: bool = False, allow_none: bool = False, zero: bool = False) -> None:
            v = getattr(self, name)
            if v is None and allow_none:
                return
            kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
            if isinstance(v, bool) or not isinstance(v, kinds) or not np.isfinite(v) or (v < 0 if zero else v <= 0):
                raise ValueError(f"{name} must be a {'non-negative' if zero else 'positive'} "
                                 f"{'integer' if integer else 'number'}{' or None' if allow_none else ''}, got {v!r}")

        positive("distance_threshold", allow_none=True)
        positive("max_clusters", integer=True, allow_none=True)
        choice("covariance", COVARIANCE_MODES)
        choice("reduction", REDUCTIONS)
        choice("rehearsal", REHEARSAL_MODES)
        choice("classifier", CLASSIFIERS)
        choice("open_set", OPEN_SET_MODES)
        choice("transform", TRANSFORMS)
        choice("memory_precision", PRECISIONS)
        FeatureTransform.named(self.transform, self.transform_power)  # checks the power
        positive("blend", zero=True)
        positive("distance_prior", allow_none=True)
        if not isinstance(self.calibrate, (bool, np.bool_)):
            raise ValueError(f"calibrate must be a bool, got {self.calibrate!r}")
        positive("exemplars_per_class", integer=True)
        positive("singleton_jitter", zero=True)
        positive("epochs", integer=True)
        positive("epochs_per_increment", integer=True, zero=True)
        positive("lr")
        positive("momentum", zero=True)
        positive("weight_decay", zero=True)
        positive("batch_size", integer=True)
        positive("vote_neighbours", integer=True)
        positive("unknown_distance_factor")
        positive("min_confidence", zero=True)
        positive("negatives_capacity", integer=True, zero=True)
        positive("negative_quantile", zero=True)
        positive("negative_margin")
        positive("negative_rank", integer=True, zero=True)
        if self.negative_rank > MAX_NEGATIVES:
            raise ValueError(f"negative_rank must be <= {MAX_NEGATIVES}, got {self.negative_rank!r}")
        if self.negatives_capacity > MAX_NEGATIVES or self.negative_quantile > 1.0 or self.negative_margin > 1.0:
            raise ValueError(f"negatives_capacity must be <= {MAX_NEGATIVES}, negative_quantile and negative_margin "
                             f"<= 1, got {self.negatives_capacity!r}, {self.negative_quantile!r}, "
                             f"{self.negative_margin!r}")
        positive("fit_threads", integer=True, allow_none=True)
        if not 0.0 <= self.shrinkage <= 1.0:
            raise ValueError(f"shrinkage must be in [0, 1], got {self.shrinkage!r}")
        if self.min_confidence > 1.0:
            raise ValueError(f"min_confidence must be <= 1, got {self.min_confidence!r}")
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")

    @classmethod
    def paper(cls, **overrides: Any) -> "LearnerConfig":
        """The paper's settings: raw features, linear head, SGD, +2 epochs per increment (no
        feature transform, no calibration)."""
        base = dict(classifier="linear_sgd", epochs=25, epochs_per_increment=2, transform="none",
                    calibrate=False)
        base.update(overrides)
        return cls(**base)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LearnerConfig":
        """Build from a mapping; unknown keys are refused (they are a typo or a newer format).

        Retired keys (:data:`RETIRED_CONFIG_KEYS`, written by older versions) are dropped."""
        names = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k not in RETIRED_CONFIG_KEYS}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown LearnerConfig keys: {unknown}")
        return cls(**dict(data))


@dataclass(frozen=True)
class TeachResult:
    """What one teach/teach_increment did."""

    labels: tuple[str, ...]  # the classes taught in this call
    new_labels: tuple[str, ...]  # those that were not known before
    shots: dict[str, int]  # vectors received per class
    clusters: dict[str, int]  # clusters per taught class after the call
    total_clusters: int
    distance_threshold: float
    model_version: int
    seconds: float


@dataclass(frozen=True)
class Prediction:
    """One classified feature vector.

    ``label`` is "" when the vector is judged unknown (or nothing is taught yet); ``nearest_label``
    is the classifier's best class regardless; ``distance`` is the distance to the nearest centroid
    of that class (nan when the distance gate is off).  ``confidence`` is how sure the answer is that
    the vector is ``nearest_label``: the class's probability times the distance gate's probability of
    being inside (:func:`.open_set.inside_probability`), so it is below 0.5 whenever the gate says
    unknown, also with a single class taught; ``top_scores`` are scaled the same way (the first is
    ``confidence``), so scores fused over frames mean the same.
    """

    label: str
    confidence: float
    known: bool
    top_labels: tuple[str, ...]
    top_scores: tuple[float, ...]
    nearest_label: str = ""
    distance: float = float("nan")


@dataclass(frozen=True)
class ClassInfo:
    """One class as stored: ``memory_bytes`` are its arrays (counts, means, scatters) as held in RAM
    and written to the file; ``storage`` their dtype, chosen per class by the memory."""

    name: str
    clusters: int
    shots: int
    memory_bytes: int
    storage: str = "float32"


@dataclass(frozen=True)
class _Served:
    """Everything ``predict`` reads, swapped as one object."""

    classes: tuple[str, ...]
    head: Snapshot | None
    gate: DistanceGate | None
    model_version: int
    moments: PooledMoments | None = None  # cache for the next incremental retrain (gaussian / ncm)
    solve: Any = None  # what the blended head's fit solved: the next retrain's update, the calibration folds


class CBCLPRLearner:
    """Few-shot class-incremental learner (CBCL-PR) over precomputed feature vectors.

    Parameters
    ----------
    config : LearnerConfig
    backbone : str
        Name of the feature extractor the vectors come from (stored in saved files and checked on
        load: vectors of another backbone are meaningless to this memory).
    feature_dim : int
        Width of the vectors.
    """

    def __init__(self, config: LearnerConfig | None = None, backbone: str = "unknown", feature_dim: int = 1280) -> None:
        config = LearnerConfig() if config is None else config
        if not isinstance(config, LearnerConfig):
            raise TypeError(f"config must be a LearnerConfig, got {type(config).__name__}")
        if not isinstance(backbone, str) or not backbone:
            raise ValueError(f"backbone must be a non-empty str, got {backbone!r}")
        if isinstance(feature_dim, bool) or not isinstance(feature_dim, (int, np.integer)) or feature_dim < 1:
            raise ValueError(f"feature_dim must be a positive integer, got {feature_dim!r}")
        self.config = config
        self.backbone = backbone
        self.feature_dim = int(feature_dim)
        self._write_lock = threading.RLock()
        self._memory = ClusterMemory(self.feature_dim, config.covariance, config.max_clusters,
                                     config.reduction, config.seed, precision=config.memory_precision)
        self.transform = FeatureTransform.named(config.transform, config.transform_power)
        self.distance_threshold_: float | None = config.distance_threshold
        # prior of the open-set gate's D (set on the first teach), and the calibrated temperature
        # with the number of held-out shots behind it
        self.distance_prior_: float | None = config.distance_prior
        self.temperature_ = 1.0
        self.temperature_weight_ = 0.0
        # held-out (logit row, class index) pairs the temperature is fitted on; (T, rows) of a loaded file
        self._calib_pool: tuple[tuple[np.ndarray, int], ...] = ()
        self._calib_base: tuple[float, float] = (1.0, 0.0)
        # spread of the teach-time views of every image taught, shared by all classes
        self.view_spread_ = ViewSpread.empty(self.feature_dim)
        # feature vectors of things seen but not taught (image-free, bounded): they tighten the gate
        self.negatives_ = NegativeStore.empty(self.feature_dim, config.negatives_capacity)
        self.increments_ = 0
        # per class, who taught it when with how many shots (:mod:`.provenance`), and the name this
        # learner's own teaches are recorded under ("" = not named)
        self._provenance: dict[str, tuple[Contribution, ...]] = {}
        self.robot_name = ""
        self._served = _Served((), None, None, 0)
        # each class's within-class scatter for the gate's D, by clusters object (written under the lock)
        self._scatter_cache: dict = {}

    # ------------------------------------------------------------------ read-only state
    @property
    def classes_(self) -> tuple[str, ...]:
        """Known classes, in the column order of :meth:`predict_scores`."""
        return self._served.classes

    @property
    def model_version_(self) -> int:
        """Increases by one with every successful change (teach, forget, rename)."""
        return self._served.model_version

    @property
    def memory(self) -> ClusterMemory:
        """The current cluster memory (immutable)."""
        return self._memory

    @property
    def n_clusters_(self) -> int:
        return self._memory.n_clusters

    def memory_bytes(self) -> int:
        """Bytes of the cluster memory, the views' shared spread, plus the served classifier's
        parameters (a linear head's weights, or the blended head's weights, means and per-class
        low-rank terms).  Not counted:
        the float64 moments cache kept to speed up the next retrain (rebuilt from the memory)."""
        head = self._served.head
        extra = 0
        if isinstance(head, LinearSnapshot):
            extra = head.weight.nbytes + head.bias.nbytes
        elif isinstance(head, BlendedSnapshot):
            extra = head.weight.nbytes + head.bias.nbytes + head.means.nbytes + sum(b.nbytes for b in head.low_rank)
        return self._memory.nbytes() + self.view_spread_.nbytes() + int(extra)

    @property
    def provenance_(self) -> dict[str, tuple[Contribution, ...]]:
        """Per class (in class order), its contributions: robot, time, shots, id."""
        return dict(self._provenance)

    def set_robot_name(self, name: str) -> None:
        """The robot name recorded in the provenance of what this learner is taught from now on."""
        self.robot_name = check_robot_name(name)

    def class_info(self) -> list[ClassInfo]:
        mem = self._memory
        return [ClassInfo(c, cc.n_clusters, cc.n_samples, cc.nbytes(), cc.storage) for c, cc in mem.items()]

    # ------------------------------------------------------------------ teaching
    def teach(self, label: str, features: np.ndarray, views: np.ndarray | None = None) -> TeachResult:
        """Teach one class (new, or more shots of a known one) and retrain; ``views`` as in
        :meth:`teach_increment`."""
        return self.teach_increment({label: features}, None if views is None else {label: views})

    def teach_increment(self, shots: Mapping[str, np.ndarray],
                        views: Mapping[str, np.ndarray] | None = None) -> TeachResult:
        """Teach several classes at once with a single retrain.

        ``views`` (optional) maps a class of ``shots`` to (n, k, d) vectors of ``k`` teach-time views
        of each of its ``n`` shots (:mod:`cbcl_pr_ros.features.augment`).  They are not shots: their
        spread about their image is pooled into the covariance all classes share
        (:mod:`.view_spread`), and the memory, D, the open-set gate and the calibration folds hold
        the shots alone.
        """
        t0 = time.perf_counter()
        if not isinstance(shots, Mapping):
            raise TypeError(f"shots must be a mapping label -> (n, d) features, got {type(shots).__name__}")
        if not shots:
            raise ValueError("shots is empty: give at least one class with at least one feature vector")
        data = {check_label(c): self.transform(check_features(x, self.feature_dim, name=f"features of {c!r}"))
                for c, x in shots.items()}
        extra = self._checked_views(views, data)
        with self._write_lock:
            old = self._memory
            new_labels = tuple(c for c in data if c not in old)
            k = self.config.max_clusters
            if k is not None and len(old) + len(new_labels) > k:
                raise ValueError(f"memory budget K={k} is smaller than the number of classes "
                                 f"({len(old) + len(new_labels)}) after teaching {list(data)}")
            dist, prior = self.distance_threshold_, self.distance_prior_
            if dist is None:
                if prior is None:
                    prior = distance_prior(self.backbone, self.transform.power, self.transform.l2)
                dist = estimate_distance_threshold(data, self.config.seed, prior)
                prior = dist if prior is None else prior
                _log.info("distance threshold D estimated from the first data: %.4g (prior %.4g)", dist, prior)
            temperature = (self.temperature_, self.temperature_weight_, self._calib_pool)
            spread = self.view_spread_
            for v in extra.values():
                spread = spread.with_views(v)
            negatives = self.negatives_.without_near(np.concatenate(list(data.values())),
                                                     NEAR_NEGATIVE * self._served_gate_distance(prior, dist))
            provenance = dict(self._provenance)
            for c, x in data.items():
                provenance[c] = united(provenance.get(c, ()), (new_contribution(self.robot_name, len(x)),))
            with fit_threads(self.config.fit_threads):
                memory = old.with_taught(data, dist)
                served = self._build(memory, dist, self.increments_, real=data, prior=prior, spread=spread,
                                     negatives=negatives)
                if isinstance(served.head, BlendedSnapshot) and self.config.calibrate:
                    served, temperature = self._calibrated(served, memory, old, data, dist, temperature, spread)
                    if temperature[1] <= 0 and served.gate is not None:  # no held-out view yet: the prior
                        several = any(int(np.sum(cc.counts)) > 1 for _, cc in memory.items())
                        t0 = head_prior_temperature(served.solve, self.feature_dim, served.gate.distance_threshold,
                                                    several)
                        served = dataclasses.replace(served, head=served.head.with_temperature(t0))
                        temperature = (t0, 0.0, temperature[2])
            served = _lean(served)
            # commit: nothing above changed self
            self.view_spread_ = spread
            self.negatives_ = negatives
            self._memory = memory
            self._provenance = provenance
            self.distance_threshold_ = dist
            self.distance_prior_ = prior
            self.temperature_, self.temperature_weight_, self._calib_pool = temperature
            self.increments_ = min(self.increments_ + 1, MAX_COUNTER)  # a file's limit: saved again
            self._served = served
        res = TeachResult(tuple(data), new_labels, {c: len(x) for c, x in data.items()},
                          {c: memory[c].n_clusters for c in data}, memory.n_clusters, float(dist),
                          served.model_version, time.perf_counter() - t0)
        _log.info("taught %s (new: %s): %d clusters in memory, model v%d, %.3f s",
                  list(data), list(new_labels), memory.n_clusters, served.model_version, res.seconds)
        return res

    def add_negatives(self, features: np.ndarray, away_from: np.ndarray | None = None) -> int:
        """Offer feature vectors of things that are *not* any taught class (other objects of a teaching
        frame, background crops) to the bounded negatives store (:mod:`.negatives`); the gate's
        per-class radii are refreshed (a new model version).  Returns how many vectors the store holds.
        No images are kept: vectors only, at most ``config.negatives_capacity``; any count is used,
        from one.  Offered vectors within ``NEAR_NEGATIVE`` D of a taught class's centroid or of a
        row of ``away_from`` (a teach's shots) are dropped, as :meth:`teach` drops stored ones near
        new shots: they are the taught object itself; a vector within ``SAME_OBJECT`` D of one kept
        is a copy (a still object in several frames) and counts once.  More than ``MAX_OFFERED``
        rows, NaN/inf or values no stored vector can hold are refused and change nothing."""
        x = self.transform(check_features(features, self.feature_dim, name="negative features"))
        if len(x) > MAX_OFFERED:
            raise ValueError(f"{len(x)} negative vectors in one call; the most is {MAX_OFFERED}")
        if not np.all(np.abs(x) < np.finfo(np.float16).max):
            raise ValueError("negative features hold values too large to store (float16): refused")
        with self._write_lock:
            dist = self._served_gate_distance(self.distance_prior_, self.distance_threshold_ or 0.0)
            away = [c.astype(np.float64) for c in self._served.gate.centroids] if self._served.gate else []
            if away_from is not None and len(away_from):
                away.append(self.transform(check_features(away_from, self.feature_dim, name="shots")))
            if away:
                x = NegativeStore(np.asarray(x, np.float16), len(x)).without_near(
                    np.concatenate(away), NEAR_NEGATIVE * dist).vectors
            store = self.negatives_.with_added(x, self.config.seed, SAME_OBJECT * dist)
            served = self._served
            if served.gate is not None:
                gate = self._gate(self._memory, served.gate.distance_threshold, store)
                served = dataclasses.replace(served, gate=gate, model_version=min(served.model_version + 1, MAX_COUNTER))
            self.negatives_ = store
            self._served = served
        return len(store)

    def _checked_views(self, views: Mapping[str, np.ndarray] | None,
                       data: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Transformed (n, k, d) views per class of ``data``; ValueError/TypeError on a mismatch."""
        if views is None:
            return {}
        if not isinstance(views, Mapping):
            raise TypeError(f"views must be a mapping label -> (n, k, d) features, got {type(views).__name__}")
        out = {}
        for c, v in views.items():
            if c not in data:
                raise ValueError(f"views given for {c!r}, which is not among the classes taught")
            v = np.asarray(v)
            n = len(data[c])
            if v.ndim != 3 or v.shape[0] != n or v.shape[2] != self.feature_dim or v.shape[1] < 2:
                raise ValueError(f"views of {c!r} must be (n={n}, k>=2, d={self.feature_dim}) (one view of an "
                                 f"image measures no spread), got {v.shape}")
            flat = self.transform(check_features(v.reshape(-1, self.feature_dim), self.feature_dim,
                                                 name=f"views of {c!r}"))
            out[c] = flat.reshape(v.shape)
        return out

    def forget(self, label: str) -> None:
        """Remove a class from memory and classifier."""
        with self._write_lock:
            if label not in self._memory:
                raise UnknownClassError(f"cannot forget {label!r}: not a known class (known: {list(self.classes_)})")
            memory = self._memory.without(label)
            head = self._served.head
            if isinstance(head, LinearSnapshot) and head.kind == "linear_sgd":
                # a trained softmax without one row is that softmax restricted to the other classes;
                # no 25-epoch retrain for a forget request
                new_head = head.without(head.classes.index(label)) if len(memory) else None
                served = self._build(memory, self.distance_threshold_, self.increments_, head=new_head)
            else:
                with fit_threads(self.config.fit_threads):
                    served = _lean(self._build(memory, self.distance_threshold_, self.increments_))
            self._memory = memory
            self._provenance = {c: p for c, p in self._provenance.items() if c != label}
            self._served = served
        _log.info("forgot %r; model v%d", label, served.model_version)

    def rename(self, old: str, new: str) -> None:
        """Give a class another name; its clusters and classifier row are kept."""
        with self._write_lock:
            if old not in self._memory:
                raise UnknownClassError(f"cannot rename {old!r}: not a known class (known: {list(self.classes_)})")
            check_label(new, name="new label")
            if new in self._memory and new != old:
                raise ValueError(f"cannot rename {old!r} to {new!r}: {new!r} is already a class")
            memory = self._memory.renamed(old, new)
            head = self._served.head
            if isinstance(head, (LinearSnapshot, BlendedSnapshot)):
                head = head.renamed(memory.classes)
            else:
                head = None
            served = self._build(memory, self.distance_threshold_, self.increments_, head=head)
            self._memory = memory
            self._provenance = {(new if c == old else c): p for c, p in self._provenance.items()}
            self._served = served
        _log.info("renamed %r to %r; model v%d", old, new, served.model_version)

    # ------------------------------------------------------------------ prediction
    def predict_scores(self, features: np.ndarray) -> np.ndarray:
        """(n, len(classes_)) class probabilities.

        The columns follow ``classes_`` *of the same model*; if another thread may teach, forget
        or rename meanwhile, use :meth:`predict_scores_with_classes` instead.
        """
        return self.predict_scores_with_classes(features)[0]

    def predict_scores_with_classes(self, features: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
        """(n, C) class probabilities and the C class names of their columns, from one model.

        Both come from the same served snapshot, so the column order is right even when a teach,
        forget or rename swaps the model between two reads of ``classes_`` and ``predict_scores``.
        """
        served = self._served  # one read
        x = self.transform(check_features(features, self.feature_dim))
        if served.head is None:
            return np.zeros((len(x), 0)), served.classes
        with frame_threads():  # a few vectors: a second BLAS thread would only wait on a busy machine
            return served.head.scores(x), served.classes

    def predict(self, features: np.ndarray, top_k: int = 5) -> list[Prediction]:
        """Label (or "" for unknown), confidence and the top-k classes of each vector."""
        return self._predict_with(self._served, features, top_k)  # one read: a consistent snapshot

    def _predict_with(self, served: _Served, features: np.ndarray, top_k: int) -> list[Prediction]:
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        x = self.transform(check_features(features, self.feature_dim))
        if served.head is None:
            return [Prediction("", 0.0, False, (), ()) for _ in range(len(x))]
        cfg = self.config
        known = np.ones(len(x), dtype=bool)
        dist = np.full(len(x), np.nan)
        inside = np.ones(len(x))
        with frame_threads():  # a frame's few vectors: one BLAS thread, whatever the process's setting
            frame = getattr(served.head, "frame_scores", None)  # scores and a hint of each row's best
            scores, hint = frame(x) if frame is not None else (served.head.scores(x), None)
            k = min(int(top_k), scores.shape[1])
            top = _top(scores, k, hint)
            best = top[:, 0]
            conf = scores[np.arange(len(x)), best]
            if cfg.open_set == "distance" and served.gate is not None:
                dist = served.gate.distances(x, best)
                ratio = served.gate.ratios(x, best, dist)
                known &= ratio < 1.0
                inside = inside_probability(ratio)  # sure of a class only as far as inside the gate
        if cfg.open_set in ("distance", "confidence") and cfg.min_confidence > 0:
            known &= conf >= cfg.min_confidence
        conf = conf * inside
        top_scores = (scores[np.arange(len(x))[:, None], top] * inside[:, None]).tolist()
        name = served.classes.__getitem__
        return [Prediction(name(b) if kn else "", c, kn, tuple(map(name, row)), tuple(row_scores), name(b), d)
                for b, kn, c, d, row, row_scores in zip(best.tolist(), known.tolist(), conf.tolist(), dist.tolist(),
                                                        top.tolist(), top_scores)]

    # ------------------------------------------------------------------ state and persistence
    def to_state(self) -> LearnerState:
        """A consistent copy of everything this learner is (memory, D, head, version), as plain data."""
        with self._write_lock:
            served = self._served
            head = served.head if isinstance(served.head, LinearSnapshot) else None
            extra = {"distance_prior": self.distance_prior_, "temperature": self.temperature_,
                     "temperature_weight": self.temperature_weight_}
            return LearnerState(self.backbone, self.feature_dim, self.config.to_dict(), self._memory,
                                self.distance_threshold_, self.increments_, served.model_version, head, extra,
                                self.view_spread_, dict(self._provenance), self.negatives_)

    @classmethod
    def from_state(cls, state: LearnerState, model_version: int | None = None) -> "CBCLPRLearner":
        """A new learner from ``state``, after checking it is consistent; ValueError otherwise.

        ``model_version`` overrides the stored version (a loaded memory must never make the served
        version go backwards).  The head is refitted from the memory unless the state carries one.
        """
        # a file from before the feature transform existed holds raw vectors
        config = LearnerConfig.from_dict(state.config if "transform" in state.config
                                         else {**state.config, "transform": "none"})
        mem = state.memory
        if mem.feature_dim != state.feature_dim:
            raise ValueError(f"memory width {mem.feature_dim} differs from feature_dim {state.feature_dim}")
        if mem.covariance != config.covariance:
            raise ValueError(f"memory covariance {mem.covariance!r} differs from the config's {config.covariance!r}")
        if config.max_clusters is not None and len(mem) > config.max_clusters:
            raise ValueError(f"cluster budget K={config.max_clusters} is smaller than the {len(mem)} classes")
        if mem.precision != config.memory_precision:  # the config decides how later changes are stored
            mem = ClusterMemory(mem.feature_dim, mem.covariance, mem.max_clusters, mem.reduction, mem.seed,
                                dict(mem.items()), config.memory_precision)
        dist = state.distance_threshold
        if dist is not None and (not np.isfinite(dist) or dist <= 0):
            raise ValueError(f"distance threshold D must be finite and > 0, got {dist!r}")
        if len(mem) and dist is None:
            raise ValueError("a memory with classes needs its distance threshold D")
        head = state.head
        if head is not None:
            c = len(mem)
            if tuple(head.classes) != tuple(mem.classes) or head.weight.shape != (c, state.feature_dim) \
                    or head.bias.shape != (c,):
                raise ValueError(f"head of shape {head.weight.shape} for classes {list(head.classes)} does "
                                 f"not fit {counted(c, 'class')} of width {state.feature_dim}")
        learner = cls(config, backbone=state.backbone, feature_dim=state.feature_dim)
        learner._restore_extra(state.learner_state or {})
        if state.view_spread is not None:
            if state.view_spread.feature_dim != state.feature_dim:
                raise ValueError(f"view spread width {state.view_spread.feature_dim} differs from {state.feature_dim}")
            learner.view_spread_ = state.view_spread
        if state.negatives is not None and len(state.negatives):
            neg = state.negatives
            if neg.vectors.ndim != 2 or neg.vectors.shape[1] != state.feature_dim:
                raise ValueError(f"negatives of shape {neg.vectors.shape} do not fit width {state.feature_dim}")
            keep = neg.vectors[: config.negatives_capacity]  # a smaller capacity keeps the first ones
            learner.negatives_ = NegativeStore(np.asarray(keep, np.float16), config.negatives_capacity, neg.offered)
        version = int(state.model_version if model_version is None else model_version)
        if version < 0:
            raise ValueError(f"model_version must be >= 0, got {version}")
        with fit_threads(config.fit_threads):
            served = _lean(learner._build(mem, dist, int(state.increments), head=head, version=version))
        learner._memory = mem
        learner._provenance = filled_provenance(state)
        learner.distance_threshold_ = dist
        learner.increments_ = int(state.increments)
        learner._served = served
        return learner

    def merge(self, other: LearnerState) -> "MergeReport":
        """Take in another memory of the same backbone, transform and width (:mod:`.merge`): its
        classes are added, a class both hold is pooled (or kept/replaced when one copy already
        contains the other's teaching), the budget K is applied once and the head refitted once.
        Raises :class:`.merge.MergeError` (a ValueError) and changes nothing when refused.
        """
        with self._write_lock:
            merged, report = merge_states(self.to_state(), other)
            if report.unchanged:
                return report
            # this robot's negatives stay, but those on a centroid of the merged classes: another
            # robot taught what this one saw untaught (as a teach drops them near its new shots)
            cents = [cc.means for _, cc in merged.memory.items()]
            near = NEAR_NEGATIVE * self._served_gate_distance(self.distance_prior_, self.distance_threshold_ or 0.0)
            kept = self.negatives_.without_near(np.concatenate(cents), near) if cents else self.negatives_
            merged = dataclasses.replace(merged, negatives=kept)
            new = type(self).from_state(merged, model_version=min(self._served.model_version + 1, MAX_COUNTER))
            self._adopt(new)
        _log.info("merged: %s; model v%d", report.summary(), self._served.model_version)
        return report

    def _adopt(self, new: "CBCLPRLearner") -> None:
        """Take ``new``'s whole state (same config); the served snapshot is swapped last."""
        self._memory, self._provenance = new._memory, new._provenance
        self.distance_threshold_, self.distance_prior_ = new.distance_threshold_, new.distance_prior_
        self.temperature_, self.temperature_weight_ = new.temperature_, new.temperature_weight_
        self._calib_pool, self._calib_base = (), new._calib_base
        self.view_spread_, self.increments_ = new.view_spread_, new.increments_
        self.negatives_ = new.negatives_
        self._served = new._served

    def _restore_extra(self, extra: Mapping[str, Any]) -> None:
        """Gate prior and temperature of a saved learner; ValueError on nonsense."""
        prior = extra.get("distance_prior")
        t, w = extra.get("temperature", 1.0), extra.get("temperature_weight", 0.0)
        for name, v in (("distance_prior", prior), ("temperature", t), ("temperature_weight", w)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v)):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if (prior is not None and prior <= 0) or t <= 0 or w < 0:
            raise ValueError(f"distance_prior {prior!r} / temperature {t!r} / weight {w!r} out of range")
        self.distance_prior_ = None if prior is None else float(prior)
        self.temperature_, self.temperature_weight_ = float(t), float(w)
        self._calib_base = (float(t), float(w))  # rows taught after a load are pooled with this

    def seen_together(self, features: np.ndarray, predictions: list[Prediction]) -> list[Prediction]:
        """``predictions`` of objects seen together in one view (one per row of ``features``), where
        two that look unlike each other are not both one taught object (:mod:`.one_place`)."""
        served = self._served
        if len(predictions) != len(features):
            raise ValueError(f"{len(predictions)} predictions for {len(features)} vectors")
        if served.gate is None or self.config.open_set != "distance" or len(predictions) < 2:
            return list(predictions)
        x = self.transform(check_features(features, self.feature_dim))
        # in D_gate, but never less than the prior's: shots of one view shrink D_gate, not an object's twin
        unit = max(served.gate.distance_threshold, self.distance_prior_ or 0.0)
        return one_place_rule.one_place(x, predictions, served.classes, served.gate, one_place_rule.TWIN, unit)

    def one_object(self, shots: np.ndarray, views: np.ndarray, others: Any = None,
                   guard: str = one_place_rule.GUARD) -> np.ndarray:
        """Which rows of ``views`` (a track's earlier views) are views of the object whose ``shots`` are
        taught now, not of another object the tracker switched to (boolean mask,
        :func:`.one_place.one_object`): ``others`` is one (m, d) array per view, the other objects of
        its frame (``frame``), or one array (``nearest``); the twin distance in max(``D_gate``, prior)."""
        if len(views) == 0:
            return np.zeros(0, bool)
        v = self.transform(check_features(views, self.feature_dim, name="track views"))
        x = self.transform(check_features(shots, self.feature_dim, name="shots"))

        def mapped(o: Any) -> np.ndarray | None:
            return None if o is None or len(o) == 0 else self.transform(
                check_features(o, self.feature_dim, name="other objects"))
        if guard == "frame":
            o: Any = None if others is None else [mapped(r) for r in others]
        else:
            o = mapped(others) if guard == "nearest" else None
        gate = self._served.gate
        prior = self.distance_prior_ or distance_prior(self.backbone, self.transform.power, self.transform.l2)
        unit = max(gate.distance_threshold if gate is not None else 0.0, prior or 0.0)
        return one_place_rule.one_object(x, v, o, unit, guard)

    def predict_versioned(self, features: np.ndarray, top_k: int = 5) -> tuple[list[Prediction], int]:
        """:meth:`predict` plus the model version of the very snapshot that answered."""
        served = self._served
        return self._predict_with(served, features, top_k), served.model_version

    def save(self, path: str | Path) -> Path:
        """Write the whole learner to one file, atomically (see :mod:`.persistence`)."""
        return save_learner(self, path)

    @classmethod
    def load(cls, path: str | Path, expected_backbone: str | None = None,
             expected_feature_dim: int | None = None) -> "CBCLPRLearner":
        """Read a file written by :meth:`save`; raises :class:`~.persistence.MemoryFileError`."""
        return load_learner(path, expected_backbone, expected_feature_dim)

    # ------------------------------------------------------------------ internals
    def _fit_head(self, memory: ClusterMemory, increment: int, real: Mapping[str, np.ndarray] | None,
                  spread: ViewSpread) -> tuple[Snapshot, PooledMoments | None, Any]:
        """The new head, the moments cache to keep for the next retrain (or None), and what the
        blended head's fit solved (for the calibration folds; else None).  The closed-form heads add
        the views' shared spread to their pooled covariance."""
        cfg = self.config
        if cfg.classifier in ("blended", "gaussian", "ncm"):
            prev = self._served.moments
            moments = prev.updated(memory) if prev is not None else PooledMoments.from_memory(memory)
            if cfg.classifier == "blended":
                # the served fit is updated (a low-rank change) unless the views' shared spread changed
                previous = self._served.solve if spread is self.view_spread_ else None
                head, solve = fit_blended_head_factor(memory, cfg.shrinkage, cfg.blend, moments,
                                                      self.temperature_, _shared(spread), previous)
                return head, moments, solve
            if cfg.classifier == "gaussian":
                return fit_gaussian_head(memory, cfg.shrinkage, moments, _shared(spread)), moments, None
            return fit_ncm(memory, moments), moments, None
        if cfg.classifier == "cbcl_vote":
            return fit_weighted_vote(memory, cfg.vote_neighbours), None, None
        from .classifiers.sgd import SGDSchedule, fit_linear_sgd  # torch: only for this head

        sched = SGDSchedule(cfg.epochs, cfg.epochs_per_increment, cfg.lr, cfg.momentum, cfg.weight_decay, cfg.batch_size)
        rng = np.random.default_rng([cfg.seed, increment])
        return fit_linear_sgd(memory, cfg.rehearsal, rng, sched, increment, real,
                              cfg.exemplars_per_class, cfg.singleton_jitter), None, None

    def _calibrated(self, served: _Served, memory: ClusterMemory, old: ClusterMemory,
                    data: Mapping[str, np.ndarray], dist: float,
                    temperature: tuple, spread: ViewSpread) -> tuple[_Served, tuple]:
        """``served`` with its temperature refined on held-out logits (one shot of every class out per
        fold) of the classes taught from scratch in this call (a class's vectors are all here only
        then); unchanged if none."""
        held = {c: x for c, x in data.items() if c not in old and len(x) >= 2}
        if not held:
            return served, temperature
        cfg = self.config
        view = SAME_VIEW * (served.gate.distance_threshold if served.gate is not None else dist)
        logits, labels = held_out_fold_logits(memory, served.moments, cfg.shrinkage, cfg.blend, held, dist,
                                              shared=_shared(spread), solve=served.solve, same_view=view)
        if not len(labels):
            return served, temperature
        pool = (self._calib_pool + tuple(zip(logits, labels.tolist())))[-POOL_ROWS:]
        t_pool = fit_temperature([r for r, _ in pool], [k for _, k in pool])
        t, w = pooled_temperature(*self._calib_base, t_pool, float(len(pool)))
        _log.info("temperature %.3g (%d held-out shots since start/load)", t, len(pool))
        return dataclasses.replace(served, head=served.head.with_temperature(t)), (t, w, pool)

    def _gate_distance(self, memory: ClusterMemory, dist: float, prior: float | None) -> float:
        """The open-set gate's D: the given D, or the prior refined by the memory's spread (classes of
        one view left out where ``GATE_MIN_EXTENT`` > 0), never below ``GATE_FLOOR`` x the prior:
        near-identical shots of one view say nothing about its other views."""
        if self.config.distance_threshold is not None or prior is None:
            return float(dist)
        return max(GATE_FLOOR * float(prior), memory_distance(memory, prior, cache=self._scatter_cache,
                                                              min_extent=GATE_MIN_EXTENT * float(prior)))

    def _gate(self, memory: ClusterMemory, gate_distance: float, negatives: NegativeStore) -> DistanceGate:
        """The distance gate, with per-class radii where the negatives tighten them (classes taught from
        several views only: :data:`.negatives.RADIUS_MIN_EXTENT`)."""
        cfg = self.config
        cents = tuple(cc.means.astype(np.float32, copy=False) for _, cc in memory.items())
        gate = DistanceGate(cents, gate_distance, cfg.unknown_distance_factor)
        if len(negatives) < MIN_NEGATIVES:
            return gate
        several = (class_extents(memory) >= RADIUS_MIN_EXTENT * gate_distance
                   if len(negatives) >= RADIUS_MIN_NEGATIVES else None)  # no radius of its own below that count
        radii = class_radii(cents, negatives, gate.radius, cfg.negative_quantile, cfg.negative_margin,
                            rank=cfg.negative_rank, floor=NEAR_NEGATIVE * gate_distance, several_views=several)
        return dataclasses.replace(gate, class_radii=radii, negatives=negatives.vectors.astype(np.float32),
                                   veto=veto_ratio(len(negatives)))

    def _served_gate_distance(self, prior: float | None, dist: float) -> float:
        """The served gate's D (the prior or D before the first teach)."""
        gate = self._served.gate
        return gate.distance_threshold if gate is not None else float(prior if prior is not None else dist)

    def _build(self, memory: ClusterMemory, dist: float | None, increment: int,
               real: Mapping[str, np.ndarray] | None = None, head: Snapshot | None = None,
               version: int | None = None, prior: float | None = None,
               spread: ViewSpread | None = None,
               negatives: NegativeStore | None = None) -> _Served:
        if len(memory) == 0:
            return _Served((), None, None, min(self._served.model_version + 1, MAX_COUNTER) if version is None else version)
        moments = self._served.moments  # still a valid cache: it is keyed by cluster objects
        # a given head (a rename) keeps the served fit: same classes in the same places
        solve = self._served.solve if isinstance(head, BlendedSnapshot) else None
        if head is None:
            head, moments, solve = self._fit_head(memory, increment, real,
                                                  self.view_spread_ if spread is None else spread)
        prior = self.distance_prior_ if prior is None else prior
        gate = self._gate(memory, self._gate_distance(memory, dist, prior),
                          self.negatives_ if negatives is None else negatives) if dist is not None else None
        return _Served(memory.classes, head, gate,
                       min(self._served.model_version + 1, MAX_COUNTER) if version is None else version, moments,
                       solve)


def _lean(served: _Served) -> _Served:
    """``served`` without its head's fit where the next retrain refactors anyway (few classes: the
    fit's ``d x d`` factor is kept only where a teach can update it)."""
    if served.solve is not None and len(served.classes) <= ANCHOR_MIN_CLASSES:
        return dataclasses.replace(served, solve=None)
    return served


def _top(scores: np.ndarray, k: int, hint: np.ndarray | None = None) -> np.ndarray:
    """(n, k) column indices of each row's ``k`` highest scores, best first, ties in column order (as
    a stable sort of all columns gives them; a partition first: a frame asks 16 of 1000 classes).

    ``hint`` (n, m), m >= k distinct columns a row: the row's best k then lie among the columns
    scoring at least the lowest of its hinted ones, and only those are sorted."""
    n = len(scores)
    if hint is not None and k <= hint.shape[1] and n:
        rows = np.arange(n)[:, None]
        at_least = scores >= scores[rows, hint].min(axis=1, keepdims=True)
        r, cols = np.nonzero(at_least)  # row by row, each in column order
        if len(cols) <= 4 * hint.shape[1] * n:
            order = np.lexsort((-scores[r, cols], r))  # stable: ties stay in column order
            start = np.concatenate([[0], np.cumsum(np.count_nonzero(at_least, axis=1))[:-1]])
            return cols[order][start[:, None] + np.arange(k)]
    if k >= scores.shape[1] or k > 64:
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    rows = np.arange(len(scores))[:, None]
    # the k-th score may be tied with columns left out: take every column scoring at least it
    kth = scores[rows, part].min(axis=1, keepdims=True)
    if np.count_nonzero(scores >= kth) > k * len(scores):
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    part.sort(axis=1)  # column order, so the stable sort below breaks ties as a full one would
    return part[rows, np.argsort(-scores[rows, part], axis=1, kind="stable")]


def _shared(spread: ViewSpread) -> np.ndarray | None:
    """The views' shared covariance for a head, or None when no views were taught."""
    return spread.covariance() if spread.images else None


def save_learner(learner: CBCLPRLearner, path: str | Path) -> Path:
    """Atomically write ``learner`` to ``path`` (see :mod:`.persistence`); returns the path."""
    return save_state(learner.to_state(), path)


def load_learner(path: str | Path, expected_backbone: str | None = None,
                 expected_feature_dim: int | None = None) -> CBCLPRLearner:
    """Read, verify and rebuild a learner; :class:`~.persistence.MemoryFileError` when refused."""
    state = load_state(path, expected_backbone, expected_feature_dim)
    try:
        return CBCLPRLearner.from_state(state)
    except (TypeError, ValueError) as exc:
        raise CorruptMemoryFileError(f"{path}: inconsistent memory file ({exc})") from exc
