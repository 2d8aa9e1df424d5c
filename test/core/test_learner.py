"""The learner's API: teach/forget/rename/predict, bad input changes nothing, concurrency."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, UnknownClassError

from .conftest import blobs, fingerprint

D = 12


@pytest.fixture
def taught(rng):
    train, means = blobs(rng, 4, 10, D, sep=10.0)
    learner = CBCLPRLearner(LearnerConfig(seed=0), backbone="syn", feature_dim=D)
    learner.teach_increment({c: train[c] for c in ("c0", "c1")})
    learner.teach("c2", train["c2"])
    return learner, train, means


def test_empty_learner_predicts_unknown():
    learner = CBCLPRLearner(LearnerConfig(), "syn", 3)
    p = learner.predict(np.zeros((2, 3)))
    assert [q.label for q in p] == ["", ""] and not p[0].known
    assert learner.predict_scores(np.zeros((2, 3))).shape == (2, 0)


def test_teach_predict_topk(taught, rng):
    learner, train, means = taught
    assert learner.classes_ == ("c0", "c1", "c2")
    assert learner.model_version_ == 2
    preds = learner.predict(means[:3] + rng.normal(0, 1, (3, D)), top_k=2)
    assert [p.label for p in preds] == ["c0", "c1", "c2"]
    assert all(p.known and len(p.top_labels) == 2 and p.top_scores[0] >= p.top_scores[1] for p in preds)
    assert learner.predict_scores(means[:1]).shape == (1, 3)


def test_more_shots_extend_a_known_class(taught, rng):
    learner, train, means = taught
    before = learner.memory["c0"].n_samples
    res = learner.teach("c0", means[0] + rng.normal(0, 1, (5, D)))
    assert res.new_labels == () and learner.memory["c0"].n_samples == before + 5
    assert learner.classes_ == ("c0", "c1", "c2")


def test_open_set_far_is_unknown_taught_is_known(taught, rng):
    learner, train, means = taught
    far = rng.normal(0, 1, (20, D)) * 50
    assert not any(p.known for p in learner.predict(far))
    assert all(p.label == "" and p.nearest_label in learner.classes_ for p in learner.predict(far))
    assert all(p.known for p in learner.predict(train["c1"]))


def test_forget_and_rename(taught, rng):
    learner, train, means = taught
    learner.forget("c1")
    assert learner.classes_ == ("c0", "c2")
    assert learner.predict_scores(means[:1]).shape == (1, 2)
    learner.rename("c2", "blue cup")
    assert learner.classes_ == ("c0", "blue cup")
    assert learner.predict(means[2:3] + rng.normal(0, 0.5, (1, D)))[0].label == "blue cup"
    assert [i.name for i in learner.class_info()] == ["c0", "blue cup"]


@pytest.mark.parametrize("bad", [
    lambda L, t: L.teach("x", np.full((3, D), np.nan)),
    lambda L, t: L.teach("x", np.full((3, D), np.inf)),
    lambda L, t: L.teach("x", np.zeros((3, D + 1))),
    lambda L, t: L.teach("x", np.zeros((0, D))),
    lambda L, t: L.teach("x", np.zeros((2, 3, D))),
    lambda L, t: L.teach("x", [["a"] * D]),
    lambda L, t: L.teach("", np.zeros((2, D))),
    lambda L, t: L.teach_increment({}),
    lambda L, t: L.teach_increment({"ok": np.zeros((2, D)), "bad": np.full((2, D), np.nan)}),
    lambda L, t: L.forget("nope"),
    lambda L, t: L.rename("nope", "x"),
    lambda L, t: L.rename("c0", "c1"),
    lambda L, t: L.predict(np.zeros((1, D)), top_k=0),
])
def test_bad_input_raises_and_changes_nothing(taught, bad):
    learner, train, _ = taught
    before = fingerprint(learner)
    with pytest.raises((ValueError, TypeError)) as info:
        bad(learner, train)
    assert str(info.value)
    assert fingerprint(learner) == before


def test_unknown_label_error_type(taught):
    learner, _, _ = taught
    with pytest.raises(UnknownClassError, match="nope"):
        learner.forget("nope")


def test_budget_smaller_than_classes_refused(rng):
    train, _ = blobs(rng, 3, 5, D)
    learner = CBCLPRLearner(LearnerConfig(max_clusters=2), "syn", D)
    learner.teach_increment({c: train[c] for c in ("c0", "c1")})
    before = fingerprint(learner)
    with pytest.raises(ValueError, match="K=2"):
        learner.teach("c2", train["c2"])
    assert fingerprint(learner) == before and learner.n_clusters_ <= 2


@pytest.mark.parametrize("kwargs", [
    {"distance_threshold": 0.0}, {"distance_threshold": -1.0}, {"max_clusters": 0},
    {"covariance": "dense"}, {"classifier": "svm"}, {"rehearsal": "x"}, {"shrinkage": 2.0},
    {"epochs": 0}, {"unknown_distance_factor": float("nan")}, {"seed": 1.5},
])
def test_config_validated_in_one_place(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LearnerConfig(**kwargs)


def test_predict_concurrent_with_teach_sees_consistent_snapshots(rng):
    train, means = blobs(rng, 12, 8, D, sep=10.0)
    learner = CBCLPRLearner(LearnerConfig(), "syn", D)
    learner.teach("c0", train["c0"])
    errors, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            try:
                served = learner._served
                s = learner.predict_scores(means[:1])
                p = learner.predict(means[:1])[0]
                assert s.shape[1] >= 1 and p.top_labels[0] in learner.classes_ + served.classes
                assert len(p.top_labels) == min(5, len(p.top_labels))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    for i in range(1, 12):
        learner.teach(f"c{i}", train[f"c{i}"])
    stop.set()
    t.join()
    assert not errors, errors[:1]
    assert len(learner.classes_) == 12


def test_memory_bytes_diagonal_smaller_than_full_for_many_shots(rng):
    x = rng.normal(0, 1, (200, 64))
    full = CBCLPRLearner(LearnerConfig(distance_threshold=1e6), "syn", 64)
    diag = CBCLPRLearner(LearnerConfig(distance_threshold=1e6, covariance="diagonal"), "syn", 64)
    full.teach("a", x)
    diag.teach("a", x)
    assert diag.memory_bytes() < full.memory_bytes()
    assert full.class_info()[0].shots == 200


def test_retired_torch_threads_is_gone_but_old_configs_still_load():
    """torch_threads did nothing once fit_threads governed retrains: it left the config; a memory
    file written before still loads (the key is dropped), and an unknown key is still refused."""
    assert "torch_threads" not in LearnerConfig().to_dict()
    old = {**LearnerConfig(seed=3).to_dict(), "torch_threads": 2}
    assert LearnerConfig.from_dict(old) == LearnerConfig(seed=3)
    with pytest.raises(ValueError, match="unknown LearnerConfig keys"):
        LearnerConfig.from_dict({**old, "torch_thread": 2})
