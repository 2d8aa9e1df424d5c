"""``replay_session``: play a teaching-session bag into running nodes, as it happened.

Camera (and any other) topics are published as the recorded CDR bytes at the recorded timing
(``--rate 1`` real time, ``--rate 2`` twice as fast, ``--fast`` as fast as possible). Teaching
events are re-issued as the learner's service calls, in recorded order and never before their
recorded time: TEACH → ``teach_class`` with the recorded frames as images, CLASSIFY →
``classify`` with the recorded frame, FORGET/RENAME → ``forget_class``/``rename_class``. Each call
waits for the previous one's answer, as a person teaching the robot would.

Every live answer is published again as a ``TeachingEvent`` on ``--events-out`` (so a recorder
running beside the replay captures a bag with the live answers) and summarised in a JSON report:
publication timing errors (p50/p95/max), the live predictions, their accuracy against the
recorded ground truth and their agreement with the answers recorded in the bag.

What the replay teaches is temporary unless ``--keep-taught``: the learner's memory is saved to a
file of its own before the first event and loaded back when the replay ends, and the log says so
(``nodes/replay_memory.py``); a recorded session's classes do not stay in the robot's memory.

The planning is pure (``cbcl_pr_ros.bags.replay_plan``); this module only executes it.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import rclpy
from ament_index_python.packages import get_resource
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image, RegionOfInterest

from cbcl_pr_ros.bags.config import checked_output_file, load_bag_defaults
from cbcl_pr_ros.bags.errors import BagFormatError
from cbcl_pr_ros.bags.records import EventKind, TeachingEventRecord
from cbcl_pr_ros.bags.replay_plan import PlannedEvent, ReplayPlan, build_plan, kind_service, timing_summary
from cbcl_pr_ros.msg import TeachingEvent
from cbcl_pr_ros.nodes.conversions import ns_to_stamp
from cbcl_pr_ros.nodes.qos import service_qos
from cbcl_pr_ros.nodes.service_call import wait_ready
from cbcl_pr_ros.nodes.replay_memory import TemporaryMemory
from cbcl_pr_ros.nodes.spin import own_args, spinning
from cbcl_pr_ros.srv import Classify, ForgetClass, LoadMemory, RenameClass, SaveMemory, TeachClass

__all__ = ["LiveAnswer", "ReplayNode", "ReplayReport", "main", "message_class", "run_replay",
           "teaching_event_msg"]
_LOG = logging.getLogger(__name__)
_SERVICES = {"teach_class": TeachClass, "classify": Classify, "forget_class": ForgetClass,
             "rename_class": RenameClass}


_MSGTYPE = re.compile(r"([A-Za-z][A-Za-z0-9_]{0,99})/msg/([A-Z][A-Za-z0-9]{0,99})")


def _installed_interface(pkg: str, name: str) -> bool:
    """Whether the ament index lists ``pkg/msg/name`` (read from files: nothing is imported)."""
    try:
        content, _ = get_resource("rosidl_interfaces", pkg)
    except (LookupError, ValueError, OSError):
        return False
    return any(line.strip() in (f"msg/{name}.msg", f"msg/{name}.idl") for line in content.splitlines())


def message_class(msgtype: str, bag: Path | str = "", topic: str | None = None) -> type:
    """rclpy class of a ``pkg/msg/Name`` type; BagFormatError naming the topic when not installed.

    The type name comes from a bag or from another node on the graph: only a package the ament
    index lists as defining that message is imported, so a name such as ``setup/msg/X`` never runs
    a module that happens to be importable."""
    match = _MSGTYPE.fullmatch(msgtype) if isinstance(msgtype, str) else None
    if match is None or not _installed_interface(*match.groups()):
        raise BagFormatError(bag, f"message type {str(msgtype)[:200]!r} is not installed here, cannot publish it",
                             topic) from None
    pkg, name = match.groups()
    try:
        return getattr(importlib.import_module(f"{pkg}.msg"), name)
    except (ImportError, AttributeError, ValueError):
        raise BagFormatError(bag, f"message type {msgtype!r} is not installed here, cannot publish it",
                             topic) from None


@dataclass
class LiveAnswer:
    """What the live learner answered to one re-issued event."""

    kind: str
    label: str
    offset_s: float
    success: bool
    message: str
    predicted_label: str = ""
    confidence: float = 0.0
    known: bool = False
    recorded_label: str = ""
    recorded_success: bool = False
    call_s: float = 0.0


@dataclass
class ReplayReport:
    bag: str
    rate: float | None
    published: dict[str, int]
    publish_timing: dict[str, float]
    answers: list[LiveAnswer] = field(default_factory=list)
    complete: bool = True
    error: str = ""

    def accuracy(self) -> float | None:
        scored = [a for a in self.answers if a.kind == "CLASSIFY" and a.label]
        if not scored:
            return None
        return sum(a.success and a.known and a.predicted_label == a.label for a in scored) / len(scored)

    def agreement_with_recording(self) -> float | None:
        rec = [a for a in self.answers if a.kind == "CLASSIFY" and a.recorded_success]
        if not rec:
            return None
        return sum(a.predicted_label == a.recorded_label for a in rec) / len(rec)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["accuracy"] = self.accuracy()
        d["agreement_with_recording"] = self.agreement_with_recording()
        return d


def _qos(reliable: bool = True, depth: int = 10) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.VOLATILE)


class ReplayNode(Node):
    """Publishers for the plan's topics, clients of the learner's services, the live-event publisher."""

    def __init__(self, plan: ReplayPlan, *, learner_ns: str = "", events_out: str = "teaching_events",
                 reliable: bool = True, node_name: str = "bag_replay", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.plan = plan
        self._group = ReentrantCallbackGroup()
        self.pubs = {t: self.create_publisher(message_class(mt, plan.bag, t), t, _qos(reliable))
                     for t, mt in plan.topics.items()}
        prefix = "/" + learner_ns.strip("/") + "/" if learner_ns.strip("/") else ""
        needed = {kind_service(pe.event.kind) for pe in plan.events}
        self.clients_ = {name: self.create_client(_SERVICES[name], prefix + name,
                                                     qos_profile=service_qos(), callback_group=self._group)
                         for name in sorted(needed)}
        self.events_pub = (self.create_publisher(TeachingEvent, events_out, _qos(True, 100))
                           if events_out else None)
        # Requests are built (frames deserialized) before the replay starts, so the worker thread
        # does little Python work while frames are being published on time.
        self._requests = [self._request(pe) for pe in plan.events]

    def wait_for_services(self, timeout_s: float) -> None:
        for name, client in self.clients_.items():
            if not wait_ready(client, timeout_s):
                raise TimeoutError(f"service {client.srv_name} not available after {timeout_s:.0f} s "
                                   "(is the learner running, in this namespace and ROS_DOMAIN_ID?)")

    def wait_for_subscribers(self, timeout_s: float, minimum: int = 1) -> dict[str, int]:
        """Give discovery a moment (until every topic has ``minimum`` subscribers or the timeout),
        so the first frames are not published to nobody."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and not all(p.get_subscription_count() >= minimum
                                                 for p in self.pubs.values()):
            time.sleep(0.05)
        return {t: p.get_subscription_count() for t, p in self.pubs.items()}

    # -- service calls --------------------------------------------------------------------------
    def _request(self, pe: PlannedEvent) -> Any:
        ev = pe.event
        images = [deserialize_message(b, Image) for b in pe.frames]
        if ev.kind == EventKind.TEACH:  # as taught: mode, boxes, and a track's frames from the stream
            req = TeachClass.Request(label=ev.label, mode=ev.mode, track_id=ev.track_id, rois=_rois(ev.rois))
            if ev.track_id >= 0:
                req.num_frames = len(pe.frames)
            else:
                req.images = images
        elif ev.kind == EventKind.CLASSIFY:
            req = Classify.Request(image=images[0], top_k=5, scope=ev.mode)
        elif ev.kind == EventKind.FORGET:
            req = ForgetClass.Request()
            req.label = ev.label
        else:
            req = RenameClass.Request()
            req.old_label, req.new_label = ev.label, ev.new_label
        return req

    def call(self, index: int, timeout_s: float) -> LiveAnswer:
        """Re-issue the plan's event ``index`` and wait for its answer."""
        pe = self.plan.events[index]
        ev = pe.event
        client = self.clients_[kind_service(ev.kind)]
        t0 = time.perf_counter()
        done = threading.Event()
        future = client.call_async(self._requests[index])
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            client.remove_pending_request(future)
            raise TimeoutError(f"{client.srv_name} did not answer within {timeout_s:.0f} s "
                               f"({ev.kind.name} {ev.label!r})")
        resp = future.result()
        ans = LiveAnswer(kind=ev.kind.name, label=ev.label, offset_s=pe.offset_s,
                         success=bool(resp.success), message=str(resp.message),
                         recorded_label=ev.predicted_label, recorded_success=ev.success,
                         call_s=time.perf_counter() - t0)
        if ev.kind == EventKind.CLASSIFY:
            ans.predicted_label, ans.confidence, ans.known = resp.label, float(resp.confidence), bool(resp.known)
        self._publish_event(ev, ans)
        return ans

    def temporary_memory(self, learner_ns: str, timeout_s: float) -> TemporaryMemory:
        """The learner's memory kept aside during the replay (nodes/replay_memory.py)."""
        prefix = "/" + learner_ns.strip("/") + "/" if learner_ns.strip("/") else ""
        types = {"save_memory": SaveMemory, "load_memory": LoadMemory}
        clients = {n: self.create_client(t, prefix + n, qos_profile=service_qos(), callback_group=self._group)
                   for n, t in types.items()}

        def call(name: str, request: Any) -> Any:
            client = clients[name]
            if not wait_ready(client, timeout_s):
                raise TimeoutError(f"service {client.srv_name} not available after {timeout_s:.0f} s")
            done = threading.Event()
            future = client.call_async(request)
            future.add_done_callback(lambda _f: done.set())
            if not done.wait(timeout_s):
                client.remove_pending_request(future)
                raise TimeoutError(f"{client.srv_name} did not answer within {timeout_s:.0f} s")
            return future.result()

        return TemporaryMemory(call, lambda name: types[name].Request(), _LOG.warning)

    def _publish_event(self, ev: TeachingEventRecord, ans: LiveAnswer) -> None:
        if self.events_pub is None:
            return
        live = replace(ev, predicted_label=ans.predicted_label, confidence=ans.confidence,
                       known=ans.known, success=ans.success)
        self.events_pub.publish(teaching_event_msg(live))


