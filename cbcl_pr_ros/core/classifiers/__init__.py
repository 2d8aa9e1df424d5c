"""Classifiers over the cluster memory; each returns an immutable scoring snapshot.

The torch-backed heads (``sgd``, ``finetune``) are imported on first use: the default head needs no
torch, and importing it costs seconds at a node's start and exit.
"""
from __future__ import annotations

import importlib
from typing import Any

from .base import LinearSnapshot, Snapshot, softmax
from .gaussian import class_moments, fit_gaussian_head
from .ncm import fit_ncm
from .vote import WeightedVoteSnapshot, fit_weighted_vote

_LAZY = {"NaiveFineTuneHead": ".finetune", "SGDSchedule": ".sgd", "fit_linear_sgd": ".sgd", "train_linear": ".sgd"}

__all__ = [
    "LinearSnapshot", "Snapshot", "softmax", "NaiveFineTuneHead", "class_moments", "fit_gaussian_head",
    "fit_ncm", "SGDSchedule", "fit_linear_sgd", "train_linear", "WeightedVoteSnapshot", "fit_weighted_vote",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
