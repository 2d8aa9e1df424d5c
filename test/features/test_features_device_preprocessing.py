"""The GPU preprocessing (torch ops on the backbone's device) against the CPU path (OpenCV), run on
CPU torch; the streaming/batch uint8 path of TorchBackbone; the prefetching batch producer."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from cbcl_pr_ros.features import extract_prefetched, make_backbone
from cbcl_pr_ros.features.backbones import BACKBONES, TorchBackbone
from cbcl_pr_ros.features.device_preprocessing import DevicePreprocessor, area_weights, device_resizes
from cbcl_pr_ros.features.preprocessing import (
    EFFICIENTNET_LITE_SPEC,
    IMAGENET_SPEC,
    crop_batch,
    normalise,
    preprocess_batch,
)


def _smooth(h, w, seed):
    """Photo-like content (smooth), where rounding boundaries are as common as in camera frames."""
    rng = np.random.default_rng(seed)
    return cv2.resize(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), (w, h), interpolation=cv2.INTER_CUBIC)


def _noise(h, w, seed):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _device_crop(spec, img):
    return DevicePreprocessor(spec, "cpu").crop_resize(torch.from_numpy(img[None])).numpy()


def _host_crop(spec, img):
    return crop_batch([img], spec).astype(np.float32).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("h, w", [(480, 640), (640, 480), (720, 1280), (1080, 1920), (512, 512), (300, 301)])
@pytest.mark.parametrize("make", [_smooth, _noise])
def test_device_crop_resize_equals_opencv_on_camera_sizes(h, w, make):
    img = make(h, w, seed=h + w)
    np.testing.assert_array_equal(_device_crop(EFFICIENTNET_LITE_SPEC, img), _host_crop(EFFICIENTNET_LITE_SPEC, img))


def test_device_crop_resize_is_within_one_grey_level_on_any_size():
    """Stated tolerance: at most one grey level, in under 0.1 % of pixels (float rounding ties)."""
    rng = np.random.default_rng(5)
    for _ in range(12):
        h, w = (int(v) for v in rng.integers(258, 1100, 2))
        img = _noise(h, w, int(rng.integers(1 << 30)))
        d = np.abs(_device_crop(EFFICIENTNET_LITE_SPEC, img) - _host_crop(EFFICIENTNET_LITE_SPEC, img))
        assert d.max() <= 1.0 and (d > 0).mean() < 1e-3, (h, w, d.max(), (d > 0).mean())


@pytest.mark.parametrize("spec", [EFFICIENTNET_LITE_SPEC, IMAGENET_SPEC], ids=["effnet", "imagenet"])
def test_device_normalisation_equals_host(spec):
    img = _smooth(480, 640, 3)
    pre = DevicePreprocessor(spec, "cpu")
    np.testing.assert_allclose(pre(torch.from_numpy(img[None])).numpy(), preprocess_batch([img], spec),
                               rtol=0, atol=1e-6)
    crops = crop_batch([img, _noise(100, 90, 1)], spec)
    np.testing.assert_array_equal(pre.normalise_crops(torch.from_numpy(crops)).numpy(), normalise(crops, spec))


def test_area_weights_are_an_average_and_enlarging_is_left_to_the_host():
    w = area_weights(420, 224)
    assert w.shape == (224, 420) and np.allclose(w.sum(axis=1), 1.0) and (w >= 0).all()
    assert device_resizes(480, 640, EFFICIENTNET_LITE_SPEC) and not device_resizes(256, 300, EFFICIENTNET_LITE_SPEC)
    assert not device_resizes(120, 160, EFFICIENTNET_LITE_SPEC)
    with pytest.raises(ValueError, match="enlarged"):
        _device_crop(EFFICIENTNET_LITE_SPEC, _noise(120, 160, 0))
    with pytest.raises(ValueError, match="uint8"):
        DevicePreprocessor(EFFICIENTNET_LITE_SPEC, "cpu")(torch.zeros((1, 300, 300, 3)))


@pytest.fixture(scope="module")
def uint8_path(effnet_torch):
    """The CUDA code path (uint8 upload, device crop/normalise, grouping by size) forced on the CPU."""
    return TorchBackbone(BACKBONES["efficientnet_lite0"], effnet_torch.weights_file, device="cpu",
                         batch_size=3, device_preprocessing=True)


def _mixed_frames():
    return [_smooth(480, 640, 1), _noise(90, 120, 2), _smooth(480, 640, 3), _smooth(720, 1280, 4),
            _noise(256, 256, 5)]


def test_uint8_device_path_matches_the_cpu_path(uint8_path, effnet_torch):
    frames = _mixed_frames()
    ref = effnet_torch.extract(frames)
    got = uint8_path.extract(frames)
    assert got.shape == ref.shape and got.dtype == np.float32
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
    one_by_one = np.vstack([uint8_path.extract([f]) for f in frames])
    assert np.abs(one_by_one - got).max() <= 1e-5 * np.abs(ref).max()
    assert uint8_path.stage(frames[0]) is not None and uint8_path.stage(frames[1]).shape == (224, 224, 3)
    with pytest.raises(TypeError, match="image 1: .*uint8"):
        uint8_path.extract([frames[0], frames[1].astype(np.float32)])
    assert (uint8_path.numerics_id, effnet_torch.numerics_id) == ("", "")


def test_prefetched_extraction_on_the_uint8_path_crops_on_host_or_device_alike(uint8_path, effnet_torch):
    frames = _mixed_frames()
    ref = effnet_torch.extract(frames)
    for host_crop in (True, False):
        got = extract_prefetched(uint8_path, len(frames), frames.__getitem__, workers=2, host_crop=host_crop)
        assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
    assert uint8_path.stage(frames[0], host_crop=True).shape == (224, 224, 3)
    assert uint8_path.stage(frames[0]).shape == (480, 640, 3)


def test_prefetched_extraction_keeps_order_and_equals_extract(effnet_onnx):
    frames = _mixed_frames() * 2
    ref = effnet_onnx.extract(frames)
    seen = []
    for workers in (0, 1, 3):
        got = extract_prefetched(effnet_onnx, len(frames), frames.__getitem__, batch_size=4, workers=workers,
                                 progress=seen.append)
        np.testing.assert_array_equal(got, ref)
    assert seen == [4, 4, 2] * 3
    assert extract_prefetched(effnet_onnx, 0, frames.__getitem__).shape == (0, 1280)


def test_prefetched_extraction_names_the_failing_image(effnet_onnx):
    frames = _mixed_frames()
    frames[3] = frames[3][:, :, :2]
    for workers in (0, 2):
        with pytest.raises(ValueError, match=r"image 3: .*\(H, W, 3\)"):
            extract_prefetched(effnet_onnx, len(frames), frames.__getitem__, batch_size=2, workers=workers)

    def missing(i):
        raise FileNotFoundError(f"no file {i}")

    with pytest.raises(FileNotFoundError, match="image 0: no file 0"):
        extract_prefetched(effnet_onnx, 2, missing, workers=1)
    with pytest.raises(ValueError, match="n must be"):
        extract_prefetched(effnet_onnx, -1, missing)


def test_prefetched_extraction_takes_any_object_with_extract():
    class Doubler:
        feature_dim = 2

        def extract(self, images):
            return np.array([[float(im.sum()), 2.0 * im.sum()] for im in images], np.float32)

    imgs = [np.full((2, 2, 3), i, np.uint8) for i in range(5)]
    got = extract_prefetched(Doubler(), 5, imgs.__getitem__, batch_size=2, workers=2)
    np.testing.assert_array_equal(got[:, 0], [12.0 * i for i in range(5)])


def test_make_backbone_keeps_cpu_defaults(resnet18_weights):
    bb = make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, device="cpu")
    assert (bb.device_preprocessing, bb.cuda_graphs, bb.precision) == (False, False, "fp32")
