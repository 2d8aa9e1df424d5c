"""What fleet peers may cost the learner: saves coalesced, one CPU share for all senders, nothing lost.

At a thousand classes every accepted LEARNED used to cost a refit (~0.85 s CPU) and a save of the
whole memory (~0.17 s), and every invented sender name brought its own rate allowance. Now a peer's
change is written at most once per ``save_s`` (and at deactivate, cleanup and every local change),
and all senders together get one CPU share. No timing is asserted: the clocks are the test's.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.service.controller import LearnerController
from cbcl_pr_ros.service.fleet import CPU_BURST_S, DIGEST, FORGOTTEN, LEARNED, REQUEST, ClassUpdate, FleetMember, FleetSettings
from cbcl_pr_ros.service.memory_files import MemoryStore

D = 12


def _make(d: int) -> CBCLPRLearner:
    return CBCLPRLearner(LearnerConfig(seed=0), "synthetic", d)


def _controller(tmp_path, sub: str | None) -> LearnerController:
    store = None if sub is None else MemoryStore(str(tmp_path / sub), "memory.safetensors", max_bytes=256 << 20)
    return LearnerController(_make, "synthetic", D, store)


def _shots(centre: float, seed: int) -> np.ndarray:
    return np.abs(np.random.default_rng(seed).normal(centre, 0.3, (6, D))).astype(np.float32)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Writes:
    """Counts the default memory file's writes of a controller's store."""

    def __init__(self, c: LearnerController) -> None:
        self.n = 0
        write = c.store.write

        def counted(*a, **kw):
            self.n += 1
            return write(*a, **kw)
        c.store.write = counted


def _member(c: LearnerController, robot: str, sent: list, clock: Clock, **kw) -> FleetMember:
    cpu = {"cpu_clock": kw.pop("cpu_clock")} if "cpu_clock" in kw else {}
    m = FleetMember(c, FleetSettings("home", robot, **kw), sent.append, clock=clock, **cpu)
    c.on_change = m.on_change
    return m


def _peer_classes(tmp_path, n: int) -> list[ClassUpdate]:
    """``n`` LEARNED of a peer robot (RAM only), one class each."""
    sent: list[ClassUpdate] = []
    c = _controller(tmp_path, None)
    _member(c, "robot1", sent, Clock())
    for i in range(n):
        assert c.teach(f"thing{i}", _shots(1.0 + 0.7 * i, seed=i)).success
    return [u for u in sent if u.op == LEARNED]


def _restarted(tmp_path, sub: str) -> list[str]:
    again = _controller(tmp_path, sub)
    again.load_at_startup(move_aside=False)
    return sorted(again.classes)


def test_a_burst_of_peer_classes_is_written_once_per_period_and_with_the_next_local_teach(tmp_path):
    """Each accepted LEARNED used to write the whole memory file: six classes, six writes."""
    ups = _peer_classes(tmp_path, 9)
    c2, clock, sent = _controller(tmp_path, "r2"), Clock(), []
    m2 = _member(c2, "robot2", sent, clock, save_s=10.0)
    writes = Writes(c2)
    assert all(m2.receive(u).applied for u in ups[:6])
    assert writes.n == 0 and len(c2.classes) == 6 and c2.unsaved_peer_changes_ == 6
    assert _restarted(tmp_path, "r2") == []  # served, not yet in the file
    assert "6 changes from fleet peers saved" in m2.flush() and writes.n == 1
    assert _restarted(tmp_path, "r2") == [f"thing{i}" for i in range(6)]
    assert m2.flush() == "" and writes.n == 1  # nothing left to write
    # three more, then a local teach: its success answer comes once everything served is in the file
    assert all(m2.receive(u).applied for u in ups[6:])
    assert writes.n == 1
    assert c2.teach("mine", _shots(30.0, seed=99)).success
    assert writes.n == 3 and c2.unsaved_peer_changes_ == 0  # the peers' changes first, then the teach
    assert _restarted(tmp_path, "r2") == sorted([f"thing{i}" for i in range(9)] + ["mine"])


def test_save_period_zero_writes_each_peer_change_and_bad_settings_are_refused(tmp_path):
    ups = _peer_classes(tmp_path, 2)
    c2, sent = _controller(tmp_path, "r2"), []
    m2 = _member(c2, "robot2", sent, Clock(), save_s=0.0)
    writes = Writes(c2)
    assert all(m2.receive(u).applied for u in ups) and writes.n == 2 and c2.unsaved_peer_changes_ == 0
    for bad in ({"save_s": -1.0}, {"cpu_share": 0.0}, {"cpu_share": 1.5}):
        with pytest.raises(ValueError, match="fleet limits"):
            FleetSettings("home", "r", **bad)
    p = {"fleet": "home", "robot_name": "r1", "fleet_max_update_bytes": 10**6, "max_memory_file_bytes": 10**7,
         "fleet_max_update_rate": 5.0, "fleet_history_depth": 50, "fleet_save_period": 3.0, "fleet_cpu_share": 0.5}
    s = FleetSettings.from_params(p)
    assert (s.save_s, s.cpu_share) == (3.0, 0.5)


def test_invented_sender_names_share_one_cpu_budget(tmp_path):
    """Every name had its own allowance: 40 invented names, 40 merges at once (each ~1 s of CPU at a
    thousand classes). Now all senders share ``cpu_share`` of a core: the merges taken stop when the
    burst of CPU seconds is spent, whatever the names, and resume as the share refills."""
    ups = _peer_classes(tmp_path, 40)
    c2, clock, sent = _controller(tmp_path, "r2"), Clock(), []
    cpu = Clock()  # each merge costs exactly one CPU second on this clock
    merge = c2.merge_state

    def costly(*a, **kw):
        cpu.now += 1.0
        return merge(*a, **kw)
    c2.merge_state = costly
    m2 = _member(c2, "robot2", sent, clock, cpu_share=0.25, cpu_clock=cpu)
    said = [m2.receive(dataclasses.replace(u, robot=f"name{i}")) for i, u in enumerate(ups)]
    taken = [r for r in said if r.applied]
    assert len(taken) == int(CPU_BURST_S) and len(c2.classes) == int(CPU_BURST_S)
    refused = [r for r in said if not r.applied]
    assert all(r.flood and "fleet_cpu_share" in r.message for r in refused)
    clock.now = 4.0  # 4 s at a quarter of a core: one CPU second, one more merge
    more = [m2.receive(dataclasses.replace(u, robot=f"other{i}")) for i, u in enumerate(ups[5:10])]
    assert [r.applied for r in more] == [True, False, False, False, False]


def test_cleanup_and_deactivate_write_what_peers_sent(tmp_path):
    """The last peer's changes are in the file after a flush (the timer's, or deactivate's) and after
    release (cleanup, shutdown), whatever the period."""
    ups = _peer_classes(tmp_path, 2)
    c2, sent = _controller(tmp_path, "r2"), []
    m2 = _member(c2, "robot2", sent, Clock(), save_s=3600.0)
    assert m2.receive(ups[0]).applied and _restarted(tmp_path, "r2") == []
    assert "1 change from fleet peers saved" in m2.flush()  # the timer's call, or deactivate's
    assert _restarted(tmp_path, "r2") == ["thing0"]
    assert m2.receive(ups[1]).applied and _restarted(tmp_path, "r2") == ["thing0"]
    ok, line = c2.release(final=False)
    assert ok and _restarted(tmp_path, "r2") == ["thing0", "thing1"], line


def test_a_peer_class_lost_to_a_crash_is_asked_for_again_by_the_digest(tmp_path):
    """A class merged from a peer but not yet written when the learner crashed is not in the file at
    the restart; the peer's next digest lists it, the restarted learner asks for it and takes it."""
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    bus: list[ClassUpdate] = []
    clock = Clock()
    m1 = _member(c1, "robot1", bus, clock)
    m2 = _member(c2, "robot2", bus, clock, save_s=10.0)
    assert c1.teach("mug", _shots(1.0, seed=1)).success
    assert m2.receive(bus[-1]).applied and "mug" in c2.classes
    # the crash: robot2's process ends before its next save; it starts again from its file
    c2b = _controller(tmp_path, "r2")
    c2b.load_at_startup(move_aside=False)
    assert c2b.classes == []
    m2b = _member(c2b, "robot2", bus, clock, save_s=10.0)
    n = len(bus)
    clock.now = 20.0
    assert m1.tick() == 1 and bus[n].op == DIGEST
    assert m2b.receive(bus[n]).applied
    asked = [u for u in bus[n + 1:] if u.op == REQUEST]
    assert [(u.class_name, u.new_name) for u in asked] == [("mug", "robot1")]
    n = len(bus)
    assert m1.receive(asked[0]).applied and bus[n].op == LEARNED and bus[n].class_name == "mug"
    assert m2b.receive(bus[n]).applied and c2b.classes == ["mug"]
    assert m2b.flush() and _restarted(tmp_path, "r2") == ["mug"]


