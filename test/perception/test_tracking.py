"""Tracker: stable ids, track ends, fused labels that resist one bad view; boxes, crops, teaching choice."""
from __future__ import annotations

import doctest
from dataclasses import replace

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import cbcl_pr_ros.perception.tracking as tracking_mod
from cbcl_pr_ros.objects.pieces import PIECES
from cbcl_pr_ros.perception import (
    ObjectObservation,
    ObjectTracker,
    Proposal,
    box_iou,
    crop_images,
    fuse_scores,
    select_teaching_proposal,
)


def prop(x: float, y: float = 0.0, z: float = 0.6, box: tuple[int, int, int, int] | None = None, depth: bool = True) -> Proposal:
    """A proposal at camera-frame (x, y, z) with a box that moves with it."""
    if box is None:
        u = int(320 + x * 500)
        v = int(240 + y * 500)
        box = (u - 20, v - 20, u + 20, v + 20)
    c = np.array([x, y, z]) if depth else np.full(3, np.nan)
    return Proposal(box, None, c, np.full(3, 0.05) if depth else np.full(3, np.nan), 0.9)


def obs(p: Proposal, label: str, score: float = 0.9, known: bool = True, other: str = "duck") -> ObjectObservation:
    return ObjectObservation(p, {label: score, other: 1.0 - score}, known)


