"""Message <-> Python conversions and response assembly, kept out of the node callbacks.

Everything here works on message objects without a ROS graph (no ``rclpy.init``), so the unit tests
exercise it directly; the nodes only call these functions and publish.
"""
from __future__ import annotations

import array
from typing import Any, Iterable, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from cbcl_pr_ros.features import compressed_to_rgb, image_to_rgb, rgb_to_image_fields
from cbcl_pr_ros.msg import (
    ClassInfo,
    DetectedObject,
    FeatureVector,
    LearnerStatus,
    Prediction as PredictionMsg,
)
from cbcl_pr_ros.service.classify_scope import ClassifyRequest, object_in_view
from cbcl_pr_ros.service.teaching import TeachRequest
from cbcl_pr_ros.request_checks import RequestLimits, features_from_msgs  # ROS-free: the service checks vectors too
from cbcl_pr_ros.stamps import split_ns, stamp_to_ns  # noqa: F401 (stamp_to_ns: re-exported)
from cbcl_pr_ros.plurals import counted

__all__ = [
    "StampKey",
    "stamp_key",
    "stamp_to_ns",
    "ns_to_stamp",
    "copy_header",
    "image_msg_to_rgb",
    "compressed_msg_to_rgb",
    "compressed_size",
    "check_pixels",
    "rgb_to_image_msg",
    "make_feature_msg",
    "features_from_msgs",
    "prediction_to_msg",
    "fill_classify_response",
    "teach_request_from_msg",
    "fill_teach_response",
    "fill_outcome_response",
    "fill_list_response",
    "classify_request_from_msg",
    "fill_classify_answer",
    "fill_save_response",
    "class_info_msgs",
    "make_status_msg",
]

StampKey = tuple[int, int, str]


def stamp_key(header: Header) -> StampKey:
    """Key that identifies one camera frame: (sec, nanosec, frame_id)."""
    return (int(header.stamp.sec), int(header.stamp.nanosec), str(header.frame_id))


def ns_to_stamp(ns: int) -> Time:
    """The Time message of a nanosecond count (``cbcl_pr_ros.stamps`` holds the arithmetic)."""
    sec, nanosec = split_ns(ns)
    return Time(sec=sec, nanosec=nanosec)


def copy_header(header: Header) -> Header:
    """A new Header with the same stamp and frame (messages are mutable; never share one)."""
    return Header(stamp=Time(sec=header.stamp.sec, nanosec=header.stamp.nanosec),
                  frame_id=header.frame_id)


def image_msg_to_rgb(msg: Image, max_pixels: int = RequestLimits.max_image_pixels) -> np.ndarray:
    """Decode a sensor_msgs/Image of any supported encoding to RGB uint8 (h, w, 3).

    Raises ValueError naming the encoding or size when the message cannot be decoded, and before any
    work for a frame of more than ``max_pixels`` (width x height): whoever publishes on a camera topic
    chooses the size, and every later step (crops, resizing, drawing, JPEG for the page) scales with it.
    """
    check_pixels("image", int(msg.width), int(msg.height), max_pixels)
    return image_to_rgb(msg.encoding, int(msg.height), int(msg.width), int(msg.step),
                        msg.data, bool(msg.is_bigendian))


def compressed_msg_to_rgb(msg: CompressedImage, max_pixels: int = RequestLimits.max_image_pixels) -> np.ndarray:
    """Decode a sensor_msgs/CompressedImage (PNG or JPEG: the formats the message documents) to RGB
    uint8; ValueError for another format and for a picture of more than ``max_pixels`` (the size its
    header states, read before decoding: a 261 KB PNG of 16384x16384 decoded to 768 MiB)."""
    data = bytes(msg.data)
    width, height = compressed_size(data)
    check_pixels("compressed image", width, height, max_pixels)
    return compressed_to_rgb(msg.format, data)


def check_pixels(what: str, width: int, height: int, max_pixels: int) -> None:
    """ValueError for a picture of more than ``max_pixels`` (width x height), before any work on it."""
    if width * height > max_pixels:
        raise ValueError(f"{what} of {width}x{height} pixels; the most decoded is {max_pixels} "
                         "(parameter max_image_pixels)")


