"""Incremental-learning protocols: which classes and which training vectors arrive at each step.

A protocol is a pure function of the labels and a seed, so that every method sees exactly the same
steps, and a run can be repeated. Test vectors are never part of a step; evaluation after a step uses
the test vectors of all classes seen so far.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Step", "Schedule", "class_order", "class_incremental", "few_shot_incremental", "base_sessions",
           "read_session_files"]


@dataclass(frozen=True)
class Step:
    """One increment: the new classes and, per class, indices into the train set."""

    new_classes: tuple[int, ...]
    train_indices: dict[int, np.ndarray]


@dataclass(frozen=True)
class Schedule:
    """An ordered list of steps and how it was made."""

    name: str
    order: tuple[int, ...]
    steps: tuple[Step, ...]
    info: dict = field(default_factory=dict)

    def seen_after(self, t: int) -> tuple[int, ...]:
        """Classes seen after step ``t`` (0-based), in arrival order."""
        out: list[int] = []
        for s in self.steps[: t + 1]:
            out += list(s.new_classes)
        return tuple(out)


def _check_labels(labels: np.ndarray) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be a 1-D integer array, got {y.dtype} {y.shape}")
    return y.astype(np.int64)


def class_order(classes: np.ndarray | list[int], seed: int) -> tuple[int, ...]:
    """Random class order for one seed (the paper shuffles the classes per run)."""
    cls = np.array(sorted(set(int(c) for c in classes)), dtype=np.int64)
    return tuple(int(c) for c in np.random.default_rng(seed).permutation(cls))


def _chunks(order: tuple[int, ...], k: int) -> list[tuple[int, ...]]:
    if k < 1:
        raise ValueError(f"classes per increment must be >= 1, got {k}")
    if k > len(order):
        raise ValueError(f"{k} classes per increment but only {len(order)} classes")
    return [order[i:i + k] for i in range(0, len(order), k)]


def class_incremental(labels: np.ndarray, classes_per_step: int, seed: int,
                      max_per_class: int | None = None) -> Schedule:
    """All training data of ``classes_per_step`` new classes per step (the last step may have fewer)."""
    y = _check_labels(labels)
    order = class_order(np.unique(y), seed)
    rng = np.random.default_rng(seed + 7919)
    steps = []
    for chunk in _chunks(order, classes_per_step):
        idx = {}
        for c in chunk:
            members = np.flatnonzero(y == c)
            members = rng.permutation(members)  # data order matters for Agg-Var; shuffle per seed
            idx[c] = members if max_per_class is None else members[:max_per_class]
        steps.append(Step(chunk, idx))
    return Schedule(f"class-incremental-{classes_per_step}", order, tuple(steps),
                    {"classes_per_step": classes_per_step, "seed": seed, "shots": "all"})


def few_shot_incremental(labels: np.ndarray, classes_per_step: int, shots: int, seed: int) -> Schedule:
    """Every step (the first included) brings ``classes_per_step`` classes with ``shots`` examples each:
    the paper's FSIL protocol, with no base session."""
    y = _check_labels(labels)
    if shots < 1:
        raise ValueError(f"shots must be >= 1, got {shots}")
    order = class_order(np.unique(y), seed)
    rng = np.random.default_rng(seed + 104729)
    steps = []
    for chunk in _chunks(order, classes_per_step):
        idx = {}
        for c in chunk:
            members = np.flatnonzero(y == c)
            if len(members) < shots:
                raise ValueError(f"class {c} has {len(members)} training examples, fewer than {shots} shots")
            idx[c] = rng.choice(members, size=shots, replace=False)
        steps.append(Step(chunk, idx))
    return Schedule(f"fsil-{classes_per_step}way-{shots}shot", order, tuple(steps),
                    {"classes_per_step": classes_per_step, "shots": shots, "seed": seed})


