"""A teaching client that records calls, for the page tests without ROS."""
from __future__ import annotations

import threading

import cv2
import numpy as np

from cbcl_pr_ros.teaching_page.client import Outcome
from cbcl_pr_ros.teaching_page.state import DetectedBox, Frame


class FakeRobot:
    """Answers like the learner would; ``hold`` makes a teach wait until released (flood tests)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.classes: list[str] = []
        self.hold = threading.Event()
        self.hold.set()

    def teach_track(self, label: str, track_id: int) -> Outcome:
        self.hold.wait(30)
        self.calls.append(("track", label, track_id))
        if label not in self.classes:
            self.classes.append(label)
        return Outcome(True, f"learned new class {label!r} from views of track {track_id}")

    def teach_box(self, label: str, box: tuple) -> Outcome:
        self.calls.append(("box", label, tuple(box)))
        return Outcome(True, f"learned {label!r} from the box")

    def rename(self, old: str, new: str) -> Outcome:
        self.calls.append(("rename", old, new))
        if old not in self.classes:
            return Outcome(False, f"unknown class {old!r}")
        self.classes[self.classes.index(old)] = new
        return Outcome(True, f"renamed {old!r} to {new!r}")

    def forget(self, label: str) -> Outcome:
        self.calls.append(("forget", label))
        if label not in self.classes:
            return Outcome(False, f"unknown class {label!r}")
        self.classes.remove(label)
        return Outcome(True, f"forgot {label!r}")

    def point_at(self, label: str) -> Outcome:
        self.calls.append(("point", label))
        return Outcome(False, "no arm in this test")


def frame(objects=((3, "", False, 0.2, 40, 60, 120, 160), (5, "mug", True, 0.9, 200, 80, 280, 170))) -> Frame:
    """A 320x240 picture with two coloured blocks where the boxes are."""
    img = np.full((240, 320, 3), 90, np.uint8)
    for _, _, _, _, x0, y0, x1, y1 in objects:
        img[y0:y1, x0:x1] = (200, 120, 40)
    jpeg = cv2.imencode(".jpg", img)[1].tobytes()
    return Frame(jpeg, 320, 240, 1.0, tuple(DetectedBox(*o) for o in objects), 1)
