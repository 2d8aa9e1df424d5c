"""One way to run a single node as a process: init, spin on a multi-threaded executor, stop cleanly.

Ctrl-C and an external shutdown are the normal way a node ends, so they exit with 0 and no trace.
"""
from __future__ import annotations

import sys
from typing import Callable, TypeVar

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

__all__ = ["run_node"]

N = TypeVar("N", bound=Node)


def run_node(make_node: Callable[[], N], *, threads: int, args: list[str] | None = None,
             on_stop: Callable[[N], None] | None = None) -> int:
    """Build the node with ``make_node`` and spin it until shutdown; ``on_stop`` runs before destroy."""
    try:
        with rclpy.init(args=args if args is not None else sys.argv):
            node = make_node()
            executor = MultiThreadedExecutor(num_threads=threads)
            executor.add_node(node)
            try:
                executor.spin()
            finally:
                if on_stop is not None:
                    on_stop(node)
                executor.shutdown()
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    return 0
