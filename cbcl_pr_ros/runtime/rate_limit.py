"""A prediction-rate limit that keeps a camera's rate: a token bucket on the caller's clock.

The old rule ("drop a vector less than 1/rate after the last one") turned a 30 Hz camera into ~18 Hz
of predictions at ``rate = 30``: every frame that arrives a little early (jitter) is dropped, and
the next one is then a whole period late. A token bucket refills at ``rate`` tokens per second and
holds up to ``burst`` tokens, so early and late frames average out and a stream at or below
``rate`` passes whole, while a faster one is cut to ``rate`` on average.

The clock is the caller's (the node passes its ROS clock, so ``use_sim_time`` with a bag's /clock
is honoured); a clock that jumps backwards (a replayed bag restarting) refills the bucket.
"""
from __future__ import annotations

import threading

__all__ = ["RateLimiter"]


class RateLimiter:
    """At most ``rate_hz`` events per second on average; bursts of up to ``burst`` pass.

    >>> lim = RateLimiter(burst=2.0)
    >>> [lim.allow(t, rate_hz=10.0) for t in (0.0, 0.09, 0.18, 0.21, 0.22)]
    [True, True, True, True, False]
    >>> lim.allow(5.0, rate_hz=0.0)    # rate 0: no limit
    True
    """

    def __init__(self, burst: float = 2.0) -> None:
        if not burst >= 1.0:
            raise ValueError(f"burst must be >= 1 (one event always fits), got {burst!r}")
        self.burst = float(burst)
        self._tokens = float(burst)
        self._last: float | None = None
        self._lock = threading.Lock()

    def allow(self, now_s: float, rate_hz: float) -> bool:
        """True (and one token spent) when an event at clock time ``now_s`` is within the rate."""
        with self._lock:
            if self._last is None or now_s < self._last:
                self._tokens = self.burst
            elif rate_hz > 0:
                self._tokens = min(self.burst, self._tokens + (now_s - self._last) * rate_hz)
            self._last = now_s
            if rate_hz <= 0:
                return True
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False
