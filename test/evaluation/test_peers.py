"""The peers are what their papers define: SLDA's per-sample recursion, FeCAM's transform and
normalisation, and the one-shot fallbacks."""
from __future__ import annotations

import numpy as np

from cbcl_pr_ros.evaluation.methods import FeCAM, PooledLDA, StreamingLDA
from cbcl_pr_ros.evaluation.methods.peers import tukey

from .conftest import blob_features


def _slda_by_the_paper(stream, d):
    """Hayes & Kanan's update, one vector at a time (class means start at zero)."""
    mu, cnt, sigma, t = {}, {}, np.zeros((d, d)), 0
    for x, y in stream:
        m = mu.get(y, np.zeros(d))
        v = x - m
        sigma = (t * sigma + t / (t + 1) * np.outer(v, v)) / (t + 1)
        mu[y] = m + v / (cnt.get(y, 0) + 1)
        cnt[y] = cnt.get(y, 0) + 1
        t += 1
    return mu, sigma


def test_slda_equals_the_per_sample_recursion():
    feats = {c: x.astype(np.float64) for c, x in blob_features(n_classes=4, per_class=7, dim=5, seed=1).items()}
    incs = [{0: feats[0][:3], 1: feats[1]}, {2: feats[2], 0: feats[0][3:]}, {3: feats[3][:1]}]
    m = StreamingLDA()
    stream = []
    for inc in incs:
        m.fit_increment(inc)
        stream += [(x, c) for c, xs in inc.items() for x in xs]
    mu, sigma = _slda_by_the_paper(stream, 5)
    assert np.allclose(m.covariance_, sigma)
    for c in mu:
        assert np.allclose(m.means_[c], mu[c])
    lam = np.linalg.inv((1 - 1e-4) * sigma + 1e-4 * np.eye(5))
    test = np.vstack(list(feats.values()))
    ids = list(mu)
    ref = np.array(ids)[np.argmax(np.stack([test @ lam @ mu[c] - 0.5 * mu[c] @ lam @ mu[c] for c in ids], 1), 1)]
    assert np.array_equal(m.predict(test), ref)


def test_fecam_one_shot_is_nearest_normalised_mean():
    """With one shot per class no covariance exists; FeCAM falls back to its Euclidean distance between
    L2-normalised Tukey-transformed vectors (no LinAlgError)."""
    feats = {c: np.abs(x) for c, x in blob_features(n_classes=5, per_class=6, dim=12, seed=2).items()}
    m = FeCAM()
    m.fit_increment({c: feats[c][:1] for c in (0, 1, 2)})
    m.fit_increment({c: feats[c][:1] for c in (3, 4)})
    test = np.vstack([feats[c][1:] for c in range(5)])

    def norm(a):
        return a / np.linalg.norm(a, axis=-1, keepdims=True)

    protos = norm(np.sqrt(np.vstack([feats[c][0] for c in range(5)])))
    ref = np.argmin(((norm(np.sqrt(test))[:, None] - protos[None]) ** 2).sum(-1), 1)
    assert np.array_equal(m.predict(test), ref)


def test_fecam_distance_is_the_dense_definition():
    """Shrunk, normalised covariance inverted densely, as the paper writes it, gives the same distances."""
    feats = {c: np.abs(x) for c, x in blob_features(n_classes=3, per_class=8, dim=6, seed=3).items()}
    m = FeCAM(power=0.5)
    m.fit_increment({0: feats[0][:5], 1: feats[1][:1]})
    m.fit_increment({2: feats[2], 0: feats[0][5:]})  # more shots of class 0 pool with the earlier ones
    test = np.vstack(list(feats.values()))

    def norm(a):
        return a / np.linalg.norm(a, axis=-1, keepdims=True)

    ref = []
    for c, shots in ((0, feats[0]), (1, feats[1][:1]), (2, feats[2])):
        z = tukey(shots.astype(np.float64), 0.5)
        dev = norm(np.sqrt(test)) - norm(z.mean(0))
        if len(z) < 2:
            ref.append((dev ** 2).sum(1))
            continue
        s = np.cov(z, rowvar=False)
        v1, v2 = np.mean(np.diag(s)), (s.sum() - np.trace(s)) / 30
        shrunk = s + v1 * np.eye(6) + v2 * (1 - np.eye(6))
        corr = shrunk / np.sqrt(np.outer(np.diag(shrunk), np.diag(shrunk)))
        ref.append(np.einsum("ij,jk,ik->i", dev, np.linalg.inv(corr), dev))
    assert np.allclose(m.distances(test), np.stack(ref, 1), rtol=1e-3, atol=1e-4)


def test_pooled_lda_one_shot_is_nearest_class_mean():
    feats = blob_features(n_classes=4, per_class=5, dim=8, seed=4)
    m = PooledLDA()
    m.fit_increment({c: feats[c][:1] for c in range(4)})
    test = np.vstack([feats[c][1:] for c in range(4)])
    protos = np.vstack([feats[c][0] for c in range(4)])
    ref = np.argmin(((test[:, None] - protos[None]) ** 2).sum(-1), 1)
    assert np.array_equal(m.predict(test), ref)


def test_pooled_lda_is_ledoit_wolf_lda():
    from sklearn.covariance import LedoitWolf

    feats = blob_features(n_classes=3, per_class=6, dim=10, seed=5, sep=1.0)
    m = PooledLDA()
    m.fit_increment(feats)
    x = np.vstack(list(feats.values())).astype(np.float64)
    y = np.repeat([0, 1, 2], 6)
    mu = np.stack([x[y == c].mean(0) for c in range(3)])
    cov = LedoitWolf(assume_centered=True).fit(x - mu[y]).covariance_
    w = np.linalg.solve(cov, mu.T)
    test = x + 0.5
    ref = np.argmax(test @ w - 0.5 * np.einsum("ij,ji->i", mu, w), 1)
    assert np.allclose(m._w, w, rtol=1e-4, atol=1e-5)
    assert np.array_equal(m.predict(test.astype(np.float32)), ref)