def test_doctest():
    res = doctest.testmod(tracking_mod, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_ids_stay_stable_while_objects_drift_and_the_order_shuffles():
    rng = np.random.default_rng(0)
    t = ObjectTracker()
    xs = np.array([-0.2, 0.0, 0.2])
    labels = ["mug", "can", "milk"]
    first = t.update([obs(prop(x), lab) for x, lab in zip(xs, labels)], 0.0)
    ids = {tr.label: tr.id for tr in first}
    assert sorted(ids.values()) == [1, 2, 3]
    for f in range(1, 15):
        xs = xs + rng.normal(0, 0.01, 3)  # a centimetre of jitter per frame
        order = rng.permutation(3)
        tracks = t.update([obs(prop(xs[i]), labels[i]) for i in order], f * 0.1)
        assert {tr.label: tr.id for tr in tracks} == ids
    assert all(tr.hits == 15 and tr.age == 14 and tr.missed == 0 for tr in t.tracks)


def test_new_object_new_id_and_lost_track_ends_after_max_missed():
    t = ObjectTracker(max_missed=2)
    a, b = prop(-0.2), prop(0.2)
    t.update([obs(a, "mug")], 0.0)
    tracks = t.update([obs(a, "mug"), obs(b, "can")], 0.1)
    assert [tr.id for tr in tracks] == [1, 2]
    for f in range(2):  # b unseen for max_missed frames: still live
        t.update([obs(a, "mug")], 0.2 + f)
        assert t.get(2) is not None and t.get(2).missed == f + 1
    t.update([obs(a, "mug")], 5.0)
    assert t.get(2) is None  # ended
    back = t.update([obs(a, "mug"), obs(b, "can")], 6.0)
    assert [tr.id for tr in back] == [1, 3]  # an ended id is never reused


def test_far_jump_is_a_new_track_even_with_overlapping_boxes():
    t = ObjectTracker(max_distance_m=0.1)
    box = (100, 100, 150, 150)
    t.update([obs(prop(0.0, z=0.6, box=box), "mug")], 0.0)
    tr = t.update([obs(prop(0.0, z=0.9, box=box), "mug")], 0.1)
    assert tr[0].id == 2


def test_rgb_only_proposals_match_by_iou():
    t = ObjectTracker(min_iou=0.3)
    t.update([obs(prop(0, box=(100, 100, 150, 150), depth=False), "mug")], 0.0)
    assert t.update([obs(prop(0, box=(105, 102, 155, 152), depth=False), "mug")], 0.1)[0].id == 1
    assert t.update([obs(prop(0, box=(300, 300, 350, 350), depth=False), "mug")], 0.2)[0].id == 2


def test_one_bad_view_does_not_flip_the_fused_label_but_a_lasting_change_does():
    t = ObjectTracker(window=5)
    p = prop(0.0)
    for f in range(4):
        t.update([obs(p, "mug", 0.8)], f)
    tr = t.update([obs(p, "duck", 1.0, other="mug")], 4)[0]  # one confident wrong view
    assert tr.label == "mug" and tr.known
    assert tr.top_labels[:2] == ["mug", "duck"] and tr.top_scores[0] == pytest.approx((4 * 0.8 + 0.0) / 5)
    for f in range(5, 8):
        tr = t.update([obs(p, "duck", 1.0, other="mug")], f)[0]
    assert tr.label == "duck"  # four of the last five views say duck


def test_single_frame_would_flip_where_fusion_does_not():
    # the same stream through window=1 (no fusion) flips on the bad view
    t = ObjectTracker(window=1)
    p = prop(0.0)
    for f in range(4):
        t.update([obs(p, "mug", 0.8)], f)
    assert t.update([obs(p, "duck", 1.0, other="mug")], 4)[0].label == "duck"


def test_known_is_the_majority_of_recent_flags_and_best_track():
    t = ObjectTracker(window=3)
    a, b = prop(-0.2), prop(0.2)
    t.update([obs(a, "mug", 0.7), obs(b, "mug", 0.9, known=False)], 0)
    t.update([obs(a, "mug", 0.7), obs(b, "mug", 0.9, known=False)], 1)
    tracks = t.update([obs(a, "mug", 0.7, known=False), obs(b, "mug", 0.9)], 2)
    assert tracks[0].known and tracks[0].label == "mug"
    assert not tracks[1].known and tracks[1].label == "" and tracks[1].nearest_label == "mug"
    best = t.best_track("mug")
    assert best is not None and best.id == tracks[0].id  # b scores higher but is not known
    assert t.best_track("teddy") is None
    assert t.get(999) is None and t.get("1") is None and t.get(True) is None


def test_bad_observation_changes_nothing():
    t = ObjectTracker()
    t.update([obs(prop(0.0), "mug")], 0.0)
    before = t.tracks
    with pytest.raises(ValueError, match="finite"):
        t.update([obs(prop(0.0), "mug"), ObjectObservation(prop(0.2), {"can": float("nan")}, True)], 1.0)
    with pytest.raises(TypeError):
        t.update([("not", "an observation")], 1.0)
    with pytest.raises(ValueError, match="stamp"):
        t.update([obs(prop(0.0), "mug")], float("inf"))
    after = t.tracks
    assert [(tr.id, tr.hits, tr.age) for tr in after] == [(tr.id, tr.hits, tr.age) for tr in before]


def test_empty_frames_and_parameters():
    t = ObjectTracker(max_missed=0)
    assert t.update([], 0.0) == []
    t.update([obs(prop(0.0), "mug")], 1.0)
    assert t.update([], 2.0) == [] and t.tracks == []
    for kw in ({"window": 0}, {"max_missed": -1}, {"max_distance_m": 0.0}, {"min_iou": 1.5}, {"top_k": 0}):
        with pytest.raises(ValueError):
            ObjectTracker(**kw)


def test_fuse_scores_counts_missing_classes_as_zero():
    assert fuse_scores([{"a": 1.0}, {"b": 1.0}]) == {"a": 0.5, "b": 0.5}
    assert fuse_scores([]) == {}


# ---------------------------------------------------------------------- boxes and crops
def test_box_iou():
    assert box_iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert box_iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)
    assert box_iou((0, 0, 10, 10), (10, 0, 20, 10)) == 0.0
    assert box_iou((0, 0, 0, 0), (0, 0, 0, 0)) == 0.0


def test_crops_are_square_with_margin_and_clipped():
    rgb = np.zeros((100, 200, 3), np.uint8)
    ps = [prop(0, box=(50, 40, 90, 60)), prop(0, box=(0, 0, 10, 100)), prop(0, box=(5, 5, 5, 5))]
    crops = crop_images(rgb, ps, margin=0.1)
    assert crops[0].shape == (48, 48, 3)  # side 40 * 1.2, centred on the box
    assert crops[1].shape[0] == 100 and crops[1].shape[1] <= 65  # clipped at the image border
    assert crops[2].size > 0  # a degenerate box still gives pixels
    with pytest.raises(ValueError):
        crop_images(rgb, ps, margin=-1)


