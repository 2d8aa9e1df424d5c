"""A frame's scoring with many classes: the shared product in blocks, every vector's candidates in one
gather, the top-k by a partition; each equal to its plain computation."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.classifiers import blended
from cbcl_pr_ros.core.classifiers.blended import PREFILTER_CLASSES, PREFILTER_MIN_CLASSES, fit_blended_head
from cbcl_pr_ros.core.learner import _top
from cbcl_pr_ros.core.memory import ClusterMemory


@pytest.fixture(scope="module")
def head():
    rng = np.random.default_rng(11)
    n_classes, d = PREFILTER_MIN_CLASSES + 60, 40
    centres = rng.normal(0, 3, (n_classes, d))
    # classes of different ranks (1 to 6 shots), so that every vector's block of rows has its own length
    shots = {f"k{i}": centres[i] + rng.normal(0, 1, (1 + i % 6, d)) for i in range(n_classes)}
    snap = fit_blended_head(ClusterMemory(d).with_taught(shots, 6.0))
    x = (centres[rng.choice(n_classes, 6, replace=False)] + rng.normal(0, 1, (6, d))).astype(np.float32)
    return snap, x


def _reference(snap, x: np.ndarray) -> np.ndarray:
    """The frame's logits computed plainly: the shared part of every class, each vector's own term
    for its best classes by it (from the exact logits), the median of those for the others."""
    shared = (x @ snap.weight.T).astype(np.float64) + snap.bias
    exact = snap.logits(x)
    out = shared.copy()
    for i in range(len(x)):
        best = np.argsort(-shared[i], kind="stable")[:PREFILTER_CLASSES]
        own = exact[i, best] - shared[i, best]
        out[i] += np.median(own)
        out[i, best] = exact[i, best]
    return out


def test_shared_product_in_blocks_equals_one_product(monkeypatch):
    rng = np.random.default_rng(3)
    weight = np.asfortranarray(rng.normal(0, 1, (300, 64)).astype(np.float32))
    x = rng.normal(0, 1, (6, 64)).astype(np.float32)
    monkeypatch.setattr(blended, "SMALL_PRODUCT", 6 * 64 * 40)  # blocks of 32 classes, the last one of 12
    np.testing.assert_allclose(blended._shared_product(x, weight), x @ weight.T, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(blended._shared_product(x[:1], weight), x[:1] @ weight.T)  # one vector: as is


@pytest.mark.parametrize("small", [None, 6 * 40 * 20])
def test_frame_logits_equal_their_plain_computation(head, monkeypatch, small):
    snap, x = head
    if small is not None:  # the shared product in blocks of 16 classes
        monkeypatch.setattr(blended, "SMALL_PRODUCT", small)
    frame = snap.frame_logits(x)
    np.testing.assert_allclose(frame, _reference(snap, x), rtol=1e-5)
    np.testing.assert_array_equal(frame.argmax(1), _reference(snap, x).argmax(1))
    np.testing.assert_array_equal(snap.frame_logits(x), frame)  # the same frame, the same logits
    for i in range(len(x)):  # each vector's rows went to that vector
        np.testing.assert_allclose(snap.frame_logits(x[i:i + 1])[0], frame[i], rtol=1e-5)


@pytest.mark.parametrize("k", [1, 5, 16, 64])
def test_top_is_the_stable_sort_ties_included(k):
    rng = np.random.default_rng(k)
    spread = rng.random((6, 1000))
    tied = rng.integers(0, 40, (6, 1000)).astype(np.float64)  # many ties at every rank
    zeros = np.where(rng.random((6, 1000)) < 0.05, spread, 0.0)  # most columns tied at 0 (an underflow)
    for scores in (spread, tied, zeros):
        want = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(_top(scores, k), want)
        # any k or more distinct columns a row as the hint: the same answer
        for m in (k, k + 7):
            hint = np.stack([rng.choice(1000, m, replace=False) for _ in range(6)])
            np.testing.assert_array_equal(_top(scores, k, hint), want)


def test_predict_of_many_classes_is_its_scores_top_and_repeats():
    rng = np.random.default_rng(8)
    d, n_classes = 32, PREFILTER_MIN_CLASSES + 16
    centres = np.abs(rng.normal(0, 1, (n_classes, d)))
    learner = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", d)
    learner.teach_increment({f"c{i}": np.abs(centres[i] + rng.normal(0, 0.1, (4, d))) for i in range(n_classes)})
    frame = np.abs(centres[:6] + rng.normal(0, 0.1, (6, d)))
    preds = learner.predict(frame, top_k=16)
    scores = learner.predict_scores(frame)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :16]
    for p, row, s in zip(preds, order, scores):
        assert p.top_labels == tuple(learner.classes_[j] for j in row)
        assert p.nearest_label == learner.classes_[row[0]]
        # the gate scales every score of a vector by one factor (its inside probability)
        np.testing.assert_allclose(np.array(p.top_scores) / p.top_scores[0], s[row] / s[row[0]], rtol=1e-9)
    assert learner.predict(frame, top_k=16) == preds
