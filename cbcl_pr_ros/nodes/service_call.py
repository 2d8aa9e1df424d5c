"""One blocking service call with timeouts, for clients whose node is spun by another thread."""
from __future__ import annotations

import threading
from typing import Any

__all__ = ["ServiceUnavailable", "call_service"]


class ServiceUnavailable(TimeoutError):
    """Nobody offers the service, or it did not answer in time."""


def call_service(client: Any, request: Any, timeout_s: float, what: str = "its server",
                 ready_timeout_s: float | None = None) -> Any:
    """Wait for the service (``ready_timeout_s``; default the smaller of ``timeout_s`` and 5 s), send
    ``request``, wait ``timeout_s`` for the answer.

    Never blocks forever: a missing server or a silent one raises :class:`ServiceUnavailable` with
    the resolved service name. The future is completed by whichever executor spins the client's node.
    """
    ready = min(timeout_s, 5.0) if ready_timeout_s is None else ready_timeout_s
    if not client.wait_for_service(timeout_sec=ready):
        raise ServiceUnavailable(f"no {what} answers '{client.srv_name}' (is it running, in this namespace?)")
    fut = client.call_async(request)
    done = threading.Event()
    fut.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout_s):
        raise ServiceUnavailable(f"'{client.srv_name}' did not answer within {timeout_s:g} s")
    return fut.result()
