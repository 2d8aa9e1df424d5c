"""The learner's process heap: glibc settings that keep a long-running learner's RSS flat.

A retrain allocates tens of MB of numpy arrays (pooled covariances of ``d x d``, the head's solve)
from whichever executor thread runs the teach, then frees them. With glibc's defaults two things
keep that memory: the mmap threshold rises to the size of the largest block freed so far (up to
32 MB), so later retrains take their large arrays from a thread's heap arena instead of ``mmap``,
where they fragment; and every executor thread may get an arena of its own. A 10-minute run with a
teach every 30 s (``bench/bench_soak.py --teach-every 30``, 2-core machine, 2026-11-25) grew the
learner's RSS 234 -> 259 MB with the defaults and 232 -> 235 MB with the settings below, Python's
own allocations (tracemalloc) being flat in both. ``malloc_trim`` after each retrain alone did not
stop it (docs/security.md, "An hour of work").
"""
from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["ARENAS", "LARGE_BLOCK_BYTES", "keep_heap_flat", "release_freed_memory"]

_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>
_M_ARENA_MAX = -8
LARGE_BLOCK_BYTES = 256 * 1024  # fixed: blocks this size and above always come from mmap and go back at free
ARENAS = 2  # enough for a GIL-bound process: small objects come from Python's own allocator

_libc: Any = None


def _glibc() -> Any:
    """libc with ``mallopt``/``malloc_trim``, or False where there is none (musl, macOS)."""
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL("libc.so.6")
            lib.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
            lib.malloc_trim.argtypes = [ctypes.c_size_t]
            _libc = lib
        except (OSError, AttributeError):
            _libc = False
    return _libc


def keep_heap_flat() -> bool:
    """Fix the mmap threshold and cap the arenas (call before the executor starts its threads);
    True where glibc took both settings."""
    lib = _glibc()
    if not lib:
        return False
    return bool(lib.mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES)) and bool(lib.mallopt(_M_ARENA_MAX, ARENAS))


def release_freed_memory() -> None:
    """Give the heap's freed top back to the system after a retrain (glibc ``malloc_trim``)."""
    lib = _glibc()
    if lib:
        lib.malloc_trim(0)