def test_teaching_choice_central_large_or_by_box():
    shape = (480, 640)
    centre = prop(0, box=(280, 200, 360, 280))  # 80x80 at the centre
    corner = prop(0, box=(0, 0, 120, 120))  # larger, at the border
    small = prop(0, box=(500, 400, 520, 420))
    assert select_teaching_proposal([corner, centre, small], shape) == 1
    assert select_teaching_proposal([corner, centre, small], shape, box=(495, 395, 525, 425)) == 2
    assert select_teaching_proposal([corner, centre], shape, box=(700, 500, 800, 600)) is None  # outside the image
    assert select_teaching_proposal([corner, centre], shape, box=(600, 0, 640, 10)) is None  # overlaps nothing
    assert select_teaching_proposal([], shape) is None
    assert select_teaching_proposal([centre], shape, box=(float("nan"), 0, 1, 1)) is None


# ---------------------------------------------------------------- tracks in a fixed frame (issue 20)
def _looking_down(cam_x: float, yaw: float):
    """Pose of a camera 0.5 m above the table at base x = cam_x, looking straight down, turned by yaw."""
    from cbcl_pr_ros.perception.camera_pose import CameraPose

    rot = Rotation.from_euler("z", yaw) * Rotation.from_euler("x", np.pi)  # optical z points down
    return CameraPose.checked((cam_x, 0.0, 0.5), rot.as_quat(), "base")


def _seen_from(pose, points: np.ndarray) -> dict[int, Proposal]:
    """The proposals of base-frame points in view of ``pose`` (camera-frame centroids, projected boxes)."""
    cam = pose.rotation.inv().apply(points - pose.position)
    return {i: prop(*c) for i, c in enumerate(cam) if abs(c[0]) < 0.2}


TABLE = np.array([[x, y, 0.0] for x in (-0.16, -0.08, 0.0, 0.08, 0.16) for y in (-0.05, 0.05)])


def _pan(tracker: ObjectTracker, fixed: bool, steps: int = 8) -> tuple[list[dict[int, int]], int]:
    """Pan and turn the camera over the static TABLE; per frame {object index: track id}, and most live tracks."""
    seen, most_live = [], 0
    for f in range(steps):
        pose = _looking_down(-0.25 + 0.07 * f, 0.05 * f)  # jumps as between the main job's views
        props = _seen_from(pose, TABLE)
        obs_ = [ObjectObservation(p, {"mug": 0.9}, True) for p in props.values()]
        if fixed:
            for o, x in zip(obs_, pose.to_fixed(np.stack([p.centroid for p in props.values()]))):
                o.position, o.frame = x, "base"
        tracks = tracker.update(obs_, 0.25 * f)
        by_prop = {id(tr.proposal): tr.id for tr in tracks}
        seen.append({i: by_prop[id(p)] for i, p in props.items()})
        most_live = max(most_live, len(tracker.tracks))
    return seen, most_live


def test_base_frame_ids_stay_on_their_objects_while_the_camera_moves():
    seen, most_live = _pan(ObjectTracker(max_distance_m=0.1, max_missed=10), fixed=True)
    first: dict[int, int] = {}
    for frame in seen:
        for i, tid in frame.items():
            assert first.setdefault(i, tid) == tid  # every object keeps its first id
    assert len(set(first.values())) == len(first) == len(TABLE)  # all seen, one id each
    assert most_live == len(TABLE)  # no object ever carries a second track


def test_camera_frame_ids_jump_when_the_camera_moves():
    """The same pan without the pose: what the fixed frame fixes (so the test above can fail)."""
    seen, _ = _pan(ObjectTracker(max_distance_m=0.1, max_missed=10), fixed=False)
    ids: dict[int, set] = {}
    for frame in seen:
        for i, tid in frame.items():
            ids.setdefault(i, set()).add(tid)
    assert sum(len(v) > 1 for v in ids.values()) >= len(TABLE) // 2  # ids follow the image, not the objects


