"""objects/tracks.py: one store per track id: the tracker's ids, each track's recent views and the
stream's negatives are fed together, so they agree on which vector is whose."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.objects.tracks import TrackHistory, TrackStore
from cbcl_pr_ros.perception import ObjectObservation, Proposal


def _obs(x: float, box: tuple[int, int, int, int]) -> ObjectObservation:
    return ObjectObservation(Proposal(box, None, np.array([x, 0.0, 0.6]), np.full(3, 0.05), 1.0), {}, False)


def test_one_update_feeds_the_tracks_their_views_and_the_negatives():
    store = TrackStore(window=3, max_missed=1, max_distance_m=0.1, history=5)
    feats = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    first = store.update([_obs(0.0, (0, 0, 10, 10)), _obs(0.5, (50, 0, 60, 10))], feats, 0.0, None)
    second = store.update([_obs(0.0, (0, 0, 10, 10)), _obs(0.5, (50, 0, 60, 10))], feats * 2, 2.0, None)
    assert [t.id for t in first] == [t.id for t in second]
    left = next(t.id for t in second if t.proposal.box[0] == 0)
    views = store.track_views(left, 5)
    np.testing.assert_array_equal(views.rows, [[1.0, 0.0], [2.0, 0.0]])
    np.testing.assert_array_equal(views.others, [[0.0, 1.0], [0.0, 2.0]])
    assert store.track_at((0, 0, 10, 10)) == left and store.track_at((200, 200, 210, 210)) is None
    assert len(store.negatives.vectors()) == 4  # both tracks, both frames (2 s apart, changed)
    assert len(store.negatives.vectors(exclude_tracks=[left])) == 2
    with pytest.raises(ValueError, match="does not exist"):
        store.track_views(99, 5)
    store.reset()
    assert store.negatives.vectors() is None
    with pytest.raises(ValueError, match="current tracks: none"):
        store.track_views(left, 5)


def test_track_history_gives_a_tracks_recent_rows() -> None:
    h = TrackHistory(capacity=3)
    for i in range(5):
        h.add([1, 2], np.array([[i, 0.0], [i, 1.0]], np.float32), [(i, 0, 10, 10), (50, 0, 60, 10)])
    h.add([2], np.array([[9.0, 9.0]], np.float32), [(50, 0, 60, 10)])
    views = h.views_of(1, 10)
    np.testing.assert_array_equal(views.rows[:, 0], [3, 4])  # capacity 3 frames
    assert views.boxes == [(3, 0, 10, 10), (4, 0, 10, 10)]
    np.testing.assert_array_equal(views.others, [[3, 1.0], [4, 1.0]])  # track 2 in those frames
    np.testing.assert_array_equal(h.views_of(2, 2).rows[:, 0], [4, 9])
    assert h.views_of(99, 5).rows.shape[0] == 0
    with pytest.raises(ValueError):
        h.add([1, 2, 3], np.zeros((2, 2)), [(0, 0, 1, 1)] * 3)
    with pytest.raises(ValueError):
        h.add([1, 2], np.zeros((2, 2)), [(0, 0, 1, 1)])


def test_track_history_numbers_its_frames_so_a_teach_takes_only_the_views_before_it() -> None:
    h = TrackHistory(capacity=4)
    for i in range(3):
        h.add([1, 2], np.array([[i, 0.0], [i, 1.0]], np.float32), [(i, 0, 10, 10), (50, 0, 60, 10)])
    mark = h.mark()
    assert mark == 3
    h.add([1], np.array([[7.0, 7.0]], np.float32), [(7, 0, 10, 10)])  # a frame of the teach itself
    before = h.views_of(1, 2, before=mark)
    np.testing.assert_array_equal(before.rows[:, 0], [1, 2])  # the last 2 before the mark, not frame 7
    assert len(before.rivals) == 2 and all(np.array_equal(r, [[k, 1.0]]) for r, k in zip(before.rivals, (1, 2)))
    np.testing.assert_array_equal(h.views_of(1, 0).rows[:, 0], [0, 1, 2, 7])
    assert len(h.views_of(1, 5, before=0).rows) == 0
    for i in range(4):  # the oldest frames leave; the numbers go on
        h.add([3], np.zeros((1, 2), np.float32), [(0, 0, 1, 1)])
    assert h.mark() == 8 and len(h.views_of(1, 5, before=mark).rows) == 0
