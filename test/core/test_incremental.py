"""Incremental retrains equal from-scratch ones; one-snapshot reads; retrain thread limits."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.classifiers import SGDSchedule, train_linear
from cbcl_pr_ros.core.classifiers.gaussian import PooledMoments, fit_gaussian_head
from cbcl_pr_ros.core.classifiers.ncm import fit_ncm
from cbcl_pr_ros.core.threads import fit_threads

from .conftest import blobs

D = 24


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def assert_cache_matches_scratch(learner: CBCLPRLearner) -> None:
    cached = learner._served.moments
    scratch = PooledMoments.from_memory(learner.memory)
    assert cached is not None and cached.classes == learner.classes_
    assert rel_err(cached.within_sum, scratch.within_sum) < 1e-8
    assert rel_err(cached.means(), scratch.means()) < 1e-12
    head = learner._served.head
    if learner.config.classifier == "gaussian":
        ref = fit_gaussian_head(learner.memory, learner.config.shrinkage)
    else:
        ref = fit_ncm(learner.memory)
    assert rel_err(head.weight.astype(np.float64), ref.weight.astype(np.float64)) < 1e-6  # float32 heads
    np.testing.assert_allclose(head.bias, ref.bias, rtol=1e-5, atol=1e-5 * np.abs(ref.bias).max())


@pytest.mark.parametrize("covariance", ["full", "diagonal"])
@pytest.mark.parametrize("classifier", ["gaussian", "ncm"])
def test_incremental_moments_equal_from_scratch(rng, covariance, classifier):
    train, means = blobs(rng, 9, 12, D, sep=6.0, spread=1.5)
    cfg = LearnerConfig(covariance=covariance, classifier=classifier, max_clusters=40, distance_threshold=9.0,
                        transform="none")  # D = 9.0 is in raw units
    learner = CBCLPRLearner(cfg, "syn", D)
    learner.teach_increment({c: train[c][:6] for c in ("c0", "c1", "c2", "c3")})
    assert_cache_matches_scratch(learner)
    for c in ("c4", "c5", "c6"):  # new classes, one by one
        learner.teach(c, train[c])
        assert_cache_matches_scratch(learner)
    learner.teach("c0", train["c0"][6:])  # more shots of a known class
    assert_cache_matches_scratch(learner)
    learner.forget("c2")
    assert_cache_matches_scratch(learner)
    learner.rename("c1", "renamed")
    assert learner.classes_[1] == "renamed"
    learner.teach("c7", train["c7"])  # the first retrain after a rename
    assert_cache_matches_scratch(learner)
    # far-apart singletons overflow K=40 and force a k-means reduction of old classes
    before = {c: learner.memory[c] for c in learner.classes_}
    learner.teach("c8", means[8] + rng.normal(0, 20.0, (30, D)))
    assert learner.n_clusters_ <= 40
    assert any(learner.memory[c] is not before[c] for c in before), "no old class was reduced"
    assert_cache_matches_scratch(learner)


def test_moments_reuse_unchanged_classes_by_identity(rng):
    train, _ = blobs(rng, 4, 8, D)
    learner = CBCLPRLearner(LearnerConfig(distance_threshold=5.0), "syn", D)
    learner.teach_increment({c: train[c] for c in ("c0", "c1", "c2")})
    old = learner._served.moments
    learner.teach("c3", train["c3"])
    new = learner._served.moments
    assert [m is o for m, o in zip(new.per_class[:3], old.per_class)] == [True] * 3
    assert new.per_class[3].source is learner.memory["c3"]


def test_fit_head_refuses_moments_of_other_classes(rng):
    train, _ = blobs(rng, 3, 5, D)
    learner = CBCLPRLearner(LearnerConfig(distance_threshold=5.0), "syn", D)
    learner.teach_increment({c: train[c] for c in ("c0", "c1")})
    stale = learner._served.moments
    learner.teach("c2", train["c2"])
    with pytest.raises(ValueError, match="moments"):
        fit_gaussian_head(learner.memory, 0.5, stale)


def test_predict_scores_with_classes_one_snapshot(rng):
    train, means = blobs(rng, 10, 6, D, sep=10.0)
    learner = CBCLPRLearner(LearnerConfig(), "syn", D)
    empty_scores, empty_classes = learner.predict_scores_with_classes(means[:2])
    assert empty_scores.shape == (2, 0) and empty_classes == ()
    learner.teach("c0", train["c0"])
    errors, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            s, classes = learner.predict_scores_with_classes(means[:3])
            if s.shape != (3, len(classes)):
                errors.append((s.shape, classes))
            # the class a vector of c0 is given must be c0 whatever the model version
            if "c0" in classes and classes[int(s[0].argmax())] != "c0":
                errors.append(("c0 misread", classes))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 10):
            learner.teach(f"c{i}", train[f"c{i}"])
            if i % 3 == 0:
                learner.forget(f"c{i - 1}")
    finally:
        stop.set()
        t.join()
    assert not errors, errors[:3]
    s, classes = learner.predict_scores_with_classes(means[:1])
    assert classes == learner.classes_
    np.testing.assert_array_equal(s, learner.predict_scores(means[:1]))


def test_fit_threads_limits_then_restores():
    from threadpoolctl import threadpool_info

    torch_before = torch.get_num_threads()
    blas_before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with fit_threads(1):
        assert torch.get_num_threads() == 1
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
    assert torch.get_num_threads() == torch_before
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == blas_before
    with pytest.raises(ValueError, match="fit_threads"):
        LearnerConfig(fit_threads=0)


def test_train_linear_equals_per_step_indexing_reference(rng):
    """The per-epoch gather must give the same minibatches as the original per-step indexing."""
    x = rng.normal(0, 1, (150, 8)).astype(np.float32)
    y = rng.integers(0, 3, 150)
    sched = SGDSchedule(epochs=3, batch_size=16)
    got = train_linear(x, y, 3, sched, 3, seed=7)

    gen = torch.Generator().manual_seed(7)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        ref = torch.nn.Linear(8, 3)
    opt = torch.optim.SGD(ref.parameters(), lr=sched.lr, momentum=sched.momentum, weight_decay=sched.weight_decay)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    for _ in range(3):
        perm = torch.randperm(len(xt), generator=gen)
        for start in range(0, len(xt), 16):
            idx = perm[start:start + 16]
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(ref(xt[idx]), yt[idx]).backward()
            opt.step()
    torch.testing.assert_close(got.weight, ref.weight, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(got.bias, ref.bias, rtol=1e-6, atol=1e-7)
