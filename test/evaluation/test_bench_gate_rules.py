"""bench_gate_rules: the offline gate rules answer as the learner's gate does, so the rules compared there
stand for the product's. On made-up frames (no features needed) the learner's answers of
``bench_first_shot.run_source`` are compared with the offline shipped rule on the captured gate inputs,
for every protocol and negatives kind, at 1 and 5 shots, and with the radius for every class (the rule
before) where the learner is made to give every class its radius; on made-up benchmark sets, the
offline shipped rule gives ``bench_gate_sets.run``'s accepted and rejected figures."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import bench_gate_rules as rules  # bench/ (pytest.ini)
from bench_first_shot import run_source
from gate_capture import capture_first_shot


def _frames(n: int = 9) -> list[dict]:
    """``n`` frames of one crowded table: objects a-l, each in most frames, sparse random vectors (far
    apart, as distinct objects' features are); the jittered copies of every other object are near
    copies (one view), of the others unrelated vectors (several views)."""
    rng = np.random.default_rng(1)
    names = list("abcdefghijkl")
    out = []
    for i in range(n):
        here = [x for j, x in enumerate(names) if (i + j) % 4]
        obj = (rng.random((len(here), 16)) ** 4).astype(np.float32)
        jit = (rng.random((len(here), 9, 16)) ** 4).astype(np.float32)
        for k, name in enumerate(here):
            if names.index(name) % 2 == 0:
                jit[k] = obj[k] * rng.uniform(0.97, 1.03, (9, 16)).astype(np.float32)
        out.append({"id": f"t_{i}", "source": "t", "names": here, "obj": obj, "jit": jit})
    return out


def _learner_known(out: dict, kinds: np.ndarray) -> np.ndarray:
    """The learner's known/unknown per classified object, in the capture's order."""
    taught, untaught = iter(out["taught_accepted"]), iter(out["untaught_rejected"])
    return np.array([next(taught) if k.startswith("taught") else not next(untaught) for k in kinds])


@pytest.fixture(autouse=True)
def _the_gate_alone(monkeypatch):
    """The rules here judge each vector alone: the learner's one-place rule over a frame's objects,
    which they do not model, is turned off in its runs."""
    from cbcl_pr_ros.core import one_place

    monkeypatch.setattr(one_place, "TWIN", None)


SHIPPED = rules.VARIANTS["shipped: radius only with several views, veto 1.02"][0]
BEFORE = rules.VARIANTS["before: radius for every class, veto 1.02"][0]


@pytest.mark.parametrize("shots", [1, 5])
@pytest.mark.parametrize("protocol,negatives", [("teaching_frame", "frames"), ("stream", "frames+stream"),
                                                ("stream", "frames+stream_all"),
                                                ("stream", "frames+stream_covisible")])
def test_the_offline_shipped_rule_is_the_learners_gate(protocol, negatives, shots):
    frs = _frames()
    for seed in range(3):
        cap = capture_first_shot(frs, seed, shots, protocol, negatives)
        assert cap is not None and len(cap["x"])
        p = rules.prepare(cap)
        learner = _learner_known(run_source(frs, seed, shots, None, protocol, negatives), cap["kind"])
        assert np.array_equal(rules.known(p, SHIPPED), learner)
        if shots == 5 and p["m"] >= 20:  # both kinds of class were in play
            assert (p["extent"] < 0.375).any() and (p["extent"] >= 0.375).any()


def test_the_offline_rules_tell_the_radius_rules_apart_as_the_learner_does(monkeypatch):
    """Where a one-view class's radius would have refused an object, the learner (one view keeps the
    global radius) and the offline shipped rule accept it; with every class given its radius the
    learner answers as the offline rule before."""
    import cbcl_pr_ros.core.learner as learner_mod

    frs = _frames()
    caps = {seed: capture_first_shot(frs, seed, 5, "stream", "frames+stream") for seed in range(10)}
    now = {seed: _learner_known(run_source(frs, seed, 5, None, "stream", "frames+stream"), c["kind"])
           for seed, c in caps.items()}
    monkeypatch.setattr(learner_mod, "RADIUS_MIN_EXTENT", 0.0)  # every class counts as several views
    before = {seed: _learner_known(run_source(frs, seed, 5, None, "stream", "frames+stream"), c["kind"])
              for seed, c in caps.items()}
    differ = 0
    for seed, cap in caps.items():
        p = rules.prepare(cap)
        assert np.array_equal(rules.known(p, SHIPPED), now[seed])
        assert np.array_equal(rules.known(p, BEFORE), before[seed])
        differ += int((now[seed] != before[seed]).sum())
        assert (now[seed] >= before[seed]).all()  # the rule only gives back what a radius took
    assert differ >= 1


def _made_up_set(rng: np.random.Generator, classes: int, centre: float) -> SimpleNamespace:
    """A benchmark set of ``classes`` classes around ``centre``: each class a direction, its images
    that direction plus noise large enough that some other views lie near a negative."""
    dim = 16
    means = centre + rng.random((classes, dim)) ** 3

    def split(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = np.repeat(np.arange(classes), n)
        return (means[y] + rng.normal(0, 0.25, (len(y), dim))).astype(np.float32), y

    (train_x, train_y), (test_x, test_y) = split(12), split(20)
    return SimpleNamespace(train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y, dim=dim)


@pytest.mark.parametrize("shots", [1, 5])
def test_the_offline_shipped_rule_gives_bench_gate_sets_figures(shots):
    """The benchmark sets' capture scored with the offline shipped rule gives bench_gate_sets's taught
    accepted and other set rejected (first increment and mean over increments), and the diagnosis
    accounts for every taught image once (accepted, refused by the radius or by the veto)."""
    from bench_gate_sets import run
    from gate_capture import capture_gate_sets

    rng = np.random.default_rng(3)
    fs, other = _made_up_set(rng, 6, 0.0), _made_up_set(rng, 4, 0.1)  # some of the other set let in
    pool = (rng.random((300, 16)) ** 3 + 0.5).astype(np.float32)
    runs = {seed: [rules.prepare(p) for p in capture_gate_sets(fs, other.test_x, shots, seed, pool)] for seed in range(2)}
    offline = rules.gate_sets_figures(runs, SHIPPED)
    learner = [run(fs, other, shots, seed, 128, None, pool) for seed in range(2)]
    for part, key in (("first", "acc_first"), ("mean", "acc_mean")):
        assert offline[key] == round(float(np.mean([r[part]["accepted_taught"] for r in learner])), 3)
    for part, key in (("first", "rej_first"), ("mean", "rej_mean")):
        assert offline[key] == round(float(np.mean([r[part]["rejected_other_set"] for r in learner])), 3)
    why = rules.diagnose(runs)
    shares = [why["taught"][f"share_{b}"] for b in ("accepted", "radius", "veto")]
    assert abs(sum(shares) - 1.0) < 2e-3 and why["taught"]["share_accepted"] == offline["acc_first"]
    assert why["taught"]["share_radius"] > 0 and why["taught"]["share_veto"] > 0  # both refusals were in play
