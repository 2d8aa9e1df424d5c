"""Fleet mode without ROS: what a learner tells its fleet, and what it takes from it.

In fleet mode (parameter ``fleet`` set) every learner publishes its class changes and merges those
of the other robots of its fleet (docs/nodes.md "Fleet mode", docs/security.md "Fleet peers"):

* **Outgoing.** After every change of the memory (teach, forget, rename, load, merge, and updates
  taken from peers) :meth:`FleetMember.on_change` compares each class's contributions
  (:mod:`cbcl_pr_ros.core.provenance`) with what it last published and publishes the difference: a
  class new or changed is ``LEARNED`` (its statistics as a one-class memory file: counts, means,
  scatter factors, provenance; never a shot), a class gone is ``FORGOTTEN`` (its contribution ids),
  a class gone whose contributions reappear under another name is ``RENAMED``, followed by a
  ``LEARNED`` of the new name for robots that never had the old one.
* **Incoming.** :meth:`FleetMember.receive` takes an update of another robot of the same fleet,
  named in the allow-list (empty: any), within the rate limit and the size limit, and validates
  its payload exactly as a memory file (:func:`~cbcl_pr_ros.core.persistence.state_from_bytes`, with
  this learner's backbone and width).  ``LEARNED`` is merged (:meth:`.controller.LearnerController.
  merge_state`; a copy we already hold adds nothing, a newer copy replaces ours, separate teaching
  pools); ``FORGOTTEN`` and ``RENAMED`` apply only when the peer's contributions cover all of ours,
  so nothing taught here and unknown to the peer is lost.  Forgotten contributions are remembered
  (bounded), so a stale ``LEARNED`` relayed by a third robot does not bring a forgotten class back.

Anything refused changes nothing and yields one line for the log (refusals by the allow-list or the
rate limit, which a flood produces, are marked so that the node logs them at most once a second).
"""
from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cbcl_pr_ros.service.rate_limit import RateLimiter
from cbcl_pr_ros.service.validation import RequestError, check_label, quote

__all__ = ["LEARNED", "FORGOTTEN", "RENAMED", "OPS", "FleetSettings", "ClassUpdate", "Received", "FleetMember",
           "MAX_IDS", "NAME_PATTERN"]

LEARNED, FORGOTTEN, RENAMED = 0, 1, 2
OPS = {LEARNED: "learned", FORGOTTEN: "forgot", RENAMED: "renamed"}
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # fleet and robot names
MAX_IDS = 64  # contribution ids per update (a class keeps at most 64 contributions)
_ID = re.compile(r"[0-9a-f]{16}")
_TOMBSTONES = 4096  # forgotten contribution ids remembered


@dataclass(frozen=True)
class FleetSettings:
    """Who this learner is in which fleet, whom it listens to, and the limits on what it takes."""

    fleet: str
    robot: str
    allow: frozenset[str] = frozenset()  # empty: every robot of the fleet
    max_update_bytes: int = 8 * 1024 * 1024
    rate_hz: float = 5.0
    burst: int = 100

    def __post_init__(self) -> None:
        for what, name in (("fleet", self.fleet), ("robot_name", self.robot), *(("fleet_allow entry", a)
                                                                                  for a in self.allow)):
            if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
                raise ValueError(f"{what} must be 1-64 letters, digits, '_', '.' or '-', got {quote(str(name))}")
        if self.max_update_bytes < 1024 or self.rate_hz <= 0 or self.burst < 1:
            raise ValueError("fleet limits must be positive (max_update_bytes >= 1024)")

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> "FleetSettings | None":
        """The settings of the learner's parameters; None when fleet mode is off (``fleet`` empty)."""
        if not p.get("fleet"):
            return None
        if not p.get("robot_name"):
            raise ValueError("fleet mode needs robot_name: the name this robot's teaching is known by")
        allow = frozenset(a.strip() for a in str(p.get("fleet_allow", "")).split(",") if a.strip())
        return cls(p["fleet"], p["robot_name"], allow, min(int(p["fleet_max_update_bytes"]),
                                                           int(p["max_memory_file_bytes"])),
                   float(p["fleet_max_update_rate"]), int(p["fleet_history_depth"]))


@dataclass(frozen=True)
class ClassUpdate:
    """One class_updates message as plain data (the node converts it)."""

    fleet: str
    robot: str
    sequence: int
    op: int
    class_name: str
    new_name: str = ""
    contribution_ids: tuple[str, ...] = ()
    class_memory: bytes = b""


@dataclass(frozen=True)
class Received:
    """What became of an incoming update: applied or not, and the one log line (empty: say nothing,
    e.g. our own update or another fleet's)."""

    applied: bool
    message: str
    flood: bool = False  # refused before any check of its content (allow-list, rate): log throttled


