"""The default head (per-class Gaussians blended with the pooled covariance), the feature transform,
leave-one-out temperature calibration, the open-set gate's prior and their persistence."""
from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.calibration import fit_temperature, pooled_temperature
from cbcl_pr_ros.core.classifiers.blended import fit_blended_head, leave_one_out_logits
from cbcl_pr_ros.core.classifiers.gaussian import ClassMoment, PooledMoments, fit_gaussian_head, shrunk_pooled
from cbcl_pr_ros.core.distance_threshold import memory_distance, posterior_distance
from cbcl_pr_ros.core.memory import ClusterMemory
from cbcl_pr_ros.core.open_set import expected_calibration_error
from cbcl_pr_ros.core.persistence import _checksum
from cbcl_pr_ros.core.transform import FeatureTransform


# ---------------------------------------------------------------- transform
def test_transform_is_tukey_then_unit_norm_and_keeps_sign_and_zeros():
    t = FeatureTransform(0.5, True)
    x = np.array([[4.0, -9.0, 0.0], [0.0, 0.0, 0.0]])
    y = t(x)
    assert np.allclose(y[0], np.array([2.0, -3.0, 0.0]) / np.sqrt(13.0))
    assert np.all(y[1] == 0.0)  # a zero vector stays zero (no division by zero)
    assert t(x.astype(np.float32)).dtype == np.float32
    assert FeatureTransform.named("none")(x) is x
    with pytest.raises(ValueError):
        FeatureTransform(0.0)
    with pytest.raises(ValueError):
        FeatureTransform.named("pca")
    with pytest.raises(ValueError):
        LearnerConfig(transform="whiten")


# ---------------------------------------------------------------- head
def _memory(rng, spreads=(0.3, 2.0, 0.3), n=12, d=6):
    shots = {f"c{i}": rng.normal(2.5 * i, s, (n, d)) for i, s in enumerate(spreads)}
    return ClusterMemory(d).with_taught(shots, 1e9), shots  # one cluster per class: exact moments


def test_blended_logits_are_the_per_class_mahalanobis_up_to_a_shared_term(rng):
    mem, _ = _memory(rng)
    snap = fit_blended_head(mem, shrinkage=0.3, blend=2.0)
    pm = PooledMoments.from_memory(mem)
    a = shrunk_pooled(pm, 0.3)
    x = rng.normal(2.0, 2.0, (20, 6))
    want = np.empty((20, 3))
    for c, m in enumerate(pm.per_class):
        s = a + 2.0 * m.factor @ m.factor.T
        dev = x - m.mean
        want[:, c] = -0.5 * np.einsum("ij,ij->i", dev @ np.linalg.inv(s), dev)
    got = snap.logits(x) - 0.5 * np.einsum("ij,ij->i", x @ np.linalg.inv(a), x)[:, None]
    assert np.allclose(got, want, rtol=1e-4, atol=1e-3)


def test_blend_zero_is_the_lda_head_and_blending_helps_unequal_spreads(rng):
    mem, shots = _memory(rng)
    lda = fit_gaussian_head(mem, 0.5)
    b0 = fit_blended_head(mem, 0.5, blend=0.0)
    x = rng.normal(2.5, 2.0, (50, 6))
    assert np.allclose(b0.logits(x), lda.logits(x), atol=1e-3)
    # a wide class among two tight ones: its own covariance moves the boundary out
    test_x = np.vstack([rng.normal(2.5 * i, s, (300, 6)) for i, s in enumerate((0.3, 2.0, 0.3))])
    test_y = np.repeat(np.arange(3), 300)
    acc_lda = (lda.scores(test_x).argmax(1) == test_y).mean()
    acc_bl = (fit_blended_head(mem, 0.5, blend=1.0).scores(test_x).argmax(1) == test_y).mean()
    assert acc_bl > acc_lda + 0.02, (acc_bl, acc_lda)


def test_leave_one_out_equals_refitting_without_the_shot(rng):
    shots = {f"c{i}": rng.normal(2.0 * i, 1.0, (5, 6)) for i in range(3)}
    mem = ClusterMemory(6).with_taught(shots, 1e9)
    pm = PooledMoments.from_memory(mem)
    logits, labels = leave_one_out_logits(mem, pm, 0.5, 1.0, {"c1": shots["c1"]}, 1e9, max_held=5)
    assert sorted(labels.tolist()) == [1] * 5
    for row in logits:
        hits = []
        for i in range(5):
            rest = dict(shots, c1=np.delete(shots["c1"], i, axis=0))
            ref = fit_blended_head(ClusterMemory(6).with_taught(rest, 1e9), 0.5, 1.0)
            hits.append(np.allclose(ref.logits(shots["c1"][i:i + 1])[0], row, rtol=1e-4, atol=1e-3))
        assert any(hits)


