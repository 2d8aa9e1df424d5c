"""Issue 25: the nodes' per-stage timing (runtime/stage_times.py)."""
from __future__ import annotations

import doctest
import json
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


def test_a_stopping_node_says_one_short_line_unless_the_benches_ask_for_its_stage_times(monkeypatch):
    from cbcl_pr_ros.runtime.stage_times import STOP_STATS_ENV, stop_lines

    stats = {"received": 3, "stages": {"frame": {"n": 3, "p50_ms": 12.5}}}
    for unset in (None, "", "0"):
        if unset is None:
            monkeypatch.delenv(STOP_STATS_ENV, raising=False)
        else:
            monkeypatch.setenv(STOP_STATS_ENV, unset)
        assert stop_lines("node", "3 frames", stats) == "node stopped: 3 frames"
    monkeypatch.setenv(STOP_STATS_ENV, "1")
    first, second = stop_lines("node", "3 frames", stats).split("\n")
    assert first == "node stopped: 3 frames"
    assert second.startswith("node stopping: ") and json.loads(second.split(": ", 1)[1]) == stats


def test_the_extractors_stop_line_counts_its_frames_in_words(monkeypatch):
    pytest.importorskip("rclpy")
    from types import SimpleNamespace

    from cbcl_pr_ros.nodes.feature_extractor import FeatureExtractorNode

    monkeypatch.delenv(stage_times.STOP_STATS_ENV, raising=False)
    times = StageTimes()
    times.add("frame", 0.0123)
    node = SimpleNamespace(received=5, processed=4, dropped=1, failed=0, objects_published=7, depth_rejected=0,
                           backbone=None, times=times)
    node.stats = lambda: FeatureExtractorNode.stats(node)
    line = FeatureExtractorNode.stop_report(node)
    assert line.startswith("feature_extractor stopped: 5 frames received, 4 processed, 1 dropped") and "\n" not in line
    assert line.endswith("7 objects published; a frame took 12 ms (median)")