def test_fixed_frame_matching_ignores_the_box_and_falls_back_to_iou_across_frames():
    t = ObjectTracker(max_distance_m=0.05, min_iou=0.3)
    a = ObjectObservation(prop(0.0), {"mug": 0.9}, True, position=np.array([0.5, 0.0, 0.0]), frame="base")
    first = t.update([a], 0.0)[0].id
    # camera moved: the box is elsewhere in the image, the object is where it was
    moved = ObjectObservation(prop(0.3), {"mug": 0.9}, True, position=np.array([0.51, 0.0, 0.0]), frame="base")
    assert t.update([moved], 0.1)[0].id == first
    # a frame without a pose (camera frame): positions are not comparable, the box overlap decides
    same_box = ObjectObservation(prop(0.3), {"mug": 0.9}, True)
    assert t.update([same_box], 0.2)[0].id == first
    elsewhere = ObjectObservation(prop(-0.3), {"mug": 0.9}, True, position=np.array([0.9, 0.0, 0.0]), frame="base")
    assert t.update([elsewhere], 0.3)[0].id != first


def test_bad_position_raises_and_changes_nothing():
    t = ObjectTracker()
    t.update([obs(prop(0.0), "mug")], 0.0)
    bad = ObjectObservation(prop(0.1), {"mug": 0.9}, True, position=np.array([1.0, 2.0]), frame="base")
    with pytest.raises(ValueError, match="position"):
        t.update([obs(prop(0.0), "mug"), bad], 0.1)
    assert [tr.hits for tr in t.tracks] == [1]


def test_a_nested_piece_of_an_object_is_a_part_and_neighbours_are_not():
    from cbcl_pr_ros.objects.pieces import nested_parts

    body = prop(0.0, box=(100, 100, 200, 220))
    head = Proposal((110, 90, 160, 140), None, body.centroid + [0.0, -0.03, 0.0], np.full(3, 0.04), 0.9)  # inside, 3 cm
    beside = prop(0.07, box=(195, 100, 290, 220))  # touching, 7 cm away
    behind = Proposal((120, 120, 180, 200), None, body.centroid + [0.0, 0.0, 0.12], np.full(3, 0.05), 0.9)
    flat = Proposal((120, 120, 180, 200), None, np.full(3, np.nan), np.full(3, np.nan), 0.9)  # no depth
    assert nested_parts([head, body, beside, behind, flat]) == {0}



def test_a_frame_without_depth_after_a_move_takes_no_ids_and_positions_survive_it():
    t = ObjectTracker(max_distance_m=0.05, min_iou=0.2)
    base = [np.array([0.6, 0.0, 0.0]), np.array([0.7, 0.0, 0.0])]
    boxes = [(100, 100, 160, 160), (200, 100, 260, 160)]
    first = [tr.id for tr in t.update([ObjectObservation(prop(0.0, box=b), {}, False, position=x, frame="base")
                                       for b, x in zip(boxes, base)], 0.0, view=1)]
    # the camera moved (view 2) and this frame has no depth: the old boxes now show the other object
    flat = [ObjectObservation(prop(0.0, box=b, depth=False), {}, False, position=np.full(3, np.nan), frame="base")
            for b in reversed(boxes)]
    assert not {tr.id for tr in t.update(flat, 0.1, view=2)} & set(first)  # no id given to the wrong object
    # depth is back: each object finds its own track by its base position
    again = [tr.id for tr in t.update([ObjectObservation(prop(0.0, box=b), {}, False, position=x, frame="base")
                                       for b, x in zip(reversed(boxes), base)], 0.2, view=2)]
    assert again == first
    # from the same view, a frame without depth still matches by box, and keeps the base position
    same = t.update([ObjectObservation(prop(0.0, box=boxes[1], depth=False), {}, False,
                                       position=np.full(3, np.nan), frame="base")], 0.3, view=2)
    assert [tr.id for tr in same] == [first[0]]
    moved_back = t.update([ObjectObservation(prop(0.0, box=(0, 0, 40, 40)), {}, False, position=base[0], frame="base")],
                          0.4, view=3)
    assert [tr.id for tr in moved_back] == [first[0]]


