"""The recent-objects store that feeds a teach with negatives from the stream (issue 20, outcome 3)."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.objects.tracks import StreamNegatives

D = 8


def test_it_is_bounded_and_keeps_the_most_recent():
    store = StreamNegatives(capacity=5, min_interval_s=0.0, min_change=0.0)
    for t in range(12):
        store.add([t], np.full((1, D), float(t)), stamp_s=float(t))
    assert len(store) == 5
    assert store.vectors()[:, 0].tolist() == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert store.vectors().dtype == np.float32


def test_one_still_view_does_not_fill_it_with_copies():
    store = StreamNegatives(capacity=256)
    row = np.arange(D, dtype=np.float32)[None]
    for i in range(600):  # a still camera at 10 Hz for a minute: the same vector again and again
        store.add([3], row, stamp_s=0.1 * i)
    assert len(store) == 1
    rng = np.random.default_rng(0)
    moving = StreamNegatives(capacity=256)
    for i in range(100):  # a moving object at 10 Hz for 10 s: at most one vector per second
        moving.add([4], rng.normal(0.0, 1.0, (1, D)), stamp_s=0.1 * i)
    assert 9 <= len(moving) <= 10


def test_old_stamps_leave_and_a_clock_going_back_starts_again():
    store = StreamNegatives(window_s=60.0)
    store.add([1, 2], np.eye(2, D), stamp_s=0.0)
    store.add([3], np.ones((1, D)), stamp_s=30.0)
    assert len(store) == 3
    store.add([4], np.full((1, D), 2.0), stamp_s=70.0)  # 70 s: the two of t=0 are older than 60 s
    assert len(store) == 2
    store.add([5], np.full((1, D), 3.0), stamp_s=1.0)  # a replay from the start: the future ones go
    assert len(store) == 1


def test_the_taught_track_is_excluded_and_bad_input_changes_nothing():
    store = StreamNegatives()
    store.add([7, 8, 9], np.stack([np.full(D, v) for v in (1.0, 2.0, 3.0)]), stamp_s=5.0)
    assert store.vectors(exclude_tracks=[8])[:, 0].tolist() == [1.0, 3.0]
    assert store.vectors(exclude_tracks=[7, 8, 9]) is None
    with pytest.raises(ValueError, match="2 track ids"):
        store.add([1, 2], np.zeros((3, D)), stamp_s=6.0)
    assert len(store) == 3
    with pytest.raises(ValueError, match="capacity"):
        StreamNegatives(capacity=-1)
    off = StreamNegatives(capacity=0)
    off.add([1], np.ones((1, D)), stamp_s=0.0)
    assert len(off) == 0 and off.vectors() is None


def test_only_objects_seen_beside_the_taught_track_are_its_negatives():
    """The taught object lost and found again under a new id (track 9, seen while track 1 was out of
    view) must not become its own negative; the cup seen beside it (track 2) must."""
    store = StreamNegatives(capacity=16, min_interval_s=0.0)
    cup, mug = np.full((1, 4), 1.0, np.float32), np.full((1, 4), 5.0, np.float32)
    store.add([1, 2], np.vstack([mug, cup]), 0.0)  # the mug (track 1) beside the cup
    store.add([9], mug + 0.5, 1.0)  # the mug again, alone, under a new id
    everything = store.vectors((1,))
    beside = store.vectors((1,), seen_with=1)
    assert everything is not None and len(everything) == 2  # the cup and the mug's other id
    assert beside is not None and np.allclose(beside, cup)  # the cup only
    assert store.vectors((1,), seen_with=7) is None  # a track never seen: nothing beside it
