"""Per-call-site thread limits (core/threads.py): a predict runs its products on one BLAS thread
whatever the process's setting, a retrain on ``fit_threads``, and every limit comes back after."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core import threads
from cbcl_pr_ros.core.classifiers import blended

from .conftest import blobs


def _blas() -> list[int]:
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    """The process allows two BLAS threads (as a plain numpy process on this 2-core machine does)."""
    with threadpool_limits(limits=2, user_api="blas"):
        if min(_blas()) < 2:
            pytest.skip("this BLAS cannot run two threads here")
        yield


def _recording(monkeypatch) -> list[int]:
    """Record the BLAS threads in force whenever the blended head computes its logits."""
    seen: list[int] = []
    real = blended.BlendedSnapshot._frame  # behind scores and frame_scores

    def frame(self, features):
        seen.append(threads.blas_threads_in_force())
        return real(self, features)

    monkeypatch.setattr(blended.BlendedSnapshot, "_frame", frame)
    return seen


def test_predict_runs_on_one_blas_thread_and_restores_the_process_setting(rng, monkeypatch, two_blas_threads):
    train, means = blobs(rng, 6, 8, 32)
    learner = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", 32)
    learner.teach_increment(train)
    seen = _recording(monkeypatch)
    learner.predict(means[:3])
    learner.predict_scores(means[:3])
    learner.predict_versioned(means[:1])
    assert seen == [1, 1, 1]
    assert min(_blas()) == 2  # the process's own setting is back


def test_retrain_runs_on_fit_threads(rng, monkeypatch, two_blas_threads):
    seen: list[int] = []
    real = blended.fit_blended_head_factor

    def fit(*args, **kwargs):
        seen.append(threads.blas_threads_in_force())
        return real(*args, **kwargs)

    monkeypatch.setattr("cbcl_pr_ros.core.learner.fit_blended_head_factor", fit)
    train, _ = blobs(rng, 4, 6, 16)
    CBCLPRLearner(LearnerConfig(seed=0, fit_threads=1), "synthetic", 16).teach_increment(train)
    CBCLPRLearner(LearnerConfig(seed=0, fit_threads=None), "synthetic", 16).teach_increment(train)
    assert seen == [1, 2]
    assert min(_blas()) == 2


def test_overlapping_limits_take_the_smallest_and_end_at_the_process_setting(two_blas_threads):
    """A frame's limit and a retrain's, entered and left in any order from two threads, never leave
    the process on a limit nobody asked for (the former save/restore pairs could)."""
    fit_in, frame_in, frame_out = threading.Event(), threading.Event(), threading.Event()
    inside: dict[str, int] = {}

    def retrain():
        with threads.fit_threads(2):
            inside["fit_alone"] = threads.blas_threads_in_force()
            fit_in.set()
            frame_in.wait(10)
            inside["fit_with_frame"] = threads.blas_threads_in_force()
        frame_out.wait(10)

    t = threading.Thread(target=retrain)
    t.start()
    fit_in.wait(10)
    with threads.frame_threads():
        frame_in.set()
        t.join(0.2)  # the retrain leaves while the frame's limit holds
        inside["frame"] = threads.blas_threads_in_force()
    frame_out.set()
    t.join(10)
    assert inside == {"fit_alone": 2, "fit_with_frame": 1, "frame": 1}
    assert min(_blas()) == 2


def test_limits_are_checked():
    with pytest.raises(ValueError):
        threads.set_blas_threads(0)
    with pytest.raises(ValueError):
        with threads.fit_threads(0):
            pass
    with threads.fit_threads(None):  # None changes nothing
        pass
