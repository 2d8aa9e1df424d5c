"""The taught-object search without ROS: finds where no proposal stands, bounded work, determinism,
bad input refused, 3D only from real depth readings."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from cbcl_pr_ros.objects.taught_search import (SearchSettings, box_position, depth_box, map_vectors, refine_boxes,
                                               search_taught, search_windows)
from cbcl_pr_ros.perception.boxes import box_iou, crop_images
from cbcl_pr_ros.perception.types import CameraIntrinsics, Proposal

K = CameraIntrinsics(500.0, 500.0, 320.0, 240.0)
RED = (300, 200, 420, 320)  # the taught object's box in the scene
LOOSE = SearchSettings(min_confidence=0.5)  # the stand-in learner's confidence falls fast off the taught view


@dataclass
class Pred:
    label: str
    known: bool
    confidence: float


class MeanColour:
    """A stand-in backbone: a crop's vector is its mean colour (0-1); counts what it was given."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def extract(self, images):
        self.calls.append(len(images))
        return np.stack([np.asarray(im, np.float32).reshape(-1, 3).mean(0) / 255.0 for im in images])


def redness(vectors: np.ndarray) -> list[Pred]:
    """A stand-in learner taught 'red' from one crop of the object as the extractor crops it (10 %
    context around the box): nearest to that crop's vector = surest; unknown beyond a radius."""
    rgb, _ = scene()
    taught = crop_images(rgb, [Proposal(RED, None, np.full(3, np.nan), np.full(3, np.nan), 1.0)], 0.1)
    centre = MeanColour().extract(taught)[0]
    out = []
    for v in vectors:
        d = float(np.linalg.norm(v - centre))
        out.append(Pred("red" if d < 0.2 else "", d < 0.2, max(0.0, 1.0 - d / 0.4)))
    return out


def scene() -> tuple[np.ndarray, np.ndarray]:
    rgb = np.full((480, 640, 3), 120, np.uint8)
    x0, y0, x1, y1 = RED
    rgb[y0:y1, x0:x1] = (230, 20, 20)
    depth = np.full((480, 640), 1.2, np.float32)
    depth[y0:y1, x0:x1] = 1.0
    return rgb, depth


def test_finds_the_taught_object_no_proposal_covers_with_its_3d_position() -> None:
    rgb, depth = scene()
    elsewhere = Proposal((10, 10, 80, 80), None, np.zeros(3), np.full(3, np.nan), 0.9)
    finds = search_taught(rgb, MeanColour(), redness, ["red"], [elsewhere], depth, K, LOOSE)
    assert len(finds) == 1
    f = finds[0]
    assert f.label == "red" and f.confidence >= LOOSE.min_confidence
    assert box_iou(f.box, RED) >= 0.5
    # the centre region of the box lies on the object: its depth, back-projected through the box's centre
    cx, cy = (f.box[0] + f.box[2]) / 2, (f.box[1] + f.box[3]) / 2
    assert f.centroid[2] == pytest.approx(1.0)
    assert f.centroid[0] == pytest.approx((cx - K.cx) / K.fx) and f.centroid[1] == pytest.approx((cy - K.cy) / K.fy)
    p = f.as_proposal()
    assert p.box == f.box and p.mask is None and p.has_depth


def test_refinement_fits_the_box_better_than_the_grid() -> None:
    rgb, _ = scene()
    coarse = search_taught(rgb, MeanColour(), redness, ["red"], settings=replace(LOOSE, refine=0))
    fine = search_taught(rgb, MeanColour(), redness, ["red"], settings=LOOSE)
    assert coarse and fine
    assert fine[0].confidence >= coarse[0].confidence
    assert box_iou(fine[0].box, RED) >= box_iou(coarse[0].box, RED)


