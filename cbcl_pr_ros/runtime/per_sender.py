"""Entries remembered per sender, so that one sender's traffic pushes out only its own.

A table with one bound for everyone lets its busiest writer evict every other writer's entries: a
fleet peer sending many forgets made a learner drop what the other robots had forgotten. Here each
sender has its own quota (its oldest entry dropped first), at most ``senders`` senders are kept
besides the ``kept`` ones (the one least recently written dropped whole), and a kept sender (this
robot) is never dropped for another. Memory is at most ``(senders + len(kept)) * quota`` entries;
one write costs O(1) and drops at most one sender's entries. Not locked: the caller holds its own.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator
from typing import Any

__all__ = ["PerSender"]


class PerSender:
    """``(sender, key) -> value`` with a quota per sender and a bound on the senders kept.

    >>> t = PerSender(quota=2, senders=1, kept={"me"})
    >>> for k in "abc":
    ...     t.put("peer", k)
    >>> sorted(k for _, k in t), t.get("peer", "c", "gone")
    (['b', 'c'], None)
    >>> t.put("me", "x"); t.put("other", "y")   # a new peer: the older peer goes, "me" stays
    >>> t.senders(), ("me", "x") in t, t.get("peer", "b", "gone")
    (['me', 'other'], True, 'gone')
    """

    def __init__(self, quota: int, senders: int, kept: Iterable[str] = ()) -> None:
        if quota < 1 or senders < 1:
            raise ValueError(f"quota and senders must be >= 1, got {quota} and {senders}")
        self.quota, self.max_senders = int(quota), int(senders)
        self._kept: dict[str, OrderedDict[Hashable, Any]] = {s: OrderedDict() for s in kept}
        self._others: OrderedDict[str, OrderedDict[Hashable, Any]] = OrderedDict()

    def put(self, sender: str, key: Hashable, value: Any = None) -> None:
        """Remember ``key`` for ``sender`` (as its newest entry), within the bounds."""
        table = self._table(sender)
        if sender not in self._kept:
            if table is None:
                table = self._others[sender] = OrderedDict()
            self._others.move_to_end(sender)
            if len(self._others) > self.max_senders:
                self._others.popitem(last=False)
        table[key] = value
        table.move_to_end(key)
        if len(table) > self.quota:
            table.popitem(last=False)

    def get(self, sender: str, key: Hashable, default: Any = None) -> Any:
        """``sender``'s value for ``key``; ``default`` when not (or no longer) remembered."""
        table = self._table(sender)
        return default if table is None else table.get(key, default)

    def __contains__(self, pair: tuple[str, Hashable]) -> bool:
        sender, key = pair
        table = self._table(sender)
        return table is not None and key in table

    def __iter__(self) -> Iterator[tuple[str, Hashable]]:
        for sender, table in (*self._kept.items(), *self._others.items()):
            for key in table:
                yield sender, key

    def senders(self) -> list[str]:
        """The senders with a table: the kept ones, then the others from least to most recently written."""
        return [*self._kept, *self._others]

    def entries(self, sender: str) -> Iterator[Hashable]:
        """``sender``'s keys, oldest first."""
        return iter(tuple(self._table(sender) or ()))

    def _table(self, sender: str) -> OrderedDict[Hashable, Any] | None:
        return self._kept[sender] if sender in self._kept else self._others.get(sender)