class FleetMember:
    """One learner's side of the fleet: publishes its changes through ``publish`` and applies peers'.

    ``controller`` is the learner's :class:`~.controller.LearnerController`; ``clock`` gives seconds
    for the rate limit (the node passes its ROS clock).
    """

    def __init__(self, controller: Any, settings: FleetSettings, publish: Callable[[ClassUpdate], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.controller = controller
        self.settings = settings
        self._publish = publish
        self._clock = clock
        self._limit = RateLimiter(burst=float(settings.burst))
        self._published: dict[str, frozenset[str]] = {}
        self._sequence = 0
        self._lock = threading.Lock()
        self._forgotten: OrderedDict[str, None] = OrderedDict()
        controller.learner_.set_robot_name(settings.robot)

    # ------------------------------------------------------------------ outgoing
    def publish_all(self) -> int:
        """Publish every class as it is now (activation: the history starts complete); the count."""
        with self._lock:
            self._published = {}
        return self.on_change()

    def on_change(self) -> int:
        """Publish what changed since the last call (see the module docstring); the updates sent."""
        from cbcl_pr_ros.core.provenance import ids

        with self._lock:
            learner = self.controller.learner_
            if learner.robot_name != self.settings.robot:  # a new learner object (load, merge)
                learner.set_robot_name(self.settings.robot)
            prov = learner.provenance_
            now = {c: ids(p) for c, p in prov.items()}
            if now == self._published:
                return 0
            gone = [c for c in self._published if c not in now]
            fresh = [c for c in now if self._published.get(c) != now[c]]
            out: list[ClassUpdate] = []
            state = learner.to_state() if fresh else None
            for old in gone:
                twin = next((c for c in fresh if c not in self._published and now[c] == self._published[old]), None)
                op, new = (RENAMED, twin) if twin is not None else (FORGOTTEN, "")
                out.append(self._update(op, old, new, self._published[old]))
            for c in fresh:
                out.append(self._update(LEARNED, c, "", now[c], _class_bytes(state, c)))
            self._published = now
            for u in out:
                self._publish(u)
            return len(out)

    def _update(self, op: int, name: str, new: str, contribution_ids: frozenset[str], blob: bytes = b"") -> ClassUpdate:
        self._sequence += 1
        return ClassUpdate(self.settings.fleet, self.settings.robot, self._sequence, op, name, new,
                           tuple(sorted(contribution_ids)), blob)

    # ------------------------------------------------------------------ incoming
    def receive(self, u: ClassUpdate) -> Received:
        """Check and apply one peer update (see the module docstring); never raises on bad input."""
        s = self.settings
        if u.fleet != s.fleet or u.robot == s.robot:
            return Received(False, "")  # another fleet's, or our own coming back
        who = f"robot {quote(u.robot)}"
        if s.allow and u.robot not in s.allow:
            return Received(False, f"fleet update from {who} refused: not in fleet_allow", flood=True)
        if not self._limit.allow(self._clock(), s.rate_hz):
            return Received(False, f"fleet update from {who} refused: more than {s.rate_hz:g} updates/s "
                                   f"(burst {s.burst})", flood=True)
        try:
            return self._apply(u, who)
        except (RequestError, ValueError, TypeError) as exc:
            return Received(False, f"fleet update from {who} refused: {str(exc)[:200]}")

    def _apply(self, u: ClassUpdate, who: str) -> Received:
        from cbcl_pr_ros.core import MemoryFileError, state_from_bytes

        if not NAME_PATTERN.fullmatch(u.robot):
            raise ValueError("robot name must be 1-64 letters, digits, '_', '.' or '-'")
        if u.op not in OPS:
            raise ValueError(f"unknown op {u.op!r}")
        name = check_label(u.class_name, "class name")
        new = check_label(u.new_name, "new class name") if u.op == RENAMED else ""
        if len(u.contribution_ids) > MAX_IDS or not all(isinstance(i, str) and _ID.fullmatch(i)
                                                        for i in u.contribution_ids):
            raise ValueError(f"contribution ids must be at most {MAX_IDS} ids of 16 hex digits")
        if len(u.class_memory) > self.settings.max_update_bytes:
            raise ValueError(f"{len(u.class_memory)} bytes of class statistics, more than "
                             f"fleet_max_update_bytes {self.settings.max_update_bytes}")
        covering = frozenset(u.contribution_ids)
        c = self.controller
        if u.op == FORGOTTEN:
            if not covering:
                raise ValueError("a forget must name the contributions forgotten")
            self._remember_forgotten(covering)
            out = c.forget_covered(name, covering, who)
            return Received(out.success, out.message)
        if u.op == RENAMED:
            out = c.rename_covered(name, new, covering, who)
            return Received(out.success, out.message)
        try:
            state = state_from_bytes(u.class_memory, f"class statistics from {who}",
                                     expected_backbone=c.backbone, expected_feature_dim=c.feature_dim)
        except MemoryFileError as exc:
            raise ValueError(str(exc)) from None
        if state.memory.classes != (name,) or state.provenance is None:
            raise ValueError(f"the statistics must hold exactly the class {quote(name)} with its provenance")
        got = frozenset(x.id for x in state.provenance[name])
        if got != covering:
            raise ValueError("the contribution ids do not match the statistics' provenance")
        if got <= self._forgotten.keys():
            return Received(False, f"fleet update from {who}: '{name}' was forgotten in the fleet; not learned again")
        out = c.merge_state(state, f"'{name}' from {who}")
        return Received(out.success, out.message)

    def _remember_forgotten(self, contribution_ids: frozenset[str]) -> None:
        with self._lock:
            for i in contribution_ids:
                self._forgotten[i] = None
                self._forgotten.move_to_end(i)
            while len(self._forgotten) > _TOMBSTONES:
                self._forgotten.popitem(last=False)


def _class_bytes(state: Any, name: str) -> bytes:
    from cbcl_pr_ros.core import state_to_bytes
    from cbcl_pr_ros.core.merge import one_class_state

    return state_to_bytes(one_class_state(state, name))
