"""A many-class teach updates the blended head's fit by a low-rank term: the result equals a fit from
scratch, whatever mix of new, retaught and forgotten classes came before."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.classifiers import blended
from cbcl_pr_ros.core.classifiers.blended import (ANCHOR_MIN_CLASSES, anchored_pooled, fit_blended_head_factor,
                                                  pooled_anchor)
from cbcl_pr_ros.core.classifiers.gaussian import PooledMoments, shrunk_pooled
from cbcl_pr_ros.core.memory import ClusterMemory

D = 40


def _shots(rng, n=5):
    centre = rng.normal(0, 3, D)
    return centre + rng.normal(0, 0.8, (n, D))


# a class count inside one grid step of the anchor (85.8 <= C < 90.1): teaches there are updates
C0 = 86
assert int(ANCHOR_MIN_CLASSES * blended.ANCHOR_COUNT_STEP ** 6) < C0 < C0 + 3 < ANCHOR_MIN_CLASSES * blended.ANCHOR_COUNT_STEP ** 7


def _assert_same_head(snap, ref, x):
    assert snap.classes == ref.classes
    a, b = snap.logits(x), ref.logits(x)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())
    np.testing.assert_array_equal(a.argmax(1), b.argmax(1))
    np.testing.assert_allclose(snap.scores(x), ref.scores(x), atol=1e-5)


def test_updates_equal_the_fit_from_scratch_after_new_retaught_and_forgotten_classes(rng, monkeypatch):
    monkeypatch.setattr(blended, "ANCHOR_VARIANCE_STEP", 1.5)  # 40-d toy classes: the variance is noisy
    mem = ClusterMemory(D).with_taught({f"c{i}": _shots(rng) for i in range(C0)}, 1e9)
    pm = PooledMoments.from_memory(mem)
    _, fit = fit_blended_head_factor(mem, 0.5, 1.0, pm)
    x = rng.normal(0, 3, (30, D))
    steps = [lambda m: m.with_taught({"new0": _shots(rng)}, 1e9),
             lambda m: m.with_taught({"c3": _shots(rng, 3)}, 1e9),  # retaught: its moments change in place
             lambda m: m.without("c10"),
             lambda m: m.with_taught({"new1": _shots(rng, 7), "new2": _shots(rng, 2)}, 1e9),
             lambda m: m.with_taught({"new3": _shots(rng, 1)}, 1e9),  # one shot: no own covariance
             lambda m: m.without("new1")]  # the class of the largest rank leaves
    updated, chained = 0, 0
    for step in steps:
        mem = step(mem)
        pm = pm.updated(mem)
        snap, new_fit = fit_blended_head_factor(mem, 0.5, 1.0, pm, previous=fit)
        ref, _ = fit_blended_head_factor(mem, 0.5, 1.0, PooledMoments.from_memory(mem))
        _assert_same_head(snap, ref, x)
        updated += new_fit.anchor == fit.anchor
        chained = max(chained, len(new_fit.updates))
        fit = new_fit
    assert updated >= 5 and chained >= 4  # the update path was taken (several in a row), not only refits


def test_a_change_of_anchor_or_a_diagonal_memory_refactors(rng):
    c0 = ANCHOR_MIN_CLASSES + 16
    shots = {f"c{i}": _shots(rng) for i in range(c0)}
    mem = ClusterMemory(D).with_taught(shots, 1e9)
    pm = PooledMoments.from_memory(mem)
    _, fit = fit_blended_head_factor(mem, 0.5, 1.0, pm)
    # many classes at once: the class count leaves its grid step, the factor is made again
    big = mem.with_taught({f"n{i}": _shots(rng) for i in range(10)}, 1e9)
    snap, fit2 = fit_blended_head_factor(big, 0.5, 1.0, pm.updated(big), previous=fit)
    assert fit2.updates == () and fit2.anchor != fit.anchor
    x = rng.normal(0, 3, (10, D))
    _assert_same_head(snap, fit_blended_head_factor(big, 0.5, 1.0)[0], x)
    diag = ClusterMemory(D, covariance="diagonal").with_taught(shots, 1e9)
    pmd = PooledMoments.from_memory(diag)
    _, fd = fit_blended_head_factor(diag, 0.5, 1.0, pmd)
    more = diag.with_taught({"n": _shots(rng)}, 1e9)
    snap, fd2 = fit_blended_head_factor(more, 0.5, 1.0, pmd.updated(more), previous=fd)
    assert fd2.updates == ()
    _assert_same_head(snap, fit_blended_head_factor(more, 0.5, 1.0)[0], x)


def test_the_anchor_is_the_plain_shrunk_covariance_up_to_its_class_count(rng):
    small = ClusterMemory(D).with_taught({f"c{i}": _shots(rng) for i in range(ANCHOR_MIN_CLASSES)}, 1e9)
    pm = PooledMoments.from_memory(small)
    np.testing.assert_allclose(anchored_pooled(pm, 0.3), shrunk_pooled(pm, 0.3), rtol=1e-12, atol=1e-14)
    big = small.with_taught({f"n{i}": _shots(rng) for i in range(40)}, 1e9)
    pmb = PooledMoments.from_memory(big)
    count, var = pooled_anchor(pmb)
    true_var = np.trace(pmb.covariance()) / D
    assert ANCHOR_MIN_CLASSES <= count <= len(big) < count * blended.ANCHOR_COUNT_STEP
    assert abs(np.log(var / true_var)) <= 0.5 * np.log(blended.ANCHOR_VARIANCE_STEP) + 1e-12


@pytest.mark.parametrize("calibrate", [True, False])
def test_a_learner_taught_one_class_at_a_time_predicts_as_one_loaded_from_its_file(rng, tmp_path, calibrate,
                                                                                  monkeypatch):
    """The load refits from scratch: same scores as the learner whose teaches were updates."""
    monkeypatch.setattr(blended, "ANCHOR_VARIANCE_STEP", 1.5)
    learner = CBCLPRLearner(LearnerConfig(seed=0, calibrate=calibrate, transform="none"), "synthetic", D)
    learner.teach_increment({f"c{i}": _shots(rng) for i in range(C0)})
    for i in range(3):
        learner.teach(f"n{i}", _shots(rng))
    learner.forget("c2")
    learner.rename("c4", "renamed")
    learner.teach("n7", _shots(rng))
    assert learner._served.solve.updates  # the teaches above were updates
    learner.save(tmp_path / "m.safetensors")
    loaded = CBCLPRLearner.load(tmp_path / "m.safetensors")
    assert loaded._served.solve.updates == ()
    x = rng.normal(0, 3, (40, D))
    a, ca = learner.predict_scores_with_classes(x)
    b, cb = loaded.predict_scores_with_classes(x)
    assert ca == cb
    np.testing.assert_allclose(a, b, atol=1e-5)
    assert [p.label for p in learner.predict(x)] == [p.label for p in loaded.predict(x)]
