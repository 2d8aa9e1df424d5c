"""Core CBCL-PR library (no ROS): Agg-Var clustering, cluster memory with a budget, Gaussian
pseudo-rehearsal, classifiers, open-set gate, the learner and its persistence.  See docs/core.md."""

from typing import Any

from .clustering import ClassClusters, agg_var
from .distance_threshold import estimate_distance_threshold
from .learner import (
    CLASSIFIERS,
    CBCLPRLearner,
    ClassInfo,
    LearnerConfig,
    Prediction,
    TeachResult,
    load_learner,
    save_learner,
)
from .memory import ClusterMemory
from .persistence import (
    FORMAT_VERSION,
    CorruptMemoryFileError,
    IncompatibleMemoryFileError,
    LearnerState,
    MemoryFileError,
    read_metadata,
    state_from_bytes,
    state_to_bytes,
)
from .rehearsal import pseudo_exemplars
from .validation import UnknownClassError

__all__ = [
    "CBCLPRLearner", "LearnerConfig", "TeachResult", "Prediction", "ClassInfo", "CLASSIFIERS",
    "ClassClusters", "ClusterMemory", "agg_var", "estimate_distance_threshold", "pseudo_exemplars",
    "NaiveFineTuneHead", "MemoryFileError", "CorruptMemoryFileError", "IncompatibleMemoryFileError",
    "FORMAT_VERSION", "save_learner", "load_learner", "read_metadata", "UnknownClassError",
    "LearnerState", "state_from_bytes", "state_to_bytes",
]


def __getattr__(name: str) -> Any:
    if name == "NaiveFineTuneHead":  # torch-backed: imported on first use (see classifiers/__init__)
        from .classifiers import NaiveFineTuneHead

        return NaiveFineTuneHead
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
