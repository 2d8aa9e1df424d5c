"""Issue 15, outcome 5: each class stored in float16 when the learner finds that faithful, below its
raw shots' bytes, through teach/forget/rename/reduction and the memory file (format 3)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save as st_save

from cbcl_pr_ros.core import CBCLPRLearner, CorruptMemoryFileError, LearnerConfig, persistence
from cbcl_pr_ros.core.clustering import ClassClusters

from .conftest import blobs

D = 48


def _features(rng, n_classes=4, n=10, scale=1.0):
    """Non-negative, heavy-ish features (like pooled CNN outputs) in ``n_classes`` clusters."""
    train, means = blobs(rng, n_classes, n, D, sep=4.0)
    return {c: np.abs(x) * scale for c, x in train.items()}, means


def _learner(precision="auto", **kw) -> CBCLPRLearner:
    return CBCLPRLearner(LearnerConfig(seed=0, memory_precision=precision, **kw), "bb", D)


def test_learner_chooses_float16_and_stays_below_the_raw_shots(rng):
    train, _ = _features(rng)
    lrn = _learner()
    lrn.teach_increment(train)
    for info in lrn.class_info():
        assert info.storage == "float16"
        assert info.memory_bytes < info.shots * D * 4  # raw shots as float32
        assert info.memory_bytes <= 0.55 * info.shots * D * 4 + 8 * info.clusters
    exact = _learner("float32")
    exact.teach_increment(train)
    for info in exact.class_info():
        assert info.storage == "float32" and info.memory_bytes >= info.shots * D * 4


def test_unfaithful_classes_stay_float32():
    """float16 cannot hold values beyond 65504 or keep relative precision below ~6e-5 (subnormal)."""
    x = np.random.default_rng(0).uniform(1.0, 2.0, (6, D))
    big = ClassClusters.empty(D, "full").extend(x * 1e6, 1e12)
    tiny = ClassClusters.empty(D, "full").extend(x * 1e-7, 1e12)
    fine = ClassClusters.empty(D, "full").extend(x, 1e12)
    assert big.compacted().storage == "float32" and tiny.compacted().storage == "float32"
    assert fine.compacted().storage == "float16"
    lrn = _learner(transform="none", distance_threshold=1e12)
    lrn.teach_increment({"big": x * 1e6, "fine": x})
    assert {i.name: i.storage for i in lrn.class_info()} == {"big": "float32", "fine": "float16"}


def test_accuracy_parity_on_a_synthetic_problem():
    rng = np.random.default_rng(5)
    means = rng.normal(0, 1, (6, D)) * 1.2
    train = {f"c{i}": np.abs(means[i] + rng.normal(0, 1, (8, D))) for i in range(6)}
    test_y = np.repeat(np.arange(6), 200)
    test_x = np.abs(means[test_y] + rng.normal(0, 1, (len(test_y), D)))
    preds = {}
    for precision in ("auto", "float32"):
        lrn = _learner(precision)
        lrn.teach_increment({c: train[c] for c in ("c0", "c1", "c2")})
        lrn.teach_increment({c: train[c] for c in ("c3", "c4", "c5")})
        scores = lrn.predict_scores(test_x)
        preds[precision] = np.array([int(lrn.classes_[k][1:]) for k in scores.argmax(1)])
    acc = {p: float((v == test_y).mean()) for p, v in preds.items()}
    assert 0.5 < acc["float32"] < 1.0  # a problem with errors to make
    assert abs(acc["auto"] - acc["float32"]) <= 0.005
    assert (preds["auto"] == preds["float32"]).mean() >= 0.99


def test_storage_survives_teach_forget_rename_and_reduction(rng):
    train, _ = _features(rng, 5, 12)
    lrn = _learner(max_clusters=6, distance_threshold=0.08)  # small D: many clusters, then reduced
    lrn.teach_increment({c: train[c] for c in ("c0", "c1", "c2")})
    lrn.teach_increment({c: train[c] for c in ("c3", "c4")})
    assert lrn.n_clusters_ <= 6 and max(i.clusters for i in lrn.class_info()) > 1
    lrn.teach("c0", train["c1"][:4])  # more shots of a known class
    lrn.forget("c2")
    lrn.rename("c3", "renamed")
    infos = lrn.class_info()
    assert [i.name for i in infos] == ["c0", "c1", "renamed", "c4"]
    assert all(i.storage == "float16" for i in infos)
    ref = _learner("float32", max_clusters=6, distance_threshold=0.08)
    ref.teach_increment({c: train[c] for c in ("c0", "c1", "c2")})
    ref.teach_increment({c: train[c] for c in ("c3", "c4")})
    ref.teach("c0", train["c1"][:4])
    for c in ("c0", "c1", "c4"):  # same clusters, same statistics up to float16 rounding
        a, b = lrn.memory[c], ref.memory[c]
        assert a.counts.tolist() == b.counts.tolist()
        np.testing.assert_allclose(a.means.astype(float), b.means, rtol=0, atol=2e-3 * np.abs(b.means).max())


def test_file_round_trip_keeps_each_class_dtype(rng, tmp_path):
    train, _ = _features(rng, 3)
    lrn = _learner(transform="none", distance_threshold=1e12)
    lrn.teach_increment({"c0": train["c0"], "big": train["c1"] * 1e6})
    lrn.teach("c2", train["c2"])
    path = lrn.save(tmp_path / "m.safetensors")
    assert persistence.read_metadata(path)["format_version"] == persistence.FORMAT_VERSION == 6
    back = CBCLPRLearner.load(path)
    assert [(i.name, i.storage, i.memory_bytes) for i in back.class_info()] == \
        [(i.name, i.storage, i.memory_bytes) for i in lrn.class_info()]
    for c, cc in lrn.memory.items():
        for a, b in zip((cc.means, *cc.factors), (back.memory[c].means, *back.memory[c].factors)):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    x = np.abs(rng.normal(0, 2, (7, D)))
    np.testing.assert_array_equal(back.predict_scores(x), lrn.predict_scores(x))


def _edit(blob: bytes, edit) -> bytes:
    tensors, meta = persistence._parse(blob, "x")
    tensors = {k: v.copy() for k, v in tensors.items()}
    edit(tensors, meta)
    meta["sha256"] = persistence._checksum(tensors, meta if meta["format_version"] >= 2 else None)
    return st_save(tensors, metadata={"cbcl_pr": json.dumps(meta)})


def test_format_2_file_loads_unchanged(rng):
    """A file of the previous format (everything float32, no storage tensors) reads as it was."""
    train, _ = _features(rng, 3)
    lrn = _learner("float32")
    lrn.teach_increment(train)
    blob = persistence.state_to_bytes(lrn.to_state())

    def to_v2(t, m):
        for k in ("storage", "means.f16", "factors.f16", "view_spread", "negatives"):
            del t[k]
        del m["view_spread_images"], m["negatives_offered"]
        m["format_version"] = 2
        del m["config"]["memory_precision"]

    old = _edit(blob, to_v2)
    state = persistence.state_from_bytes(old, "old")
    back = CBCLPRLearner.from_state(state)
    assert all(i.storage == "float32" for i in back.class_info())
    x = np.abs(rng.normal(0, 2, (5, D)))
    np.testing.assert_array_equal(back.predict_scores(x), lrn.predict_scores(x))
    back.teach("new", train["c0"] + 1.0)  # classes taught after the load follow the (default) policy
    assert back.class_info()[-1].storage == "float16" and back.class_info()[0].storage == "float32"


@pytest.mark.parametrize("edit, why", [
    (lambda t, m: t["means.f16"].__setitem__((0, 0), np.float16(np.nan)), "NaN"),
    (lambda t, m: t.__setitem__("view_spread", np.zeros((D, 65), np.float16)), "view_spread"),
    (lambda t, m: m.__setitem__("view_spread_images", -1), "view_spread_images"),
    (lambda t, m: t.__setitem__("view_spread", np.ones((D, 2), np.float16)), "0 images must be empty"),
    (lambda t, m: t.__setitem__("view_spread", np.full((D, 1), np.nan, np.float16)), "NaN"),
    (lambda t, m: t.__setitem__("storage", np.full_like(t["storage"], 2)), "storage must be"),
    (lambda t, m: t.__setitem__("storage", np.zeros_like(t["storage"])), "means has shape"),
    (lambda t, m: t.__setitem__("means.f16", t["means.f16"].astype(np.float32)), "dtype"),
    (lambda t, m: t.pop("factors.f16"), "do not match the layout"),
])
def test_corrupt_float16_files_are_refused(rng, edit, why):
    train, _ = _features(rng, 2)
    lrn = _learner()
    lrn.teach_increment(train)
    blob = persistence.state_to_bytes(lrn.to_state())
    with pytest.raises(CorruptMemoryFileError, match=why):
        persistence.state_from_bytes(_edit(blob, edit), "m")
    flipped = bytearray(blob)
    flipped[-3] ^= 0x10
    with pytest.raises(CorruptMemoryFileError, match="checksum"):
        persistence.state_from_bytes(bytes(flipped), "m")
