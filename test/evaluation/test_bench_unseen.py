"""bench/bench_unseen.py: the unseen frames are scored apart from empty bins, a run that gives other proposals
the second time is named, and a 3D position away from its own pixels is counted. No real frames needed."""
from __future__ import annotations

import numpy as np
from real_rgbd_set import RealFrame  # bench/ (pytest.ini)

from cbcl_pr_ros.perception.types import CameraIntrinsics, Proposal

K = CameraIntrinsics(100.0, 100.0, 80.0, 60.0)


def _frame(fid: str, objects: list) -> RealFrame:
    return RealFrame(fid, "s", "scene", [], np.zeros((120, 160, 3), np.uint8), np.full((120, 160), 0.5, np.float32),
                     K, objects)


def _prop(box, centroid=(np.nan,) * 3) -> Proposal:
    mask = np.zeros((120, 160), bool)
    mask[box[1]:box[3], box[0]:box[2]] = True
    return Proposal(box, mask, np.asarray(centroid, float), np.full(3, 0.05), 1.0)


def test_a_centroid_away_from_its_pixels_is_counted() -> None:
    from bench_unseen import placement_problems

    depth = np.full((120, 160), 0.5, np.float32)
    # pixels 20..40 x 20..40 at 0.5 m: their middle (30, 30) is at x = y = (30 - 80 or 60) * 0.5 / 100
    right = _prop((20, 20, 40, 40), ((30 - 80) * 0.5 / 100, (30 - 60) * 0.5 / 100, 0.52))
    aside = _prop((20, 20, 40, 40), ((130 - 80) * 0.5 / 100, (30 - 60) * 0.5 / 100, 0.5))  # projects at u = 130
    behind = _prop((20, 20, 40, 40), ((30 - 80) * 0.7 / 100, (30 - 60) * 0.7 / 100, 0.7))  # 20 cm behind them
    flat = _prop((20, 20, 40, 40))  # no 3D claimed: not looked at
    out = placement_problems([right, aside, behind, flat], depth, K)
    assert out == {"with_3d": 3, "not_finite_or_behind": 0, "far_from_own_readings": 2, "projects_outside_box": 1}


def test_empty_frames_count_apart_and_a_changing_answer_is_named() -> None:
    from bench_unseen import run_method

    calls = {"n": 0}

    def run(fr):
        calls["n"] += 1
        if fr.id == "empty":
            return [_prop((100, 80, 120, 100))], 0
        if fr.id == "flaky" and calls["n"] % 2 == 0:  # a different answer on the second call
            return [_prop((10, 10, 40, 40)), _prop((60, 60, 70, 70))], 0
        return [_prop((10, 10, 40, 40))], 0

    frames = [_frame("a", [("mug", (10, 10, 40, 40)), ("can", (60, 10, 90, 40))]),
              _frame("flaky", [("mug", (10, 10, 40, 40))]), _frame("empty", [])]
    out = run_method("m", run, frames, repeats=1, pictures=None)
    assert out["pooled"]["objects"] == 3 and out["pooled"]["frames"] == 2  # the empty frame is not in them
    assert out["per_source"]["s"]["recall"] == round(2 / 3, 3)
    assert out["empty_frames"] == {"s": {"frames": 1, "proposals": 1}}
    assert out["same_proposals_twice"] is False and out["frames_that_differed"] == ["flaky"]
    assert out["failure_kinds"]["s"]["objects"]["found"] == 2 and out["failure_kinds"]["s"]["objects"]["missed"] == 1
