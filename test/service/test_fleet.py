"""Issue 24, outcomes 3 and 5 without ROS: fleet members exchange class statistics, merge them, and
refuse malformed or hostile updates with one log line and no change; MergeMemory by file name."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, persistence, state_to_bytes
from cbcl_pr_ros.service.controller import LearnerController
from cbcl_pr_ros.service import fleet as fleet_module
from cbcl_pr_ros.service.fleet import (DIGEST, FORGOTTEN, LEARNED, RENAMED, REQUEST, ClassUpdate, FleetMember,
                                       FleetSettings)
from cbcl_pr_ros.service.memory_files import MemoryStore

D = 12


def _controller(tmp_path, sub: str, max_bytes: int = 256 * 1024 * 1024) -> LearnerController:
    store = MemoryStore(str(tmp_path / sub), "memory.safetensors", max_bytes=max_bytes)
    return LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), "synthetic", d), "synthetic", D, store)


def _shots(centre: float, n: int = 6, seed: int = 0) -> np.ndarray:
    return np.abs(np.random.default_rng(seed).normal(centre, 0.3, (n, D))).astype(np.float32)


class Bus:
    """Every update published, delivered by hand (like a transient-local topic's history)."""

    def __init__(self) -> None:
        self.sent: list[ClassUpdate] = []

    def member(self, controller, robot: str, **kw) -> FleetMember:
        m = FleetMember(controller, FleetSettings("home", robot, **kw), self.sent.append, clock=lambda: 0.0)
        controller.on_change = m.on_change
        return m

    def deliver(self, member: FleetMember, start: int = 0) -> list:
        return [member.receive(u) for u in self.sent[start:]]


@pytest.fixture
def fleet(tmp_path):
    bus = Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    return bus, c1, c2, bus.member(c1, "robot1"), bus.member(c2, "robot2")


def test_taught_on_one_robot_named_by_the_other_and_forget_follows(fleet):
    bus, c1, c2, m1, m2 = fleet
    assert c1.teach("mug", _shots(1.0)).success and c1.teach("box", _shots(3.0, seed=1)).success
    assert [u.op for u in bus.sent] == [LEARNED, LEARNED]
    u = bus.sent[0]
    assert u.robot == "robot1" and u.class_memory and len(u.class_memory) < 64 * 1024
    assert [r.applied for r in bus.deliver(m2)] == [True, True]
    assert c2.classify(_shots(1.0, 1, seed=7)).predictions[0].label == "mug"
    assert c2.learner_.memory["mug"].n_samples == 6
    assert {x.robot for x in c2.learner_.provenance_["mug"]} == {"robot1"}
    # robot2 relays what it learned; robot1 already holds it: nothing changes, nothing counts twice
    assert len(bus.sent) == 4 and {u.robot for u in bus.sent[2:]} == {"robot2"}
    assert all("nothing new" in r.message for r in bus.deliver(m1, 2))
    assert c1.learner_.memory["mug"].n_samples == 6
    n = len(bus.sent)
    assert c1.forget("mug").success
    assert bus.sent[n].op == FORGOTTEN
    assert bus.deliver(m2, n)[0].applied and "mug" not in c2.classes
    # a stale LEARNED of the forgotten class (robot2's relay, replayed) does not bring it back
    stale = next(x for x in bus.sent if x.robot == "robot2" and x.class_name == "mug" and x.op == LEARNED)
    r = m2.receive(dataclasses.replace(stale, robot="robot3"))
    assert not r.applied and "forgotten" in r.message and "mug" not in c2.classes


def test_rename_follows_where_the_class_came_from_peers_and_teaching_on_both_sides_pools(fleet, tmp_path):
    bus, c1, c2, m1, m2 = fleet
    c3 = _controller(tmp_path, "r3")
    m3 = bus.member(c3, "robot3")
    c1.teach("mug", _shots(1.0))
    bus.deliver(m2)
    n = len(bus.sent)
    c2.teach("mug", _shots(1.1, seed=3))  # more shots on robot2: its copy now covers robot1's
    bus.deliver(m1, n)
    assert c1.learner_.memory["mug"].n_samples == 12 == c2.learner_.memory["mug"].n_samples
    bus.deliver(m3)
    assert c3.learner_.memory["mug"].n_samples == 12  # robot3 knows the mug from peers alone
    n = len(bus.sent)
    assert c1.rename("mug", "cup").success
    assert [u.op for u in bus.sent[n:]] == [RENAMED, LEARNED]
    said = bus.deliver(m2, n)
    # robot2 was taught 'mug' itself: it keeps the name it was taught under, and says why
    assert c2.classes == ["mug"] and c2.learner_.memory["mug"].n_samples == 12
    assert not said[0].applied and "was taught it under that name" in said[0].message
    bus.deliver(m3, n)
    assert c3.classes == ["cup"] and c3.learner_.memory["cup"].n_samples == 12


def test_a_peer_naming_our_contribution_ids_cannot_forget_or_rename_a_class_we_were_taught(tmp_path):
    """Contribution ids are no secret (every update and digest carries them): a peer that copies ours
    into a FORGOTTEN or RENAMED used to make this robot forget or rename a class whose teach answered
    success. Now a class taught here is changed only by a request here; a restart loads it."""
    bus = Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    m1 = bus.member(c1, "robot1")
    assert c1.teach("mug", _shots(1.0)).success and c1.teach("box", _shots(3.0, seed=1)).success
    mine = {u.class_name: u.contribution_ids for u in bus.sent}
    before = _fingerprint(c1)
    forged = [ClassUpdate("home", "mallory", 1, FORGOTTEN, "mug", "", mine["mug"]),
              ClassUpdate("home", "mallory", 2, RENAMED, "box", "junk", mine["box"])]
    said = [m1.receive(u) for u in forged]
    assert [r.applied for r in said] == [False, False], said
    assert "this robot was taught it" in said[0].message and "was taught it under that name" in said[1].message
    assert _fingerprint(c1) == before
    assert not set(mine["mug"]) & {i for _, i in m1._forgotten}  # our teaching is not marked forgotten either
    again = _controller(tmp_path, "r1")  # a restart
    assert again.load_at_startup(move_aside=True) and sorted(again.classes) == ["box", "mug"]
    # a class known from a peer alone still follows that peer's forget
    m2 = bus.member(c2, "robot2")
    n = len(bus.sent)
    assert c2.teach("cup", _shots(5.0, seed=2)).success
    cup = bus.sent[n]
    assert cup.class_name == "cup" and m1.receive(cup).applied and "cup" in c1.classes
    n = len(bus.sent)
    assert c2.forget("cup").success and bus.sent[n].op == FORGOTTEN
    out = m1.receive(bus.sent[n])
    assert out.applied and "cup" not in c1.classes and sorted(c1.classes) == ["box", "mug"]


def _fingerprint(c) -> tuple:
    lrn = c.learner_
    return (lrn.classes_, lrn.model_version_, tuple((k, tuple(x.id for x in v)) for k, v in lrn.provenance_.items()))


def _learned(c1, bus) -> ClassUpdate:
    c1.teach("mug", _shots(1.0))
    return bus.sent[-1]


def _padded(blob: bytes, keys: int) -> bytes:
    """The statistics with ``keys`` entries of metadata nobody reads, the checksum recomputed as a
    forger would: a file that load accepts."""
    from safetensors.numpy import save as st_save

    from cbcl_pr_ros.core import persistence

    tensors, meta = persistence._parse(blob, "x")
    meta["padding"] = {f"k{i}": [i] for i in range(keys)}
    meta["sha256"] = persistence._checksum(tensors, meta)
    padded = st_save(tensors, metadata={"cbcl_pr": json.dumps(meta)})
    persistence.state_from_bytes(padded)  # accepted as a file
    return padded


@pytest.mark.parametrize("edit, why", [
    (lambda u: dataclasses.replace(u, robot="robot9"), "fleet_allow"),
    (lambda u: dataclasses.replace(u, op=7), "unknown op"),
    (lambda u: dataclasses.replace(u, class_name="a\nb"), "class name"),
    (lambda u: dataclasses.replace(u, class_name="x" * 500), "class name"),
    (lambda u: dataclasses.replace(u, class_name="cup"), "exactly the class"),
    (lambda u: dataclasses.replace(u, contribution_ids=("zz",)), "contribution ids"),
    (lambda u: dataclasses.replace(u, contribution_ids=tuple(f"{i:016x}" for i in range(65))), "contribution ids"),
    (lambda u: dataclasses.replace(u, contribution_ids=("0123456789abcdef",)), "do not match"),
    (lambda u: dataclasses.replace(u, class_memory=u.class_memory[:-3]), "statistics"),
    (lambda u: dataclasses.replace(u, class_memory=b"\x00" * 10), "statistics"),
    (lambda u: dataclasses.replace(u, class_memory=b"\x00" * (2 * 1024 * 1024)), "fleet_max_update_bytes"),
    (lambda u: dataclasses.replace(u, op=FORGOTTEN, contribution_ids=()), "forget"),
    # metadata a file may carry and load ignores, ~0.4 MB of it (6.7 MB cost 0.6 s of parsing per update)
    (lambda u: dataclasses.replace(u, class_memory=_padded(u.class_memory, 30_000)), "byte header"),
])
def test_hostile_updates_are_refused_with_one_line_and_change_nothing(tmp_path, edit, why):
    bus = Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    bus.member(c1, "robot1")
    m2 = bus.member(c2, "robot2", allow=frozenset({"robot1"}), max_update_bytes=1024 * 1024)
    c2.teach("box", _shots(3.0))
    before = _fingerprint(c2)
    r = m2.receive(edit(_learned(c1, bus)))
    assert not r.applied and why in r.message and "\n" not in r.message and len(r.message) < 400, r.message
    assert _fingerprint(c2) == before


def test_other_backbone_other_fleet_own_echo_and_a_flood(tmp_path):
    bus = Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    bus.member(c1, "robot1")
    m2 = bus.member(c2, "robot2", rate_hz=1.0, burst=3)
    u = _learned(c1, bus)
    alien = CBCLPRLearner(LearnerConfig(seed=0), "resnet", D)
    alien.teach("mug", _shots(1.0))
    from cbcl_pr_ros.core.merge import one_class_state

    blob = state_to_bytes(one_class_state(alien.to_state(), "mug"))
    r = m2.receive(dataclasses.replace(u, class_memory=blob,
                                       contribution_ids=tuple(x.id for x in alien.provenance_["mug"])))
    assert not r.applied and "backbone" in r.message
    assert m2.receive(dataclasses.replace(u, fleet="other")) == m2.receive(dataclasses.replace(u, robot="robot2"))
    assert not m2.receive(dataclasses.replace(u, fleet="other")).message  # not ours: silent
    results = [m2.receive(u) for _ in range(10)]
    assert sum("updates/s" in r.message for r in results) >= 7 and c2.classes == ["mug"]


def test_counts_that_would_overflow_are_refused(fleet):
    bus, c1, c2, m1, m2 = fleet
    c2.teach("mug", _shots(1.0, seed=4))
    u = _learned(c1, bus)
    from cbcl_pr_ros.core import persistence

    state = persistence.state_from_bytes(u.class_memory)
    cc = state.memory["mug"]
    huge = type(cc)(np.full_like(cc.counts, 2**62), cc.means, cc.mode, cc.factors, cc.diag)
    mem = type(state.memory)(D, cc.mode, None, "kmeans", 0, {"mug": huge}, state.memory.precision)
    bad = dataclasses.replace(state, memory=mem)
    before = _fingerprint(c2)
    r = m2.receive(dataclasses.replace(u, class_memory=state_to_bytes(bad)))
    assert not r.applied and ("overflow" in r.message or "shots" in r.message), r.message
    assert _fingerprint(c2) == before


def test_merge_memory_by_name_and_the_file_size_limit(tmp_path):
    c1 = _controller(tmp_path, "r1")
    c1.teach("mug", _shots(1.0))
    c1.save("robot1.safetensors")
    c2 = _controller(tmp_path, "r1")  # same directory: the file name resolves inside it
    c2.teach("box", _shots(3.0, seed=2))
    out = c2.merge("robot1.safetensors")
    assert out.success and sorted(c2.classes) == ["box", "mug"], out.message
    for bad in ("../r1/robot1.safetensors", "/etc/passwd", "missing.safetensors", ".hidden"):
        before = _fingerprint(c2)
        out = c2.merge(bad)
        assert not out.success and _fingerprint(c2) == before
    small = _controller(tmp_path, "r1", max_bytes=c2.learner_.memory_bytes() // 4 + 2048)
    small.teach("box", _shots(3.0, seed=2))
    size = len(state_to_bytes(small.learner_.to_state()))
    small.store.max_bytes = size + 100  # this memory fits; with mug merged in it would not
    before = _fingerprint(small)
    out = small.merge("robot1.safetensors")
    assert not out.success and "max_memory_file_bytes" in out.message and _fingerprint(small) == before


def test_fleet_settings_from_parameters():
    p = {"fleet": "home", "robot_name": "r1", "fleet_allow": "r2, r3", "fleet_max_update_bytes": 10**6,
         "max_memory_file_bytes": 10**7, "fleet_max_update_rate": 5.0, "fleet_history_depth": 50}
    s = FleetSettings.from_params(p)
    assert s.allow == {"r2", "r3"} and s.burst == 50 and s.max_update_bytes == 10**6
    assert FleetSettings.from_params({**p, "fleet": ""}) is None
    with pytest.raises(ValueError, match="robot_name"):
        FleetSettings.from_params({**p, "robot_name": ""})
    with pytest.raises(ValueError, match="fleet_allow"):
        FleetSettings.from_params({**p, "fleet_allow": "ok, bad/name"})


def test_a_digest_larger_than_any_member_sends_is_refused_unread_and_ours_stay_small(fleet):
    """A digest was taken up to fleet_max_update_bytes (8 MiB): parsing one held the receiver for about
    a second, per message, for a list a member sends in messages of 64 KiB. And the sender's own
    chunks counted a name by its characters, so names of non-ASCII characters (6 bytes each in the
    JSON) made chunks of ~320 KiB."""
    bus, _c1, c2, _m1, m2 = fleet
    before = _fingerprint(c2)
    listed = {f"n{i:06d}": ["%016x" % i] for i in range(40_000)}  # ~1.2 MB, none held by robot2
    blob = json.dumps({"classes": listed}, separators=(",", ":")).encode()
    assert fleet_module.MAX_DIGEST_BYTES < len(blob) < 8 * 1024 * 1024
    sent = len(bus.sent)
    res = m2.receive(ClassUpdate("home", "robot1", 99, DIGEST, "", class_memory=blob))
    assert not res.applied and f"a digest of {len(blob)} bytes" in res.message
    assert len(bus.sent) == sent and _fingerprint(c2) == before  # nothing asked for, nothing changed
    small = json.dumps({"classes": dict(list(listed.items())[:3])}).encode()  # one within the bound is read
    assert m2.receive(ClassUpdate("home", "robot1", 100, DIGEST, "", class_memory=small)).applied
    assert len(bus.sent) == sent + 3
    held = {"€" * 124 + f"{i:04d}": ["%016x" % i] for i in range(2000)}  # the longest names, non-ASCII
    chunks = fleet_module._digest_chunks(held)
    assert max(map(len, chunks)) <= fleet_module.DIGEST_CHUNK_BYTES + 64
    assert sum(len(fleet_module._parse_digest(ch)) for ch in chunks) == len(held)


def test_a_peer_cannot_tombstone_another_robots_teaching(tmp_path):
    """Contribution ids are public (every LEARNED and DIGEST carries them): mallory, allowed in the
    fleet, sent a FORGOTTEN naming robot2's ids (under any class name, one robot1 does not even hold)
    and robot1 remembered them as forgotten: robot2's LEARNED of its own class was refused, and its
    digests were never asked about, until robot2 was taught more. A forget now counts only for the
    teaching of the robot that forgot it."""
    bus = Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    m1, m2 = bus.member(c1, "robot1"), bus.member(c2, "robot2")
    assert c2.teach("cup", _shots(5.0, seed=2)).success
    cup = bus.sent[-1]
    forged = [ClassUpdate("home", "mallory", 1, FORGOTTEN, name, "", cup.contribution_ids) for name in ("cup", "junk")]
    assert [m1.receive(u).applied for u in forged] == [True, True]  # nothing held to forget: nothing done
    r = m1.receive(cup)
    assert r.applied and "cup" in c1.classes, r.message
    # the digest path: robot1 without the cup asks robot2 for it despite mallory's forget
    c1.forget("cup")
    for u in forged:
        m1.receive(u)
    n = len(bus.sent)
    m2.tick()
    assert m1.receive(bus.sent[n]).applied  # robot2's digest
    asked = [u for u in bus.sent[n + 1:] if u.class_name == "cup" and u.new_name == "robot2"]
    assert asked, [(u.op, u.class_name) for u in bus.sent[n:]]


def test_a_forget_still_stops_stale_relays_and_the_forgetting_robot_takes_no_copy_back(fleet, tmp_path):
    """The legitimate flows: robot1 forgets its mug; a copy relayed afterwards by a robot that missed
    the forget (robot2's, replayed by robot3; robot2's own) brings it back neither to robot3 nor to
    robot1, which used to take its forgotten class back from any peer still holding it. A class pooled
    from robot1's and robot2's teaching that robot1 forgets still lives on robot2 (taught there):
    robot3 takes robot2's copy again, as the digest would give it anyway."""
    bus, c1, c2, m1, m2 = fleet
    c3 = _controller(tmp_path, "r3")
    m3 = bus.member(c3, "robot3")
    assert c1.teach("mug", _shots(1.0)).success
    bus.deliver(m2)
    bus.deliver(m3)
    stale = next(u for u in bus.sent if u.robot == "robot2" and u.class_name == "mug" and u.op == LEARNED)
    n = len(bus.sent)
    assert c1.forget("mug").success and bus.sent[n].op == FORGOTTEN
    assert m3.receive(bus.sent[n]).applied and "mug" not in c3.classes
    for member, c in ((m3, c3), (m1, c1)):
        r = member.receive(stale)
        assert not r.applied and "forgotten" in r.message and "mug" not in c.classes, r.message
    # pooled: both taught the box; robot1 forgets it, robot2 keeps it (taught there)
    assert c1.teach("box", _shots(3.0, seed=1)).success
    bus.deliver(m2, n + 1)
    assert c2.teach("box", _shots(3.1, seed=5)).success
    pooled = bus.sent[-1]
    assert {x.robot for x in c2.learner_.provenance_["box"]} == {"robot1", "robot2"}
    assert m3.receive(pooled).applied and m1.receive(pooled).applied  # robot1's box is the pooled one now
    assert {x.robot for x in c1.learner_.provenance_["box"]} == {"robot1", "robot2"}
    n = len(bus.sent)
    assert c1.forget("box").success
    said = bus.deliver(m3, n)
    assert said[0].applied and "box" not in c3.classes
    assert not bus.deliver(m2, n)[0].applied and "box" in c2.classes  # kept: robot2 was taught it
    r = m3.receive(pooled)
    assert r.applied and "box" in c3.classes, r.message


# What a member remembers of one sender never gives way to another sender's traffic: forgotten
# teaching (tombstones), the digest's back-off after a refused LEARNED and the classes asked are kept
# per robot, each robot within its own quota, this robot's own forgets never pushed out by a peer's.

def _flood(member, robot: str, messages: int, start: int = 0) -> list:
    """``messages`` FORGOTTENs from ``robot``, each naming 64 ids no one was ever taught."""
    return [member.receive(ClassUpdate("home", robot, k, FORGOTTEN, "junk", "",
                                       tuple(f"{(start + k) * 64 + i:016x}" for i in range(64))))
            for k in range(messages)]


def test_a_flood_of_forgets_from_one_peer_pushes_out_only_its_own(tmp_path):
    """All tombstones shared one bound of 4096 pairs: mallory, allowed in the fleet, sent 150
    FORGOTTENs of 64 made-up ids (within its own rate) and robot2 no longer remembered that robot1
    had forgotten its mug, nor its own forget of the cup: a stale relay of the mug (robot3 had missed
    the forget) brought it back. Now each robot's forgets have their own quota."""
    bus = Bus()
    c1, c2, c3 = (_controller(tmp_path, f"r{i}") for i in (1, 2, 3))
    bus.member(c1, "robot1")
    m3 = bus.member(c3, "robot3")
    m2 = bus.member(c2, "robot2", burst=200)
    assert c1.teach("mug", _shots(1.0)).success and c2.teach("cup", _shots(5.0, seed=2)).success
    bus.deliver(m3)
    bus.deliver(m2)
    stale = {u.class_name: u for u in bus.sent if u.robot == "robot3" and u.op == LEARNED}
    assert set(stale) == {"mug", "cup"} and "mug" in c2.classes
    n = len(bus.sent)
    assert c1.forget("mug").success and c2.forget("cup").success  # robot3 misses both forgets
    assert m2.receive(bus.sent[n]).applied and c2.classes == []  # robot1's forget of the mug
    flood = _flood(m2, "mallory", 150)
    assert all(r.applied for r in flood)  # 9600 pairs: the old bound was 4096 in all
    for name in ("mug", "cup"):
        r = m2.receive(stale[name])
        assert not r.applied and "forgotten" in r.message, (name, r.message)
    assert c2.classes == []
    assert sum(1 for _ in m2._forgotten.entries("mallory")) == fleet_module.TOMBSTONES_PER_ROBOT


def test_robots_past_the_bound_drop_the_oldest_peer_never_this_robots_own(tmp_path):
    """Names are what senders say: a peer inventing robot names adds robots, each within its quota;
    past ROBOTS_KEPT the peer whose forgets came least recently is dropped whole, this robot's own
    forgets never (a relay of its own forgotten teaching was refused before too, but by the "speaking
    for us" check, no longer as forgotten)."""
    bus = Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    m1, m2 = bus.member(c1, "robot1"), bus.member(c2, "robot2")
    assert c2.teach("cup", _shots(5.0, seed=2)).success
    bus.deliver(m1)
    relay = next(u for u in bus.sent if u.robot == "robot1" and u.class_name == "cup")
    n = len(bus.sent)
    assert c2.forget("cup").success and bus.sent[n].op == FORGOTTEN
    names = 70  # 4480 pairs: the old bound, 4096 in all, dropped robot2's own forget of the cup
    for k in range(names):
        _flood(m2, f"name{k}", 1, start=k)
    r = m2.receive(relay)
    assert not r.applied and "forgotten" in r.message and "cup" not in c2.classes, r.message
    t = m2._forgotten
    assert fleet_module.ROBOTS_KEPT < names and len(t.senders()) == fleet_module.ROBOTS_KEPT + 1
    assert "robot2" in t.senders() and "name0" not in t.senders() and f"name{names - 1}" in t.senders()


def _refused_copy(u: ClassUpdate, robot: str) -> ClassUpdate:
    """``u``'s class and ids, sent by ``robot`` with statistics of another feature transform: a copy
    every check of the file passes and the merge refuses."""
    state = persistence.state_from_bytes(u.class_memory)
    bent = dataclasses.replace(state, config={**state.config, "transform_power": 0.25})
    return dataclasses.replace(u, robot=robot, class_memory=state_to_bytes(bent))


def test_a_refused_copy_from_one_peer_does_not_stop_asking_another(tmp_path):
    """The back-off after a refused LEARNED was kept by contribution ids alone: mallory sent robot2's
    cup (ids are public) with statistics the merge refuses, and robot1 then skipped the cup in
    robot2's digests for 10 periods. Now a refusal backs off only the requests to its sender."""
    bus = Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    m1, m2 = bus.member(c1, "robot1"), bus.member(c2, "robot2")
    assert c2.teach("cup", _shots(5.0, seed=2)).success  # robot1 misses it
    cup = bus.sent[-1]
    r = m1.receive(_refused_copy(cup, "mallory"))
    assert not r.applied and "transform" in r.message, r.message
    n = len(bus.sent)
    assert m2.tick() == 1 and bus.sent[n].op == DIGEST
    digest = bus.sent[n]
    # mallory's digest listing the cup is not asked about: its copy was refused here a moment ago
    assert not m1.receive(dataclasses.replace(digest, robot="mallory")).applied and len(bus.sent) == n + 1
    assert m1.receive(digest).applied  # robot2's: robot1 asks robot2 for the cup
    asked = [u for u in bus.sent[n + 1:] if u.op == REQUEST]
    assert [(u.class_name, u.new_name) for u in asked] == [("cup", "robot2")]
    assert m2.receive(asked[0]).applied and m1.receive(bus.sent[-1]).applied and "cup" in c1.classes


def test_a_peers_refusals_fill_its_own_quota_not_anothers(tmp_path, monkeypatch):
    """One sender's many refused copies evict only its own back-off entries: robot2's refused cup is
    still not asked for again after mallory's refusals passed the quota."""
    monkeypatch.setattr(fleet_module, "REFUSED_PER_ROBOT", 2)
    bus = Bus()
    c1, c2, cm = _controller(tmp_path, "r1"), _controller(tmp_path, "r2"), _controller(tmp_path, "rm")
    m1, m2 = bus.member(c1, "robot1"), bus.member(c2, "robot2")
    assert c2.teach("cup", _shots(5.0, seed=2)).success
    cup = bus.sent[-1]
    assert not m1.receive(_refused_copy(cup, "robot2")).applied  # robot2's own copy refused here
    bus.member(cm, "mallory")
    for k in range(4):
        assert cm.teach(f"c{k}", _shots(2.0 + k, seed=k)).success
        r = m1.receive(_refused_copy(bus.sent[-1], "mallory"))
        assert not r.applied and "transform" in r.message, r.message
    assert len(list(m1._refused.entries("mallory"))) == 2 and len(list(m1._refused.entries("robot2"))) == 1
    n = len(bus.sent)
    m2.tick()
    assert not m1.receive(bus.sent[n]).applied
    assert not [u for u in bus.sent[n + 1:] if u.op == REQUEST], "robot2's back-off was pushed out"


def test_a_flood_of_digests_from_one_peer_does_not_erase_what_was_asked_of_another(tmp_path):
    """The classes asked for (each at most once per half period and robot) shared one bound of 4096
    with every sender: mallory's digests, 16 requests each, pushed robot2's out, and robot2's next
    digest was asked about again within the half period. Now each robot's requests have their quota."""
    bus = Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    m1, m2 = bus.member(c1, "robot1", burst=300), bus.member(c2, "robot2")
    assert c2.teach("cup", _shots(5.0, seed=2)).success  # robot1 misses it
    n = len(bus.sent)
    m2.tick()
    digest = bus.sent[n]
    assert m1.receive(digest).applied and bus.sent[-1].op == REQUEST
    for k in range(270):  # 4320 classes asked of mallory
        listed = {f"x{k}_{j}": [f"{k * 16 + j:016x}"] for j in range(16)}
        blob = json.dumps({"classes": listed}).encode()
        assert m1.receive(ClassUpdate("home", "mallory", k, DIGEST, "", class_memory=blob)).applied
    n = len(bus.sent)
    assert not m1.receive(digest).applied and len(bus.sent) == n  # asked a moment ago: not again
