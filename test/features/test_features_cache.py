"""The data-set feature cache: hits return the same features without running the backbone."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from cbcl_pr_ros.features import FeatureCache, make_backbone


class CountingBackbone:
    """Wraps a real backbone and counts forward passes."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0
        for attr in ("name", "feature_dim", "preprocessing_id", "weights_sha256", "runtime", "batch_size"):
            setattr(self, attr, getattr(inner, attr))

    def extract(self, images):
        self.calls += 1
        return self.inner.extract(images)


@pytest.fixture(scope="module")
def resnet(resnet18_weights):
    return make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, device="cpu", batch_size=4)


def _imgs(n, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (40, 50, 3), dtype=np.uint8) for _ in range(n)]


def test_array_cache_hit_is_identical_and_skips_the_backbone(resnet, tmp_path):
    bb = CountingBackbone(resnet)
    cache = FeatureCache(tmp_path)
    imgs = _imgs(3, 0)
    first = cache.features_for_arrays(bb, imgs)
    assert (bb.calls, cache.misses, cache.hits) == (1, 1, 0)
    second = FeatureCache(tmp_path).features_for_arrays(bb, imgs)  # a new process would do this
    assert bb.calls == 1
    np.testing.assert_array_equal(first, second)
    assert first.shape == (3, 512)
    other = cache.features_for_arrays(bb, _imgs(3, 1))
    assert bb.calls == 2 and not np.array_equal(other, first)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_key_depends_on_backbone_preprocessing_and_weights(resnet):
    bb = CountingBackbone(resnet)
    k = FeatureCache.key(bb, "data")
    assert FeatureCache.key(bb, "other data") != k
    bb.weights_sha256 = "0" * 64
    assert FeatureCache.key(bb, "data") != k
    bb.weights_sha256, bb.preprocessing_id = resnet.weights_sha256, "something-else"
    assert FeatureCache.key(bb, "data") != k


def test_file_cache_notices_changed_files(resnet, tmp_path):
    bb = CountingBackbone(resnet)
    paths = []
    for i, img in enumerate(_imgs(5, 2)):
        p = tmp_path / f"{i}.png"
        cv2.imwrite(str(p), img)
        paths.append(p)
    cache = FeatureCache(tmp_path / "cache")
    a = cache.features_for_files(bb, paths)
    assert a.shape == (5, 512) and bb.calls == 2  # batch_size 4: two chunks
    b = cache.features_for_files(bb, paths)
    assert bb.calls == 2 and cache.hits == 1
    np.testing.assert_array_equal(a, b)
    cv2.imwrite(str(paths[0]), _imgs(1, 9)[0])
    st = os.stat(paths[0])
    os.utime(paths[0], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    c = cache.features_for_files(bb, paths)
    assert bb.calls == 4 and not np.array_equal(a[0], c[0])
    np.testing.assert_allclose(a[1:], c[1:], atol=1e-5)
    with pytest.raises(FileNotFoundError):
        cache.features_for_files(bb, [tmp_path / "gone.png"])


def test_corrupt_cache_entry_is_recomputed(resnet, tmp_path, caplog):
    bb = CountingBackbone(resnet)
    cache = FeatureCache(tmp_path)
    imgs = _imgs(2, 3)
    good = cache.features_for_arrays(bb, imgs)
    (npy,) = tmp_path.glob("*.npy")
    npy.write_bytes(b"broken")
    again = cache.features_for_arrays(bb, imgs)
    assert bb.calls == 2 and "unreadable" in caplog.text
    np.testing.assert_allclose(again, good, atol=1e-6)


def test_save_rejects_bad_features(tmp_path):
    with pytest.raises(ValueError, match="2-D"):
        FeatureCache(tmp_path).save("k", np.zeros(3))
