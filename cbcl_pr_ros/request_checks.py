"""Limits on every field a stranger sends (learner, extractor, arm and page requests), as pure functions.

Every request field is untrusted: any process on the ROS domain may call these services.  Each
check returns the clean value or raises :class:`RequestError` with one sentence fit for a service
response; it never echoes a long or control-character-laden input back (that would forge log lines).
The caps come from node parameters (:class:`RequestLimits`), documented in docs/nodes.md and
docs/security.md.
"""
from __future__ import annotations

import array
import math
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from cbcl_pr_ros.core.validation import MAX_LABEL_CHARS
from cbcl_pr_ros.core.validation import check_label as core_check_label
from cbcl_pr_ros.core.validation import quote  # noqa: F401 (re-exported: the nodes quote from here)
from cbcl_pr_ros.features import image_to_rgb
from cbcl_pr_ros.lookalike import difference, lookalike_in, readable

__all__ = [
    "MAX_ENCODING_CHARS",
    "MAX_LABEL_CHARS",
    "RequestError",
    "RequestLimits",
    "check_label",
    "check_new_label",
    "check_count",
    "check_image_fields",
    "check_timeout",
    "check_num_frames",
    "check_feature_values",
    "check_vectors_fit",
    "values_array",
    "features_from_msgs",
    "decode_request_images",
    "quote",
]


# the longest image encoding name taken: sensor_msgs names them in a few characters ('rgb8',
# 'bayer_rggb16'); the decoder's refusal quotes the name, so a megabyte name came back whole
MAX_ENCODING_CHARS = 32


class RequestError(ValueError):
    """A request field is out of its limits; the message says which and why."""


@dataclass(frozen=True)
class RequestLimits:
    """Caps on request fields (node parameters of the same names, see settings.params)."""

    max_images_per_request: int = 64
    max_image_pixels: int = 4096 * 4096
    max_image_bytes: int = 64 * 1024 * 1024
    max_teach_frames: int = 100
    max_teach_timeout_s: float = 60.0
    max_feature_abs: float = 1.0e6

    @classmethod
    def from_params(cls, p: Mapping[str, Any]) -> "RequestLimits":
        """The limits among a node's parameter values (missing ones keep their defaults)."""
        fields = cls.__dataclass_fields__
        return cls(**{k: type(getattr(cls, k))(p[k]) for k in fields if k in p})


def check_label(label: Any, what: str = "label") -> str:
    """A class name from a request: surrounding whitespace stripped, composed to Unicode NFC, then the
    core's one rule (:func:`cbcl_pr_ros.core.validation.check_label`), refused as a RequestError with
    its reason.  NFC because one keyboard sends "café" as ``e`` + combining accent and another as one
    character: a person (or a peer) typing the same word must reach the same class."""
    if not isinstance(label, str):
        raise RequestError(f"{what} must be a string, got {type(label).__name__}")
    try:
        return core_check_label(unicodedata.normalize("NFC", label.strip()), name=what)
    except ValueError as exc:
        raise RequestError(str(exc)) from None


def check_new_label(label: str, known: Iterable[str], what: str = "name",
                    advice: str = "teach under that name, or forget or rename it first") -> str:
    """``label`` (already through :func:`check_label`) as the name of a class the memory does not hold
    yet: it must hold a letter, digit or symbol (not marks or punctuation alone), and must not look
    like any of ``known`` (:mod:`cbcl_pr_ros.lookalike`), else a RequestError that names the known
    class and ends with ``advice``.  Only new names are checked: a memory that already holds two
    look-alike names keeps both, and each is still reached by its exact name."""
    if not readable(label):
        shown = ascii(label[:12]) + ("..." if len(label) > 12 else "")  # marks alone draw nothing: show them escaped
        raise RequestError(f"{what} {shown} has no letter, digit or symbol (marks, variation selectors or "
                           "punctuation alone); give the class a name a person can read")
    other = lookalike_in(label, known)
    if other is not None:
        raise RequestError(f"{what} {quote(label)} looks like the known class {quote(other)} "
                           f"({difference(label, other)}); {advice}")
    return label


def check_count(n: int, limit: int, what: str) -> int:
    """``n`` items of ``what`` in one request, at most ``limit``."""
    if n > limit:
        raise RequestError(f"{n} {what} in one request; the most is {limit}")
    return n


def check_image_fields(width: int, height: int, step: int, data_len: int, limits: RequestLimits,
                       index: int = 0, encoding: str = "") -> None:
    """Size of one sensor_msgs/Image before it is decoded (pixels, bytes, step consistent) and the
    length of its encoding's name."""
    if len(encoding) > MAX_ENCODING_CHARS:
        raise RequestError(f"image {index} names an encoding of {len(encoding)} characters; no encoding has "
                           f"more than {MAX_ENCODING_CHARS}")
    pixels = int(width) * int(height)
    if pixels > limits.max_image_pixels:
        raise RequestError(f"image {index} has {width}x{height} = {pixels} pixels; the most is "
                           f"{limits.max_image_pixels}")
    if data_len > limits.max_image_bytes:
        raise RequestError(f"image {index} has {data_len} bytes of data; the most is {limits.max_image_bytes}")
    if height and step and int(step) * int(height) > data_len:
        raise RequestError(f"image {index}: step {step} x height {height} exceeds its {data_len} bytes")


