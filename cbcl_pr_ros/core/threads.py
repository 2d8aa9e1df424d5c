"""Thread limits per call site: one thread for a frame's work, a chosen few for a retrain.

Numpy/scipy's BLAS (OpenBLAS) and torch hand a product to their thread pools once it is large
enough, whatever else the machine does.  On a busy machine the second thread waits for a core and
the product waits for it: scoring one vector against 100 classes took 12 ms instead of 0.3 ms on
the shared 2-core build box under load, and a 1280-d Cholesky 0.87 s on two threads against 38 ms
on one.  So the limit is chosen where the work is done, not once per process:

* :func:`frame_threads` around per-frame work (``predict``): one BLAS thread, whatever the
  process's setting, so that a busy machine costs a frame its share of one core and no more;
* :func:`fit_threads` around a retrain: ``n`` BLAS and torch threads (the learner's
  ``fit_threads``, 1 by default; None leaves the process's settings, for batch work that owns the
  machine, such as the evaluation);
* :func:`set_blas_threads`: the process's own BLAS setting outside those (the nodes set 1).

BLAS and torch limits are process-wide, so limits requested at the same time from several threads
are combined: the smallest one is in force until it is released, then the next smallest, then the
process's setting again.  A predict during a retrain on several threads therefore makes the
retrain run on one thread for the product's duration, never the product on several.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from collections.abc import Iterator

__all__ = ["blas_threads_in_force", "fit_threads", "frame_threads", "set_blas_threads"]

_lock = threading.Lock()
_controller = None  # threadpoolctl.ThreadpoolController, made once: scanning the loaded libraries costs ms
_ids = itertools.count()
# active requests, id -> limit: BLAS (every request) and torch (fit_threads only)
_blas_requests: dict[int, int] = {}
_torch_requests: dict[int, int] = {}
# what the process had before the first active request (restored when the last one ends), and
# the limit this module last set (None: nothing set, the libraries' own)
_blas_base: int | None = None
_torch_base: int | None = None
_blas_now: int | None = None


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the loaded BLAS libraries (numpy's and scipy's OpenBLAS)."""
    global _controller
    if _controller is None:
        import numpy  # noqa: F401  (a BLAS library is limited only once it is loaded)
        import scipy.linalg  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return [lib for lib in _controller.lib_controllers if lib.user_api == "blas"]


def _blas_get() -> int:
    return min((int(lib.num_threads) for lib in _blas_libraries()), default=1)


def _blas_set(n: int) -> None:
    """Set every BLAS library's limit, unless this module knows it is in force already."""
    global _blas_now
    if _blas_now != n:
        for lib in _blas_libraries():
            lib.set_num_threads(n)
        _blas_now = n


def blas_threads_in_force() -> int:
    """The BLAS threads a product started now may use (the smallest of the loaded libraries')."""
    return _blas_get()


def set_blas_threads(n: int) -> None:
    """The process's BLAS threads outside :func:`frame_threads` and :func:`fit_threads` (the nodes
    set 1 at start: their per-frame products are small and a second thread only waits)."""
    global _blas_base
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    with _lock:
        if _blas_requests:
            _blas_base = n  # in force once the active requests end
        else:
            for lib in _blas_libraries():
                lib.set_num_threads(n)


def _apply() -> None:
    """Put the smallest active request in force, or the process's setting when none is left."""
    global _blas_base, _torch_base, _blas_now
    if _blas_requests:
        if _blas_base is None:  # the first request: what is in force now (whoever set it) comes back after
            _blas_base = _blas_now = _blas_get()
        _blas_set(min(_blas_requests.values()))
    elif _blas_base is not None:
        _blas_set(_blas_base)
        _blas_base = _blas_now = None  # between requests, others may set the limit: read it again
    torch = sys.modules.get("torch")  # not loaded: nothing of torch's to limit, and no import cost
    if torch is None:
        return
    if _torch_requests:
        if _torch_base is None:
            _torch_base = torch.get_num_threads()
        want = min(_torch_requests.values())
        if torch.get_num_threads() != want:
            torch.set_num_threads(want)
    elif _torch_base is not None:
        if torch.get_num_threads() != _torch_base:
            torch.set_num_threads(_torch_base)
        _torch_base = None


@contextlib.contextmanager
def _limited(n: int, with_torch: bool) -> Iterator[None]:
    key = next(_ids)
    with _lock:
        _blas_requests[key] = n
        if with_torch:
            _torch_requests[key] = n
        _apply()
    try:
        yield
    finally:
        with _lock:
            _blas_requests.pop(key, None)
            _torch_requests.pop(key, None)
            _apply()


@contextlib.contextmanager
def frame_threads() -> Iterator[None]:
    """Run the body (a frame's products) with one BLAS thread; cheap when one is already in force."""
    with _limited(1, with_torch=False):
        yield


@contextlib.contextmanager
def fit_threads(n: int | None) -> Iterator[None]:
    """Run the body with at most ``n`` BLAS and torch intra-op threads (None: change nothing)."""
    if n is None:
        yield
        return
    if isinstance(n, bool) or int(n) < 1:
        raise ValueError(f"n must be a positive int or None, got {n!r}")
    with _limited(int(n), with_torch=True):
        yield
