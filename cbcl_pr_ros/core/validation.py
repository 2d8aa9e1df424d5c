"""Input checks shared by the public entry points of the core layer.

Every public function that takes feature vectors calls :func:`check_features` first, so that a bad
batch is refused before any state is touched (bad input changes nothing).
"""

from __future__ import annotations

import unicodedata

import numpy as np

__all__ = ["MAX_LABEL_CHARS", "UnknownClassError", "check_features", "check_label", "quote"]

MAX_LABEL_CHARS = 128  # a class name, not a document; also bounds every message that echoes it


class UnknownClassError(ValueError):
    """A label named in forget/rename/... is not a known class."""


def check_features(features: object, feature_dim: int | None, *, name: str = "features") -> np.ndarray:
    """Return ``features`` as a C-contiguous float64 ``(n, d)`` array, or raise.

    Raises
    ------
    TypeError
        If ``features`` is not array-like of real numbers.
    ValueError
        If it is empty, not 2-D, has the wrong width, or holds NaN/inf.
    """
    try:
        arr = np.asarray(features)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"{name} must be a 2-D array of numbers, got {type(features).__name__}: {exc}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim == 1 and feature_dim is not None and arr.shape[0] == feature_dim:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, d), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); at least one vector is needed")
    if feature_dim is not None and arr.shape[1] != feature_dim:
        raise ValueError(f"{name} has {arr.shape[1]} features per vector, expected {feature_dim}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.isfinite(arr).all(axis=1)))
        raise ValueError(f"{name} contains NaN or inf in {bad} of {arr.shape[0]} vectors")
    return arr


def check_label(label: object, *, name: str = "label") -> str:
    """The one rule for a class name (docs/core.md "Class names"): a string of 1 to
    :data:`MAX_LABEL_CHARS` printable characters, without surrounding whitespace.

    Control characters are refused: a NUL would cut the name in C code, a newline forge a log line.
    The core takes names as they are; the request boundary (``request_checks.check_label``)
    strips surrounding whitespace from what a person typed and then applies this same rule.
    Messages quote at most a short prefix of the name.
    """
    if not isinstance(label, str):
        raise TypeError(f"{name} must be a string, got {type(label).__name__}")
    if not label.strip():
        raise ValueError(f"empty {name}: give the class a name")
    if label.strip() != label:
        raise ValueError(f"{name} {quote(label)} has leading or trailing whitespace")
    if len(label) > MAX_LABEL_CHARS:
        raise ValueError(f"{name} has {len(label)} characters; the most is {MAX_LABEL_CHARS}")
    for i, ch in enumerate(label):
        if not ch.isprintable():
            raise ValueError(f"{name} contains an unprintable character U+{ord(ch):04X} "
                             f"({unicodedata.category(ch)}) at position {i}; use printable characters only")
    return label


def quote(text: object, limit: int = 40) -> str:
    """``text`` safe to put in a message or log line: repr-escaped, cut to ``limit`` characters (a
    sender chooses a name's length and characters, and a refusal ends up in a log or an answer)."""
    text = str(text)
    cut = text[:limit]
    return repr(cut) + (f"... ({len(text)} characters)" if len(text) > limit else "")