def check_timeout(value: float, default: float, cap: float, what: str = "timeout_s") -> float:
    """Seconds to wait: 0 = ``default``; finite, >= 0 and at most ``cap`` (the default is capped too)."""
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise RequestError(f"{what} must be a finite number >= 0, got {v!r}")
    if v == 0:
        return min(float(default), float(cap))
    if v > cap:
        raise RequestError(f"{what} {v:g} s is above the cap of {cap:g} s (parameter max_teach_timeout_s)")
    return v


def check_num_frames(value: int, default: int, cap: int) -> int:
    """Frames to take from the stream: 0 = ``default``; at most ``cap`` (max_teach_frames)."""
    n = int(value)
    if n < 0:
        raise RequestError(f"num_frames must be >= 0, got {n}")
    if n == 0:
        return min(int(default), int(cap))
    if n > cap:
        raise RequestError(f"num_frames {n} is above the cap of {cap} (parameter max_teach_frames)")
    return n


def check_feature_values(feats: np.ndarray, max_abs: float = math.inf) -> np.ndarray:
    """Feature vectors must be finite and within ``max_abs``: one huge vector would turn every
    other class's confidence into NaN (overflow in the distances)."""
    arr = np.asarray(feats)
    if not np.all(np.isfinite(arr)):
        raise RequestError("feature vectors contain NaN or infinite values")
    peak = float(np.max(np.abs(arr))) if arr.size else 0.0
    if peak > max_abs:
        raise RequestError(f"feature values reach {peak:.3g}; the most accepted is {max_abs:g} "
                           "(parameter max_feature_abs)")
    return arr


def check_vectors_fit(backbone: str, dim: int, expected_backbone: str | None, expected_dim: int | None,
                      what: str) -> None:
    """Vectors from a message fit the learner: the same backbone (an empty name is no exemption) and
    width. The one check of ``features`` and ``object_features`` messages and of request vectors."""
    if expected_backbone and backbone != expected_backbone:
        raise RequestError(f"{what} comes from backbone {backbone[:64]!r}, this learner uses '{expected_backbone}'")
    if expected_dim and dim != expected_dim:
        raise RequestError(f"{what} dimension {dim} does not match the learner's {expected_dim}")


def values_array(values: Any) -> np.ndarray:
    """A message's float32[] field as a numpy array without a copy where rclpy gave an array.array."""
    return np.frombuffer(values, dtype=np.float32) if isinstance(values, array.array) \
        else np.asarray(values, dtype=np.float32)


def features_from_msgs(msgs: Sequence[Any], expected_backbone: str | None = None,
                       expected_dim: int | None = None, max_abs: float = math.inf) -> np.ndarray:
    """Stack FeatureVector messages (or objects with their backbone, dimension and values) into an
    (n, d) float32 array, checking they fit the learner.

    Raises ValueError (with a message fit for a service response) on an empty list, a backbone other
    than ``expected_backbone``, mixed or wrong dimensions, non-finite values or values above ``max_abs``.
    """
    if len(msgs) == 0:
        raise RequestError("no feature vectors given")
    rows = []
    for i, m in enumerate(msgs):
        check_vectors_fit(m.backbone, 0, expected_backbone, None, f"feature vector {i}")
        v = values_array(m.values)
        if m.dimension and v.size != m.dimension:
            raise RequestError(f"feature vector {i} says dimension {m.dimension} but holds {v.size} values")
        if v.size == 0:
            raise RequestError(f"feature vector {i} is empty")
        rows.append(v)
    dims = {r.size for r in rows}
    if len(dims) != 1:
        raise RequestError(f"feature vectors have different dimensions {sorted(dims)}")
    check_vectors_fit("", dims.pop(), None, expected_dim, "feature")
    return check_feature_values(np.stack(rows).astype(np.float32, copy=False), max_abs)


def decode_request_images(images: Sequence[Any], limits: RequestLimits) -> list[np.ndarray]:
    """RGB arrays of request images (objects with sensor_msgs/Image's fields), each checked against the
    limits first; ValueError naming the first image that cannot be used (by index, size and a short,
    escaped encoding). The one place a request's image is decoded: the arrays go on in-process."""
    check_count(len(images), limits.max_images_per_request, "images")
    for i, img in enumerate(images):
        check_image_fields(img.width, img.height, img.step, len(img.data), limits, i, img.encoding)
    rgbs = []
    for i, img in enumerate(images):
        try:
            rgbs.append(image_to_rgb(img.encoding, int(img.height), int(img.width), int(img.step), img.data,
                                     bool(img.is_bigendian)))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"image {i} ({img.width}x{img.height}, encoding {img.encoding[:16]!r}) "
                             f"cannot be used: {exc}") from exc
    return rgbs
