"""Running nodes as a process: init, spin each node on its own executor, stop in order on a signal.

Ctrl-C (SIGINT), SIGTERM and an external shutdown are the normal way a node ends, so they exit with
0 and no trace. The order matters: rclpy's own signal handler shuts the context down at once, while
executor threads, worker threads and timers may still be publishing, which printed "publisher's
context is invalid" on every Ctrl-C. Here the signal only sets a flag; the main thread then stops
the executors (in-flight callbacks finish), destroys the nodes (the lifecycle nodes first take their
shutdown transition there: workers join, the memory is checked on disk; ``nodes.lifecycle``) and only
then leaves ``rclpy.init``, which shuts the context down.

One executor per node: rclpy's executor rebuilds its wait set over every entity of every node in
Python on each wake-up, holding the GIL; with the extractor and the learner on one executor, 30 Hz
frames were dropped (38 %) with a 357 ms p95 latency; with one executor per node, 18-20 % (24 Hz
sustained, p95 ~160 ms). Separate processes, each with its own GIL, deliver every frame (see
docs/nodes.md): use them for camera-rate streams.

A node whose callbacks never wait for one another spins on a single-threaded executor
(``spin_threads = 1`` on its class). rclpy's MultiThreadedExecutor leaves a
subscription "ready" until a pool thread has taken its message, so its spin thread wakes again and
again, rebuilding the wait set while holding the GIL, and the pool thread waits for the GIL to take
it: on a quiet 2-core machine the extractor's camera callback then started 3-5 ms (p50) and 48 ms
(p95) after the frame's stamp and 20-30 % of 30 Hz frames were overwritten before it was taken;
single-threaded, 1.4 / 1.8 ms and none lost (bench/results/pipeline.json, docs/nodes.md).

A node that needs a pool for its services (a TeachClass waits in its callback for camera frames; an
extract_features request takes the backbone between camera frames) but also takes a camera-rate
stream names the callback groups of its stream subscriptions in
``stream_callback_groups``: those get a single-threaded executor of their own, and the pool's
executor leaves them out. Each wake of the stream's executor then builds a wait set of a few
subscriptions instead of every service, client and timer of the node, and the pool no longer wakes
over and over for a message not yet taken (which kept the learner's spin thread busy for ~30 % of a
core at 30 Hz with objects; docs/nodes.md). The arm, the simulated world and the teaching page do the
same with their steady topics and timers (a 20 Hz ``joint_states`` on a pool cost an idle arm 6-8 % of
a core).

With nothing to do a spin thread sleeps ``IDLE_WAIT_S`` and is woken when :func:`spinning` is left,
instead of looking at its stop flag ten times a second (docs/nodes.md "Busy and quiet").
"""
from __future__ import annotations

import functools
import inspect
import os
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import rclpy
from rclpy.exceptions import InvalidHandle
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from cbcl_pr_ros.core.threads import set_blas_threads
from cbcl_pr_ros.nodes.ros_params import ParameterRefused

__all__ = ["run_node", "run_nodes", "own_args", "ros_args_problem", "unreadable_ros_args", "executor_for", "executors_for", "spinning", "spin_until", "spin_until_signal", "stop_executor",
           "domain_id_problem"]

N = TypeVar("N", bound=Node)


def executor_for(node: Node, threads_per_node: int) -> Executor:
    """The node's own executor: single-threaded when its class says ``spin_threads = 1``, else a
    pool of ``spin_threads`` (or ``threads_per_node``) threads for nodes whose callbacks wait on others."""
    threads = int(getattr(node, "spin_threads", threads_per_node))
    if threads <= 1:
        return SingleThreadedExecutor(context=node.context)
    return MultiThreadedExecutor(num_threads=threads, context=node.context)


def _in_groups(entity: object, groups: Sequence[object]) -> bool:
    group = getattr(entity, "callback_group", None)
    return any(group is g for g in groups)


class StreamGroupsExecutor(SingleThreadedExecutor):
    """Runs only the callbacks of ``groups`` of ``node``, which stays added to its main executor
    (rclpy lets a node be added to one executor: this one asks for the node instead)."""

    def __init__(self, node: Node, groups: Iterable[object]) -> None:
        super().__init__(context=node.context)
        self._node, self._groups = node, tuple(groups)

    def get_nodes(self) -> list[Node]:
        return [self._node]

    def can_execute(self, entity: object) -> bool:
        return _in_groups(entity, self._groups) and super().can_execute(entity)


