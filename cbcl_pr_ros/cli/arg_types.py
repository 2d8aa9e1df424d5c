"""argparse types with a range: a number out of it ends the command at once with argparse's usage line
and the range, instead of a late failure (or a process that tries to start a million threads)."""
from __future__ import annotations

import argparse
from typing import Callable

__all__ = ["int_in"]


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]``, else ``argument --x: must be ...``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # also a number of more digits than int() reads
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {high}, got {text[:20]!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {high}, got {value}")
        return value

    return parse
