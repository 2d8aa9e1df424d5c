"""One function per table/figure of the paper (plus the D sweep this project adds). Each runs a set of
methods over seeds on a feature set and returns an ``Experiment`` holding every run."""
from __future__ import annotations

import dataclasses
import logging
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .featureset import FeatureSet
from cbcl_pr_ros.core import LearnerConfig

from .methods import PEERS, MethodContext, describe_method, make_method
from .protocols import Schedule, base_sessions, class_incremental, few_shot_incremental
from .runner import RunResult, run_schedule

__all__ = ["Experiment", "machine_info", "valid_ways", "fsil_table", "sota", "ablation", "memory_budget", "curves",
           "prediction_time", "d_sweep", "FSIL_METHODS", "FSIL_SHOTS", "PIPELINE", "PIPELINE_NOTES", "PIPELINE_AFFECTED", "EARLIER_PIPELINE_NOTE", "SOTA_METHODS", "ABLATION_METHODS", "CURVE_METHODS",
           "BUDGET_METHODS", "method_configs",
           "EXPERIMENTS"]

_LOG = logging.getLogger(__name__)

# "fast" (the closed-form LDA head on raw features) is left out where it is the product's default already
_FAST = () if LearnerConfig() == LearnerConfig.paper(classifier="gaussian", epochs_per_increment=0) else ("fast",)
FSIL_METHODS = ("cbcl-pr-default", "cbcl-pr", "cbcl-pr-diag", *_FAST, "cbcl", "cbcl-1nn", *PEERS, "ft")
SOTA_METHODS = ("cbcl-pr-default", "cbcl-pr", "cbcl-pr-diag", *_FAST, "cbcl", "cbcl-1nn", *PEERS)
# the product's default beside the paper's CBCL-PR_D, so the ablation says where the shipped learner stands
ABLATION_METHODS = ("trad-agg-pr", "kmeans-pr", "cbcl", "trad-agg", "kmeans", "ncm", "cbcl-pr-diag", "cbcl-pr-default")
BUDGET_METHODS = ("cbcl-pr-diag", "cbcl-pr-default")
CURVE_METHODS = ("cbcl-pr-default", "cbcl-pr", "cbcl-pr-diag", "cbcl", "ncm", "flb", "ft", "fecam", "slda")
FSIL_SHOTS = (1, 5, 10)
# version of the method implementations a stored run was made with (CBCL-PR through CBCLPRLearner,
# FeCAM/SLDA from their papers); stored runs without it came from the earlier re-assembled pipeline.
# 2: the learner is given the features' backbone name (its distance prior applies, as in the nodes)
PIPELINE = "learner-adapter-2"
# runs of version 1 differ only in the default's D (no backbone prior): said so beside their tables
PIPELINE_NOTES = {"learner-adapter-1": (
    "stored by the learner-backed evaluation before the features' backbone name reached the learner: "
    "the default's D was the median within-class distance of the first increment instead of the "
    "learner's posterior with the backbone's prior (rows with LearnerConfig.paper(...) and the peers are "
    "unaffected)")}
# methods whose runs a version's change touched: the other methods' stored runs of that version equal the
# current pipeline's (the backbone name only selects the prior of a transform the paper configs lack)
PIPELINE_AFFECTED = {"learner-adapter-1": frozenset({"cbcl-pr-default"})}
EARLIER_PIPELINE_NOTE = ("stored by an earlier version of the evaluation (CBCL-PR heads re-assembled from core "
                         "pieces with a shared generator, older peers); not rerun with the current methods")

Progress = Callable[[int], None]


