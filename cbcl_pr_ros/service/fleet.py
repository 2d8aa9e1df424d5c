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
  merge_state`; a copy we already hold adds nothing, a newer copy replaces ours unless this robot
  was taught the class (then it is pooled), separate teaching pools); ``FORGOTTEN`` and ``RENAMED``
  apply only to a class known from peers alone, and only when the peer's contributions cover all of
  ours: a class taught here is changed only by a request here.  Forgotten contributions are
  remembered (bounded) with the robot that forgot them, ours included, so a stale ``LEARNED``
  relayed by a third robot does not bring a forgotten class back; a contribution counts as
  forgotten only where the robot it names (:class:`~cbcl_pr_ros.core.provenance.Contribution`, the
  sender for teaching of unknown origin) forgot it: ids are public (every update and digest carries
  them), and a peer that names another robot's ids in a ``FORGOTTEN`` must not shut that robot's
  class out of this one.
  A peer's class changes only that class (:class:`~cbcl_pr_ros.core.merge.PeerRules`): the memory-wide
  fields stay this robot's, the class's count and spread are bounded by this robot's own teaching
  of it, and classes known from peers alone fill at most half of the cluster budget K.
* **Rate.** Every sender has its own token bucket (``rate_hz``, ``burst``): a flood from one name
  spends that name's bucket only, never another robot's.
* **CPU.** All senders together get ``cpu_share`` of one core on average
  (:class:`~cbcl_pr_ros.runtime.cpu_share.CpuShare`, :data:`CPU_BURST_S` at once): each update
  taken is charged the CPU time it cost, and while the share is spent every update is refused. A
  merge at a thousand classes costs about a second, so names invented within the per-sender rate
  (up to :data:`MAX_SENDERS` of them) would otherwise keep the learner's CPU busy; what is refused
  is asked for again from the next digests.
* **Saving.** A peer's change is served at once but written to the memory file with the next save
  (:meth:`FleetMember.flush`, which the node's timer calls every ``save_s``; deactivate and cleanup
  write too, and so does a local teach, forget, rename, load or merge, before its answer). A crash
  loses at most the last ``save_s`` of peers' changes, which the digest asks for again.
* **Convergence.** Every ``digest_s`` seconds (:meth:`FleetMember.tick`) a member publishes a
  ``DIGEST``: each class it holds with its contribution ids.  A member that sees a class whose
  teaching it does not hold (an update lost to a flood, a restart, a dropped packet) sends a
  ``REQUEST`` naming the sender and the class, and the sender publishes that class's ``LEARNED``
  again.  Requests are bounded per digest and repeated at most once a period per class; teaching
  whose merge was refused here (or that came back forgotten) is not asked of the robot that sent it
  again before :data:`REFUSED_BACKOFF` periods (another robot's digest listing it is asked: one
  sender's refused copy, a liar's for instance, must not stop the exchange with the others).
* **Per sender.** What is remembered of a robot (its forgets, its refused copies, the classes asked
  of it) is kept per robot (:class:`~cbcl_pr_ros.runtime.per_sender.PerSender`): each within its
  own quota, at most :data:`ROBOTS_KEPT` robots besides this one, this robot's own forgets never
  dropped for a peer's; a flood from one name pushes out only that name's entries.

Anything refused changes nothing and yields one line for the log (refusals by the allow-list or the
rate limit, which a flood produces, are marked so that the node logs them at most once a second).
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cbcl_pr_ros.core import MemoryFileError, state_from_bytes, state_to_bytes
from cbcl_pr_ros.core.merge import PeerRules, one_class_state
from cbcl_pr_ros.core.provenance import ids
from cbcl_pr_ros.runtime.cpu_share import CpuShare
from cbcl_pr_ros.runtime.per_sender import PerSender
from cbcl_pr_ros.runtime.rate_limit import RateLimiter
from cbcl_pr_ros.request_checks import RequestError, check_label, quote

__all__ = ["LEARNED", "FORGOTTEN", "RENAMED", "DIGEST", "REQUEST", "OPS", "FleetSettings", "ClassUpdate", "Received",
           "FleetMember", "MAX_IDS", "NAME_PATTERN", "MAX_SENDERS", "REQUESTS_PER_DIGEST", "DIGEST_CHUNK_BYTES",
           "MAX_DIGEST_BYTES", "MAX_UPDATE_HEADER_BYTES", "REFUSED_BACKOFF", "ROBOTS_KEPT", "TOMBSTONES_PER_ROBOT",
           "REFUSED_PER_ROBOT", "ASKED_PER_ROBOT", "CPU_BURST_S"]

LEARNED, FORGOTTEN, RENAMED, DIGEST, REQUEST = 0, 1, 2, 3, 4
OPS = {LEARNED: "learned", FORGOTTEN: "forgot", RENAMED: "renamed", DIGEST: "digest", REQUEST: "request"}
MAX_SENDERS = 256  # rate buckets kept (least recently heard dropped first)
REQUESTS_PER_DIGEST = 16  # classes asked for again per digest received
DIGEST_CHUNK_BYTES = 64 * 1024  # one DIGEST message's class list
# the largest digest taken: one of ours is at most a chunk and one class's entry (~2 KiB); a digest
# up to fleet_max_update_bytes (8 MiB of JSON) held the receiver's GIL for about a second
MAX_DIGEST_BYTES = 8 * DIGEST_CHUNK_BYTES
# the largest header (JSON: tensor index and metadata) of a LEARNED's statistics: a class with 64
# contributions has ~8 KiB; a file's metadata may carry keys it does not know, and 6.7 MB of them
# cost the receiver 0.6 s of parsing per update before any check refused anything
MAX_UPDATE_HEADER_BYTES = 64 * 1024
REFUSED_BACKOFF = 10  # digest periods before teaching refused here (quota, a partly shared class) is asked again
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # fleet and robot names
MAX_IDS = 64  # contribution ids per update (a class keeps at most 64 contributions)
_ID = re.compile(r"[0-9a-f]{16}")
# what is remembered per robot, so that one sender's flood pushes out only its own entries: at most
# ROBOTS_KEPT robots besides this one per table (the one least recently written dropped whole), each
# within a quota; the three tables hold about 19 MB when every robot fills its quota
ROBOTS_KEPT = 64
TOMBSTONES_PER_ROBOT = 1024  # contribution ids a robot forgot (sixteen classes of 64 contributions)
REFUSED_PER_ROBOT = 256  # a robot's copies refused here: not asked of it again for a while
ASKED_PER_ROBOT = 256  # classes asked of a robot (each at most once per half digest period)
CPU_BURST_S = 5.0  # CPU seconds the fleet's updates may take at once (a few merges at a thousand classes)


@dataclass(frozen=True)
class FleetSettings:
    """Who this learner is in which fleet, whom it listens to, and the limits on what it takes."""

    fleet: str
    robot: str
    allow: frozenset[str] = frozenset()  # empty: every robot of the fleet
    max_update_bytes: int = 8 * 1024 * 1024
    rate_hz: float = 5.0
    burst: int = 100
    digest_s: float = 10.0  # 0: no digest (nothing asked again)
    save_s: float = 10.0  # peers' changes written at most this often; 0: each one at once
    cpu_share: float = 0.25  # of one core, for every update of every peer together

    def __post_init__(self) -> None:
        for what, name in (("fleet", self.fleet), ("robot_name", self.robot), *(("fleet_allow entry", a)
                                                                                  for a in self.allow)):
            if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
                raise ValueError(f"{what} must be 1-64 letters, digits, '_', '.' or '-', got {quote(str(name))}")
        if self.max_update_bytes < 1024 or self.rate_hz <= 0 or self.burst < 1 or not self.digest_s >= 0 \
                or not self.save_s >= 0 or not 0 < self.cpu_share <= 1:
            raise ValueError("fleet limits must be positive (max_update_bytes >= 1024, digest_s >= 0, "
                             "save_s >= 0, 0 < cpu_share <= 1)")

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
                   float(p["fleet_max_update_rate"]), int(p["fleet_history_depth"]),
                   float(p.get("fleet_digest_period", 10.0)), float(p.get("fleet_save_period", 10.0)),
                   float(p.get("fleet_cpu_share", 0.25)))


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
    for the rate limits and the saves (the node passes its ROS clock); ``cpu_clock`` the CPU seconds
    an update costs (this thread's).
    """

    def __init__(self, controller: Any, settings: FleetSettings, publish: Callable[[ClassUpdate], None],
                 clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.controller = controller
        self.settings = settings
        self._publish = publish
        self._clock = clock
        self._limits: OrderedDict[str, RateLimiter] = OrderedDict()  # one bucket per sender
        self._cpu_clock = cpu_clock
        self._cpu = CpuShare(settings.cpu_share, CPU_BURST_S)  # one for all senders together
        self._published: dict[str, frozenset[str]] = {}
        self._sequence = 0
        self._lock = threading.Lock()
        # robot that forgot -> contribution ids; this robot's own never dropped for a peer's
        self._forgotten = PerSender(TOMBSTONES_PER_ROBOT, ROBOTS_KEPT, kept=(settings.robot,))
        self._last_digest: float | None = None
        self._asked = PerSender(ASKED_PER_ROBOT, ROBOTS_KEPT)  # robot -> class asked of it: when
        self._resent: OrderedDict[str, float] = OrderedDict()  # class: when sent again on request
        self._refused = PerSender(REFUSED_PER_ROBOT, ROBOTS_KEPT)  # sender -> its teaching refused here: when
        controller.learner_.set_robot_name(settings.robot)

    # ------------------------------------------------------------------ outgoing
    def publish_all(self) -> int:
        """Publish every class as it is now (activation: the history starts complete); the count."""
        with self._lock:
            self._published = {}
        return self.on_change()

    def on_change(self) -> int:
        """Publish what changed since the last call (see the module docstring); the updates sent."""
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
                if op == FORGOTTEN:  # a peer that missed our forget must not give our own teaching back
                    self._tombstone(self._published[old], self.settings.robot)
            for c in fresh:
                out.append(self._update(LEARNED, c, "", now[c], _class_bytes(state, c)))
            self._published = now
            for u in out:
                self._publish(u)
            return len(out)

    def tick(self) -> int:
        """Publish the digest when one is due (the node calls this on a timer); the messages sent."""
        s = self.settings
        now = self._clock()
        if s.digest_s <= 0 or (self._last_digest is not None and 0 <= now - self._last_digest < 0.5 * s.digest_s):
            return 0
        self._last_digest = now
        with self._lock:
            held = {c: sorted(ids(p)) for c, p in self.controller.learner_.provenance_.items()}
            out = [self._update(DIGEST, "", "", frozenset(), blob) for blob in _digest_chunks(held)]
        for u in out:
            self._publish(u)
        return len(out)

    def _resend(self, name: str, who: str) -> Received:
        """Publish ``name``'s LEARNED again for a peer that asked (once a digest period per class)."""
        now = self._clock()
        with self._lock:
            learner = self.controller.learner_
            prov = learner.provenance_.get(name)
            if prov is None:
                return Received(False, f"{who} asked for '{name}', which this robot does not hold")
            last = self._resent.get(name)
            if last is not None and 0 <= now - last < 0.5 * max(self.settings.digest_s, 1.0):
                return Received(False, "")  # sent again a moment ago: that answers this request too
            _remember(self._resent, name, now)
            u = self._update(LEARNED, name, "", ids(prov), _class_bytes(learner.to_state(), name))
        self._publish(u)
        return Received(True, f"sent '{name}' again: {who} asked for it")

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
        if not isinstance(u.robot, str) or not NAME_PATTERN.fullmatch(u.robot):
            return Received(False, "fleet update refused: robot name must be 1-64 letters, digits, '_', '.' or '-'",
                            flood=True)
        who = f"robot {quote(u.robot)}"
        if s.allow and u.robot not in s.allow:
            return Received(False, f"fleet update from {who} refused: not in fleet_allow", flood=True)
        now = self._clock()
        if not self._bucket(u.robot).allow(now, s.rate_hz):
            return Received(False, f"fleet update from {who} refused: more than {s.rate_hz:g} updates/s "
                                   f"(burst {s.burst}) from this robot", flood=True)
        if not self._cpu.ready(now):
            return Received(False, f"fleet update from {who} refused: the fleet's updates used their share of "
                                   f"this learner's CPU ({s.cpu_share:.0%} of a core, fleet_cpu_share); the "
                                   "digest asks for what is missing later", flood=True)
        c0 = self._cpu_clock()
        try:
            out = self._apply(u, who)
        except (RequestError, ValueError, TypeError) as exc:
            out = Received(False, f"fleet update from {who} refused: {str(exc)[:200]}")
        self._cpu.spend(now, self._cpu_clock() - c0)
        return out

    def flush(self) -> str:
        """Write the peers' changes kept in RAM, if any; the line to log ("" when nothing waited). The
        node's timer calls it every ``save_s`` (so a change waits at most that long, and the file is
        written at most that often for peers), and deactivate calls it; a failed write is tried again
        at the next call (cleanup refuses to free a memory that could not be written)."""
        return self.controller.save_peer_changes()[1]

    @property
    def _defer(self) -> bool:
        """Whether a peer's change waits for the next save (:meth:`flush`) rather than being saved at once."""
        return self.settings.save_s > 0

    def _bucket(self, robot: str) -> RateLimiter:
        """The sender's own token bucket (at most MAX_SENDERS kept, least recently heard dropped)."""
        with self._lock:
            lim = self._limits.get(robot)
            if lim is None:
                lim = self._limits[robot] = RateLimiter(burst=float(self.settings.burst))
            self._limits.move_to_end(robot)
            while len(self._limits) > MAX_SENDERS:
                self._limits.popitem(last=False)
            return lim

    def _apply(self, u: ClassUpdate, who: str) -> Received:
        if u.op not in OPS:
            raise ValueError(f"unknown op {u.op!r}")
        if len(u.class_memory) > self.settings.max_update_bytes:
            raise ValueError(f"{len(u.class_memory)} bytes of class statistics, more than "
                             f"fleet_max_update_bytes {self.settings.max_update_bytes}")
        if u.op == DIGEST:
            return self._digest_received(u, who)
        name = check_label(u.class_name, "class name")
        if u.op == REQUEST:
            return self._resend(name, who) if u.new_name == self.settings.robot else Received(False, "")
        new = check_label(u.new_name, "new class name") if u.op == RENAMED else ""
        if len(u.contribution_ids) > MAX_IDS or not all(isinstance(i, str) and _ID.fullmatch(i)
                                                        for i in u.contribution_ids):
            raise ValueError(f"contribution ids must be at most {MAX_IDS} ids of 16 hex digits")
        covering = frozenset(u.contribution_ids)
        c = self.controller
        if u.op == FORGOTTEN:
            if not covering:
                raise ValueError("a forget must name the contributions forgotten")
            if not c.taught_here(name):  # a class kept as taught here: its teaching is not forgotten
                with self._lock:  # in the sender's name: it counts only for the sender's own teaching
                    self._tombstone(covering, u.robot)
            out = c.forget_covered(name, covering, who, defer=self._defer)
            return Received(out.success, out.message)
        if u.op == RENAMED:
            out = c.rename_covered(name, new, covering, who, defer=self._defer)
            return Received(out.success, out.message)
        header = int.from_bytes(u.class_memory[:8], "little")  # safetensors: the header's length first
        if header > MAX_UPDATE_HEADER_BYTES:
            raise ValueError(f"class statistics with a {header}-byte header; a class's holds at most "
                             f"{MAX_UPDATE_HEADER_BYTES}")
        try:
            state = state_from_bytes(u.class_memory, f"class statistics from {who}",
                                     expected_backbone=c.backbone, expected_feature_dim=c.feature_dim)
        except MemoryFileError as exc:
            raise ValueError(str(exc)) from None
        held = state.memory.classes  # the peer's spelling: composed (as ours) by the merge
        if len(held) != 1 or unicodedata.normalize("NFC", held[0]) != name or state.provenance is None:
            raise ValueError(f"the statistics must hold exactly the class {quote(name)} with its provenance")
        got = frozenset(x.id for x in state.provenance[held[0]])
        if got != covering:
            raise ValueError("the contribution ids do not match the statistics' provenance")
        with self._lock:
            if self._all_forgotten(state.provenance[held[0]], u.robot):  # not asked of it again for a while
                self._refused.put(u.robot, _teaching_key(got), self._clock())
                return Received(False, f"fleet update from {who}: '{name}' was forgotten in the fleet; "
                                       "not learned again")
        k = c.learner_.config.max_clusters
        rules = PeerRules(self.settings.robot, None if k is None else k // 2, u.robot)  # half of K for peers
        out = c.merge_state(state, f"'{name}' from {who}", rules, defer=self._defer)
        if not out.success:  # not asked of this sender again for a while (REFUSED_BACKOFF digest periods)
            with self._lock:
                self._refused.put(u.robot, _teaching_key(got), self._clock())
        return Received(out.success, out.message)

    def _digest_received(self, u: ClassUpdate, who: str) -> Received:
        """Ask the sender again for the classes of its digest whose teaching this robot does not hold."""
        listed = _parse_digest(u.class_memory)
        now = self._clock()
        with self._lock:
            held = frozenset().union(*(ids(p) for p in self.controller.learner_.provenance_.values()))
            asked: list[ClassUpdate] = []
            for name, got in listed.items():
                if len(asked) >= REQUESTS_PER_DIGEST:
                    break
                last = self._asked.get(u.robot, name)
                # a digest names no robots: teaching forgotten is asked for, refused when it comes
                # (_all_forgotten) and then not asked of that sender again before REFUSED_BACKOFF periods
                if got <= held or (last is not None and 0 <= now - last < 0.5 * self.settings.digest_s) \
                        or self._refused_lately(u.robot, got, now):
                    continue
                self._asked.put(u.robot, name, now)
                asked.append(self._update(REQUEST, name, u.robot, frozenset()))
        for r in asked:
            self._publish(r)
        if not asked:
            return Received(False, "")  # in step with the sender: nothing to say
        return Received(True, f"asked {who} again for {', '.join(quote(r.class_name) for r in asked)}: its "
                              "digest lists teaching this robot does not hold")

    def _refused_lately(self, robot: str, got: frozenset[str], now: float) -> bool:
        """Whether ``robot``'s copy of this teaching was refused here within REFUSED_BACKOFF periods
        (under ``self._lock``)."""
        when = self._refused.get(robot, _teaching_key(got))
        return when is not None and 0 <= now - when < REFUSED_BACKOFF * self.settings.digest_s

    def _tombstone(self, contribution_ids: frozenset[str], robot: str) -> None:
        """Remember that ``robot`` forgot these contributions (under ``self._lock``; within its quota)."""
        for i in sorted(contribution_ids):
            self._forgotten.put(robot, i)

    def _all_forgotten(self, entries: Any, sender: str) -> bool:
        """Whether every contribution was forgotten by the robot it names (the sender's for teaching of
        unknown origin, as a merge records it); another robot's forget of it does not count (under
        ``self._lock``)."""
        return all((c.robot or sender, c.id) in self._forgotten for c in entries)


def _remember(table: OrderedDict, key: Any, value: Any, limit: int = 4096) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)


def _teaching_key(got: frozenset[str]) -> bytes:
    """A set of contribution ids as 16 bytes: up to 64 ids would keep ~6 KB per remembered refusal."""
    return hashlib.blake2b("".join(sorted(got)).encode(), digest_size=16).digest()


def _digest_chunks(held: dict[str, list[str]]) -> list[bytes]:
    """The digest's JSON messages ({"classes": {name: [ids]}}), each at most about DIGEST_CHUNK_BYTES."""
    chunks, part, size = [], {}, 0
    for name, got in held.items():
        cost = len(json.dumps(name)) + 19 * len(got) + 4  # as written: a non-ASCII character takes 6 bytes
        if part and size + cost > DIGEST_CHUNK_BYTES:
            chunks.append(part)
            part, size = {}, 0
        part[name] = got
        size += cost
    chunks.append(part)
    return [json.dumps({"classes": p}, separators=(",", ":")).encode() for p in chunks]


def _parse_digest(blob: bytes) -> dict[str, frozenset[str]]:
    """A received digest's classes and their contribution ids; ValueError when malformed or larger
    than any digest a member sends (:data:`MAX_DIGEST_BYTES`), before it is parsed."""
    if len(blob) > MAX_DIGEST_BYTES:
        raise ValueError(f"a digest of {len(blob)} bytes; one holds at most {MAX_DIGEST_BYTES}")
    try:
        data = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError("a digest must be JSON") from None
    listed = data.get("classes") if isinstance(data, dict) else None
    if not isinstance(listed, dict):
        raise ValueError("a digest must be a JSON object with 'classes'")
    out = {}
    for name, got in listed.items():
        check_label(name, "class name")
        if not isinstance(got, list) or not 0 < len(got) <= MAX_IDS or not all(
                isinstance(i, str) and _ID.fullmatch(i) for i in got):
            raise ValueError(f"a digest lists 1-{MAX_IDS} contribution ids of 16 hex digits per class")
        out[name] = frozenset(got)
    return out


def _class_bytes(state: Any, name: str) -> bytes:
    return state_to_bytes(one_class_state(state, name))
