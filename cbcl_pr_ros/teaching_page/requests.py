"""Checks on every page request, before anything reaches the robot.

A page request is as untrusted as a service request: names go through the services' own
:func:`~cbcl_pr_ros.request_checks.check_label`, a track id must be on the newest frame, a box
must lie inside it. Each check raises :class:`RequestError` with one sentence for the page.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from cbcl_pr_ros.request_checks import RequestError, check_label, quote
from cbcl_pr_ros.teaching_page.client import Box

__all__ = ["RequestError", "TeachRequest", "parse_teach", "parse_label", "parse_rename"]

_MAX_ID = 2**32 - 1  # DetectedObject.id is a uint32
_MAX_ABS = 2**32  # no id or pixel coordinate is larger; a 4000-digit number is refused, not computed with


@dataclass(frozen=True)
class TeachRequest:
    """Teach ``label`` from a track (``track_id``) or from a box on the frame (``box``)."""
    label: str
    track_id: int | None = None
    box: Box | None = None


def _body(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise RequestError("the request must be a JSON object")
    return body


def _int(value: Any, what: str) -> int:
    """A whole number of at most 2^32 in size (JSON's 1e400 is inf, NaN is a float: both refused)."""
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise RequestError(f"{what} must be a whole number, got {quote(value, 20)}")
    if not -_MAX_ABS <= value <= _MAX_ABS:
        raise RequestError(f"{what} must be a whole number between -{_MAX_ABS} and {_MAX_ABS}, "
                           f"got {quote(value, 20)}")
    return int(value)


def parse_label(body: Any, key: str = "label") -> str:
    """A class name from ``body[key]`` (the services' rules: printable, 1..128 characters)."""
    return check_label(_body(body).get(key), "name" if key == "label" else key)


def parse_rename(body: Any) -> tuple[str, str]:
    b = _body(body)
    old = check_label(b.get("old"), "old name")
    new = check_label(b.get("new"), "new name")
    if old == new:
        raise RequestError(f"the new name is the same as the old one ({quote(old)})")
    return old, new


def parse_teach(body: Any, track_ids: set[int], image_size: tuple[int, int] | None) -> TeachRequest:
    """A teach request: a name and either the id of an object on the newest frame or a box inside it."""
    b = _body(body)
    label = check_label(b.get("label"), "name")
    has_track, has_box = b.get("track_id") is not None, b.get("box") is not None
    if has_track == has_box:
        raise RequestError("say which object: click it (track_id) or draw a box (box), not both or neither")
    if has_track:
        tid = _int(b["track_id"], "track_id")
        if not 0 < tid <= _MAX_ID:
            raise RequestError(f"track_id must be between 1 and {_MAX_ID}, got {tid}")
        if tid not in track_ids:
            now = ", ".join(f"#{t}" for t in sorted(track_ids)[:10]) or "none"
            raise RequestError(f"object #{tid} is no longer in view (objects now: {now}); click it again "
                               "on the newest picture")
        return TeachRequest(label, track_id=tid)
    box = b["box"]
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        raise RequestError("box must be [x, y, width, height] in image pixels")
    x, y, w, h = (_int(v, "box") for v in box)
    if image_size is None:
        raise RequestError("no camera picture yet: wait for the picture, then draw the box on it")
    width, height = image_size
    if w <= 0 or h <= 0:
        raise RequestError(f"the box is empty ({w}x{h} pixels): drag over the object")
    if x < 0 or y < 0 or x + w > width or y + h > height:
        raise RequestError(f"box (x {x}, y {y}, width {w}, height {h}) lies outside the {width}x{height} "
                           "picture")
    return TeachRequest(label, box=(x, y, w, h))
