"""Every classifier snapshot obeys one contract; the fast head matches the paper's head."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core.classifiers import (
    NaiveFineTuneHead, SGDSchedule, fit_gaussian_head, fit_linear_sgd, fit_ncm, fit_weighted_vote,
)
from cbcl_pr_ros.core.memory import ClusterMemory

from .conftest import blobs

FITTERS = {
    "gaussian": lambda m: fit_gaussian_head(m),
    "ncm": fit_ncm,
    "cbcl_vote": lambda m: fit_weighted_vote(m, 3),
    "linear_sgd": lambda m: fit_linear_sgd(m, "few_shot", np.random.default_rng(0), SGDSchedule(epochs=10)),
}


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(5)
    train, means = blobs(rng, 6, 10, 16, sep=8.0)
    test = {c: means[i] + rng.normal(0, 1, (30, 16)) for i, c in enumerate(train)}
    mem = ClusterMemory(16).with_taught(train, 5.0)
    return mem, test


@pytest.mark.parametrize("kind", list(FITTERS))
def test_contract_probabilities_and_accuracy(problem, kind):
    mem, test = problem
    snap = FITTERS[kind](mem)
    assert snap.classes == mem.classes
    x = np.concatenate(list(test.values()))
    y = np.repeat(np.arange(len(test)), 30)
    s = snap.scores(x)
    assert s.shape == (len(x), 6)
    np.testing.assert_allclose(s.sum(1), 1.0, atol=1e-5)
    assert np.all(s >= 0)
    assert (s.argmax(1) == y).mean() > 0.9


def test_linear_sgd_epochs_schedule():
    assert SGDSchedule(epochs=25, epochs_per_increment=2).epochs_at(3) == 31
    assert SGDSchedule().epochs_at(10) == 25


def test_naive_finetune_grows_and_learns_each_increment(problem):
    """Forgetting itself is measured in test_end_to_end; here the head's mechanics."""
    mem, test = problem
    names = list(test)
    ft = NaiveFineTuneHead(16, epochs=25, seed=0)
    ft.partial_fit({c: test[c][:10] for c in names[:3]})
    assert ft.classes_ == tuple(names[:3])
    assert ft.predict(np.concatenate([test[c][10:] for c in names[:3]])) == [c for c in names[:3] for _ in range(20)]
    ft.partial_fit({c: test[c][:10] for c in names[3:]})
    assert ft.classes_ == tuple(names)
    new_pred = ft.predict(np.concatenate([test[c][10:] for c in names[3:]]))
    assert np.mean([p == c for p, c in zip(new_pred, [c for c in names[3:] for _ in range(20)])]) > 0.9
    with pytest.raises(ValueError, match="empty"):
        ft.partial_fit({})


def test_pd_cholesky_factors_a_matrix_that_rounding_left_a_hair_below_positive_definite():
    """A near-singular pooled covariance (few shots, d large) with one eigenvalue just below zero
    still factors, close to the matrix; a NaN is still an error."""
    from scipy.linalg import LinAlgError, cholesky

    from cbcl_pr_ros.core.classifiers.gaussian import pd_cholesky

    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    eig = np.concatenate([np.linspace(1.0, 2.0, 39), [-1e-12]])
    a = (q * eig) @ q.T
    a = (a + a.T) / 2
    with pytest.raises(LinAlgError):
        cholesky(a, lower=True)
    low = pd_cholesky(a)
    assert np.allclose(np.tril(low), low)
    assert np.abs(low @ low.T - a).max() < 1e-6
    bad = a.copy()
    bad[3, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        pd_cholesky(bad)


def test_a_pooled_spread_of_rounding_residue_counts_as_no_spread():
    """Two classes taught with two identical shots each: the pooled covariance is rounding residue,
    which the shrunk matrix treats as no spread (identity) instead of failing to factor it."""
    from cbcl_pr_ros.core.classifiers.gaussian import PooledMoments, shrunk_pooled

    rng = np.random.default_rng(3)
    shots = {label: np.repeat(rng.normal(size=(1, 64)), 2, axis=0) + np.array([[0.0], [1e-13]])
             for label in ("a", "b")}
    memory = ClusterMemory(feature_dim=64).with_taught(shots, distance_threshold=1.0)
    a = shrunk_pooled(PooledMoments.from_memory(memory), 0.1)
    assert np.array_equal(a, np.eye(64))
