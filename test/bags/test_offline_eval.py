"""Offline evaluation straight from a bag: deterministic, per increment, data-set export."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.bags import BagFormatError, EventKind, read_session
from cbcl_pr_ros.bags.offline_eval import (
    bag_to_class_features,
    bag_to_class_images,
    evaluate_bag,
    evaluate_session,
    learner_params,
)

from .conftest import write_synthetic


@pytest.fixture(scope="module")
def backbone():
    from cbcl_pr_ros.features import make_backbone

    return make_backbone("efficientnet_lite0", runtime="onnx", threads=2)


def test_same_bag_twice_same_numbers(sim_bag, backbone):
    r1 = evaluate_bag(sim_bag, backbone=backbone)
    r2 = evaluate_bag(sim_bag, backbone=backbone)
    assert r1.to_dict(timings=False) == r2.to_dict(timings=False)
    # One increment per taught class; each tests every class learned so far with 2 views.
    assert [inc.taught for inc in r1.increments] == [["mug"], ["duck"], ["lego"]]
    assert [inc.n_test for inc in r1.increments] == [2, 4, 6]
    assert [len(inc.classes_known) for inc in r1.increments] == [1, 2, 3]
    assert r1.complete and not r1.teach_failures
    # Images through the backbone: 3 classes x 3 shots, each with its teach-time views, + 12 test frames.
    assert r1.n_frames_extracted == 9 * (1 + r1.params["teach_views"]) + 12
    assert len(r1.predictions) == 12
    # Accuracy is what the predictions say, not a separate number.
    scored = [p for p in r1.predictions if p.true_label]
    assert r1.accuracy == pytest.approx(np.mean([p.predicted_label == p.true_label and p.known for p in scored]))
    assert r1.accuracy >= 0.5  # distinct rendered objects; chance at the end is 1/3
    assert r1.agreement_with_recording is None  # a simulated bag holds no live answers


def test_mutations_follow_the_recording(tmp_path, backbone):
    write_synthetic(tmp_path / "bag", n_frames=8, size=(64, 64))
    session = read_session(tmp_path / "bag")
    from cbcl_pr_ros.settings.params import learner_factory

    p = learner_params()
    report = evaluate_session(session, backbone, learner_factory(p), p)
    # TEACH thing, 4 CLASSIFY, then RENAME thing->object and FORGET object: second increment.
    assert len(report.increments) == 2
    assert report.increments[0].classes_known == ["thing"]
    assert report.increments[1].classes_known == []
    assert all(p.predicted_label == "thing" for p in report.predictions)  # one class: always it
    assert report.agreement_with_recording == 1.0  # the bag recorded "thing" as the answer


def test_learner_params_follow_config_and_overrides(tmp_path):
    cfg = tmp_path / "p.yaml"
    cfg.write_text("/**:\n  ros__parameters:\n    threads: 1\n/**/learner:\n  ros__parameters:\n"
                   "    classifier: ncm\n    memory_path: /somewhere\n")
    p = learner_params(cfg, {"seed": 7})
    assert (p["threads"], p["classifier"], p["seed"], p["memory_path"]) == (1, "ncm", 7, "")
    with pytest.raises(ValueError, match="classifier"):
        learner_params(cfg, {"classifier": "magic"})


def test_dataset_export(sim_bag, backbone):
    train, test = bag_to_class_images(sim_bag)
    assert sorted(train) == ["duck", "lego", "mug"] and all(len(v) == 3 for v in train.values())
    assert {k: len(v) for k, v in test.items()} == {"mug": 6, "duck": 4, "lego": 2}
    assert all(im.dtype == np.uint8 and im.shape == (96, 96, 3) for v in train.values() for im in v)
    ftrain, ftest = bag_to_class_features(sim_bag, backbone)
    assert all(ftrain[k].shape == (3, backbone.feature_dim) for k in train)
    assert ftest["mug"].dtype == np.float32


def test_bag_without_teaching_is_refused(tmp_path, backbone):
    from cbcl_pr_ros.bags import TeachingBagWriter, TeachingEventRecord

    with TeachingBagWriter(tmp_path / "bag") as w:
        s = w.write_image("/camera/image_raw", np.zeros((8, 8, 3), np.uint8), 5)
        w.write_event(TeachingEventRecord(6, EventKind.CLASSIFY, "x", frame_stamps_ns=[s]))
    with pytest.raises(BagFormatError, match="no TEACH event"):
        evaluate_bag(tmp_path / "bag", backbone=backbone)
    with pytest.raises(BagFormatError, match="no TEACH event"):
        bag_to_class_images(tmp_path / "bag")


def test_evaluation_layer_loads_a_bag(sim_bag):
    from cbcl_pr_ros.evaluation.datasets.bags import load_bag_sessions

    ds = load_bag_sessions(sim_bag)
    assert ds.classes == ("duck", "lego", "mug")
    assert len(ds.train_images) == 9 and len(ds.test_images) == 12
    assert ds.meta["split"] == "as recorded"
    assert np.bincount(ds.train_labels).tolist() == [3, 3, 3]


def test_main_job_bag_evaluates_as_it_ran_live(backbone):
    """bench/bags/main_job_by_object (recorded from live nodes, taught by object) evaluates offline
    with the live answers it holds: labels, known and confidences."""
    from pathlib import Path

    bag = Path(__file__).resolve().parents[2] / "bench" / "bags" / "main_job_by_object"
    session = read_session(bag)
    assert session.format_version == 2 and {e.mode for e in session.events} == {1}
    report = evaluate_bag(bag, backbone=backbone)
    assert not report.teach_failures and len(report.predictions) == 12
    assert report.agreement_with_recording == 1.0
    for p in report.predictions:
        assert p.recorded_success and p.confidence == pytest.approx(p.recorded_confidence, abs=1e-4)
