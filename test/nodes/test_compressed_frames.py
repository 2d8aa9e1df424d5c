"""A compressed camera frame is decoded only when the size its header states is within max_image_pixels.

With ``compressed: true`` anyone on the domain may publish on the extractor's image topic. A PNG of
one colour compresses about 3,000 to 1: 261 KB stated 16384x16384 and decoded to 768 MiB of RGB
(2.2 s), per message. The PNG's and JPEG's headers state the size the decoder will allocate, so it
is read first and a frame over the cap is refused undecoded; another format is refused whole."""
from __future__ import annotations

import cv2
import numpy as np
import pytest


def _msg(ext: str, img: np.ndarray, params=()):
    from sensor_msgs.msg import CompressedImage

    ok, buf = cv2.imencode(ext, img, list(params))
    assert ok
    msg = CompressedImage(format=ext[1:])
    msg.data = buf.tobytes()
    return msg


@pytest.mark.parametrize("ext", [".png", ".jpg"])
def test_a_small_message_stating_a_huge_picture_is_refused_undecoded(ext, monkeypatch):
    from cbcl_pr_ros.features import preprocessing
    from cbcl_pr_ros.nodes.conversions import compressed_msg_to_rgb

    msg = _msg(ext, np.zeros((6000, 6000), np.uint8))  # 36 Mpx of one grey in a few hundred KB
    assert len(msg.data) < 2_000_000
    decoded = []
    real = preprocessing.cv2.imdecode
    monkeypatch.setattr(preprocessing.cv2, "imdecode", lambda *a: decoded.append(1) or real(*a))
    with pytest.raises(ValueError, match=r"6000x6000 pixels; the most decoded is 16777216"):
        compressed_msg_to_rgb(msg)
    assert decoded == []
    assert compressed_msg_to_rgb(msg, 6000 * 6000).shape == (6000, 6000, 3)  # an operator's higher cap


@pytest.mark.parametrize("ext, params", [(".jpg", ()), (".jpg", (cv2.IMWRITE_JPEG_PROGRESSIVE, 1)), (".png", ())])
def test_camera_frames_decode_as_before_and_their_size_is_read_right(ext, params):
    from cbcl_pr_ros.nodes.conversions import compressed_msg_to_rgb, compressed_size

    rgb = np.random.default_rng(0).integers(0, 256, (480, 640, 3), np.uint8)
    msg = _msg(ext, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), params)
    assert compressed_size(bytes(msg.data)) == (640, 480)
    out = compressed_msg_to_rgb(msg)
    assert out.shape == (480, 640, 3)
    if ext == ".png":
        assert np.array_equal(out, rgb)


def test_a_header_without_a_size_is_refused():
    from cbcl_pr_ros.nodes.conversions import compressed_size

    for broken in (b"\x89PNG\r\n\x1a\n", b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIEND", b"\xff\xd8\xff\xe0\x00\x10JFIF",
                   b"\xff\xd8\xff\xda\x00\x08"):
        with pytest.raises(ValueError, match="PNG without|JPEG without"):
            compressed_size(broken)


@pytest.mark.parametrize("ext", [".webp", ".tiff", ".bmp", ".ppm"])
def test_formats_other_than_png_and_jpeg_are_refused_undecoded(ext, monkeypatch):
    """OpenCV decodes WebP, TIFF, BMP, PPM and more from a CompressedImage's bytes, and those were
    decoded without a size read first (a 10 KB WebP of one colour, 16383x16383, decoded to 767 MiB in
    2.3 s). The message documents PNG and JPEG, image_transport's compressed sends those: anything else
    is refused."""
    from cbcl_pr_ros.features import preprocessing
    from cbcl_pr_ros.nodes.conversions import compressed_msg_to_rgb

    msg = _msg(ext, np.zeros((8, 8, 3), np.uint8))
    decoded = []
    monkeypatch.setattr(preprocessing.cv2, "imdecode", lambda *a: decoded.append(1))
    with pytest.raises(ValueError, match="neither PNG nor JPEG"):
        compressed_msg_to_rgb(msg)
    assert decoded == []