def _rois(rois: Any) -> list[RegionOfInterest]:
    return [RegionOfInterest(x_offset=x, y_offset=y, width=w, height=h) for x, y, w, h in rois]


def teaching_event_msg(record: TeachingEventRecord) -> TeachingEvent:
    """The ``cbcl_pr_ros/msg/TeachingEvent`` of a record: what any teacher script publishes on
    ``teaching_events`` so that ``record_session`` captures its session."""
    msg = TeachingEvent()
    msg.header.stamp = ns_to_stamp(record.stamp_ns)
    msg.header.frame_id = record.frame_id
    msg.kind, msg.label, msg.new_label = int(record.kind), record.label, record.new_label
    msg.frame_stamps = [ns_to_stamp(s) for s in record.frame_stamps_ns]
    msg.predicted_label, msg.confidence = record.predicted_label, float(record.confidence)
    msg.known, msg.success = bool(record.known), bool(record.success)
    msg.mode, msg.track_id, msg.view_seed = int(record.mode), int(record.track_id), int(record.view_seed)
    msg.rois = _rois(record.rois)
    return msg


def _sleep_until(t_target: float) -> None:
    """Sleep to within ~1 ms of a perf_counter instant, then spin for the rest (timing precision)."""
    while True:
        left = t_target - time.perf_counter()
        if left <= 0:
            return
        if left > 0.002:
            time.sleep(left - 0.0015)


