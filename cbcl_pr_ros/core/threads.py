"""Thread limits for a retrain: small linear algebra runs fastest on few threads.

A retrain's matrices are small (a 1280 x 1280 Cholesky, a 64 x 1280 x 101 minibatch product).
Spreading them over several BLAS / torch threads gains little on an idle machine and loses
badly on a busy one: OpenBLAS and OpenMP workers spin-wait for each other, and with more runnable
threads than cores one step can take 10-50x longer (measured on the shared 2-core build box: a
1280-d Cholesky 38 ms on one thread, 0.87 s on two; one SGD epoch 0.05 s vs 4 s).
:func:`fit_threads` limits both pools for the duration of a retrain and restores them afterwards.

Both limits are process-wide, so another thread doing numpy / torch work at the same moment runs
with the same limit until the retrain ends; the learner holds its writer lock meanwhile, and
``predict`` only does one small matrix product.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

__all__ = ["fit_threads", "set_blas_threads"]

_lock = threading.Lock()
_controller = None  # threadpoolctl.ThreadpoolController, made once: scanning the loaded libraries costs ms


def _blas_controller():
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()  # numpy, scipy, sklearn and torch are loaded by now
    return _controller


def set_blas_threads(n: int) -> None:
    """Limit numpy/scipy's BLAS to ``n`` threads for the rest of the process (the nodes call it at start).

    A node's frame path does one small matrix product per frame (1 x 1280 by 1280 x a few hundred);
    with two BLAS threads OpenBLAS hands each product to a second thread, which on a busy 2-core
    machine made scoring 100 classes take 20 ms of wall time instead of 0.3 ms (docs/nodes.md "Where
    the time goes").  :func:`fit_threads` still sets a retrain's own limit and restores this one.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    import numpy  # noqa: F401  (a BLAS library is limited only once it is loaded)
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_limits

    with _lock:
        threadpool_limits(limits=n, user_api="blas")


@contextlib.contextmanager
def fit_threads(n: int | None) -> Iterator[None]:
    """Run the body with at most ``n`` BLAS and torch intra-op threads (None: change nothing)."""
    if n is None:
        yield
        return
    torch = sys.modules.get("torch")  # not loaded: nothing of torch's to limit, and no import cost

    with _lock:
        before = torch.get_num_threads() if torch is not None else None
        limiter = _blas_controller().limit(limits=int(n), user_api="blas")
        if torch is not None and before != n:
            torch.set_num_threads(int(n))
    try:
        yield
    finally:
        with _lock:
            limiter.restore_original_limits()
            if torch is not None and torch.get_num_threads() != before:
                torch.set_num_threads(before)