def test_class_moment_factor_spans_the_class_covariance(rng):
    mem, shots = _memory(rng)
    m = ClassMoment.of(mem["c1"])
    assert np.allclose(m.factor @ m.factor.T, np.cov(shots["c1"].T), atol=1e-4)


# ---------------------------------------------------------------- calibration
def test_fit_temperature_recovers_a_scale_and_takes_ragged_rows(rng):
    z = rng.normal(0, 1, (400, 4))
    y = np.array([rng.choice(4, p=np.exp(r) / np.exp(r).sum()) for r in z])  # labels drawn from softmax(z)
    assert fit_temperature(5.0 * z, y) == pytest.approx(5.0, rel=0.3)
    rows = [r[:3] for r in z[:200]] + list(z[200:])
    labs = [min(k, 2) for k in y[:200]] + list(y[200:])
    assert 0.5 < fit_temperature(rows, labs) < 2.0
    with pytest.raises(ValueError):
        fit_temperature(z, np.full(400, 7))
    with pytest.raises(ValueError):
        fit_temperature([], [])
    assert pooled_temperature(2.0, 1.0, 8.0, 1.0) == (pytest.approx(4.0), 2.0)


def _overlapping(rng, n_classes=6, d=64, n=5, sep=0.5):
    centres = rng.normal(0, sep, (n_classes, d)) + 5.0
    draw = lambda k: {f"c{i}": centres[i] + rng.normal(0, 1, (k, d)) for i in range(n_classes)}  # noqa: E731
    return draw(n), draw(200)


def test_calibrated_confidence_is_closer_to_accuracy(rng):
    shots, test = _overlapping(rng)
    cfgs = {c: LearnerConfig(seed=0, calibrate=c, transform="none") for c in (False, True)}
    eces = {}
    for cal, cfg in cfgs.items():
        learner = CBCLPRLearner(cfg, "synthetic", 64)
        names = list(shots)
        for k in range(0, len(names), 2):
            learner.teach_increment({c: shots[c] for c in names[k:k + 2]})
        x = np.vstack(list(test.values()))
        y = np.repeat(np.arange(len(test)), 200)
        p = learner.predict_scores(x)
        eces[cal] = expected_calibration_error(p.max(1), p.argmax(1) == y)
        if cal:
            assert learner.temperature_ != 1.0 and learner.temperature_weight_ > 0
    assert eces[True] < eces[False] - 0.03, eces  # measured: 0.130 -> 0.045
    assert eces[True] < 0.08, eces


# ---------------------------------------------------------------- open set from the first shot
def test_gate_d_is_the_prior_refined_by_the_memory(rng):
    assert posterior_distance(2.0, 10.0, 0.0, 0.0) == pytest.approx(2.0)
    x = rng.normal(0, 1, (41, 8))
    mem = ClusterMemory(8).with_taught({"a": x}, 1e9)
    rms_pair = np.sqrt(2 * ((x - x.mean(0)) ** 2).sum() / 40)
    assert memory_distance(mem, 0.1, prior_dof=0.0) == pytest.approx(rms_pair, rel=1e-5)
    assert 0.1 < memory_distance(mem, 0.1, prior_dof=40.0) < rms_pair


def test_one_shot_start_accepts_new_views_and_rejects_unrelated(rng):
    d, n_classes = 64, 8
    centres = rng.uniform(0, 4, (n_classes, d))
    view = lambda c, k: np.maximum(centres[c] + rng.normal(0, 0.5, (k, d)), 0)  # noqa: E731
    t = FeatureTransform()
    spread = [((z - z.mean(0)) ** 2).sum(1).mean() for z in (t(view(c, 200)) for c in range(n_classes))]
    prior = float(np.sqrt(2 * np.mean(spread)))  # the "backbone prior": RMS pair distance, measured offline
    learner = CBCLPRLearner(LearnerConfig(seed=0, distance_prior=prior), "synthetic", d)
    for c in range(0, 4, 2):
        learner.teach_increment({f"c{c}": view(c, 1), f"c{c + 1}": view(c + 1, 1)})
    taught = np.vstack([view(c, 100) for c in range(4)])
    accepted = np.mean([p.known for p in learner.predict(taught)])
    assert accepted >= 0.95, accepted
    unseen = np.vstack([view(c, 100) for c in range(4, n_classes)])
    blank_noise = np.vstack([np.full((5, d), 1.0), rng.uniform(0, 8, (20, d))])
    for x in (unseen, blank_noise):
        rejected = np.mean([not p.known for p in learner.predict(x)])
        assert rejected >= 0.9, rejected


