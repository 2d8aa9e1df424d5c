"""Issue 12, ROS side without a graph: object messages, markers, debug drawing, teach-request checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cbcl_pr_ros.perception import ObjectObservation, ObjectTracker, Proposal
from cbcl_pr_ros.service.object_teaching import (MODE_DEFAULT, MODE_FRAME, MODE_OBJECT, TeachPlan, plan_teach,
                                                 roi_box, teaching_crops)

NAN3 = np.full(3, np.nan)


def _prop(box, centroid=(0.0, 0.0, 0.5)) -> Proposal:
    return Proposal(tuple(box), None, np.array(centroid, float), np.array([0.05, 0.08, 0.05]), 0.9)


def _header(sec=3, nanosec=500, frame="cam"):
    from std_msgs.msg import Header
    from builtin_interfaces.msg import Time

    return Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame)


# --------------------------------------------------------------------------- ObjectFeatures
def test_object_features_round_trip_keeps_boxes_centroids_and_rows() -> None:
    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg, object_features_from_msg

    props = [_prop((10, 20, 60, 90), (0.1, -0.05, 0.6)), _prop((100, 40, 130, 80), NAN3)]
    feats = np.arange(2 * 5, dtype=np.float32).reshape(2, 5)
    msg = make_object_features_msg(_header(), "bb", "prep", props, feats, (480, 640, 3))
    assert (msg.image_width, msg.image_height, msg.dimension) == (640, 480, 5)
    assert msg.header.stamp.sec == 3 and msg.header.frame_id == "cam"
    back, f = object_features_from_msg(msg, "bb", 5)
    np.testing.assert_array_equal(f, feats)
    assert [p.box for p in back] == [p.box for p in props]
    np.testing.assert_allclose(back[0].centroid, [0.1, -0.05, 0.6])
    assert not back[1].has_depth  # NaN survives the message


def test_object_features_bad_input_is_a_clear_value_error() -> None:
    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg, object_features_from_msg

    msg = make_object_features_msg(_header(), "bb", "prep", [_prop((0, 0, 5, 5))], np.ones((1, 4)), (10, 10))
    with pytest.raises(ValueError, match="backbone 'bb'"):
        object_features_from_msg(msg, "other")
    with pytest.raises(ValueError, match="dimension 4 does not match"):
        object_features_from_msg(msg, "bb", 8)
    msg.backbone = ""  # issue 22: an empty name skipped the check (tracked and taught anyway)
    with pytest.raises(ValueError, match="backbone '', this learner uses 'bb'"):
        object_features_from_msg(msg, "bb")
    msg.backbone = "bb"
    huge = make_object_features_msg(_header(), "bb", "prep", [_prop((0, 0, 5, 5))], np.full((1, 4), 3e30), (10, 10))
    with pytest.raises(ValueError, match="max_feature_abs"):
        object_features_from_msg(huge, "bb", 4, max_abs=1e6)
    assert object_features_from_msg(huge, "bb", 4)[1].shape == (1, 4)  # no cap given: finite is enough
    msg.values = msg.values[:3]
    with pytest.raises(ValueError, match="3 values for 1 objects"):
        object_features_from_msg(msg, "bb")
    with pytest.raises(ValueError, match="one feature row per proposal"):
        make_object_features_msg(_header(), "bb", "p", [_prop((0, 0, 5, 5))], np.ones((2, 4)), (10, 10))
    empty = make_object_features_msg(_header(), "bb", "p", [], np.zeros((0, 4)), (10, 10))
    props, f = object_features_from_msg(empty, "bb", 4)
    assert props == [] and f.shape[0] == 0


def _joins(props, rows):
    from cbcl_pr_ros.objects.frame import ObjectJoins
    from cbcl_pr_ros.objects.pieces import union_proposal

    return ObjectJoins(((0, 1),), (union_proposal(props[0], props[1]),), np.asarray(rows, np.float32))


def test_candidate_joins_travel_with_the_objects() -> None:
    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg, object_frame_from_msg

    props = [_prop((10, 20, 60, 90), (0.1, -0.05, 0.6)), _prop((60, 40, 80, 80), (0.14, -0.05, 0.6))]
    union_row = np.full((1, 5), 7.0)
    msg = make_object_features_msg(_header(), "bb", "prep", props, np.ones((2, 5)), (480, 640, 3),
                                   _joins(props, union_row))
    frame = object_frame_from_msg(msg, "bb", 5)
    assert frame.joins.pairs == ((0, 1),) and frame.joins.unions[0].box == (10, 20, 80, 90)
    np.testing.assert_array_equal(frame.joins.features, union_row)
    plain = make_object_features_msg(_header(), "bb", "prep", props, np.ones((2, 5)), (480, 640, 3))
    assert object_frame_from_msg(plain, "bb", 5).joins.pairs == ()  # an extractor that sends none


@pytest.mark.parametrize("spoil,why", [
    (lambda m: m.join_second.pop(), "first and"),
    (lambda m: setattr(m, "join_second", [0]), "does not name two"),
    (lambda m: setattr(m, "join_first", [5]), "does not name two"),
    (lambda m: setattr(m, "join_values", m.join_values[:2]), "2 values for 1 unions"),
    (lambda m: setattr(m, "join_values", [float("nan")] * 5), "finite"),
])
def test_bad_candidate_joins_are_a_clear_value_error(spoil, why) -> None:
    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg, object_frame_from_msg

    props = [_prop((10, 20, 60, 90)), _prop((60, 40, 80, 80))]
    msg = make_object_features_msg(_header(), "bb", "prep", props, np.ones((2, 5)), (480, 640, 3),
                                   _joins(props, np.ones((1, 5))))
    spoil(msg)
    with pytest.raises(ValueError, match=why):
        object_frame_from_msg(msg, "bb", 5)


def test_too_many_candidate_joins_are_refused() -> None:
    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg, object_frame_from_msg
    from cbcl_pr_ros.objects.pieces import MAX_CANDIDATES

    props = [_prop((10, 20, 60, 90)), _prop((60, 40, 80, 80))]
    msg = make_object_features_msg(_header(), "bb", "prep", props, np.ones((2, 5)), (480, 640, 3),
                                   _joins(props, np.ones((1, 5))))
    k = MAX_CANDIDATES + 1
    msg.join_first, msg.join_second, msg.joins = [0] * k, [1] * k, [msg.joins[0]] * k
    msg.join_values = [1.0] * (5 * k)
    with pytest.raises(ValueError, match=f"at most {MAX_CANDIDATES}"):
        object_frame_from_msg(msg, "bb", 5)


def test_a_frame_above_the_extractors_cap_is_refused_whole() -> None:
    """A frame of more objects than any extractor sends (the top of its max_objects range) is refused
    before anything is computed; a frame of exactly that many is read."""
    from cbcl_pr_ros.nodes.detections_msgs import MAX_FRAME_OBJECTS, make_object_features_msg, object_frame_from_msg
    from cbcl_pr_ros.settings.params import PARAMS

    assert MAX_FRAME_OBJECTS == next(p.max for p in PARAMS if p.name == "max_objects")
    for n in (MAX_FRAME_OBJECTS, MAX_FRAME_OBJECTS + 1, 2000):
        props = [_prop((i % 600, 20, i % 600 + 20, 60)) for i in range(n)]
        msg = make_object_features_msg(_header(), "bb", "prep", props, np.ones((n, 5)), (480, 640, 3))
        if n <= MAX_FRAME_OBJECTS:
            assert len(object_frame_from_msg(msg, "bb", 5).proposals) == n
        else:
            with pytest.raises(ValueError, match=f"a frame of {n} objects; an extractor sends at most "
                                                 f"{MAX_FRAME_OBJECTS}"):
                object_frame_from_msg(msg, "bb", 5)


# --------------------------------------------------------------------------- depth
@pytest.mark.parametrize("enc,dtype,scale", [("32FC1", "<f4", 1.0), ("16UC1", "<u2", 1000.0)])
def test_depth_decoding_handles_padding_and_units(enc, dtype, scale) -> None:
    from sensor_msgs.msg import Image

    from cbcl_pr_ros.nodes.detections_msgs import depth_msg_to_array

    d = (np.arange(12, dtype=np.float64).reshape(3, 4) * 0.1 + 0.5)
    raw = (d * scale).astype(dtype)
    item = raw.dtype.itemsize
    padded = np.zeros((3, 4 * item + 4), np.uint8)
    padded[:, : 4 * item] = raw.view(np.uint8).reshape(3, -1)
    msg = Image(height=3, width=4, encoding=enc, step=4 * item + 4, data=padded.tobytes())
    np.testing.assert_allclose(depth_msg_to_array(msg), d, atol=1e-3)


def test_malformed_depth_is_refused_with_a_reason() -> None:
    from sensor_msgs.msg import Image

    from cbcl_pr_ros.nodes.detections_msgs import depth_msg_to_array

    with pytest.raises(ValueError, match="needs 48 bytes"):
        depth_msg_to_array(Image(height=3, width=4, encoding="32FC1", step=16, data=b"\0" * 10))
    with pytest.raises(ValueError, match="malformed"):
        depth_msg_to_array(Image(height=3, width=4, encoding="32FC1", step=8, data=b"\0" * 48))
    with pytest.raises(ValueError, match="encoding 'rgb8'"):
        depth_msg_to_array(Image(height=3, width=4, encoding="rgb8", step=12, data=b"\0" * 36))
    with pytest.raises(ValueError) as refused:  # a stranger's name: quoted cut, escaped (it is logged)
        depth_msg_to_array(Image(height=3, width=4, encoding="x\n" * 50_000, step=12, data=b"\0" * 36))
    text = str(refused.value)
    assert len(text) < 200 and "\n" not in text and "100000 characters" in text
    nan = np.full((2, 2), np.nan, "<f4")
    out = depth_msg_to_array(Image(height=2, width=2, encoding="32FC1", step=8, data=nan.tobytes()))
    assert np.all(out == 0)  # NaN holes read as "no reading"


# --------------------------------------------------------------------------- detections, markers, image
def _tracks():
    tr = ObjectTracker(window=3)
    obs = [ObjectObservation(_prop((10, 10, 50, 60), (0.0, 0.0, 0.5)), {"mug": 0.9, "duck": 0.1}, True),
           ObjectObservation(_prop((80, 10, 120, 60), NAN3), {"mug": 0.4, "duck": 0.6}, False)]
    return tr.update(obs, 1.0)


def test_detections_message_carries_tracks_with_the_image_header() -> None:
    from cbcl_pr_ros.nodes.detections_msgs import make_detections_msg

    det = make_detections_msg(_header(7, 9, "right_hand_camera"), _tracks(), model_version=4)
    assert det.header.stamp.sec == 7 and det.header.stamp.nanosec == 9
    assert det.header.frame_id == "right_hand_camera" and det.model_version == 4
    a, b = det.objects
    assert (a.label, a.known, a.x0, a.y0, a.x1, a.y1) == ("mug", True, 10, 10, 50, 60)
    assert a.top_labels[0] == "mug" and math.isclose(a.confidence, 0.9, rel_tol=1e-6)
    assert (b.label, b.known) == ("", False) and math.isnan(b.centroid.x)
    assert a.id != b.id and a.id > 0
    assert make_detections_msg(_header(), [], 0).objects == []  # no objects: an empty array


def test_detections_carry_base_frame_positions_when_the_camera_pose_is_known() -> None:
    """With the pose the tracks were placed with, each object says where it is in that pose's frame
    (and the message which frame, and the pose); without one, positions are NaN and the frame ""."""
    from scipy.spatial.transform import Rotation

    from cbcl_pr_ros.nodes.detections_msgs import make_detections_msg
    from cbcl_pr_ros.perception.camera_pose import CameraPose

    pose = CameraPose.checked([0.6, -0.1, 0.5], [1.0, 0.0, 0.0, 0.0], "base")  # looking down: z -> -z
    tr = ObjectTracker(window=3)
    obs = [ObjectObservation(_prop((10, 10, 50, 60), (0.1, 0.0, 0.5)), {"mug": 0.9}, True),
           ObjectObservation(_prop((80, 10, 120, 60), NAN3), {"duck": 0.6}, True)]
    for o in obs[:1]:
        o.position, o.frame = pose.to_fixed(np.array([o.proposal.centroid]))[0], pose.frame
    det = make_detections_msg(_header(), tr.update(obs, 1.0), 2, pose)
    assert det.position_frame == "base"
    assert (det.camera_pose.position.x, det.camera_pose.position.z) == pytest.approx((0.6, 0.5))
    assert det.camera_pose.orientation.x == pytest.approx(1.0)
    a, b = det.objects
    assert (a.position.x, a.position.y, a.position.z) == pytest.approx((0.7, -0.1, 0.0))
    assert (a.centroid.x, a.centroid.z) == pytest.approx((0.1, 0.5))  # the optical-frame centroid as before
    assert math.isnan(b.position.x)  # no depth: no place
    plain = make_detections_msg(_header(), _tracks(), 1)
    assert plain.position_frame == "" and all(math.isnan(o.position.x) for o in plain.objects)
    unnamed = CameraPose(np.zeros(3), Rotation.identity(), "")  # CameraPose.checked refuses it; built past it
    assert make_detections_msg(_header(), _tracks(), 1, unnamed).position_frame == ""  # no frame: no place


def test_markers_skip_objects_without_depth_and_clear_old_ones() -> None:
    from visualization_msgs.msg import Marker

    from cbcl_pr_ros.nodes.detections_msgs import make_detections_msg, make_marker_array

    det = make_detections_msg(_header(), _tracks(), 1)
    ma = make_marker_array(det)
    assert ma.markers[0].action == Marker.DELETEALL
    kinds = [m.type for m in ma.markers[1:]]
    assert kinds == [Marker.CUBE, Marker.TEXT_VIEW_FACING]  # only the object with a centroid
    assert "mug" in ma.markers[2].text and ma.markers[1].header.frame_id == "cam"


def test_rviz_and_debug_captions_show_an_unknown_object_as_unknown() -> None:
    """The caption of an unknown track names no class and no score (its nearest class's score read as
    an answer); a known one below the page's confidence for a guess is written "mug?"."""
    from cbcl_pr_ros.nodes.detections_msgs import _caption, make_detections_msg

    tr = ObjectTracker(window=3)
    obs = [ObjectObservation(_prop((10, 10, 50, 60), (0.0, 0.0, 0.5)), {"mug": 0.9, "duck": 0.1}, True),
           ObjectObservation(_prop((80, 10, 120, 60), (0.2, 0.0, 0.5)), {"mug": 0.45, "duck": 0.4}, True),
           ObjectObservation(_prop((130, 10, 150, 60), (0.4, 0.0, 0.5)), {"mug": 0.48, "duck": 0.1}, False)]
    sure, guess, stranger = make_detections_msg(_header(), tr.update(obs, 1.0), 1).objects
    assert _caption(sure) == f"#{sure.id} mug 0.90"
    assert _caption(guess) == f"#{guess.id} mug? 0.45"
    assert _caption(stranger) == f"#{stranger.id} unknown"


