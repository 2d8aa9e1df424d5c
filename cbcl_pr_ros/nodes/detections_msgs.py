"""Per-object messages: ObjectFeatures, Detections, markers and the boxes-and-labels image.

Pure conversions between the perception layer's objects (``Proposal``, ``Track``) and this package's
messages, with no ROS graph: the extractor and learner callbacks only call these and publish, and
``test/nodes/test_detections_msgs.py`` checks them directly.
"""
from __future__ import annotations

import array
import math
import struct
from typing import Any, Callable, Sequence

import cv2
import numpy as np
from geometry_msgs.msg import Point, Quaternion, Vector3
from std_msgs.msg import Header

from cbcl_pr_ros.msg import DetectedObject, Detections, ObjectFeatures
from cbcl_pr_ros.nodes.conversions import check_pixels, copy_header
from cbcl_pr_ros.nodes.debug_image import caption
from cbcl_pr_ros.objects.frame import ObjectFrame, ObjectJoins
from cbcl_pr_ros.objects.pieces import MAX_CANDIDATES
from cbcl_pr_ros.perception import Proposal
from cbcl_pr_ros.perception.camera_pose import CameraPose
from cbcl_pr_ros.request_checks import RequestLimits, check_feature_values, check_vectors_fit, quote, values_array
from cbcl_pr_ros.settings.params import PARAMS
from cbcl_pr_ros.stamps import seconds_to_ns, split_ns

__all__ = [
    "depth_msg_to_array",
    "make_object_features_msg",
    "object_features_from_msg",
    "object_joins_from_msg",
    "object_frame_from_msg",
    "make_detections_msg",
    "make_marker_array",
    "draw_detections",
    "MAX_FRAME_OBJECTS",
    "object_count_of_serialized",
    "object_features_from_serialized",
    "MAX_DETECTIONS_BYTES",
    "detections_count_of_serialized",
    "detections_from_serialized",
]

# The most objects an extractor sends in one frame (the top of its max_objects range): a frame with
# more did not come from one, and tracking it would cost seconds per frame (the work grows faster than
# the count), so it is refused whole before anything is computed.
MAX_FRAME_OBJECTS = int(next(p.max for p in PARAMS if p.name == "max_objects"))

# The largest serialized Detections taken from the topic: a learner's at the object cap, each with its
# top labels of names at the request cap, is a fraction of this; a larger one is refused unbuilt.
MAX_DETECTIONS_BYTES = 1 << 20

_NAN3 = np.full(3, np.nan)


def depth_msg_to_array(msg: Any, max_pixels: int = RequestLimits.max_image_pixels) -> np.ndarray:
    """A depth Image (32FC1 metres, or 16UC1 millimetres) as float32 metres (h, w); 0 = no reading.

    Raises ValueError naming the encoding (quoted and cut: whoever publishes depth chooses it, and
    the extractor logs the reason) or the size when the message is malformed (wrong step, too few
    bytes) or has more than ``max_pixels`` (width x height), so a caller can drop the frame and
    keep running.
    """
    enc = str(msg.encoding).upper()
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    check_pixels("depth image", w, h, max_pixels)
    if enc in ("32FC1", "TYPE_32FC1"):
        dtype, px, scale = np.dtype(">f4" if msg.is_bigendian else "<f4"), 4, 1.0
    elif enc in ("16UC1", "MONO16", "TYPE_16UC1"):
        dtype, px, scale = np.dtype(">u2" if msg.is_bigendian else "<u2"), 2, 0.001
    else:
        raise ValueError(f"depth encoding {quote(str(msg.encoding), 32)} is not supported (32FC1 metres or 16UC1 mm)")
    if h <= 0 or w <= 0 or step < w * px:
        raise ValueError(f"depth image {w}x{h} with step {step} is malformed (need step >= {w * px})")
    data = bytes(msg.data) if not isinstance(msg.data, (bytes, bytearray)) else msg.data
    if len(data) < step * h:
        raise ValueError(f"depth image {w}x{h} needs {step * h} bytes, got {len(data)}")
    rows = np.frombuffer(data, np.uint8, count=step * h).reshape(h, step)[:, : w * px]
    out = rows.copy().view(dtype).reshape(h, w).astype(np.float32) * np.float32(scale)
    out[~np.isfinite(out)] = 0.0
    return out


