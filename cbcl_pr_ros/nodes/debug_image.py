"""Annotated debug image: the camera frame with the learner's answer drawn on it (for rqt/RViz).

Pure numpy/OpenCV, no ROS: the learner node matches a prediction to its frame by stamp and calls
:func:`annotate`; a :class:`~cbcl_pr_ros.runtime.frame_buffer.FrameBuffer` keeps the last few frames
for that matching.
"""
from __future__ import annotations

import cv2
import numpy as np

from cbcl_pr_ros.teaching_page.state import shown_name

__all__ = ["annotate", "caption"]

_GREEN = (40, 200, 40)
_ORANGE = (255, 140, 0)


def caption(label: str, confidence: float, known: bool) -> str:
    """Text drawn on the frame, written as the teaching page writes it (``teaching_page.state.shown_name``):
    ``mug 0.93``, ``mug? 0.45`` below its confidence for a guess, ``unknown`` when the open-set test
    says no (the nearest class's name and score would read as an answer)."""
    name = shown_name(label, known, confidence)
    return f"{name} {confidence:.2f}" if name else "unknown"


def annotate(rgb: np.ndarray, label: str, confidence: float, known: bool) -> np.ndarray:
    """Return a copy of an RGB uint8 frame with the label and score in a banner at the top.

    Green banner for a known object, orange for "unknown". The text scales with the frame width so it
    stays readable from 224-pixel crops to HD frames.
    """
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(
            f"annotate needs an (h, w, 3) uint8 RGB array, got "
            f"{getattr(rgb, 'shape', None)} {getattr(rgb, 'dtype', type(rgb).__name__)}"
        )
    out = np.ascontiguousarray(rgb).copy()
    h, w = out.shape[:2]
    scale = max(0.4, w / 640.0)
    thickness = max(1, int(round(2 * scale)))
    text = caption(label, float(confidence), bool(known))
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    bar_h = min(h, th + base + 8)
    colour = _GREEN if known and label else _ORANGE
    cv2.rectangle(out, (0, 0), (min(w - 1, tw + 10), bar_h), colour, thickness=-1)
    cv2.putText(out, text, (5, th + 4), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255),
                thickness, cv2.LINE_AA)
    return out
