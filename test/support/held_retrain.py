"""A teach made slow on purpose: the core learner's retrains wait until the test releases them.

Concurrency tests use it to show that classify answers *while* a teach runs (not merely after it):
with the retrain held, a classify that waited for the teach could never answer.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

__all__ = ["blocked_retrains"]


@contextlib.contextmanager
def blocked_retrains(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Every retrain of the core learner stops (inside its writer lock) until released.

    Yields (entered, release): ``entered`` is set when a retrain is held, ``release`` lets it go.
    A teach is then slow on purpose, for as long as the test wants, on any machine.
    """
    from cbcl_pr_ros.core import learner as core_learner

    entered, release = threading.Event(), threading.Event()
    real = core_learner.fit_threads

    @contextlib.contextmanager
    def held(n):
        entered.set()
        release.wait(120.0)
        with real(n):
            yield

    monkeypatch.setattr(core_learner, "fit_threads", held)
    try:
        yield entered, release
    finally:
        release.set()