def _object_geometry(obj: DetectedObject, box: Sequence[int], centroid: np.ndarray, size: np.ndarray,
                     score: float) -> DetectedObject:
    obj.x0, obj.y0, obj.x1, obj.y1 = (int(v) for v in box)
    c = np.asarray(centroid, float).reshape(3)
    s = np.asarray(size, float).reshape(3)
    obj.centroid = Point(x=float(c[0]), y=float(c[1]), z=float(c[2]))
    obj.size = Vector3(x=float(s[0]), y=float(s[1]), z=float(s[2]))
    obj.position = Point(x=math.nan, y=math.nan, z=math.nan)  # in no fixed frame until a pose places it
    obj.proposal_score = float(score)
    return obj


def make_object_features_msg(header: Header, backbone: str, preprocessing: str,
                             proposals: Sequence[Proposal], feats: np.ndarray,
                             image_shape: Sequence[int], joins: ObjectJoins | None = None) -> ObjectFeatures:
    """One frame's objects and their (n, d) vectors (row i belongs to proposals[i]), and the
    candidate joins (pairs, union proposals, their vectors) when given."""
    f = np.asarray(feats, np.float32)
    if f.ndim != 2 or f.shape[0] != len(proposals):
        raise ValueError(f"need one feature row per proposal: {len(proposals)} proposals, features {f.shape}")
    msg = ObjectFeatures()
    msg.header = copy_header(header)
    msg.backbone, msg.preprocessing = backbone, preprocessing
    msg.dimension = int(f.shape[1]) if f.size else 0
    msg.values = array.array("f", np.ascontiguousarray(f).tobytes())
    msg.image_height, msg.image_width = int(image_shape[0]), int(image_shape[1])
    msg.objects = [_object_geometry(DetectedObject(), p.box, p.centroid, p.size, p.score) for p in proposals]
    if joins is not None and joins.pairs:
        u = np.asarray(joins.features, np.float32)
        if u.shape != (len(joins.pairs), f.shape[1]) or len(joins.unions) != len(joins.pairs):
            raise ValueError(f"need one union and one feature row per pair: {len(joins.pairs)} pairs, "
                             f"{len(joins.unions)} unions, features {u.shape}")
        msg.join_first = [int(i) for i, _ in joins.pairs]
        msg.join_second = [int(j) for _, j in joins.pairs]
        msg.joins = [_object_geometry(DetectedObject(), p.box, p.centroid, p.size, p.score) for p in joins.unions]
        msg.join_values = array.array("f", np.ascontiguousarray(u).tobytes())
    return msg


class _CdrCounts:
    """Reads the 4-byte aligned lengths at the start of a serialized message (CDR, as DDS delivers
    it), without building it. ValueError when the bytes end too early."""

    def __init__(self, raw: bytes, what: str) -> None:
        self.raw, self.what = raw, what
        self.fmt = "<I" if raw[1:2] in (b"\x01", b"\x03") else ">I"  # encapsulation: CDR/PL_CDR little-endian
        self.pos = 4  # after the encapsulation header

    def skip(self, n: int) -> None:
        self.pos += n

    def u32(self) -> int:
        self.pos = (self.pos + 3) & ~3  # alignment counts from after the 4-byte encapsulation header, which is aligned
        if self.pos + 4 > len(self.raw):
            raise ValueError(f"{self.what}: {len(self.raw)} bytes end inside the message")
        (v,) = struct.unpack_from(self.fmt, self.raw, self.pos)
        self.pos += 4
        return int(v)

    def string(self) -> None:
        self.skip(self.u32())  # length (with the NUL), then the bytes

    def doubles(self, n: int) -> None:
        """Skip ``n`` float64 values (8-byte aligned from after the encapsulation header)."""
        self.pos = 4 + ((self.pos - 4 + 7) & ~7) + 8 * n


