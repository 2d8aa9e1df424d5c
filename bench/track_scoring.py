"""How well the learner's track ids follow the simulator's objects (no ROS).

Each detection frame's objects (track id and centroid, already moved to the base frame with the
camera pose of the frame's stamp) are matched to the true object centres: a detection belongs to
the nearest object within ``gate_m`` (horizontal distance). Per frame, an object with more than one
detection carries duplicate tracks (each extra one counts). Over the frames, an object whose
detection carries another id than the last time it was seen counts one id switch, and a track id
that lands on another object than the last time counts one id transfer (the id jumped between
objects). The true layout may change between segments (the main job re-arranges the table per
phase): ids are followed within a segment only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

__all__ = ["TrackFrame", "TrackScore"]


@dataclass(frozen=True)
class TrackFrame:
    """One detection frame: its segment (true layout), and (track id, base-frame centroid) per object."""

    segment: int
    objects: Sequence[tuple[int, Sequence[float]]]


@dataclass
class TrackScore:
    """Id switches, id transfers and duplicate tracks over frames, against true object centres.

    ``truth`` maps a segment to {object name: base-frame centre}.
    """

    truth: Mapping[int, Mapping[str, Sequence[float]]]
    gate_m: float = 0.08
    frames: int = 0
    detections: int = 0
    matched: int = 0
    id_switches: int = 0
    id_transfers: int = 0
    duplicates: int = 0
    frames_with_duplicates: int = 0
    events: list[dict] = field(default_factory=list)
    _last_id: dict[tuple[int, str], int] = field(default_factory=dict)
    _last_object: dict[tuple[int, int], str] = field(default_factory=dict)
    _ids: dict[tuple[int, str], set] = field(default_factory=dict)

    def add(self, frame: TrackFrame, max_events: int = 60) -> None:
        """Score one frame (frames must come in stamp order)."""
        names = list(self.truth[frame.segment])
        centres = np.array([self.truth[frame.segment][n] for n in names], float).reshape(-1, 3)
        self.frames += 1
        on: dict[str, list[tuple[float, int]]] = {}
        for tid, c in frame.objects:
            self.detections += 1
            c = np.asarray(c, float)
            if not np.all(np.isfinite(c)) or not len(names):
                continue
            d = np.linalg.norm(centres[:, :2] - c[:2], axis=1)
            j = int(np.argmin(d))
            if d[j] <= self.gate_m:
                on.setdefault(names[j], []).append((float(d[j]), int(tid)))
        extra = sum(len(v) - 1 for v in on.values())
        self.duplicates += extra
        self.frames_with_duplicates += int(extra > 0)
        if extra and len(self.events) < max_events:
            self.events.append({"frame": self.frames - 1, "kind": "duplicate",
                                "tracks": {n: [t for _, t in v] for n, v in on.items() if len(v) > 1}})
        for name, dets in on.items():
            self.matched += len(dets)
            tid = min(dets)[1]  # the nearest detection is the object's own
            key = (frame.segment, name)
            self._ids.setdefault(key, set()).add(tid)
            last = self._last_id.get(key)
            if last is not None and last != tid:
                self.id_switches += 1
                if len(self.events) < max_events:
                    self.events.append({"frame": self.frames - 1, "kind": "id_switch", "object": name,
                                        "from": last, "to": tid})
            self._last_id[key] = tid
            for _, t in dets:
                prev = self._last_object.get((frame.segment, t))
                if prev is not None and prev != name:
                    self.id_transfers += 1
                    if len(self.events) < max_events:
                        self.events.append({"frame": self.frames - 1, "kind": "id_transfer", "track": t,
                                            "from": prev, "to": name})
                self._last_object[(frame.segment, t)] = name

    def summary(self) -> dict:
        """Counts and rates per 100 frames."""
        per100 = lambda n: round(100.0 * n / self.frames, 3) if self.frames else float("nan")  # noqa: E731
        ids = [len(v) for v in self._ids.values()]
        return {"frames": self.frames, "detections": self.detections, "matched": self.matched,
                "gate_m": self.gate_m,
                "id_switches": self.id_switches, "id_switches_per_100_frames": per100(self.id_switches),
                "id_transfers": self.id_transfers, "id_transfers_per_100_frames": per100(self.id_transfers),
                "duplicate_tracks": self.duplicates, "duplicate_tracks_per_100_frames": per100(self.duplicates),
                "frames_with_duplicates": self.frames_with_duplicates,
                "objects_followed": len(ids), "mean_ids_per_object": round(float(np.mean(ids)), 3) if ids else 0.0,
                "events": self.events}