def test_fixed_frame_track_outlives_other_views_but_not_its_own():
    from cbcl_pr_ros.perception.tracking import FIXED_LIFETIME

    def at(x: float) -> ObjectObservation:
        return ObjectObservation(prop(0.0), {}, False, position=np.array([x, 0.0, 0.0]), frame="base")

    t = ObjectTracker(max_missed=2)
    mug = t.update([at(0.5)], 0.0, view=1)[0].id
    for f in range(1, 8):  # the camera looks elsewhere (views 2..8): the mug is not expected there
        t.update([at(1.5)], float(f), view=1 + f)
    assert t.get(mug) is not None
    assert t.update([at(0.51)], 9.0, view=9)[0].id == mug  # looked back: the same id
    for f in range(3):  # the same view shows nothing there: the mug was taken away
        t.update([], 10.0 + f, view=9)
    assert t.get(mug) is None
    lone = t.update([at(2.5)], 20.0, view=20)[0].id
    for f in range(2 * FIXED_LIFETIME + 1):
        t.update([], 21.0 + f, view=21 + f)
    assert t.get(lone) is None  # never seen again from anywhere: ends after FIXED_LIFETIME * max_missed


def test_a_piece_beside_its_object_is_a_part_only_when_named_the_same():
    from cbcl_pr_ros.objects.pieces import nested_parts

    body = Proposal((92, 196, 202, 290), None, np.array([-0.168, 0.01, 0.424]), np.full(3, 0.09), 0.9)
    handle = Proposal((70, 240, 108, 272), None, np.array([-0.219, 0.023, 0.421]), np.full(3, 0.04), 0.9)  # 5.3 cm
    names_only = replace(PIECES, side_piece_m=0.0)  # the rule for small pieces at the body's depth (test below) off
    assert nested_parts([body, handle], policy=names_only) == set()  # 42 % inside, but too far for the plain rule
    assert nested_parts([body, handle], ["mug", "mug"], policy=names_only) == {1}
    assert nested_parts([body, handle], ["mug", "can"], policy=names_only) == set()  # touching objects of two classes
    assert nested_parts([body, handle], ["", ""], policy=names_only) == set()  # unknown is no class
    assert nested_parts([body, handle], ["mug", "can"]) == {1}  # 9 % of the body's volume, within its depth range


def test_two_pieces_named_alike_that_share_one_extent_are_one_object():
    """The main job's close-up (seed 1, camera 2 cm above the table): the duck in two pieces, 19 % of
    the smaller box inside the larger, 3.5 cm apart, each centroid inside the other's 3D extent."""
    from cbcl_pr_ros.objects.pieces import nested_parts
    from cbcl_pr_ros.objects.pieces import share_extent

    big = Proposal((366, 80, 484, 216), None, np.array([0.062, -0.058, 0.267]), np.array([0.075, 0.075, 0.072]), 1.0)
    piece = Proposal((462, 72, 568, 176), None, np.array([0.094, -0.069, 0.263]), np.array([0.087, 0.057, 0.089]),
                     1.0)
    assert share_extent(big, piece) and share_extent(piece, big)
    assert nested_parts([big, piece], ["duck", "duck"]) == {1}
    far = [Proposal(p.box, None, p.centroid + [0.0, 0.0, 0.35], p.size, 1.0) for p in (big, piece)]
    assert nested_parts(far, ["duck", "duck"]) == {1}  # at a table view's distance the name decides
    assert nested_parts(far) == set() and nested_parts(far, ["duck", "mug"]) == set()
    # two ducks touching side by side: each centre is outside the other's extent
    twin = Proposal((462, 72, 568, 176), None, big.centroid + [0.07, 0.0, 0.0], big.size, 1.0)
    assert not share_extent(big, twin) and nested_parts([big, twin], ["duck", "duck"]) == set()
    flat = Proposal((462, 72, 568, 176), None, np.full(3, np.nan), np.full(3, np.nan), 1.0)
    assert not share_extent(big, flat)

