"""objects/extract.py: one RGB-D frame to its objects in one backbone batch, without ROS, and on to
the learner's tracks (objects/stream.py): the path of one frame to ``detections`` minus the messages."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from extractor_table import MeanColourBackbone, two_objects
from scipy.spatial.transform import Rotation

import cbcl_pr_ros.objects.extract as extract_mod
from cbcl_pr_ros.objects import ExtractSettings, ObjectReuse, ObjectStream, extract_objects
from cbcl_pr_ros.objects.extract import up_axis, usable_depth
from cbcl_pr_ros.objects.pieces import PIECES
from cbcl_pr_ros.perception import CameraIntrinsics, Proposal
from cbcl_pr_ros.perception.camera_pose import CameraPose
from cbcl_pr_ros.runtime.stage_times import StageTimes


def test_one_frame_gives_the_frame_vector_and_each_object_in_one_batch():
    rgb, depth, k = two_objects()
    bb, times = MeanColourBackbone(), StageTimes()
    out = extract_objects(rgb, depth, k, None, bb, ObjectReuse(), ExtractSettings(), times=times)
    frame = out.objects
    assert len(frame.proposals) == 2 and all(p.has_depth for p in frame.proposals)
    assert bb.batches == [3]  # the frame and both crops, one call
    assert frame.features.shape == (2, bb.feature_dim) and frame.shape == (480, 640)
    np.testing.assert_allclose(out.frame_feature[:3], rgb.reshape(-1, 3).mean(axis=0), rtol=1e-3)
    left, right = sorted(range(2), key=lambda i: frame.proposals[i].box[0])
    assert frame.features[left][0] > frame.features[left][2]  # the red box's crop
    assert frame.features[right][2] > frame.features[right][0]  # the blue box's crop
    assert out.depth_note == "" and not out.depth_refused and frame.joins.pairs == ()
    assert {"proposals", "backbone_objects"} <= set(times.summary())


def test_a_still_picture_goes_through_the_backbone_once_unless_reuse_is_off():
    rgb, depth, k = two_objects()
    bb, reuse = MeanColourBackbone(), ObjectReuse(refresh_frames=100)
    first = extract_objects(rgb, depth, k, None, bb, reuse)
    again = extract_objects(rgb.copy(), depth, k, None, bb, reuse)
    assert bb.batches == [3]
    np.testing.assert_array_equal(again.objects.features, first.objects.features)
    np.testing.assert_array_equal(again.frame_feature, first.frame_feature)
    extract_objects(rgb, depth, k, None, bb, reuse, ExtractSettings(reuse_still_crops=False))
    assert bb.batches == [3, 3]


def test_depth_that_cannot_be_placed_is_dropped_with_the_reason():
    rgb, depth, k = two_objects()
    assert usable_depth(None, k, None, rgb.shape) == (None, k, "", False)
    d, K, note, refused = usable_depth(depth, None, None, rgb.shape)
    assert d is None and K is None and "no CameraInfo" in note and not refused
    d, K, note, refused = usable_depth(depth, k, (640, 640), rgb.shape)  # calibrated for another aspect ratio
    assert d is None and K is None and "another aspect ratio" in note
    d, K, note, refused = usable_depth(depth, k, (1280, 960), rgb.shape)  # a resized stream: scaled
    assert d is depth and K.fx == pytest.approx(k.fx / 2) and note == ""
    d, K, note, refused = usable_depth(depth * 1000.0, k, None, rgb.shape)  # millimetres
    assert d is None and K is k and refused and note.startswith("depth not used")
    bb = MeanColourBackbone()
    out = extract_objects(rgb, depth * 1000.0, k, None, bb, ObjectReuse())
    assert out.depth_refused and not any(p.has_depth for p in out.objects.proposals)


def test_gravity_comes_from_the_camera_pose_when_it_is_known(monkeypatch):
    down = CameraPose(np.zeros(3), Rotation.from_euler("x", 180, degrees=True), "base")  # optical z = base -z
    np.testing.assert_allclose(up_axis(down), (0.0, 0.0, -1.0), atol=1e-12)
    assert up_axis(None) is None
    seen = []
    real = extract_mod.propose
    monkeypatch.setattr(extract_mod, "propose", lambda *a: seen.append(a[3]) or real(*a))
    rgb, depth, k = two_objects()
    tilted = CameraPose(np.zeros(3), Rotation.from_euler("x", -120, degrees=True), "base")
    geometry = ExtractSettings(segmenter=None)  # the geometry's proposals, whose config is seen here
    extract_objects(rgb, depth, k, None, MeanColourBackbone(), ObjectReuse(), geometry)
    extract_objects(rgb, depth, k, tilted, MeanColourBackbone(), ObjectReuse(), geometry)
    assert seen[0] is None
    np.testing.assert_allclose(seen[1].up_axis, tilted.rotation.inv().apply([0.0, 0.0, 1.0]))


def _touching_pieces(h: int = 120, w: int = 160) -> tuple[np.ndarray, np.ndarray, CameraIntrinsics, list[Proposal]]:
    """A flat grey picture, its depth and two touching pieces of one surface (test_pieces.py's)."""
    K = CameraIntrinsics(fx=200.0, fy=200.0, cx=80.0, cy=60.0)
    depth = np.zeros((h, w), np.float32)
    pieces = []
    for x0, x1 in ((40, 60), (60, 90)):
        mask = np.zeros((h, w), bool)
        mask[40:80, x0:x1] = True
        depth[mask] = 0.5
        cx = ((x0 + x1) / 2 - K.cx) / K.fx * 0.5
        pieces.append(Proposal((x0, 40, x1, 80), mask, np.array([cx, 0.0, 0.52]),
                               np.array([(x1 - x0) / K.fx * 0.5, 0.1, 0.04]), 0.9))
    return np.full((h, w, 3), 90, np.uint8), depth, K, pieces


def test_candidate_joins_travel_in_the_same_batch_with_their_union_vectors(monkeypatch):
    rgb, depth, K, pieces = _touching_pieces()
    monkeypatch.setattr(extract_mod, "propose", lambda *a: list(pieces))
    monkeypatch.setattr(extract_mod, "depth_problem", lambda *a: "")
    bb = MeanColourBackbone()
    out = extract_objects(rgb, depth, K, None, bb, ObjectReuse(), ExtractSettings(segmenter=None))  # those pieces
    joins = out.objects.joins
    assert joins.pairs == ((0, 1),) and len(joins.unions) == 1 and joins.features.shape == (1, bb.feature_dim)
    assert joins.unions[0].box == (40, 40, 90, 80)
    assert bb.batches == [4]  # the frame, two pieces, their union
    none = ExtractSettings(policy=replace(PIECES, join_candidates=0), segmenter=None)
    assert extract_objects(rgb, depth, K, None, bb, ObjectReuse(), none).objects.joins.pairs == ()


def _predictions(frame, labels):
    return [SimpleNamespace(label=lab, known=bool(lab), top_labels=[lab or "x"], top_scores=[0.9], distance=0.5)
            for lab in labels[:len(frame.proposals)]]


def test_a_frame_reaches_the_tracks_and_keeps_its_ids():
    rgb, depth, k = two_objects()
    bb, reuse = MeanColourBackbone(), ObjectReuse()
    stream = ObjectStream(window=3, max_missed=2, max_distance_m=0.1)
    ids = []
    for stamp in (0.0, 0.1):
        frame = extract_objects(rgb, depth, k, None, bb, reuse).objects
        tracks = stream.update(frame, _predictions(frame, ["mug", "duck"]), stamp)
        ids.append(sorted(t.id for t in tracks))
    assert ids[0] == ids[1] and len(ids[0]) == 2
    views = stream.track_views(ids[0][0], 5)
    assert views.rows.shape == (2, bb.feature_dim) and len(views.others) == 2


def test_bad_settings_are_refused():
    for bad in ({"max_objects": 0}, {"max_objects": True}, {"crop_margin": 3.0}, {"policy": {"join_candidates": 3}}):
        with pytest.raises((ValueError, TypeError)):
            ExtractSettings(**bad)


@pytest.mark.parametrize("k, size", [
    ([1e-300, 0.0, 320.0, 0.0, 1e-300, 240.0, 0.0, 0.0, 1.0], None),  # hybrid: ZeroDivisionError
    ([500.0, 0.0, 1e308, 0.0, 500.0, 1e308, 0.0, 0.0, 1.0], (320, 240)),  # scaled to inf: ValueError
    ([1e30, 0.0, 320.0, 0.0, 1e30, 240.0, 0.0, 0.0, 1.0], None),  # every point on the optical axis
    ([500.0, 0.0, -1e6, 0.0, 500.0, 240.0, 0.0, 0.0, 1.0], None),
])
def test_a_camera_info_no_camera_has_loses_the_3d_not_the_frame(k, size):
    """Whoever publishes CameraInfo chooses K: one that no camera has for the image (finite, positive) made
    every frame raise in the proposals, so the extractor published nothing while it was the last one."""
    rgb, depth, _ = two_objects()
    K = CameraIntrinsics.from_k(k)
    for settings in (ExtractSettings(), ExtractSettings(segmenter=None)):
        out = extract_objects(rgb, depth, K, None, MeanColourBackbone(), ObjectReuse(), settings,
                              calibrated_size=size)
        assert out.frame_feature.shape == (6,) and len(out.objects.proposals) >= 1
        assert not any(p.has_depth for p in out.objects.proposals)
        assert "is no camera's for a 640x480 image" in out.depth_note and "RGB-only" in out.depth_note
