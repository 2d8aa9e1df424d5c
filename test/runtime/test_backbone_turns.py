"""Camera frames and teach images share a backbone by turns (runtime/backbone_turns.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cbcl_pr_ros.runtime.backbone_turns import BackboneTurns


class _Backbone:
    """Records what runs, one entry per call: ("batch", images) or ("frame", 1)."""

    feature_dim = 3

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    def extract(self, images):
        self.log.append(("batch", len(images)))
        return np.array([[float(i), 0.0, 1.0] for i in images])


def test_batch_work_alone_runs_in_chunks_and_keeps_order():
    bb = _Backbone()
    out = BackboneTurns(chunk=3, idle_s=0.0).extract(bb, list(range(7)))
    np.testing.assert_array_equal(out[:, 0], np.arange(7))
    assert bb.log == [("batch", 3), ("batch", 3), ("batch", 1)]
    assert BackboneTurns().extract(bb, []).shape == (0, 3)


def test_frames_and_chunks_alternate_while_frames_come():
    """With a camera that keeps sending, no two chunks of a teach run back to back: a frame waits for
    one chunk at most (idle_s is long here, so only a frame's turn lets the next chunk go)."""
    bb = _Backbone()
    turns = BackboneTurns(chunk=2, idle_s=60.0)
    done, first_frame = threading.Event(), threading.Event()

    def camera():
        while not done.is_set():
            with turns:
                bb.log.append(("frame", 1))
            first_frame.set()

    cam = threading.Thread(target=camera)
    cam.start()
    try:
        first_frame.wait(10)
        out = turns.extract(bb, list(range(12)))
    finally:
        done.set()
        cam.join(10)
    np.testing.assert_array_equal(out[:, 0], np.arange(12))
    kinds = [k for k, _ in bb.log]
    first, last = kinds.index("batch"), len(kinds) - 1 - kinds[::-1].index("batch")
    during = kinds[first:last + 1]
    assert during.count("batch") == 6
    assert all(not (a == b == "batch") for a, b in zip(during, during[1:])), during


def test_a_waiting_frame_goes_before_the_next_chunk():
    bb = _Backbone()
    turns = BackboneTurns(chunk=1, idle_s=0.0)
    in_chunk, go_on = threading.Event(), threading.Event()
    real = bb.extract

    def slow(images):
        in_chunk.set()
        go_on.wait(10)
        return real(images)

    bb.extract = slow
    worker = threading.Thread(target=lambda: turns.extract(bb, [0, 1]))
    worker.start()
    in_chunk.wait(10)

    def frame():
        with turns:
            bb.log.append(("frame", 1))

    cam = threading.Thread(target=frame)
    cam.start()
    while not turns._stream_waiting:  # the frame waits for the running chunk
        threading.Event().wait(0.001)
    go_on.set()
    worker.join(10)
    cam.join(10)
    assert bb.log == [("batch", 1), ("frame", 1), ("batch", 1)]


def test_settings_are_checked():
    with pytest.raises(ValueError):
        BackboneTurns(chunk=0)
    with pytest.raises(ValueError):
        BackboneTurns(idle_s=-1.0)
