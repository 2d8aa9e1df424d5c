"""The learner node's behaviour without ROS: teach, classify, forget, rename, save, load.

The node's service callbacks convert messages and call this class; every bad-input case of a
teaching session (empty label, nothing learned yet, unwritable memory file, foreign backbone, ...)
is decided here and unit-tested without a ROS graph.

Threading: mutations (teach/forget/rename/load) are serialised by one lock; ``classify`` takes no
lock, since the core learner swaps an immutable classifier snapshot when a retrain finishes, so a
prediction never waits for a retrain. ``load`` replaces the learner object as one reference swap.

Persistence: the memory is saved after every change (the core's ``save`` writes a temporary file and
renames it, so a crash mid-save leaves the previous file intact). A failed save is reported in the
outcome's message and in ``last_save_ok``; the memory stays in RAM and the next change retries.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = [
    "Outcome",
    "TeachOutcome",
    "ClassifyOutcome",
    "StatusSnapshot",
    "LearnerController",
    "NOTHING_LEARNED",
]

log = logging.getLogger(__name__)

NOTHING_LEARNED = "nothing learned yet: teach a class first (TeachClass)"


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


class LearnerController:
    """Owns one CBCL-PR learner, its memory file and the answers to every session request.

    Parameters
    ----------
    make_learner : callable(feature_dim) -> CBCLPRLearner
        Builds an empty learner; called lazily at the first teach, when the feature dimension is
        known from the vectors themselves (so the learner node needs no backbone of its own).
    backbone : str
        Backbone name the memory is built with; vectors and memory files of another are refused.
    memory_path : str
        File the memory is saved to after every change and loaded from at start-up ("" = none).
    on_change : callable() or None
        Called after every change of state (status publication).
    """

    def __init__(self, make_learner: Callable[[int], Any], backbone: str, memory_path: str = "",
                 cluster_budget: int = 0, on_change: Callable[[], None] | None = None) -> None:
        if not callable(make_learner):
            raise TypeError(f"make_learner must be callable, got {type(make_learner).__name__}")
        if not backbone:
            raise ValueError("backbone must be a non-empty name")
        self.make_learner = make_learner
        self.backbone = backbone
        self.memory_path = str(memory_path)
        self.cluster_budget = int(cluster_budget)
        self.on_change = on_change
        self.learner_: Any = None
        self.last_save_ok_ = True
        self.last_save_error_ = ""
        self._mutate = threading.Lock()
        self._training = 0
        self._training_lock = threading.Lock()

    # ------------------------------------------------------------------ state
    @property
    def training(self) -> bool:
        return self._training > 0

    @property
    def classes(self) -> list[str]:
        lrn = self.learner_
        return list(lrn.classes_) if lrn is not None else []

    @property
    def model_version(self) -> int:
        lrn = self.learner_
        return int(lrn.model_version_) if lrn is not None else 0

    @property
    def feature_dim(self) -> int:
        lrn = self.learner_
        return int(getattr(lrn, "feature_dim", 0) or 0) if lrn is not None else 0

    def status(self) -> StatusSnapshot:
        lrn = self.learner_
        infos = list(lrn.class_info()) if lrn is not None else []
        return StatusSnapshot(
            class_names=self.classes,
            num_clusters=sum(int(_info_get(i, "clusters")) for i in infos),
            cluster_budget=self.cluster_budget,
            memory_bytes=int(lrn.memory_bytes()) if lrn is not None else 0,
            backbone=self.backbone,
            feature_dimension=self.feature_dim,
            model_version=self.model_version,
            training=self.training,
            memory_path=self.memory_path,
            last_save_ok=self.last_save_ok_,
        )

    def class_info(self) -> list:
        lrn = self.learner_
        return list(lrn.class_info()) if lrn is not None else []

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
    def _save_to(self, path: str) -> tuple[bool, str, int]:
        """Save the current memory to ``path``; (ok, message, bytes). Never raises."""
        lrn = self.learner_
        if lrn is None:
            return False, NOTHING_LEARNED + " (nothing to save)", 0
        if not path:
            return False, "no memory_path configured and none given", 0
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            lrn.save(path)
            size = os.path.getsize(path)
        except Exception as exc:  # OSError, PermissionError, NotADirectoryError, ...
            return False, f"could not write memory file '{path}': {exc}", 0
        return True, f"saved {len(lrn.classes_)} classes to '{path}'", size

    def _autosave(self) -> str:
        """Save after a change to the configured path; returns "" or a warning to append."""
        if not self.memory_path:
            return ""
        ok, msg, _ = self._save_to(self.memory_path)
        self.last_save_ok_ = ok
        self.last_save_error_ = "" if ok else msg
        if not ok:
            log.error("%s; the memory is kept in RAM and saving is retried at the next change", msg)
            return f"; WARNING: {msg} (memory kept in RAM, not on disk)"
        return ""

    def load_at_startup(self) -> str:
        """Load ``memory_path`` if it exists; a corrupt or foreign file is moved aside, never lost."""
        if not self.memory_path or not os.path.exists(self.memory_path):
            return f"no memory file at '{self.memory_path}', starting empty" if self.memory_path \
                else "no memory_path configured, the memory lives in RAM only"
        out = self.load("")
        if out.success:
            return out.message
        aside = f"{self.memory_path}.unreadable-{int(time.time())}"
        try:
            os.replace(self.memory_path, aside)
            return f"{out.message}; the file was moved to '{aside}' and the learner starts empty"
        except OSError as exc:
            return f"{out.message}; starting empty (could not move the file aside: {exc})"

    def save(self, path: str = "") -> tuple[bool, str, str, int]:
        """SaveMemory: (success, message, path, bytes_written)."""
        target = path or self.memory_path
        with self._mutate:
            ok, msg, size = self._save_to(target)
            if target == self.memory_path:
                self.last_save_ok_ = ok
        self._changed()
        return ok, msg, target, size

    def load(self, path: str = "") -> Outcome:
        """LoadMemory: replace the memory with a file's; a bad file leaves the current one in use."""
        from cbcl_pr_ros.core import CBCLPRLearner

        source = path or self.memory_path
        if not source:
            return Outcome(False, "no path given and no memory_path configured",
                           self.model_version, len(self.classes))
        if not os.path.exists(source):
            return Outcome(False, f"no memory file at '{source}'", self.model_version, len(self.classes))
        with self._mutate:
            try:
                new = CBCLPRLearner.load(source, expected_backbone=self.backbone)
            except Exception as exc:
                return Outcome(False, f"refused memory file '{source}': {exc}; the current memory "
                               "stays in use", self.model_version, len(self.classes))
            self.learner_ = new
            warn = self._autosave() if path and path != self.memory_path else ""
        self._changed()
        n = len(new.classes_)
        return Outcome(True, f"loaded {n} classes from '{source}'{warn}", self.model_version, n)

    # ------------------------------------------------------------------ teaching
    def check_label(self, label: str) -> str:
        """Normalised label; ValueError with a readable reason for an unusable one."""
        if not isinstance(label, str):
            raise TypeError(f"label must be a string, got {type(label).__name__}")
        clean = label.strip()
        if not clean:
            raise ValueError("empty label: give the class a name")
        return clean

    def teach(self, label: str, feats: np.ndarray, source: str = "feature vectors") -> TeachOutcome:
        """Learn ``label`` from (n, d) vectors: a new class, or more examples of a known one."""
        try:
            label = self.check_label(label)
            feats = np.asarray(feats, dtype=np.float32)
            if feats.ndim != 2 or feats.shape[0] == 0 or feats.shape[1] == 0:
                raise ValueError(f"need an (n, d) array of feature vectors with n >= 1, got shape "
                                 f"{feats.shape}")
            if not np.all(np.isfinite(feats)):
                raise ValueError("feature vectors contain NaN or infinite values")
            if self.feature_dim and feats.shape[1] != self.feature_dim:
                raise ValueError(f"feature dimension {feats.shape[1]} does not match the memory's "
                                 f"{self.feature_dim}")
        except (TypeError, ValueError) as exc:
            return TeachOutcome(False, str(exc), self.model_version, len(self.classes))
        t0 = time.perf_counter()
        self._set_training(+1)
        try:
            with self._mutate:
                if self.learner_ is None:
                    self.learner_ = self.make_learner(int(feats.shape[1]))
                lrn = self.learner_
                extended = label in lrn.classes_
                try:
                    res = lrn.teach(label, feats)
                except (TypeError, ValueError) as exc:
                    return TeachOutcome(False, f"could not learn '{label}': {exc}",
                                        self.model_version, len(lrn.classes_))
                elapsed = time.perf_counter() - t0
                warn = self._autosave()
        finally:
            self._set_training(-1)
        n_clusters = int(res.clusters.get(label, 0)) if hasattr(res, "clusters") else self._clusters_of(label)
        verb = "extended known class" if extended else "learned new class"
        msg = (f"{verb} '{label}' from {feats.shape[0]} {source} ({n_clusters} clusters, "
               f"{len(lrn.classes_)} classes known, {elapsed:.2f} s){warn}")
        log.info(msg)
        return TeachOutcome(True, msg, self.model_version, len(lrn.classes_),
                            extended_existing=extended, num_examples=int(feats.shape[0]),
                            num_clusters=n_clusters, learning_time_s=float(elapsed))

    def _clusters_of(self, label: str) -> int:
        for info in self.class_info():
            if _info_get(info, "name") == label:
                return int(_info_get(info, "clusters"))
        return 0

    def forget(self, label: str) -> Outcome:
        label = (label or "").strip()
        with self._mutate:
            if self.learner_ is None or label not in self.learner_.classes_:
                known = ", ".join(self.classes) or "none"
                return Outcome(False, f"no class '{label}' to forget (known: {known})",
                               self.model_version, len(self.classes))
            self._set_training(+1)
            try:
                self.learner_.forget(label)
            finally:
                self._set_training(-1)
            warn = self._autosave()
        self._changed()
        return Outcome(True, f"forgot '{label}' ({len(self.classes)} classes left){warn}",
                       self.model_version, len(self.classes))

    def rename(self, old: str, new: str) -> Outcome:
        old = (old or "").strip()
        try:
            new = self.check_label(new)
        except (TypeError, ValueError) as exc:
            return Outcome(False, f"cannot rename to that: {exc}", self.model_version, len(self.classes))
        with self._mutate:
            classes = self.classes
            if old not in classes:
                return Outcome(False, f"no class '{old}' to rename (known: {', '.join(classes) or 'none'})",
                               self.model_version, len(classes))
            if new in classes:
                return Outcome(False, f"'{new}' is already a learned class; forget it first or pick "
                               "another name", self.model_version, len(classes))
            self.learner_.rename(old, new)
            warn = self._autosave()
        self._changed()
        return Outcome(True, f"renamed '{old}' to '{new}'{warn}", self.model_version, len(self.classes))

    # ------------------------------------------------------------------ classification
    def classify(self, feats: np.ndarray, top_k: int = 5) -> ClassifyOutcome:
        """Predictions for (n, d) vectors; never waits for a retrain in progress."""
        lrn = self.learner_  # one reference: a concurrent load swaps the object, not its inside
        if lrn is None or len(lrn.classes_) == 0:
            return ClassifyOutcome(False, NOTHING_LEARNED, [], self.model_version)
        feats = np.asarray(feats, dtype=np.float32)
        if feats.ndim == 1:
            feats = feats[None, :]
        dim = int(getattr(lrn, "feature_dim", 0) or 0)
        if feats.ndim != 2 or (dim and feats.shape[1] != dim):
            return ClassifyOutcome(False, f"feature shape {feats.shape} does not fit the memory's "
                                   f"dimension {dim}", [], int(lrn.model_version_))
        if not np.all(np.isfinite(feats)):
            return ClassifyOutcome(False, "feature vector contains NaN or infinite values", [],
                                   int(lrn.model_version_))
        version = int(lrn.model_version_)
        k = int(top_k) if top_k and top_k > 0 else 5
        preds = lrn.predict(feats, top_k=k)
        p = preds[0]
        what = f"'{p.label}'" if p.known and p.label else "unknown object"
        return ClassifyOutcome(True, f"{what} ({p.confidence:.2f})", list(preds), version)
