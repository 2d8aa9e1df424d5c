"""The default open-set rule on real features: new views of taught objects are known, unrelated
images are not. Uses the shipped EfficientNet-Lite0 and the photo views the node tests teach with
(conftest.views: scikit-image photos, no download)."""
from __future__ import annotations

import numpy as np
import pytest

skdata = pytest.importorskip("skimage.data")

TAUGHT = ("cat", "coffee", "rocket")


@pytest.fixture
def taught(helpers):
    from cbcl_pr_ros.core import CBCLPRLearner
    from cbcl_pr_ros.features import make_backbone

    backbone = make_backbone("efficientnet_lite0")
    learner = CBCLPRLearner(backbone=backbone.name, feature_dim=backbone.feature_dim)
    for k, label in enumerate(TAUGHT):
        learner.teach(label, backbone.extract(helpers.views(label, 5, seed=k)))
    return backbone, learner, helpers


def test_new_views_of_taught_objects_are_known_and_correct(taught) -> None:
    backbone, learner, helpers = taught
    for k, label in enumerate(TAUGHT):
        for p in learner.predict(backbone.extract(helpers.views(label, 4, seed=100 + k))):
            assert p.known and p.label == label, (label, p)


def test_unrelated_images_are_unknown(taught) -> None:
    backbone, learner, _ = taught
    grey = np.full((480, 640, 3), 128, np.uint8)
    astronaut = skdata.astronaut()
    coins = np.repeat(skdata.coins()[:, :, None], 3, axis=2)
    for p in learner.predict(backbone.extract([grey, astronaut, coins])):
        assert not p.known and p.label == "", p
        # a margin beyond the gate's radius (measured: 1.03-1.38 against a radius of 0.90 in the
        # Tukey/L2 space, where no two non-negative unit vectors are farther apart than sqrt(2); the
        # gate's D never falls below 0.9 x the backbone's prior, however alike the taught views are)
        assert p.distance > 1.1 * learner._served.gate.radius
        assert p.confidence < 0.5  # an unknown answer is never sure