# ---------------------------------------------------------------- persistence
def _taught_learner(rng):
    shots, _ = _overlapping(rng)
    learner = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", 64)
    learner.teach_increment(dict(list(shots.items())[:3]))
    learner.teach_increment(dict(list(shots.items())[3:]))
    return learner


def test_round_trip_keeps_transform_temperature_and_gate(rng, tmp_path):
    learner = _taught_learner(rng)
    path = learner.save(tmp_path / "m.cbcl")
    back = CBCLPRLearner.load(path)
    assert back.config == learner.config
    assert back.temperature_ == pytest.approx(learner.temperature_) and learner.temperature_ != 1.0
    assert back.distance_prior_ == pytest.approx(learner.distance_prior_)
    assert back._served.gate.radius == pytest.approx(learner._served.gate.radius)
    x = np.abs(rng.normal(5, 2, (30, 64)))
    assert np.allclose(back.predict_scores(x), learner.predict_scores(x), atol=1e-6)
    assert [p.known for p in back.predict(x)] == [p.known for p in learner.predict(x)]


def test_file_without_transform_fields_reads_raw_vectors(rng, tmp_path):
    learner = _taught_learner(rng)
    path = learner.save(tmp_path / "m.cbcl")
    blob = path.read_bytes()
    tensors = st_load(blob)
    header_len = int.from_bytes(blob[:8], "little")
    meta = json.loads(json.loads(blob[8:8 + header_len])["__metadata__"]["cbcl_pr"])
    for key in ("transform", "transform_power", "blend", "calibrate", "distance_prior"):
        del meta["config"][key]
    del meta["learner_state"]
    meta["config"]["classifier"] = "gaussian"
    meta["sha256"] = _checksum(tensors, meta)  # format 2: the digest covers the metadata
    old = tmp_path / "old.cbcl"
    old.write_bytes(st_save(tensors, metadata={"cbcl_pr": json.dumps(meta)}))
    back = CBCLPRLearner.load(old)
    assert back.config.transform == "none" and back.transform.identity
    assert back.temperature_ == 1.0


@pytest.mark.parametrize("bad", [{"temperature": -1.0}, {"temperature": "hot"}, {"distance_prior": 0.0},
                                 {"temperature_weight": -2.0}, {"distance_prior": [1]}])
def test_nonsense_learner_state_is_refused(rng, tmp_path, bad):
    from cbcl_pr_ros.core import MemoryFileError

    learner = _taught_learner(rng)
    blob = learner.save(tmp_path / "m.cbcl").read_bytes()
    tensors = st_load(blob)
    header_len = int.from_bytes(blob[:8], "little")
    meta = json.loads(json.loads(blob[8:8 + header_len])["__metadata__"]["cbcl_pr"])
    meta["learner_state"].update(bad)
    meta["sha256"] = _checksum(tensors, meta)
    path = tmp_path / "bad.cbcl"
    path.write_bytes(st_save(tensors, metadata={"cbcl_pr": json.dumps(meta)}))
    with pytest.raises(MemoryFileError):
        CBCLPRLearner.load(path)


def test_frame_logits_score_each_vectors_best_classes_exactly():
    """Above PREFILTER_MIN_CLASSES, a frame's scoring computes the own-covariance term of each vector's
    PREFILTER_CLASSES best classes by the shared part (those logits are exact) and ranks the same best
    class; at or below it, frame logits are the exact ones."""
    from cbcl_pr_ros.core.classifiers.blended import PREFILTER_CLASSES, PREFILTER_MIN_CLASSES

    rng = np.random.default_rng(5)
    n_classes, d = PREFILTER_MIN_CLASSES + 36, 48
    centres = rng.normal(0, 3, (n_classes, d))
    shots = {f"k{i}": centres[i] + rng.normal(0, 1, (5, d)) for i in range(n_classes)}
    snap = fit_blended_head(ClusterMemory(d).with_taught(shots, 6.0))
    x = centres[:20] + rng.normal(0, 1, (20, d))
    exact, frame = snap.logits(x), snap.frame_logits(x)
    np.testing.assert_array_equal(frame.argmax(1), exact.argmax(1))
    shared = x.astype(np.float32) @ snap.weight.T + snap.bias
    for i in range(len(x)):
        best = np.argsort(-shared[i])[:PREFILTER_CLASSES]
        np.testing.assert_allclose(frame[i, best], exact[i, best], rtol=1e-5)
        assert not np.allclose(np.delete(frame[i], best), np.delete(exact[i], best))  # the rest estimated
    small = fit_blended_head(ClusterMemory(d).with_taught(dict(list(shots.items())[:PREFILTER_MIN_CLASSES]), 6.0))
    np.testing.assert_array_equal(small.frame_logits(x), small.logits(x))
