"""Entries remembered per sender: one sender's writes push out only its own (runtime/per_sender.py)."""
from __future__ import annotations

import doctest

import pytest

from cbcl_pr_ros.runtime import per_sender
from cbcl_pr_ros.runtime.per_sender import PerSender


def test_doctest():
    res = doctest.testmod(per_sender)
    assert res.attempted > 0 and res.failed == 0


def test_a_flood_from_one_sender_evicts_only_its_own_oldest_entries():
    t = PerSender(quota=8, senders=4, kept=("me",))
    for k in range(5):
        t.put("me", f"mine{k}")
        t.put("peer", f"p{k}", float(k))
    for k in range(10_000):
        t.put("flood", k)
    assert list(t.entries("flood")) == list(range(9_992, 10_000))  # its quota, newest kept
    assert list(t.entries("me")) == [f"mine{k}" for k in range(5)]
    assert t.get("peer", "p3") == 3.0 and ("peer", "p4") in t and ("peer", "p9") not in t
    t.put("peer", "p0")  # written again: its newest
    assert list(t.entries("peer"))[-1] == "p0"


def test_senders_past_the_bound_drop_the_least_recently_written_never_a_kept_one():
    t = PerSender(quota=2, senders=3, kept=("me",))
    t.put("me", "x")
    for name in ("a", "b", "c"):
        t.put(name, 1)
    t.put("a", 2)  # a written last: b is now the oldest
    for k in range(100):
        t.put(f"n{k}", k)
    assert t.senders() == ["me", "n97", "n98", "n99"] and ("me", "x") in t
    assert len(list(t)) == 1 + 3  # at most (senders + kept) * quota entries
    assert t.get("a", 2, "gone") == "gone" and list(t.entries("b")) == []


@pytest.mark.parametrize("quota, senders", [(0, 1), (1, 0), (-5, 3)])
def test_bounds_must_be_positive(quota, senders):
    with pytest.raises(ValueError, match="must be >= 1"):
        PerSender(quota, senders)
