"""Class names a person cannot tell apart: one key per look, which known name a new one looks like,
and which known names come nearest one that is not known (a mistyped forget or rename).

A page lists classes by name and a person teaches, forgets and points by name, so two classes whose
names look the same are two objects the person cannot tell apart.  Unicode gives many spellings of
one look: compatibility forms (fullwidth ``ｍｕｇ``, ligatures, mathematical letters), letter case,
marks that draw nothing (variation selectors, the grapheme joiner), and a few letters that draw
nothing at all (the Hangul fillers, the blank Braille pattern).  :func:`lookalike_key` folds all of
these away, so names that differ only in them share a key.  Accents and vowel signs are kept: they
are seen, and they tell words apart (``año`` and ``ano``; Devanagari and Thai write vowels as marks).

What it does not fold: whole letters of another script that look like Latin ones (Cyrillic ``а``
for ``a``, Greek ``ο`` for ``o``).  That needs the Unicode confusables table (UTS #39 skeletons),
which the standard library does not carry; docs/security.md says so.
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from typing import Iterable

__all__ = ["BLANK_LETTERS", "lookalike_key", "readable", "lookalike_in", "nearest", "difference"]

# printable characters that draw nothing (Python counts them printable, so the label rule keeps them)
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# marks that draw nothing: the grapheme joiner, the Mongolian and the standard variation selectors
_INVISIBLE_MARKS = re.compile("[\u034f\u180b-\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def lookalike_key(name: str) -> str:
    """``name`` with every difference a reader cannot see folded away: compatibility forms (NFKC),
    case (casefold), marks and letters that draw nothing, runs of spaces.  Accents stay.  Two names
    with one key look alike; the key is for comparing, never shown or stored."""
    s = _INVISIBLE_MARKS.sub("", unicodedata.normalize("NFKC", name))
    s = unicodedata.normalize("NFKC", s.casefold())
    s = "".join(ch for ch in s if ch not in BLANK_LETTERS)
    return " ".join(s.split())


def readable(name: str) -> bool:
    """Whether ``name`` holds a letter, digit or symbol once invisible marks and blank letters are set
    aside (a name of combining marks or variation selectors alone is nothing a person could read or type)."""
    return any(unicodedata.category(ch)[0] in "LNS" for ch in lookalike_key(name))


def lookalike_in(name: str, known: Iterable[str]) -> str | None:
    """The first name of ``known``, other than ``name`` itself, that looks like ``name``; None if none."""
    key = lookalike_key(name)
    return next((k for k in known if k != name and lookalike_key(k) == key), None)


def nearest(name: str, known: Iterable[str], n: int = 5) -> list[str]:
    """Up to ``n`` names of ``known`` nearest ``name`` as a reader sees them, nearest first (their
    :func:`lookalike_key` compared by :func:`difflib.get_close_matches`, so ``MUG`` finds ``mug``);
    none when nothing comes close.  For a refusal of a name the memory lacks: at a thousand classes a
    few near names help where a list cannot."""
    by_key: dict[str, list[str]] = {}
    for k in known:
        by_key.setdefault(lookalike_key(k), []).append(k)
    keys = difflib.get_close_matches(lookalike_key(name), list(by_key), n=n)
    return [k for key in keys for k in by_key[key]][:n]


def difference(name: str, other: str) -> str:
    """Where ``name`` first differs from ``other``, as a code point and its Unicode name (so that a
    refusal shows what no font shows: a variation selector, a blank letter, a mark)."""
    if name == other:
        return "they are the same"
    i = next((j for j, (a, b) in enumerate(zip(name, other)) if a != b), min(len(name), len(other)))
    whose, ch = ("it has", name[i]) if i < len(name) else ("the known name has", other[i])
    return f"{whose} U+{ord(ch):04X} {unicodedata.name(ch, unicodedata.category(ch))} at position {i}"
