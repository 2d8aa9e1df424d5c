"""Issue 15, outcome 4: the temperature's held-out rows come from folds (one shot of every class out)."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import calibration
from cbcl_pr_ros.core.calibration import held_out_fold_logits
from cbcl_pr_ros.core.classifiers.blended import fit_blended_head
from cbcl_pr_ros.core.classifiers.gaussian import PooledMoments
from cbcl_pr_ros.core.memory import ClusterMemory


def _shots(rng, n=5, d=6):
    return {f"c{i}": rng.normal(2.0 * i, 1.0, (n, d)) for i in range(3)}


def test_each_fold_equals_refitting_without_one_shot_of_every_held_class(rng, monkeypatch):
    monkeypatch.setattr(calibration, "SHOT_EXPONENT", 0.0)  # the raw held-out logits
    shots = _shots(rng)
    mem = ClusterMemory(6).with_taught(shots, 1e9)
    held = {c: shots[c] for c in ("c0", "c2")}  # c1 was taught earlier: stays whole
    logits, labels = held_out_fold_logits(mem, PooledMoments.from_memory(mem), 0.5, 1.0, held, 1e9)
    assert labels.tolist() == [0, 2] * 5  # every shot of every held class, fold by fold
    for j in range(5):
        rest = {c: (np.delete(x, j, axis=0) if c in held else x) for c, x in shots.items()}
        ref = fit_blended_head(ClusterMemory(6).with_taught(rest, 1e9), 0.5, 1.0)
        want = ref.logits(np.stack([shots["c0"][j], shots["c2"][j]]))
        np.testing.assert_allclose(logits[2 * j:2 * j + 2], want, rtol=1e-5, atol=1e-4)


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
