"""LearnerClient's detections come from a stranger: it takes them as bytes, builds only a message of
the size a learner sends, and keeps none whose names a script could not print safely."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
from ros_testing import domain, isolated_context  # noqa: E402


def _detections(stamp_s: int, label: str = "mug", top: list[str] | None = None):
    from cbcl_pr_ros.msg import DetectedObject, Detections

    msg = Detections()
    msg.header.stamp.sec = stamp_s
    top = [label] if top is None else top
    msg.objects.append(DetectedObject(id=1, label=label, known=True, confidence=0.9, top_labels=top,
                                      top_scores=[0.9] * len(top)))
    return msg


def test_the_client_builds_only_detections_a_learner_could_have_sent():
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.msg import DetectedObject
    from cbcl_pr_ros.nodes.detections_msgs import MAX_DETECTIONS_BYTES, MAX_FRAME_OBJECTS
    from cbcl_pr_ros.nodes.learner_client import LearnerClient

    with domain() as dom, isolated_context(dom) as ctx:
        node = rclpy.create_node("client_under_test", context=ctx)
        try:
            client = LearnerClient(node)
            subs = [s for s in node.subscriptions if s.topic_name.endswith("detections")]
            assert len(subs) == 1 and subs[0].raw  # delivered unbuilt: counted before anything is built
            client._on_detections(serialize_message(_detections(1)))
            first = client.latest_detections()
            assert first is not None and [o.label for o in first.objects] == ["mug"]
            flood = _detections(2)
            flood.objects = [DetectedObject(id=i, label="junk") for i in range(MAX_FRAME_OBJECTS + 1)]
            huge = _detections(3, top=["m" * 1000] * (MAX_DETECTIONS_BYTES // 1000 + 1))
            strangers = [flood, huge,
                         _detections(4, label="mug\x1b[2J"),  # would clear the terminal it is printed on
                         _detections(5, top=["mug"] * 1000),  # far more ranked names than a learner sends
                         _detections(6, label="m" * 10_000)]
            for msg in strangers:
                client._on_detections(serialize_message(msg))
            assert client.latest_detections() is first  # nothing of theirs kept
            assert client.detections_after(0, 1, 0.0) == [first]
        finally:
            node.destroy_node()


def test_the_client_keeps_no_more_than_a_learner_sends():
    """One object with 200,000 scores passes the shared 1 MiB bound, and 64 of them held 51 MB; the
    client now refuses any message larger than a learner's largest (its caps: objects, ranked names,
    name lengths), before building it, and says why."""
    from rclpy.serialization import serialize_message

    from cbcl_pr_ros.msg import DetectedObject
    from cbcl_pr_ros.nodes.detections_msgs import MAX_DETECTIONS_BYTES, MAX_FRAME_OBJECTS
    from cbcl_pr_ros.nodes.learner_client import RECENT, LearnerClient, learner_detections_bytes

    most = learner_detections_bytes()
    assert RECENT * most < 16 << 20  # what the client may hold (it was 64 MiB)
    with domain() as dom, isolated_context(dom) as ctx:
        node = rclpy.create_node("client_under_test", context=ctx)
        try:
            client = LearnerClient(node)
            said: list[str] = []
            node.get_logger = lambda: type("L", (), {"warning": lambda _s, t, **_k: said.append(t)})()
            biggest = _detections(1)
            biggest.header.frame_id = biggest.position_frame = "f" * 256
            name = "m" * 128
            biggest.objects = [DetectedObject(id=i, label=name, known=True, confidence=0.9, top_labels=[name] * 3,
                                              top_scores=[0.3] * 3) for i in range(MAX_FRAME_OBJECTS)]
            raw = serialize_message(biggest)
            assert len(raw) == most
            client._on_detections(raw)  # a learner's at every cap is kept
            assert client.latest_detections() is not None and not said
            padded = _detections(2)
            padded.objects[0].top_scores = [0.5] * 200_000
            raw = serialize_message(padded)
            assert most < len(raw) < MAX_DETECTIONS_BYTES
            client._on_detections(raw)
            assert client.latest_detections().header.stamp.sec == 1 and len(client.detections_after(0, 9, 0.0)) == 1
            assert said and f"at most {most}" in said[-1] and f"{len(raw)} bytes" in said[-1]
        finally:
            node.destroy_node()
