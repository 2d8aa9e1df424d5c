"""Decoding of camera messages and the crop/resize/normalise path."""

from __future__ import annotations

import array

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cbcl_pr_ros.features import (
    SUPPORTED_ENCODINGS,
    compressed_to_rgb,
    image_to_rgb,
    load_image_file,
    rgb_to_image_fields,
)
from cbcl_pr_ros.features.preprocessing import (
    EFFICIENTNET_LITE_SPEC,
    IMAGENET_SPEC,
    crop_and_resize,
    preprocess_batch,
)

COLOUR = ("rgb8", "bgr8", "rgba8", "bgra8")


def _rgb(h=5, w=7, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _decode(fields):
    return image_to_rgb(fields["encoding"], fields["height"], fields["width"], fields["step"], fields["data"],
                        fields["is_bigendian"])


@pytest.mark.parametrize("enc", COLOUR)
def test_colour_encodings_round_trip_exactly(enc):
    rgb = _rgb()
    out = _decode(rgb_to_image_fields(rgb, enc))
    assert out.dtype == np.uint8 and out.shape == (5, 7, 3)
    np.testing.assert_array_equal(out, rgb)


@pytest.mark.parametrize("enc", ("mono8", "mono16"))
def test_mono_encodings_round_trip_grey_images_exactly(enc):
    grey = np.random.default_rng(1).integers(0, 256, (4, 6), dtype=np.uint8)
    rgb = np.repeat(grey[:, :, None], 3, axis=2)
    fields = rgb_to_image_fields(rgb, enc)
    assert fields["step"] == 6 * (2 if enc == "mono16" else 1)
    np.testing.assert_array_equal(_decode(fields), rgb)


def test_exact_pixel_values_per_encoding():
    # one pixel, R=10 G=20 B=30 (A=40 where there is alpha)
    cases = {
        "rgb8": bytes([10, 20, 30]),
        "bgr8": bytes([30, 20, 10]),
        "rgba8": bytes([10, 20, 30, 40]),
        "bgra8": bytes([30, 20, 10, 40]),
    }
    for enc, data in cases.items():
        assert image_to_rgb(enc, 1, 1, len(data), data).tolist() == [[[10, 20, 30]]], enc
    assert image_to_rgb("mono8", 1, 2, 2, bytes([7, 250])).tolist() == [[[7, 7, 7], [250, 250, 250]]]


def test_mono16_honours_endianness_and_scales_like_cv_bridge():
    values = [0, 257, 32896, 65535, 1000]
    expected = [round(v * 255 / 65535) for v in values]
    little = np.array(values, dtype="<u2").tobytes()
    big = np.array(values, dtype=">u2").tobytes()
    for data, be in ((little, 0), (big, 1)):
        out = image_to_rgb("mono16", 1, 5, 10, data, is_bigendian=be)
        assert out[0, :, 0].tolist() == expected
        assert (out[..., 0] == out[..., 2]).all()
    # reading big-endian bytes as little-endian gives different values: the flag matters
    assert image_to_rgb("mono16", 1, 5, 10, big, 0)[0, :, 0].tolist() != expected


def test_step_padding_is_skipped():
    rgb = _rgb(3, 4)
    padded = np.full((3, 4 * 3 + 5), 99, np.uint8)
    padded[:, :12] = rgb.reshape(3, 12)
    out = image_to_rgb("rgb8", 3, 4, 17, padded.tobytes())
    np.testing.assert_array_equal(out, rgb)


@pytest.mark.parametrize(
    "container", [bytes, bytearray, lambda b: array.array("B", b), lambda b: np.frombuffer(b, np.uint8), memoryview]
)
def test_accepts_the_buffer_types_ros_uses(container):
    rgb = _rgb(2, 3)
    out = image_to_rgb("rgb8", 2, 3, 9, container(rgb.tobytes()))
    np.testing.assert_array_equal(out, rgb)


def test_result_does_not_alias_the_message_buffer():
    buf = bytearray(_rgb(2, 2).tobytes())
    out = image_to_rgb("rgb8", 2, 2, 6, buf)
    buf[0] = (buf[0] + 1) % 256
    assert out[0, 0, 0] != buf[0]


@given(h=st.integers(1, 6), w=st.integers(1, 6), pad=st.integers(0, 5), enc=st.sampled_from(COLOUR))
@settings(max_examples=40, deadline=None)
def test_round_trip_with_any_padding(h, w, pad, enc):
    rgb = _rgb(h, w, seed=h * 10 + w)
    f = rgb_to_image_fields(rgb, enc)
    rows = np.frombuffer(f["data"], np.uint8).reshape(h, f["step"])
    padded = np.hstack([rows, np.zeros((h, pad), np.uint8)])
    out = image_to_rgb(enc, h, w, f["step"] + pad, padded.tobytes())
    np.testing.assert_array_equal(out, rgb)


@pytest.mark.parametrize(
    "args, match",
    [
        (("yuv422", 2, 2, 4, bytes(8)), "unsupported image encoding 'yuv422'"),
        (("rgb8", 0, 2, 6, b""), "zero size"),
        (("rgb8", 2, 0, 0, b""), "zero size"),
        (("rgb8", 2, 2, 5, bytes(10)), "step 5 does not match"),
        (("mono16", 2, 2, 3, bytes(6)), "step 3 does not match"),
        (("rgb8", 2, 2, 6, bytes(11)), "truncated image buffer: got 11 bytes, expected"),
        (("bgra8", 2, 2, 8, bytes(17)), "too long: got 17 bytes"),
    ],
)
def test_bad_messages_raise_value_error_naming_the_problem(args, match):
    with pytest.raises(ValueError, match=match):
        image_to_rgb(*args)


def test_non_bytes_data_is_a_type_error():
    with pytest.raises(TypeError, match="bytes-like"):
        image_to_rgb("rgb8", 1, 1, 3, 12345)
    with pytest.raises(TypeError, match="uint8"):
        image_to_rgb("rgb8", 1, 1, 3, np.zeros(3, np.float32))


def test_supported_encodings_listed():
    assert set(SUPPORTED_ENCODINGS) == {"rgb8", "bgr8", "rgba8", "bgra8", "mono8", "mono16"}


def test_compressed_png_is_exact_and_jpeg_close():
    rgb = _rgb(16, 24)
    ok, png = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    np.testing.assert_array_equal(compressed_to_rgb("png", png.tobytes()), rgb)
    smooth = np.dstack([np.tile(np.arange(64, dtype=np.uint8) * 3, (64, 1))] * 3)
    smooth[..., 0] //= 2
    ok, jpg = cv2.imencode(".jpg", cv2.cvtColor(smooth, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 95])
    out = compressed_to_rgb("rgb8; jpeg compressed bgr8", jpg.tobytes())
    assert out.shape == smooth.shape
    assert np.abs(out.astype(int) - smooth.astype(int)).mean() < 3  # channel order right (R halved)


def test_compressed_bad_inputs():
    with pytest.raises(ValueError, match="could not decode"):
        compressed_to_rgb("jpeg", b"not an image at all")
    with pytest.raises(ValueError, match="empty"):
        compressed_to_rgb("jpeg", b"")
    with pytest.raises(ValueError, match="compressed depth"):
        compressed_to_rgb("16UC1; compressedDepth", b"\x00" * 20)


def test_load_image_file(tmp_path):
    rgb = _rgb(9, 11)
    p = tmp_path / "x.png"
    cv2.imwrite(str(p), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    np.testing.assert_array_equal(load_image_file(p), rgb)
    with pytest.raises(FileNotFoundError, match="missing.png"):
        load_image_file(tmp_path / "missing.png")
    (tmp_path / "bad.png").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="could not decode"):
        load_image_file(tmp_path / "bad.png")


def test_crop_is_the_centre_region_of_shorter_side_224_of_256():
    # 640x480: the kept square has side round(480 * 224 / 256) = 420, columns 110..529
    img = np.zeros((480, 640, 3), np.uint8)
    img[:, :, 0] = 255
    img[:, 110:530] = (0, 200, 0)
    out = crop_and_resize(img, EFFICIENTNET_LITE_SPEC)
    assert out.shape == (224, 224, 3)
    assert (out == np.array([0, 200, 0], np.uint8)).all()
    img[:, 109] = (255, 0, 0)
    img[:, 530] = (255, 0, 0)
    assert (crop_and_resize(img, EFFICIENTNET_LITE_SPEC) == np.array([0, 200, 0], np.uint8)).all()
    img[:, 110] = (255, 0, 0)  # the first kept column now shows
    assert (crop_and_resize(img, EFFICIENTNET_LITE_SPEC)[:, 0, 0] > 0).all()


def test_256_square_input_is_cropped_without_resampling():
    img = _rgb(256, 256)
    np.testing.assert_array_equal(crop_and_resize(img, IMAGENET_SPEC), img[16:240, 16:240])


def test_normalisation_per_backbone():
    grey = np.full((300, 300, 3), 127, np.uint8)
    white = np.full((300, 300, 3), 255, np.uint8)
    x = preprocess_batch([grey, white], EFFICIENTNET_LITE_SPEC)
    assert x.shape == (2, 3, 224, 224) and x.dtype == np.float32
    np.testing.assert_allclose(x[0], 0.0, atol=1e-7)
    np.testing.assert_allclose(x[1], 1.0, atol=1e-7)
    y = preprocess_batch(np.stack([white]), IMAGENET_SPEC)
    expected = [(1 - 0.485) / 0.229, (1 - 0.456) / 0.224, (1 - 0.406) / 0.225]
    np.testing.assert_allclose(y[0, :, 0, 0], expected, rtol=1e-5)
    # channel order: a pure red image has only the R plane above the mean
    red = np.zeros((224, 224, 3), np.uint8)
    red[..., 0] = 255
    z = preprocess_batch([red], EFFICIENTNET_LITE_SPEC)
    assert z[0, 0].min() > 0.99 and z[0, 1].max() < -0.99


def test_bad_images_in_a_batch_name_the_index():
    good = _rgb(10, 10)
    with pytest.raises(TypeError, match="image 1: .*uint8"):
        preprocess_batch([good, good.astype(np.float32)], EFFICIENTNET_LITE_SPEC)
    with pytest.raises(ValueError, match=r"image 0: .*shape \(H, W, 3\)"):
        preprocess_batch([good[:, :, 0]], EFFICIENTNET_LITE_SPEC)
    with pytest.raises(ValueError, match="zero size"):
        preprocess_batch([np.zeros((0, 5, 3), np.uint8)], EFFICIENTNET_LITE_SPEC)


def test_preprocessing_ids_differ_between_backbones():
    assert EFFICIENTNET_LITE_SPEC.id != IMAGENET_SPEC.id
    assert "224" in EFFICIENTNET_LITE_SPEC.id and "256" in EFFICIENTNET_LITE_SPEC.id


def test_docstring_examples_run():
    import doctest

    from cbcl_pr_ros.features import preprocessing

    result = doctest.testmod(preprocessing)
    assert result.attempted >= 3 and result.failed == 0
