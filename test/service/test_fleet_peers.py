"""A peer changes only the classes it names, and what any merge writes loads again.

Each hostile case of docs/security.md "Fleet peers" is here: memory-wide fields from a peer
(temperature weight 1e12, temperature 1e6, a wide view spread over 2^62 images, increments at the
limit), a class counting 2^38 shots or a huge spread, a peer that fills the memory, a flood from one
name, merges that used to drop the negatives, and a crafted MergeMemory file; each is followed by a
restart that must load every class taught with success.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, state_from_bytes, state_to_bytes
from cbcl_pr_ros.core.merge import PEER_MIN_SHOTS, one_class_state
from cbcl_pr_ros.core.persistence import MAX_COUNTER, MemoryFileError, checked_bytes
from cbcl_pr_ros.core.provenance import new_contribution
from cbcl_pr_ros.core.view_spread import MAX_IMAGES, ViewSpread
from cbcl_pr_ros.service.controller import LearnerController
from cbcl_pr_ros.service.fleet import LEARNED, ClassUpdate, FleetMember, FleetSettings
from cbcl_pr_ros.service.memory_files import MemoryStore

D = 12


def _controller(tmp_path, sub: str = "r1", k: int | None = None, **cfg) -> LearnerController:
    store = MemoryStore(str(tmp_path / sub), "memory.safetensors")
    return LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0, max_clusters=k, **cfg), "synthetic", d),
                             "synthetic", D, store)


def _shots(centre: float, n: int = 6, seed: int = 0) -> np.ndarray:
    """``n`` shots of the object at ``centre``: a direction of its own (the features are normalised)."""
    mean = np.abs(np.random.default_rng(int(centre * 100)).normal(0, 1, D)) * 2
    return np.abs(mean + np.random.default_rng(seed).normal(0, 0.05, (n, D))).astype(np.float32)


def _member(c: LearnerController, robot: str = "robot1", sent: list | None = None, **kw) -> FleetMember:
    m = FleetMember(c, FleetSettings("home", robot, **kw), (sent if sent is not None else []).append,
                    clock=lambda: 0.0)
    c.on_change = m.on_change
    return m


def _peer_update(state, name: str, robot: str = "robot3") -> ClassUpdate:
    return ClassUpdate("home", robot, 1, LEARNED, name, "", tuple(sorted(x.id for x in state.provenance[name])),
                       state_to_bytes(state))


def _peer_class(name: str, centre: float, robot: str = "robot3", seed: int = 5, **edit):
    """A one-class memory file of a peer, with fields edited (``learner_state``, ``view_spread``...)."""
    peer = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", D)
    peer.set_robot_name(robot)
    peer.teach(name, _shots(centre, seed=seed))
    return dataclasses.replace(one_class_state(peer.to_state(), name), **edit)


def _wide() -> dict:
    return {"mug": 1.0, "bottle": 3.0, "cup": 5.0}


def _restarted(tmp_path, sub: str = "r1", **kw) -> LearnerController:
    c = _controller(tmp_path, sub, **kw)
    assert c.load_at_startup(move_aside=True) and not c.moved_aside_
    return c


def _named(c: LearnerController) -> dict:
    """How each of this robot's classes is named now: a view of it (the mean of a fresh set of shots)."""
    return {name: c.classify(_shots(centre, 6, seed=11).mean(axis=0, keepdims=True)).predictions[0]
            for name, centre in _wide().items() if name in c.classes}


@pytest.fixture
def robot(tmp_path):
    c = _controller(tmp_path)
    m = _member(c)
    for i, (name, centre) in enumerate(_wide().items()):
        assert c.teach(name, _shots(centre, seed=i)).success
    return c, m


def _memory_wide(c: LearnerController) -> tuple:
    lrn = c.learner_
    return (lrn.temperature_, lrn.temperature_weight_, lrn.view_spread_.images, lrn.increments_,
            lrn.distance_threshold_, lrn.view_spread_.factor.tobytes())


