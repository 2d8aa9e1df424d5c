"""Classifiers over the cluster memory; each returns an immutable scoring snapshot."""

from .base import LinearSnapshot, Snapshot, softmax
from .finetune import NaiveFineTuneHead
from .gaussian import class_moments, fit_gaussian_head
from .ncm import fit_ncm
from .sgd import SGDSchedule, fit_linear_sgd, train_linear
from .vote import WeightedVoteSnapshot, fit_weighted_vote

__all__ = [
    "LinearSnapshot", "Snapshot", "softmax", "NaiveFineTuneHead", "class_moments", "fit_gaussian_head",
    "fit_ncm", "SGDSchedule", "fit_linear_sgd", "train_linear", "WeightedVoteSnapshot", "fit_weighted_vote",
]