_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG_FRAMES = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def compressed_size(data: bytes) -> tuple[int, int]:
    """(width, height) a PNG's or JPEG's header states; ValueError for another format (OpenCV would
    decode WebP, TIFF, BMP and more, each without a size read first) or a PNG or JPEG that states none."""
    if data.startswith(_PNG):
        if data[12:16] != b"IHDR" or len(data) < 24:
            raise ValueError("PNG without its header (IHDR)")
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if not data.startswith(b"\xff\xd8"):
        raise ValueError(f"compressed image is neither PNG nor JPEG (it starts with {data[:8].hex() or 'nothing'}); "
                         "only those two are decoded, as sensor_msgs/CompressedImage documents")
    i = 2
    while i + 4 <= len(data):  # marker segments up to the frame header (SOF): FF, marker, 2-byte length
        if data[i] != 0xFF:
            break
        marker = data[i + 1]
        if marker == 0xFF or marker == 0x01 or 0xD0 <= marker <= 0xD8:  # fill byte, markers without length
            i += 1 if marker == 0xFF else 2
            continue
        if marker in _JPEG_FRAMES and i + 9 <= len(data):
            return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
        if marker in (0xD9, 0xDA):  # end of image, or a scan, before any frame header
            break
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    raise ValueError("JPEG without a readable frame header")


def rgb_to_image_msg(rgb: np.ndarray, header: Header | None = None, encoding: str = "rgb8") -> Image:
    """A sensor_msgs/Image holding ``rgb`` (h, w, 3) uint8, encoded as ``encoding``."""
    fields = rgb_to_image_fields(rgb, encoding)
    msg = Image()
    if header is not None:
        msg.header = copy_header(header)
    msg.height, msg.width = fields["height"], fields["width"]
    msg.encoding = fields["encoding"]
    msg.is_bigendian = fields["is_bigendian"]
    msg.step = fields["step"]
    # array('B') from bytes is a memcpy; assigning a plain list would validate byte by byte.
    msg.data = array.array("B", fields["data"])
    return msg


def make_feature_msg(header: Header, backbone: str, preprocessing: str,
                     vector: np.ndarray) -> FeatureVector:
    """FeatureVector carrying the source image's header, so the learner needs nothing else."""
    vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    msg = FeatureVector()
    msg.header = copy_header(header)
    msg.backbone = backbone
    msg.preprocessing = preprocessing
    msg.dimension = int(vec.size)
    msg.values = array.array("f", vec.tobytes())
    return msg


def prediction_to_msg(header: Header, pred: Any, model_version: int) -> PredictionMsg:
    """Prediction.msg from a core Prediction (label, confidence, known, top_labels, top_scores)."""
    msg = PredictionMsg()
    msg.header = copy_header(header)
    msg.label = str(pred.label)
    msg.confidence = float(pred.confidence)
    msg.known = bool(pred.known)
    msg.class_labels = [str(x) for x in pred.top_labels]
    msg.scores = [float(x) for x in pred.top_scores]
    msg.model_version = int(model_version)
    return msg


def fill_classify_response(resp: Any, *, success: bool, message: str, pred: Any = None,
                           header: Header | None = None, model_version: int = 0,
                           box: Sequence[int] | None = None) -> Any:
    """Fill a Classify response; ``pred`` is a core Prediction or None when there is no answer;
    ``box`` (x0, y0, x1, y1) when the answer is for one object of a sent image (then also in ``objects``)."""
    resp.success = bool(success)
    resp.message = message
    resp.model_version = int(model_version)
    if header is not None:
        resp.header = copy_header(header)
    if pred is not None:
        resp.label = str(pred.label)
        resp.confidence = float(pred.confidence)
        resp.known = bool(pred.known)
        resp.top_labels = [str(x) for x in pred.top_labels]
        resp.top_scores = [float(x) for x in pred.top_scores]
        if box is not None:
            o = DetectedObject(label=resp.label, known=resp.known, confidence=resp.confidence,
                               top_labels=list(resp.top_labels), top_scores=list(resp.top_scores))
            o.x0, o.y0, o.x1, o.y1 = (int(v) for v in box)
            o.centroid.x = o.centroid.y = o.centroid.z = float("nan")  # a sent image has no depth
            o.position.x = o.position.y = o.position.z = float("nan")
            o.size.x = o.size.y = o.size.z = float("nan")
            resp.objects = [o]
    return resp


def fill_classify_from_detections(resp: Any, det: Any, image_shape: Sequence[int] | None, top_k: int = 0) -> Any:
    """Answer a Classify with the latest Detections: every object in ``objects``, and on top the
    object in view (largest, most central), so Classify and ``detections`` give one answer."""
    k = max(1, int(top_k) or 5)
    resp.success = True
    resp.model_version = int(det.model_version)
    resp.header = copy_header(det.header)
    resp.objects = list(det.objects)
    boxes = [(o.x0, o.y0, o.x1, o.y1) for o in det.objects]
    i = object_in_view(boxes, image_shape) if image_shape is not None else (0 if boxes else None)
    if i is None:
        resp.label, resp.known, resp.confidence = "", False, 0.0
        resp.message = "no object in view in the latest camera frame"
        return resp
    o = det.objects[i]
    resp.label, resp.known, resp.confidence = o.label, bool(o.known), float(o.confidence)
    resp.top_labels, resp.top_scores = list(o.top_labels)[:k], [float(v) for v in o.top_scores][:k]
    name = f"'{o.label}'" if o.known else "unknown"
    resp.message = f"{counted(len(boxes), 'object')} in view; the one in view (track {o.id}) is {name}"
    return resp


