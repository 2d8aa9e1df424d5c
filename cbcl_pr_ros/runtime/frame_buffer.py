"""The last few items of a stream keyed by stamp, bounded in count and, optionally, in bytes.

Frames waiting for their answer (the learner's debug image, the teaching page), vectors of recent
frames (the extractor's cache) and depth frames waiting for their colour frame are all kept this
way: whoever publishes them chooses their sizes, so what is held stays within a count and a byte
budget, the oldest falling out first. Pure Python, thread-safe.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

__all__ = ["FrameBuffer"]

T = TypeVar("T")


class FrameBuffer(Generic[T]):
    """The last ``capacity`` items keyed by stamp, thread-safe; old ones fall out first. With
    ``max_bytes`` and ``size`` (an item's bytes), old ones also fall out while the items held take more
    than ``max_bytes`` together (the newest stays): camera frames come from whoever publishes them, in
    any size, and 64 frames of 64 MiB would be 4 GiB."""

    def __init__(self, capacity: int = 8, max_bytes: int | None = None,
                 size: Callable[[T], int] | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if (max_bytes is None) != (size is None):
            raise ValueError("max_bytes and size go together")
        self.capacity, self.max_bytes, self._size = capacity, max_bytes, size
        self._items: OrderedDict[Hashable, tuple[T, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, key: Hashable, item: T) -> None:
        n = int(self._size(item)) if self._size is not None else 0
        with self._lock:
            old = self._items.pop(key, None)
            self._bytes -= old[1] if old is not None else 0
            self._items[key] = (item, n)
            self._bytes += n
            while len(self._items) > self.capacity or (
                    self.max_bytes is not None and self._bytes > self.max_bytes and len(self._items) > 1):
                self._bytes -= self._items.popitem(last=False)[1][1]

    @property
    def bytes_held(self) -> int:
        with self._lock:
            return self._bytes

    def pop(self, key: Hashable) -> T | None:
        """The item stored under ``key`` (removed), or None when it is not (or no longer) held."""
        with self._lock:
            got = self._items.pop(key, None)
            if got is None:
                return None
            self._bytes -= got[1]
            return got[0]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
