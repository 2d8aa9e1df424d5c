"""How the main job scores the robot's answers against the simulator's truth (no ROS): box matching,
votes across views (a quarter at the image border), the best view for localisation, objects not found."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from cbcl_pr_ros.robot.demo_scoring import TableScore, TruthObject, ViewTruth, match_boxes

QUAT = np.array([0.0, 0.0, 0.0, 1.0])  # optical frame = base frame: centroids are base-frame points


def _det(box, label, conf, centre=(np.nan, np.nan, np.nan), track=1):
    c = SimpleNamespace(x=centre[0], y=centre[1], z=centre[2])
    return SimpleNamespace(x0=box[0], y0=box[1], x1=box[2], y1=box[3], label=label, confidence=conf, id=track, centroid=c)


def test_boxes_match_greedily_by_overlap_once_each():
    truth = [TruthObject("a", "mug", (0, 0, 10, 10), 100), TruthObject("b", "can", (20, 0, 30, 10), 100)]
    assert match_boxes([(21, 0, 30, 10), (0, 0, 9, 10), (2, 0, 10, 10), (50, 50, 60, 60)], truth) == [1, 0, None, None]


def test_votes_across_views_border_weight_and_not_found():
    positions = {"a": np.array([0.5, 0.1, 0.2]), "b": np.array([0.6, -0.1, 0.2]), "c": np.array([0.7, 0.0, 0.2])}
    truth = ViewTruth([TruthObject("a", "mug", (10, 10, 30, 30), 300), TruthObject("b", "can", (0, 40, 20, 60), 200)],
                      np.zeros(3), QUAT, (100, 80))
    score = TableScore(positions)
    flags = score.add_view(0, [_det((10, 10, 30, 30), "mug", 0.6, (0.51, 0.1, 0.2)),
                               _det((0, 40, 20, 60), "mug", 0.9),  # at the border: a quarter of a vote
                               _det((70, 0, 90, 20), "can", 1.0)], truth)
    assert flags == [True, False, None]
    flags = score.add_view(1, [_det((3, 40, 20, 60), "can", 0.5)], truth)  # off the border: a whole vote
    assert flags == [True]
    answers = score.answers([("a", "mug"), ("b", "can"), ("c", "duck")])
    assert [r["predicted"] for r in answers] == ["mug", "can", "(not found)"]  # can 0.5 beats mug 0.9 / 4
    assert [r["correct"] for r in answers] == [True, True, False]
    assert answers[0]["localisation_error_m"] == 0.01 and np.isnan(answers[1]["localisation_error_m"])
    assert answers[1]["votes"] == {"mug": 0.225, "can": 0.5}
    assert score.single == [True, False, True]
    assert answers[1]["view"] == 1  # localisation from the view off the border
