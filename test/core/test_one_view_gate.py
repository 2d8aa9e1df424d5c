"""The gate's D with copies of one view left out (``learner.GATE_MIN_EXTENT``, measured but not
applied: 0): jittered or still-frame copies of one crop then leave the gate's D (and so its radius) as
one shot of that crop does, while shots of several views still refine it; as shipped, copies take D
to its floor (``GATE_FLOOR`` x the prior) and no lower."""
from __future__ import annotations

import numpy as np
import pytest

import cbcl_pr_ros.core.learner as learner_mod
from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.distance_threshold import memory_distance
from cbcl_pr_ros.core.negatives import RADIUS_MIN_EXTENT

DIM = 32
PRIOR = 1.0


def _learner() -> CBCLPRLearner:
    # raw units and a given prior D: the gate is 1.3 x D around the shots
    return CBCLPRLearner(LearnerConfig(seed=0, transform="none", distance_prior=PRIOR), backbone="synthetic",
                         feature_dim=DIM)


def _at(centre: np.ndarray, distance: float, rng: np.random.Generator) -> np.ndarray:
    u = rng.normal(0.0, 1.0, DIM)
    return (centre + distance * u / np.linalg.norm(u)).astype(np.float32)[None]


@pytest.mark.parametrize("copies", [5, 10])
def test_copies_of_one_view_accept_another_view_one_shot_accepts(copies, monkeypatch):
    monkeypatch.setattr(learner_mod, "GATE_MIN_EXTENT", RADIUS_MIN_EXTENT)
    rng = np.random.default_rng(3)
    shot = rng.normal(0.0, 1.0, (1, DIM)).astype(np.float32)
    jittered = np.concatenate([shot, shot + rng.normal(0.0, 0.01, (copies - 1, DIM)).astype(np.float32)])
    other_view = _at(shot[0], 1.22 * PRIOR, rng)  # inside 1.3 x the prior, outside 1.3 x 0.9 of it
    far_view = _at(shot[0], 1.4 * PRIOR, rng)  # outside the one-shot gate
    one, many = _learner(), _learner()
    one.teach("mug", shot)
    many.teach("mug", jittered)
    assert one._served.gate.distance_threshold == pytest.approx(PRIOR)
    # the copies say how alike the copies are, not how far the mug's views reach: the gate stays as wide
    assert many._served.gate.distance_threshold == pytest.approx(PRIOR)
    for learner in (one, many):
        near, far = learner.predict(other_view)[0], learner.predict(far_view)[0]
        assert near.known and near.label == "mug"
        assert not far.known  # and no wider than one shot's


@pytest.mark.parametrize("extent", [0.0, RADIUS_MIN_EXTENT])
def test_shots_of_several_views_still_refine_the_gate(extent, monkeypatch):
    monkeypatch.setattr(learner_mod, "GATE_MIN_EXTENT", extent)
    rng = np.random.default_rng(4)
    # six views of one object, a little closer together than the prior says views usually are
    views = (rng.normal(0.0, 1.0, DIM) + rng.normal(0.0, 0.1, (6, DIM))).astype(np.float32)
    learner = _learner()
    learner.teach("bowl", views)
    d = learner._served.gate.distance_threshold
    assert d == pytest.approx(memory_distance(learner.memory, PRIOR))
    assert 0.9 * PRIOR < d < PRIOR


def test_memory_distance_leaves_out_the_classes_of_one_view():
    rng = np.random.default_rng(5)
    shot = rng.normal(0.0, 1.0, (1, DIM)).astype(np.float32)
    views = (shot + 3.0 + rng.normal(0.0, 0.5, (4, DIM))).astype(np.float32)
    both, alone = _learner(), _learner()
    both.teach_increment({"copies": np.concatenate([shot, shot + 0.001]), "views": views})
    alone.teach("views", views)
    one_view = 0.375 * PRIOR
    assert memory_distance(both.memory, PRIOR, min_extent=one_view) == pytest.approx(
        memory_distance(alone.memory, PRIOR))
    assert memory_distance(both.memory, PRIOR) < memory_distance(both.memory, PRIOR, min_extent=one_view)


def test_as_shipped_copies_take_the_gate_to_its_floor_and_no_lower():
    assert learner_mod.GATE_MIN_EXTENT == 0.0  # measured, not applied (docs/core.md)
    rng = np.random.default_rng(6)
    shot = rng.normal(0.0, 1.0, (1, DIM)).astype(np.float32)
    learner = _learner()
    learner.teach("mug", np.concatenate([shot, shot + rng.normal(0.0, 0.01, (9, DIM)).astype(np.float32)]))
    assert learner._served.gate.distance_threshold == pytest.approx(learner_mod.GATE_FLOOR * PRIOR)