def test_memory_wide_fields_never_come_from_a_peer_and_the_memory_loads_after(tmp_path, robot):
    c, m = robot
    before, named = _memory_wide(c), _named(c)
    assert all(p.label == name and p.known for name, p in named.items()), named
    spread = ViewSpread(np.full((D, 64), 6e4, np.float32), MAX_IMAGES)
    hostile = _peer_class("evil", 9.0, learner_state={"distance_prior": 1e6, "temperature": 1e6,
                                                      "temperature_weight": 1e12},
                          view_spread=spread, increments=MAX_COUNTER, distance_threshold=1e15)
    r = m.receive(_peer_update(hostile, "evil"))
    assert r.applied, r.message
    assert _memory_wide(c) == before  # temperature, its weight, spread, increments, D: all this robot's
    after = _named(c)
    for name, p in named.items():  # the classes the peer did not name are named as before, as confidently
        assert after[name].label == name and after[name].confidence == pytest.approx(p.confidence, abs=0.05)
    assert c.teach("own_after", _shots(7.0, seed=9)).success
    again = _restarted(tmp_path)
    assert sorted(again.classes) == sorted([*_wide(), "evil", "own_after"])


def test_a_class_of_2_to_the_38_shots_or_a_huge_spread_is_bounded(tmp_path, robot):
    c, m = robot
    named = _named(c)
    base = _peer_class("cup", 5.2)
    cc = base.memory["cup"]
    for name, grown in (("cup", type(cc)(np.full_like(cc.counts, 2**38 // len(cc.counts)), cc.means, cc.mode,
                                         cc.factors, cc.diag)),
                        ("plate", type(cc)(cc.counts, cc.means + 7.0, cc.mode, tuple(f * 1e4 for f in cc.factors),
                                           cc.diag))):
        mem = type(base.memory)(D, cc.mode, None, "kmeans", 0, {name: grown}, base.memory.precision)
        prov = {name: (new_contribution("robot3", 2**38 if name == "cup" else int(cc.n_samples)),)}
        r = m.receive(_peer_update(dataclasses.replace(base, memory=mem, provenance=prov), name))
        assert r.applied, r.message
    own_cup = 6  # this robot taught cup with 6 shots: the peer adds at most max(own, PEER_MIN_SHOTS)
    assert c.learner_.memory["cup"].n_samples <= own_cup + max(own_cup, PEER_MIN_SHOTS)
    assert c.learner_.memory["plate"].n_samples <= PEER_MIN_SHOTS
    d = c.learner_.distance_threshold_
    plate = c.learner_.memory["plate"]
    for i in range(plate.n_clusters):  # each cluster's RMS radius within twice this robot's D
        assert float(np.trace(plate.covariance(i))) * (plate.counts[i] - 1) / plate.counts[i] <= (2 * d) ** 2 * 1.01
    after = _named(c)
    assert all(after[n].label == n and after[n].known for n in ("mug", "bottle")), after
    assert all(abs(after[n].confidence - named[n].confidence) < 0.25 for n in ("mug", "bottle"))
    assert m.flush()  # as at deactivate or cleanup: peers' changes wait for the next save
    assert sorted(_restarted(tmp_path).classes) == sorted([*_wide(), "plate"])


def test_a_peer_cannot_speak_for_this_robot(robot):
    c, m = robot
    forged = _peer_class("mug", 1.0, robot="robot1")  # teaching in this robot's name it never had
    before = c.learner_.memory["mug"].n_samples
    r = m.receive(_peer_update(forged, "mug"))
    assert not r.applied and "speak for it" in r.message
    assert c.learner_.memory["mug"].n_samples == before


def test_a_filling_peer_leaves_room_for_this_robots_own_teaching(tmp_path):
    c = _controller(tmp_path, k=8)
    m = _member(c)
    assert c.teach("mug", _shots(1.0)).success
    took = [m.receive(_peer_update(_peer_class(f"p{i}", 10.0 + 2 * i, seed=i), f"p{i}")).applied for i in range(8)]
    assert sum(took) == 4, took  # half of K for classes known from peers alone
    refused = m.receive(_peer_update(_peer_class("p9", 40.0), "p9"))
    assert not refused.applied and "own teaching keeps room" in refused.message
    for i in range(3):  # this robot's own teaching fills the rest of K
        out = c.teach(f"own{i}", _shots(60.0 + 2 * i, seed=i))
        assert out.success, out.message
    assert len(c.classes) == 8


def test_a_flood_from_one_name_does_not_starve_an_honest_peer(robot):
    c, _ = robot
    m = _member(c, rate_hz=1.0, burst=5)
    flood = _peer_update(_peer_class("junk", 20.0, robot="mallory"), "junk", robot="mallory")
    results = [m.receive(flood) for _ in range(200)]
    assert sum(r.flood for r in results) >= 190
    honest = m.receive(_peer_update(_peer_class("plate", 8.0, robot="robot2"), "plate", robot="robot2"))
    assert honest.applied and "plate" in c.classes, honest.message


def test_fleet_merges_and_merge_memory_keep_the_negatives(tmp_path, robot):
    c, m = robot
    c.learner_.add_negatives(_shots(30.0, n=24, seed=3))
    held = c.learner_.negatives_.vectors.copy()
    assert len(held) == 24
    assert m.receive(_peer_update(_peer_class("plate", 8.0), "plate")).applied
    assert np.array_equal(c.learner_.negatives_.vectors, held)
    other = _controller(tmp_path, "r1", k=None)
    other.learner_.set_robot_name("robot4")
    other.teach("bowl", _shots(12.0, seed=8))
    other.save("robot4.safetensors")
    out = c.merge("robot4.safetensors")
    assert out.success and "bowl" in c.classes, out.message
    assert np.array_equal(c.learner_.negatives_.vectors, held)
    assert np.array_equal(_restarted(tmp_path).learner_.negatives_.vectors, held)


def test_a_crafted_merge_file_at_the_limits_leaves_a_loadable_memory(tmp_path, robot):
    c, _ = robot
    assert c.learner_.temperature_weight_ > 0  # taught with held-out shots: pooling adds to it
    crafted = _peer_class("evil", 9.0, robot="robot5", increments=MAX_COUNTER,
                          learner_state={"distance_prior": 1.0, "temperature": 2.0, "temperature_weight": 1e12},
                          view_spread=ViewSpread(np.ones((D, 2), np.float32), MAX_IMAGES))
    (tmp_path / "r1" / "crafted.safetensors").write_bytes(state_to_bytes(crafted))
    out = c.merge("crafted.safetensors")
    assert out.success, out.message
    assert c.teach("own_after", _shots(7.0, seed=9)).success  # counters saturate: teaching goes on
    again = _restarted(tmp_path)
    assert sorted(again.classes) == sorted([*_wide(), "evil", "own_after"])
    assert again.learner_.temperature_weight_ <= 1e12 and again.learner_.increments_ <= MAX_COUNTER


def test_a_state_load_would_refuse_is_never_written_and_the_change_is_refused(tmp_path, robot):
    c, _ = robot
    classes, version = list(c.classes), c.model_version
    c.learner_.distance_prior_ = 1e7  # whatever produced it: load refuses it, so it is never written
    with pytest.raises(MemoryFileError, match="distance_prior"):
        checked_bytes(c.learner_.to_state())
    out = c.teach("plate", _shots(8.0))
    assert not out.success and "distance_prior" in out.message and "refused" in out.message, out.message
    assert "plate" not in c.classes and c.classes == classes and c.model_version > version
    assert sorted(_restarted(tmp_path).classes) == sorted(classes)


def test_a_file_moved_aside_at_start_says_where_and_how_to_repair(tmp_path, robot):
    c, _ = robot
    blob = (tmp_path / "r1" / "memory.safetensors").read_bytes()
    state = state_from_bytes(blob)
    bad = dataclasses.replace(state, learner_state={**state.learner_state, "temperature_weight": 1e12 + 20})
    (tmp_path / "r1" / "memory.safetensors").write_bytes(state_to_bytes(bad))
    fresh = _controller(tmp_path)
    said = fresh.load_at_startup(move_aside=True)
    assert fresh.moved_aside_ and "EMPTY" in said and "cbcl-memory repair" in said
    assert str(tmp_path / "r1" / fresh.moved_aside_) in said
    from cbcl_pr_ros.core.persistence import repaired_bytes

    blob, notes = repaired_bytes((tmp_path / "r1" / fresh.moved_aside_).read_bytes())
    assert any("temperature_weight" in n and "clamped" in n for n in notes)
    (tmp_path / "r1" / "repaired.safetensors").write_bytes(blob)
    out = fresh.load("repaired.safetensors")  # LoadMemory serves every class taught before
    assert out.success and sorted(fresh.classes) == sorted(_wide()), out.message


def test_a_relay_of_a_scaled_copy_never_shrinks_the_origins_own_teaching(tmp_path):
    sent: list = []
    origin, relay = _controller(tmp_path, "o"), _controller(tmp_path, "r")
    mo, mr = _member(origin, "robot1", sent), _member(relay, "robot2", sent)
    for i in range(3):  # 3 teaches of 40 shots: more than a peer may bring
        assert origin.teach("mug", _shots(1.0, n=40, seed=i)).success
    assert relay.teach("mug", _shots(1.0, n=5, seed=7)).success
    n = len(sent)
    assert mr.receive(sent[n - 2]).applied  # origin's mug reaches the relay, scaled to the relay's bound
    assert relay.learner_.memory["mug"].n_samples <= 5 + max(5, PEER_MIN_SHOTS)
    back = [u for u in sent[n:] if u.robot == "robot2"][-1]  # the relay publishes its copy, covering origin's
    assert mo.receive(back).applied
    # origin's own 120 shots all still count, plus the relay's 5 (at the relay copy's statistics)
    assert origin.learner_.memory["mug"].n_samples == 125
    assert sorted(_restarted(tmp_path, "o").classes) == ["mug"]


def test_teaching_from_before_fleet_mode_is_the_robots_own_and_a_peers_unnamed_teaching_is_the_peers(tmp_path):
    c = _controller(tmp_path, k=6)
    for i in range(3):  # taught before fleet mode: no robot name in the provenance
        assert c.teach(f"own{i}", _shots(1.0 + 2 * i, seed=i)).success
    m = _member(c)
    unnamed = _peer_class("plate", 20.0, robot="")  # a peer's teaching of unknown origin
    assert m.receive(_peer_update(unnamed, "plate")).applied
    assert {x.robot for x in c.learner_.provenance_["plate"]} == {"robot3"}  # recorded as the sender's
    took = [m.receive(_peer_update(_peer_class(f"p{i}", 30.0 + 2 * i, seed=i), f"p{i}")).applied for i in range(3)]
    assert took == [True, True, False]  # 3 of K = 6 for classes known from peers alone: the own 3 do not count


def test_a_peer_claiming_our_ids_cannot_overwrite_a_class_we_were_taught(tmp_path, robot):
    """Our contribution ids travel in every update, so a peer can send a 'newer copy' of our mug whose
    provenance holds all of ours plus one of its own, with statistics of something else entirely. That
    copy used to replace ours (every cluster of the mug became the peer's); now it is pooled at the
    weight of the teaching we lacked, our own clusters stay exactly as taught, and a restart loads them."""
    c, m = robot
    mine = c.learner_.memory["mug"]
    own_means, own_counts = mine.means.copy(), mine.counts.copy()
    fake = _peer_class("mug", 20.0, robot="mallory", seed=9)  # something else, under our name
    claimed = (*c.learner_.provenance_["mug"], *fake.provenance["mug"])
    forged = dataclasses.replace(fake, provenance={"mug": claimed})
    r = m.receive(_peer_update(forged, "mug", robot="mallory"))
    assert r.applied, r.message
    after = c.learner_.memory["mug"]
    for mean, count in zip(own_means, own_counts):  # each cluster we taught is still there, unchanged
        assert any(np.allclose(mean, m2, atol=1e-3) and n2 == count for m2, n2 in zip(after.means, after.counts))
    assert after.n_samples <= mine.n_samples + 6  # at most the shots of the teaching we lacked
    assert c.classify(_shots(1.0, 3, seed=0)).predictions[0].label == "mug"
    again = _controller(tmp_path)
    assert again.load_at_startup(move_aside=True) and not again.moved_aside_
    assert sorted(again.classes) == sorted(_wide())
