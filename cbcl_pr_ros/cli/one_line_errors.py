"""Command-line mistakes answered in one line: what was wrong, the nearest valid name when there is one,
and where the usage is.

argparse prints its whole usage block (a dozen lines for cbcl-eval) before the error, so the one line that
says what went wrong is the last thing on the screen and easy to miss; a misspelt name gets no hint.
"""
from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable
from typing import NoReturn

__all__ = ["OneLineErrorParser", "did_you_mean"]

# argparse's message for a value outside ``choices`` (sub-command names included)
_INVALID_CHOICE = re.compile(r"^argument (?P<arg>[^:]+): invalid choice: '?(?P<value>[^' ]*)'? \(choose from (?P<choices>.*)\)$")


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or "" when none is close.

    >>> did_you_mean("fsil-tabel", ["fsil-table", "sota"])
    " (did you mean 'fsil-table'?)"
    >>> did_you_mean("zzz", ["fsil-table", "sota"])
    ''
    """
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr (exit status 2, as argparse's): the
    message, a close match for a misspelt choice, and a pointer to ``--help``. Sub-parsers made with
    ``add_subparsers`` are of the same class, so their errors are one line too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {_clearer(message)} (usage: {self.prog} --help)\n")


def _clearer(message: str) -> str:
    """argparse's invalid-choice message with a suggestion; any other message unchanged."""
    m = _INVALID_CHOICE.match(message)
    if m is None:
        return message
    choices = re.findall(r"'([^']*)'", m["choices"]) or [c.strip() for c in m["choices"].split(",")]
    what = "command" if m["arg"] == "command" else f"value for {m['arg']}"
    return f"unknown {what} {m['value']!r}{did_you_mean(m['value'], choices)}; choose from {', '.join(choices)}"
