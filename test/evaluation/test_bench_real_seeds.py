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
                3: [_prop((10, 10, 40, 40))]}[config.seed]

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
