"""Reuse an object's features while its crop has not changed, and a still picture's proposals.

Six objects on a table cost the extractor the frame plus six crops through the backbone on every
frame (most of its time per frame on a 2-core machine, docs/nodes.md), although a robot that looks
at a table mostly sees the same objects in the same place. A crop whose box overlaps the box of the crop last
computed (IoU >= ``min_iou``) and whose pixels differ from that crop's by at most ``max_change`` grey
levels (mean absolute difference of 24x24 thumbnails: sensor noise is ~2, a hand or a moved object tens)
keeps that crop's features. Changes are measured against the crop when its features were computed,
not the previous frame, so a slow drift adds up and is caught. Every crop is computed again at least
every ``refresh_frames`` frames, at most ``max_refresh`` stale crops per frame (oldest first) so that
refreshing never costs one frame all the crops at once. A moving camera shifts every box: then each
crop is computed, as without reuse. The extractor treats the whole frame as one more crop whose
vector is kept only while :class:`ProposalReuse` finds every cell of the picture unchanged
(``same_picture``), so one new object in view makes the frame's vector computed again.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cbcl_pr_ros.perception.boxes import box_iou

__all__ = ["CropFeatureReuse", "ProposalReuse"]

_THUMB = 24


def _thumbnail(crop: np.ndarray) -> np.ndarray:
    """A small grey picture of a crop: cheap to compare, insensitive to pixel noise."""
    import cv2

    small = cv2.resize(np.ascontiguousarray(crop), (_THUMB, _THUMB), interpolation=cv2.INTER_AREA)  # uint8: cheap
    return small.mean(axis=2, dtype=np.float32) if small.ndim == 3 else small.astype(np.float32)


@dataclass
class _Entry:
    box: tuple[int, int, int, int]
    thumb: np.ndarray
    feature: np.ndarray
    age: int  # frames since the feature was computed


class CropFeatureReuse:
    """Per-stream memory of the last computed crop features; not thread-safe (one worker uses it)."""

    def __init__(self, refresh_frames: int = 10, max_change: float = 6.0, min_iou: float = 0.9,
                 max_refresh: int = 1) -> None:
        if refresh_frames < 1:
            raise ValueError(f"refresh_frames must be >= 1, got {refresh_frames}")
        if not 0.0 < min_iou <= 1.0:
            raise ValueError(f"min_iou must be in (0, 1], got {min_iou}")
        if max_change < 0 or max_refresh < 0:
            raise ValueError("max_change and max_refresh must be >= 0")
        self.refresh_frames, self.max_change, self.min_iou = int(refresh_frames), float(max_change), float(min_iou)
        self.max_refresh = int(max_refresh)
        self._entries: list[_Entry] = []
        self.reused = 0
        self.computed = 0

    def reset(self) -> None:
        """Forget everything (a new stream, another backbone)."""
        self._entries = []

    def plan(self, boxes: Sequence[Sequence[int]], crops: Sequence[np.ndarray],
             recompute: Sequence[int] = ()) -> list[np.ndarray | None]:
        """For each crop, the features to reuse, or None where the backbone must compute them (always
        for the indices in ``recompute``: the caller knows they changed)."""
        thumbs = [_thumbnail(c) for c in crops]
        matches: list[_Entry | None] = []
        used: set[int] = set()
        for box, thumb in zip(boxes, thumbs):
            best, best_iou = None, self.min_iou
            for j, e in enumerate(self._entries):
                if j in used:
                    continue
                iou = box_iou(box, e.box)
                if iou >= best_iou and float(np.abs(thumb - e.thumb).mean()) <= self.max_change:
                    best, best_iou = j, iou
            if best is not None:
                used.add(best)
            matches.append(self._entries[best] if best is not None else None)
        for i in recompute:
            matches[i] = None
        # stale matches: refresh the oldest few now, keep the others until their turn
        stale = sorted((i for i, m in enumerate(matches) if m is not None and m.age + 1 >= self.refresh_frames),
                       key=lambda i: -matches[i].age)
        for i in stale[: self.max_refresh]:
            matches[i] = None
        self._pending = (list(boxes), thumbs, matches)
        return [m.feature if m is not None else None for m in matches]

    def store(self, features: Sequence[np.ndarray]) -> None:
        """After :meth:`plan`: the features now used for every crop (reused and computed)."""
        boxes, thumbs, matches = self._pending
        if len(features) != len(boxes):
            raise ValueError(f"{len(features)} features for {len(boxes)} crops")
        entries = []
        for box, thumb, m, f in zip(boxes, thumbs, matches, features):
            if m is not None:  # reused: compare later frames with the crop the features came from
                entries.append(_Entry(tuple(box), m.thumb, m.feature, m.age + 1))
                self.reused += 1
            else:
                entries.append(_Entry(tuple(box), thumb, np.asarray(f), 0))
                self.computed += 1
        self._entries = entries


class ProposalReuse:
    """Keep a frame's proposals while the camera sees the same picture (a still robot at a table).

    Proposals cost ~14 ms of a 640x480 frame and give the same boxes frame after frame when nothing
    moves. The picture counts as the same while every cell of a 32x24 grey grid (20x20 pixels at
    640x480) stays within ``max_cell_change`` grey levels of the frame the proposals came from: one
    cell is small enough that a hand or a moved cup changes it, and large enough that sensor noise
    (~2 levels per pixel) averages out. Comparing with that frame, not the previous one, catches
    slow drift. They are computed again at least every ``refresh_frames`` frames, and whenever the
    depth or the intrinsics come or go (3D positions would change).
    """

    GRID = (32, 24)

    def __init__(self, refresh_frames: int = 10, max_cell_change: float = 8.0) -> None:
        if refresh_frames < 1:
            raise ValueError(f"refresh_frames must be >= 1, got {refresh_frames}")
        if max_cell_change < 0:
            raise ValueError(f"max_cell_change must be >= 0, got {max_cell_change}")
        self.refresh_frames, self.max_cell_change = int(refresh_frames), float(max_cell_change)
        self.reused = 0
        self.computed = 0
        self.reset()

    def reset(self) -> None:
        """Forget the kept proposals (a new stream)."""
        self._kept: tuple[np.ndarray, tuple, list, int] | None = None  # grid, key, proposals, age
        self.kept_joins: tuple = ((), ())  # what was derived from the kept proposals (candidate joins)
        self.same_picture = False

    def _grid(self, rgb: np.ndarray) -> np.ndarray:
        import cv2

        grey = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY) if rgb.ndim == 3 else rgb
        return cv2.resize(np.ascontiguousarray(grey), self.GRID, interpolation=cv2.INTER_AREA).astype(np.float32)

    def lookup(self, rgb: np.ndarray, key: tuple) -> tuple[list | None, np.ndarray]:
        """(the kept proposals if this frame shows the same picture with the same ``key`` — depth
        present, intrinsics, image size — else None; this frame's grid for :meth:`keep`).
        ``same_picture`` then says whether the picture was the same, whatever the proposals' age."""
        grid = self._grid(rgb)
        kept = self._kept
        self.same_picture = kept is not None and kept[1] == key and kept[0].shape == grid.shape \
            and float(np.abs(grid - kept[0]).max()) <= self.max_cell_change
        if self.same_picture and kept[3] + 1 < self.refresh_frames:
            self._kept = (kept[0], key, kept[2], kept[3] + 1)
            self.reused += 1
            return kept[2], grid
        return None, grid

    def keep(self, grid: np.ndarray, key: tuple, proposals: list, joins: tuple = ((), ())) -> None:
        """After computing proposals for a frame: keep them with the frame's grid, and ``joins`` (their
        candidate joins: pairs and unions, ``objects.pieces``), read back as ``kept_joins``
        while :meth:`lookup` returns the kept proposals."""
        self._kept = (grid, key, list(proposals), 0)
        self.kept_joins = joins
        self.computed += 1
