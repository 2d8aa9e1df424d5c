"""objects/reuse.py: a still object keeps its features, a changed or moved one is computed
again, drift adds up, and refreshing is spread over frames."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.objects.reuse import CropFeatureReuse

RNG = np.random.default_rng(0)
SCENE = RNG.integers(0, 255, (120, 160, 3)).astype(np.float32)
BOXES = [(10, 10, 50, 50), (60, 20, 100, 60), (110, 30, 150, 70)]


def crops_of(img: np.ndarray, boxes=BOXES) -> list[np.ndarray]:
    return [np.clip(img[y0:y1, x0:x1], 0, 255).astype(np.uint8) for x0, y0, x1, y1 in boxes]


def noisy(sigma: float = 2.0) -> np.ndarray:
    return SCENE + RNG.normal(0, sigma, SCENE.shape)


def run_frame(reuse: CropFeatureReuse, img: np.ndarray, boxes=BOXES, tag: float = 0.0) -> list[int]:
    """One frame: the indices the backbone had to compute (their 'features' carry ``tag``)."""
    known = reuse.plan(boxes, crops_of(img, boxes))
    todo = [i for i, f in enumerate(known) if f is None]
    reuse.store([f if f is not None else np.full(4, tag + i) for i, f in enumerate(known)])
    return todo


def test_a_still_scene_with_sensor_noise_reuses_every_crop_after_the_first_frame():
    r = CropFeatureReuse(refresh_frames=100)
    assert run_frame(r, noisy()) == [0, 1, 2]
    for _ in range(5):
        assert run_frame(r, noisy()) == []
    assert r.reused == 15 and r.computed == 3


def test_a_changed_crop_and_a_moved_box_are_computed_again():
    r = CropFeatureReuse(refresh_frames=100)
    run_frame(r, noisy())
    img = noisy()
    img[60:100, 110:150] = 255 - img[60:100, 110:150]  # something else where the third object was... partly
    img[30:70, 110:150] = 0  # the third object's pixels changed
    moved = [BOXES[0], (70, 20, 110, 60), BOXES[2]]  # the second box moved by 10 px (IoU 0.6)
    assert run_frame(r, img, moved) == [1, 2]


def test_drift_is_measured_from_the_computed_crop_not_the_previous_frame():
    r = CropFeatureReuse(refresh_frames=1000, max_change=6.0)
    run_frame(r, SCENE)
    recomputed = []
    for step in range(1, 12):  # 2 grey levels brighter per frame: each step alone is below the limit
        recomputed.append(run_frame(r, SCENE + 2.0 * step))
    first = next(i for i, todo in enumerate(recomputed) if todo)
    assert 1 <= first <= 3, recomputed  # caught once the total passes 6 levels


def test_refresh_comes_back_and_is_spread_over_frames():
    r = CropFeatureReuse(refresh_frames=4, max_refresh=1)
    run_frame(r, SCENE)
    per_frame = [run_frame(r, SCENE) for _ in range(12)]
    assert all(len(t) <= 1 for t in per_frame), per_frame
    refreshed = [i for t in per_frame for i in t]
    assert set(refreshed) == {0, 1, 2}  # every crop computed again
    ages = {i: [f for f, t in enumerate(per_frame) if i in t] for i in range(3)}
    assert all(len(a) >= 2 for a in ages.values()), ages  # and again


def test_reused_features_are_the_computed_ones_and_reset_forgets():
    r = CropFeatureReuse(refresh_frames=100)
    run_frame(r, SCENE, tag=10.0)
    known = r.plan(BOXES, crops_of(SCENE))
    assert [float(f[0]) for f in known] == [10.0, 11.0, 12.0]
    r.store(known)
    r.reset()
    assert r.plan(BOXES, crops_of(SCENE)) == [None, None, None]


def test_bad_settings_and_a_wrong_feature_count_are_refused():
    with pytest.raises(ValueError):
        CropFeatureReuse(refresh_frames=0)
    with pytest.raises(ValueError):
        CropFeatureReuse(min_iou=0.0)
    r = CropFeatureReuse()
    r.plan(BOXES, crops_of(SCENE))
    with pytest.raises(ValueError):
        r.store([np.zeros(4)])


def _table(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(40, 200, (480, 640, 3)).astype(np.uint8)


def _noisy(rgb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.clip(rgb + rng.normal(0, 2, rgb.shape), 0, 255).astype(np.uint8)


def test_proposals_are_kept_while_the_picture_stays_and_recomputed_when_it_changes():
    from cbcl_pr_ros.objects.reuse import ProposalReuse

    rng = np.random.default_rng(1)
    still = ProposalReuse(refresh_frames=10)
    base, key = _table(), (True, (500.0, 500.0, 320.0, 240.0), (480, 640, 3), 16)
    props, grid = still.lookup(base, key)
    assert props is None
    still.keep(grid, key, ["p1", "p2"])
    for _ in range(3):  # sensor noise: the same picture
        assert still.lookup(_noisy(base, rng), key)[0] == ["p1", "p2"]
    moved = base.copy()
    moved[300:330, 400:430] = 255  # a 30x30 pixel object appears
    assert still.lookup(moved, key)[0] is None
    assert still.lookup(base, (False,) + key[1:])[0] is None  # depth went away: 3D would change


def test_the_candidate_joins_are_kept_with_their_proposals_and_reset_forgets_them():
    from cbcl_pr_ros.objects.reuse import ProposalReuse

    still = ProposalReuse(refresh_frames=10)
    base, key = _table(), (True, (500.0, 500.0, 320.0, 240.0), (480, 640, 3), 16, 3)
    _, grid = still.lookup(base, key)
    still.keep(grid, key, ["p1", "p2"], ([(0, 1)], ["u01"]))
    assert still.lookup(base, key)[0] == ["p1", "p2"] and still.kept_joins == ([(0, 1)], ["u01"])
    still.reset()
    assert still.kept_joins == ((), ()) and still.lookup(base, key)[0] is None


def test_kept_proposals_are_refreshed_and_slow_drift_is_caught():
    from cbcl_pr_ros.objects.reuse import ProposalReuse

    still = ProposalReuse(refresh_frames=4)
    base, key = _table(2), ("k",)
    still.keep(still.lookup(base, key)[1], key, ["p"])
    answers = [still.lookup(base, key)[0] for _ in range(4)]
    assert answers[:3] == [["p"]] * 3 and answers[3] is None  # the 4th frame after computing: refresh
    still = ProposalReuse(refresh_frames=1000, max_cell_change=8.0)
    still.keep(still.lookup(base, key)[1], key, ["p"])
    drift = [still.lookup(np.clip(base.astype(int) + k, 0, 255).astype(np.uint8), key)[0] for k in range(1, 15)]
    assert drift[0] == ["p"] and None in drift  # one level per frame adds up against the kept frame


def test_same_picture_holds_through_a_refresh_and_ends_with_a_change():
    """The extractor keeps the whole frame's vector while ``same_picture``: a refresh of the kept
    proposals is no change of the picture, a new object is."""
    from cbcl_pr_ros.objects.reuse import ProposalReuse

    rng = np.random.default_rng(2)
    still = ProposalReuse(refresh_frames=3)
    base, key = _table(3), ("k",)
    assert still.lookup(base, key)[0] is None and not still.same_picture  # nothing kept yet
    still.keep(still.lookup(base, key)[1], key, ["p"])
    seen = [(still.lookup(_noisy(base, rng), key)[0], still.same_picture) for _ in range(3)]
    assert seen == [(["p"], True), (["p"], True), (None, True)]  # the third: refreshed, same picture
    changed = base.copy()
    changed[100:130, 200:230] = 255 - changed[100:130, 200:230]
    assert still.lookup(changed, key)[0] is None and not still.same_picture


def test_recompute_forces_a_crop_however_still_it_is():
    r = CropFeatureReuse(refresh_frames=100)
    run_frame(r, noisy())
    known = r.plan(BOXES, crops_of(noisy()), recompute=[1])
    assert [f is None for f in known] == [False, True, False]
    r.store([f if f is not None else np.full(4, 9.0) for f in known])
    assert run_frame(r, noisy()) == []  # what was computed is kept for the next frame
    assert r.plan(BOXES, crops_of(noisy()))[1][0] == 9.0