def test_debug_drawing_marks_boxes_and_refuses_bad_frames() -> None:
    from cbcl_pr_ros.nodes.detections_msgs import draw_detections, make_detections_msg

    det = make_detections_msg(_header(), _tracks(), 1)
    rgb = np.zeros((100, 160, 3), np.uint8)
    out = draw_detections(rgb, det, truth=[True, False])
    assert out.shape == rgb.shape and rgb.sum() == 0  # a copy
    assert (out[30, 10] == (40, 200, 40)).all()  # left edge of the right one: green
    assert (out[30, 80] == (230, 30, 30)).all()  # wrong one: red
    with pytest.raises(ValueError):
        draw_detections(np.zeros((10, 10), np.uint8), det)


# --------------------------------------------------------------------------- teaching requests
def test_plan_teach_defaults_and_precedence() -> None:
    assert plan_teach(MODE_DEFAULT, -1, [], 0, 3) == TeachPlan("features", "frame")
    assert plan_teach(MODE_DEFAULT, -1, [], 2, 0) == TeachPlan("images", "frame")  # images: whole by default
    assert plan_teach(MODE_DEFAULT, -1, [], 0, 0, objects_streaming=False) == TeachPlan("stream", "frame")
    assert plan_teach(MODE_DEFAULT, -1, [], 0, 0, objects_streaming=True) == TeachPlan("stream", "object")
    assert plan_teach(MODE_DEFAULT, -1, [], 2, 0, teach_from="object").target == "object"
    assert plan_teach(MODE_DEFAULT, -1, [], 0, 0, "frame", True).target == "frame"
    assert plan_teach(MODE_OBJECT, -1, [], 2, 0).target == "object"
    assert plan_teach(MODE_FRAME, -1, [], 0, 0, objects_streaming=True).target == "frame"
    assert plan_teach(MODE_DEFAULT, 7, [], 0, 0) == TeachPlan("stream", "track", track_id=7)
    assert plan_teach(MODE_DEFAULT, -1, [(1, 2, 3, 4)], 3, 0).rois == ((1, 2, 3, 4),)


