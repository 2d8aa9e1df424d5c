"""Shared helpers of the core tests: seeded synthetic features and a state fingerprint."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

torch.set_num_threads(2)


def fingerprint(learner) -> str:
    """Hash of everything a learner holds (memory, served snapshot, D, counters)."""
    h = hashlib.sha256()
    h.update(repr((learner.classes_, learner.model_version_, learner.distance_threshold_,
                   learner.increments_)).encode())
    for name, cc in learner.memory.items():
        h.update(name.encode())
        for arr in (cc.counts, cc.means, cc.diag, *cc.factors):
            if arr is not None:
                h.update(np.ascontiguousarray(arr).tobytes())
    head = learner._served.head
    if head is not None and hasattr(head, "weight"):
        h.update(head.weight.tobytes())
    return h.hexdigest()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def blobs(rng: np.random.Generator, n_classes: int, n: int, d: int, sep: float = 6.0, spread: float = 1.0):
    """``n_classes`` isotropic Gaussian classes; returns dict name -> (n, d) and the means."""
    means = rng.normal(0, 1, (n_classes, d)) * sep / np.sqrt(2)
    return {f"c{i}": means[i] + rng.normal(0, spread, (n, d)) for i in range(n_classes)}, means
