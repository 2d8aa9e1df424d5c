"""One wrapper for every ROS callback of the package's nodes: nothing a peer sends ends a node.

rclpy re-raises an exception from a service, subscription or timer callback in the executor's
``spin``, which ends the node's process (or, in a one-process session, the thread spinning it).
:func:`guard_service` turns an unexpected exception into an error response, :func:`guard_callback`
into a dropped message or a skipped timer tick; both log exactly one line, from one call site at one
severity (rclpy refuses a call site whose severity changes between calls: "Logger severity cannot
be changed between calls"), throttled so that a flood of bad requests cannot flood the log.

Expected refusals (bad input) are answered by the callbacks themselves; this is the net under them.
"""
from __future__ import annotations

import functools
import traceback
from typing import Any, Callable

__all__ = ["guard_service", "guard_callback", "describe_exception"]

_LOG_EVERY_S = 1.0


def describe_exception(exc: BaseException) -> str:
    """One line: type, message (whitespace folded, cut to 200 chars) and where it was raised."""
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:200] + "..."
    where = ""
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        last = tb[-1]
        where = f" at {last.filename.rsplit('/', 1)[-1]}:{last.lineno}"
    return f"{type(exc).__name__}: {text}{where}"


def _log_failure(node: Any, what: str, exc: BaseException) -> None:
    try:
        node.get_logger().error(f"{what} failed ({describe_exception(exc)}); the node goes on",
                                throttle_duration_sec=_LOG_EVERY_S)
    except Exception:  # logging itself must never be what ends the node
        pass


def guard_service(node: Any, fn: Callable[[Any, Any], Any], what: str) -> Callable[[Any, Any], Any]:
    """``fn(req, resp)`` whose unexpected exception becomes success=false + a message."""

    @functools.wraps(fn)
    def callback(req: Any, resp: Any) -> Any:
        try:
            return fn(req, resp)
        except Exception as exc:
            _log_failure(node, what, exc)
            try:
                if hasattr(resp, "success"):
                    resp.success = False
                if hasattr(resp, "message"):
                    resp.message = (f"internal error in {what} ({type(exc).__name__}); the request was "
                                    "not carried out and the node goes on")
            except Exception:
                pass
            return resp

    return callback


def guard_callback(node: Any, fn: Callable[..., Any], what: str) -> Callable[..., Any]:
    """A subscription or timer callback whose unexpected exception drops the message (one log line)."""

    @functools.wraps(fn)
    def callback(*args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            _log_failure(node, what, exc)

    return callback
