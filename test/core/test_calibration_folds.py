"""Issue 15, outcome 4: the temperature's held-out rows come from folds (one shot of every class out)."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import calibration
from cbcl_pr_ros.core.calibration import held_out_fold_logits
from cbcl_pr_ros.core.classifiers.blended import fit_blended_head
from cbcl_pr_ros.core.classifiers.gaussian import PooledMoments, shrunk_pooled
from cbcl_pr_ros.core.memory import ClusterMemory


def _shots(rng, n=5, d=6):
    return {f"c{i}": rng.normal(2.0 * i, 1.0, (n, d)) for i in range(3)}


def _fold_reference(shots, held, j, shrinkage=0.5, blend=1.0):
    """Fold ``j``'s head by the formula: the held classes' moments without shot ``j``, the pooled
    covariance changed to match, the served head's shrinkage target kept; explicit inverses."""
    d = next(iter(shots.values())).shape[1]
    served = PooledMoments.from_memory(ClusterMemory(d).with_taught(shots, 1e9))
    rest = {c: (np.delete(x, j, axis=0) if c in held else x) for c, x in shots.items()}
    fold = PooledMoments.from_memory(ClusterMemory(d).with_taught(rest, 1e9))
    a = shrunk_pooled(served, shrinkage) + (1 - shrinkage) * (fold.within_sum - served.within_sum) / len(shots)
    x = np.stack([shots[c][j] for c in held])
    out = 0.5 * np.einsum("ij,ij->i", x @ np.linalg.inv(a), x)[:, None] + np.zeros((len(x), len(shots)))
    for k, m in enumerate(fold.per_class):
        dev = x - m.mean
        out[:, k] -= 0.5 * np.einsum("ij,ij->i", dev @ np.linalg.inv(a + blend * m.factor @ m.factor.T), dev)
    return out


def test_each_fold_equals_the_head_without_one_shot_of_every_held_class(rng, monkeypatch):
    monkeypatch.setattr(calibration, "SHOT_EXPONENT", 0.0)  # the raw held-out logits
    shots = _shots(rng)
    mem = ClusterMemory(6).with_taught(shots, 1e9)
    held = {c: shots[c] for c in ("c0", "c2")}  # c1 was taught earlier: stays whole
    logits, labels = held_out_fold_logits(mem, PooledMoments.from_memory(mem), 0.5, 1.0, held, 1e9)
    assert labels.tolist() == [0, 2] * 5  # every shot of every held class, fold by fold
    for j in range(5):
        np.testing.assert_allclose(logits[2 * j:2 * j + 2], _fold_reference(shots, held, j), rtol=1e-6, atol=1e-6)


def test_folds_come_close_to_a_full_refit_once_many_classes_are_known(rng, monkeypatch):
    """The folds keep the served shrinkage target (no d x d Cholesky per fold); a held-out shot moves
    that target by about 1/C of its class's share, so with many classes a full refit agrees."""
    monkeypatch.setattr(calibration, "SHOT_EXPONENT", 0.0)
    shots = {f"c{i}": rng.normal(0.5 * i, 1.0, (5, 8)) for i in range(60)}
    mem = ClusterMemory(8).with_taught(shots, 1e9)
    logits, _ = held_out_fold_logits(mem, PooledMoments.from_memory(mem), 0.5, 1.0, {"c7": shots["c7"]}, 1e9)
    for j in range(5):
        rest = dict(shots, c7=np.delete(shots["c7"], j, axis=0))
        ref = fit_blended_head(ClusterMemory(8).with_taught(rest, 1e9), 0.5, 1.0).logits(shots["c7"][j:j + 1])
        ref -= ref.max()
        got = logits[j] - logits[j].max()
        assert np.abs(got - ref).max() < 0.01 * np.abs(ref).max()


def test_rows_are_scaled_to_the_served_shot_count(rng):
    shots = _shots(rng, n=4)
    mem = ClusterMemory(6).with_taught(shots, 1e9)
    pm = PooledMoments.from_memory(mem)
    scaled, _ = held_out_fold_logits(mem, pm, 0.5, 1.0, shots, 1e9)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(calibration, "SHOT_EXPONENT", 0.0)
        raw, _ = held_out_fold_logits(mem, pm, 0.5, 1.0, shots, 1e9)
    np.testing.assert_allclose(scaled, raw * (3 / 4) ** calibration.SHOT_EXPONENT)
    assert calibration.SHOT_EXPONENT > 0


def test_no_rows_without_two_shots_and_folds_are_capped(rng):
    shots = _shots(rng, n=12)
    mem = ClusterMemory(6).with_taught(shots, 1e9)
    pm = PooledMoments.from_memory(mem)
    logits, labels = held_out_fold_logits(mem, pm, 0.5, 1.0, {"c0": shots["c0"][:1]}, 1e9)
    assert logits.shape == (0, 3) and labels.size == 0
    _, labels = held_out_fold_logits(mem, pm, 0.5, 1.0, {"c1": shots["c1"]}, 1e9, max_folds=4)
    assert labels.tolist() == [1] * 4