def object_count_of_serialized(raw: bytes) -> int:
    """The number of objects a serialized ObjectFeatures declares, read from the bytes before them:
    header stamp and frame, the two names, the dimension, the values."""
    cdr = _CdrCounts(raw, "object features")
    cdr.skip(8)  # builtin_interfaces/Time
    for _ in range(3):  # frame_id, backbone, preprocessing
        cdr.string()
    cdr.u32()  # dimension
    cdr.skip(4 * cdr.u32())  # values
    return cdr.u32()


def detections_count_of_serialized(raw: bytes) -> int:
    """The number of objects a serialized Detections declares, read from the bytes after its header."""
    cdr = _CdrCounts(raw, "detections")
    cdr.skip(8)  # builtin_interfaces/Time
    cdr.string()  # frame_id
    cdr.string()  # position_frame
    cdr.doubles(7)  # camera_pose: position x, y, z and orientation x, y, z, w
    return cdr.u32()


def detections_from_serialized(raw: bytes) -> Detections:
    """A Detections from its serialized bytes, refused (ValueError) before it is built when it is over
    :data:`MAX_DETECTIONS_BYTES` or declares more than :data:`MAX_FRAME_OBJECTS` objects (a learner
    publishes at most one per object of a frame): a subscriber's work per message stays bounded."""
    from rclpy.serialization import deserialize_message

    if len(raw) > MAX_DETECTIONS_BYTES:
        raise ValueError(f"a detections message of {len(raw)} bytes; at most {MAX_DETECTIONS_BYTES} are taken")
    n = detections_count_of_serialized(raw)
    if n > MAX_FRAME_OBJECTS:
        raise ValueError(f"detections of {n} objects; a learner sends at most {MAX_FRAME_OBJECTS}")
    return deserialize_message(raw, Detections)


def built_within_bounds(msg: Any, build: Callable[[bytes], Any], logger: Any, what: str) -> Any | None:
    """The message a raw subscription delivered, built by ``build`` (which refuses an oversized one with
    ValueError before building it); None after one throttled warning when refused. A message that is
    already built (a direct call) passes through."""
    if not isinstance(msg, (bytes, bytearray)):
        return msg
    try:
        return build(bytes(msg))
    except ValueError as exc:
        logger.warning(f"{what} ignored: {exc}", throttle_duration_sec=10.0)
        return None


def object_features_from_serialized(raw: bytes) -> ObjectFeatures:
    """An ObjectFeatures from its serialized bytes, refused (ValueError) before it is built when it
    declares more than :data:`MAX_FRAME_OBJECTS` objects: building 2,000 objects' Python messages alone
    costs a quarter of a second."""
    from rclpy.serialization import deserialize_message

    n = object_count_of_serialized(raw)
    if n > MAX_FRAME_OBJECTS:
        raise ValueError(f"a frame of {n} objects; an extractor sends at most {MAX_FRAME_OBJECTS} (max_objects)")
    return deserialize_message(raw, ObjectFeatures)


def _proposal_of(o: DetectedObject) -> Proposal:
    c = np.array([o.centroid.x, o.centroid.y, o.centroid.z], float)
    s = np.array([o.size.x, o.size.y, o.size.z], float)
    return Proposal((int(o.x0), int(o.y0), int(o.x1), int(o.y1)), None, c, s, float(o.proposal_score))


def object_features_from_msg(msg: ObjectFeatures, expected_backbone: str | None = None,
                             expected_dim: int | None = None,
                             max_abs: float | None = None) -> tuple[list[Proposal], np.ndarray]:
    """Proposals (no masks) and (n, d) vectors of an ObjectFeatures message.

    Raises ValueError on more than :data:`MAX_FRAME_OBJECTS` objects, another backbone (an empty name
    is no exemption, as on ``features``), a size mismatch between values and objects, non-finite
    values or values above ``max_abs`` (the learner's ``max_feature_abs``). No objects gives ([], an empty (0, d) array).
    """
    n, d = len(msg.objects), int(msg.dimension)
    if n > MAX_FRAME_OBJECTS:
        raise ValueError(f"a frame of {n} objects; an extractor sends at most {MAX_FRAME_OBJECTS} "
                         "(max_objects)")
    check_vectors_fit(msg.backbone, d, expected_backbone, expected_dim if n else None, "object features")
    v = values_array(msg.values)
    if n == 0:
        return [], np.zeros((0, max(d, 0)), np.float32)
    if d <= 0 or v.size != n * d:
        raise ValueError(f"object features hold {v.size} values for {n} objects of dimension {d}")
    feats = check_feature_values(v.reshape(n, d), math.inf if max_abs is None else max_abs)
    return [_proposal_of(o) for o in msg.objects], feats


