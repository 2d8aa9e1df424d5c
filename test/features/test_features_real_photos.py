"""Sanity on real photographs shipped with scikit-image: the default backbone sees what is there."""

from __future__ import annotations

import numpy as np
import pytest

skdata = pytest.importorskip("skimage.data", reason="scikit-image (requirements/test.txt) provides the photos")

CAT_CLASSES = range(281, 286)  # ImageNet: tabby, tiger cat, Persian, Siamese, Egyptian cat
ESPRESSO = 967


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_two_crops_of_one_photo_are_closer_than_other_photos(effnet_onnx):
    cat = skdata.chelsea()
    crops = [cat[:260, :380], cat[40:, 70:]]
    others = [skdata.coffee(), skdata.astronaut(), skdata.rocket()]
    f = _unit(effnet_onnx.extract(crops + others))
    same = float(f[0] @ f[1])
    cross = f[:2] @ f[2:].T
    assert same > 0.7 and same > cross.max() + 0.3, (same, cross)


def test_imagenet_head_recognises_cat_and_espresso(effnet_torch):
    feats = effnet_torch.extract([skdata.chelsea(), skdata.coffee()])
    logits = effnet_torch.logits(feats)
    assert int(np.argmax(logits[0])) in CAT_CLASSES
    assert int(np.argmax(logits[1])) == ESPRESSO


def test_ros_message_path_gives_the_same_features_as_the_array(effnet_onnx):
    from cbcl_pr_ros.features import image_to_rgb, rgb_to_image_fields

    photo = skdata.coffee()
    f = rgb_to_image_fields(photo, "bgra8")
    decoded = image_to_rgb(f["encoding"], f["height"], f["width"], f["step"], f["data"], f["is_bigendian"])
    np.testing.assert_array_equal(effnet_onnx.extract([decoded]), effnet_onnx.extract([photo]))
