"""Where a node's time goes, per stage of its frame path: wall and CPU time of each step.

The nodes time every step of the camera path (decode, backbone, publish, predict, ...) with
:class:`StageTimes`. When they stop they log one short line for the person who stopped them, and,
with the environment variable ``CBCL_STOP_STATS`` set, the whole summary as JSON
(:func:`stop_lines`); ``bench/bench_pipeline.py`` sets it, reads the JSON and writes the per-stage
breakdown (docs/nodes.md "Where the time goes").  Wall time of a step minus its
thread CPU time is the time the step waited: for the GIL, for a core, or for a lock.  A sample costs
two clock reads and an append under a lock (about a microsecond), so it is always on.

>>> times = StageTimes(window=4)
>>> with times.stage("decode"):
...     pass
>>> times.add("transport", 0.004)
>>> s = times.summary()
>>> sorted(s), s["transport"]["n"], s["transport"]["p50_ms"]
(['decode', 'transport'], 1, 4.0)
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Iterator

import numpy as np

__all__ = ["StageTimes", "STOP_STATS_ENV", "stop_lines"]

#: set (to anything but "" or "0") to have a stopping node log its counters and stage times as JSON
STOP_STATS_ENV = "CBCL_STOP_STATS"


def stop_lines(node: str, summary: str, stats: dict) -> str:
    """What a node logs as it stops: ``"<node> stopped: <summary>"``, and on a second line
    ``"<node> stopping: <stats as JSON>"`` only when :data:`STOP_STATS_ENV` asks for it (a wall of
    percentiles means nothing to whoever pressed Ctrl-C; the benches read it)."""
    text = f"{node} stopped: {summary}"
    if os.environ.get(STOP_STATS_ENV, "") not in ("", "0"):
        text += f"\n{node} stopping: {json.dumps(stats)}"
    return text


class StageTimes:
    """Per stage: the count, the total, and the last ``window`` samples of wall and thread CPU time."""

    def __init__(self, window: int = 4096) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window!r}")
        self._window = int(window)
        self._lock = threading.Lock()
        self._wall: dict[str, deque[float]] = {}
        self._cpu: dict[str, deque[float]] = {}
        self._count: dict[str, int] = {}
        self._total: dict[str, float] = {}

    def add(self, name: str, wall_s: float, cpu_s: float | None = None) -> None:
        """One sample of ``name``: ``wall_s`` seconds (``cpu_s`` of them on this thread's CPU)."""
        with self._lock:
            if name not in self._wall:
                self._wall[name] = deque(maxlen=self._window)
                self._cpu[name] = deque(maxlen=self._window)
                self._count[name], self._total[name] = 0, 0.0
            self._wall[name].append(float(wall_s))
            if cpu_s is not None:
                self._cpu[name].append(float(cpu_s))
            self._count[name] += 1
            self._total[name] += float(wall_s)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the body as one sample of ``name`` (wall clock and this thread's CPU clock)."""
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - w0, time.thread_time() - c0)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per stage: n, total_s, and over the recent window mean/p50/p95/max ms (wall) and cpu_ms (mean)."""
        with self._lock:
            items = [(k, np.asarray(self._wall[k]), np.asarray(self._cpu[k]), self._count[k], self._total[k])
                     for k in self._wall]
        out = {}
        for name, wall, cpu, n, total in items:
            ms = wall * 1000.0
            row = {"n": n, "total_s": round(total, 3), "mean_ms": round(float(ms.mean()), 3),
                   "p50_ms": round(float(np.percentile(ms, 50)), 3),
                   "p95_ms": round(float(np.percentile(ms, 95)), 3), "max_ms": round(float(ms.max()), 3)}
            if len(cpu):
                row["cpu_ms"] = round(float(cpu.mean() * 1000.0), 3)
            out[name] = row
        return out