def test_same_frame_same_finds_and_bounded_backbone_work() -> None:
    rgb, depth = scene()
    s = replace(LOOSE, max_windows=20, max_finds=2, refine=2)
    runs = []
    for _ in range(3):
        bb = MeanColour()
        finds = search_taught(rgb, bb, redness, ["red", "blue"], (), depth, K, s)
        runs.append([(f.box, f.label, f.confidence, tuple(np.nan_to_num(f.centroid, nan=-1))) for f in finds])
        assert len(bb.calls) <= 3  # one batch of windows, one per refinement round
        assert bb.calls[0] <= 20 and all(n <= 2 * 8 for n in bb.calls[1:])
    assert runs[0] == runs[1] == runs[2]


def test_nothing_to_look_for_calls_no_backbone() -> None:
    rgb, _ = scene()
    bb = MeanColour()
    assert search_taught(rgb, bb, redness, []) == []
    assert search_taught(rgb, bb, redness, ["", ""]) == []
    assert bb.calls == []


def test_a_class_not_searched_is_never_named() -> None:
    rgb, _ = scene()
    assert search_taught(rgb, MeanColour(), redness, ["blue"], settings=LOOSE) == []
    # only the first max_classes (sorted) are searched: "red" sorts after "a", "b"
    s = replace(LOOSE, max_classes=2)
    assert search_taught(rgb, MeanColour(), redness, ["red", "a", "b"], settings=s) == []
    assert search_taught(rgb, MeanColour(), redness, ["red", "a"], settings=s)


def test_a_proposal_that_is_the_window_is_not_searched_again() -> None:
    shape = (480, 640, 3)
    s = SearchSettings(max_windows=512)
    grid = search_windows(shape, [], s)
    assert len(set(grid)) == len(grid)
    assert all(0 <= x0 < x1 <= 640 and 0 <= y0 < y1 <= 480 for x0, y0, x1, y1 in grid)
    covered = search_windows(shape, [grid[3]], s)
    assert grid[3] not in covered and len(covered) < len(grid)
    capped = search_windows(shape, [], replace(s, max_windows=10))
    assert len(capped) == 10 and set(capped) <= set(grid)
    assert capped == search_windows(shape, [], replace(s, max_windows=10))


def test_the_box_fits_the_depth_surface_at_its_centre() -> None:
    rgb, depth = scene()
    assert depth_box((320, 220, 440, 340), depth) == RED  # off by 20 px: pulled onto the object
    finds = search_taught(rgb, MeanColour(), redness, ["red"], (), depth, K, replace(LOOSE, fit_depth=True))
    assert finds and finds[0].box == RED
    # no readings, or a surface far smaller than the box (a few readings in a hole): the box is kept as it is
    assert depth_box(RED, np.full_like(depth, np.nan)) is None
    speck = np.full_like(depth, np.nan)
    speck[255:265, 355:365] = 1.0
    assert depth_box(RED, speck) is None


def colour_map(rgb: np.ndarray, cell: int = 32) -> np.ndarray:
    """A stand-in dense map: each 32-pixel cell's mean colour (0-1), (3, rows, cols)."""
    h, w = rgb.shape[:2]
    cells = rgb[: h // cell * cell, : w // cell * cell].reshape(h // cell, cell, w // cell, cell, 3).mean(axis=(1, 3))
    return (cells / 255.0).transpose(2, 0, 1).astype(np.float32)


def test_map_vectors_are_the_mean_of_the_cells_under_a_box() -> None:
    f = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)  # 3 rows, 4 cols of a 300 x 400 image
    v = map_vectors(f, [(0, 0, 100, 100), (100, 0, 300, 200), (399, 299, 400, 300)], (300, 400))
    assert v[0].tolist() == f[:, 0, 0].tolist()
    assert v[1].tolist() == f[:, 0:2, 1:3].mean(axis=(1, 2)).tolist()
    assert v[2].tolist() == f[:, 2, 3].tolist()  # a box of one pixel still covers a cell


