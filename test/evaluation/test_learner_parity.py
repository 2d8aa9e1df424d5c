"""The evaluation's CBCL-PR numbers are the product's: for every head the core offers, the evaluation
method and a CBCLPRLearner built from the same LearnerConfig, taught the same increments, give identical
predictions and probabilities. Tiny data and 3 epochs keep it fast."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cbcl_pr_ros.core import CLASSIFIERS, CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.evaluation.methods import (METHODS, LearnerClassifier, LearnerMethod, MethodContext, make_method)

from .conftest import blob_features

INCREMENTS = ((0, 1), (2, 3), (4,))


def _data(seed: int = 5, shots: int = 6):
    feats = blob_features(n_classes=5, per_class=shots + 5, dim=8, seed=seed, sep=1.5)
    train = {c: x[:shots] for c, x in feats.items()}
    test = np.vstack([x[shots:] for x in feats.values()])
    return train, test


def _learner_run(config: LearnerConfig, train, test, d_scale: float = 1.0):
    """The product, driven directly: one teach_increment per step; class ids as strings."""
    learner = None
    out = []
    for inc in INCREMENTS:
        shots = {str(c): train[c] for c in inc}
        if learner is None:
            cfg = config
            if d_scale != 1.0:
                from cbcl_pr_ros.core import estimate_distance_threshold

                cfg = dataclasses.replace(config, distance_threshold=estimate_distance_threshold(
                    {k: np.asarray(v, np.float64) for k, v in shots.items()}, config.seed) * d_scale)
            learner = CBCLPRLearner(cfg, "evaluation", feature_dim=test.shape[1])
        learner.teach_increment(shots)
        scores, names = learner.predict_scores_with_classes(test)
        out.append((np.array([int(names[i]) for i in scores.argmax(1)]), scores, names))
    return learner, out


@pytest.mark.parametrize("head", CLASSIFIERS)
@pytest.mark.parametrize("covariance", ["full", "diagonal"])
def test_every_head_evaluation_equals_learner(head, covariance):
    cfg = LearnerConfig(classifier=head, covariance=covariance, epochs=3, epochs_per_increment=1, seed=3)
    train, test = _data()
    learner, ref = _learner_run(cfg, train, test)
    method = LearnerMethod(cfg, name=head)
    for inc, (pred, scores, names) in zip(INCREMENTS, ref):
        method.fit_increment({c: train[c] for c in inc})
        assert np.array_equal(method.predict(test), pred), f"{head}: predictions differ from the learner's"
        assert np.array_equal(method.predict_proba(test), scores)
        assert [str(c) for c in method.estimator.classes_] == list(names)
    assert isinstance(method.learner_, CBCLPRLearner)
    assert method.D_ == learner.distance_threshold_
    assert method.n_clusters() == learner.n_clusters_


@pytest.mark.parametrize("name", sorted(n for n in METHODS if isinstance(make_method(n, 0), LearnerMethod)))
@pytest.mark.parametrize("few_shot", [True, False])
def test_registry_methods_run_the_learner(name, few_shot):
    """Every registered CBCL-PR method (default, paper, diagonal, vote, NCM, heads) is the learner with
    the config it reports: a learner built from that config answers identically."""
    ctx = MethodContext(few_shot=few_shot, fast=True)
    method = make_method(name, 11, ctx)
    assert method.config.seed == 11
    train, test = _data(seed=9)
    _, ref = _learner_run(method.config, train, test)
    for inc, (pred, _, _) in zip(INCREMENTS, ref):
        method.fit_increment({c: train[c] for c in inc})
        assert np.array_equal(method.predict(test), pred)


def test_default_method_is_the_product_default():
    cfg = make_method("cbcl-pr-default", 4, MethodContext(few_shot=True)).config
    default = LearnerConfig()
    differ = {f.name for f in dataclasses.fields(LearnerConfig) if getattr(cfg, f.name) != getattr(default, f.name)}
    assert differ <= {"seed", "fit_threads", "rehearsal"}, differ
    assert make_method("cbcl-pr", 0).config.classifier == "linear_sgd"


def test_d_scale_parity():
    cfg = LearnerConfig.paper(epochs=3, seed=2)
    train, test = _data(seed=4)
    _, ref = _learner_run(cfg, train, test, d_scale=0.5)
    method = LearnerMethod(cfg, d_scale=0.5)
    for inc, (pred, _, _) in zip(INCREMENTS, ref):
        method.fit_increment({c: train[c] for c in inc})
        assert np.array_equal(method.predict(test), pred)


def test_d_scale_estimates_d_where_the_learner_keeps_its_vectors():
    """With the default's Tukey+L2 transform, D is a distance between transformed vectors."""
    from cbcl_pr_ros.core import estimate_distance_threshold
    from cbcl_pr_ros.core.transform import FeatureTransform

    cfg = LearnerConfig(seed=2)
    assert cfg.transform != "none"
    train, _ = _data(seed=4)
    first = {str(c): train[c] for c in INCREMENTS[0]}
    x = np.vstack(list(first.values()))
    y = np.concatenate([[c] * len(v) for c, v in first.items()])
    clf = LearnerClassifier(config=cfg, d_scale=0.5).partial_fit(x, y)
    transform = FeatureTransform.named(cfg.transform, cfg.transform_power)
    expected = 0.5 * estimate_distance_threshold({c: transform(v) for c, v in first.items()}, cfg.seed)
    raw = 0.5 * estimate_distance_threshold({c: np.asarray(v, np.float64) for c, v in first.items()}, cfg.seed)
    assert clf.learner_.distance_threshold_ == pytest.approx(expected)
    assert abs(expected - raw) > 1e-3 * raw  # the two spaces differ, so the check above can fail


