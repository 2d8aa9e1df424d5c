"""Open-set gate: the default rule accepts taught-class vectors and rejects far ones (synthetic
Gaussians), is deterministic, and its helpers (class spread, ECE) do what they say."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.distance_threshold import memory_distance
from cbcl_pr_ros.core.open_set import DistanceGate, class_spreads, expected_calibration_error, inside_probability

DIM = 64


def _classes(seed: int, n_classes: int = 3, n: int = 10, sep: float = 8.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, sep, (n_classes, DIM))
    shots = {f"c{i}": (centres[i] + rng.normal(0, 1, (n, DIM))).astype(np.float32) for i in range(n_classes)}
    return rng, centres, shots


def _taught(seed: int = 0, **cfg):
    rng, centres, shots = _classes(seed)
    cfg.setdefault("transform", "none")  # the gate's geometry in raw units (the transform: test_blended.py)
    learner = CBCLPRLearner(LearnerConfig(seed=seed, **cfg), backbone="synthetic", feature_dim=DIM)
    learner.teach_increment(shots)
    return learner, rng, centres


def test_default_rule_is_a_multiple_of_the_refined_d():
    cfg = LearnerConfig()
    assert cfg.open_set == "distance"
    assert cfg.unknown_distance_factor == 1.3
    learner, _, _ = _taught()
    gate = learner._served.gate
    assert gate.radius == pytest.approx(1.3 * gate.distance_threshold)
    # no backbone prior for "synthetic": the first data's D is the prior, refined by the memory
    assert learner.distance_prior_ == learner.distance_threshold_
    assert gate.distance_threshold == pytest.approx(memory_distance(learner.memory, learner.distance_prior_))


def test_accepts_taught_class_vectors_and_rejects_far_ones():
    learner, rng, centres = _taught()
    same = np.concatenate([c + rng.normal(0, 1, (50, DIM)) for c in centres])
    preds = learner.predict(same, top_k=1)
    known_rate = np.mean([p.known for p in preds])
    assert known_rate >= 0.9, known_rate  # new draws of a taught class: within ~D of its cluster
    assert all(p.label == p.nearest_label for p in preds if p.known)
    # an unseen class far from all taught ones, and a taught class displaced by several D
    far = rng.normal(0.0, 8.0, (1, DIM)) + rng.normal(0, 1, (50, DIM)) + 60.0
    shifted = centres[0] + rng.normal(0, 1, (50, DIM)) + 3.0 * learner.distance_threshold_ / np.sqrt(DIM)
    for x in (far, shifted):
        preds = learner.predict(x, top_k=1)
        assert not any(p.known for p in preds)
        assert all(p.label == "" and p.nearest_label for p in preds)
        assert all(p.distance >= learner.distance_threshold_ for p in preds)


def test_factor_moves_the_operating_point_monotonically():
    rates = []
    for factor in (0.5, 1.0, 2.0):
        learner, rng, centres = _taught(unknown_distance_factor=factor)
        x = np.concatenate([c + rng.normal(0, 1.3, (40, DIM)) for c in centres])
        rates.append(np.mean([p.known for p in learner.predict(x, top_k=1)]))
    assert rates[0] < rates[1] <= rates[2]
    assert rates[2] == 1.0


def test_calibration_is_deterministic():
    a, rng, centres = _taught(seed=3)
    b, _, _ = _taught(seed=3)
    x = np.concatenate([centres + rng.normal(0, 1, centres.shape) * k for k in (0.8, 0.9, 3.0, 5.0)])
    assert a.distance_threshold_ == b.distance_threshold_
    pa, pb = a.predict(x), b.predict(x)
    assert [p.known for p in pa] == [p.known for p in pb]
    assert [p.distance for p in pa] == [p.distance for p in pb]
    assert 0 < sum(p.known for p in pa) < len(x)  # the set mixes known and unknown vectors


def test_gate_survives_save_and_load(tmp_path):
    learner, rng, centres = _taught(seed=1)
    x = np.concatenate([centres + rng.normal(0, 1, centres.shape) * k for k in (1, 3, 6)])
    loaded = CBCLPRLearner.load(learner.save(tmp_path / "m.cbclpr"))
    assert [p.known for p in loaded.predict(x)] == [p.known for p in learner.predict(x)]


def test_class_spreads_from_scatter_and_singleton_fallback():
    rng = np.random.default_rng(0)
    learner = CBCLPRLearner(LearnerConfig(distance_threshold=1e6, transform="none"), backbone="s", feature_dim=DIM)
    pts = rng.normal(0, 2.0, (40, DIM))
    learner.teach_increment({"a": pts, "b": rng.normal(0, 1, (1, DIM))})
    spread = class_spreads(learner.memory, fallback=7.0)
    rms = np.sqrt(((pts - pts.mean(0)) ** 2).sum(1).mean())  # one cluster (D huge): RMS to its mean
    assert spread[0] == pytest.approx(rms, rel=1e-4)
    assert spread[1] == 7.0


def test_distance_gate_is_nearest_centroid_of_the_predicted_class():
    gate = DistanceGate((np.array([[0.0, 0.0], [10.0, 0.0]]), np.array([[3.0, 4.0]])), 2.0, 1.5)
    x = np.array([[9.0, 0.0], [9.0, 0.0]])
    assert gate.distances(x, np.array([0, 1])).tolist() == pytest.approx([1.0, np.hypot(6, 4)])
    assert gate.known(x, np.array([0, 1])).tolist() == [True, False]


def test_expected_calibration_error():
    conf = np.array([0.95, 0.95, 0.55, 0.55])
    assert expected_calibration_error(conf, np.array([True, True, True, False])) == pytest.approx(
        0.5 * 0.05 + 0.5 * 0.05)
    assert expected_calibration_error(np.array([1.0, 1.0]), np.array([False, False])) == 1.0
    with pytest.raises(ValueError, match="confidence and correct"):
        expected_calibration_error(np.ones(3), np.ones(2, bool))



def test_an_answer_just_outside_the_gate_is_shown_unsure_and_one_just_inside_keeps_its_class_probability():
    """On real tables an answer's chance of being right falls off sharply at the gate's boundary, so the
    gate's confidence does too: 5 % outside the radius an answer is unknown and shown below 0.25,
    5 % inside it keeps most of its class's probability."""
    learner, rng, _ = _taught()
    gate = learner._served.gate
    c = learner.classes_.index("c0")
    centroid = np.asarray(gate.centroids[c][0], np.float64)
    away = rng.normal(0, 1, DIM)
    away /= np.linalg.norm(away)
    at = lambda ratio: (centroid + ratio * gate.radii(np.array([c]))[0] * away)[None].astype(np.float32)  # noqa: E731
    inside, outside = (learner.predict(at(r), top_k=1)[0] for r in (0.95, 1.05))
    probability = learner.predict_scores(at(0.95))[0, c]
    assert inside.known and inside.label == "c0" and inside.confidence > 0.75 * probability
    assert not outside.known and outside.nearest_label == "c0" and outside.confidence < 0.25


def test_the_gate_curve_is_one_half_on_the_boundary_and_below_it_wherever_unknown():
    assert inside_probability(np.array([1.0]))[0] == pytest.approx(0.5)
    ratios = np.linspace(0.0, 3.0, 61)
    p = inside_probability(ratios)
    assert np.all(np.diff(p) <= 0) and np.all(p[ratios > 1.0] < 0.5) and np.all(p[ratios < 1.0] > 0.5)
