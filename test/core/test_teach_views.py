"""Teach-time views are spread, not shots: the memory holds them, D / gate / calibration do not count them."""

from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core import calibration
from cbcl_pr_ros.core.calibration import held_out_fold_logits
from cbcl_pr_ros.core.classifiers.blended import fit_blended_head
from cbcl_pr_ros.core.classifiers.gaussian import PooledMoments
from cbcl_pr_ros.core.distance_threshold import shots_scatter
from cbcl_pr_ros.core.memory import ClusterMemory

from .conftest import fingerprint

D = 24


def _data(seed: int = 0, n: int = 5, k: int = 4, view_noise: float = 0.05):
    """Three non-negative classes (like pooled CNN features), and k tight views of every shot."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 4, (3, D))
    shots = {f"c{i}": np.maximum(centres[i] + rng.normal(0, 0.6, (n, D)), 0) for i in range(3)}
    views = {c: np.maximum(x[:, None, :] + rng.normal(0, view_noise, (n, k, D)), 0) for c, x in shots.items()}
    return shots, views


def test_views_enter_the_memory_but_not_the_gate_or_d():
    shots, views = _data()
    plain = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    plain.teach_increment(shots)
    viewed = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    viewed.teach_increment(shots, views)
    assert [ci.shots for ci in viewed.class_info()] == [5 * (1 + 4)] * 3  # the memory holds the views
    # D and the gate's D come from the shots alone; tight views would otherwise shrink the gate's D
    assert viewed.distance_threshold_ == pytest.approx(plain.distance_threshold_, rel=1e-6)
    assert viewed._served.gate.distance_threshold == pytest.approx(plain._served.gate.distance_threshold, rel=1e-3)
    as_shots = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    as_shots.teach_increment({c: np.vstack([x, views[c].reshape(-1, D)]) for c, x in shots.items()})
    assert as_shots._served.gate.distance_threshold < 0.95 * plain._served.gate.distance_threshold  # what views as shots did


def test_more_shots_update_the_shot_statistics_and_survive_forget_rename_and_files(tmp_path):
    shots, views = _data()
    more, more_views = _data(seed=1)
    learner = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    learner.teach_increment(shots, views)
    learner.teach("c0", more["c0"][:3])  # later shots without views still count as shots
    t = learner.transform
    s_old, dof_old = shots_scatter(t(shots["c0"]))
    s_new, _ = shots_scatter(t(more["c0"][:3]))
    s, dof = learner._shot_scatter["c0"]
    assert dof == dof_old + 3 and s > s_old + s_new  # plus the between-batches term
    learner.rename("c1", "mug")
    assert set(learner._shot_scatter) == {"c0", "mug", "c2"}
    path = learner.save(tmp_path / "m.cbclpr")
    loaded = CBCLPRLearner.load(path)
    assert loaded._shot_scatter == pytest.approx(learner._shot_scatter)
    assert loaded._served.gate.distance_threshold == pytest.approx(learner._served.gate.distance_threshold)
    loaded.forget("mug")
    assert set(loaded._shot_scatter) == {"c0", "c2"}


@pytest.mark.parametrize("bad, match", [
    ({"c0": np.zeros((4, 2, D))}, "must be"),  # one row of views per shot
    ({"c0": np.zeros((5, 2, D + 1))}, "must be"),
    ({"c0": np.zeros((5, D))}, "must be"),
    ({"zz": np.zeros((5, 2, D))}, "not among"),
    ({"c0": np.full((5, 2, D), np.nan)}, "finite|NaN|nan"),
])
def test_bad_views_are_refused_and_change_nothing(bad, match):
    shots, views = _data()
    learner = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    learner.teach_increment(shots, views)
    before = fingerprint(learner), dict(learner._shot_scatter)
    with pytest.raises(ValueError, match=match):
        learner.teach_increment({"c0": shots["c0"]}, bad)
    assert (fingerprint(learner), dict(learner._shot_scatter)) == before


def test_a_fold_leaves_a_shot_out_with_its_views(monkeypatch):
    monkeypatch.setattr(calibration, "SHOT_EXPONENT", 0.0)
    shots, views = _data(n=4, k=3)
    taught = {c: np.vstack([x, views[c].reshape(-1, D)]) for c, x in shots.items()}
    mem = ClusterMemory(D).with_taught(taught, 1e9)
    logits, labels = held_out_fold_logits(mem, PooledMoments.from_memory(mem), 0.5, 1.0, shots, 1e9, views=views)
    assert labels.tolist() == [0, 1, 2] * 4  # one row per *shot*, not per vector
    j = 2
    rest = {c: np.vstack([np.delete(x, j, axis=0), np.delete(views[c], j, axis=0).reshape(-1, D)])
            for c, x in shots.items()}
    ref = fit_blended_head(ClusterMemory(D).with_taught(rest, 1e9), 0.5, 1.0)
    want = ref.logits(np.stack([shots[c][j] for c in shots]))
    np.testing.assert_allclose(logits[3 * j:3 * j + 3], want, rtol=1e-5, atol=1e-4)