class WithoutGroupsExecutor(MultiThreadedExecutor):
    """A pool executor that leaves the callbacks of ``groups`` to a :class:`StreamGroupsExecutor`."""

    def __init__(self, groups: Iterable[object], num_threads: int, context: object) -> None:
        super().__init__(num_threads=num_threads, context=context)
        self._groups = tuple(groups)

    def can_execute(self, entity: object) -> bool:
        return not _in_groups(entity, self._groups) and super().can_execute(entity)


def executors_for(node: Node, threads_per_node: int) -> list[Executor]:
    """The executors that spin ``node``, the one it is added to first: :func:`executor_for`, or,
    when the node names ``stream_callback_groups`` and needs a pool, that pool without them and a
    single-threaded executor for them."""
    groups = tuple(getattr(node, "stream_callback_groups", ()) or ())
    threads = int(getattr(node, "spin_threads", threads_per_node))
    if not groups or threads <= 1:
        return [executor_for(node, threads_per_node)]
    return [WithoutGroupsExecutor(groups, threads, node.context), StreamGroupsExecutor(node, groups)]


#: how long :func:`spinning`'s executors wait for work before they look at their stop flag again (leaving
#: ``spinning`` wakes them at once). Each wait that runs out rebuilds the wait set in Python: at 0.1 s
#: that cost 0.5-1 % of a core per executor, and the five node processes of a session have eleven.
IDLE_WAIT_S = 2.0


def _spin_once(executor: Executor, stop: threading.Event, timeout_s: float) -> None:
    """One turn of ``executor`` that also ends when ``stop`` is set and the executor is woken
    (``executor.wake()``): a plain ``spin_once`` waits its whole timeout through a wake-up that
    brings no work. rclpy's ``spin_once_until_future_complete`` would do it with a future, but keeps a
    callback on that future per call: a list that grows with every message."""
    if not _has_stoppable_turn(type(executor)):
        executor.spin_once(timeout_sec=min(timeout_s, 0.1))
    else:
        executor._spin_once_impl(timeout_sec=timeout_s, wait_condition=stop.is_set)


@functools.lru_cache(maxsize=None)
def _has_stoppable_turn(kind: type) -> bool:
    """Whether ``kind`` has rclpy's ``_spin_once_impl(timeout_sec, wait_condition)`` (rclpy's own
    executors in the pinned release; protected, so another release may change it: then the plain
    ``spin_once`` with a short timeout)."""
    try:
        params = inspect.signature(getattr(kind, "_spin_once_impl")).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    return {"timeout_sec", "wait_condition"} <= set(params)


def spin_until(executor: Executor, stop: threading.Event, idle_s: float = 0.1) -> None:
    """``executor.spin()`` that ends when ``stop`` is set, leaving the executor usable for
    :func:`stop_executor` (``Executor.shutdown`` would end it too, but with the race below).
    ``stop`` is seen within ``idle_s``, or at once when the executor is woken after it is set."""
    try:
        while not stop.is_set() and executor.context.ok():
            try:
                _spin_once(executor, stop, idle_s)
            except InvalidHandle:
                # a lifecycle transition destroyed a subscription (and its QoS event handler) while
                # this thread built the wait set; rclpy raises from add_to_wait_set instead of
                # skipping it. The next turn builds the wait set without it (raising would end
                # the spin thread, and the node would stop answering).
                continue
    except ExternalShutdownException:
        pass


def stop_executor(executor: Executor) -> None:
    """Let the callbacks already handed to the thread pool finish, then shut the executor down.

    rclpy's ``Executor.shutdown`` destroys its wake-up guard condition before its thread pool has
    drained; a queued handler that then finds its callback group busy calls ``trigger()`` on the
    destroyed guard and prints "exception was never retrieved ... destruction was requested".
    Draining the pool first (its ``_executor``, a ThreadPoolExecutor) avoids that.
    """
    pool = getattr(executor, "_executor", None)
    if pool is not None:
        pool.shutdown(wait=True)
    executor.shutdown(timeout_sec=10.0)


