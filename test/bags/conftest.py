"""Fixtures of the bag tests: small synthetic and simulated teaching-session bags."""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.bags import EventKind, TeachingBagWriter, TeachingEventRecord

CAMERA = "/camera/image_raw"
T0 = 1_700_000_000 * 10**9


def write_synthetic(path, storage="mcap", n_frames=12, size=(48, 64), period_ns=50_000_000, seed=0):
    """A bag of random frames: one TEACH of the first half, CLASSIFY events for the rest.
    Returns (images, stamps, events)."""
    rng = np.random.default_rng(seed)
    images = [rng.integers(0, 256, (*size, 3), dtype=np.uint8) for _ in range(n_frames)]
    events = []
    with TeachingBagWriter(path, storage) as w:
        stamps = [w.write_image(CAMERA, im, T0 + i * period_ns, "cam") for i, im in enumerate(images)]
        half = n_frames // 2
        events.append(TeachingEventRecord(stamps[half - 1] + 1, EventKind.TEACH, "thing",
                                          frame_stamps_ns=stamps[:half]))
        for s in stamps[half:]:
            events.append(TeachingEventRecord(s + 2, EventKind.CLASSIFY, "thing", frame_stamps_ns=[s],
                                              predicted_label="thing", confidence=0.5, known=True,
                                              success=True))
        events.append(TeachingEventRecord(stamps[-1] + 3, EventKind.RENAME, "thing", new_label="object"))
        events.append(TeachingEventRecord(stamps[-1] + 4, EventKind.FORGET, "object"))
        for ev in events:
            w.write_event(ev)
    return images, stamps, events


@pytest.fixture(scope="session")
def sim_bag(tmp_path_factory):
    """A small session rendered in the robot world: 3 classes, 3 shots, 2 test views, 96 px."""
    from cbcl_pr_ros.bags.simulate import SessionPlan, simulate_session

    path = tmp_path_factory.mktemp("sim") / "session"
    simulate_session(path, SessionPlan(("mug", "duck", "lego"), shots=3, test_views=2, image_size=96,
                                       rate_hz=10.0, seed=3))
    return path


@pytest.fixture(scope="session")
def object_bag(tmp_path_factory):
    """The same session taught and tested by object: every event names the object in view (mode 1)."""
    from cbcl_pr_ros.bags.simulate import SessionPlan, simulate_session

    path = tmp_path_factory.mktemp("sim_object") / "session"
    simulate_session(path, SessionPlan(("mug", "duck", "lego"), shots=3, test_views=2, image_size=96,
                                       rate_hz=10.0, seed=3, mode=1))
    return path
