"""One blocking service call with timeouts, for clients whose node is spun by another thread."""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any

__all__ = ["FIRST_CALL_SETTLE_S", "ServiceUnavailable", "call_service", "wait_ready"]

# Fast DDS reports a service as available once the client has matched the server's request reader;
# the server matches the client's response reader on its own schedule and drops a response it cannot
# deliver within 100 ms ("failed to send response (timeout)"). On a loaded machine a request sent the
# moment a new client sees its server is then answered into the void. A new client waits this long
# after first seeing its server; later calls on it do not wait.
FIRST_CALL_SETTLE_S = 1.0
_first_seen: "weakref.WeakKeyDictionary[Any, float]" = weakref.WeakKeyDictionary()


class ServiceUnavailable(TimeoutError):
    """Nobody offers the service, or it did not answer in time."""


def wait_ready(client: Any, timeout_s: float, settle_s: float = FIRST_CALL_SETTLE_S) -> bool:
    """True once ``client``'s server is there and has had ``settle_s`` since this client first saw it
    (see :data:`FIRST_CALL_SETTLE_S`); False after ``timeout_s`` without a server."""
    if not client.wait_for_service(timeout_sec=timeout_s):
        return False
    now = time.monotonic()
    rest = settle_s - (now - _first_seen.setdefault(client, now))
    if rest > 0:
        time.sleep(rest)
    return True


def call_service(client: Any, request: Any, timeout_s: float, what: str = "server",
                 ready_timeout_s: float | None = None, attempts: int = 1) -> Any:
    """Wait for the service (``ready_timeout_s``; default the smaller of ``timeout_s`` and 5 s), send
    ``request``, wait ``timeout_s`` for the answer; send it again up to ``attempts`` times in all when
    no answer came (only for requests that do the same when done twice: an answer can be lost on the
    way back, and the server may have acted on the first one).

    Never blocks forever: a missing server or a silent one raises :class:`ServiceUnavailable` with
    the resolved service name. The future is completed by whichever executor spins the client's node.
    """
    ready = min(timeout_s, 5.0) if ready_timeout_s is None else ready_timeout_s
    if not wait_ready(client, ready):
        raise ServiceUnavailable(f"no {what} answers '{client.srv_name}' (is it running, in this namespace?)")
    for _ in range(max(1, int(attempts))):
        fut = client.call_async(request)
        done = threading.Event()
        fut.add_done_callback(lambda _f: done.set())
        if _answered(fut, done, timeout_s, getattr(client, "context", None)):
            return fut.result()
        getattr(client, "remove_pending_request", lambda _f: None)(fut)  # a late answer is dropped
    tries = "" if attempts <= 1 else f" ({int(attempts)} tries)"
    raise ServiceUnavailable(f"'{client.srv_name}' did not answer within {timeout_s:g} s{tries}")


def _answered(fut: Any, done: threading.Event, timeout_s: float, context: Any = None) -> bool:
    """Whether ``fut`` completes within ``timeout_s``. The done callback alone is not enough: when the
    answer comes before the callback is added, rclpy runs it as a task of the client's executor, so
    an executor busy elsewhere could delay it; the future's own state is checked too (every 50 ms)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if done.wait(min(0.05, max(0.0, deadline - time.monotonic()))) or fut.done():
            return True
        # the context shut down (Ctrl-C): no answer can come, and a page's worker thread waiting out a
        # 90 s teach held the process past launch's grace period
        if time.monotonic() >= deadline or (context is not None and not context.ok()):
            return False
