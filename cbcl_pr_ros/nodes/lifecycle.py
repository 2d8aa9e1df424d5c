"""The managed-node (lifecycle) frame shared by the feature extractor and the learner.

A managed node moves unconfigured → inactive → active and back through rclpy's lifecycle state
machine, driven by ``ros2 lifecycle set``, a lifecycle manager or, by default, by itself at start
(``autostart``). :class:`ManagedNode` turns each transition into one hook of the subclass and
makes every transition safe:

* an exception in a hook is logged with the transition's name and answered FAILURE (the node goes
  back to the state it came from, its process lives on); a failed configure first frees whatever
  it had built;
* shutdown works from every state (it deactivates and cleans up as needed, errors only logged) and
  :meth:`destroy_node` runs it, so Ctrl-C and the end of a test stop worker threads and save the
  memory the same way;
* :meth:`refusal` gives the one sentence a service answers when the node's state does not allow
  the request ("node is inactive: ...");
* a change a service commits holds :attr:`commit_lock` and checks the state again under it
  (:meth:`committing`); deactivate, cleanup and shutdown change the state first and then take that
  lock, so a commit in flight finishes before the transition goes on, and one that comes later is
  refused with the reason. :meth:`_interrupt` (subclass) wakes requests that wait for data;
* the node's services appear on the graph only after :meth:`start`: an autostart configure runs in
  the constructor, before anything spins (a learner loads its memory file there, seconds at a
  thousand classes), and a client that saw a service then waited that long for its first answer.
  Without autostart they appear at once and refuse with the lifecycle reason.

Publishers made with :meth:`create_lifecycle_publisher` (or from a table of rows with
:meth:`create_publishers`) publish only while active; :meth:`create_services` makes a table of
guarded services (:meth:`start` makes them). Every topic of these nodes is created with
:func:`overridable`, so its QoS follows rclpy's QoS overriding parameters
(``qos_overrides.<topic>.publisher.reliability`` ...), given at start.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.qos import QoSProfile
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.service import Service

from cbcl_pr_ros.nodes.guard import describe_exception, guard_service
from cbcl_pr_ros.nodes.qos import service_qos

__all__ = ["ManagedNode", "overridable", "SUCCESS", "FAILURE", "UNCONFIGURED", "INACTIVE", "ACTIVE", "FINALIZED"]

SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE
UNCONFIGURED, INACTIVE, ACTIVE, FINALIZED = "unconfigured", "inactive", "active", "finalized"
_ORDER = {UNCONFIGURED: 0, INACTIVE: 1, ACTIVE: 2}
# (service type, name, handler(request, response) -> response, callback group)
ServiceRow = tuple[Any, str, Callable[[Any, Any], Any], Any]


def overridable() -> QoSOverridingOptions:
    """History, depth and reliability of a topic settable by ``qos_overrides.<topic>...`` parameters."""
    return QoSOverridingOptions.with_default_policies()


class ManagedNode(LifecycleNode):
    """A lifecycle node whose subclass implements ``_configure``, ``_activate``, ``_deactivate`` and
    ``_cleanup`` (each raising on failure); see the module docstring for what this class adds."""

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.phase = UNCONFIGURED  # our own word for the primary state, read by service callbacks
        self.last_failure = ""
        self._transition_lock = threading.Lock()
        self.commit_lock = threading.Lock()

    # ------------------------------------------------------------------ hooks (subclass)
    def _configure(self) -> None:
        raise NotImplementedError

    def _activate(self) -> None:
        raise NotImplementedError

    def _deactivate(self) -> None:
        raise NotImplementedError

    def _cleanup(self, final: bool) -> None:
        """Free what configure built; ``final`` at shutdown (errors there are only logged)."""
        raise NotImplementedError

    def _interrupt(self) -> None:
        """Wake service calls that wait for data (a transition is starting); default: none."""

    def release(self, *attrs: str) -> None:
        """Destroy the subscriptions, timers and publishers (lifecycle or plain) held in these
        attributes; set each to None (a transition frees what the opposite one made)."""
        from rclpy.lifecycle import LifecyclePublisher
        from rclpy.publisher import Publisher
        from rclpy.subscription import Subscription
        from rclpy.timer import Timer

        for attr in attrs:
            entity = getattr(self, attr)
            if entity is None:
                continue
            if isinstance(entity, Subscription):
                self.destroy_subscription(entity)
            elif isinstance(entity, Timer):
                self.destroy_timer(entity)
            elif isinstance(entity, Publisher) and not isinstance(entity, LifecyclePublisher):
                self.destroy_publisher(entity)
            else:
                self.destroy_lifecycle_publisher(entity)
            setattr(self, attr, None)

    def create_publishers(self, rows: Iterable[tuple[str, Any, str, QoSProfile]]) -> None:
        """Lifecycle publishers from (attribute, message type, topic, QoS) rows, each :func:`overridable`;
        each attribute holds its publisher (freed by :meth:`release`)."""
        for attr, msg_type, topic, qos in rows:
            setattr(self, attr, self.create_lifecycle_publisher(msg_type, topic, qos,
                                                               qos_overriding_options=overridable()))

    def create_services(self, rows: Iterable[ServiceRow]) -> list[Service]:
        """Services from (service type, name, handler, callback group) rows, each handler guarded
        (:func:`~.guard.guard_service`, named by the service) and on :func:`~.qos.service_qos`."""
        return [self.create_service(srv_type, name, guard_service(self, handler, name), qos_profile=service_qos(),
                                    callback_group=group) for srv_type, name, handler, group in rows]

    # ------------------------------------------------------------------ start
    def start(self, autostart: bool, services: Iterable[ServiceRow] = ()) -> list[Service]:
        """Configure and activate now when ``autostart`` (else wait for a lifecycle manager), then offer
        ``services`` (:meth:`create_services`): a client that finds one is answered without waiting
        for the start, and one that starts first waits in ``wait_for_service``. Returns them."""
        self._autostart(autostart)
        return self.create_services(services)

    def _autostart(self, autostart: bool) -> None:
        name = self.get_fully_qualified_name()
        if not autostart:
            self.get_logger().info(f"unconfigured, waiting for a lifecycle manager (autostart false): "
                                   f"ros2 lifecycle set {name} configure, then activate")
            return
        if self.trigger_configure() != SUCCESS:
            self.get_logger().error(f"autostart: configure failed, the node stays unconfigured and alive; "
                                    f"fix the cause, then: ros2 lifecycle set {name} configure")
            return
        if self.trigger_activate() != SUCCESS:
            self.get_logger().error(f"autostart: activate failed, the node stays inactive; "
                                    f"ros2 lifecycle set {name} activate")

    def refusal(self, what: str, need: str = ACTIVE) -> str | None:
        """None when the node is at least in state ``need``; else why ``what`` is refused."""
        phase = self.phase
        if _ORDER.get(phase, -1) >= _ORDER[need]:
            return None
        name = self.get_fully_qualified_name()
        if phase == INACTIVE:
            return (f"node is inactive (paused by its lifecycle manager): {what} is refused until "
                    f"'ros2 lifecycle set {name} activate'; nothing was changed")
        why = f" (last configure failed: {self.last_failure})" if self.last_failure else ""
        return (f"node is {phase}{why}: {what} needs it configured"
                + (" and active" if need == ACTIVE else "") + f" ('ros2 lifecycle set {name} configure'"
                + (", then activate)" if need == ACTIVE else ")") + "; nothing was changed")

    # ------------------------------------------------------------------ transitions
    def _run(self, what: str, fn: Any, *args: Any) -> bool:
        try:
            fn(*args)
            return True
        except Exception as exc:  # a transition never ends the process
            # the whole sentence (describe_exception cuts at 200 characters): it says what to do
            text = " ".join(str(exc).split())[:1000]
            self.last_failure = f"{type(exc).__name__}: {text}"
            self.get_logger().error(f"{what} failed: {self.last_failure}")
            return False

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        with self._transition_lock:
            self.last_failure = ""
            if not self._run("configure", self._configure):
                self._run("cleanup after the failed configure", self._cleanup, False)
                return FAILURE
            self.phase = INACTIVE
        return super().on_configure(state)

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        with self._transition_lock:
            if super().on_activate(state) != SUCCESS:  # lifecycle publishers first
                return FAILURE
            if not self._run("activate", self._activate):
                self.phase = INACTIVE
                self._run("deactivate after the failed activate", self._deactivate)
                super().on_deactivate(state)
                return FAILURE
            self.phase = ACTIVE
        return SUCCESS

    def _quiesce(self, phase: str) -> None:
        """Enter ``phase`` (new commits are refused), wake waiting requests, let a running commit end."""
        self.phase = phase
        self._interrupt()
        with self.commit_lock:
            pass

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        with self._transition_lock:
            self._quiesce(INACTIVE)  # services refuse from now on, before the subscriptions go
            self._run("deactivate", self._deactivate)  # an error is logged; the node is paused anyway
            super().on_deactivate(state)
        return SUCCESS  # FAILURE would claim "still active" for a node that no longer serves

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        with self._transition_lock, self.commit_lock:
            if not self._run("cleanup", self._cleanup, False):
                return FAILURE  # back to inactive, nothing freed that holds unsaved state
            self.phase = UNCONFIGURED
        return super().on_cleanup(state)

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self._wind_down("shutdown")
        return SUCCESS

    def on_error(self, state: State) -> TransitionCallbackReturn:
        self._wind_down("error recovery")
        self.phase = UNCONFIGURED
        return SUCCESS  # back to unconfigured: the node can be configured again

    def _wind_down(self, what: str) -> None:
        with self._transition_lock:
            was = self.phase
            self._quiesce(INACTIVE if was == ACTIVE else was)
            with self.commit_lock:  # held to the end: nothing is committed (or written) after this
                if was == ACTIVE:
                    self._run(f"{what}: deactivate", self._deactivate)
                    super().on_deactivate(State("deactivating", 0))
                if self.phase == INACTIVE:
                    self._run(f"{what}: cleanup", self._cleanup, True)
                self.phase = FINALIZED if what == "shutdown" else UNCONFIGURED

    @contextmanager
    def committing(self, what: str, need: str = ACTIVE) -> Iterator[str | None]:
        """Hold :attr:`commit_lock` and give the refusal for ``what`` in the state now (None: go on)."""
        with self.commit_lock:
            yield self.refusal(what, need)

    def destroy_node(self) -> None:
        """Shut down through the state machine first (workers stop, memory saved), then destroy."""
        if self.phase != FINALIZED:
            try:
                self.trigger_shutdown()
            except Exception as exc:  # e.g. the state machine is mid-transition
                self.get_logger().warning(f"shutdown transition skipped ({describe_exception(exc)})")
                self._wind_down("shutdown")
        super().destroy_node()