@contextmanager
def spinning(nodes: Sequence[Node], threads_per_node: int,
             stop: threading.Event | None = None) -> Iterator[list[threading.Thread]]:
    """Spin every node on its own executor thread while the ``with`` body runs (a script that calls
    the nodes' services from the main thread); on leaving, stop the executors (running callbacks
    finish). The nodes are not destroyed here. Yields the spin threads."""
    stop = stop or threading.Event()
    spun: list[tuple[Executor, str]] = []
    for node in nodes:
        mine = executors_for(node, threads_per_node)
        mine[0].add_node(node)
        spun += [(e, f"spin-{node.get_name()}" + ("-stream" if i else "")) for i, e in enumerate(mine)]
    executors = [e for e, _ in spun]
    threads = [threading.Thread(target=spin_until, args=(executor, stop, IDLE_WAIT_S), name=name, daemon=True)
               for executor, name in spun]
    for t in threads:
        t.start()
    try:
        yield threads
    finally:
        stop.set()
        for executor in executors:  # a thread waiting for work sees the flag now, not IDLE_WAIT_S later
            executor.wake()
        for t in threads:
            t.join(timeout=10.0)
        for executor in executors:
            stop_executor(executor)


def spin_until_signal(nodes: Sequence[Node], threads_per_node: int, stop: threading.Event) -> None:
    """Spin every node on its own executor thread until ``stop`` is set or the context shuts down,
    then stop the executors (running callbacks finish). The nodes are not destroyed here."""
    with spinning(nodes, threads_per_node, stop) as threads:
        while not stop.wait(0.2) and all(t.is_alive() for t in threads):
            pass


MAX_DOMAIN_ID = 232  # the highest id whose DDS ports fit (Fast DDS says "port number is too high" above)


def domain_id_problem(value: str | None) -> str | None:
    """One plain sentence when ``ROS_DOMAIN_ID`` cannot work, else None (unset or "" = domain 0)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if not text.isdigit():
        return f"ROS_DOMAIN_ID must be a whole number from 0 to {MAX_DOMAIN_ID}, got {text[:20]!r}"
    if int(text) > MAX_DOMAIN_ID:
        return (f"ROS_DOMAIN_ID {int(text)} is above {MAX_DOMAIN_ID}, the highest id DDS can use: "
                f"pick one from 0 to {MAX_DOMAIN_ID} (e.g. export ROS_DOMAIN_ID=42)")
    return None


_RCL_SOURCE = re.compile(r", at /\S+:\d+")  # rcl's own source positions: nothing a user can act on


def ros_args_problem(error: str) -> str | None:
    """One plain line when rcl refused the command line's ROS arguments (``error``: the text of rclpy's
    RCLError), else None. rcl's text names the rule it could not read; what to do is added: an empty
    value needs YAML's quotes, a params file must exist and be YAML."""
    match = re.search(r"Couldn't parse (.+?): '(.*?)'\. Error: (.*)", error, re.S)
    if not match:
        return None
    what, rule, detail = match.group(1), match.group(2), _RCL_SOURCE.sub("", match.group(3)).strip()
    line = f"the ROS argument '{rule}' cannot be used"
    if what == "parameter override rule" and rule.rstrip().endswith(":="):
        name = rule.split()[-1][:-2]
        return f"{line}: a parameter needs a value; for an empty string quote it: -p \"{name}:=''\""
    if what == "remap rule":
        return f"{line}: a remap is -r FROM:=TO (e.g. -r image:=/camera/image_raw)"
    if what == "params file":
        path = rule.split(maxsplit=1)[-1]
        if not os.path.isfile(path):
            return f"{line}: no parameters file {path!r}"
        return f"{line}: {path!r} is not a parameters YAML file ({detail})"
    return f"{line} ({what}: {detail}); the forms are -p NAME:=VALUE, -r FROM:=TO, --params-file FILE"


def command_line_parameters(args: Sequence[str]) -> dict[str, Any]:
    """The plain ``-p NAME:=VALUE`` (``--param``) values of the ROS arguments in ``args``, typed as rcl
    types them (YAML); node-specific ones (``-p learner:NAME:=VALUE``) and unreadable ones are left out."""
    import yaml

    out: dict[str, Any] = {}
    in_ros = False
    for flag, item in zip(args, list(args[1:]) + [""]):
        if flag in ("--ros-args", "--"):
            in_ros = flag == "--ros-args"
        elif in_ros and flag in ("-p", "--param") and ":=" in item:
            name, value = item.split(":=", 1)
            if name and ":" not in name and value:
                try:
                    out[name] = yaml.safe_load(value)
                except yaml.YAMLError:
                    continue
    return out