def test_windows_scored_from_a_dense_map_crop_only_the_refinements() -> None:
    rgb, depth = scene()
    bb = MeanColour()
    finds = search_taught(rgb, bb, redness, ["red"], (), depth, K, LOOSE, feature_map=colour_map(rgb))
    assert finds and finds[0].label == "red"
    x0, y0, x1, y1 = finds[0].box  # on the object (the map's cells are coarser than the crops)
    assert RED[0] <= (x0 + x1) / 2 < RED[2] and RED[1] <= (y0 + y1) / 2 < RED[3]
    assert len(bb.calls) <= LOOSE.refine and all(n <= LOOSE.max_finds * 8 for n in bb.calls)
    again = search_taught(rgb, MeanColour(), redness, ["red"], (), depth, K, LOOSE, feature_map=colour_map(rgb))
    assert [(f.box, f.label, f.confidence) for f in finds] == [(f.box, f.label, f.confidence) for f in again]


@pytest.mark.parametrize("bad", [np.zeros((3, 4), np.float32), np.zeros((3, 0, 4), np.float32),
                                 np.full((3, 4, 4), np.nan, np.float32), np.zeros((3, 4, 4), np.int64),
                                 np.zeros((3, 300, 4), np.float32), [[[0.0]]]])
def test_a_bad_feature_map_is_refused_before_any_work(bad) -> None:
    rgb, _ = scene()
    bb = MeanColour()
    with pytest.raises(ValueError, match="feature_map"):
        search_taught(rgb, bb, redness, ["red"], feature_map=bad)
    assert bb.calls == []


def test_refined_boxes_stay_in_the_image() -> None:
    for box in ((0, 0, 50, 50), (600, 440, 640, 480), (100, 100, 300, 200)):
        out = refine_boxes(box, (480, 640))
        assert out and tuple(box) not in out
        assert all(0 <= x0 < x1 <= 640 and 0 <= y0 < y1 <= 480 for x0, y0, x1, y1 in out)


def test_no_3d_without_readings_intrinsics_or_matching_depth() -> None:
    rgb, depth = scene()
    holes = np.full_like(depth, np.nan)
    assert np.isnan(box_position(RED, holes, K)).all()
    assert np.isnan(box_position(RED, depth, None)).all()
    assert np.isnan(box_position(RED, None, K)).all()
    zeros = np.zeros_like(depth)
    assert np.isnan(box_position(RED, zeros, K)).all()
    # depth of another size than the image: the finds come, without 3D
    finds = search_taught(rgb, MeanColour(), redness, ["red"], (), depth[:100], K, LOOSE)
    assert finds and all(np.isnan(f.centroid).all() for f in finds)


@pytest.mark.parametrize("rgb", [np.zeros((480, 640), np.uint8), np.zeros((480, 640, 3), np.float32),
                                 np.zeros((4, 640, 3), np.uint8), np.zeros((9000, 10, 3), np.uint8), "image"])
def test_bad_images_are_refused_before_any_work(rgb) -> None:
    bb = MeanColour()
    with pytest.raises(ValueError):
        search_taught(rgb, bb, redness, ["red"])
    assert bb.calls == []


@pytest.mark.parametrize("field,value", [("scales", ()), ("scales", (0.01,)), ("scales", (2.0,)), ("stride", 0.0),
                                         ("max_windows", 0), ("max_windows", 10_000), ("max_windows", True),
                                         ("max_classes", 0), ("max_finds", 1.5), ("min_confidence", 1.5),
                                         ("covered_iou", -0.1), ("nms_iou", 2.0), ("refine", True), ("refine", 5),
                                         ("per_class", 0)])
def test_bad_settings_are_refused(field, value) -> None:
    with pytest.raises(ValueError):
        SearchSettings(**{field: value})


def test_a_backbone_giving_the_wrong_number_of_vectors_is_an_error() -> None:
    class Short(MeanColour):
        def extract(self, images):
            return super().extract(images)[:-1]

    rgb, _ = scene()
    with pytest.raises(ValueError, match="vectors"):
        search_taught(rgb, Short(), redness, ["red"])
