"""bench/bench_real_ros.py's scoring and plan without ROS or the real frames (issue 20, outcome 3):
a detection counts for the labelled object it matches one to one at IoU >= 0.5, and "carries the
taught name" only when it is known and named so."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
from real_rgbd_set import RealFrame  # bench/ (pytest.ini)

from cbcl_pr_ros.perception.types import CameraIntrinsics

REPO = Path(__file__).resolve().parents[2]


def _bench():
    import bench_real_ros  # bench/ is on the tests' path (pytest.ini)

    return bench_real_ros


def _frame(fid: str, objects: list[tuple[str, tuple[int, int, int, int]]], source: str = "s") -> RealFrame:
    return RealFrame(fid, source, "scene", [], np.zeros((120, 160, 3), np.uint8), np.zeros((120, 160), np.float32),
                     CameraIntrinsics(100.0, 100.0, 80.0, 60.0), objects)


def _det(*objs: tuple[tuple[int, int, int, int], str, bool]) -> SimpleNamespace:
    return SimpleNamespace(objects=[SimpleNamespace(x0=b[0], y0=b[1], x1=b[2], y1=b[3], label=label, known=known)
                                    for b, label, known in objs])


def test_detections_are_counted_against_the_labels():
    bench = _bench()
    teach = _frame("t", [("mug", (0, 0, 20, 20)), ("can", (40, 0, 60, 20))])
    other = _frame("o", [("mug", (0, 0, 20, 20)), ("can", (40, 0, 60, 20)), ("box", (80, 0, 100, 20))])
    c = bench.Counts()
    bench.score_frame(_det(((1, 0, 20, 20), "mug", True),      # the taught one, named
                           ((40, 0, 60, 20), "mug", True),     # an object of the teaching frame, named: wrong
                           ((80, 0, 100, 20), "mug", False),   # unseen object, nearest "mug" but unknown: fine
                           ((120, 60, 150, 100), "mug", True)),  # background, named
                      other, "mug", teach, c)
    s = c.summary()
    assert (s["taught_matched"], s["taught_named"]) == (1, 1)
    assert (s["other_matched"], s["other_named"]) == (2, 1)
    assert (s["other_in_teach_frame_matched"], s["other_in_teach_frame_named"]) == (1, 1)
    assert (s["other_unseen_matched"], s["other_unseen_named"]) == (1, 0)
    assert (s["unmatched"], s["unmatched_named"], s["other_named_rate"]) == (1, 1, 0.5)
    c2 = bench.Counts()
    bench.score_frame(_det(((0, 0, 8, 8), "mug", True)), other, "mug", teach, c2)  # IoU < 0.5: no match
    assert c2.n["taught_matched"] == 0 and c2.n["unmatched_named"] == 1 and c2.summary()["taught_named_rate"] is None


def test_the_plan_teaches_instances_seen_twice_with_a_seeded_frame():
    bench = _bench()
    frames = [_frame("a", [("mug", (0, 0, 20, 20)), ("can", (40, 0, 60, 20))]),
              _frame("b", [("mug", (0, 0, 20, 20))]),
              _frame("c", [("mug", (0, 0, 20, 20))], source="other")]  # same name, another source: another instance
    assert [(s, n, ids) for s, n, ids in bench.eligible(frames)] == [("s", "mug", ["a", "b"])]
    plan = bench.plan(frames, seeds=3, per_seed=5)
    assert [p[:3] for p in plan] == [(k, "s", "mug") for k in range(3)] and {p[3] for p in plan} <= {"a", "b"}
    assert plan == bench.plan(frames, seeds=3, per_seed=5)
