"""The CPU share of the fleet's updates: a bucket of CPU seconds on the caller's clocks (no timing)."""
from __future__ import annotations

import doctest

import pytest

from cbcl_pr_ros.runtime import cpu_share
from cbcl_pr_ros.runtime.cpu_share import CpuShare


def test_the_doctest():
    assert doctest.testmod(cpu_share).failed == 0


def test_costly_work_averages_to_the_share_whatever_each_piece_costs():
    budget = CpuShare(share=0.25, burst_s=2.0)
    for cost in (0.01, 1.0):  # cheap pieces or expensive ones: the same CPU over 100 s
        spent, now = 0.0, 0.0
        budget = CpuShare(share=0.25, burst_s=2.0)
        while now < 100.0:
            if budget.ready(now):
                budget.spend(now, cost)
                spent += cost
            now += 0.01
        assert 0.25 * 100 <= spent <= 0.25 * 100 + 2.0 + cost + 0.01


def test_a_clock_going_back_refills_and_bad_settings_are_refused():
    budget = CpuShare(share=0.5, burst_s=1.0)
    budget.spend(10.0, 5.0)
    assert not budget.ready(11.0)
    assert budget.ready(1.0)  # a replayed bag restarting its clock
    for share, burst in ((0.0, 1.0), (1.5, 1.0), (0.5, 0.0)):
        with pytest.raises(ValueError):
            CpuShare(share, burst)
