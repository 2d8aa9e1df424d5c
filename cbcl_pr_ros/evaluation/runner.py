"""Run one method through one schedule on one feature set, measuring what the tables report."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from .featureset import FeatureSet
from .methods.base import IncrementalMethod
from .metrics import average_incremental_accuracy, forgetting, per_class_accuracy, top1
from .protocols import Schedule

__all__ = ["RunResult", "run_schedule"]


@dataclass
class RunResult:
    """Per-step and summary measurements of one (method, schedule, seed) run."""

    method: str
    protocol: str
    seed: int
    accuracy: list[float] = field(default_factory=list)  # after each step, all seen classes, last epoch
    n_classes: list[int] = field(default_factory=list)
    teach_seconds: list[float] = field(default_factory=list)
    predict_ms_per_image: list[float] = field(default_factory=list)
    memory_bytes: list[int] = field(default_factory=list)
    n_clusters: list[int] = field(default_factory=list)
    forgetting: float = 0.0
    info: dict = field(default_factory=dict)

    @property
    def average_incremental_accuracy(self) -> float:
        return average_incremental_accuracy(self.accuracy)

    @property
    def final_accuracy(self) -> float:
        return self.accuracy[-1]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["average_incremental_accuracy"] = self.average_incremental_accuracy
        d["final_accuracy"] = self.final_accuracy
        return d


def run_schedule(make_method: Callable[[int], IncrementalMethod], fs: FeatureSet, schedule: Schedule, seed: int,
                 method_name: str | None = None, on_step: Callable[[], None] | None = None) -> RunResult:
    """Teach each step's classes, then test on the test vectors of every class seen so far.

    Only training indices named by the schedule are ever shown to the method; test vectors are used for
    evaluation only, after the step's training has finished (no model selection on test data).
    """
    method = make_method(seed)
    res = RunResult(method_name or method.name, schedule.name, seed, info=dict(schedule.info))
    step_class_acc = []
    for t, step in enumerate(schedule.steps):
        batch = {c: fs.train_x[idx] for c, idx in step.train_indices.items()}
        t0 = time.perf_counter()
        method.fit_increment(batch)
        res.teach_seconds.append(time.perf_counter() - t0)
        seen = np.array(schedule.seen_after(t))
        mask = np.isin(fs.test_y, seen)
        xt, yt = fs.test_x[mask], fs.test_y[mask]
        t0 = time.perf_counter()
        pred = method.predict(xt)
        res.predict_ms_per_image.append(1000.0 * (time.perf_counter() - t0) / max(len(xt), 1))
        res.accuracy.append(top1(pred, yt))
        step_class_acc.append(per_class_accuracy(pred, yt))
        res.n_classes.append(len(seen))
        res.memory_bytes.append(int(method.memory_bytes()))
        res.n_clusters.append(int(method.n_clusters()))
        if on_step is not None:
            on_step()
    res.forgetting = forgetting(step_class_acc)
    if getattr(method, "D_", None) is not None:
        res.info["D"] = float(method.D_)
    return res
