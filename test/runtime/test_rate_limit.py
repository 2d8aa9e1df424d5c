"""The learner's prediction-rate limit keeps a camera's rate (simulated clocks: no timing here)."""
from __future__ import annotations

import doctest

import numpy as np
import pytest

from cbcl_pr_ros.runtime import rate_limit
from cbcl_pr_ros.settings.params import PARAMS
from cbcl_pr_ros.runtime.rate_limit import RateLimiter


def _camera(rate_hz: float, seconds: float, jitter_s: float, seed: int = 0) -> np.ndarray:
    """Arrival times of a camera on a fixed period, each frame early or late by a few ms."""
    rng = np.random.default_rng(seed)
    n = int(rate_hz * seconds)
    return np.sort(np.arange(n) / rate_hz + rng.normal(0.0, jitter_s, n).clip(-0.4 / rate_hz, 0.4 / rate_hz))


def _passed(times: np.ndarray, limit_hz: float) -> float:
    lim = RateLimiter()
    return sum(lim.allow(float(t), limit_hz) for t in times) / (times[-1] - times[0])


@pytest.mark.parametrize("jitter_ms", [1.0, 4.0, 10.0])
def test_a_30hz_camera_passes_whole_at_the_default_and_at_a_30hz_limit(jitter_ms):
    times = _camera(30.0, 60.0, jitter_ms / 1000)
    default = next(p.default for p in PARAMS if p.name == "max_prediction_rate")
    assert _passed(times, default) >= 29.5
    assert _passed(times, 30.0) >= 29.5


def test_the_old_rule_would_have_dropped_jittered_frames():
    """The drop rule this replaces (a frame < 1/rate after the last one) loses many of them."""
    times, last, kept = _camera(30.0, 60.0, 0.004), -1.0, 0
    for t in times:
        if t - last >= 1 / 30.0:
            kept, last = kept + 1, t
    assert kept / 60.0 < 29.5 <= _passed(times, 30.0)


def test_a_faster_stream_is_cut_to_the_rate_on_average():
    times = _camera(60.0, 30.0, 0.003)
    assert 9.0 <= _passed(times, 10.0) <= 10.5
    assert _passed(times, 0.0) == pytest.approx(60.0, rel=0.02)


def test_clock_going_backwards_refills_and_bad_burst_is_refused():
    lim = RateLimiter(burst=1.0)
    assert lim.allow(100.0, 1.0) and not lim.allow(100.5, 1.0)
    assert lim.allow(3.0, 1.0)  # a bag restarting its /clock
    with pytest.raises(ValueError, match="burst"):
        RateLimiter(burst=0.5)


def test_doctest():
    res = doctest.testmod(rate_limit)
    assert res.attempted > 0 and res.failed == 0
