"""Where each class's knowledge came from: one entry per teach (which robot, when, how many shots).

A class's provenance is the set of its *contributions*.  Every teach of a class adds one, with a
random id; merging two memories unites the sets.  The ids are what make merging safe to repeat: a
class whose contributions are all already in this memory is not pooled a second time (its shots
would count twice), and a class whose contributions include all of ours is a newer copy of the same
knowledge (it replaces ours instead of being added to it).  See :mod:`.merge`.

Bounds (a memory file and a fleet update are untrusted): at most :data:`MAX_ENTRIES` entries per
class (older entries are folded into one when a teach would pass it), robot names of at most
:data:`MAX_ROBOT_CHARS` characters of ``[A-Za-z0-9_.-]``, times in ``[0, MAX_TIME]`` Unix seconds,
shots in ``[1, MAX_SHOTS]``, ids of 16 hex digits.

>>> a = new_contribution("robot1", 10, now=1.0)
>>> b = new_contribution("robot2", 5, now=2.0)
>>> [c.robot for c in united((a,), (b, a))]
['robot1', 'robot2']
>>> total_shots((a, b))
15
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import time as _time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Contribution", "MAX_ENTRIES", "MAX_ROBOT_CHARS", "MAX_SHOTS", "MAX_TIME", "ROBOT_PATTERN",
           "new_contribution", "legacy_contribution", "united", "total_shots", "ids", "own_shots", "check_robot_name",
           "provenance_to_json", "provenance_from_json"]

MAX_ENTRIES = 64
MAX_ROBOT_CHARS = 64
MAX_SHOTS = 2**40  # shots of one class: far beyond any teaching, far below int64 overflow when pooled
MAX_TIME = 2.0**34  # Unix seconds (year 2514)
ROBOT_PATTERN = re.compile(r"[A-Za-z0-9_.-]{0,64}")
_ID = re.compile(r"[0-9a-f]{16}")


def check_robot_name(name: object) -> str:
    """A robot name: ``""`` (unknown) or up to 64 of ``[A-Za-z0-9_.-]``; ValueError otherwise."""
    if not isinstance(name, str) or not ROBOT_PATTERN.fullmatch(name):
        shown = repr(name)[:40]
        raise ValueError(f"robot name must be up to {MAX_ROBOT_CHARS} letters, digits, '_', '.' or '-', got {shown}")
    return name


@dataclass(frozen=True)
class Contribution:
    """One teach of a class: the robot that was taught, when (Unix seconds), how many shots, an id."""

    robot: str
    time: float
    shots: int
    id: str

    def __post_init__(self) -> None:
        check_robot_name(self.robot)
        if isinstance(self.time, bool) or not isinstance(self.time, (int, float)) or not math.isfinite(self.time) \
                or not 0 <= self.time <= MAX_TIME:
            raise ValueError(f"contribution time must be in [0, {MAX_TIME:.0f}] s, got {self.time!r}")
        if isinstance(self.shots, bool) or not isinstance(self.shots, (int, np.integer)) \
                or not 1 <= self.shots <= MAX_SHOTS:
            raise ValueError(f"contribution shots must be an integer in [1, {MAX_SHOTS}], got {self.shots!r}")
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise ValueError(f"contribution id must be 16 hex digits, got {repr(self.id)[:40]}")

    def to_json(self) -> dict[str, Any]:
        return {"robot": self.robot, "time": float(self.time), "shots": int(self.shots), "id": self.id}

    @classmethod
    def from_json(cls, data: object) -> "Contribution":
        if not isinstance(data, dict) or set(data) != {"robot", "time", "shots", "id"}:
            raise ValueError("a contribution must be an object with exactly robot, time, shots and id")
        return cls(data["robot"], data["time"], data["shots"], data["id"])


def new_contribution(robot: str, shots: int, now: float | None = None) -> Contribution:
    """The entry of a teach happening now."""
    return Contribution(robot, float(_time.time() if now is None else now), int(shots), secrets.token_hex(8))


def legacy_contribution(counts: np.ndarray, means: np.ndarray) -> Contribution:
    """The entry of a class read from a file written before provenance existed: unknown robot and
    time, and an id derived from its statistics, so that two copies of one file agree on it."""
    h = hashlib.sha256(np.ascontiguousarray(counts, np.int64).tobytes())
    h.update(np.ascontiguousarray(means, np.float32).tobytes())
    return Contribution("", 0.0, int(min(max(int(np.sum(counts)), 1), MAX_SHOTS)), h.hexdigest()[:16])


def ids(entries: Iterable[Contribution]) -> frozenset[str]:
    return frozenset(c.id for c in entries)


def total_shots(entries: Iterable[Contribution]) -> int:
    return int(sum(c.shots for c in entries))


def own_shots(entries: Iterable[Contribution], robot: str) -> int:
    """Shots of ``robot``'s own teaching among ``entries``: in its name, or of unknown origin (taught
    before it had a name); a peer's are recorded under the peer's."""
    return sum(c.shots for c in entries if c.robot in (robot, ""))


def _folded(entries: Sequence[Contribution]) -> tuple[Contribution, ...]:
    """At most MAX_ENTRIES entries: the oldest are folded into one (their shots summed, the newest
    of their times, an id derived from theirs, their robot when they share one)."""
    if len(entries) <= MAX_ENTRIES:
        return tuple(entries)
    cut = len(entries) - MAX_ENTRIES + 1
    old = entries[:cut]
    robots = {c.robot for c in old}
    fid = hashlib.sha256("|".join(sorted(c.id for c in old)).encode()).hexdigest()[:16]
    fold = Contribution(robots.pop() if len(robots) == 1 else "", max(c.time for c in old),
                        min(total_shots(old), MAX_SHOTS), fid)
    return (fold, *entries[cut:])


def united(*groups: Iterable[Contribution]) -> tuple[Contribution, ...]:
    """All distinct entries of ``groups`` (by id), oldest first, folded to MAX_ENTRIES."""
    seen: dict[str, Contribution] = {}
    for group in groups:
        for c in group:
            seen.setdefault(c.id, c)
    return _folded(sorted(seen.values(), key=lambda c: (c.time, c.id)))


def provenance_to_json(prov: Mapping[str, Sequence[Contribution]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [c.to_json() for c in entries] for name, entries in prov.items()}


def provenance_from_json(data: object, classes: Sequence[str],
                         samples: Mapping[str, int]) -> dict[str, tuple[Contribution, ...]]:
    """Checked provenance of ``classes``: one non-empty list of at most MAX_ENTRIES distinct entries
    per class, no other keys, and at least as many shots as the class holds (a reduction by removal
    can drop shots, nothing can add any).  ValueError with the reason otherwise."""
    if not isinstance(data, dict) or set(data) != set(classes):
        raise ValueError("provenance must name exactly the stored classes")
    out = {}
    for name in classes:
        entries = data[name]
        if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_ENTRIES:
            raise ValueError(f"provenance of {name!r} must be a list of 1 to {MAX_ENTRIES} entries")
        parsed = tuple(Contribution.from_json(e) for e in entries)
        if len(ids(parsed)) != len(parsed):
            raise ValueError(f"provenance of {name!r} repeats an entry")
        if total_shots(parsed) < samples[name]:
            raise ValueError(f"provenance of {name!r} accounts for {total_shots(parsed)} shots, "
                             f"fewer than the {samples[name]} the class holds")
        out[name] = parsed
    return out