def teach_request_from_msg(req: Any) -> TeachRequest:
    """A TeachClass request as plain data for :class:`~cbcl_pr_ros.service.teaching.Teacher` (unchecked)."""
    rois = tuple((int(r.x_offset), int(r.y_offset), int(r.width), int(r.height)) for r in req.rois)
    return TeachRequest(label=req.label, mode=int(req.mode), track_id=int(req.track_id), rois=rois,
                        images=tuple(req.images), features=tuple(req.features), num_frames=int(req.num_frames),
                        timeout_s=float(req.timeout_s))


def fill_teach_response(resp: Any, outcome: Any) -> Any:
    """Fill a TeachClass response from a controller TeachOutcome."""
    resp.success = bool(outcome.success)
    resp.message = outcome.message
    resp.extended_existing = bool(outcome.extended_existing)
    resp.num_examples = int(outcome.num_examples)
    resp.num_clusters = int(outcome.num_clusters)
    resp.num_classes = int(outcome.num_classes)
    resp.learning_time_s = float(outcome.learning_time_s)
    resp.model_version = int(outcome.model_version)
    resp.taught_track_id = int(getattr(outcome, "taught_track_id", -1))
    box = getattr(outcome, "taught_box", None)
    if box is not None:
        x0, y0, x1, y1 = (max(0, int(v)) for v in box)
        resp.taught_roi.x_offset, resp.taught_roi.y_offset = x0, y0
        resp.taught_roi.width, resp.taught_roi.height = max(0, x1 - x0), max(0, y1 - y0)
    return resp


def class_info_msgs(infos: Iterable[Any]) -> list[ClassInfo]:
    """ClassInfo messages from the core's class_info() entries (name, clusters, shots)."""
    out = []
    for info in infos:
        get = (lambda k, i=info: i[k]) if isinstance(info, dict) else (lambda k, i=info: getattr(i, k))
        out.append(ClassInfo(name=str(get("name")), num_clusters=int(get("clusters")),
                             num_examples=int(get("shots"))))
    return out


def make_status_msg(snapshot: Any, header: Header | None = None) -> LearnerStatus:
    """LearnerStatus from a controller StatusSnapshot."""
    msg = LearnerStatus()
    if header is not None:
        msg.header = copy_header(header)
    msg.num_classes = int(len(snapshot.class_names))
    msg.num_clusters = int(snapshot.num_clusters)
    msg.cluster_budget = int(snapshot.cluster_budget)
    msg.memory_bytes = int(snapshot.memory_bytes)
    msg.backbone = snapshot.backbone
    msg.feature_dimension = int(snapshot.feature_dimension)
    msg.model_version = int(snapshot.model_version)
    msg.training = bool(snapshot.training)
    msg.memory_path = snapshot.memory_path
    msg.last_save_ok = bool(snapshot.last_save_ok)
    msg.class_names = list(snapshot.class_names)
    return msg


def fill_outcome_response(resp: Any, out: Any) -> Any:
    """Fill the response of a service that changes classes (forget, rename, load, merge) from an Outcome."""
    resp.success, resp.message, resp.model_version = bool(out.success), out.message, int(out.model_version)
    if hasattr(resp, "num_classes"):  # RenameClass has none
        resp.num_classes = int(out.num_classes)
    return resp


def fill_list_response(resp: Any, infos: Iterable[Any], model_version: int, refused: str | None) -> Any:
    """Fill a ListClasses response; a refusal is an empty list that says why (the classes are on disk)."""
    if refused:
        resp.message = refused
        return resp
    resp.classes, resp.model_version = class_info_msgs(infos), int(model_version)
    return resp


def fill_save_response(resp: Any, ok: bool, message: str, path: str, size: int) -> Any:
    """Fill a SaveMemory response: success, the message, the file written and its size."""
    resp.success, resp.message, resp.path, resp.bytes_written = bool(ok), message, path, int(size)
    return resp


def classify_request_from_msg(req: Any) -> ClassifyRequest:
    """A Classify request as plain data for the learner session (unchecked)."""
    return ClassifyRequest(int(req.scope), req.feature, req.image, int(req.top_k))


def fill_classify_answer(resp: Any, answer: Any, top_k: int = 0) -> Any:
    """Fill a Classify response from the session's ClassifyAnswer: the latest detections, or the
    prediction of the vectors asked about (stamped by what they came from)."""
    if answer.detections is not None:
        return fill_classify_from_detections(resp, *answer.detections, top_k=top_k)
    return fill_classify_response(resp, success=answer.success, message=answer.message, pred=answer.prediction,
                                  header=getattr(answer.origin, "header", None), model_version=answer.model_version,
                                  box=answer.box)
