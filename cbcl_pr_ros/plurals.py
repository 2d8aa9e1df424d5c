"""A count and its noun in agreement ("1 class", "2 classes"), for every answer and log line.

Answers a person reads after a first teach hold ones ("1 view", "1 cluster"); a count written as
``f"{n} classes"`` then reads "1 classes". One rule here instead of a conditional at each message.
"""
from __future__ import annotations

__all__ = ["counted", "noun"]

_SIBILANT = ("s", "x", "z", "ch", "sh")


def noun(n: int, singular: str, plural: str | None = None) -> str:
    """``singular`` for a count of one, else ``plural`` (default: the singular's last word + s, or +es
    after s, x, z, ch, sh: "class" -> "classes", "object crop" -> "object crops")."""
    if int(n) == 1:
        return singular
    if plural is not None:
        return plural
    return singular + ("es" if singular.endswith(_SIBILANT) else "s")


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``"<n> <noun>"`` with the noun in agreement: ``counted(1, "class")`` is "1 class"."""
    return f"{int(n)} {noun(n, singular, plural)}"
