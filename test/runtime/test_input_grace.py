"""An input the first frames came without is missing only after a few frames and seconds (runtime/input_grace.py)."""
from __future__ import annotations

import doctest

import pytest

from cbcl_pr_ros.runtime import input_grace
from cbcl_pr_ros.runtime.input_grace import InputGrace


def test_doctest():
    res = doctest.testmod(input_grace)
    assert res.attempted > 0 and res.failed == 0


def _grace(times: list[float], **kw) -> InputGrace:
    it = iter(times)
    return InputGrace(clock=lambda: next(it), **kw)


def test_both_the_frames_and_the_seconds_must_go_by():
    fast = _grace([i / 30 for i in range(90)])  # a 30 Hz camera: 5 frames are no evidence, 2 s are
    assert [fast.missing() for _ in range(90)].index(True) == 60
    slow = _grace([float(i) for i in range(10)])  # 1 Hz: 2 s are two frames, 5 frames are needed
    assert [slow.missing() for _ in range(10)].index(True) == 4


def test_after_the_input_came_a_frame_without_it_is_missing_at_once_until_reset():
    g = _grace([0.0, 0.1, 0.2])
    assert not g.missing()
    g.arrived()
    assert g.missing() and g.missing()  # no clock read: the start-up is past
    g.reset()
    assert not g.missing()


@pytest.mark.parametrize("kw", [{"frames": 0}, {"frames": True}, {"frames": 2.5}, {"seconds": -1.0},
                                {"seconds": float("nan")}])
def test_nonsense_settings_are_refused(kw):
    with pytest.raises(ValueError):
        InputGrace(**kw)
