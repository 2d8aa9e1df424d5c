"""Class names a person cannot tell apart: one key per look, and which known name a new one looks like.

A page lists classes by name and a person teaches, forgets and points by name, so two classes whose
names look the same are two objects the person cannot tell apart.  Unicode gives many spellings of
one look: compatibility forms (fullwidth ``ｍｕｇ``, ligatures, mathematical letters), letter case,
combining marks (an accent, or marks that draw nothing, such as the grapheme joiner), variation
selectors, and a few letters that draw nothing at all (the Hangul fillers, the blank Braille
pattern).  :func:`lookalike_key` folds all of these away, so names that differ only in them share a
key.

What it does not fold: whole letters of another script that look like Latin ones (Cyrillic ``а``
for ``a``, Greek ``ο`` for ``o``).  That needs the Unicode confusables table (UTS #39 skeletons),
which the standard library does not carry; docs/security.md says so.
"""
from __future__ import annotations

import unicodedata
from typing import Iterable

__all__ = ["BLANK_LETTERS", "lookalike_key", "readable", "lookalike_in", "difference"]

# printable characters that draw nothing (Python counts them printable, so the label rule keeps them)
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_MARKS = ("Mn", "Me")  # nonspacing (accents, variation selectors, the grapheme joiner) and enclosing marks


def lookalike_key(name: str) -> str:
    """``name`` with every difference a reader cannot see folded away: compatibility forms (NFKD),
    case (casefold), nonspacing and enclosing marks, blank letters, runs of spaces.  Two names with
    one key look alike; the key is for comparing, never shown or stored."""
    s = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", name).casefold())
    s = "".join(ch for ch in s if unicodedata.category(ch) not in _MARKS and ch not in BLANK_LETTERS)
    return unicodedata.normalize("NFKC", " ".join(s.split()))


def readable(name: str) -> bool:
    """Whether ``name`` holds a letter, digit or symbol once marks and blank letters are set aside (a
    name of combining marks or variation selectors alone draws nothing a person could read or type)."""
    return any(unicodedata.category(ch)[0] in "LNS" for ch in lookalike_key(name))


def lookalike_in(name: str, known: Iterable[str]) -> str | None:
    """The first name of ``known``, other than ``name`` itself, that looks like ``name``; None if none."""
    key = lookalike_key(name)
    return next((k for k in known if k != name and lookalike_key(k) == key), None)


def difference(name: str, other: str) -> str:
    """Where ``name`` first differs from ``other``, as a code point and its Unicode name (so that a
    refusal shows what no font shows: a variation selector, a blank letter, a mark)."""
    if name == other:
        return "they are the same"
    i = next((j for j, (a, b) in enumerate(zip(name, other)) if a != b), min(len(name), len(other)))
    whose, ch = ("it has", name[i]) if i < len(name) else ("the known name has", other[i])
    return f"{whose} U+{ord(ch):04X} {unicodedata.name(ch, unicodedata.category(ch))} at position {i}"