@pytest.mark.parametrize("args,match", [
    ((9, -1, [], 1, 0), "mode 9"),
    ((MODE_DEFAULT, -5, [], 0, 0), "track_id -5"),
    ((MODE_DEFAULT, 3, [(0, 0, 1, 1)], 0, 0), "either track_id or rois"),
    ((MODE_DEFAULT, 3, [], 0, 2), "need images or camera frames"),
    ((MODE_OBJECT, -1, [], 0, 2), "need images or camera frames"),
    ((MODE_DEFAULT, 3, [], 2, 0), "send no images"),
    ((MODE_FRAME, 3, [], 0, 0), "MODE_FRAME"),
    ((MODE_FRAME, -1, [(0, 0, 1, 1)], 1, 0), "MODE_FRAME"),
    ((MODE_DEFAULT, -1, [(0, 0, 1, 1)] * 2, 3, 0), "2 rois for 3 images"),
    ((MODE_DEFAULT, -1, [(0, 0, 1, 1)] * 2, 0, 0), "send one box"),
])
def test_plan_teach_refuses_clashing_fields(args, match) -> None:
    with pytest.raises(ValueError, match=match):
        plan_teach(*args)


def test_roi_box_outside_or_empty_is_refused() -> None:
    assert roi_box((10, 20, 30, 40), (480, 640)) == (10, 20, 40, 60)
    assert roi_box((0, 0, 640, 480), (480, 640)) == (0, 0, 640, 480)
    with pytest.raises(ValueError, match="outside the 640x480"):
        roi_box((620, 10, 40, 40), (480, 640))
    with pytest.raises(ValueError, match="outside"):
        roi_box((-1, 0, 10, 10), (480, 640))
    with pytest.raises(ValueError, match="empty"):
        roi_box((5, 5, 0, 10), (480, 640))


