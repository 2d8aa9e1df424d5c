"""objects/depth_pairing.py: a colour frame gets the depth frame of its stamp, waited for while depth
streams, else a recent one, else none."""
from __future__ import annotations

import threading

import pytest

from cbcl_pr_ros.objects import DepthPairing

S = 1_000_000_000


def test_the_depth_of_the_same_stamp_is_taken_once():
    pairing: DepthPairing[str] = DepthPairing(capacity=4, wait_s=0.0)
    assert not pairing.seen and pairing.take(5 * S, max_age_s=1.0) is None  # no depth at all: no wait
    pairing.put(5 * S, "d5")
    pairing.put(6 * S, "d6")
    assert pairing.seen
    assert pairing.take(5 * S, max_age_s=0.0) == "d5"
    assert pairing.take(5 * S, max_age_s=0.0) is None  # taken; d6 is newer than the colour frame
    pairing.clear()
    assert not pairing.seen and pairing.take(6 * S, max_age_s=1.0) is None


def test_a_depth_frame_on_its_way_is_waited_for():
    pairing: DepthPairing[str] = DepthPairing(wait_s=5.0)
    pairing.put(1 * S, "old")
    late = threading.Timer(0.05, pairing.put, args=(2 * S, "d2"))
    late.start()
    try:
        assert pairing.take(2 * S, max_age_s=0.0) == "d2"  # not the old one, though it is there
    finally:
        late.join()


def test_without_its_own_the_newest_depth_serves_while_recent():
    pairing: DepthPairing[str] = DepthPairing(wait_s=0.0)
    pairing.put(10 * S, "d10")
    assert pairing.take(10 * S + S // 10, max_age_s=0.2) == "d10"  # 0.1 s older: recent enough
    assert pairing.take(11 * S, max_age_s=0.2) is None  # 1 s older
    assert pairing.take(9 * S, max_age_s=0.2) is None  # newer than the colour frame


def test_the_oldest_falls_out_and_bad_settings_are_refused():
    pairing: DepthPairing[int] = DepthPairing(capacity=2, wait_s=0.0)
    for i in range(3):
        pairing.put(i * S, i)
    assert pairing.take(0, max_age_s=0.0) is None and pairing.take(1 * S, max_age_s=0.0) == 1
    for bad in ({"capacity": 0}, {"capacity": True}, {"wait_s": -1.0}, {"wait_s": 60.0}):
        with pytest.raises(ValueError):
            DepthPairing(**bad)


def test_depth_frames_held_stay_within_their_byte_budget_and_the_newest_stays():
    pairing: DepthPairing[bytes] = DepthPairing(capacity=8, wait_s=0.0, max_bytes=100, size=len)
    for i in range(5):  # frames of 40 bytes: two fit
        pairing.put(i * S, bytes(40))
    assert pairing.take(2 * S, max_age_s=0.0) is None and pairing.take(3 * S, max_age_s=0.0) == bytes(40)
    pairing.put(5 * S, bytes(1000))  # larger than the budget alone: kept, as the newest, and only it
    assert pairing.take(4 * S, max_age_s=0.0) is None and pairing.take(5 * S, max_age_s=0.0) == bytes(1000)
    pairing.put(5 * S, bytes(10))  # the same stamp again replaces, and counts once
    pairing.put(6 * S, bytes(80))
    assert pairing.take(5 * S, max_age_s=0.0) == bytes(10) and pairing.take(6 * S, max_age_s=0.0) == bytes(80)
    with pytest.raises(ValueError):
        DepthPairing(max_bytes=10)  # a budget needs the size of an item
