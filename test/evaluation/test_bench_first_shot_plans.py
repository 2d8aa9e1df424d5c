"""bench_first_shot's protocols: what is taught, what the robot watched before (the stream) and what is
classified, on made-up frames (no features needed): no classified frame was in the stream, each
taught object is classified in a frame other than its teaching one, and the split is seeded."""
from __future__ import annotations

import numpy as np

from bench_first_shot import run_source, stream_plan, teaching_frame_plan  # bench/ (pytest.ini)


def _frames(n: int = 9) -> list[dict]:
    """``n`` frames of one table: objects a-f, each in most frames, random vectors."""
    rng = np.random.default_rng(0)
    names = list("abcdef")
    out = []
    for i in range(n):
        here = [x for j, x in enumerate(names) if (i + j) % 4]
        out.append({"id": f"t_{i}", "source": "t", "names": here,
                    "obj": rng.random((len(here), 16)).astype(np.float32),
                    "jit": rng.random((len(here), 9, 16)).astype(np.float32)})
    return out


def test_the_stream_is_never_classified_and_taught_objects_are_seen_again():
    frs = _frames()
    for seed in range(5):
        plan = stream_plan(frs, seed)
        assert plan is not None and len(plan.stream) == 3 and len(plan.test) == 6
        stream_ids, test_ids = {f["id"] for f in plan.stream}, {f["id"] for f in plan.test}
        assert not stream_ids & test_ids and stream_ids | test_ids == {f["id"] for f in frs}
        for name in plan.taught:
            assert plan.teach_frame[name] in test_ids
            assert sum(name in f["names"] for f in plan.test) >= 2  # classified in another frame
        assert plan == stream_plan(frs, seed)
    assert len({stream_plan(frs, s).stream[0]["id"] for s in range(5)}) > 1  # the order is the seed's


def test_the_teaching_frame_protocol_has_no_stream():
    frs = _frames()
    plan = teaching_frame_plan(frs, 0)
    assert plan is not None and plan.stream == () and len(plan.test) == len(frs)
    assert stream_plan(frs[:2], 0) is None  # too few frames to watch before a teach


def test_stream_negatives_split_the_never_taught_objects():
    frs = _frames()
    out = run_source(frs, 0, 1, None, "stream", "frames+stream")
    seen = {k for k in out if k.startswith("untaught_") and k.endswith("_rejected")}
    assert "untaught_rejected" in seen and seen <= {"untaught_rejected", "untaught_in_stream_rejected",
                                                      "untaught_in_teaching_frame_rejected",
                                                      "untaught_never_seen_rejected"}
    frames_only = run_source(frs, 0, 1, None, "stream", "frames")
    assert out["negatives_kept"][0] > frames_only["negatives_kept"][0]  # the stream added negatives


def test_track_views_mirror_the_product_teach(monkeypatch):
    """``track_shots``: at most TRACK_CAP stream views of the taught object, the product's guard against
    the other objects of each view's frame, one shot per view (a view in the teaching box adds nothing)."""
    import bench_first_shot as bfs

    frs = _frames()
    boxes = {f["id"]: [(40 * j + 5 * i, 0, 40 * j + 30 + 5 * i, 30) for j in range(len(f["names"]))]
             for i, f in enumerate(frs)}
    monkeypatch.setattr(bfs, "_BOXES", boxes)
    plan = stream_plan(frs, 0)
    name = sorted(plan.taught)[0]
    teach = next(f for f in frs if f["id"] == plan.teach_frame[name])
    shot = teach["obj"][teach["names"].index(name)][None]
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    learner = CBCLPRLearner(LearnerConfig(seed=0), backbone="efficientnet_lite0", feature_dim=16)
    extra, counts = bfs.track_shots(learner, name, shot, teach, plan.stream, None, "all")
    seen = [g for g in plan.stream if name in g["names"]]
    assert counts["views"] == min(len(seen), bfs.TRACK_CAP) == counts["kept"] and len(extra) == counts["shots"]
    _, guarded = bfs.track_shots(learner, name, shot, teach, plan.stream, None, "frame")
    assert guarded["kept"] <= counts["kept"]
    out = run_source(frs, 0, 1, None, "stream", "frames+stream_covisible", "frame")
    assert sum(out["track_views"]) >= sum(out["track_kept"]) >= sum(out["track_shots"])


def test_the_recorded_confidence_parts_give_back_the_learners_confidence():
    """``confidence_parts`` and ``gate_confidence``: the product's curve (``GATE_SOFTNESS``, one half on
    the boundary) recomputed from the recorded parts is the confidence the learner answered, one-place
    refusals included; another curve changes the confidences, and an unknown answer stays below one half."""
    from bench_first_shot import gate_confidence

    from cbcl_pr_ros.core.open_set import GATE_SOFTNESS

    frs = _frames()
    outs = [run_source(frs, seed, 1, None, "stream", "frames+stream") for seed in range(3)]
    parts = [p for out in outs for p in out["conf_parts"]]
    conf = np.array([c for out in outs for c in out["conf"]])
    assert len(parts) == len(conf) > 0
    assert np.allclose(gate_confidence(parts, GATE_SOFTNESS, 1.0), conf, atol=1e-6)
    softer = gate_confidence(parts, 0.15, 1.0)
    assert not np.allclose(softer, conf)
    ratios = np.array([p[1] for p in parts])
    assert np.all((softer < 0.5)[ratios >= 1.0])  # unknown answers stay below one half under any curve


def test_the_gate_is_chosen_without_the_held_out_table(monkeypatch):
    """``gate_loso``: each table's candidate is chosen on the other tables alone (a table whose own
    frames change keeps its choice), the shipped extent is restored, and every candidate is
    reported over all tables and per table."""
    import bench_first_shot as bfs
    import cbcl_pr_ros.core.learner as learner_mod

    monkeypatch.setattr(bfs, "GATE_RULES", ((0.9, 0.0), (1.2, 0.0)))
    monkeypatch.setattr(bfs, "GATE_EXTENTS", (0.0, 0.375))
    one, two = _frames(), _frames()
    for f in two:
        f["source"], f["id"] = "u", f["id"].replace("t_", "u_")
        f["obj"] = (f["obj"] + 0.5).astype(np.float32)
    by = {"t": one, "u": two}
    regimes = {("stream", "frames+stream_covisible"): 2, ("teaching_frame", "frames"): 1}
    out = bfs.gate_loso(by, regimes, [1, 5])
    assert learner_mod.GATE_MIN_EXTENT == 0.0
    assert len(out["sweep_correct_accepted_rejected"]) == 4
    for objective in ("chosen_on_default", "chosen_on_all"):
        assert set(out[objective]["chosen"]) == {"t", "u"}
        assert "stream/frames+stream_covisible/5_shot" in out[objective]
    assert set(out["default_per_source_accepted_rejected"]["0.9*m^0.0/extent_0.0"]["1_shot"]) == {"t", "u"}
    # the held-out table's own outcomes do not enter its choice: another table 't' leaves 'u''s choice
    # (made on 't') free to move, and 't''s (made on 'u') as it was
    other = [dict(f, obj=np.ascontiguousarray(f["obj"][:, ::-1])) for f in one]
    again = bfs.gate_loso({"t": other, "u": two}, regimes, [1, 5])
    assert again["chosen_on_all"]["chosen"]["t"] == out["chosen_on_all"]["chosen"]["t"]