def test_close_up_pieces_that_share_one_extent_need_no_name():
    """seed 1, camera 4 cm above the table on its way down: the duck in two pieces 25 cm from the
    camera, the larger named 'bottle'. That close, the shared extent is enough; a table view's pair
    (0.6 m away) still needs the same name, and a neighbour 14 cm away is never a part."""
    from cbcl_pr_ros.objects.pieces import nested_parts

    big = Proposal((392, 98, 522, 242), None, np.array([0.079, -0.04, 0.253]), np.array([0.074, 0.074, 0.071]), 1.0)
    piece = Proposal((492, 74, 614, 196), None, np.array([0.111, -0.057, 0.248]), np.array([0.079, 0.062, 0.102]),
                     1.0)
    mug = Proposal((416, 314, 618, 480), None, np.array([0.121, 0.085, 0.258]), np.array([0.102, 0.066, 0.119]), 1.0)
    assert nested_parts([big, piece, mug], ["bottle", "duck", "mug"]) == {1}
    assert nested_parts([big, piece, mug]) == {1}
    far = [Proposal(p.box, None, p.centroid + [0.0, 0.0, 0.35], p.size, 1.0) for p in (big, piece)]
    assert nested_parts(far, ["bottle", "duck"]) == set() and nested_parts(far, ["duck", "duck"]) == {1}
    assert nested_parts([Proposal(p.box, None, p.centroid, p.size, 1.0) for p in (big, piece)],
                        policy=replace(PIECES, close_up_m=0.2)) == set()

def test_a_frame_without_a_pose_keeps_the_fixed_frame_positions():
    """One frame whose camera pose came late is matched by box in the camera frame; the tracks keep
    their base-frame positions, so once the camera has moved the next posed frame finds them again
    (before, that frame turned every track into a camera-frame one and all ids were lost)."""
    t = ObjectTracker(max_distance_m=0.05, min_iou=0.2)
    base = [np.array([0.6, 0.0, 0.0]), np.array([0.7, 0.0, 0.0])]
    boxes = [(100, 100, 160, 160), (200, 100, 260, 160)]
    first = [tr.id for tr in t.update([ObjectObservation(prop(0.0, box=b), {}, False, position=x, frame="base")
                                       for b, x in zip(boxes, base)], 0.0, view=1)]
    still = [tr.id for tr in t.update([ObjectObservation(prop(0.0, box=b), {}, False) for b in boxes], 0.1)]
    assert still == first  # no pose: the same boxes decide
    moved = [ObjectObservation(prop(0.0, box=(b[0] + 150, b[1], b[2] + 150, b[3])), {}, False, position=x,
                               frame="base") for b, x in zip(boxes, base)]  # the camera moved: boxes elsewhere
    assert [tr.id for tr in t.update(moved, 0.2, view=2)] == first
    assert len(t.tracks) == 2

def test_a_small_piece_beside_its_object_at_its_depth_is_a_part_whatever_its_name():
    """The main job, seed 2: the mug's handle cut off beside the body, 5.7 cm from it, 31 % of its box
    inside the body's, named 'domino'; a domino standing in front of a bottle (seed 0) is as small and
    as near, but reaches out of the bottle's depth range, and stays an object."""
    from cbcl_pr_ros.objects.pieces import nested_parts
    from cbcl_pr_ros.objects.pieces import side_piece

    body = Proposal((232, 308, 328, 406), None, np.array([-0.033, 0.109, 0.396]), np.array([0.074, 0.094, 0.113]), 0.8)
    handle = Proposal((308, 376, 354, 418), None, np.array([0.011, 0.143, 0.387]), np.array([0.036, 0.048, 0.094]),
                      0.8)
    assert side_piece(handle, body) and nested_parts([body, handle], ["mug", "domino"]) == {1}
    assert nested_parts([body, handle]) == {1}  # before anything is taught too
    assert nested_parts([body, handle], policy=replace(PIECES, side_piece_m=0.05)) == set()
    bottle = Proposal((324, 310, 640, 480), None, np.array([0.062, 0.057, 0.174]), np.array([0.095, 0.043, 0.106]),
                      1.0)
    domino = Proposal((432, 300, 546, 348), None, np.array([0.086, 0.043, 0.233]), np.array([0.047, 0.012, 0.056]),
                      0.9)  # 6.5 cm from the bottle, 79 % inside its box, 7 % of its volume
    assert not side_piece(domino, bottle) and nested_parts([bottle, domino], ["bottle", "domino"]) == set()
    twin = Proposal(handle.box, None, handle.centroid, body.size, 0.8)  # as large as the body: an object
    assert not side_piece(twin, body)
    flat = Proposal(handle.box, None, np.full(3, np.nan), np.full(3, np.nan), 0.8)
    assert not side_piece(flat, body) and nested_parts([body, flat]) == set()


