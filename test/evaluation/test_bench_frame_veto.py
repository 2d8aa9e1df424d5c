"""bench_frame_veto and bench_stream_refusals: the offline frame rules and the refusal trace answer as
the learner does, so what they compare and count stands for the product. On made-up frames (no
features needed) with look-alike pairs of objects, the offline shipped rule (the gate, then the
one-place rule over a frame's objects) gives ``bench_first_shot.run_source``'s answer for every
object, and the trace gives every refused taught answer one cause and the learner's figures."""
from __future__ import annotations

import numpy as np
import pytest

import bench_frame_veto as fv  # bench/ (pytest.ini)
from bench_first_shot import run_source
from bench_stream_refusals import report, trace


def _frames(n: int = 9) -> list[dict]:
    """``n`` frames of one table: objects a-l, each in most frames; b, d, f are look-alikes of a, c, e
    (their vector plus noise); each view scales every channel by 0.3-1.7, so that a taught object and its look-alike are often known as one class
    in one frame (the one-place rule's case) and a look-alike's negative vetoes the taught object."""
    rng = np.random.default_rng(4)
    names = list("abcdefghijkl")
    base = {x: rng.random(16) ** 4 for x in names}
    for twin, of in (("b", "a"), ("d", "c"), ("f", "e")):
        base[twin] = base[of] + rng.random(16) ** 4 * 0.6
    out = []
    for i in range(n):
        here = [x for j, x in enumerate(names) if (i + j) % 4]
        obj = np.stack([base[x] * rng.uniform(0.3, 1.7, 16) for x in here]).astype(np.float32)
        jit = (obj[:, None, :] * rng.uniform(0.95, 1.05, (len(here), 9, 16))).astype(np.float32)
        out.append({"id": f"t_{i}", "source": "t", "names": here, "obj": obj, "jit": jit})
    return out


def _learner_answers(out: dict, kinds: list[str]) -> np.ndarray:
    """The learner's known/unknown per classified object, in the capture's order (own teaching frame out)."""
    taught, untaught = iter(out["taught_accepted"]), iter(out["untaught_rejected"])
    return np.array([next(taught) if k.startswith("taught") else not next(untaught) for k in kinds if k != "skip"])


@pytest.mark.parametrize("twin", [None, 0.05])
@pytest.mark.parametrize("shots", [1, 5])
@pytest.mark.parametrize("protocol,negatives", [("teaching_frame", "frames"), ("stream", "frames"),
                                                ("stream", "frames+stream_covisible"),
                                                ("stream", "frames+stream_all")])
def test_the_offline_shipped_rule_is_the_learners_answer(protocol, negatives, shots, twin, monkeypatch):
    """With the shipped twin distance, and with a tiny one (so that the one-place rule is in play on
    these frames: any two objects of a frame known as one class cluster are not both it)."""
    from cbcl_pr_ros.core import one_place

    if twin is not None:
        monkeypatch.setattr(one_place, "TWIN", twin)
    frs = _frames()
    together = 0
    for seed in range(8):
        frames = fv.capture(frs, seed, shots, protocol, negatives)
        assert frames
        kinds = [k for fr in frames for k in fr["kind"]]
        offline = np.concatenate([fv.known(fr, None, 0.0)[fr["kind"] != "skip"] for fr in frames])
        assert np.array_equal(offline, _learner_answers(run_source(frs, seed, shots, None, protocol, negatives), kinds))
        # the rules' neutral settings are the shipped rule
        for rule in ((None, 0.0, 0.0, False, 0.0), (None, 0.0, 0.0)):
            assert np.array_equal(np.concatenate([fv.known(fr, *rule)[fr["kind"] != "skip"] for fr in frames]), offline)
        together += sum(int((fr["known_alone"] & ~fv.known(fr, None, 0.0)).sum()) for fr in frames)
    if twin is not None and protocol == "stream":  # (in the teaching-frame protocol every untaught
        # object of these frames stood in a teaching frame and is vetoed: no two known as one class)
        assert together >= 1  # the one-place rule turned a known answer unknown: it was in play


def test_a_looser_rule_only_adds_known_answers():
    """Each family loosens the shipped gate (a negative lifted or dropped, a radius kept, a looser
    ratio): before the one-place rule it accepts everything the shipped gate accepts."""
    frs = _frames()
    frames = [fr for seed in range(4) for fr in fv.capture(frs, seed, 5, "stream", "frames+stream_covisible")]
    looser = 0
    for rule in ((1.0, 99.0), (None, 0.0, 1.1), (None, 0.0, 0.0, True), (None, 0.0, 0.0, False, 0.1)):
        for fr in frames:
            alone = {**fr, "x": fr["x"] * 0 + np.arange(len(fr["x"]))[:, None] * 1e6}  # no two alike: no one-place
            shipped, loose = fv.known(alone, None, 0.0), fv.known(alone, *rule)
            assert (loose >= shipped).all()
            looser += int((loose > shipped).sum())
    assert looser >= 1


@pytest.mark.parametrize("negatives", ["frames+stream_covisible", "frames+stream_all"])
def test_the_trace_gives_each_refusal_one_cause_and_the_learners_figures(negatives):
    """Every refused taught answer has one cause, the trace's answers are the learner's, and with the
    covisible negatives no vetoing negative is a taught object (with the track lost, some are)."""
    frs = _frames()
    rows = [r for seed in range(8) for r in trace(frs, seed, 1, "stream", negatives)]
    out = [run_source(frs, seed, 1, None, "stream", negatives) for seed in range(8)]
    accepted = [a for o in out for a in o["taught_accepted"]]
    assert [r["known"] for r in rows] == accepted
    rep = report(rows)
    assert rep["refused"] == accepted.count(False)
    assert sum(rep["refused_by"].values()) == rep["refused"]
    assert set(rep["refused_by"]) <= {"one_place", "radius", "veto", "radius+veto"}
    taught = {(r["seed"], r["name"]) for r in rows}
    vetoed = [r for r in rows if not r["known"] and "veto" in r["refused_by"]]
    for r in vetoed:
        assert r["veto_over"] >= 1.0 and r["neg_origin"] in ("teaching_frame", "stream")
    assert vetoed  # the veto was in play
    self_vetoes = sum((r["seed"], r["neg_name"]) in taught for r in vetoed)
    if negatives == "frames+stream_covisible":
        assert self_vetoes == 0
    else:
        assert self_vetoes >= 1  # the taught object's own earlier view refused it
