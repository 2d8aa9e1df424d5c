"""Whether an input that a frame needs is missing, or only not here yet.

Publishers start in any order and a subscription finds each publisher on its own: the first colour
frames of a stream often come before the first CameraInfo or the first camera pose. A warning on
such a frame tells a person to check a topic that is fine. An input counts as missing once
``frames`` frames in a row came without it and they span at least ``seconds`` (a fast camera sends
many frames while the other topics are still being found; a slow stream, few in many seconds).
After the input has come once, the start-up order is past: a frame without it is missing at once.
"""
from __future__ import annotations

import math
import time
from typing import Callable

__all__ = ["InputGrace"]


class InputGrace:
    """The start-up grace of one input; ``clock`` gives seconds (monotonic: frames' own stamps may be
    anything a stranger writes).

    >>> t = iter([0.0, 0.5, 1.0, 2.5, 2.6])
    >>> grace = InputGrace(frames=3, seconds=2.0, clock=lambda: next(t))
    >>> [grace.missing() for _ in range(4)]   # 3 frames, but within 1 s; then 2.5 s: missing
    [False, False, False, True]
    >>> grace.reset(); grace.arrived(); grace.missing()
    True
    """

    def __init__(self, frames: int = 5, seconds: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
            raise ValueError(f"frames must be an integer >= 1, got {frames!r}")
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
        self.frames, self.seconds, self.clock = frames, float(seconds), clock
        self._count, self._since, self._came = 0, 0.0, False

    def reset(self) -> None:
        """A new start (the node was activated again): the input is awaited afresh."""
        self._count, self._since, self._came = 0, 0.0, False

    def arrived(self) -> None:
        """The input came (for a frame): the start-up order is past."""
        self._came = True

    def missing(self) -> bool:
        """One more frame without the input: True when it is missing, False while it may still be on its way."""
        if self._came:
            return True
        now = float(self.clock())
        if self._count == 0:
            self._since = now
        self._count += 1
        return self._count >= self.frames and now - self._since >= self.seconds