def test_a_handle_standing_up_behind_its_mug_is_a_part():
    """The main job, seed 4 (a layout first run on 2026-11-25): the mug's handle seen above and behind
    the body from the overview, 6.0 cm from it, 23 % of its box inside the body's (the rule asked 30 %),
    named 'cereal', kept a track of its own for the whole phase."""
    from cbcl_pr_ros.objects.pieces import nested_parts

    handle = Proposal((316, 250, 340, 284), None, np.array([0.0072, 0.0337, 0.423]), np.array([0.0203, 0.0445, 0.0873]),
                      0.8)
    body = Proposal((312, 276, 406, 376), None, np.array([0.033, 0.085, 0.4012]), np.array([0.0747, 0.0943, 0.1149]),
                    0.9)
    assert nested_parts([handle, body], ["cereal", "mug"]) == {0}
    before = replace(PIECES, side_piece_overlap=0.3)
    assert nested_parts([handle, body], ["cereal", "mug"], policy=before) == set()


def test_a_second_sliver_at_the_border_beside_a_seen_object_starts_no_track():
    """The main job, seed 0, lego close-up: two slivers of the teddy at the bottom border, 3.5 cm
    apart; the first found the teddy's track, the second started a second one on the teddy."""
    t = ObjectTracker(max_distance_m=0.1)
    teddy = np.array([0.847, -0.287, -0.168])

    def at(x: np.ndarray, box: tuple[int, int, int, int], cut: bool) -> ObjectObservation:
        return ObjectObservation(prop(0.0, box=box), {}, False, position=x, frame="base", cut=cut)

    first = t.update([at(teddy, (502, 412, 536, 460), False)], 0.0, view=1)
    slivers = [at(teddy + [0.004, 0.001, -0.001], (386, 422, 438, 480), True),
               at(teddy + [0.035, -0.015, 0.002], (446, 454, 486, 480), True)]
    seen = t.update(slivers, 0.1, view=2)
    assert [tr.id for tr in seen] == [first[0].id] and len(t.tracks) == 1
    # a cut object 7 cm from the seen one, or a whole one (not cut) as near, is an object of its own
    assert len(t.update([slivers[0], at(teddy + [0.07, 0.0, 0.0], (446, 454, 486, 480), True)], 0.2, view=2)) == 2
    assert len(t.update([slivers[0], at(teddy + [0.035, -0.015, 0.0], (446, 400, 486, 460), False)], 0.3,
                        view=2)) == 2


def test_a_small_strip_inside_its_object_s_extent_is_a_part():
    """seed 1, table view: a 1.7 cm strip of the duck 2.7 cm from its body, 31 % of its box inside,
    79 % of its 3D extent inside the body's, named 'bottle'. A domino 7.8 cm before a bottle, as
    deep inside the bottle's extent, is further than the 5 cm of this test and stays an object."""
    from cbcl_pr_ros.objects.pieces import nested_parts

    duck = Proposal((412, 70, 476, 128), None, np.array([0.127, -0.137, 0.458]), np.array([0.053, 0.069, 0.108]), 1.0)
    strip = Proposal((402, 100, 426, 152), None, np.array([0.105, -0.128, 0.47]), np.array([0.017, 0.051, 0.075]),
                     1.0)
    assert nested_parts([duck, strip], ["duck", "bottle"]) == {1}
    no_side = replace(PIECES, side_piece_m=0.0)
    assert nested_parts([duck, strip], ["duck", "bottle"], policy=no_side) == set()  # the older rules: no
    away = Proposal(strip.box, None, strip.centroid + [0.0, 0.0, 0.04], strip.size, 1.0)  # 4.7 cm, half out in z
    assert nested_parts([duck, away], ["duck", "bottle"]) == set()


