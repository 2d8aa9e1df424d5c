"""Scoring track ids against true object centres: switches, transfers, duplicates (bench_tracks)."""
from __future__ import annotations

import math

from track_scoring import TrackFrame, TrackScore  # bench/track_scoring.py (bench/ is on the tests' path)

TRUTH = {0: {"mug": (0.6, 0.0, 0.0), "can": (0.8, 0.0, 0.0)}, 1: {"mug": (0.6, 0.3, 0.0)}}


def test_steady_ids_score_zero():
    s = TrackScore(TRUTH)
    for _ in range(4):
        s.add(TrackFrame(0, [(1, (0.61, 0.0, 0.05)), (2, (0.79, 0.01, 0.0))]))
    out = s.summary()
    assert (out["frames"], out["matched"], out["id_switches"], out["id_transfers"], out["duplicate_tracks"]) == (4, 8, 0, 0, 0)
    assert out["mean_ids_per_object"] == 1.0


def test_switch_transfer_and_duplicate_are_counted():
    s = TrackScore(TRUTH, gate_m=0.08)
    s.add(TrackFrame(0, [(1, (0.6, 0.0, 0.0)), (2, (0.8, 0.0, 0.0))]))
    s.add(TrackFrame(0, [(2, (0.6, 0.0, 0.0)), (3, (0.8, 0.0, 0.0))]))  # 2 jumped to the mug, can got 3
    s.add(TrackFrame(0, [(2, (0.6, 0.0, 0.0)), (4, (0.63, 0.0, 0.0)), (3, (0.8, 0.0, 0.0))]))  # mug carries 2 tracks
    s.add(TrackFrame(0, [(5, (1.5, 0.0, 0.0)), (6, (math.nan, 0.0, 0.0))]))  # far and no depth: nobody's
    out = s.summary()
    assert out["id_switches"] == 2  # mug 1 -> 2, can 2 -> 3
    assert out["id_transfers"] == 1  # track 2: can -> mug
    assert out["duplicate_tracks"] == 1 and out["frames_with_duplicates"] == 1
    assert out["duplicate_tracks_per_100_frames"] == 25.0
    assert out["matched"] == 7 and out["detections"] == 9


def test_a_new_layout_starts_afresh():
    s = TrackScore(TRUTH)
    s.add(TrackFrame(0, [(1, (0.6, 0.0, 0.0))]))
    s.add(TrackFrame(1, [(7, (0.6, 0.3, 0.0))]))  # the table was re-arranged: a new id is no switch
    assert s.summary()["id_switches"] == 0