def machine_info() -> dict:
    """CPU model, core count, OS and load (the machine is shared, so timings need this context)."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "nproc": os.cpu_count(), "os": platform.platform(), "python": platform.python_version(),
            "loadavg": list(os.getloadavg())}


@dataclass
class Experiment:
    """All runs of one table/figure on one data set."""

    name: str
    dataset: str
    backbone: str
    seeds: list[int]
    runs: list[RunResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> "Experiment":
        """Inverse of :meth:`to_dict` (summary fields of runs are recomputed, not read)."""
        runs = []
        for r in d.get("runs", []):
            r = {k: v for k, v in r.items() if k not in ("average_incremental_accuracy", "final_accuracy")}
            runs.append(RunResult(**r))
        return cls(d["name"], d["dataset"], d["backbone"], list(d["seeds"]), runs, list(d.get("notes", [])),
                   dict(d.get("params", {})), dict(d.get("machine", {})))

    def to_dict(self) -> dict:
        return {"name": self.name, "dataset": self.dataset, "backbone": self.backbone, "seeds": self.seeds,
                "params": self.params, "notes": self.notes, "machine": self.machine,
                "runs": [r.to_dict() for r in self.runs]}


def valid_ways(n_classes: int, ways: Sequence[int]) -> tuple[list[int], list[int]]:
    """Split ``ways`` into usable ones (at least two increments) and skipped ones."""
    ok = [w for w in ways if 1 <= w and n_classes // w >= 2]
    return ok, [w for w in ways if w not in ok]


def _new(name: str, fs: FeatureSet, seeds: Sequence[int], **params) -> Experiment:
    return Experiment(name, fs.name, str(fs.meta.get("backbone", "?")), list(seeds), params=params,
                      machine=machine_info())


def method_configs(methods: Sequence[str], ctx: MethodContext) -> dict[str, str]:
    """What each method runs, in words (the learner's settings for the CBCL-PR family), for params."""
    return {m: describe_method(m, ctx) for m in methods}


def _run_all(exp: Experiment, fs: FeatureSet, methods: Sequence[str], schedules: dict[int, Schedule],
             ctx: MethodContext, tick: Progress | None, tag: dict | None = None) -> None:
    # the learner reads per-backbone priors by name: give it the features' backbone, as the nodes do
    ctx = dataclasses.replace(ctx, backbone=exp.backbone)
    configs = exp.params.setdefault("configs", {})
    for m, text in method_configs(methods, ctx).items():
        configs.setdefault(m, text)
    for seed, sched in schedules.items():
        for m in methods:
            r = run_schedule(lambda s, m=m: make_method(m, s, ctx), fs, sched, seed, method_name=m)
            r.info.update(tag or {})
            exp.runs.append(r)
            if tick:
                tick(1)


def fsil_table(fs: FeatureSet, seeds: Sequence[int], shots: Sequence[int] = FSIL_SHOTS,
               ways: Sequence[int] = (2, 5, 10, 20), methods: Sequence[str] = FSIL_METHODS,
               ctx: MethodContext | None = None, tick: Progress | None = None) -> Experiment:
    """Paper Table (FSIL): n-shot, k classes per increment, no base session; average incremental accuracy."""
    ok, skipped = valid_ways(len(fs.classes), ways)
    exp = _new("fsil-table", fs, seeds, shots=list(shots), ways=ok, methods=list(methods))
    if skipped:
        exp.notes.append(f"ways {skipped} skipped: {len(fs.classes)} classes give fewer than two increments")
    ctx = ctx or MethodContext(few_shot=True)
    for n in shots:
        for k in ok:
            _run_all(exp, fs, methods, {s: few_shot_incremental(fs.train_y, k, n, s) for s in seeds}, ctx, tick,
                     {"shots": n, "ways": k})
    return exp


def sota_setting(n_classes: int) -> tuple[int, int, int]:
    """(base classes, ways, shots): TOPIC/CEC's 60 + 8×5-way 5-shot for 100 classes, scaled otherwise."""
    if n_classes == 100:
        return 60, 5, 5
    base = int(round(0.6 * n_classes))
    ways = max(1, int(round(0.05 * n_classes)))
    return base, ways, 5


def sota(fs: FeatureSet, seeds: Sequence[int], base: int | None = None, ways: int | None = None,
         shots: int | None = None, session_dir: str | None = None, methods: Sequence[str] = SOTA_METHODS,
         ctx: MethodContext | None = None, tick: Progress | None = None) -> Experiment:
    """Base session with all data, then n-way k-shot sessions (TOPIC/CEC), session files when given."""
    b0, w0, s0 = sota_setting(len(fs.classes))
    base, ways, shots = base or b0, ways or w0, shots or s0
    exp = _new("sota", fs, seeds, base=base, ways=ways, shots=shots, session_dir=session_dir, methods=list(methods))
    if session_dir:
        seeds = list(seeds)[:1]
        exp.seeds = seeds
        exp.notes.append("session index files fix the split: one run per method")
    # The base session has real data for many classes (as in FSIL papers' 'full' rehearsal);
    # the few-shot sessions follow the paper's FSIL rehearsal (40 pseudo-exemplars for every class).
    ctx = ctx or MethodContext(few_shot=True)
    scheds = {s: base_sessions(fs.train_y, base, ways, shots, s, session_dir, fs.train_refs) for s in seeds}
    _run_all(exp, fs, methods, scheds, ctx, tick, {"base": base, "ways": ways, "shots": shots})
    return exp


def ablation(fs: FeatureSet, seeds: Sequence[int], ways: int | None = None, max_clusters: int | None = None,
             methods: Sequence[str] = ABLATION_METHODS, ctx: MethodContext | None = None,
             tick: Progress | None = None) -> Experiment:
    """Paper ablation: all training data, k classes per increment, diagonal covariances, budget K."""
    ways = ways or max(1, len(fs.classes) // 10 if len(fs.classes) >= 20 else len(fs.classes) // 5)
    exp = _new("ablation", fs, seeds, ways=ways, max_clusters=max_clusters, methods=list(methods))
    ctx = ctx or MethodContext(few_shot=False, max_clusters=max_clusters)
    _run_all(exp, fs, methods, {s: class_incremental(fs.train_y, ways, s) for s in seeds}, ctx, tick,
             {"ways": ways})
    return exp


def memory_budget(fs: FeatureSet, seeds: Sequence[int], ways: int | None = None,
                  fractions: Sequence[float] = (0.1, 0.25, 0.5, 1.0), budgets: Sequence[int] | None = None,
                  methods: Sequence[str] = BUDGET_METHODS, ctx: MethodContext | None = None,
                  tick: Progress | None = None) -> Experiment:
    """Paper appendix figure: CBCL-PR_D (and the product's default) average incremental accuracy vs
    budget K, k-means reduction vs removal. Without explicit ``budgets``, K = fractions of the first
    method's unlimited run's final cluster count (the same K for every method)."""
    ways = ways or max(1, len(fs.classes) // 10 if len(fs.classes) >= 20 else len(fs.classes) // 5)
    base_ctx = ctx or MethodContext(few_shot=False)
    exp = _new("memory-budget", fs, seeds, ways=ways, methods=list(methods))
    scheds = {s: class_incremental(fs.train_y, ways, s) for s in seeds}
    _run_all(exp, fs, list(methods), scheds, base_ctx, tick, {"K": "unlimited", "reduction": "none"})
    if budgets is None:
        total = int(np.median([r.n_clusters[-1] for r in exp.runs if r.method == methods[0]]))
        budgets = sorted({max(len(fs.classes), int(round(f * total))) for f in fractions})
        exp.notes.append(f"unlimited {methods[0]} run ends with a median of {total} clusters; "
                         f"K = {list(fractions)} of that (at least one per class), the same K for every method")
    exp.params["budgets"] = list(budgets)
    for k in budgets:
        for red in ("kmeans", "remove"):
            c = MethodContext(few_shot=False, max_clusters=int(k), reduction=red, distance_threshold=base_ctx.distance_threshold,
                              d_scale=base_ctx.d_scale, fast=base_ctx.fast)
            _run_all(exp, fs, list(methods), scheds, c, tick, {"K": int(k), "reduction": red})
    return exp


def curves(fs: FeatureSet, seeds: Sequence[int], ways: Sequence[int] = (2, 5, 10, 20),
           methods: Sequence[str] = CURVE_METHODS, ctx: MethodContext | None = None,
           tick: Progress | None = None) -> Experiment:
    """Paper accuracy curves: class-incremental with all data, k classes per increment."""
    ok, skipped = valid_ways(len(fs.classes), ways)
    exp = _new("curves", fs, seeds, ways=ok, methods=list(methods))
    if skipped:
        exp.notes.append(f"ways {skipped} skipped: {len(fs.classes)} classes give fewer than two increments")
    ctx = ctx or MethodContext(few_shot=False)
    for k in ok:
        _run_all(exp, fs, methods, {s: class_incremental(fs.train_y, k, s) for s in seeds}, ctx, tick, {"ways": k})
    return exp


def prediction_time(fs: FeatureSet, seeds: Sequence[int], ways: int | None = None,
                    methods: Sequence[str] = ("cbcl", "cbcl-pr", "cbcl-pr-default"), ctx: MethodContext | None = None,
                    tick: Progress | None = None) -> Experiment:
    """Paper prediction-time figure: ms per image vs number of stored clusters, after each increment."""
    ways = ways or max(1, len(fs.classes) // 10 if len(fs.classes) >= 20 else len(fs.classes) // 5)
    exp = _new("prediction-time", fs, seeds, ways=ways, methods=list(methods))
    ctx = ctx or MethodContext(few_shot=False)
    _run_all(exp, fs, methods, {s: class_incremental(fs.train_y, ways, s) for s in seeds}, ctx, tick, {"ways": ways})
    return exp


def d_sweep(fs: FeatureSet, seeds: Sequence[int], scales: Sequence[float] = (0.5, 0.75, 1.0, 1.25, 1.5, 3.0),
            shots: int = 10, ways: int = 2, methods: Sequence[str] = ("cbcl-pr-default", "cbcl-pr", "cbcl"),
            tick: Progress | None = None) -> Experiment:
    """Accuracy and clusters vs D, as multiples of the data-driven default (median within-class distance
    of the first increment); few-shot protocol."""
    exp = _new("d-sweep", fs, seeds, scales=list(scales), shots=shots, ways=ways, methods=list(methods))
    scheds = {s: few_shot_incremental(fs.train_y, ways, shots, s) for s in seeds}
    for sc in scales:
        _run_all(exp, fs, methods, scheds, MethodContext(few_shot=True, d_scale=sc), tick, {"d_scale": sc})
    return exp


EXPERIMENTS = {"fsil-table": fsil_table, "sota": sota, "ablation": ablation, "memory-budget": memory_budget,
               "curves": curves, "prediction-time": prediction_time, "d-sweep": d_sweep}
