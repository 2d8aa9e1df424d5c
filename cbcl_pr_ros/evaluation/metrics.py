"""Accuracy metrics of an incremental run (top-1 over all classes seen so far, after the last epoch)."""
from __future__ import annotations

import numpy as np

__all__ = ["top1", "per_class_accuracy", "average_incremental_accuracy", "forgetting", "mean_std"]


def top1(pred: np.ndarray, truth: np.ndarray) -> float:
    """Fraction of predictions equal to the truth."""
    pred, truth = np.asarray(pred), np.asarray(truth)
    if pred.shape != truth.shape:
        raise ValueError(f"prediction shape {pred.shape} != truth shape {truth.shape}")
    if truth.size == 0:
        raise ValueError("no test examples")
    return float(np.mean(pred == truth))


def per_class_accuracy(pred: np.ndarray, truth: np.ndarray) -> dict[int, float]:
    """Accuracy on each class present in ``truth``."""
    pred, truth = np.asarray(pred), np.asarray(truth)
    return {int(c): float(np.mean(pred[truth == c] == c)) for c in np.unique(truth)}


def average_incremental_accuracy(acc_per_step: list[float]) -> float:
    """Mean of the accuracies after each step (the paper's 'average incremental accuracy')."""
    if not acc_per_step:
        raise ValueError("no steps")
    return float(np.mean(acc_per_step))


def forgetting(step_class_acc: list[dict[int, float]]) -> float:
    """Average forgetting (Chaudhry et al. 2018): for each class learned before the last step, its best
    accuracy at any earlier step minus its accuracy after the last step; mean over those classes.
    0 when there is a single step."""
    if len(step_class_acc) < 2:
        return 0.0
    final = step_class_acc[-1]
    drops = []
    for c, acc_final in final.items():
        earlier = [a[c] for a in step_class_acc[:-1] if c in a]
        if earlier:
            drops.append(max(earlier) - acc_final)
    return float(np.mean(drops)) if drops else 0.0


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and population std (ddof=0) over seeds."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("no values")
    return float(v.mean()), float(v.std())
