"""Object crops with the background filled (issue 20, outcome 3): what lies outside a depth proposal's
mask leaves the crop, so the same object on another table gives the same crop."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.perception import Proposal, crop_images, mask_for_box
from cbcl_pr_ros.perception.boxes import MASK_GROW, NEUTRAL_RGB

BOX = (40, 30, 80, 70)  # 40 x 40 px


def _object_mask(shape=(120, 160)) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[35:65, 45:75] = True  # the object itself, inside its box
    return m


def _scene(background: int, seed: int = 0) -> np.ndarray:
    """A textured object on a background of one grey level with noise (a table)."""
    rng = np.random.default_rng(seed)
    rgb = np.clip(background + rng.integers(-20, 21, (120, 160, 3)), 0, 255).astype(np.uint8)
    obj = np.random.default_rng(99).integers(0, 256, (30, 30, 3), dtype=np.uint8)
    rgb[35:65, 45:75] = obj
    return rgb


def _prop(mask, depth: bool = True) -> Proposal:
    c = np.array([0.0, 0.0, 1.0]) if depth else np.full(3, np.nan)
    return Proposal(BOX, mask, c, np.full(3, 0.1 if depth else np.nan), 1.0)


def test_outside_the_grown_mask_is_neutral_inside_untouched():
    rgb = _scene(200)
    crop = crop_images(rgb, [_prop(_object_mask())], margin=0.1)[0]
    plain = crop_images(rgb, [_prop(_object_mask())], margin=0.1, mask_background=False)[0]
    assert crop.shape == plain.shape == (48, 48, 3)  # the same square crop, only the pixels change
    # crop origin: box 40 px + 0.1 margin on each side -> (36, 26)
    k = int(round(MASK_GROW * 40))
    inside = np.zeros(crop.shape[:2], bool)
    inside[35 - 26 - k:65 - 26 + k, 45 - 36 - k:75 - 36 + k] = True
    assert np.array_equal(crop[inside], plain[inside])
    assert (crop[~inside] == np.array(NEUTRAL_RGB, np.uint8)).all()
    assert not np.array_equal(crop, plain)


def test_same_object_on_two_tables_gives_the_same_masked_crop():
    a, b = _scene(60, seed=1), _scene(210, seed=2)
    pa, pb = (crop_images(x, [_prop(_object_mask())], mask_background=False)[0] for x in (a, b))
    ma, mb = (crop_images(x, [_prop(_object_mask())])[0] for x in (a, b))
    k = int(round(MASK_GROW * 40))
    rim = np.zeros(ma.shape[:2], bool)  # the grown rim still holds a little table
    rim[35 - 26 - k:65 - 26 + k, 45 - 36 - k:75 - 36 + k] = True
    rim[35 - 26:65 - 26, 45 - 36:75 - 36] = False
    assert np.abs(pa.astype(int) - pb.astype(int)).mean() > 50
    assert np.array_equal(ma[~rim], mb[~rim])


@pytest.mark.parametrize("case", ["no_mask", "no_depth", "switched_off", "other_size", "empty_in_crop"])
def test_crops_that_stay_as_they_are(case):
    rgb = _scene(200)
    plain = crop_images(rgb, [_prop(None)])[0]
    mask = _object_mask()
    if case == "no_mask":
        got = crop_images(rgb, [_prop(None)])[0]
    elif case == "no_depth":  # an RGB-method proposal: its colour mask is not trusted
        got = crop_images(rgb, [_prop(mask, depth=False)])[0]
    elif case == "switched_off":
        got = crop_images(rgb, [_prop(mask)], mask_background=False)[0]
    elif case == "other_size":
        got = crop_images(rgb, [_prop(mask[:50, :50])])[0]
    else:
        empty = np.zeros_like(mask)
        empty[0:5, 150:160] = True  # the object's mask lies elsewhere
        got = crop_images(rgb, [_prop(empty)])[0]
    assert np.array_equal(got, plain)


def test_mask_for_box_prefers_the_matching_proposal_then_the_foreground():
    shape = (120, 160)
    own = _object_mask(shape)
    other = np.zeros(shape, bool)
    other[10:30, 100:140] = True
    props = [Proposal((100, 10, 140, 30), other, np.array([0, 0, 1.0]), np.full(3, 0.1), 0.9), _prop(own)]
    m, src = mask_for_box(props, (42, 32, 78, 68), shape)
    assert src == "proposal" and m is own
    # a hand-drawn box around both pieces of a split object: no proposal matches, the foreground inside it
    half = np.zeros(shape, bool)
    half[35:65, 45:60] = True
    rest = own & ~half
    split = [Proposal((45, 35, 60, 65), half, np.array([0, 0, 1.0]), np.full(3, 0.1), 0.9),
             Proposal((60, 35, 75, 65), rest, np.array([0, 0, 1.0]), np.full(3, 0.1), 0.9)]
    m, src = mask_for_box(split, (20, 20, 100, 90), shape)
    assert src == "foreground" and np.array_equal(m, own)
    # nothing of a proposal inside the box, or only RGB-method proposals: no mask
    assert mask_for_box(props, (0, 80, 30, 110), shape) == (None, "none")
    rgb_only = [Proposal(BOX, own, np.full(3, np.nan), np.full(3, np.nan), 0.9)]
    assert mask_for_box(rgb_only, BOX, shape) == (None, "none")
    assert mask_for_box(props, (200, 200, 300, 300), shape) == (None, "none")
