"""Class names that look alike: a new name that looks like a known class is refused and names it; a
memory that already holds look-alike names keeps every class (load, teach, forget by exact name)."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.service.controller import LearnerController
from cbcl_pr_ros.service.fleet import LEARNED, ClassUpdate, FleetMember, FleetSettings
from cbcl_pr_ros.service.memory_files import MemoryStore

D = 12
NFC, NFD = "caf\u00e9 mug", "cafe\u0301 mug"
# each looks like "mug" on a page: case, fullwidth letters, a variation selector, a grapheme joiner
# (draws nothing), a Hangul filler (draws nothing); an accent is seen, so "müg" is not among them
LOOKALIKES = ["Mug", "MUG", "\uff4d\uff55\uff47", "mug\ufe0f", "mu\u034fg", "mug\u3164"]


def _controller(tmp_path, sub: str = "r1") -> LearnerController:
    store = MemoryStore(str(tmp_path / sub), "memory.safetensors")
    return LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), "synthetic", d), "synthetic", D, store)


def _shots(centre: float, n: int = 6, seed: int = 0) -> np.ndarray:
    return np.abs(np.random.default_rng(seed).normal(centre, 0.3, (n, D))).astype(np.float32)


def _state(c: LearnerController) -> tuple:
    lrn = c.learner_
    return lrn.classes_, lrn.model_version_, {k: lrn.memory[k].n_samples for k in lrn.classes_}


@pytest.mark.parametrize("name", LOOKALIKES)
def test_a_new_name_that_looks_like_a_known_class_is_refused_and_names_it(tmp_path, name):
    c = _controller(tmp_path)
    assert c.teach("mug", _shots(1.0)).success
    before = _state(c)
    out = c.teach(name, _shots(1.0, seed=1))
    assert not out.success and "looks like the known class 'mug'" in out.message, out.message
    assert "teach under that name" in out.message and len(out.message) < 400
    assert _state(c) == before
    again = c.teach("mug", _shots(1.0, seed=2))  # more of the known class under its exact name: as before
    assert again.success and again.extended_existing and c.classes == ["mug"]


def test_a_refusal_shows_the_character_no_font_shows():
    c = LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), "synthetic", d), "synthetic", D, None)
    c.teach("mug", _shots(1.0))
    out = c.teach("mug\ufe0f", _shots(1.0))
    assert "U+FE0F VARIATION SELECTOR-16" in out.message, out.message
    assert c.teach("blue mug", _shots(2.0)).success
    assert "looks like the known class 'blue mug'" in c.teach("blue  mug", _shots(2.0)).message


@pytest.mark.parametrize("name", ["\u0301", "\u0301\u0302\u0303", "\ufe0f", "\U000e0100", "\u3164", "\u034f\ufe0e",
                                  "..."])
def test_a_name_with_nothing_to_read_is_refused(tmp_path, name):
    c = _controller(tmp_path)
    out = c.teach(name, _shots(1.0))
    assert not out.success and "no letter, digit or symbol" in out.message, out.message
    assert c.classes == []
    for fine in ("\u2615", "#1", "\u0915\u0941\u092a"):  # a symbol, a digit, letters with a mark
        assert c.teach(fine, _shots(1.0)).success, fine


def test_rename_to_a_look_alike_is_refused_but_a_class_may_take_another_case_of_its_own_name(tmp_path):
    c = _controller(tmp_path)
    c.teach("mug", _shots(1.0))
    c.teach("bowl", _shots(3.0, seed=1))
    before = _state(c)
    out = c.rename("bowl", "MUG")
    assert not out.success and "looks like the known class 'mug'" in out.message and _state(c) == before
    assert not c.rename("bowl", "\u0301").success and _state(c) == before
    assert c.rename("mug", "Mug").success and c.classes == ["Mug", "bowl"]
    assert c.rename("Mug", "\uff4d\uff55\uff47").success  # still looks only like itself


def _legacy_file(tmp_path, names: list[str], sub: str = "r1", file: str = "legacy.safetensors") -> str:
    """A memory file in ``sub`` holding ``names`` as the core takes them (as one written before this rule)."""
    c = _controller(tmp_path, sub)
    for i, name in enumerate(names):
        c.learner_.teach(name, _shots(1.0 + 2 * i, seed=i))
    ok, message, _, _ = c.save(file)
    assert ok, message
    return file


def test_a_memory_that_holds_look_alikes_loads_whole_and_each_is_reached_by_its_exact_name(tmp_path):
    names = ["mug", "Mug", "mug\ufe0f", "\u0301\u0302"]
    name = _legacy_file(tmp_path, names)
    c = _controller(tmp_path)
    out = c.load(name)
    assert out.success and c.classes == names, out.message
    out = c.teach("Mug", _shots(3.0, seed=4))
    assert out.success and out.extended_existing and c.learner_.memory["Mug"].n_samples == 12
    assert c.forget("mug\ufe0f").success and c.classes == ["mug", "Mug", "\u0301\u0302"]
    assert c.rename("\u0301\u0302", "marks").success
    assert c.load().success and c.classes == ["mug", "Mug", "marks"]  # what it saved loads back


def test_a_stored_name_that_grows_when_composed_still_loads(tmp_path):
    grows = "\ufb2a" * 100  # Hebrew presentation forms: 100 characters, 200 once composed to NFC
    name = _legacy_file(tmp_path, ["mug", grows])
    c = _controller(tmp_path)
    out = c.load(name)
    assert out.success and c.classes == ["mug", grows], out.message


def test_merging_a_look_alike_is_refused_and_a_decomposed_spelling_pools(tmp_path):
    name = _legacy_file(tmp_path, ["Mug"])
    c = _controller(tmp_path)
    c.teach("mug", _shots(1.0))
    before = _state(c)
    out = c.merge(name)
    assert not out.success and "looks like the known class 'mug'" in out.message and _state(c) == before
    both = _controller(tmp_path, "r2")  # a memory holding both: merged into an empty one, refused whole
    out = both.merge(_legacy_file(tmp_path, ["mug", "MUG"], "r2"))
    assert not out.success and "looks like the known class 'mug'" in out.message and both.classes == []
    decomposed = _legacy_file(tmp_path, [NFD], file="decomposed.safetensors")
    c.teach(NFC, _shots(5.0))
    out = c.merge(decomposed)
    assert out.success and c.classes == ["mug", NFC], out.message
    assert c.learner_.memory[NFC].n_samples == 12  # one class: the file's shots pooled with ours


class _Bus:
    def __init__(self) -> None:
        self.sent: list[ClassUpdate] = []

    def member(self, controller: LearnerController, robot: str) -> FleetMember:
        m = FleetMember(controller, FleetSettings("home", robot), self.sent.append, clock=lambda: 0.0)
        controller.on_change = m.on_change
        return m


def test_a_peer_cannot_add_or_rename_to_a_look_alike_and_its_decomposed_class_pools(tmp_path):
    bus = _Bus()
    c1, c2 = _controller(tmp_path, "r1"), _controller(tmp_path, "r2")
    m1, m2 = bus.member(c1, "robot1"), bus.member(c2, "robot2")
    c2.teach("mug", _shots(1.0))
    c2.teach(NFC, _shots(5.0, seed=3))
    c1.teach("Mug", _shots(1.0, seed=1))
    c1.teach("bowl", _shots(3.0, seed=2))
    before = _state(c2)
    said = [m2.receive(u) for u in bus.sent if u.robot == "robot1"]
    assert not said[0].applied and "looks like the known class 'mug'" in said[0].message, said[0].message
    assert said[1].applied and c2.classes == ["mug", NFC, "bowl"] and list(before[0]) == ["mug", NFC]
    n = len(bus.sent)
    assert c1.forget("Mug").success and c1.rename("bowl", "MUG").success
    said = [m2.receive(u) for u in bus.sent[n:] if u.robot == "robot1"]
    assert not said[1].applied and "looks like the known class 'mug'" in said[1].message, said[1].message
    assert c2.classes == ["mug", NFC, "bowl"]  # its LEARNED 'MUG' that follows: already held as 'bowl'
    # a peer's class stored decomposed (taught before names were composed) pools with ours
    c1.learner_.teach(NFD, _shots(5.0, seed=5))
    n = len(bus.sent)
    m1.on_change()
    update = next(u for u in bus.sent[n:] if u.op == LEARNED and u.class_name == NFD)
    r = m2.receive(update)
    assert r.applied and c2.classes == ["mug", NFC, "bowl"], r.message
    assert c2.learner_.memory[NFC].n_samples == 12
