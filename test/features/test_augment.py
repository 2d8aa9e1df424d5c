"""Teach-time views (features/augment.py): seeded, same size and type, really different, bad input refused."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.features.augment import ViewJitter, teach_views, with_teach_views


def _image(h: int = 40, w: int = 60) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_views_are_seeded_same_size_and_differ_from_the_image() -> None:
    img = _image()
    a, b = teach_views(img, 4, seed=3), teach_views(img, 4, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert all(v.shape == img.shape and v.dtype == np.uint8 for v in a)
    assert all(not np.array_equal(v, img) for v in a)
    assert not np.array_equal(teach_views(img, 1, seed=4)[0], a[0])
    # the first k views do not depend on how many are asked (the bench caches 8 and uses the first k)
    assert all(np.array_equal(x, y) for x, y in zip(teach_views(img, 2, seed=3), a[:2]))


def test_no_jitter_gives_the_image_back() -> None:
    img = _image()
    still = ViewJitter(min_area=1.0, max_aspect=1.0, flip=0.0, colour=0.0)
    assert all(np.array_equal(v, img) for v in teach_views(img, 3, seed=0, jitter=still))


def test_mirror_only_jitter_mirrors() -> None:
    img = _image()
    mirror = ViewJitter(min_area=1.0, max_aspect=1.0, flip=1.0, colour=0.0)
    assert np.array_equal(teach_views(img, 1, jitter=mirror)[0], img[:, ::-1])


def test_with_teach_views_keeps_the_images_first() -> None:
    imgs = [_image(), _image(20, 30)]
    out = with_teach_views(imgs, 3, seed=5)
    assert len(out) == 2 + 2 * 3 and out[0] is imgs[0] and out[1] is imgs[1]
    assert all(v.shape == imgs[1].shape for v in out[5:])
    assert np.array_equal(out[2], teach_views(imgs[0], 1, seed=5)[0])
    assert np.array_equal(out[5], teach_views(imgs[1], 1, seed=6)[0])
    assert with_teach_views(imgs, 0) == imgs


@pytest.mark.parametrize("bad", [np.zeros((8, 8), np.uint8), np.zeros((8, 8, 3), np.float32),
                                 np.zeros((0, 8, 3), np.uint8), np.zeros((8, 8, 4), np.uint8)])
def test_bad_images_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="uint8"):
        teach_views(bad, 2)


@pytest.mark.parametrize("n", [-1, 1.5, True])
def test_bad_counts_are_refused(n) -> None:
    with pytest.raises(ValueError, match="n must be"):
        teach_views(_image(), n)


@pytest.mark.parametrize("kw", [{"min_area": 0.0}, {"max_aspect": 0.5}, {"flip": 2.0}, {"colour": 1.0}])
def test_bad_jitter_is_refused(kw) -> None:
    with pytest.raises(ValueError):
        ViewJitter(**kw)


def test_recentred_views_keep_the_shot_mean_and_scale_the_spread() -> None:
    from cbcl_pr_ros.features.augment import recentre_views

    rng = np.random.default_rng(1)
    shots, views = rng.normal(size=(3, 5)), rng.normal(2.0, 1.0, size=(3, 4, 5))
    out = recentre_views(shots, views, 0.5).reshape(3, 4, 5)
    np.testing.assert_allclose(out.mean(1), shots, atol=1e-5)  # the views no longer move the mean
    np.testing.assert_allclose(out - shots[:, None], 0.5 * (views - views.mean(1, keepdims=True)), atol=1e-5)
    np.testing.assert_allclose(recentre_views(shots, views, 0.0), np.repeat(shots, 4, axis=0), atol=1e-6)
    with pytest.raises(ValueError, match="spread"):
        recentre_views(shots, views, 1.5)
    with pytest.raises(ValueError, match="views"):
        recentre_views(shots, views[:2], 0.5)


def test_teaching_vectors_follow_with_teach_views_order():
    from cbcl_pr_ros.features.augment import recentre_views, teaching_vectors

    rng = np.random.default_rng(1)
    feats = rng.normal(size=(3 * (1 + 2), 4)).astype(np.float32)  # 3 images, then 2 views of each
    shots, views = teaching_vectors(feats, 3, 2, 0.5)
    np.testing.assert_allclose(shots, feats[:3])
    assert views.shape == (3, 2, 4)  # one row of views per shot, for the learner's folds
    np.testing.assert_allclose(views.reshape(6, 4), recentre_views(feats[:3], feats[3:].reshape(3, 2, 4), 0.5))
    raw_shots, raw = teaching_vectors(feats, 3, 2, None)  # not recentred: the views as the backbone gave them
    np.testing.assert_allclose(raw, feats[3:].reshape(3, 2, 4))
    only, none = teaching_vectors(feats[:3], 3, 0, 0.5)
    np.testing.assert_allclose(only, feats[:3])
    assert none is None
    with pytest.raises(ValueError, match="vectors"):
        teaching_vectors(feats[:5], 3, 2, 0.5)