def test_teaching_crops_from_boxes_and_from_the_object_in_view() -> None:
    rgb = np.full((120, 160, 3), 200, np.uint8)
    rgb[40:80, 60:100] = (200, 30, 30)  # one red square on a plain background
    crops, note = teaching_crops([rgb, rgb], TeachPlan("images", "roi", rois=((60, 40, 40, 40),)), margin=0.0)
    assert len(crops) == 2 and crops[0].shape == (40, 40, 3) and "boxes" in note
    whole, note = teaching_crops([rgb], TeachPlan("images", "frame"))
    assert whole[0] is rgb and note == ""
    with pytest.raises(ValueError, match="outside the 160x120 image 0"):
        teaching_crops([rgb], TeachPlan("images", "roi", rois=((150, 0, 20, 20),)))
    obj, note = teaching_crops([rgb], TeachPlan("images", "object"), margin=0.0)
    assert len(obj) == 1 and obj[0].shape[0] < 120  # a crop, not the frame
    blank = np.full((120, 160, 3), 128, np.uint8)
    with pytest.raises(ValueError, match="no object found in the 1 image:"):
        teaching_crops([blank], TeachPlan("images", "object"))


@pytest.mark.parametrize("n", [0, 3, 256, 257, 2000])
def test_the_object_count_is_read_from_the_serialized_bytes(n) -> None:
    """The learner counts a frame's objects in the bytes DDS delivers, before building the message:
    the count read matches for any names and values, and a frame above the cap is refused unbuilt."""
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.nodes.detections_msgs import (MAX_FRAME_OBJECTS, make_object_features_msg,
                                                   object_count_of_serialized, object_features_from_serialized)

    props = [_prop((i % 600, 20, i % 600 + 20, 60)) for i in range(n)]
    for frame_id, backbone, dim in (("cam", "bb", 5), ("", "", 3), ("camera_color_optical_frame", "résnet", 7)):
        msg = make_object_features_msg(_header(frame=frame_id), backbone, "p" * (n % 5), props,
                                       np.ones((n, dim)), (480, 640, 3))
        raw = serialize_message(msg)
        assert object_count_of_serialized(raw) == n
        if n <= MAX_FRAME_OBJECTS:
            assert len(object_features_from_serialized(raw).objects) == n
        else:
            with pytest.raises(ValueError, match=f"a frame of {n} objects"):
                object_features_from_serialized(raw)
    with pytest.raises(ValueError, match="end inside"):
        object_count_of_serialized(raw[:20])


