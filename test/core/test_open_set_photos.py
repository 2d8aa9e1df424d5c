"""The default open-set rule on real features: new views of taught objects are known, unrelated
images are not. Uses the shipped EfficientNet-Lite0 and scikit-image's photos (no download)."""
from __future__ import annotations

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")
skdata = pytest.importorskip("skimage.data")

TAUGHT = {"cat": "chelsea", "coffee": "coffee", "rocket": "rocket"}


def _views(photo: np.ndarray, n: int, seed: int) -> list[np.ndarray]:
    """Random crops (60-95 % of the side), flips and brightness changes, as a hand-held object."""
    rng = np.random.default_rng(seed)
    h, w = photo.shape[:2]
    out = []
    for _ in range(n):
        s = rng.uniform(0.6, 0.95)
        ch, cw = int(h * s), int(w * s)
        y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        crop = photo[y:y + ch, x:x + cw]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        crop = np.clip(crop.astype(np.float32) * rng.uniform(0.8, 1.2), 0, 255).astype(np.uint8)
        out.append(cv2.resize(np.ascontiguousarray(crop), (640, 480), interpolation=cv2.INTER_AREA))
    return out


@pytest.fixture(scope="module")
def taught():
    from cbcl_pr_ros.core import CBCLPRLearner
    from cbcl_pr_ros.features import make_backbone

    backbone = make_backbone("efficientnet_lite0")
    learner = CBCLPRLearner(backbone=backbone.name, feature_dim=backbone.feature_dim)
    photos = {label: getattr(skdata, name)()[:, :, :3] for label, name in TAUGHT.items()}
    for k, (label, photo) in enumerate(photos.items()):
        learner.teach(label, backbone.extract(_views(photo, 5, seed=k)))
    return backbone, learner, photos


def test_new_views_of_taught_objects_are_known_and_correct(taught) -> None:
    backbone, learner, photos = taught
    for k, (label, photo) in enumerate(photos.items()):
        for p in learner.predict(backbone.extract(_views(photo, 4, seed=100 + k))):
            assert p.known and p.label == label, (label, p)


def test_unrelated_images_are_unknown(taught) -> None:
    backbone, learner, _ = taught
    grey = np.full((480, 640, 3), 128, np.uint8)
    astronaut = skdata.astronaut()
    coins = np.repeat(skdata.coins()[:, :, None], 3, axis=2)
    for p in learner.predict(backbone.extract([grey, astronaut, coins])):
        assert not p.known and p.label == "", p
        assert p.distance > 1.5 * learner.distance_threshold_
