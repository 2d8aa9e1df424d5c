"""Gathers the next N frames of a stream (feature vectors or object frames) for a TeachClass that sends no images."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["FrameCollector", "StreamWaiters", "SLOWEST_CLOCK"]

#: a wait on the node's clock ends after at most this many times its timeout of wall time: a bag
#: replayed at a tenth of its speed still gets its frames, while a /clock that crawls (anyone on the
#: domain may publish one) cannot hold a TeachClass, and the service thread it runs on, forever
SLOWEST_CLOCK = 10.0


class FrameCollector:
    """Thread-safe: the stream callback ``offer``s vectors, the service callback ``wait``s for N."""

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number of frames must be a positive int, got {n!r}")
        self.n = n
        self.frames: list[Any] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.cancelled = False

    def cancel(self) -> None:
        """End the wait now (the node is leaving the active state); ``cancelled`` says so."""
        self.cancelled = True
        self._done.set()

    def offer(self, item: Any) -> None:
        with self._lock:
            if len(self.frames) < self.n:
                self.frames.append(item)
                if len(self.frames) == self.n:
                    self._done.set()

    def wait(self, timeout_s: float, now: Callable[[], float] | None = None) -> bool:
        """True when N frames arrived in time; the frames gathered so far stay in ``frames``.

        ``now`` is the node's clock in seconds (``use_sim_time``: a bag's /clock), so a replay at
        half speed gives the stream twice the wall time. If that clock stands still (sim time with
        no /clock publisher), the wait ends after ``timeout_s`` of wall time instead of never; if it
        crawls, after :data:`SLOWEST_CLOCK` times ``timeout_s`` of wall time.
        """
        if now is None:
            ok = self._done.wait(timeout_s)
        else:
            start, last, wall_last = now(), None, time.monotonic()
            wall_end = wall_last + SLOWEST_CLOCK * timeout_s
            ok = False
            while not ok:
                t, wall = now(), time.monotonic()
                if t != last:
                    last, wall_last = t, wall
                if t - start >= timeout_s or wall - wall_last >= timeout_s or wall >= wall_end:
                    break
                ok = self._done.wait(min(0.05, timeout_s))
            ok = ok or self._done.is_set()
        with self._lock:
            self.frames = list(self.frames)
        return ok


class StreamWaiters:
    """The teaches waiting for frames, per stream ('features', 'objects'); thread-safe.

    The stream callbacks ``offer`` every frame; a waiting TeachClass ``collect``s the next N; a
    lifecycle transition ``cancel_all``s them so that no teach waits across it.
    """

    def __init__(self, *streams: str) -> None:
        self._pools: dict[str, set[FrameCollector]] = {s: set() for s in streams}
        self._lock = threading.Lock()

    def offer(self, stream: str, item: Any) -> None:
        with self._lock:
            waiting = list(self._pools[stream])
        for c in waiting:
            c.offer(item)

    def cancel_all(self) -> None:
        with self._lock:
            waiting = [c for pool in self._pools.values() for c in pool]
        for c in waiting:
            c.cancel()

    def collect(self, stream: str, n: int, timeout_s: float, active: Callable[[], bool],
                now: Callable[[], float] | None = None) -> list[Any]:
        """The next ``n`` items offered on ``stream`` (fewer on time-out); ValueError when the node
        leaves the active state meanwhile (``active()`` false when the wait starts, or a cancel)."""
        collector = FrameCollector(n)
        with self._lock:
            self._pools[stream].add(collector)
        try:
            if active():  # a transition that began before the collector was added
                collector.wait(timeout_s, now=now)
            else:
                collector.cancel()
        finally:
            with self._lock:
                self._pools[stream].discard(collector)
        if collector.cancelled:
            raise ValueError("the node left the active state while the teach waited for camera frames")
        return collector.frames
