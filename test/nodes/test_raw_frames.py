"""A raw camera frame (sensor_msgs/Image) is a stranger's too: its width x height is checked against
``max_image_pixels`` before any work, wherever one is decoded (the extractor's stream and depth, the
learner's debug image, the teaching page), and a frame whose fields disagree is refused in one short
sentence. Before, only request images and compressed frames were bounded."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest


def _frame(width: int, height: int, step: int | None = None, data: bytes | None = None, encoding: str = "mono8"):
    """An object with sensor_msgs/Image's fields (a real message would copy the bytes for nothing)."""
    step = width if step is None else step
    return SimpleNamespace(width=width, height=height, step=step, encoding=encoding, is_bigendian=0,
                           data=bytes(step * height) if data is None else data,
                           header=SimpleNamespace(stamp=SimpleNamespace(sec=1, nanosec=0), frame_id="cam"))


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, float]] = []

    def warning(self, text: str, throttle_duration_sec: float = 0.0) -> None:
        self.lines.append(("warning", text, throttle_duration_sec))

    def error(self, text: str, throttle_duration_sec: float = 0.0) -> None:
        self.lines.append(("error", text, throttle_duration_sec))


def test_a_frame_above_the_cap_is_refused_before_any_work(monkeypatch):
    from cbcl_pr_ros.nodes import conversions

    touched = []
    monkeypatch.setattr(conversions, "image_to_rgb", lambda *a: touched.append(1))
    big = _frame(64, 32)  # 2048 pixels
    with pytest.raises(ValueError, match=r"image of 64x32 pixels; the most decoded is 2047 \(parameter max_image_pixels\)"):
        conversions.image_msg_to_rgb(big, 2047)
    # the default cap (4096 x 4096) holds with no bytes behind the size: refused before the buffer is looked at
    with pytest.raises(ValueError, match="4097x4096 pixels; the most decoded is 16777216"):
        conversions.image_msg_to_rgb(_frame(4097, 4096, data=b""))
    assert touched == []


def test_fields_that_disagree_with_the_data_are_refused_in_one_short_sentence():
    from cbcl_pr_ros.nodes.conversions import image_msg_to_rgb

    assert image_msg_to_rgb(_frame(4, 3)).shape == (3, 4, 3)
    assert image_msg_to_rgb(_frame(4, 3, step=6)).shape == (3, 4, 3)  # row padding
    for frame, why in [(_frame(4, 3, data=bytes(11)), "truncated"), (_frame(4, 3, data=bytes(13)), "too long"),
                       (_frame(4, 3, step=3, data=bytes(9)), "step 3"), (_frame(0, 3, data=b""), "zero size"),
                       (_frame(4, 3, encoding="x" * 100_000), "unsupported image encoding")]:
        with pytest.raises(ValueError, match=why) as err:
            image_msg_to_rgb(frame)
        assert len(str(err.value)) < 200  # a sender's 100,000-character encoding name came back whole


def test_the_extractor_learner_and_page_pass_their_cap(monkeypatch):
    from cbcl_pr_ros.nodes.feature_extractor import FeatureExtractorNode
    from cbcl_pr_ros.nodes.learner_debug import DebugImage
    from cbcl_pr_ros.request_checks import RequestLimits

    extractor = SimpleNamespace(compressed=False, limits=RequestLimits(max_image_pixels=100))
    assert FeatureExtractorNode._decode(extractor, _frame(10, 10)).shape == (10, 10, 3)
    with pytest.raises(ValueError, match="max_image_pixels"):
        FeatureExtractorNode._decode(extractor, _frame(11, 10))
    log = _Log()
    debug = DebugImage(False, "image", log, None, max_pixels=100)
    frame = _frame(11, 10)
    debug.frames.put((1, 0, "cam"), frame)
    assert debug.prediction_image(frame.header, SimpleNamespace(label="mug", confidence=0.9, known=True)) is None
    assert log.lines and log.lines[0][0] == "warning" and "max_image_pixels" in log.lines[0][1]


def test_the_page_warns_about_a_frame_it_cannot_show_and_goes_on():
    """The page logged a publisher's undecodable frame at ERROR (its callback guard's line for a bug of
    ours); a bad frame is the publisher's mistake: one warning, at most once a second, nothing shown."""
    import threading

    from cbcl_pr_ros.nodes.teaching_page import TeachingPageNode

    log = _Log()
    frames = []
    page = SimpleNamespace(min_period=0.0, _send_lock=threading.Lock(), _last_sent=0.0, max_pixels=100,
                           quality=80, get_logger=lambda: log, state=SimpleNamespace(set_frame=frames.append))
    for bad in (_frame(11, 10), _frame(4, 3, data=bytes(5)), _frame(4, 3, encoding="yuv_odd")):
        TeachingPageNode._send(page, bad, (), 0)  # used to raise: the guard then logged an error
    assert [level for level, _, _ in log.lines] == ["warning"] * 3 and frames == []
    assert all(throttle == 1.0 for _, _, throttle in log.lines) and "max_image_pixels" in log.lines[0][1]
    TeachingPageNode._send(page, _frame(8, 6, data=np.full(48, 128, np.uint8).tobytes()), (), 0)
    assert len(frames) == 1 and (frames[0].width, frames[0].height) == (8, 6)


def test_a_depth_frame_above_the_cap_is_refused_and_its_encoding_is_not_echoed_raw():
    from cbcl_pr_ros.nodes.detections_msgs import depth_msg_to_array

    with pytest.raises(ValueError, match="depth image of 11x10 pixels.*max_image_pixels"):
        depth_msg_to_array(_frame(11, 10, step=44, encoding="32FC1"), 100)
    assert depth_msg_to_array(_frame(10, 10, step=40, encoding="32FC1"), 100).shape == (10, 10)
    with pytest.raises(ValueError) as err:
        depth_msg_to_array(_frame(2, 2, step=8, encoding="a\nforged log line" + "x" * 10_000))
    assert "\n" not in str(err.value) and len(str(err.value)) < 200
