"""Issue 24, outcome 1: merging two memories of the same backbone/transform/width into one, with each
class's provenance kept and saved (format 5)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save as st_save

from cbcl_pr_ros.core import CBCLPRLearner, CorruptMemoryFileError, LearnerConfig, persistence
from cbcl_pr_ros.core.merge import MergeError, merge_states, one_class_state
from cbcl_pr_ros.core.provenance import MAX_ENTRIES
from cbcl_pr_ros.core.view_spread import ViewSpread

from .conftest import blobs, fingerprint

D = 24


def _learner(robot: str = "", **kw) -> CBCLPRLearner:
    lrn = CBCLPRLearner(LearnerConfig(seed=0, **kw), "bb", D)
    lrn.set_robot_name(robot)
    return lrn


def _data(rng, n_classes=6, n=8):
    train, _ = blobs(rng, n_classes, n, D, sep=5.0)
    return {c: np.abs(x) for c, x in train.items()}


def _class_stats(cc):
    """Class-level count, mean and scatter (of all its shots) from its clusters."""
    n = cc.counts.astype(np.float64)
    mu = cc.means.astype(np.float64)
    mean = (n[:, None] * mu).sum(0) / n.sum()
    dev = mu - mean
    if cc.mode == "full":
        scatter = sum(cc.scatter(i) @ cc.scatter(i).T for i in range(cc.n_clusters)) + (n[:, None] * dev).T @ dev
    else:
        scatter = sum(cc.scatter(i) for i in range(cc.n_clusters)) + (n[:, None] * dev**2).sum(0)
    return int(n.sum()), mean, scatter


@pytest.mark.parametrize("covariance", ["full", "diagonal"])
def test_merge_of_disjoint_teaching_equals_one_learner_taught_both(rng, covariance):
    data = _data(rng)
    names = list(data)
    a, b, seq = (_learner(r, covariance=covariance, distance_threshold=0.3, memory_precision="float32")
                 for r in ("r1", "r2", "r3"))
    a.teach_increment({c: data[c] for c in names[:3]})
    b.teach_increment({c: data[c] for c in names[3:]})
    seq.teach_increment({c: data[c] for c in names[:3]})
    seq.teach_increment({c: data[c] for c in names[3:]})
    report = a.merge(b.to_state())
    assert report.added == tuple(names[3:]) and not report.pooled
    assert a.classes_ == seq.classes_
    for c in names:
        na, ma, sa = _class_stats(a.memory[c])
        ns, ms, ss = _class_stats(seq.memory[c])
        assert na == ns == len(data[c])
        np.testing.assert_allclose(ma, ms, rtol=0, atol=1e-6)
        np.testing.assert_allclose(sa, ss, rtol=1e-5, atol=1e-6)
    x = np.abs(rng.normal(0, 1, (20, D)))
    assert [p.label for p in a.predict(x)] == [p.label for p in seq.predict(x)]
    assert {c: p[0].robot for c, p in a.provenance_.items()} == {c: "r1" if c in names[:3] else "r2" for c in names}


@pytest.mark.parametrize("covariance", ["full", "diagonal"])
def test_class_taught_on_both_sides_pools_exactly(rng, covariance):
    x = np.abs(rng.normal(1, 0.5, (30, D)))
    a = _learner("r1", covariance=covariance, memory_precision="float32")
    b = _learner("r2", covariance=covariance, memory_precision="float32")
    a.teach("mug", x[:12])
    b.teach("mug", x[12:])
    report = a.merge(b.to_state())
    assert report.pooled == ("mug",)
    n, mean, scatter = _class_stats(a.memory["mug"])
    t = a.transform(x)
    assert n == 30
    np.testing.assert_allclose(mean, t.mean(0), atol=1e-6)
    full = (t - t.mean(0)).T @ (t - t.mean(0))
    np.testing.assert_allclose(scatter, full if covariance == "full" else np.diag(full), atol=1e-5)
    assert sorted(c.robot for c in a.provenance_["mug"]) == ["r1", "r2"]


def test_merging_the_same_teaching_twice_counts_nothing_twice_and_newer_copies_replace(rng):
    data = _data(rng, 2)
    a = _learner("r1")
    a.teach_increment(data)
    b = CBCLPRLearner.from_state(a.to_state())
    b.set_robot_name("r2")
    b.teach("c0", data["c0"][:3] + 0.01)  # b knows all of a's c0 and more
    before = a.memory["c0"].n_samples
    report = a.merge(b.to_state())
    assert report.replaced == ("c0",) and report.kept == ("c1",)
    assert a.memory["c0"].n_samples == before + 3
    fp = fingerprint(a)
    again = a.merge(b.to_state())
    assert again.unchanged and fingerprint(a) == fp


def test_partly_shared_teaching_is_refused_and_changes_nothing(rng):
    data = _data(rng, 1)
    a = _learner("r1")
    a.teach("c0", data["c0"])
    b = CBCLPRLearner.from_state(a.to_state())
    a.teach("c0", data["c0"][:2] + 0.05)
    b.teach("c0", data["c0"][:2] - 0.05)
    fp = fingerprint(a)
    with pytest.raises(MergeError, match="twice"):
        a.merge(b.to_state())
    assert fingerprint(a) == fp


@pytest.mark.parametrize("other, why", [
    (lambda: CBCLPRLearner(LearnerConfig(seed=0), "other_bb", D), "backbones"),
    (lambda: CBCLPRLearner(LearnerConfig(seed=0), "bb", D + 1), "widths"),
    (lambda: CBCLPRLearner(LearnerConfig(seed=0, transform="l2"), "bb", D), "transforms"),
    (lambda: CBCLPRLearner(LearnerConfig(seed=0, covariance="diagonal"), "bb", D), "covariance"),
])
def test_incompatible_memories_are_refused_with_the_reason(rng, other, why):
    a = _learner("r1")
    a.teach("mug", np.abs(rng.normal(1, 0.5, (5, D))))
    b = other()
    b.teach("cup", np.abs(rng.normal(2, 0.5, (5, b.feature_dim))))
    fp = fingerprint(a)
    with pytest.raises(MergeError, match=why):
        a.merge(b.to_state())
    assert fingerprint(a) == fp


def test_budget_is_applied_once_after_the_merge_and_too_many_classes_refused(rng):
    data = _data(rng, 4, 12)
    a = _learner("r1", max_clusters=6, distance_threshold=0.05)
    b = _learner("r2", max_clusters=6, distance_threshold=0.05)
    a.teach_increment({"c0": data["c0"], "c1": data["c1"]})
    b.teach_increment({"c2": data["c2"], "c3": data["c3"]})
    counts = {c: cc.n_samples for c, cc in (*a.memory.items(), *b.memory.items())}
    state, report = merge_states(a.to_state(), b.to_state())
    assert report.reduced and report.clusters_before > 6 and state.memory.n_clusters == report.clusters_after <= 6
    assert {c: cc.n_samples for c, cc in state.memory.items()} == counts  # reduction keeps every shot
    small = _learner("r3", max_clusters=3)
    small.teach_increment({"c0": data["c0"], "c1": data["c1"]})
    with pytest.raises(MergeError, match="K=3"):
        small.merge(b.to_state())


def test_overflowing_counts_are_refused(rng):
    a = _learner("r1", memory_precision="float32")
    a.teach("mug", np.abs(rng.normal(1, 0.5, (5, D))))
    b = _learner("r2", memory_precision="float32")
    b.teach("mug", np.abs(rng.normal(1, 0.5, (5, D))))
    state = b.to_state()
    cc = state.memory["mug"]
    huge = type(cc)(np.full_like(cc.counts, 2**62), cc.means, cc.mode, cc.factors, cc.diag)
    mem = type(state.memory)(D, "full", None, "kmeans", 0, {"mug": huge}, "float32")
    bad = persistence.LearnerState(state.backbone, D, state.config, mem, state.distance_threshold, 1, 1,
                                   provenance=state.provenance)
    with pytest.raises(MergeError, match="overflow"):
        a.merge(bad)


def test_view_spread_pools_image_weighted(rng):
    v1, v2 = rng.normal(0, 1, (3, 4, D)), rng.normal(0, 2, (5, 4, D))
    s1, s2 = ViewSpread.empty(D).with_views(v1), ViewSpread.empty(D).with_views(v2)
    both = s1.pooled(s2)
    assert both.images == 8
    want = (3 * s1.covariance() + 5 * s2.covariance()) / 8
    np.testing.assert_allclose(both.covariance(), want, atol=2e-2 * np.abs(want).max())


def test_provenance_is_saved_and_old_formats_still_load(rng, tmp_path):
    a = _learner("robot1")
    a.teach_increment(_data(rng, 2))
    blob = persistence.state_to_bytes(a.to_state())
    back = CBCLPRLearner.from_state(persistence.state_from_bytes(blob))
    assert back.provenance_ == a.provenance_

    def to_v4(t, m):
        del m["provenance"], m["negatives_offered"], t["negatives"]
        m["format_version"] = 4

    old = CBCLPRLearner.from_state(persistence.state_from_bytes(_edit(blob, to_v4)))
    assert all(len(p) == 1 and p[0].robot == "" for p in old.provenance_.values())
    again = CBCLPRLearner.from_state(persistence.state_from_bytes(_edit(blob, to_v4)))
    assert again.provenance_ == old.provenance_  # legacy ids are stable: merging twice adds nothing


def _edit(blob: bytes, edit) -> bytes:
    tensors, meta = persistence._parse(blob, "x")
    tensors = {k: v.copy() for k, v in tensors.items()}
    edit(tensors, meta)
    meta["sha256"] = persistence._checksum(tensors, meta)
    return st_save(tensors, metadata={"cbcl_pr": json.dumps(meta)})


def _entry(**kw):
    e = {"robot": "r", "time": 1.0, "shots": 100, "id": "0123456789abcdef"}
    e.update(kw)
    return e


@pytest.mark.parametrize("prov", [
    None, [], {"c0": [_entry()]}, "x",
    {"c0": [_entry()], "c1": [_entry(robot="a/b")]},
    {"c0": [_entry()], "c1": [_entry(time=float(2**40))]},
    {"c0": [_entry()], "c1": [_entry(shots=0)]},
    {"c0": [_entry()], "c1": [_entry(shots=True)]},
    {"c0": [_entry()], "c1": [_entry(id="../x")]},
    {"c0": [_entry()], "c1": [_entry(extra=1)]},
    {"c0": [_entry()], "c1": [_entry(shots=1)]},  # fewer shots than the class holds
    {"c0": [_entry()], "c1": [_entry(), _entry()]},  # repeated entry
    {"c0": [_entry()], "c1": [_entry(id=f"{i:016x}") for i in range(MAX_ENTRIES + 1)]},
])
def test_hostile_provenance_is_refused(rng, prov):
    a = _learner("r1")
    a.teach_increment(_data(rng, 2))
    blob = _edit(persistence.state_to_bytes(a.to_state()), lambda t, m: m.__setitem__("provenance", prov))
    with pytest.raises(CorruptMemoryFileError):
        persistence.state_from_bytes(blob)


def test_one_class_state_carries_one_class_and_no_shared_spread(rng):
    a = _learner("r1")
    views = np.abs(rng.normal(1, 0.5, (4, 3, D)))
    a.teach("mug", views[:, 0], views=views)
    a.teach("cup", np.abs(rng.normal(3, 0.5, (4, D))))
    one = one_class_state(a.to_state(), "mug")
    assert one.memory.classes == ("mug",) and one.view_spread.images == 0
    assert one.provenance == {"mug": a.provenance_["mug"]}
    b = _learner("r2")
    b.merge(persistence.state_from_bytes(persistence.state_to_bytes(one)))
    assert b.classes_ == ("mug",) and b.predict(views[:, 0])[0].label == "mug"


def test_a_class_renamed_here_is_not_added_back_under_its_old_name(rng):
    data = _data(rng, 2)
    a = _learner("r1")
    a.teach_increment(data)
    old = a.to_state()
    a.rename("c0", "cup")
    report = a.merge(old)
    assert report.unchanged and report.kept == ("c0", "c1") and a.classes_ == ("cup", "c1")


@pytest.mark.parametrize("mode", ["full", "diagonal"])
def test_bounded_class_hits_the_budget_and_keeps_each_clusters_mean_and_covariance(mode):
    from cbcl_pr_ros.core.clustering import ClassClusters
    from cbcl_pr_ros.core.merge import bounded_class

    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(c, 0.2, (n, D)) for c, n in ((0, 40), (3, 25), (6, 1), (9, 14))])
    cc = ClassClusters.empty(D, mode).extend(x, 2.0)
    assert cc.n_clusters == 4 and cc.n_samples == 80
    assert bounded_class(cc, 80, None) is cc  # within: untouched
    small = bounded_class(cc, 20, None)
    assert small.n_samples == 20 and small.n_clusters == 4 and small.counts.min() >= 1
    np.testing.assert_allclose(small.means, cc.means, atol=1e-6)
    for i in range(4):
        if cc.counts[i] > 1 and small.counts[i] > 1:  # covariance = scatter / (n - 1): per-shot scatter kept
            np.testing.assert_allclose(small.scatter(i) if mode == "diagonal" else small.scatter(i) @ small.scatter(i).T,
                                       (cc.scatter(i) if mode == "diagonal" else cc.scatter(i) @ cc.scatter(i).T)
                                       * small.counts[i] / cc.counts[i], rtol=1e-4, atol=1e-6)
    assert bounded_class(cc, 2, None).n_samples == 2  # fewer shots than clusters: the heaviest clusters
    tight = bounded_class(cc, 80, 0.05)
    for i in range(4):
        s = tight.scatter(i)
        assert float((s * s).sum() if mode == "full" else s.sum()) <= tight.counts[i] * 0.05 ** 2 * 1.001
