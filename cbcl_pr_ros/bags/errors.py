"""The one exception the bag layer raises for unusable bags.

Callers (CLI, replay, evaluation) catch a single type and show one line naming the bag and the
topic, instead of a stack trace from deep inside the storage plugin.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["BagFormatError"]


class BagFormatError(ValueError):
    """A bag that cannot be used: missing, truncated, corrupt, wrong topics or unknown types.

    Parameters
    ----------
    path : bag directory (or file) concerned.
    reason : what is wrong, in words.
    topic : the topic concerned, when the problem is one topic's.
    """

    def __init__(self, path: str | Path, reason: str, topic: str | None = None) -> None:
        self.path = Path(path)
        self.topic = topic
        self.reason = reason
        where = f"{self.path}" + (f" (topic {topic})" if topic else "")
        super().__init__(f"bag {where}: {reason}")