def test_a_tiny_piece_inside_its_object_s_extent_is_a_part_even_beside_its_box():
    """seed 0, close-up of the teddy: a 2.3 cm piece 4.7 cm from a larger piece of it, 78 % of its
    extent inside, its box beside the other's (no overlap), both named 'lego'."""
    from cbcl_pr_ros.objects.pieces import nested_parts
    from cbcl_pr_ros.objects.pieces import side_piece

    body = Proposal((534, 396, 620, 450), None, np.array([0.141, 0.121, 0.277]), np.array([0.064, 0.046, 0.1]), 1.0)
    piece = Proposal((462, 382, 492, 414), None, np.array([0.117, 0.119, 0.318]), np.array([0.023, 0.02, 0.023]), 0.7)
    assert nested_parts([body, piece], ["lego", "lego"]) == {1}
    assert nested_parts([body, piece], ["lego", "lego"], policy=replace(PIECES, side_piece_m=0.0)) == set()
    assert side_piece(piece, body, boxes_overlap=False)


def test_a_close_up_piece_half_inside_the_larger_extent_is_a_part_farther_than_on_a_table():
    """The main job's close-ups (camera 15-25 cm away): seed 2, a 3 cm piece at the teddy's foot, 6 cm
    from the body's centroid, took the teddy's track while the whole teddy started a new one; seed 1,
    a corner of the lego 7.5 cm from a proposal that took the bottle too. At a table view's distance
    the same pair stays two objects (the 5 cm rule), and a piece 9 cm off is never a part."""
    from cbcl_pr_ros.objects.pieces import nested_parts

    teddy = Proposal((248, 124, 598, 376), None, np.array([0.011, -0.003, 0.146]), np.array([0.106, 0.08, 0.114]), 1.0)
    foot = Proposal((196, 172, 264, 250), None, np.array([-0.04, -0.013, 0.175]), np.array([0.03, 0.03, 0.029]), 1.0)
    assert nested_parts([teddy, foot], ["teddy", "bottle"]) == {1}
    table_view = replace(PIECES, close_up_piece_m=0.05)  # the table-view rule alone
    assert nested_parts([teddy, foot], policy=table_view) == set()
    merged = Proposal((474, 102, 576, 268), None, np.array([0.118, -0.038, 0.238]), np.array([0.128, 0.094, 0.132]),
                      1.0)
    corner = Proposal((460, 226, 516, 270), None, np.array([0.062, 0.002, 0.208]), np.array([0.045, 0.025, 0.059]),
                      1.0)
    assert nested_parts([merged, corner], ["bottle", "lego"]) == {1}
    far = [Proposal(p.box, None, p.centroid + [0.0, 0.0, 0.4], p.size, 1.0) for p in (teddy, foot)]
    assert nested_parts(far, ["teddy", "bottle"]) == set()
    off = Proposal(foot.box, None, teddy.centroid + [-0.09, 0.0, 0.0], foot.size, 1.0)  # 9 cm: beyond the reach
    assert nested_parts([teddy, off]) == set()


def test_an_unknown_track_never_reads_as_sure_of_a_class():
    """A track judged unknown (most recent frames unknown) reports the scores of the frames that said
    unknown, below 0.5 as a core Prediction's: two sure known frames must not lift it to 0.5 or more."""
    t = ObjectTracker(window=5)
    p = prop(0.0)
    views = [(0.95, True), (0.95, True), (0.45, False), (0.40, False), (0.35, False)]
    for f, (score, known) in enumerate(views):
        tr = t.update([ObjectObservation(p, {"mug": score, "duck": 0.05}, known)], f)[0]
    assert not tr.known and tr.label == "" and tr.nearest_label == "mug"
    assert tr.confidence == pytest.approx((0.45 + 0.40 + 0.35) / 3) and tr.confidence < 0.5
    assert tr.top_scores[0] == tr.confidence and all(s < 0.5 for s in tr.top_scores)
    # an observation source that calls an object unknown yet sure of its class is not believed
    t2 = ObjectTracker(window=3)
    for f in range(3):
        tr2 = t2.update([obs(p, "mug", 0.99, known=False)], f)[0]
    assert not tr2.known and tr2.confidence < 0.5 and max(tr2.top_scores) < 0.5
    # a known track is fused over all its recent frames, as before
    t3 = ObjectTracker(window=3)
    for f, (score, known) in enumerate([(0.9, True), (0.3, False), (0.9, True)]):
        tr3 = t3.update([obs(p, "mug", score, known=known)], f)[0]
    assert tr3.known and tr3.confidence == pytest.approx(0.7)
