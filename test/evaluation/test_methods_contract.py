"""One contract, every method: learns separable classes, predicts only seen ids, grows with
increments, is deterministic under a seed, and rejects bad input with a clear error."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.evaluation.methods import METHODS, MethodContext, make_method

from .conftest import blob_features

FAST = MethodContext(few_shot=True, fast=True)
ALL = sorted(METHODS)
# methods that do not retain old classes by design (FT), or are trained for a few epochs here
FORGETS = {"ft"}


def _split(feats, n_test=10):
    train = {c: x[:-n_test] for c, x in feats.items()}
    test_x = np.vstack([x[-n_test:] for x in feats.values()])
    test_y = np.concatenate([[c] * n_test for c in feats])
    return train, test_x, test_y


@pytest.mark.parametrize("name", ALL)
def test_contract(name):
    feats = blob_features(n_classes=6, per_class=30, dim=16, seed=1)
    train, tx, ty = _split(feats)
    m = make_method(name, 0, FAST)
    with pytest.raises(RuntimeError):
        m.predict(tx)
    m.fit_increment({0: train[0], 1: train[1]})
    p = m.predict(tx[ty < 2])
    assert set(p.tolist()) <= {0, 1}
    m.fit_increment({c: train[c] for c in (2, 3)})
    m.fit_increment({c: train[c] for c in (4, 5)})
    assert m.classes_ == [0, 1, 2, 3, 4, 5]
    pred = m.predict(tx)
    assert pred.dtype == np.int64 and pred.shape == ty.shape
    acc = float(np.mean(pred == ty))
    if name in FORGETS:
        assert np.mean(pred[ty >= 4] == ty[ty >= 4]) > 0.8  # it learns the newest classes...
    else:
        assert acc > 0.8, f"{name} accuracy {acc:.2f} on well separated classes"
    assert m.memory_bytes() > 0
    assert m.n_clusters() >= 1


@pytest.mark.parametrize("name", ALL)
def test_deterministic_under_seed(name):
    feats = blob_features(n_classes=4, per_class=15, dim=8, seed=2, sep=2.0)
    train, tx, _ = _split(feats, 5)
    preds = []
    for _ in range(2):
        m = make_method(name, 7, FAST)
        m.fit_increment({0: train[0], 1: train[1]})
        m.fit_increment({2: train[2], 3: train[3]})
        preds.append(m.predict(tx))
    assert np.array_equal(preds[0], preds[1])


@pytest.mark.parametrize("name", ALL)
def test_bad_input_is_rejected_and_changes_nothing(name):
    feats = blob_features(n_classes=2, per_class=12, dim=8)
    m = make_method(name, 0, FAST)
    m.fit_increment(feats)
    before = m.predict(feats[0])
    with pytest.raises(ValueError, match="dimensions"):
        m.fit_increment({5: np.zeros((3, 9), np.float32)})
    bad = feats[0].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.fit_increment({5: bad})
    with pytest.raises(ValueError):
        m.fit_increment({})
    with pytest.raises(TypeError):
        m.fit_increment({"x": feats[0]})
    with pytest.raises(ValueError):
        m.predict(np.zeros((2, 3)))
    assert m.classes_ == [0, 1]
    assert np.array_equal(m.predict(feats[0]), before)


def test_unknown_method_name():
    with pytest.raises(ValueError, match="unknown method"):
        make_method("icarl", 0)


def test_flb_forgets_nothing_because_it_keeps_all_data():
    feats = blob_features(n_classes=4, per_class=20, dim=8, seed=3)
    m = make_method("flb", 0, FAST)
    m.fit_increment({0: feats[0], 1: feats[1]})
    mem1 = m.memory_bytes()
    m.fit_increment({2: feats[2], 3: feats[3]})
    assert m.memory_bytes() > 1.9 * mem1  # it stores every vector seen


def test_budget_caps_clusters():
    feats = blob_features(n_classes=4, per_class=30, dim=8, seed=4, sep=3.0)
    ctx = MethodContext(few_shot=False, fast=True, d_scale=0.3, max_clusters=8)
    for red in ("kmeans", "remove"):
        m = make_method("cbcl-pr-diag", 0, MethodContext(**{**ctx.__dict__, "reduction": red}))
        m.fit_increment({0: feats[0], 1: feats[1]})
        m.fit_increment({2: feats[2], 3: feats[3]})
        assert m.n_clusters() <= 8


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("ways", [1, 2])
def test_one_shot(name, ways):
    """One vector per class (the first increment included) must neither crash nor predict unseen ids;
    on well separated classes every method except FT gets most of them right."""
    feats = blob_features(n_classes=6, per_class=11, dim=16, seed=6)
    train, tx, ty = _split(feats)
    m = make_method(name, 0, FAST)
    for start in range(0, 6, ways):
        inc = {c: train[c][:1] for c in range(start, start + ways)}
        m.fit_increment(inc)
        seen = ty < start + ways
        p = m.predict(tx[seen])
        assert set(p.tolist()) <= set(range(start + ways))
    acc = float(np.mean(m.predict(tx) == ty))
    if name not in FORGETS | {"flb"}:  # FLB: 3 epochs x 1 step of lr 0.001 on 6 vectors learn nothing
        assert acc > 0.6, f"{name} one-shot accuracy {acc:.2f} on well separated classes"


@pytest.mark.parametrize("name", ["fecam", "slda", "lda", "logreg", "cbcl-pr-default"])
def test_more_shots_of_a_known_class(name):
    feats = blob_features(n_classes=3, per_class=12, dim=8, seed=7)
    m = make_method(name, 0, FAST)
    m.fit_increment({0: feats[0][:1], 1: feats[1][:1]})
    m.fit_increment({0: feats[0][1:6], 2: feats[2][:5]})
    assert m.classes_ == [0, 1, 2]
    assert np.mean(m.predict(np.vstack([feats[c][6:] for c in range(3)])) == np.repeat([0, 1, 2], 6)) > 0.8
