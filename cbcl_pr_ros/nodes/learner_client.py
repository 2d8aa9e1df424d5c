"""A small Python client of the learner for your own node: its services with the right QoS and
timeouts, and the ``detections`` topic (docs/quickstart.md).

    from cbcl_pr_ros.nodes.learner_client import LearnerClient

    with LearnerClient.start(namespace="/robot1") as learner:      # own context, spun in a thread
        print(learner.list_classes())
        objs = learner.wait_for_detections(timeout_s=10.0).objects
        print(learner.teach_track("mug", objs[0].id).message)
        print([(o.id, o.label, round(o.confidence, 2)) for o in learner.latest_detections().objects])

Inside a node you already spin, use ``LearnerClient(node)``: every call then waits on a future that
your executor completes, so call it from a callback group other than the one that handles the answer
(or from another thread), never from the only thread that spins the node.
"""
from __future__ import annotations

import collections
import functools
import threading
from typing import Any

from cbcl_pr_ros.core.validation import MAX_LABEL_CHARS, check_label
from cbcl_pr_ros.msg import DetectedObject, Detections
from cbcl_pr_ros.nodes.detections_msgs import MAX_FRAME_OBJECTS, built_within_bounds, detections_from_serialized
from cbcl_pr_ros.nodes.qos import result_qos, service_qos
from cbcl_pr_ros.nodes.service_call import ServiceUnavailable, call_service, wait_ready
from cbcl_pr_ros.nodes.spin import spin_until
from cbcl_pr_ros.perception.tracking import DEFAULT_TOP_K
from cbcl_pr_ros.srv import Classify, ForgetClass, ListClasses, RenameClass, TeachClass
from cbcl_pr_ros.stamps import MAX_FRAME_NAME_CHARS, stamp_to_ns  # the learner refuses longer frame names

__all__ = ["LearnerClient", "LearnerUnavailable", "learner_detections_bytes"]

#: the most ranked names (and scores) an object of a kept Detections may carry: a learner sends each
#: track's best few classes (the tracker's top_k)
MAX_TOP_LABELS = DEFAULT_TOP_K
#: the most Detections kept for ``detections_after`` (about two seconds of a 30 Hz camera)
RECENT = 64


@functools.cache
def learner_detections_bytes() -> int:
    """Serialized size of the largest Detections a learner sends: as many objects as an extractor sends
    at most, each named and ranked with names of the longest a learner accepts, frame names of
    :data:`MAX_FRAME_NAME_CHARS`. Anything larger is not a learner's, and is refused before it is built."""
    from rclpy.serialization import serialize_message

    name, frame = "m" * MAX_LABEL_CHARS, "f" * MAX_FRAME_NAME_CHARS
    msg = Detections(position_frame=frame)
    msg.header.frame_id = frame
    msg.objects = [DetectedObject(label=name, top_labels=[name] * MAX_TOP_LABELS, top_scores=[1.0] * MAX_TOP_LABELS)
                   for _ in range(MAX_FRAME_OBJECTS)]
    return len(serialize_message(msg))


def _learner_sized(raw: bytes) -> Detections:
    """A Detections from its bytes, refused (ValueError) unbuilt when larger than a learner's largest."""
    most = learner_detections_bytes()
    if len(raw) > most:
        raise ValueError(f"a message of {len(raw)} bytes; a learner's is at most {most} ({MAX_FRAME_OBJECTS} "
                         f"objects of {MAX_TOP_LABELS} ranked names, names up to {MAX_LABEL_CHARS} characters)")
    return detections_from_serialized(raw)


class LearnerUnavailable(ServiceUnavailable):
    """The learner's service is not there or did not answer in time (a ServiceUnavailable, under the
    name the docs use, so ``except LearnerUnavailable`` and the traceback say the same)."""


