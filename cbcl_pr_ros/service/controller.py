"""The learner node's behaviour without ROS: teach, classify, forget, rename, save, load.

The node's service callbacks convert messages and call this class; every bad-input case of a
teaching session (empty label, nothing learned yet, unwritable memory file, foreign backbone, ...)
is decided here and unit-tested without a ROS graph.

Threading: mutations (teach/forget/rename/load) are serialised by one lock; ``classify`` takes no
lock, since the core learner swaps an immutable classifier snapshot when a retrain finishes, so a
prediction never waits for a retrain. ``load`` replaces the learner object as one reference swap.

Persistence: the memory is saved after every change through a :class:`~.memory_files.MemoryStore`
(a temporary file renamed over the target, inside the memory directory only), so a crash mid-save
leaves the previous file intact. A success is a promise: a change answers success only once it is in
the default file (or the node keeps no file by configuration, and the answer says so). A fleet
peer's change may instead be kept in RAM (``defer``) and written with the next save
(:meth:`LearnerController.save_peer_changes`, which the fleet member calls at most once a
``fleet_save_period``, and at deactivate and cleanup): at a thousand classes a save costs a sixth of
a second, and a peer answers to nobody; its class lost to a crash is asked for again by the fleet's
digest. When the save
fails (full disk, the file above ``max_memory_file_bytes``, ...) the served memory goes back to the
last one saved (kept as its file's bytes) and the change is refused with the reason. A file to load
is read with a size cap, verified completely (:func:`~cbcl_pr_ros.core.persistence.state_from_bytes`),
rebuilt, and exercised with one classification before it replaces the served memory; a refused file
is never autosaved.

Every request field is untrusted (docs/security.md): labels, vectors and counts go through
:mod:`.validation` and answer a clear refusal that changes nothing.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cbcl_pr_ros.core.merge import merge_states, one_class_state
from cbcl_pr_ros.core.negatives import MAX_NEGATIVES
from cbcl_pr_ros.core.persistence import MAX_COUNTER, MemoryFileError, checked_bytes, state_from_bytes
from cbcl_pr_ros.core.provenance import ids, own_shots
from cbcl_pr_ros.lookalike import lookalike_key, nearest
from cbcl_pr_ros.plurals import counted, noun
from cbcl_pr_ros.runtime.heap import release_freed_memory
from cbcl_pr_ros.service.memory_files import MemoryAccessError, MemoryStore
from cbcl_pr_ros.request_checks import (
    RequestError,
    RequestLimits,
    check_count,
    check_feature_values,
    check_label,
    check_new_label,
    quote,
)

__all__ = [
    "Outcome",
    "TeachOutcome",
    "ClassifyOutcome",
    "StatusSnapshot",
    "LearnerController",
    "NOTHING_LEARNED",
    "MemoryLoadError",
]

log = logging.getLogger(__name__)

NOTHING_LEARNED = "nothing learned yet: teach a class first (TeachClass)"
_KEPT = "; the current memory stays in use"
# class names a refusal lists ("known: ..."); above, the count and the nearest few: a memory of a
# thousand classes must not make every mistyped forget a 100 KB answer and log line
_LISTED = 10


class MemoryLoadError(RuntimeError):
    """The default memory file exists but cannot be served (strict start-up: the node's configure)."""


@dataclass
class Outcome:
    """Result of a mutation: success flag, one readable sentence, the model version after it."""
    success: bool
    message: str
    model_version: int = 0
    num_classes: int = 0


@dataclass
class TeachOutcome(Outcome):
    extended_existing: bool = False
    num_examples: int = 0
    num_clusters: int = 0
    learning_time_s: float = 0.0
    taught_track_id: int = -1  # the track of the object taught (-1: none)
    taught_box: tuple[int, int, int, int] | None = None  # its (x0, y0, x1, y1) in the last frame used


@dataclass
class ClassifyOutcome:
    success: bool
    message: str
    predictions: list = field(default_factory=list)
    model_version: int = 0


@dataclass
class StatusSnapshot:
    class_names: list
    num_clusters: int
    cluster_budget: int
    memory_bytes: int
    backbone: str
    feature_dimension: int
    model_version: int
    training: bool
    memory_path: str
    last_save_ok: bool


def _info_get(info: Any, key: str) -> Any:
    return info[key] if isinstance(info, dict) else getattr(info, key)


def _reason(exc: Exception, limit: int = 400) -> str:
    """Why a file was refused, cut to ``limit`` characters: a file's field may hold megabytes of text,
    which the answer and the log line quote."""
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _known(classes: list[str], label: str) -> str:
    """The classes for a refusal of ``label``, which the memory lacks: all of a few; of more, the
    count and the names nearest ``label`` (the first ten of a thousand would not help; ListClasses
    has them all)."""
    if len(classes) <= _LISTED:
        return f"known: {', '.join(classes) or 'none'}"
    near = nearest(label, classes)
    hint = f"nearest: {', '.join(near)}" if near else "none is named like it"
    return f"{counted(len(classes), 'class')} known, {hint}; ListClasses lists them all"


class LearnerController:
    """Owns one CBCL-PR learner, its memory files and the answers to every session request.

    Parameters
    ----------
    make_learner : callable(feature_dim) -> CBCLPRLearner
        Builds an empty learner (called once, at construction).
    backbone : str
        Backbone name the memory is built with; vectors and memory files of another are refused.
    feature_dim : int
        Width of the vectors, from the backbone (``settings.params.feature_dim_for``); fixed for the
        controller's life, never taken from a request.
    store : MemoryStore or None
        Where memory files live (None: RAM only, save/load refused).
    limits : RequestLimits or None
        Caps on request fields (defaults when None).
    on_change : callable() or None
        Called after every change of state (status publication).
    """

    def __init__(self, make_learner: Callable[[int], Any], backbone: str, feature_dim: int,
                 store: MemoryStore | None = None, cluster_budget: int = 0,
                 on_change: Callable[[], None] | None = None, limits: RequestLimits | None = None) -> None:
        if not callable(make_learner):
            raise TypeError(f"make_learner must be callable, got {type(make_learner).__name__}")
        if not backbone:
            raise ValueError("backbone must be a non-empty name")
        if isinstance(feature_dim, bool) or int(feature_dim) < 1:
            raise ValueError(f"feature_dim must be a positive integer, got {feature_dim!r}")
        self.make_learner = make_learner
        self.backbone = backbone
        self.feature_dim = int(feature_dim)
        self.store = store
        self.cluster_budget = int(cluster_budget)
        self.on_change = on_change
        self.limits = limits or RequestLimits()
        self.learner_: Any = make_learner(self.feature_dim)
        self._durable_blob: bytes | None = None  # the default file's content as last saved or loaded
        self.unsaved_peer_changes_ = 0  # peers' changes served but not yet in the default file
        self._unsaved_bytes = 0  # at most what they add to the file (the size check of deferred merges)
        self.last_save_ok_ = True
        self.last_save_error_ = ""
        self.moved_aside_ = ""  # where load_at_startup put a refused default file
        self._mutate = threading.Lock()
        self._training = 0
        self._training_lock = threading.Lock()

    # ------------------------------------------------------------------ state
    @property
    def training(self) -> bool:
        return self._training > 0

    @property
    def classes(self) -> list[str]:
        return list(self.learner_.classes_)

    @property
    def model_version(self) -> int:
        return int(self.learner_.model_version_)

    @property
    def memory_path(self) -> str:
        """Full path of the default memory file ("" when RAM only)."""
        return self.store.default_path if self.store is not None else ""

    def status(self) -> StatusSnapshot:
        lrn = self.learner_
        infos = list(lrn.class_info())
        return StatusSnapshot(
            class_names=list(lrn.classes_),
            num_clusters=sum(int(_info_get(i, "clusters")) for i in infos),
            cluster_budget=self.cluster_budget,
            memory_bytes=int(lrn.memory_bytes()),
            backbone=self.backbone,
            feature_dimension=self.feature_dim,
            model_version=int(lrn.model_version_),
            training=self.training,
            memory_path=self.memory_path,
            last_save_ok=self.last_save_ok_,
        )

    def class_info(self) -> list:
        return list(self.learner_.class_info())

    def refused(self, message: str) -> TeachOutcome:
        """A refused teach that reports the current state (classes known, model version)."""
        lrn = self.learner_
        return TeachOutcome(False, message, int(lrn.model_version_), len(lrn.classes_))

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:  # a status publisher failing must not undo a teach
                log.exception("on_change callback failed")

    def _set_training(self, delta: int) -> None:
        with self._training_lock:
            self._training += delta
        self._changed()

    # ------------------------------------------------------------------ persistence
    def _save_to(self, name: str, learner: Any = None, blob: bytes | None = None) -> tuple[bool, str, str, int]:
        """Save ``learner`` (default: the served one) as ``name`` ("" = default file); ``blob``: its bytes
        when already checked (:func:`~cbcl_pr_ros.core.persistence.checked_bytes`); (ok, message, shown name,
        bytes)."""
        if self.store is None:
            return False, "no memory directory configured: the memory lives in RAM only", "", 0
        lrn = self.learner_ if learner is None else learner
        try:
            if blob is None:
                blob = checked_bytes(lrn.to_state(), "the memory to save")  # never a file load would refuse
            size, shown = self.store.write(name, blob)
        except MemoryFileError as exc:
            return False, f"not written, since loading it would be refused: {exc}", "", 0
        except MemoryAccessError as exc:
            return False, f"could not write memory file: {exc}", "", 0
        except OSError as exc:  # ENOSPC and the like, after the checks
            return False, f"could not write memory file: {exc.strerror or type(exc).__name__}", "", 0
        if name in ("", self.store.default_name):
            self._durable(blob)
        return True, f"saved {counted(len(lrn.classes_), 'class')} to '{shown}'", shown, size

    def _durable(self, blob: bytes) -> None:
        """The default file now holds exactly the served memory (``blob``): nothing is left unsaved."""
        self._durable_blob = blob
        self.unsaved_peer_changes_ = 0
        self._unsaved_bytes = 0

    @property
    def keeps_file(self) -> bool:
        """True when every change is saved to a default memory file (False: RAM only by configuration)."""
        return self.store is not None and bool(self.store.default_name)

    def ram_only_note(self) -> str:
        """What a success answer adds when nothing is saved (memory_path '')."""
        return "" if self.keeps_file else " (RAM only: memory_path is '', nothing is saved to disk)"

    def _commit(self, learner: Any = None, blob: bytes | None = None) -> str:
        """Make the change just applied to the served learner durable: "" when it is in the default
        file (or RAM only by configuration), else the reason it is not, after the served memory went
        back to the last saved one (call with the mutation lock held)."""
        release_freed_memory()
        if not self.keeps_file:
            return ""
        ok, msg, _, _ = self._save_to("", learner, blob)
        if ok:
            self.last_save_ok_, self.last_save_error_ = True, ""
            return ""
        if learner is None:
            self._roll_back()
        log.warning("%s; the change was undone and refused", msg)
        return msg

    def _roll_back(self) -> None:
        """Serve the memory as last saved again (a newer model version), or keep RAM and say so."""
        version = min(int(self.learner_.model_version_) + 1, MAX_COUNTER)
        try:
            if self._durable_blob is None:
                state = self.make_learner(self.feature_dim).to_state()
            else:
                state = state_from_bytes(self._durable_blob, "the last saved memory",
                                         expected_backbone=self.backbone, expected_feature_dim=self.feature_dim)
            self.learner_ = type(self.learner_).from_state(state, model_version=version)
        except Exception as exc:  # never expected: the bytes were written and verified by this process
            self.last_save_ok_ = False
            self.last_save_error_ = f"the memory could not be put back ({type(exc).__name__})"
            log.error("%s: RAM now holds a change that is not on disk", self.last_save_error_)

    def load_at_startup(self, *, move_aside: bool = True) -> str:
        """Remove stale temp files, then load the default file if it exists.

        A corrupt or foreign file is moved aside (renamed, never deleted) and the learner starts empty;
        with ``move_aside=False`` (the lifecycle node's configure) it is left untouched and
        :class:`MemoryLoadError` says why, so that the start fails instead of serving an empty memory.
        A refused start closes the store: a node that fails configure again and again keeps no handle.
        """
        try:
            return self._load_at_startup(move_aside)
        except MemoryLoadError:
            self.close()
            raise

    def _load_at_startup(self, move_aside: bool) -> str:
        if self.store is None or not self.store.default_name:
            return "no memory file configured, the memory lives in RAM only"
        removed = self.store.remove_stale_temp()
        note = f" (removed {len(removed)} stale temporary files of interrupted saves)" if removed else ""
        name = self.store.default_name
        if not self.store.exists(""):
            return f"no memory file '{name}' in '{self.store.memory_dir}', starting empty{note}"
        out = self.load("", startup=True)
        if out.success:
            return out.message + note
        if not move_aside:
            raise MemoryLoadError(f"{out.message.removesuffix(_KEPT)}; the file was left as it is: repair "
                                  f"or move it, or set memory_path, then configure again")
        try:
            aside = self.store.move_aside("", f"unreadable-{int(time.time())}")
        except (OSError, MemoryAccessError) as exc:
            # starting empty would let the next autosave overwrite the file: refuse to start instead
            raise MemoryLoadError(f"{out.message.removesuffix(_KEPT)}; it could not be moved aside "
                                  f"({exc}): move it yourself or set memory_path, then configure again") from None
        self.moved_aside_ = aside
        path = f"{self.store.memory_dir}/{aside}"
        return (f"{out.message.removesuffix(_KEPT)}; the file was moved to '{path}' (kept, never deleted) "
                f"and the learner starts EMPTY; 'cbcl-memory info {path}' says why, 'cbcl-memory repair "
                f"{path} -o <file>' writes a copy load accepts{note}")

    def close(self) -> None:
        """Release the memory directory (cleanup; the controller answers nothing after this)."""
        if self.store is not None:
            self.store.close()

    def save_if_unsaved(self) -> tuple[bool, str]:
        """Retry the autosave when the last one failed (before the memory is freed); (ok, message).

        Every change is saved when it happens, so a memory whose last save succeeded is on disk,
        except fleet peers' changes kept in RAM until the next save (:meth:`save_peer_changes`):
        those are written here. RAM only (no default file): ok, with a message saying what is dropped.
        """
        with self._mutate:
            n = len(self.learner_.classes_)
            if self.store is None or not self.store.default_name:
                return True, (f"it lived in RAM only (memory_path ''), so its {counted(n, 'class')} "
                              f"{noun(n, 'is', 'are')} dropped" if n else "no classes to keep")
            if self.last_save_ok_ and not self.unsaved_peer_changes_:
                return True, (f"its {counted(n, 'class')} {noun(n, 'stays', 'stay')} saved in "
                              f"'{self.store.default_name}'" if n else "no classes to keep")
            ok, msg, _, _ = self._save_to("")
            self.last_save_ok_ = ok
            return ok, msg

    def save_peer_changes(self) -> tuple[bool, str]:
        """Write the fleet peers' changes kept in RAM (``defer``) to the default file, checked as every
        save is; (ok, line to log), ("" when there was nothing to write). A failed write keeps them
        served and unsaved (``last_save_ok`` false): the next call, and cleanup, try again."""
        with self._mutate:
            n = self.unsaved_peer_changes_
            if not n or not self.keeps_file:
                return True, ""
            ok, msg = self._write_peer_changes()
        if not ok:
            log.warning("%s; %s from fleet peers stay in RAM only until the next save", msg, counted(n, "change"))
            return False, f"{counted(n, 'change')} from fleet peers not saved: {msg}"
        return True, f"{counted(n, 'change')} from fleet peers saved: {msg}"

    def _peers_saved_first(self, raise_error: bool = False) -> str:
        """Write the peers' changes kept in RAM before a local change is made in place (under the lock):
        "" when none wait or they are written, else why not.  A local change whose save fails goes back
        to the file as last saved; were the peers' changes not in it, they would be dropped with it and
        then announced to the fleet as forgotten.  ``raise_error``: a RequestError instead of the reason."""
        if not self.unsaved_peer_changes_ or not self.keeps_file:
            return ""
        n = self.unsaved_peer_changes_
        ok, msg = self._write_peer_changes()
        why = "" if ok else f"{counted(n, 'change')} from fleet peers, kept in RAM, could not be written first: {msg}"
        if why and raise_error:
            raise RequestError(why)
        return why

    def _write_peer_changes(self) -> tuple[bool, str]:
        """Save the served memory, peers' changes kept in RAM included (under the lock); (ok, message)."""
        ok, msg, _, _ = self._save_to("")
        self.last_save_ok_, self.last_save_error_ = ok, "" if ok else msg
        return ok, msg

    def _held_for_peers(self, extra_bytes: int = 0) -> str:
        """A peer's change is served but kept in RAM until :meth:`save_peer_changes` (under the lock);
        "" as :meth:`_commit` answers a change made durable."""
        release_freed_memory()
        self.unsaved_peer_changes_ += 1
        self._unsaved_bytes += extra_bytes
        return ""

    def release(self, final: bool) -> tuple[bool, str]:
        """Free the memory (the node's cleanup) once every class is on disk; (ok, line to log).

        The last autosave is retried first (:meth:`save_if_unsaved`). When it fails, a cleanup that
        is not ``final`` raises RuntimeError and frees nothing, so that no class is lost; at shutdown
        (``final``) the memory goes with the process and the line says so.
        """
        ok, message = self.save_if_unsaved()
        if not ok and not final:
            raise RuntimeError(f"{message}; cleanup refused so that no class is lost: fix the "
                               f"memory file or directory, then cleanup again (SaveMemory to "
                               f"another name keeps a copy meanwhile)")
        self.close()
        if not ok:
            return False, f"{message}; the memory is lost with this process"
        return True, f"memory released from RAM: {message}"

    def save(self, name: str = "") -> tuple[bool, str, str, int]:
        """SaveMemory: (success, message, shown name, bytes_written)."""
        with self._mutate:
            ok, msg, shown, size = self._save_to(name)
            if name == "" or (self.store is not None and name == self.store.default_name):
                self.last_save_ok_ = ok
        self._changed()
        return ok, msg, shown, size

    def _outcome(self, success: bool, message: str) -> Outcome:
        lrn = self.learner_
        return Outcome(success, message, int(lrn.model_version_), len(lrn.classes_))

    def load(self, name: str = "", *, startup: bool = False) -> Outcome:
        """LoadMemory: replace the memory with a file's; a refused file leaves the current one in use."""
        if self.store is None:
            return self._outcome(False, "no memory directory configured: nothing can be loaded")
        with self._mutate:
            current = self.learner_
            try:
                state, shown, blob = self._read_verified(name)
                # the served version never goes backwards: a load is a change like any other
                version = min(max(int(state.model_version), int(current.model_version_) + (0 if startup else 1)),
                              MAX_COUNTER)
                new = type(current).from_state(state, model_version=version)
                new.robot_name = current.robot_name
                self._exercise(new)
            except (MemoryAccessError, MemoryFileError, RequestError) as exc:
                return self._outcome(False, f"refused memory file: {_reason(exc)}{_KEPT}")
            except (TypeError, ValueError, ArithmeticError) as exc:
                return self._outcome(False, f"refused memory file {quote(name or 'default')}: "
                                     f"inconsistent ({_reason(exc)}){_KEPT}")
            if startup or name in ("", self.store.default_name):
                self._durable(blob)  # the default file holds exactly this memory
            else:
                failed = self._commit(new)  # into the default file before it is served
                if failed:
                    return self._outcome(False, f"nothing loaded: {failed}{_KEPT}")
            self.learner_ = new
        self._changed()
        n = len(new.classes_)
        return Outcome(True, f"loaded {counted(n, 'class')} from '{shown}'", int(new.model_version_), n)

    def _read_verified(self, name: str) -> tuple[Any, str, bytes]:
        """The state of memory file ``name`` in the store, read size-capped and verified completely
        (this learner's backbone and width, class names valid as the core's rule has them), its name as
        shown, and its bytes.  Stored names are taken as they are: composed to NFC, a name of 100
        characters such as Hebrew presentation forms becomes 200, and a file that holds it must still load."""
        blob, shown = self.store.read(name)
        state = state_from_bytes(blob, f"'{shown}'", expected_backbone=self.backbone,
                                 expected_feature_dim=self.feature_dim)
        return state, shown, blob

    def merge(self, name: str) -> Outcome:
        """MergeMemory: take in a memory file's classes (read and verified exactly as LoadMemory's);
        a refused file or merge leaves the current memory in use."""
        if self.store is None:
            return self._outcome(False, "no memory directory configured: nothing can be merged")
        try:
            state, shown, _ = self._read_verified(name)
        except (MemoryAccessError, MemoryFileError, RequestError) as exc:
            return self._outcome(False, f"refused memory file: {_reason(exc)}{_KEPT}")
        return self.merge_state(state, f"'{shown}'")

    def merge_state(self, state: Any, origin: str, peer: Any = None, defer: bool = False) -> Outcome:
        """Merge a verified :class:`~cbcl_pr_ros.core.LearnerState` (a file's, a fleet peer's) into the
        memory (:mod:`cbcl_pr_ros.core.merge`): one new learner, checked as load checks a file,
        exercised, swapped in as one reference, autosaved.  ``peer``: the
        :class:`~cbcl_pr_ros.core.merge.PeerRules` of a fleet update (memory-wide fields stay ours; at
        most half of K and of max_memory_file_bytes go to classes known from peers alone).  Refused
        (nothing changes) when the memories cannot be merged, the result would not load back or would
        exceed the memory file size limit.  A class it adds must look like no other class of the merged
        memory (:func:`~cbcl_pr_ros.request_checks.check_new_label`): a name that differs from a known one
        only in case, accents or invisible characters is refused, not added as a second class.

        ``defer`` (a fleet peer's update): served at once but written with the next save
        (:meth:`save_peer_changes`); what it adds is checked instead, each class it changes as load
        checks a file, and the file's size bounded by the last one saved plus those classes' own.
        A merge that applies the budget K changes other classes too: it is saved at once."""
        with self._mutate:
            current = self.learner_
            try:
                state = self._named_as_ours(state)
                merged, report = merge_states(current.to_state(), state, peer)
                if report.unchanged:
                    return self._outcome(True, f"nothing new from {origin}: {report.summary()}")
                known = {lookalike_key(c): c for c in reversed(current.classes_)}  # each key once: a file
                for name in report.added:  # of many classes costs one key per name, not one per pair
                    key = lookalike_key(name)
                    check_new_label(name, [known[key]] if key in known else [], "the class",
                                    "rename one of the two first")
                    known[key] = name
                new = type(current).from_state(merged, model_version=min(int(current.model_version_) + 1,
                                                                          MAX_COUNTER))
                new.robot_name = current.robot_name
                blob, size, extra = self._merged_bytes(new, report, origin, defer)
                limit = self.store.max_bytes if self.store is not None else None
                if limit is not None and peer is not None:
                    limit //= 2  # classes from peers never take the room this robot's own teaching needs
                if limit is not None and size > limit:
                    share = ", half of it for a peer's classes" if peer is not None else ""
                    about = "up to " if blob is None else ""
                    return self._outcome(False, f"merge of {origin} refused: the memory would take {about}{size} "
                                         f"bytes, more than {limit} (max_memory_file_bytes{share}){_KEPT}")
                self._exercise(new)
            except (TypeError, ValueError, ArithmeticError, MemoryFileError) as exc:
                return self._outcome(False, f"merge of {origin} refused: {str(exc)[:300]}{_KEPT}")
            if blob is None:
                self._held_for_peers(extra)  # size checked above
            else:
                failed = self._commit(new, blob)  # into the default file before it is served
                if failed:
                    return self._outcome(False, f"nothing merged from {origin}: {failed}{_KEPT}")
            self.learner_ = new
        self._changed()
        n = len(new.classes_)
        return Outcome(True, f"merged {origin}: {report.summary()}; {counted(n, 'class')}{self.ram_only_note()}",
                       int(new.model_version_), n)

    def _merged_bytes(self, new: Any, report: Any, origin: str, defer: bool) -> tuple[bytes | None, int, int]:
        """(the file's bytes, their size, 0) of a merged memory checked as load checks it; deferred
        (:meth:`merge_state`): (None, the size at most, what the merge adds at most), each class it
        changed stored as a one-class file and read back with every rule of load. MemoryFileError."""
        if not (defer and self.keeps_file and not report.reduced):
            blob = checked_bytes(new.to_state(), f"the memory merged with {origin}")
            return blob, len(blob), 0
        state = new.to_state()
        extra = sum(len(checked_bytes(one_class_state(state, n), f"'{n}' merged from {origin}"))
                    for n in (*report.added, *report.pooled, *report.replaced))
        return None, len(self._durable_blob or b"") + self._unsaved_bytes + extra, extra

    def _named_as_ours(self, state: Any) -> Any:
        """``state`` (a file's, a peer's) with each class it names as this memory spells it, else composed
        to NFC: a class a memory written before names were composed holds decomposed pools with ours
        instead of arriving as a second class that looks the same.  As it is when two of its names
        would become one (the look-alike check of the merge then names them)."""
        names = list(state.memory.classes)
        ours = set(self.learner_.classes_)
        to = {n: n if n in ours else self._spelled_as_stored(unicodedata.normalize("NFC", n)) for n in names}
        moved = {n: t for n, t in to.items() if n != t}
        if not moved or len(set(to.values())) < len(names) or set(moved.values()) & set(names):
            return state
        memory = state.memory
        for n, t in moved.items():
            memory = memory.renamed(n, t)
        provenance = None if state.provenance is None else {to[c]: p for c, p in state.provenance.items()}
        return dataclasses.replace(state, memory=memory, provenance=provenance, head=None)

    def taught_here(self, label: str) -> bool:
        """Whether ``label`` holds teaching of this robot's own (in its name, or of unknown origin: taught
        before it had one). Contribution ids travel in every update, so a peer could name all of ours."""
        return own_shots(self.learner_.provenance_.get(label, ()), self.learner_.robot_name) > 0

    def forget_covered(self, label: str, covering: frozenset, origin: str, defer: bool = False) -> Outcome:
        """Forget ``label`` for a peer that forgot it, only when it is known from peers alone and every
        contribution of ours is among ``covering`` (the peer's, as it forgot it): what the peer never
        knew is not lost, and a class this robot was taught is forgotten only by a request here.
        ``defer``: written with the next save (:meth:`merge_state`)."""
        with self._mutate:
            label = self._spelled_as_stored(label)
            mine = self.learner_.provenance_.get(label)
            if mine is None:
                return self._outcome(True, f"no class '{label}' to forget for {origin}")
            if self.taught_here(label):
                return self._outcome(False, f"kept '{label}' that {origin} forgot: this robot was taught it "
                                     "(forget it here to remove it)")
            if not ids(mine) <= covering:
                return self._outcome(False, f"kept '{label}' that {origin} forgot: it holds teaching {origin} "
                                     "never had")
            self.learner_.forget(label)  # checked and forgotten under one lock: no teach in between
            failed = self._held_for_peers() if defer and self.keeps_file else self._commit()
        self._changed()
        if failed:
            return self._outcome(False, f"kept '{label}' that {origin} forgot: {failed}")
        return self._outcome(True, f"forgot '{label}' as {origin} did{self.ram_only_note()}")

    def rename_covered(self, old: str, new: str, covering: frozenset, origin: str, defer: bool = False) -> Outcome:
        """Rename ``old`` to ``new`` for a peer that renamed it, only when ``old`` is known from peers
        alone and every contribution of ours to it is among ``covering`` (the renamed class's, at the
        peer): a class this robot was taught keeps the name it was taught under. ``defer``: written
        with the next save (:meth:`merge_state`)."""
        with self._mutate:
            old, new = self._spelled_as_stored(old), self._spelled_as_stored(new)
            mine = self.learner_.provenance_.get(old)
            if mine is not None and self.taught_here(old):
                return self._outcome(False, f"rename of '{old}' by {origin} not applied here: this robot was "
                                     "taught it under that name (rename it here to change it)")
            if mine is None or not ids(mine) <= covering or new in self.learner_.classes_:
                return self._outcome(False, f"rename of '{old}' by {origin} not applied here: the class is "
                                     "unknown, holds teaching the peer never had, or the new name is taken")
            try:
                check_new_label(new, [c for c in self.learner_.classes_ if c != old], "the new name",
                                "the class keeps its name here")
            except RequestError as exc:
                return self._outcome(False, f"rename of '{old}' by {origin} not applied here: {exc}")
            self.learner_.rename(old, new)
            # the new name stands in the class list, the provenance and the head: a few KiB at most
            failed = self._held_for_peers(4 * len(new.encode())) if defer and self.keeps_file else self._commit()
        self._changed()
        if failed:
            return self._outcome(False, f"rename of '{old}' by {origin} not applied here: {failed}")
        return self._outcome(True, f"renamed '{old}' to '{new}' as {origin} did{self.ram_only_note()}")

    def _exercise(self, learner: Any) -> None:
        """One classification with the loaded memory before it is served; ValueError when it fails."""
        if not learner.classes_:
            return
        probe = np.zeros((1, self.feature_dim), np.float32)
        preds, _ = learner.predict_versioned(probe, top_k=1)
        if len(preds) != 1 or not np.isfinite(preds[0].confidence):
            raise ValueError("a test classification with the loaded memory did not give a finite score")

    # ------------------------------------------------------------------ teaching
    def check_features(self, feats: Any, max_count: int | None = None) -> np.ndarray:
        """(n, d) float32 of this learner's width, within the count (``max_count``, else the request
        limit) and value limits; RequestError."""
        arr = np.asarray(feats, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] == 0:
            raise RequestError(f"need an (n, d) array of feature vectors with n >= 1, got shape {arr.shape}")
        check_count(arr.shape[0], self.limits.max_images_per_request if max_count is None else max_count,
                    "feature vectors")
        if arr.shape[1] != self.feature_dim:
            raise RequestError(f"feature dimension {arr.shape[1]} does not match the backbone's "
                               f"{self.feature_dim} ({self.backbone})")
        return check_feature_values(arr, self.limits.max_feature_abs)

    def _checked_views(self, views: Any, n: int) -> np.ndarray:
        """(n, k, d) float32 teach-time views of ``n`` taught vectors, within the value limits; RequestError."""
        views = np.asarray(views, np.float32)
        if views.ndim != 3 or views.shape[0] != n or views.shape[2] != self.feature_dim:
            raise RequestError(f"views must be ({n}, k, {self.feature_dim}), got {views.shape}")
        check_feature_values(views.reshape(-1, self.feature_dim), self.limits.max_feature_abs)
        return views

    def teach(self, label: str, feats: np.ndarray, source: str = "",
              views: np.ndarray | None = None, negatives: np.ndarray | None = None) -> TeachOutcome:
        """Learn ``label`` from (n, d) vectors: a new class, or more examples of a known one.

        ``source``: what the vectors are, in the answer after their count ("" = "feature vector(s)").
        ``views`` (n, k, d): vectors of teach-time views of each taught image (the learner keeps them
        as spread, not as shots; see :meth:`CBCLPRLearner.teach_increment`).  ``negatives`` (m, d):
        the other objects of the teaching frames; those the memory answered unknown before this teach
        go to the learner's bounded negatives store (vectors only) with the teach, and are saved with it."""
        try:
            label = check_label(label)
            feats = self.check_features(feats)
            views = None if views is None else self._checked_views(views, feats.shape[0])
        except RequestError as exc:
            return self.refused(str(exc))
        try:
            if negatives is not None:
                negatives = self.check_features(negatives, MAX_NEGATIVES)  # the node's own, not a request's
        except RequestError as exc:
            return self.refused(f"the teach's negatives (other objects seen): {exc}")
        t0 = time.perf_counter()
        self._set_training(+1)
        try:
            with self._mutate:
                lrn = self.learner_
                label = self._spelled_as_stored(label)
                extended = label in lrn.classes_
                if negatives is not None:  # a taught class among the other objects is no negative
                    negatives = negatives[[not p.known for p in lrn.predict(negatives, top_k=1)]]
                try:
                    if not extended:  # a new class: its name must not look like a known one
                        check_new_label(label, lrn.classes_)
                    self._peers_saved_first(raise_error=True)
                    res = lrn.teach(label, feats, views)
                except RequestError as exc:
                    return self.refused(f"nothing learned: {exc}")
                except (TypeError, ValueError) as exc:
                    return self.refused(f"could not learn '{label}': {exc}")
                if negatives is not None and len(negatives):
                    try:
                        lrn.add_negatives(negatives, away_from=feats)
                    except (TypeError, ValueError) as exc:  # checked above: not expected
                        log.warning("the teaching frames' other objects were not kept as negatives: %s", str(exc)[:120])
                elapsed = time.perf_counter() - t0
                failed = self._commit()
        finally:
            self._set_training(-1)
        if failed:
            return self.refused(f"nothing learned: '{label}' could not be saved, so it was not kept: {failed}")
        warn = self.ram_only_note()
        n_clusters = int(res.clusters.get(label, 0))
        verb = "extended known class" if extended else "learned new class"
        msg = (f"{verb} '{label}' from {feats.shape[0]} {source or noun(feats.shape[0], 'feature vector')} "
               f"({counted(n_clusters, 'cluster')}, {counted(len(lrn.classes_), 'class')} known, "
               f"{elapsed:.2f} s){warn}")
        log.info(msg)
        return TeachOutcome(True, msg, int(res.model_version), len(lrn.classes_),
                            extended_existing=extended, num_examples=int(feats.shape[0]),
                            num_clusters=n_clusters, learning_time_s=float(elapsed))

    def _spelled_as_stored(self, label: str) -> str:
        """``label`` (composed, as every request's name is) as the memory spells it: a memory written
        before names were composed may hold "café" with a combining accent, and a person who types the
        same word must still reach that class rather than start a second one."""
        classes = self.learner_.classes_
        if label in classes:
            return label
        same = [c for c in classes if unicodedata.normalize("NFC", c) == label]
        return same[0] if len(same) == 1 else label

    def forget(self, label: str) -> Outcome:
        try:
            label = check_label(label)
        except RequestError as exc:
            return self._outcome(False, f"nothing forgotten: {exc}")
        with self._mutate:
            label = self._spelled_as_stored(label)
            if label not in self.learner_.classes_:
                return self._outcome(False, f"no class '{label}' to forget ({_known(self.classes, label)})")
            blocked = self._peers_saved_first()
            if blocked:
                return self._outcome(False, f"nothing forgotten: {blocked}")
            self._set_training(+1)
            try:
                self.learner_.forget(label)
                failed = self._commit()
            finally:
                self._set_training(-1)
        self._changed()
        if failed:
            return self._outcome(False, f"nothing forgotten: the memory without '{label}' could not be "
                                 f"saved, so '{label}' is kept: {failed}")
        warn = self.ram_only_note()
        return self._outcome(True, f"forgot '{label}' ({counted(len(self.classes), 'class')} left){warn}")

    def rename(self, old: str, new: str) -> Outcome:
        try:
            old = check_label(old, "old label")
            new = check_label(new, "new label")
        except RequestError as exc:
            return self._outcome(False, f"cannot rename: {exc}")
        with self._mutate:
            classes = self.classes
            old, new = self._spelled_as_stored(old), self._spelled_as_stored(new)
            if old not in classes:
                return self._outcome(False, f"no class '{old}' to rename ({_known(classes, old)})")
            if new == old:
                return self._outcome(False, f"'{old}' already has that name: nothing to rename")
            if new in classes:
                return self._outcome(False, f"'{new}' is already a learned class; forget it first or pick "
                                     "another name")
            try:  # "mug" -> "Mug" is allowed: the class looks only like itself
                check_new_label(new, [c for c in classes if c != old], "new label",
                                "pick another name, or forget or rename that class first")
            except RequestError as exc:
                return self._outcome(False, f"cannot rename '{old}': {exc}")
            blocked = self._peers_saved_first()
            if blocked:
                return self._outcome(False, f"nothing renamed: {blocked}")
            self.learner_.rename(old, new)
            failed = self._commit()
        self._changed()
        if failed:
            return self._outcome(False, f"nothing renamed: the renamed memory could not be saved: {failed}")
        warn = self.ram_only_note()
        return self._outcome(True, f"renamed '{old}' to '{new}'{warn}")

    # ------------------------------------------------------------------ classification
    def seen_together(self, feats: np.ndarray, predictions: list) -> list:
        """``predictions`` of one view's objects where two that look unlike each other are not both
        one taught object (the core's ``seen_together``); as they are if the model changed meanwhile."""
        try:
            return self.learner_.seen_together(np.asarray(feats, np.float32), list(predictions))
        except ValueError:
            return list(predictions)

    def classify(self, feats: np.ndarray, top_k: int = 5) -> ClassifyOutcome:
        """Predictions for (n, d) vectors; never waits for a retrain in progress.

        The model version answered is the one of the snapshot that computed the predictions.
        """
        lrn = self.learner_  # one reference: a concurrent load swaps the object, not its inside
        if len(lrn.classes_) == 0:
            return ClassifyOutcome(False, NOTHING_LEARNED, [], int(lrn.model_version_))
        feats = np.asarray(feats, dtype=np.float32)
        if feats.ndim == 1:
            feats = feats[None, :]
        try:
            feats = self.check_features(feats)
        except RequestError as exc:
            return ClassifyOutcome(False, str(exc), [], int(lrn.model_version_))
        k = int(top_k) if top_k and top_k > 0 else 5
        preds, version = lrn.predict_versioned(feats, top_k=max(1, min(k, len(lrn.classes_))))
        p = preds[0]
        # an unknown answer names its nearest class as a guess; its confidence is below 0.5 (docs/core.md)
        what = (f"'{p.label}'" if p.known and p.label
                else f"unknown object, perhaps '{p.nearest_label}'" if p.nearest_label else "unknown object")
        return ClassifyOutcome(True, f"{what} ({p.confidence:.2f})", list(preds), int(version))
