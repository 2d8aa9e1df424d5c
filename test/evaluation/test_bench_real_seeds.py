"""bench/bench_real.py's RANSAC-seed spread (issue 20, outcome 2): every seed is scored with its own
seed, so a result that holds for one seed only shows in min / mean / max. No real frames needed."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from real_rgbd_set import RealFrame  # bench/ (pytest.ini)

import cbcl_pr_ros.perception as perception
from cbcl_pr_ros.perception.types import CameraIntrinsics, Proposal

REPO = Path(__file__).resolve().parents[2]


def _bench():
    import bench_real  # bench/ is on the tests' path (pytest.ini)

    return bench_real


def _frame(fid: str) -> RealFrame:
    return RealFrame(fid, "s", "scene", [], np.zeros((120, 160, 3), np.uint8), np.ones((120, 160), np.float32),
                     CameraIntrinsics(100.0, 100.0, 80.0, 60.0), [("mug", (10, 10, 40, 40)), ("can", (60, 10, 90, 40))])


def _prop(box) -> Proposal:
    return Proposal(box, None, np.full(3, np.nan), np.full(3, np.nan), 1.0)


def test_each_seed_is_scored_with_its_own_seed(monkeypatch: pytest.MonkeyPatch):
    bench = _bench()

    def fake_propose(rgb, depth, intrinsics, config):
        # seed 1 finds both objects, seed 2 merges them into one box, seed 3 finds the mug only
        return {1: [_prop((10, 10, 40, 40)), _prop((60, 10, 90, 40))], 2: [_prop((10, 10, 90, 40))],
                3: [_prop((10, 10, 40, 40))]}[config.rules.seed]

    monkeypatch.setattr(perception, "propose", fake_propose)
    first = {"recall_iou50": 0.5, "precision_iou50": 0.5, "merges_per_10_frames": 0.0, "merges": 0}
    out = bench.seed_spread([_frame("a"), _frame("b")], [0, 1, 2, 3], {}, first)
    per = out["per_seed"]
    assert list(per) == ["0", "1", "2", "3"] and per["0"] == first
    assert (per["1"]["recall_iou50"], per["1"]["precision_iou50"], per["1"]["merges"]) == (1.0, 1.0, 0)
    assert (per["2"]["recall_iou50"], per["2"]["merges"], per["2"]["merges_per_10_frames"]) == (0.0, 2, 10.0)
    assert (per["3"]["recall_iou50"], per["3"]["precision_iou50"]) == (0.5, 1.0)
    assert out["spread"]["recall_iou50"] == {"min": 0.0, "mean": 0.5, "max": 1.0}
    assert out["spread"]["merges_per_10_frames"]["max"] == 10.0


def _source_frame(fid: str, source: str) -> RealFrame:
    fr = _frame(fid)
    return RealFrame(fid, source, fr.scene, fr.tags, fr.rgb, fr.depth_m, fr.intrinsics, fr.objects)


def test_leave_one_source_out_chooses_on_the_other_sources(monkeypatch: pytest.MonkeyPatch):
    """Held out "a", the setting best on "b" is scored on "a", whatever suits "a" itself."""
    bench = _bench()
    both, mug = [_prop((10, 10, 40, 40)), _prop((60, 10, 90, 40))], [_prop((10, 10, 40, 40))]
    frames = [_source_frame("a0", "a"), _source_frame("a1", "a"), _source_frame("b0", "b")]
    for i, fr in enumerate(frames):  # the fake tells the frames apart by a pixel
        fr.rgb[0, 0, 0] = i
    sources = {0: "a", 1: "a", 2: "b"}

    def fake_propose(rgb, depth, intrinsics, config):
        # height_sigmas 4 suits source "a" only, 8 suits "b" only; 6 finds the mug alone everywhere
        suits = {4.0: "a", 8.0: "b"}.get(config.height_sigmas)
        return both if suits == sources[int(rgb[0, 0, 0])] else mug

    monkeypatch.setattr(perception, "propose", fake_propose)
    out = bench.leave_one_source_out(frames, {}, {"height_sigmas": (4.0, 6.0, 8.0), "seed_sigmas": (13.0,)})
    held_a, held_b = out["per_source"]["a"], out["per_source"]["b"]
    assert held_a["chosen_on_the_others"]["height_sigmas"] == 8.0 and held_a["held_out"]["recall"] == 0.5
    assert held_b["chosen_on_the_others"]["height_sigmas"] == 4.0 and held_b["held_out"]["recall"] == 0.5
    assert held_a["others"]["recall"] == 1.0 and held_a["held_out"]["frames"] == 2
    assert out["held_out_pooled"]["recall"] == 0.5 and out["held_out_pooled"]["objects"] == 6