class LearnerClient:
    """Services of the learner (``teach_class``, ``classify``, ``list_classes``, ``forget_class``,
    ``rename_class``) and its ``detections``, by relative names of ``node``'s namespace."""

    def __init__(self, node: Any, timeout_s: float = 10.0, teach_timeout_s: float = 60.0) -> None:
        from rclpy.callback_groups import ReentrantCallbackGroup

        self.node = node
        self.timeout_s, self.teach_timeout_s = float(timeout_s), float(teach_timeout_s)
        group = ReentrantCallbackGroup()
        mk = lambda t, n: node.create_client(t, n, qos_profile=service_qos(), callback_group=group)  # noqa: E731
        self._teach, self._classify = mk(TeachClass, "teach_class"), mk(Classify, "classify")
        self._list, self._forget = mk(ListClasses, "list_classes"), mk(ForgetClass, "forget_class")
        self._rename = mk(RenameClass, "rename_class")
        self._latest: Detections | None = None
        self._recent: collections.deque[Detections] = collections.deque(maxlen=RECENT)
        self._new = threading.Condition()
        node.create_subscription(Detections, "detections", self._on_detections, result_qos(2), callback_group=group,
                                 raw=True)  # bytes: a message larger than a learner's is refused unbuilt
        self._owned: tuple[Any, Any, threading.Thread] | None = None

    # ------------------------------------------------------------------ own context
    @classmethod
    def start(cls, namespace: str = "", name: str = "learner_client", domain_id: int | None = None,
              **kw: Any) -> "LearnerClient":
        """A client with its own rclpy context and node, spun in a background thread (close() ends it).
        ``domain_id`` None = ROS_DOMAIN_ID of the environment."""
        import rclpy
        from rclpy.executors import SingleThreadedExecutor


        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain_id)
        node = rclpy.create_node(name, namespace=namespace or "/", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        thread = threading.Thread(target=spin_until, args=(executor, threading.Event()), name=f"{name}-spin",
                                  daemon=True)  # ends when close() shuts the context down
        thread.start()
        client = cls(node, **kw)
        client._owned = (context, executor, thread)
        return client

    def close(self) -> None:
        if self._owned is None:
            return
        context, executor, thread = self._owned
        self._owned = None
        context.try_shutdown()
        thread.join(2.0)
        executor.shutdown()
        self.node.destroy_node()

    def __enter__(self) -> "LearnerClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ services
    def _call(self, client: Any, request: Any, timeout_s: float) -> Any:
        try:
            return call_service(client, request, timeout_s, "learner")
        except LearnerUnavailable:
            raise
        except ServiceUnavailable as exc:
            raise LearnerUnavailable(str(exc)) from None

    def wait_until_ready(self, timeout_s: float) -> None:
        """Wait for the learner's teach_class service; LearnerUnavailable after ``timeout_s``."""
        if not wait_ready(self._teach, float(timeout_s)):
            raise LearnerUnavailable(f"no learner answers '{self._teach.srv_name}' within {timeout_s:g} s")

    def teach(self, request: TeachClass.Request) -> Any:
        """Send a TeachClass request of your own (images, boxes, a mode: docs/nodes.md)."""
        return self._call(self._teach, request, self.teach_timeout_s)

    def teach_track(self, label: str, track_id: int) -> Any:
        """Learn ``label`` from the recent views of one detection's track (its ``id``)."""
        return self._call(self._teach, TeachClass.Request(label=label, track_id=int(track_id)), self.teach_timeout_s)

    def teach_frames(self, label: str, num_frames: int = 0) -> Any:
        """Learn ``label`` from the object in view of the next ``num_frames`` camera frames (0 = the default)."""
        return self._call(self._teach, TeachClass.Request(label=label, num_frames=int(num_frames)),
                          self.teach_timeout_s)

    def classify(self, top_k: int = 3) -> Any:
        """The latest camera frame's answer (label, confidence, known, top labels)."""
        return self._call(self._classify, Classify.Request(top_k=int(top_k)), self.timeout_s)

    def list_classes(self) -> list[str]:
        return [c.name for c in self._call(self._list, ListClasses.Request(), self.timeout_s).classes]

    def forget(self, label: str) -> Any:
        return self._call(self._forget, ForgetClass.Request(label=label), self.timeout_s)

    def rename(self, old: str, new: str) -> Any:
        return self._call(self._rename, RenameClass.Request(old_label=old, new_label=new), self.timeout_s)

    # ------------------------------------------------------------------ detections
    def _on_detections(self, msg: Detections | bytes) -> None:
        """Keep one Detections, built from its bytes only when it is no larger than a learner's
        largest (:func:`learner_detections_bytes`: the :data:`RECENT` kept hold at most that many
        times it) and every name in it is one a learner gives (printable, at most MAX_LABEL_CHARS,
        at most ``MAX_TOP_LABELS`` per object): a script prints what it keeps. Anything else is
        dropped with a throttled warning."""
        msg = built_within_bounds(msg, _learner_sized, self.node.get_logger(), "detections")
        if msg is None:
            return
        try:
            for o in msg.objects:
                if max(len(o.top_labels), len(o.top_scores)) > MAX_TOP_LABELS:
                    raise ValueError(f"an object with {len(o.top_labels)} ranked names and {len(o.top_scores)} "
                                     f"scores; the most is {MAX_TOP_LABELS}")
                for name in (o.label, *o.top_labels):
                    if name:
                        check_label(name)
        except ValueError as exc:
            self.node.get_logger().warning(f"detections ignored: {exc}", throttle_duration_sec=10.0)
            return
        with self._new:
            self._latest = msg
            self._recent.append(msg)
            self._new.notify_all()

    def latest_detections(self) -> Detections | None:
        """The newest Detections received (None before the first)."""
        with self._new:
            return self._latest

    def wait_for_detections(self, timeout_s: float = 10.0) -> Detections:
        """The next Detections to arrive; LearnerUnavailable after ``timeout_s``."""
        with self._new:
            before = self._latest
            if not self._new.wait_for(lambda: self._latest is not before, timeout_s):
                raise LearnerUnavailable(f"no detections within {timeout_s:g} s on "
                                         f"'{self.node.resolve_topic_name('detections')}'")
            assert self._latest is not None
            return self._latest

    def detections_after(self, stamp_ns: int, count: int, timeout_s: float) -> list[Detections]:
        """Detections of frames stamped after ``stamp_ns`` (ns, the camera's clock), once ``count`` of
        them have arrived or ``timeout_s`` has passed: possibly fewer, possibly none; oldest first."""
        def fresh() -> list[Detections]:
            return [m for m in self._recent if stamp_to_ns(m.header.stamp) > stamp_ns]

        with self._new:
            self._new.wait_for(lambda: len(fresh()) >= count, timeout_s)
            return fresh()