def object_joins_from_msg(msg: ObjectFeatures, n: int, max_abs: float | None = None) -> ObjectJoins:
    """The candidate joins of an ObjectFeatures message of ``n`` objects, checked: as many first and
    second indices as unions, at most ``MAX_CANDIDATES``, each pair two different objects of the
    frame, one vector of the message's dimension per union (ValueError otherwise)."""
    k = len(msg.joins)
    if not (len(msg.join_first) == len(msg.join_second) == k):
        raise ValueError(f"joins: {len(msg.join_first)} first and {len(msg.join_second)} second indices "
                         f"for {k} unions")
    if k == 0:
        return ObjectJoins()
    if k > MAX_CANDIDATES:
        raise ValueError(f"joins: {k} pairs, at most {MAX_CANDIDATES}")
    pairs = [(int(i), int(j)) for i, j in zip(msg.join_first, msg.join_second)]
    bad = [(i, j) for i, j in pairs if i == j or not (0 <= i < n and 0 <= j < n)]
    if bad:
        raise ValueError(f"joins: pair {bad[0]} does not name two of the frame's {n} objects")
    d = int(msg.dimension)
    v = values_array(msg.join_values)
    if d <= 0 or v.size != k * d:
        raise ValueError(f"joins hold {v.size} values for {k} unions of dimension {d}")
    feats = check_feature_values(v.reshape(k, d), math.inf if max_abs is None else max_abs)
    return ObjectJoins(tuple(pairs), tuple(_proposal_of(o) for o in msg.joins), feats)


def object_frame_from_msg(msg: ObjectFeatures, expected_backbone: str | None = None,
                          expected_dim: int | None = None, max_abs: float | None = None) -> ObjectFrame:
    """The frame an ObjectFeatures message carries with its candidate joins, checked as
    :func:`object_features_from_msg` and :func:`object_joins_from_msg` do."""
    props, feats = object_features_from_msg(msg, expected_backbone, expected_dim, max_abs)
    joins = object_joins_from_msg(msg, len(props), max_abs)
    return ObjectFrame(props, feats, (int(msg.image_height), int(msg.image_width)), joins)


def make_detections_msg(header: Header, tracks: Sequence[Any], model_version: int = 0,
                        pose: CameraPose | None = None) -> Detections:
    """Detections of one frame from the tracker's tracks (``perception.Track``), stamped as the image;
    with ``pose`` (the camera's pose at that stamp, the one the tracks were placed with) each object's
    ``position`` is its track's place in ``pose.frame`` and the message says that frame and the pose."""
    msg = Detections()
    msg.header = copy_header(header)
    msg.model_version = int(model_version)
    if pose is not None and not pose.frame:
        pose = None  # a pose that names no frame places nothing a consumer could use
    if pose is not None:
        msg.position_frame = str(pose.frame)
        p, q = np.asarray(pose.position, float), pose.rotation.as_quat()
        msg.camera_pose.position = Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))
        msg.camera_pose.orientation = Quaternion(x=float(q[0]), y=float(q[1]), z=float(q[2]), w=float(q[3]))
    for t in tracks:
        o = _object_geometry(DetectedObject(), t.proposal.box, t.proposal.centroid, t.proposal.size,
                             t.proposal.score)
        if pose is not None and t.frame == pose.frame and t.position is not None:
            x = np.asarray(t.position, float).reshape(3)
            o.position = Point(x=float(x[0]), y=float(x[1]), z=float(x[2]))
        o.id = int(t.id)
        o.label = str(t.label)
        o.known = bool(t.known)
        o.confidence = float(t.confidence)
        o.top_labels = [str(x) for x in t.top_labels]
        o.top_scores = [float(x) for x in t.top_scores]
        msg.objects.append(o)
    return msg