def run_replay(node: ReplayNode, *, call_timeout_s: float = 120.0) -> ReplayReport:
    """Execute ``node.plan``: publications on this thread, service calls on a worker thread.

    The node must be spun by an executor in another thread (the service answers arrive there).
    Publication times are compared with the plan's offsets: ``publish_timing`` (ms).
    """
    plan = node.plan
    report = ReplayReport(str(plan.bag), plan.rate, {t: 0 for t in plan.topics}, {})
    errors: list[float] = []
    failure: list[BaseException] = []
    start = time.perf_counter() + 0.05

    def worker() -> None:
        try:
            for i, pe in enumerate(plan.events):
                _sleep_until(start + pe.offset_s)
                report.answers.append(node.call(i, call_timeout_s))
        except BaseException as exc:  # reported below, never swallowed
            failure.append(exc)

    thread = threading.Thread(target=worker, name="replay-events", daemon=True)
    # A short GIL switch interval lets the publishing thread run within ~1 ms of its wake-up
    # while the executor and the service worker are busy (the default 5 ms shows in the timing).
    old_switch = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    thread.start()
    for m in plan.messages:
        if failure:
            break
        _sleep_until(start + m.offset_s)
        errors.append(time.perf_counter() - start - m.offset_s)  # lateness of the publish call
        node.pubs[m.topic].publish(m.data)
        report.published[m.topic] += 1
    thread.join()
    sys.setswitchinterval(old_switch)
    report.publish_timing = timing_summary(errors)
    if failure:
        report.complete = False
        report.error = f"{type(failure[0]).__name__}: {failure[0]}"
    return report


