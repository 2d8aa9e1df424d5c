"""Teaching sessions rendered in the simulated world and written straight to a bag (no ROS graph).

A session follows the class-incremental protocol a person would follow in front of the robot:
for each increment, show ``shots`` views of each new object and teach it, then show ``test_views``
fresh views of every object learned so far and ask the robot to classify each one (the CLASSIFY
event carries the ground-truth label). Frames are stamped at the camera rate on a fixed epoch, so
the same seed writes the same bag.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cbcl_pr_ros.robot.assets import CATALOGUE
from cbcl_pr_ros.robot.world import CameraConfig, SimWorld, WorldConfig, sample_instances

from cbcl_pr_ros.request_checks import RequestLimits

from .records import EventKind, TeachingEventRecord
from .writer import TeachingBagWriter

__all__ = ["EPOCH_NS", "SessionPlan", "default_categories", "simulate_session"]
_LOG = logging.getLogger(__name__)
# Sessions start at a fixed epoch (2025-01-01T00:00:00Z) so the bytes of a bag depend only on its plan.
EPOCH_NS = 1_735_689_600 * 1_000_000_000
MAX_TEST_VIEWS = 1000  # per learned class and test phase


@dataclass(frozen=True)
class SessionPlan:
    """What a simulated teaching session shows.

    Parameters
    ----------
    categories : object categories of the robot world's catalogue, taught in this order.
    shots : views per class shown when teaching it.
    test_views : fresh views per learned class classified after each increment.
    classes_per_increment : classes taught before each test phase.
    image_size : square camera resolution in pixels.
    rate_hz : camera frame rate (frames are stamped 1/rate_hz apart).
    seed : world, views and lighting.
    mode : what the events name as the object (records.MODE_*): 0 the learner's default, 1 the
        object in view (TEACH mode and CLASSIFY scope), 2 the whole frame.
    """

    categories: tuple[str, ...]
    shots: int = 5
    test_views: int = 3
    classes_per_increment: int = 1
    image_size: int = 224
    rate_hz: float = 10.0
    seed: int = 0
    mode: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "categories", tuple(self.categories))
        if not self.categories:
            raise ValueError("categories must not be empty")
        if len(set(self.categories)) != len(self.categories):
            raise ValueError(f"categories must be distinct, got {self.categories}")
        for name, value, low in (("shots", self.shots, 1), ("test_views", self.test_views, 0),
                                 ("classes_per_increment", self.classes_per_increment, 1),
                                 ("image_size", self.image_size, 16)):
            if int(value) < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        # A TEACH event sends its shots as one TeachClass: more images than a request takes is a
        # session every replay would refuse; test views are single frames, bounded so a typo is not
        # a render of days.
        most = RequestLimits().max_images_per_request
        if int(self.shots) > most:
            raise ValueError(f"shots must be <= {most} (the images one TeachClass takes), got {self.shots}")
        if int(self.test_views) > MAX_TEST_VIEWS:
            raise ValueError(f"test_views must be <= {MAX_TEST_VIEWS}, got {self.test_views}")
        if self.mode not in (0, 1, 2):
            raise ValueError(f"mode must be 0 (default), 1 (object) or 2 (frame), got {self.mode}")
        if not (0.1 <= float(self.rate_hz) <= 1000.0):
            raise ValueError(f"rate_hz must be in [0.1, 1000], got {self.rate_hz}")


def _views(world, obj, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``n`` views of ``obj`` from random directions around it, each under its own lighting."""
    radius = float(np.linalg.norm(obj.half_extents))
    out = []
    for _ in range(n):
        az = rng.uniform(-math.pi, math.pi)
        el = rng.uniform(0.35, 1.1)
        dist = radius * rng.uniform(2.2, 3.0) + 0.03
        eye = obj.position + dist * np.array(
            [math.cos(az) * math.cos(el), math.sin(az) * math.cos(el), math.sin(el)])
        world.randomize_light(rng)
        world.set_free_camera(eye, obj.position)
        out.append(world.render().rgb)
    return out


def simulate_session(
    path: str | Path,
    plan: SessionPlan,
    *,
    storage: str = "mcap",
    camera_topic: str = "/camera/image_raw",
    events_topic: str = "/teaching_events",
    frame_id: str = "hand_camera",
) -> dict:
    """Render ``plan`` in the robot world and write it as a teaching-session bag at ``path``.

    Returns a summary (classes, frames, events). Nothing is left at ``path`` on failure.
    """
    rng = np.random.default_rng(plan.seed)
    period_ns = int(round(1e9 / plan.rate_hz))
    config = WorldConfig(camera=CameraConfig(plan.image_size, plan.image_size), with_robot=False)
    n_frames = n_events = 0
    with SimWorld(config, seed=plan.seed) as world:
        # One object per category; it is placed alone at the table centre while it is shown.
        instances = {c: sample_instances(c, 1, rng, prefix=c)[0] for c in plan.categories}
        t = EPOCH_NS
        with TeachingBagWriter(path, storage, custom_data={"cbcl_pr_ros.generator": "simulate_session"}) as bag:
            bag.set_session_info({
                "categories": list(plan.categories), "shots": plan.shots,
                "test_views": plan.test_views, "classes_per_increment": plan.classes_per_increment,
                "image_size": plan.image_size, "rate_hz": plan.rate_hz, "seed": plan.seed, "mode": plan.mode,
                "camera_topic": camera_topic, "events_topic": events_topic,
            })

            def show(category: str, n: int) -> list[int]:
                nonlocal t, n_frames
                obj = world.add_object(instances[category], config.table_center)
                try:
                    stamps = []
                    for rgb in _views(world, obj, n, rng):
                        stamps.append(bag.write_image(camera_topic, rgb, t, frame_id))
                        t += period_ns
                        n_frames += 1
                    return stamps
                finally:
                    world.remove_object(obj.name)

            learned: list[str] = []
            cats = list(plan.categories)
            for start in range(0, len(cats), plan.classes_per_increment):
                for category in cats[start:start + plan.classes_per_increment]:
                    stamps = show(category, plan.shots)
                    bag.write_event(TeachingEventRecord(t, EventKind.TEACH, category, frame_stamps_ns=stamps,
                                                        frame_id=frame_id, mode=plan.mode),
                                    events_topic)
                    n_events += 1
                    t += period_ns
                    learned.append(category)
                for category in learned:
                    for stamp in show(category, plan.test_views):
                        # The answer is left empty: no learner ran while the bag was made.
                        bag.write_event(TeachingEventRecord(t, EventKind.CLASSIFY, category, frame_stamps_ns=[stamp],
                                                            frame_id=frame_id, mode=plan.mode),
                                        events_topic)
                        n_events += 1
                        t += period_ns // 10 or 1
    _LOG.info("wrote %s: %d classes, %d frames, %d events", path, len(plan.categories), n_frames, n_events)
    return {"path": str(path), "classes": list(plan.categories), "frames": n_frames, "events": n_events}


def default_categories(n: int) -> Sequence[str]:
    """The first ``n`` categories of the robot world's catalogue (sorted, so reproducible)."""
    names = sorted(CATALOGUE)
    if not 1 <= n <= len(names):
        raise ValueError(f"n must be in 1..{len(names)}, got {n}")
    return names[:n]