def test_peer_classes_waiting_for_the_save_keep_the_file_within_half_its_limit(tmp_path):
    """Until the save, the file's size is bounded by the last one written plus each merged class's own
    file: a peer still cannot pass half of max_memory_file_bytes, and what is written loads."""
    import os

    ups = _peer_classes(tmp_path, 6)
    c2, sent = _controller(tmp_path, "r2"), []
    m2 = _member(c2, "robot2", sent, Clock(), save_s=10.0)
    assert c2.teach("mine", _shots(30.0, seed=99)).success
    c2.store.max_bytes = 2 * (os.path.getsize(c2.store.default_path) + 3 * len(ups[0].class_memory))
    said = [m2.receive(u) for u in ups]
    taken = sum(r.applied for r in said)
    assert 1 <= taken < 6, said
    assert any("up to" in r.message and "half of it for a peer's classes" in r.message for r in said)
    assert m2.flush() and os.path.getsize(c2.store.default_path) <= c2.store.max_bytes // 2
    assert len(_restarted(tmp_path, "r2")) == 1 + taken


@pytest.mark.parametrize("good_writes", [0, 1])
def test_a_local_change_whose_save_fails_keeps_the_peers_classes_and_announces_no_forget(tmp_path, good_writes):
    """A failed local save serves the memory as last saved again. Were the peers' classes kept in RAM
    not in that file, they went with it and the fleet was told this robot forgot them."""
    ups = _peer_classes(tmp_path, 3)
    c2, clock, sent = _controller(tmp_path, "r2"), Clock(), []
    m2 = _member(c2, "robot2", sent, clock, save_s=10.0)
    assert all(m2.receive(u).applied for u in ups)
    write, calls = c2.store.write, []

    def failing(*a, **kw):  # the disk fills up after ``good_writes`` writes
        calls.append(1)
        if len(calls) > good_writes:
            raise OSError(28, "No space left on device")
        return write(*a, **kw)
    c2.store.write = failing
    out = c2.teach("mine", _shots(30.0, seed=99))
    assert not out.success and "nothing learned" in out.message, out.message
    assert sorted(c2.classes) == ["thing0", "thing1", "thing2"]
    m2.on_change()
    assert not [u for u in sent if u.op == FORGOTTEN], sent
    for op in (lambda: c2.forget("thing0"), lambda: c2.rename("thing1", "other")):
        assert not op().success and sorted(c2.classes) == ["thing0", "thing1", "thing2"]
    c2.store.write = write
    assert c2.teach("mine", _shots(30.0, seed=99)).success
    assert _restarted(tmp_path, "r2") == ["mine", "thing0", "thing1", "thing2"]