def _caption(o: DetectedObject) -> str:
    """``#3 mug 0.93``, ``#3 mug? 0.45`` or ``#3 unknown``: names as the teaching page writes them."""
    return f"#{o.id} {caption(o.label, o.confidence, o.known)}"


def make_marker_array(det: Detections, lifetime_s: float = 1.0) -> Any:
    """RViz markers for a Detections message: a box and a label per object with a 3-D centroid.

    The first marker is DELETEALL, so objects that left the view vanish at once; objects without
    depth (NaN centroid) get no marker.
    """
    from builtin_interfaces.msg import Duration
    from visualization_msgs.msg import Marker, MarkerArray

    out = MarkerArray()
    clear = Marker(action=Marker.DELETEALL)
    clear.header = copy_header(det.header)
    out.markers.append(clear)
    life_sec, life_nanosec = split_ns(seconds_to_ns(lifetime_s))
    life = Duration(sec=life_sec, nanosec=life_nanosec)
    for o in det.objects:
        c = (o.centroid.x, o.centroid.y, o.centroid.z)
        if not all(math.isfinite(v) for v in c):
            continue
        known = o.known and bool(o.label)
        rgb = (0.2, 0.8, 0.2) if known else (1.0, 0.55, 0.0)
        for kind, mid in ((Marker.CUBE, 2 * o.id), (Marker.TEXT_VIEW_FACING, 2 * o.id + 1)):
            m = Marker(type=kind, action=Marker.ADD, id=int(mid), ns="detections", lifetime=life)
            m.header = copy_header(det.header)
            m.pose.position.x, m.pose.position.y, m.pose.position.z = c
            m.pose.orientation.w = 1.0
            if kind == Marker.CUBE:
                s = [v if math.isfinite(v) and v > 0 else 0.02 for v in (o.size.x, o.size.y, o.size.z)]
                m.scale.x, m.scale.y, m.scale.z = s
                m.color.r, m.color.g, m.color.b, m.color.a = (*rgb, 0.4)
            else:
                m.pose.position.y -= 0.5 * (o.size.y if math.isfinite(o.size.y) else 0.0) + 0.02  # above (y down)
                m.scale.z = 0.03
                m.text = _caption(o)
                m.color.r, m.color.g, m.color.b, m.color.a = (*rgb, 1.0)
            out.markers.append(m)
    return out


def draw_detections(rgb: np.ndarray, det: Detections,
                    truth: Sequence[bool | None] | None = None) -> np.ndarray:
    """A copy of the frame with every object's box and "#id label score".

    Colours: green known, orange unknown; with ``truth`` (one entry per object: right, wrong or
    None = matches no real object), green right, red wrong and orange none, as the main job's scene picture.
    """
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"draw_detections needs an (h, w, 3) uint8 RGB array, got {getattr(rgb, 'shape', None)}")
    out = np.ascontiguousarray(rgb).copy()
    h, w = out.shape[:2]
    scale = max(0.4, w / 1280.0)
    thick = max(1, int(round(2 * scale)))
    for i, o in enumerate(det.objects):
        ok = None if truth is None else truth[i]
        if truth is not None and ok is None:
            colour = (255, 140, 0)  # matches no real object
        elif ok is None:
            colour = (40, 200, 40) if o.known and o.label else (255, 140, 0)
        else:
            colour = (40, 200, 40) if ok else (230, 30, 30)
        x0, y0 = max(0, min(w - 1, int(o.x0))), max(0, min(h - 1, int(o.y0)))
        x1, y1 = max(0, min(w - 1, int(o.x1) - 1)), max(0, min(h - 1, int(o.y1) - 1))
        cv2.rectangle(out, (x0, y0), (x1, y1), colour, thick)
        text = _caption(o)
        (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thick)
        ty = y0 - 4 if y0 - th - base - 4 >= 0 else min(h - 1, y1 + th + 4)
        cv2.rectangle(out, (x0, ty - th - 3), (min(w - 1, x0 + tw + 4), ty + base - 1), colour, -1)
        cv2.putText(out, text, (x0 + 2, ty - 1), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), thick,
                    cv2.LINE_AA)
    return out
