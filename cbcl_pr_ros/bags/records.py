"""Plain-Python records of what a teaching-session bag holds: camera frames and teaching events.

They are what the reader returns and the writer accepts, so the offline evaluation, the replay
tool and tests never touch rosbags' message classes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

__all__ = ["FORMAT_VERSION", "MODE_DEFAULT", "MODE_FRAME", "MODE_OBJECT", "BagImage", "EventKind",
           "TeachingEventRecord"]

# Format 2 added mode, track_id, rois and view_seed to TeachingEvent; format 1 bags read
# as whole-frame teaches (mode MODE_FRAME), which is how they were taught.
FORMAT_VERSION = 2
# TeachClass.mode and Classify.scope share these numbers (srv/TeachClass.srv, srv/Classify.srv).
MODE_DEFAULT, MODE_OBJECT, MODE_FRAME = 0, 1, 2
_MAX_ROIS = 1000


class EventKind(IntEnum):
    """Values of ``TeachingEvent.kind`` (msg/TeachingEvent.msg)."""

    TEACH = 0
    CLASSIFY = 1
    FORGET = 2
    RENAME = 3


@dataclass(frozen=True)
class TeachingEventRecord:
    """One ``cbcl_pr_ros/msg/TeachingEvent`` (times in integer nanoseconds)."""

    stamp_ns: int
    kind: EventKind
    label: str = ""
    new_label: str = ""
    frame_stamps_ns: tuple[int, ...] = ()
    predicted_label: str = ""
    confidence: float = 0.0
    known: bool = False
    success: bool = False
    frame_id: str = ""
    mode: int = MODE_DEFAULT  # TEACH: TeachClass.mode; CLASSIFY: Classify.scope
    track_id: int = -1  # TEACH: the track taught from, -1 = none
    rois: tuple[tuple[int, int, int, int], ...] = ()  # TEACH: (x_offset, y_offset, width, height) each
    view_seed: int = -1  # TEACH: seed of the teach-time views, -1 = not recorded

    def __post_init__(self) -> None:
        kind = EventKind(int(self.kind))  # ValueError names an unknown kind
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "frame_stamps_ns", tuple(int(s) for s in self.frame_stamps_ns))
        object.__setattr__(self, "rois", tuple(tuple(int(v) for v in r) for r in self.rois))
        if self.mode not in (MODE_DEFAULT, MODE_OBJECT, MODE_FRAME):
            raise ValueError(f"mode must be 0 (default), 1 (object) or 2 (frame), got {self.mode!r}")
        if self.track_id < -1:
            raise ValueError(f"track_id must be a track id (>= 0) or -1 (none), got {self.track_id}")
        if len(self.rois) > _MAX_ROIS or any(len(r) != 4 or min(r) < 0 for r in self.rois):
            raise ValueError(f"rois must be at most {_MAX_ROIS} boxes of 4 non-negative ints")
        if self.stamp_ns < 0:
            raise ValueError(f"stamp_ns must be >= 0, got {self.stamp_ns}")
        if kind in (EventKind.TEACH, EventKind.FORGET, EventKind.RENAME) and not self.label:
            raise ValueError(f"a {kind.name} event needs a label")
        if kind == EventKind.RENAME and not self.new_label:
            raise ValueError("a RENAME event needs new_label")
        if kind == EventKind.TEACH and not self.frame_stamps_ns:
            raise ValueError(f"TEACH event for {self.label!r} has no frame_stamps_ns")
        if kind == EventKind.CLASSIFY and len(self.frame_stamps_ns) != 1:
            raise ValueError(
                f"a CLASSIFY event refers to exactly one frame, got {len(self.frame_stamps_ns)}"
            )


@dataclass(frozen=True)
class BagImage:
    """One ``sensor_msgs/msg/Image`` as stored, plus where and when it was logged."""

    topic: str
    log_time_ns: int
    stamp_ns: int
    frame_id: str
    encoding: str
    height: int
    width: int
    step: int
    is_bigendian: bool
    data: bytes = field(repr=False)

    def rgb(self) -> np.ndarray:
        """The image as an (h, w, 3) uint8 RGB array (any camera encoding the features layer knows)."""
        from cbcl_pr_ros.features import image_to_rgb  # local: OpenCV loads only when a bag image is decoded

        return image_to_rgb(
            self.encoding, self.height, self.width, self.step, self.data, self.is_bigendian
        )