@pytest.mark.parametrize("n", [0, 2, 256, 257, 3000])
def test_the_detections_count_is_read_from_the_serialized_bytes(n) -> None:
    """A subscriber (the page) counts a detections message's objects in its bytes and refuses one of
    more objects than a learner sends, or of more bytes than the cap, before building it."""
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.msg import DetectedObject, Detections
    from cbcl_pr_ros.nodes.detections_msgs import (MAX_DETECTIONS_BYTES, MAX_FRAME_OBJECTS,
                                                   detections_count_of_serialized, detections_from_serialized)

    for frame_id in ("", "cam", "camera_color_optical_frame"):
        msg = Detections(header=_header(frame=frame_id), model_version=7)
        msg.objects = [DetectedObject(id=i, label="mug" * (i % 4), top_labels=["a"] * (i % 3)) for i in range(n)]
        raw = serialize_message(msg)
        assert detections_count_of_serialized(raw) == n
        if n <= MAX_FRAME_OBJECTS:
            back = detections_from_serialized(raw)
            assert len(back.objects) == n and back.model_version == 7 and back.header.frame_id == frame_id
        else:
            with pytest.raises(ValueError, match=f"detections of {n} objects"):
                detections_from_serialized(raw)
    with pytest.raises(ValueError, match="end inside"):
        detections_count_of_serialized(raw[:10])
    big = Detections(objects=[DetectedObject(id=1, label="x" * (MAX_DETECTIONS_BYTES + 1))])
    with pytest.raises(ValueError, match="bytes; at most"):
        detections_from_serialized(serialize_message(big))
