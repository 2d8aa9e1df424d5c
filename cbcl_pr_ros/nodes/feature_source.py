"""Where the learner gets feature vectors for images sent in a request.

Two implementations of one small interface, injected into the learner node:

* :class:`LocalFeatureSource` calls a backbone object directly; the one-process session passes the
  extractor's own backbone, so no model is loaded twice and no vector computed twice.
* :class:`ServiceFeatureSource` calls the extractor's ``extract_features`` service, for an extractor in
  another process or on another machine (a GPU box).

Both take RGB arrays the learner already decoded (each request image is decoded once, in the
learner) and return the vectors with the backbone and preprocessing that produced them, so the
learner can check them against its memory either way. Only the service source turns the arrays into
Image messages again: the extractor is another process then.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from cbcl_pr_ros.nodes.conversions import features_from_msgs, rgb_to_image_msg
from cbcl_pr_ros.nodes.qos import service_qos
from cbcl_pr_ros.nodes.service_call import wait_ready
from cbcl_pr_ros.request_checks import quote
from cbcl_pr_ros.runtime.backbone_turns import BackboneTurns
from cbcl_pr_ros.service.teaching import FeatureSourceError  # ROS-free: the teaching plan catches it
from cbcl_pr_ros.srv import ExtractFeatures

__all__ = ["ExtractedFeatures", "FeatureSourceError", "FeatureSource", "LocalFeatureSource", "ExtractorFeatureSource",
           "ServiceFeatureSource"]


@dataclass
class ExtractedFeatures:
    features: np.ndarray  # (n, d) float32
    backbone: str
    preprocessing: str


class FeatureSource(Protocol):
    def extract(self, rgbs: Sequence[np.ndarray]) -> ExtractedFeatures:
        """Vectors for RGB arrays (h, w, 3) uint8 (same order); FeatureSourceError when impossible."""


class LocalFeatureSource:
    """Computes vectors with a backbone object living in this process.

    ``lock`` serialises calls when the same backbone also serves the camera stream (ONNX Runtime and
    torch sessions are thread-safe, but two concurrent batches would only compete for the same cores);
    the extractor's :class:`~cbcl_pr_ros.runtime.backbone_turns.BackboneTurns` lets its frames go first.
    """

    def __init__(self, backbone: Any, lock: threading.Lock | BackboneTurns | None = None) -> None:
        for attr in ("extract", "name", "preprocessing_id"):
            if not hasattr(backbone, attr):
                raise TypeError(f"backbone object lacks '{attr}': {type(backbone).__name__}")
        self.backbone = backbone
        self.lock = lock or threading.Lock()

    def extract(self, rgbs: Sequence[np.ndarray]) -> ExtractedFeatures:
        if len(rgbs) == 0:
            raise FeatureSourceError("no images given")
        rgbs = list(rgbs)
        if isinstance(self.lock, BackboneTurns):  # the camera stream's backbone: its frames go first
            feats = self.lock.extract(self.backbone, rgbs)
        else:
            with self.lock:
                feats = np.asarray(self.backbone.extract(rgbs), dtype=np.float32)
        return ExtractedFeatures(feats, self.backbone.name, self.backbone.preprocessing_id)


class ExtractorFeatureSource:
    """The backbone of a feature_extractor node in this process, looked up at every call.

    The extractor is a lifecycle node: it loads its backbone at configure and frees it at cleanup, so a
    reference taken when the session starts would go stale (or be None with ``autostart`` false).
    """

    def __init__(self, extractor: Any) -> None:
        self.extractor = extractor

    def extract(self, rgbs: Sequence[np.ndarray]) -> ExtractedFeatures:
        backbone = self.extractor.backbone
        if backbone is None:
            raise FeatureSourceError(f"the feature_extractor of this process is {self.extractor.phase}: no "
                                     "backbone loaded (ros2 lifecycle set <it> configure)")
        return LocalFeatureSource(backbone, self.extractor.backbone_lock).extract(rgbs)


class ServiceFeatureSource:
    """Calls an ExtractFeatures service (the extractor node, anywhere on the ROS graph).

    The client must live in a callback group that can run while the caller's service callback waits
    (the learner gives it its own group under a MultiThreadedExecutor).
    """

    def __init__(self, node: Any, service_name: str, timeout_s: float = 10.0,
                 callback_group: Any = None) -> None:
        self.service_name = service_name
        self.timeout_s = float(timeout_s)
        self._srv_type = ExtractFeatures
        # service_qos: a deep reply history, so other clients' replies cannot push ours out of it
        self.client = node.create_client(ExtractFeatures, service_name, qos_profile=service_qos(),
                                         callback_group=callback_group)

    def extract(self, rgbs: Sequence[np.ndarray]) -> ExtractedFeatures:
        if len(rgbs) == 0:
            raise FeatureSourceError("no images given")
        if not wait_ready(self.client, min(self.timeout_s, 5.0)):
            raise FeatureSourceError(
                f"feature extractor service '{self.client.srv_name}' is not available: is the "
                "feature_extractor node running (same namespace / ROS_DOMAIN_ID)?")
        req = self._srv_type.Request()
        req.images = [rgb_to_image_msg(x) for x in rgbs]  # another process: the arrays travel as messages
        done = threading.Event()
        future = self.client.call_async(req)
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(self.timeout_s):
            self.client.remove_pending_request(future)
            raise FeatureSourceError(f"feature extractor did not answer within {self.timeout_s:.1f} s")
        resp = future.result()
        if resp is None or not resp.success:  # any server of that name may answer: its words are quoted, cut
            raise FeatureSourceError(f"feature extractor refused the images: "
                                     f"{quote(getattr(resp, 'message', 'no response'), 300)}")
        try:
            feats = features_from_msgs(resp.features)
        except ValueError as exc:
            raise FeatureSourceError(f"feature extractor answered unusable vectors: {exc}") from exc
        if feats.shape[0] != len(rgbs):
            raise FeatureSourceError(f"feature extractor answered {feats.shape[0]} vectors for "
                                     f"{len(rgbs)} images")
        first = resp.features[0]
        return ExtractedFeatures(feats, first.backbone, first.preprocessing)
