"""Hides what PyBullet's C code prints straight to the process's stdout/stderr.

Importing pybullet prints its build time, and every URDF with a link without inertia prints
"No inertial data for link ..." and a stray "base": nothing a user can act on, and it buries the
demo's transcript. Python cannot catch C-level printf, so the two file descriptors are pointed at
/dev/null for the duration of those calls only. Output of other threads in that window (a few
hundred milliseconds at start-up) is hidden too; the lock keeps two windows from interleaving.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from types import ModuleType
from typing import Iterator

__all__ = ["native_output_silenced", "import_pybullet"]

_LOCK = threading.Lock()


def _flush_all() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):  # closed or replaced streams
            pass
    try:
        ctypes.CDLL(None).fflush(None)  # C stdio buffers, so nothing leaks out after the restore
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def native_output_silenced() -> Iterator[None]:
    """Run the body with file descriptors 1 and 2 on /dev/null (a no-op where they cannot be duplicated)."""
    with _LOCK:
        _flush_all()
        try:
            saved = (os.dup(1), os.dup(2))
        except OSError:
            yield
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            yield
        finally:
            _flush_all()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, devnull):
                os.close(fd)


def import_pybullet() -> ModuleType:
    """``import pybullet`` without its build-time banner."""
    if "pybullet" in sys.modules:
        return sys.modules["pybullet"]
    with native_output_silenced():
        import pybullet
    return pybullet