def test_private_random_streams():
    """Two SGD methods with different seeds taught in interleaved order give the same answers as each
    taught alone: no shared generator."""
    train, test = _data(seed=8)
    alone = []
    for seed in (0, 1):
        m = make_method("cbcl-pr", seed, MethodContext(fast=True))
        for inc in INCREMENTS:
            m.fit_increment({c: train[c] for c in inc})
        alone.append(m.predict_proba(test))
    a, b = make_method("cbcl-pr", 0, MethodContext(fast=True)), make_method("cbcl-pr", 1, MethodContext(fast=True))
    for inc in INCREMENTS:
        a.fit_increment({c: train[c] for c in inc})
        b.fit_increment({c: train[c] for c in inc})
    assert np.array_equal(a.predict_proba(test), alone[0]) and np.array_equal(b.predict_proba(test), alone[1])


def test_adapter_is_scikit_learn_shaped():
    train, test = _data()
    x = np.vstack([train[0], train[1]])
    y = np.array(["cup"] * len(train[0]) + ["mug"] * len(train[1]))
    clf = LearnerClassifier(LearnerConfig(seed=0))
    assert clf.get_params()["d_scale"] == 1.0
    clf.fit(x, y)
    assert list(clf.classes_) == ["cup", "mug"]
    proba = clf.predict_proba(test)
    assert proba.shape == (len(test), 2) and np.allclose(proba.sum(1), 1.0)
    assert set(clf.predict(test)) <= {"cup", "mug"}
    assert 0.0 <= clf.score(x, y) <= 1.0
    version = clf.learner_.model_version_
    with pytest.raises(ValueError):
        clf.partial_fit(np.zeros((2, 3)), ["a", "b"])  # wrong width: refused, nothing changes
    with pytest.raises(ValueError):
        clf.partial_fit(x, y[:-1])
    assert clf.learner_.model_version_ == version and list(clf.classes_) == ["cup", "mug"]
    clf.fit(x[:3], y[:3])  # fit starts afresh
    assert list(clf.classes_) == ["cup"]


def test_backbone_reaches_the_learner_so_its_distance_prior_applies():
    """The nodes build the learner with the backbone's name, which selects the tabulated distance prior
    of the default's transform; the evaluation must do the same or its D (and clusters) are not the
    product's. Checked through an experiment, which takes the name from the feature set."""
    from cbcl_pr_ros.core.distance_threshold import BACKBONE_DISTANCE_PRIORS
    from cbcl_pr_ros.evaluation import experiments as ex
    from cbcl_pr_ros.evaluation.featureset import synthetic_feature_set
    from cbcl_pr_ros.evaluation.protocols import few_shot_incremental

    backbone = next(b for (b, p, l2) in BACKBONE_DISTANCE_PRIORS
                    if (p, l2) == (LearnerConfig().transform_power, True))
    fs = synthetic_feature_set(n_classes=4, dim=8, train_per_class=12, test_per_class=4, seed=1)
    fs.meta["backbone"] = backbone
    exp = ex.fsil_table(fs, [0], shots=[5], ways=[2], methods=["cbcl-pr-default"], ctx=MethodContext(fast=True))
    first = few_shot_incremental(fs.train_y, 2, 5, 0).steps[0].train_indices
    shots = {str(c): fs.train_x[idx] for c, idx in first.items()}
    cfg = exp_cfg = make_method("cbcl-pr-default", 0, MethodContext(fast=True)).config
    product = CBCLPRLearner(cfg, backbone, feature_dim=fs.dim)
    product.teach_increment(shots)
    unnamed = CBCLPRLearner(exp_cfg, "evaluation", feature_dim=fs.dim)
    unnamed.teach_increment(shots)
    assert product.distance_threshold_ != pytest.approx(unnamed.distance_threshold_)  # the name matters
    assert exp.runs[0].info["D"] == pytest.approx(product.distance_threshold_)


def test_d_scale_scales_the_learners_own_d():
    """The D sweep's D at scale s is s times the D the learner picks itself (same estimator, same
    backbone prior), so scale 1 and the other scales lie on one axis."""
    cfg = LearnerConfig(seed=2)
    train, _ = _data(seed=4)
    x = np.vstack([train[c] for c in INCREMENTS[0]])
    y = np.concatenate([[c] * len(train[c]) for c in INCREMENTS[0]])
    own = LearnerClassifier(cfg, backbone="efficientnet_lite0").partial_fit(x, y).learner_.distance_threshold_
    scaled = LearnerClassifier(cfg, d_scale=0.5, backbone="efficientnet_lite0").partial_fit(x, y)
    assert scaled.learner_.distance_threshold_ == pytest.approx(0.5 * own)
