"""Which depth frame goes with a colour frame: the same stamp, waited for a moment, else a recent one.

A camera publishes depth just after colour, on another topic: when a colour frame is processed its
depth may still be on the way. :class:`DepthPairing` keeps the last few depth frames by stamp; the
extractor asks for the colour frame's stamp and waits up to ``wait_s`` (wall clock on purpose: this
waits for the transport to deliver a message, which takes real time whatever ``/clock`` says) until
it arrives, and otherwise takes the newest depth frame when it is at most ``max_age_s`` older than
the colour frame. The items are whatever the caller stores (the extractor keeps the messages, so
only the paired one is decoded).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Generic, TypeVar

from cbcl_pr_ros.runtime.frame_buffer import FrameBuffer

__all__ = ["DepthPairing"]

T = TypeVar("T")


class DepthPairing(Generic[T]):
    """The last ``capacity`` depth frames by stamp (ns) and the newest one; thread-safe: one callback
    puts while the worker takes."""

    def __init__(self, capacity: int = 8, wait_s: float = 0.1, max_bytes: int | None = None,
                 size: Callable[[T], int] | None = None) -> None:
        """``max_bytes`` with ``size`` (an item's bytes): the older frames also fall out while those kept
        take more together (the newest stays): whoever publishes depth chooses its sizes."""
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be an int >= 1, got {capacity!r}")
        if not 0.0 <= float(wait_s) <= 5.0:
            raise ValueError(f"wait_s must be in [0, 5], got {wait_s!r}")
        self.capacity, self.wait_s = capacity, float(wait_s)
        self.max_bytes, self._size = max_bytes, size  # the frames' budget (:class:`FrameBuffer` checks it)
        self._arrived = threading.Condition()
        self.clear()

    def clear(self) -> None:
        """Forget every depth frame (the camera was let go)."""
        with self._arrived:
            self._items: FrameBuffer[T] = FrameBuffer(self.capacity, self.max_bytes, self._size)
            self._latest: tuple[int, T] | None = None

    @property
    def seen(self) -> bool:
        """Whether any depth frame has come since the last :meth:`clear` (the camera sends depth)."""
        return self._latest is not None

    def put(self, stamp_ns: int, item: T) -> None:
        """One depth frame of ``stamp_ns``; it becomes the newest, and the oldest kept may fall out."""
        with self._arrived:
            self._items.put(int(stamp_ns), item)
            self._latest = (int(stamp_ns), item)
            self._arrived.notify_all()

    def take(self, stamp_ns: int, max_age_s: float) -> T | None:
        """The depth frame of ``stamp_ns`` (removed; waited for up to ``wait_s`` while depth streams),
        else the newest one when it is 0 to ``max_age_s`` seconds older, else None."""
        key = int(stamp_ns)
        deadline = time.monotonic() + self.wait_s
        with self._arrived:
            while key not in self._items and self._latest is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._arrived.wait(left)
            item = self._items.pop(key)
            if item is not None or self._latest is None:
                return item
            latest_ns, latest = self._latest
        age = (key - latest_ns) / 1e9
        return latest if 0.0 <= age <= float(max_age_s) else None
