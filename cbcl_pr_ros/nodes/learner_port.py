"""What the ROS-free teaching and Classify code asks of the learner node, in one adapter.

:class:`~cbcl_pr_ros.service.teaching.Teacher` (TeachClass) and
:func:`~cbcl_pr_ros.service.classify_scope.classify_vectors` (Classify) decide without ROS; they reach
the node only through a port: the run-time teaching parameters, the backbone (the extractor's
service, or an injected source in one process), the stream frames waiting requests collect, the
node clock, topic names for messages, and the commit of a teach under the node's commit lock.
:class:`LearnerPort` implements both ports over a :class:`~.learner.LearnerNode`.
"""
from __future__ import annotations

from typing import Any

from cbcl_pr_ros.nodes.camera_hint import image_topics, likely_colour_topic
from cbcl_pr_ros.nodes.feature_source import FeatureSourceError
from cbcl_pr_ros.nodes.lifecycle import ACTIVE
from cbcl_pr_ros.service.controller import LearnerController, TeachOutcome
from cbcl_pr_ros.service.teaching import TeachSettings
from cbcl_pr_ros.service.validation import check_count

__all__ = ["LearnerPort"]

# the teaching parameters that may be set at run time (read at each request)
_SETTABLE_TEACH_PARAMS = ("teach_from", "crop_margin", "teach_num_frames", "teach_timeout_s", "teach_views",
                          "teach_view_spread", "teach_negatives")


class LearnerPort:
    """The Teacher's port (``service.teaching.TeachingPort``) and Classify's
    (``service.classify_scope.ClassifyPort``) over one learner node."""

    def __init__(self, node: Any) -> None:
        self.node = node

    # ------------------------------------------------------------------ both
    def extract(self, rgbs: list) -> Any:
        """(n, d) vectors of RGB arrays the request code decoded (once) via the feature source;
        FeatureSourceError on failure. The wait uses the current ``extract_timeout_s`` (it may be
        changed at run time)."""
        node = self.node
        check_count(len(rgbs), node.limits.max_images_per_request, "images")
        if hasattr(node.feature_source, "timeout_s"):
            node.feature_source.timeout_s = float(node.get_parameter("extract_timeout_s").value)
        ex = node.feature_source.extract(rgbs)
        if ex.backbone != node.backbone_name:
            raise FeatureSourceError(f"the extractor uses backbone '{ex.backbone}', this learner "
                                     f"'{node.backbone_name}': set the same 'backbone' parameter on both")
        return ex.features

    # ------------------------------------------------------------------ the Teacher's (service/teaching)
    def teach_settings(self) -> TeachSettings:
        node = self.node
        now = {name: node.get_parameter(name).value for name in _SETTABLE_TEACH_PARAMS}
        return TeachSettings.from_params({**node.params, **now})

    def collect(self, n: int, timeout_s: float, stream: str) -> list[Any]:
        node = self.node
        return node.waiters.collect(stream, n, timeout_s, lambda: node.phase == ACTIVE, now=node.now_s)

    def now_s(self) -> float:
        return self.node.now_s()

    def topic(self, stream: str) -> str:
        """A stream's resolved topic name (also while the subscription is released)."""
        name = self.node.params["object_features_topic" if stream == "objects" else "features_topic"]
        return self.node.resolve_topic_name(name)

    def upstream(self, stream: str) -> str:
        """Who feeds a stream and from which camera, for a failure's message: the nodes publishing its
        topic and the image topics they read (the camera a person has to check), from the ROS graph."""
        topic = self.topic(stream)
        infos = self.node.get_publishers_info_by_topic(topic)
        if not infos:
            return f"nobody publishes on '{topic}': is the feature_extractor running, in this namespace?"
        parts = []
        for info in infos[:3]:
            subs = self.node.get_subscriber_names_and_types_by_node(info.node_name, info.node_namespace)
            cams = image_topics(subs) + [n for n, t in subs if "sensor_msgs/msg/CompressedImage" in t]
            cam = likely_colour_topic(cams) or (cams[0] if cams else "")
            who = f"{info.node_namespace.rstrip('/')}/{info.node_name}"
            parts.append(f"{who}, which reads the camera on '{cam}'" if cam else f"{who}, which reads no camera topic")
        return f"'{topic}' comes from {'; '.join(parts)}: is that camera publishing?"

    def commit(self, c: LearnerController, label: str, feats: Any, source: str, views: Any,
               negatives: Any = None) -> TeachOutcome:
        """Teach under the commit lock, after checking that the node still serves this memory;
        ``negatives``: the other objects of the teaching frames (:meth:`LearnerController.teach`)."""
        with self.node.memory_services.committing("teach_class", expected=c) as (_, refused):
            if refused:
                return c.refused(f"nothing learned: {refused}")
            outcome = c.teach(label, feats, source, views, negatives=negatives)
        self.node.get_logger().info(outcome.message)
        return outcome

    # ------------------------------------------------------------------ Classify's (service/classify_scope)
    def latest_features(self) -> Any:
        return self.node.streams.latest_features

    def no_frame_reason(self) -> str:
        if self.node.phase != ACTIVE:
            return "the node is inactive, so it reads no camera frames: send an image or a feature vector"
        return (f"no camera frame received on '{self.topic('features')}' yet ({self.upstream('features')}): "
                "send an image, or start the camera and feature_extractor")