def with_command_line_parameters_last(args: list[str], folder: str) -> list[str]:
    """``args`` with their plain ``-p`` values written once more, in a params file read last under the
    section ``/**/*``. rcl applies a params file's node section (``/**/learner``, as config/cbcl_pr.yaml
    has) after a plain ``-p`` whenever that file also has a ``/**`` section, so ``--params-file
    config/cbcl_pr.yaml -p max_clusters:=5`` left max_clusters at the file's value without a word;
    a section created after the files' comes last, and the command line wins as a user expects."""
    import yaml

    given = command_line_parameters(args)
    if not given:
        return args
    path = os.path.join(folder, "command_line.params.yaml")
    with open(path, "w", encoding="utf8") as fh:
        yaml.safe_dump({"/**/*": {"ros__parameters": given}}, fh)
    return [*args, "--ros-args", "--params-file", path]


def own_args(argv: Sequence[str], prog: str) -> list[str]:
    """``argv`` without its ROS arguments (rclpy's ``remove_ros_args``); ROS arguments rcl cannot read
    end the program with one line (:func:`ros_args_problem`) and exit code 2, not a traceback."""
    from rclpy.utilities import remove_ros_args

    try:
        return list(remove_ros_args(list(argv)))
    except RuntimeError as exc:  # rclpy's RCLInvalidROSArgsError
        problem = ros_args_problem(str(exc))
        if problem is None:
            raise
        print(f"{prog}: error: {problem}", file=sys.stderr)
        raise SystemExit(2) from None


def unreadable_ros_args(argv: Sequence[str]) -> str | None:
    """One plain line when rcl cannot read the ROS arguments of ``argv`` (:func:`ros_args_problem`), else
    None. Read here, before ``rclpy.init``: rcl's init logs "[ERROR] [rcl]: Failed to parse global
    arguments" on its own first, a line above ours that says nothing a user can act on; rclpy's
    ``remove_ros_args`` runs the same parser without logging."""
    from rclpy.utilities import remove_ros_args

    try:
        remove_ros_args(list(argv))
    except RuntimeError as exc:  # rclpy's RCLInvalidROSArgsError
        return ros_args_problem(str(exc))
    return None


def run_nodes(make_nodes: Callable[[], Sequence[Node]], *, threads: int, args: list[str] | None = None,
              on_stop: Callable[[Sequence[Node]], None] | None = None) -> int:
    """Build the nodes, spin them until SIGINT/SIGTERM or an external shutdown, stop them in order.

    ``on_stop`` runs after the executors stopped and before the nodes are destroyed. An unusable
    ``ROS_DOMAIN_ID`` ends the process at once with one plain line and exit code 2.
    """
    problem = domain_id_problem(os.environ.get("ROS_DOMAIN_ID"))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    argv = list(args if args is not None else sys.argv)
    problem = unreadable_ros_args(argv)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    set_blas_threads(1)  # per-frame products are small: a second BLAS thread only waits (core/threads.py)
    stop = threading.Event()
    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in handled}
    folder = tempfile.TemporaryDirectory(prefix="cbcl_args_")
    try:
        with rclpy.init(args=with_command_line_parameters_last(argv, folder.name),
                        signal_handler_options=SignalHandlerOptions.NO):
            nodes: list[Node] = []
            try:
                nodes = list(make_nodes())
                if not stop.is_set():
                    spin_until_signal(nodes, threads, stop)
            finally:
                if on_stop is not None and nodes:
                    on_stop(nodes)
                for node in reversed(nodes):
                    node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ParameterRefused as exc:  # a user's start value: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # rclpy's RCLError: rcl could not read the command line's ROS arguments
        problem = ros_args_problem(str(exc))
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 2
    finally:
        folder.cleanup()
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0


def run_node(make_node: Callable[[], N], *, threads: int, args: list[str] | None = None,
             on_stop: Callable[[N], None] | None = None) -> int:
    """:func:`run_nodes` for one node; ``on_stop`` gets that node."""
    return run_nodes(lambda: [make_node()], threads=threads, args=args,
                     on_stop=(lambda nodes: on_stop(nodes[0])) if on_stop is not None else None)
