"""Turns at one backbone: the camera stream's frames first, batch work (teach images) between them.

A teach may send dozens of images (and jittered views of each) through the same backbone that
extracts the camera stream.  Run as one batch, the stream waited for all of it: under load the
predictions stopped for 26 s during image teaches.  :class:`BackboneTurns` is the lock both use:

* a stream frame takes it with ``with turns:`` and goes before any batch work that waits;
* :meth:`BackboneTurns.extract` runs batch work ``chunk`` images at a time, and after each chunk
  lets the stream take its next frame first: while frames come, frames and chunks alternate; when
  no frame came for ``idle_s``, chunks follow one another.

So a frame waits at most for one chunk, and a teach answers later the busier the camera is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["BackboneTurns"]


class BackboneTurns:
    """A lock over one backbone that gives camera frames priority over batch work (see the module)."""

    def __init__(self, chunk: int = 2, idle_s: float = 0.1) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive int, got {chunk!r}")
        if not idle_s >= 0:
            raise ValueError(f"idle_s must be >= 0, got {idle_s!r}")
        self.chunk, self.idle_s = chunk, float(idle_s)
        self._cond = threading.Condition()
        self._busy = False
        self._stream_waiting = 0
        self._stream_turns = 0  # frames that had their turn so far
        self._stream_last = -1e9  # monotonic time the last frame's turn ended

    # ------------------------------------------------------------------ the stream's turn
    def __enter__(self) -> "BackboneTurns":
        with self._cond:
            self._stream_waiting += 1
            try:
                while self._busy:
                    self._cond.wait()
            finally:
                self._stream_waiting -= 1
            self._busy = True
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._busy = False
            self._stream_turns += 1
            self._stream_last = time.monotonic()
            self._cond.notify_all()

    # ------------------------------------------------------------------ batch work
    def _batch_turn(self, after: int) -> int:
        """Wait until a chunk may run (no frame waits, and a frame had its turn since ``after`` or
        none came for ``idle_s``); take the backbone; return the frames' turn count."""
        with self._cond:
            while True:
                if not self._busy and not self._stream_waiting:
                    quiet = time.monotonic() - self._stream_last
                    if self._stream_turns != after or quiet >= self.idle_s:
                        self._busy = True
                        return self._stream_turns
                    self._cond.wait(self.idle_s - quiet)
                else:
                    self._cond.wait()

    def _release(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def extract(self, backbone: Any, images: Sequence[Any]) -> np.ndarray:
        """``backbone.extract(images)``, ``chunk`` images per turn, frames first (see the module)."""
        parts, seen = [], -1
        for lo in range(0, len(images), self.chunk):
            seen = self._batch_turn(seen)
            try:
                parts.append(np.asarray(backbone.extract(list(images[lo:lo + self.chunk])), np.float32))
            finally:
                self._release()
        if not parts:
            return np.zeros((0, int(getattr(backbone, "feature_dim", 0))), np.float32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