def parse_args(argv: list[str]) -> argparse.Namespace:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--bag-config", default=None)
    d = load_bag_defaults("replay", pre.parse_known_args(argv)[0].bag_config)
    ap = argparse.ArgumentParser(prog="replay_session", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bag-config", default=None, help="defaults file (default: config/bags.yaml)")
    ap.add_argument("bag", help="bag directory (metadata.yaml + .mcap/.db3)")
    speed = ap.add_mutually_exclusive_group()
    speed.add_argument("--rate", type=float, default=float(d.get("rate", 1.0)), help="playback rate (1 = as recorded)")
    speed.add_argument("--fast", action="store_true", help="as fast as possible")
    ap.add_argument("--topics", nargs="*", default=None, help="topics to publish (default: all but events)")
    ap.add_argument("--events-topic", default=d.get("events_topic", "/teaching_events"),
                    help="teaching events topic in the bag")
    ap.add_argument("--camera-topic", default=None, help="image topic the events' frames come from")
    ap.add_argument("--no-events", action="store_true", help="publish topics only, no service calls")
    ap.add_argument("--learner-ns", default="", help="namespace of the learner's services")
    ap.add_argument("--events-out", default=d.get("events_out", "teaching_events"),
                    help="topic for the live answers as TeachingEvents ('' = none)")
    ap.add_argument("--best-effort", action="store_true", help="publish with BEST_EFFORT reliability")
    ap.add_argument("--service-timeout", type=float, default=float(d.get("service_timeout_s", 30.0)), help="seconds to wait for the services")
    ap.add_argument("--call-timeout", type=float, default=float(d.get("call_timeout_s", 120.0)), help="seconds to wait for one answer")
    ap.add_argument("--discovery-wait", type=float, default=float(d.get("discovery_wait_s", 1.0)),
                    help="seconds to wait for subscribers before the first publication")
    ap.add_argument("--min-subscribers", type=int, default=1,
                    help="subscribers per topic to wait for (e.g. 2: the extractor and a recorder)")
    ap.add_argument("--report", default=None, help="write the JSON report here")
    ap.add_argument("--keep-taught", action="store_true",
                    help="keep what the replay teaches in the learner's memory (default: the memory is saved "
                         "before the replay and loaded back after it)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv if argv is None else argv)
    try:
        opts = parse_args(own_args(argv, "replay_session")[1:])
    except ValueError as exc:  # the defaults file (--bag-config): unreadable, or a value of the wrong type
        print(f"replay_session: {exc}", file=sys.stderr)
        return 2
    try:
        report_file = checked_output_file(opts.report) if opts.report else None
        plan = build_plan(opts.bag, None if opts.fast else opts.rate, opts.topics, opts.events_topic,
                          opts.camera_topic, with_events=not opts.no_events)
    except (BagFormatError, ValueError) as exc:
        print(f"replay_session: {exc}", file=sys.stderr)
        return 2
    _LOG.info("replaying %s: %d messages on %s, %d teaching events, %.1f s at %s",
              opts.bag, len(plan.messages), ", ".join(plan.topics) or "no topics", len(plan.events),
              plan.duration_s, "full speed" if plan.rate is None else f"{plan.rate:g}x")
    try:
        report = _replay(plan, opts, argv)
    except TimeoutError as exc:
        print(f"replay_session: {exc}", file=sys.stderr)
        return 3
    except (KeyboardInterrupt, ExternalShutdownException):
        print("replay_session: interrupted; the replay is incomplete", file=sys.stderr)
        return 130
    d = report.to_dict()
    d["bag_duration_s"] = plan.bag_duration_s
    written = True
    if report_file is not None:
        try:
            report_file.write_text(json.dumps(d, indent=2), encoding="utf8")
        except OSError as exc:
            written = False
            print(f"replay_session: cannot write the report to {report_file}: {exc.strerror or exc}", file=sys.stderr)
    return _print_report(report) or (0 if written else 2)


def _replay(plan: Any, opts: argparse.Namespace, argv: list[str]) -> ReplayReport:
    """Start the replay node, wait for the learner and the subscribers, play the plan."""
    with rclpy.init(args=argv):
        node = ReplayNode(plan, learner_ns=opts.learner_ns, events_out=opts.events_out,
                          reliable=not opts.best_effort)
        try:
            # the spin threads are out of rclpy's wait before the context goes down (spin.spinning),
            # else the process aborts at exit ("terminate called without an active exception")
            with spinning([node], 4):
                node.wait_for_services(opts.service_timeout)
                node.wait_for_subscribers(opts.discovery_wait, opts.min_subscribers)
                if opts.keep_taught or opts.no_events or not node.plan.events:
                    return run_replay(node, call_timeout_s=opts.call_timeout)
                with node.temporary_memory(opts.learner_ns, opts.service_timeout):
                    return run_replay(node, call_timeout_s=opts.call_timeout)
        finally:
            node.destroy_node()


def _print_report(report: ReplayReport) -> int:
    """The replay's answers and figures on stdout; 1 when the replay did not complete."""
    t = report.publish_timing
    print(f"published {sum(report.published.values())} messages; timing error p50 {t['p50_ms']:.2f} ms, "
          f"p95 {t['p95_ms']:.2f} ms, max {t['max_ms']:.2f} ms")
    for a in report.answers:
        what = (f"-> {a.predicted_label or 'unknown'} ({a.confidence:.2f})" if a.kind == "CLASSIFY"
                else a.message)
        print(f"  {a.offset_s:8.2f} s {a.kind:8s} {a.label:16s} {what}")
    acc, agr = report.accuracy(), report.agreement_with_recording()
    if acc is not None:
        print(f"live accuracy vs recorded ground truth: {acc:.3f}")
    if agr is not None:
        print(f"agreement with the answers recorded in the bag: {agr:.3f}")
    if not report.complete:
        print(f"replay_session: INCOMPLETE: {report.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