def read_session_files(paths: list[str | Path], train_refs: list[str], labels: np.ndarray) -> list[dict[int, np.ndarray]]:
    """Read TOPIC/CEC-style ``session_<i>.txt`` files (one train image per line: an index into the train
    set, or a path matched against the end of the data set's train image paths)."""
    y = _check_labels(labels)
    by_suffix: dict[str, int] = {}
    for i, ref in enumerate(train_refs):
        parts = Path(ref).parts
        for k in range(1, min(4, len(parts)) + 1):
            by_suffix.setdefault("/".join(parts[-k:]), i)
    sessions = []
    for p in paths:
        rows: dict[int, list[int]] = {}
        seen: set[int] = set()
        for ln, line in _session_lines(Path(p)):
            if line.isdigit():
                i = int(line)
                if i >= len(y):
                    raise ValueError(f"{p}:{ln}: index {i} out of range (train set has {len(y)} images)")
            else:
                parts = Path(line).parts
                i = next((by_suffix[s] for k in range(min(4, len(parts)), 0, -1)
                          if (s := "/".join(parts[-k:])) in by_suffix), None)
                if i is None:
                    raise ValueError(f"{p}:{ln}: {line!r} matches no train image")
            if i in seen:  # so a session holds at most the train set, whatever the file's length
                raise ValueError(f"{p}:{ln}: train image {i} is listed twice in one session")
            seen.add(i)
            rows.setdefault(int(y[i]), []).append(i)
        if not rows:
            raise ValueError(f"session file {p} lists no images")
        sessions.append({c: np.array(v, dtype=np.int64) for c, v in rows.items()})
    return sessions


MAX_SESSION_LINE = 4096  # characters: an image path, with room to spare


def _session_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, stripped text) of a session file's non-empty lines, read a line at a time: a
    file of a billion lines, or one line of gigabytes, is not read whole before its first error."""
    with open(path, encoding="utf-8") as fh:
        for ln, raw in enumerate(iter(lambda: fh.readline(MAX_SESSION_LINE + 1), ""), 1):
            if len(raw) > MAX_SESSION_LINE:
                raise ValueError(f"{path}:{ln}: line longer than {MAX_SESSION_LINE} characters")
            if raw.strip():
                yield ln, raw.strip()


def _session_number(p: Path) -> int:
    m = re.search(r"(\d+)", p.stem)
    return int(m.group(1)) if m else 0


def base_sessions(labels: np.ndarray, base_classes: int, ways: int, shots: int, seed: int,
                  session_dir: str | Path | None = None, train_refs: list[str] | None = None,
                  max_base_per_class: int | None = None) -> Schedule:
    """TOPIC/CEC setting: a base session with all data of ``base_classes`` classes, then sessions of
    ``ways`` new classes with ``shots`` examples each. With ``session_dir`` the standard
    ``session_<i>.txt`` files decide everything (session 1 is the base session) and the seed is unused."""
    y = _check_labels(labels)
    if session_dir is not None:
        files = sorted(Path(session_dir).glob("session_*.txt"), key=_session_number)
        if not files:
            raise FileNotFoundError(f"no session_*.txt files in {session_dir}")
        if train_refs is None:
            raise ValueError("train_refs are needed to read session files")
        sess = read_session_files(files, train_refs, y)
        steps, seen = [], set()
        for s in sess:
            new = tuple(c for c in s if c not in seen)
            seen.update(new)
            steps.append(Step(new, s))
        order = tuple(c for st in steps for c in st.new_classes)
        return Schedule("base+sessions(files)", order, tuple(steps),
                        {"session_dir": str(session_dir), "sessions": len(steps)})
    order = class_order(np.unique(y), seed)
    if not 0 < base_classes < len(order):
        raise ValueError(f"base_classes must be in 1..{len(order) - 1}, got {base_classes}")
    rng = np.random.default_rng(seed + 15485863)
    base = {}
    for c in order[:base_classes]:
        m = rng.permutation(np.flatnonzero(y == c))
        base[c] = m if max_base_per_class is None else m[:max_base_per_class]
    steps = [Step(tuple(order[:base_classes]), base)]
    for chunk in _chunks(order[base_classes:], ways):
        idx = {}
        for c in chunk:
            members = np.flatnonzero(y == c)
            if len(members) < shots:
                raise ValueError(f"class {c} has {len(members)} training examples, fewer than {shots} shots")
            idx[c] = rng.choice(members, size=shots, replace=False)
        steps.append(Step(chunk, idx))
    return Schedule(f"base{base_classes}+{ways}way-{shots}shot", order, tuple(steps),
                    {"base_classes": base_classes, "ways": ways, "shots": shots, "seed": seed})
