"""A share of one core for work whose cost is known only once done: a token bucket of CPU seconds.

A rate limit counts events, but what an event costs may grow a hundredfold with the memory (a fleet
peer's class merged into 100 classes or into 1000). This bucket holds CPU seconds instead: it
refills at ``share`` CPU seconds per second of the caller's clock, up to ``burst_s``; work may start
while the balance is positive and its measured CPU time is then taken off, so the balance may go
below zero and the next work waits until it is paid back. On average the work uses at most
``share`` of one core, whatever each piece costs.

The clock is the caller's (the node's ROS clock); one that jumps backwards refills the bucket.
"""
from __future__ import annotations

import threading

__all__ = ["CpuShare"]


class CpuShare:
    """At most ``share`` of one core on average; ``burst_s`` CPU seconds may be spent at once.

    >>> budget = CpuShare(share=0.25, burst_s=1.0)
    >>> budget.ready(0.0); budget.spend(0.0, 1.5); budget.ready(1.0)
    True
    False
    >>> budget.ready(2.1)   # 0.5 s of debt paid back at 0.25 s per second, then some
    True
    """

    def __init__(self, share: float, burst_s: float) -> None:
        if not 0.0 < share <= 1.0 or not burst_s > 0.0:
            raise ValueError(f"share must be in (0, 1] and burst_s > 0, got {share!r}, {burst_s!r}")
        self.share = float(share)
        self.burst_s = float(burst_s)
        self._balance = float(burst_s)
        self._last: float | None = None
        self._lock = threading.Lock()

    def _refill(self, now_s: float) -> None:
        if self._last is None or now_s < self._last:
            self._balance = max(self._balance, self.burst_s)
        else:
            self._balance = min(self.burst_s, self._balance + (now_s - self._last) * self.share)
        self._last = now_s

    def ready(self, now_s: float) -> bool:
        """True when work may start at clock time ``now_s`` (the balance is positive)."""
        with self._lock:
            self._refill(now_s)
            return self._balance > 0.0

    def spend(self, now_s: float, cpu_s: float) -> None:
        """Take the measured CPU seconds of work done at ``now_s`` off the balance."""
        with self._lock:
            self._refill(now_s)
            self._balance -= max(0.0, float(cpu_s))
