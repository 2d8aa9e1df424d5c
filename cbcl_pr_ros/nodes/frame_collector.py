"""Gathers the next N feature vectors of the stream for a TeachClass that sends no images."""
from __future__ import annotations

import threading
from typing import Any

__all__ = ["FrameCollector"]


class FrameCollector:
    """Thread-safe: the stream callback ``offer``s vectors, the service callback ``wait``s for N."""

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number of frames must be a positive int, got {n!r}")
        self.n = n
        self.frames: list[Any] = []
        self._lock = threading.Lock()
        self._done = threading.Event()

    def offer(self, item: Any) -> None:
        with self._lock:
            if len(self.frames) < self.n:
                self.frames.append(item)
                if len(self.frames) == self.n:
                    self._done.set()

    def wait(self, timeout_s: float) -> bool:
        """True when N frames arrived in time; the frames gathered so far stay in ``frames``."""
        ok = self._done.wait(timeout_s)
        with self._lock:
            self.frames = list(self.frames)
        return ok
