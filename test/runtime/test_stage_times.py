"""Issue 25: the nodes' per-stage timing (runtime/stage_times.py)."""
from __future__ import annotations

import doctest
import time

import pytest

from cbcl_pr_ros.runtime import stage_times
from cbcl_pr_ros.runtime.stage_times import StageTimes


def test_doctest():
    res = doctest.testmod(stage_times)
    assert res.failed == 0 and res.attempted > 0


def test_summary_keeps_the_count_and_total_and_percentiles_of_the_recent_window():
    times = StageTimes(window=3)
    for ms in (1.0, 2.0, 3.0, 100.0):
        times.add("predict", ms / 1000.0, cpu_s=ms / 2000.0)
    row = times.summary()["predict"]
    assert row["n"] == 4 and row["total_s"] == pytest.approx(0.106)
    assert row["max_ms"] == pytest.approx(100.0) and row["p50_ms"] == pytest.approx(3.0)  # window: 2, 3, 100
    assert row["cpu_ms"] == pytest.approx(105.0 / 6)


def test_stage_records_wall_and_cpu_time_even_when_the_body_raises():
    times = StageTimes()
    with pytest.raises(ValueError):
        with times.stage("decode"):
            time.sleep(0.01)
            raise ValueError("bad frame")
    row = times.summary()["decode"]
    assert row["n"] == 1 and row["mean_ms"] >= 9.0 and row["cpu_ms"] < row["mean_ms"]
    with pytest.raises(ValueError):
        StageTimes(window=0)
