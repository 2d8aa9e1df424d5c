"""Learned class-agnostic proposals: a small network trained only on rendered table scenes.

A U-Net of 76 k weights reads a frame at ``WORK_WIDTH`` pixels wide (depth cues: surface
normals, depth relative to the frame and to its surroundings, depth edges, where readings are; and
colour) and says per pixel: background, object inside, or object boundary, and how far the pixel lies
from its object's border. By default objects are the connected insides grown over the object pixels;
two of them whose seam the depth does not show (no step, no bend beyond the frame's own noise) are one
object cut by the network and are joined, a small one inside a larger one's box is given to it, and
one that shows the camera less surface than a 4 cm square (``MIN_FACE_M``, from its pixels and its
depth through the intrinsics) is a piece and is dropped.
Optionally objects are the connected cores of the distance (pixels far from any border) flooded back
over the object pixels (a watershed). The support plane of the geometry method then gives each its 3D
centroid and extent and drops what does not stand on the support. :func:`propose_hybrid` adds the
geometry method's proposals as referee (:func:`join_within`, :func:`join_hanging`: a piece that does not
reach down to the support cannot stand alone, :func:`part_merged`). Each of these choices
was made on real frames of other sources than the one it was scored on (docs/perception.md).

The forward pass runs on onnxruntime (a graph of the same operations built in memory from the weights, one
thread), or in plain NumPy where onnxruntime is missing (3x3 convolutions as one matrix product each); the two
agree to about 1e-5 and each gives the same answer in every process. The weights are a
safetensors file; :func:`load_segmenter` refuses any file whose tensors are not those the network
expects. The package ships trained weights (``SHIPPED_WEIGHTS``, with their training log beside them);
``bench/train_segmenter.py --install`` makes the scenes and the weights again and puts them there
(docs/perception.md).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from scipy import ndimage

from .proposals import _SIGMA_AT_1M_FLOOR, ProposalConfig, _assemble, _check_rgb, _noise_sigma, _Plane, _support_region, \
    _mean_rows, _median, _rows, _noise_scale, _usable_depth, _UsableDepth, choose_support, propose_on_support, refine_plane, support_planes
from .proposals import _geometry as plane_geometry
from .regions import find_boxes, nonzero_box
from .types import CameraIntrinsics, Proposal

__all__ = ["SHIPPED_WEIGHTS", "SHIPPED_LOG",
           "WORK_WIDTH", "CHANNELS", "LAYERS", "OUTPUTS", "DIST_CLIP_PX", "Segmenter", "load_segmenter",
           "fold_inner", "input_features", "instances", "join_pieces", "layer_shapes", "propose_learned", "combine",
           "MIN_FACE_M", "REFEREE_JOIN_SIGMAS", "drop_small", "join_hanging", "join_within", "part_merged",
           "propose_hybrid", "visible_area_m2"]

#: the weights that ship with the package, and the log of the training that made them
SHIPPED_WEIGHTS = Path(__file__).resolve().parent / "weights" / "segmenter.safetensors"
SHIPPED_LOG = SHIPPED_WEIGHTS.with_name("segmenter_train_log.json")
WORK_WIDTH = 160
#: the input channels (``input_features``)
CHANNELS = ("valid", "normal_x", "normal_y", "normal_z", "log_depth", "protrusion", "depth_edge", "red", "green", "blue")
#: the head's outputs: three class scores, then the distance to the object's border (see DIST_CLIP_PX)
OUTPUTS = ("background", "inside", "boundary", "border_distance")
#: the distance output is a pixel's distance to the nearest pixel not of its object, in work pixels,
#: clipped at this and divided by it (0 on the background): beyond a few pixels it parts nothing
DIST_CLIP_PX = 5.0
#: the network: (name, input channels, output channels) of each 3x3 convolution (1x1 for the head)
_W = (8, 16, 32, 32)
LAYERS = (
    ("enc1a", len(CHANNELS), _W[0]), ("enc1b", _W[0], _W[0]),
    ("enc2a", _W[0], _W[1]), ("enc2b", _W[1], _W[1]),
    ("enc3a", _W[1], _W[2]), ("enc3b", _W[2], _W[2]),
    ("mid_a", _W[2], _W[3]), ("mid_b", _W[3], _W[3]),
    ("dec3a", _W[3] + _W[2], _W[2]), ("dec3b", _W[2], _W[2]),
    ("dec2a", _W[2] + _W[1], _W[1]), ("dec2b", _W[1], _W[1]),
    ("dec1a", _W[1] + _W[0], _W[0]), ("dec1b", _W[0], _W[0]),
    ("head", _W[0], len(OUTPUTS)),
)
_MAX_FILE_BYTES = 8 * 1024 * 1024
_MIN_SEED_PX = 6  # an inside smaller than this (work pixels) is noise
_MIN_OBJECT_PX = 12  # an object smaller than this (work pixels) is dropped
_GROW_PX = 3  # boundary pixels join the inside within this many pixels
_MIN_CORE_PX = 3  # a core smaller than this (work pixels) is a bump of the distance, not an object
_FLOOD_STEP = 0.1  # the flood's levels of border distance (a fraction of DIST_CLIP_PX: half a pixel)
_PEAK_FLOOR = 0.25  # with peaks, new objects start on levels down to this (half of the border ring excluded)
_FLOOD_PASSES = 4  # nearest-label passes per level (bounded work; the last level gets four times as many)
_MIN_SEAM_PX = 3  # two objects whose seam has fewer readings on both sides than this are not compared
#: the seam test looks across at most this many pixels (1: touching; 2: a one-pixel gap between the two)
_SEAM_REACH = 2
_CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], np.uint8)  # 4-neighbours: a mask's outline, a pixel a step
#: pieces inside one geometry proposal are joined at this many noise sigmas (``propose_hybrid``)
REFEREE_JOIN_SIGMAS = 3.0
#: a learned object showing less than ``MIN_FACE_M`` stays where it covers this share of one geometry
#: proposal: both see the same whole object there (``propose_hybrid``; chosen leave-one-source-out)
REFEREE_CONFIRM: float | None = 0.7
#: a geometry proposal holding one learned object smaller than this share of it replaces it
#: (``propose_hybrid``; None = never; chosen leave-one-source-out)
REFEREE_WHOLE: float | None = None
#: a learned object showing less than ``MIN_FACE_M`` inside a larger one's geometry proposal joins it instead
#: of being dropped (``propose_hybrid``; chosen leave-one-source-out)
REFEREE_ABSORB = True
#: an object shows the camera at least this much of its surface (a face this wide and high): a smaller
#: object of the network's is a piece of one (a label, a rim, a highlight), whatever its distance
MIN_FACE_M = 0.04


def layer_shapes() -> dict[str, tuple[int, ...]]:
    """The tensors a weights file must hold: per layer a weight (out, in, k, k) and a bias (out,)."""
    out = {}
    for name, cin, cout in LAYERS:
        k = 1 if name == "head" else 3
        out[f"{name}.weight"] = (cout, cin, k, k)
        out[f"{name}.bias"] = (cout,)
    return out


# ------------------------------------------------------------------------------------------- inputs
def input_features(rgb: np.ndarray, z: np.ndarray, K: CameraIntrinsics) -> np.ndarray | None:
    """The network's input (len(CHANNELS), h, w) float32 from colour ``rgb`` (h, w, 3) uint8, depth ``z``
    (h, w) metres (NaN or <= 0 = no reading) and the intrinsics of this size; None when under 5 % of the
    pixels hold a reading. Holes are filled from the nearest reading for the normals and depths, and
    flagged in the ``valid`` channel."""
    h, w = z.shape
    valid = np.isfinite(z) & (z > 0.02) & (z < 20.0)
    if np.count_nonzero(valid) < max(20, 0.05 * z.size):
        return None
    idx = ndimage.distance_transform_edt(~valid, return_distances=False, return_indices=True)
    zf = np.where(valid, z, 0.0).astype(np.float32, copy=False)[idx[0], idx[1]]
    xs = ((np.arange(w, dtype=np.float32) - K.cx) / K.fx)[None, :] * zf
    ys = ((np.arange(h, dtype=np.float32) - K.cy) / K.fy)[:, None] * zf
    P = cv2.blur(np.stack([xs, ys, zf], axis=-1), (3, 3))
    # per channel (numpy is faster on (h, w) planes than on (h, w, 3)): the normal is dy x dx, unit
    # length, (0, 0, -1) where it has none, turned to face the camera
    dx, dy = [], []
    for c in range(3):
        Pc = P[..., c]
        dx.append(np.zeros_like(Pc))
        dy.append(np.zeros_like(Pc))
        dx[c][:, 1:-1] = Pc[:, 2:] - Pc[:, :-2]
        dy[c][1:-1] = Pc[2:] - Pc[:-2]
    n = [dy[1] * dx[2] - dy[2] * dx[1], dy[2] * dx[0] - dy[0] * dx[2], dy[0] * dx[1] - dy[1] * dx[0]]
    norm = np.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    some = norm > 1e-12
    unit = np.maximum(norm, 1e-12)
    n = [np.where(some, nc / unit, np.float32(default)) for nc, default in zip(n, (0.0, 0.0, -1.0))]
    away = n[0] * P[..., 0] + n[1] * P[..., 1] + n[2] * P[..., 2] > 0
    n = [np.where(away, -nc, nc) for nc in n]  # facing the camera
    logz = np.log(zf)
    rel = np.clip(logz - float(_median(logz[valid])), -1.0, 1.0)
    around = cv2.blur(zf, (15, 15))
    protrusion = np.clip((around - zf) / zf * 5.0, -1.0, 1.0)
    gx = np.zeros_like(logz)
    gy = np.zeros_like(logz)
    gx[:, 1:-1] = np.abs(logz[:, 2:] - logz[:, :-2])
    gy[1:-1] = np.abs(logz[2:] - logz[:-2])
    edge = np.tanh(20.0 * (gx + gy))
    col = rgb.astype(np.float32) / 255.0
    mean, spread = _mean_rows(col.reshape(-1, 3)), float(col.std())
    col -= mean  # in place: the same values, no second array
    col /= spread + 0.05
    return np.stack([valid.astype(np.float32), *n, rel, protrusion, edge, col[..., 0], col[..., 1], col[..., 2]]
                    ).astype(np.float32, copy=False)


# ------------------------------------------------------------------------------------------- network
def _conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, relu: bool = True) -> np.ndarray:
    """A same-padded convolution of x (c, h, w) as one matrix product (im2col)."""
    cout, cin, k, _ = weight.shape
    c, h, w = x.shape
    if k == 1:
        y = weight.reshape(cout, cin) @ x.reshape(c, h * w)
    else:
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
        cols = np.empty((cin, 9, h, w), np.float32)
        for i in range(3):
            for j in range(3):
                cols[:, 3 * i + j] = xp[:, i:i + h, j:j + w]
        y = weight.reshape(cout, cin * 9) @ cols.reshape(cin * 9, h * w)
    y = y.reshape(cout, h, w) + bias[:, None, None]
    return np.maximum(y, 0.0, out=y) if relu else y


def _pool(x: np.ndarray) -> np.ndarray:
    """2x2 max pooling (of even sizes), as four strided views: a reshaped max over two axes is 30x slower."""
    return np.maximum(np.maximum(x[:, 0::2, 0::2], x[:, 0::2, 1::2]), np.maximum(x[:, 1::2, 0::2], x[:, 1::2, 1::2]))


def _up(x: np.ndarray) -> np.ndarray:
    return x.repeat(2, axis=1).repeat(2, axis=2)


def _onnx_graph(weights: dict) -> bytes:
    """The network of ``weights`` (``layer_shapes``) as a serialised ONNX graph of any input size divisible
    by 8, built in memory: the same operations as :func:`_numpy_outputs`, run by onnxruntime's kernels."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes: list = []
    inits = [numpy_helper.from_array(np.ascontiguousarray(v, np.float32), k) for k, v in sorted(weights.items())]
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up_scales"))

    def conv(x: str, name: str, relu: bool = True) -> str:
        k = int(weights[f"{name}.weight"].shape[-1])
        nodes.append(helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [f"{name}.conv"],
                                      kernel_shape=[k, k], pads=[k // 2] * 4))
        if not relu:
            return f"{name}.conv"
        nodes.append(helper.make_node("Relu", [f"{name}.conv"], [f"{name}.relu"]))
        return f"{name}.relu"

    def block(x: str, name: str) -> str:
        return conv(conv(x, f"{name}a"), f"{name}b")

    def pool(x: str) -> str:
        nodes.append(helper.make_node("MaxPool", [x], [f"{x}.pool"], kernel_shape=[2, 2], strides=[2, 2]))
        return f"{x}.pool"

    def up_cat(x: str, skip: str) -> str:  # nearest twice as large (each value repeated), then the skip
        nodes.append(helper.make_node("Resize", [x, "", "up_scales"], [f"{x}.up"], mode="nearest",
                                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
        nodes.append(helper.make_node("Concat", [f"{x}.up", skip], [f"{x}.cat"], axis=1))
        return f"{x}.cat"

    e1 = block("x", "enc1")
    e2 = block(pool(e1), "enc2")
    e3 = block(pool(e2), "enc3")
    m = conv(conv(pool(e3), "mid_a"), "mid_b")
    d1 = block(up_cat(block(up_cat(block(up_cat(m, e3), "dec3"), e2), "dec2"), e1), "dec1")
    out = conv(d1, "head", relu=False)
    graph = helper.make_graph(
        nodes, "segmenter", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, len(CHANNELS), "h", "w"])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, len(OUTPUTS), "h", "w"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _onnx_session(weights: dict):
    """An onnxruntime session of the network on one thread, sequential and without busy-waiting (the
    extractor shares its core with the other nodes); None where onnxruntime or onnx is not installed."""
    try:
        import onnxruntime as ort

        graph = _onnx_graph(weights)
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    return ort.InferenceSession(graph, so, providers=["CPUExecutionProvider"])


def _numpy_outputs(W: dict, x: np.ndarray) -> np.ndarray:
    """The forward pass in NumPy of input features ``x`` (c, h, w), h and w divisible by 8."""

    def block(x: np.ndarray, name: str) -> np.ndarray:
        x = _conv(x, W[f"{name}a.weight"], W[f"{name}a.bias"])
        return _conv(x, W[f"{name}b.weight"], W[f"{name}b.bias"])

    e1 = block(x, "enc1")
    e2 = block(_pool(e1), "enc2")
    e3 = block(_pool(e2), "enc3")
    m = _conv(_conv(_pool(e3), W["mid_a.weight"], W["mid_a.bias"]), W["mid_b.weight"], W["mid_b.bias"])
    d3 = block(np.concatenate([_up(m), e3]), "dec3")
    d2 = block(np.concatenate([_up(d3), e2]), "dec2")
    d1 = block(np.concatenate([_up(d2), e1]), "dec1")
    return _conv(d1, W["head.weight"], W["head.bias"], relu=False)


@dataclass(frozen=True)
class Segmenter:
    """The network's weights (float32 arrays by ``layer_shapes`` name), ready to run.

    ``backend`` "onnx" runs the forward pass through onnxruntime (one thread; about 2.5x faster than
    NumPy on one core), "numpy" through NumPy alone; "auto" is onnx where onnxruntime is installed.
    The two agree to about 1e-5 (docs/perception.md); each gives the same answer in every run."""

    weights: dict
    backend: str = "auto"
    _session: object = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.backend not in ("auto", "onnx", "numpy"):
            raise ValueError(f"backend must be 'auto', 'onnx' or 'numpy', got {self.backend!r}")
        session = None if self.backend == "numpy" else _onnx_session(self.weights)
        if session is None and self.backend == "onnx":
            raise ValueError("backend 'onnx' needs onnx and onnxruntime installed")
        object.__setattr__(self, "_session", session)

    def __reduce__(self):  # the session is rebuilt from the weights, never pickled
        return (Segmenter, (self.weights, self.backend))

    @property
    def runs_on(self) -> str:
        """Which forward pass runs: "onnx" or "numpy"."""
        return "numpy" if self._session is None else "onnx"

    def outputs(self, feats: np.ndarray) -> np.ndarray:
        """(len(OUTPUTS), h, w) of input features (c, h, w): class scores (background, inside, boundary)
        and the border distance (a fraction of ``DIST_CLIP_PX``)."""
        c, h, w = feats.shape
        ph, pw = (-h) % 8, (-w) % 8
        x = np.pad(feats, ((0, 0), (0, ph), (0, pw)), mode="edge") if ph or pw else feats
        if self._session is None:
            return _numpy_outputs(self.weights, np.asarray(x, np.float32))[:, :h, :w]
        y = self._session.run(None, {"x": np.ascontiguousarray(x, np.float32)[None]})[0][0]
        return y[:, :h, :w]


def load_segmenter(path: str | Path = SHIPPED_WEIGHTS, backend: str = "auto") -> Segmenter:
    """The segmenter of a safetensors file (by default the shipped one), its forward pass on ``backend``
    (:class:`Segmenter`); ``ValueError`` when there is no such file, or it is too large, not safetensors,
    or holds other tensors, shapes or non-finite values than the network's (``layer_shapes``)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    if path.stat().st_size > _MAX_FILE_BYTES:
        raise ValueError(f"{path}: {path.stat().st_size} bytes, more than a segmenter's {_MAX_FILE_BYTES}")
    try:
        tensors = load(path.read_bytes())
    except (SafetensorError, ValueError, OSError) as exc:
        raise ValueError(f"{path}: not a safetensors file ({exc})") from None
    want = layer_shapes()
    if set(tensors) != set(want):
        raise ValueError(f"{path}: tensors {sorted(set(tensors) ^ set(want))[:4]} differ from the segmenter's")
    out = {}
    for name, shape in want.items():
        t = tensors[name]
        if tuple(t.shape) != shape or t.dtype.kind != "f" or not np.all(np.isfinite(t)):
            raise ValueError(f"{path}: {name} is {t.dtype}{tuple(t.shape)}, want finite float{shape}")
        out[name] = np.ascontiguousarray(t, dtype=np.float32)
    return Segmenter(out, backend)


# ------------------------------------------------------------------------------------------- instances
def _probabilities(scores: np.ndarray) -> np.ndarray:
    e = scores - scores.max(axis=0)
    np.exp(e, out=e)  # in place: the same values, no second array
    e /= e.sum(axis=0)
    return e


def instances(outputs: np.ndarray, inside_p: float = 0.5, core: float | None = 0.4, peaks: bool = False, *,
              prob: np.ndarray | None = None) -> np.ndarray:
    """Label image (0 = none) of the objects in the network's outputs (len(OUTPUTS), h, w); object pixels
    are those whose background probability is under 0.5.

    With ``core`` (a fraction of ``DIST_CLIP_PX``): object pixels whose predicted border distance is at
    least ``core`` form connected cores of at least ``_MIN_CORE_PX`` pixels; each is flooded over its
    object pixels in order of falling distance, so that where two objects touch the valley of the distance
    parts them (bounded work: a fixed number of levels and passes). A connected group of object pixels
    no core reaches is one object; with ``peaks`` so is a part of any level down to ``_PEAK_FLOOR`` that
    no flood has reached (a small object beside a larger one, whose own distance never reaches ``core``).
    Without ``core``: connected insides (probability of "inside" at least ``inside_p``) of at least
    ``_MIN_SEED_PX`` pixels grown over object pixels within ``_GROW_PX``. Objects under
    ``_MIN_OBJECT_PX`` pixels are dropped. ``prob``: the outputs' class probabilities when the caller has
    them already."""
    prob = _probabilities(outputs[:3]) if prob is None else prob
    objects = prob[0] < 0.5
    if core is None:
        lab = _grown_insides(prob, objects, inside_p)
    else:
        lab = _flooded_cores(np.clip(outputs[3], 0.0, 1.0), objects, float(core), peaks)
    n = int(lab.max())
    areas = np.bincount(lab.ravel(), minlength=n + 1)
    keep = np.zeros(n + 1, np.int32)
    ok = 1 + np.flatnonzero(areas[1:] >= _MIN_OBJECT_PX)
    keep[ok] = np.arange(1, len(ok) + 1)
    return keep[lab]


def _grown_insides(prob: np.ndarray, objects: np.ndarray, inside_p: float) -> np.ndarray:
    """Connected insides of at least ``_MIN_SEED_PX`` pixels, grown over ``objects`` within ``_GROW_PX``."""
    inside = (prob[1] >= inside_p).astype(np.uint8)
    n, lab, stats, _ = cv2.connectedComponentsWithStats(inside, connectivity=4)
    keep = np.zeros(n, np.int32)
    big = 1 + np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] >= _MIN_SEED_PX)
    keep[big] = np.arange(1, len(big) + 1)
    lab = keep[lab]
    if not len(big):
        return lab
    # within _GROW_PX of the insides' box: every pixel that can take a label lies there, and every inside
    # pixel too, so the nearest one is the same as over the whole image
    box = nonzero_box(lab, _GROW_PX)
    sub = lab[box]
    idx = ndimage.distance_transform_edt(sub == 0, return_distances=False, return_indices=True)
    out = np.zeros(lab.shape, np.int32)
    out[box] = np.where(objects[box] & _within(idx, _GROW_PX), sub[idx[0], idx[1]], 0)
    return out


def _within(idx: np.ndarray, reach: int) -> np.ndarray:
    """Where the nearest pixel ``idx`` (a feature transform's (2, h, w) indices) lies at most ``reach`` pixels
    away: the Euclidean distance transform's ``dist <= reach``, the same pixels, from the integer squared
    distance (the square root of an integer is at most ``reach`` exactly when the integer is at most
    ``reach`` squared), without the floating-point distances and their roots."""
    h, w = idx.shape[1:]
    dy = idx[0] - np.arange(h, dtype=idx.dtype)[:, None]
    dx = idx[1] - np.arange(w, dtype=idx.dtype)[None, :]
    dy *= dy
    dx *= dx
    dy += dx
    return dy <= int(reach) * int(reach)


def _flooded_cores(dist: np.ndarray, objects: np.ndarray, core: float, peaks: bool = False) -> np.ndarray:
    """Cores of ``dist`` >= ``core`` within ``objects``, flooded over ``objects`` level by level of falling
    distance (a watershed in ``_FLOOD_STEP`` levels): at each level a pixel takes the label of its nearest
    labelled pixel when that one lies in its own connected part of the level, so no label crosses the
    background or a valley of the distance another label reached first. On the last level (all object
    pixels) a group no core reached is one object; with ``peaks`` so is an unreached part of any level
    down to ``_PEAK_FLOOR``."""
    n, cores, stats, _ = cv2.connectedComponentsWithStats((objects & (dist >= core)).astype(np.uint8), connectivity=4)
    keep = np.zeros(n, np.int32)
    big = 1 + np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] >= _MIN_CORE_PX)
    keep[big] = np.arange(1, len(big) + 1)
    lab = keep[cores]
    if not objects.any():
        return lab
    levels = [*np.arange(core - _FLOOD_STEP, 0.0, -_FLOOD_STEP), 0.0]
    for i, level in enumerate(levels):
        region = (objects & (dist >= level)) | (lab > 0)
        n_parts, part = cv2.connectedComponents(region.astype(np.uint8), connectivity=4)
        if level == 0.0 or (peaks and level >= _PEAK_FLOOR):  # parts no label reaches start objects of their own
            reached = np.zeros(n_parts, bool)
            reached[part[lab > 0]] = True
            size = np.bincount(part.ravel(), minlength=n_parts)
            new = np.flatnonzero(~reached & (size >= (_MIN_CORE_PX if level > 0.0 else 1)))
            new = new[new > 0]
            if len(new):
                renum = np.zeros(n_parts, np.int32)
                renum[new] = int(lab.max()) + 1 + np.arange(len(new))
                lab = np.where(lab == 0, renum[part], lab)
        for _ in range(_FLOOD_PASSES if i < len(levels) - 1 else 4 * _FLOOD_PASSES):
            todo = region & (lab == 0)
            if not todo.any() or not lab.any():
                break
            idx = ndimage.distance_transform_edt(lab == 0, return_distances=False, return_indices=True)
            take = todo & (part[idx[0], idx[1]] == part)
            if not take.any():
                break
            lab = np.where(take, lab[idx[0], idx[1]], lab)
    return lab


def _renumbered(lab: np.ndarray, n: int) -> np.ndarray:
    """Labels (values 0..n) renumbered 1.. in order of their first pixel, row by row (0 stays 0). A label's
    first pixel starts a run of equal values (row-major), so only the runs' first values are ordered."""
    flat = lab.ravel()
    starts = flat[np.flatnonzero(flat[1:] != flat[:-1]) + 1] if flat.size else flat
    runs = np.concatenate((flat[:1], starts))
    _, first = np.unique(runs, return_index=True)
    ordered = runs[np.sort(first)]
    renum = np.zeros(n + 1, np.int32)
    renum[ordered[ordered > 0]] = np.arange(1, int((ordered > 0).sum()) + 1)
    return renum[lab]


def join_pieces(labels: np.ndarray, z: np.ndarray, sigmas: float = 3.0) -> np.ndarray:
    """``labels`` (0 = none) with the objects joined that the depth shows to be one surface: across their
    seam the depth continues the line each side makes, with neither a step nor a bend.

    The seam is the pixel pairs of two objects one step apart, or two with a gap pixel between (rows and
    columns), each with one more pixel of its own object behind it on the same line. Per pair, the second
    difference of the depth along that line (from each side; the larger) is compared with the noise of a
    second difference in this frame: its robust spread (1.4826 x median absolute value, over every line
    of three pixels inside one object, divided by depth squared since depth noise grows so; at least
    ``_SIGMA_AT_1M_FLOOR`` x sqrt(6)). Two objects are joined when the median of those ratios over their
    seam is at most ``sigmas`` and the seam has at least ``_MIN_SEAM_PX`` pairs with readings (a seam
    lined with holes is a depth edge). Joins are transitive; labels are renumbered 1.. in order of their
    first pixel (row by row). ``z`` is the depth (metres, NaN or <= 0 = no reading) at the labels' size."""
    lab = np.asarray(labels, np.int32)
    n = int(lab.max()) if lab.size else 0
    if n < 2:
        return lab.copy()
    h, w = lab.shape
    box = nonzero_box(lab)
    if box != (slice(0, h), slice(0, w)):
        # within the objects' box: every line read lies on their pixels, and the box keeps their row order
        out = np.zeros(lab.shape, np.int32)
        out[box] = join_pieces(lab[box], np.asarray(z)[box], sigmas)
        return out
    with np.errstate(invalid="ignore"):
        zz = np.where(np.isfinite(z) & (z > 0), z, np.nan).astype(np.float64)
    inner = []
    for a, d in ((lab, zz), (lab.T, zz.T)):  # second differences inside one object: the frame's noise
        one = (a[:-2] > 0) & (a[:-2] == a[1:-1]) & (a[1:-1] == a[2:])
        d2 = np.abs(d[:-2] - 2 * d[1:-1] + d[2:])[one] / d[1:-1][one] ** 2
        inner.append(d2[np.isfinite(d2)])
    inner = np.concatenate(inner)
    scale = max(1.4826 * float(_median(inner)) if len(inner) >= 50 else 0.0, _SIGMA_AT_1M_FLOOR * math.sqrt(6.0))
    keys, ratios = _seams(lab, zz, scale, n)
    parent = np.arange(n + 1)

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    if keys:
        key, ratio = np.concatenate(keys), np.concatenate(ratios)
        order = np.argsort(key, kind="stable")
        key, ratio = key[order], ratio[order]
        uniq, start, count = np.unique(key, return_index=True, return_counts=True)
        for k, s0, c in zip(uniq, start, count):
            if c >= _MIN_SEAM_PX and float(_median(ratio[s0:s0 + c])) <= sigmas:
                ra, rb = root(int(k // (n + 1))), root(int(k % (n + 1)))
                parent[max(ra, rb)] = min(ra, rb)
    roots = np.array([root(i) for i in range(n + 1)])
    return _renumbered(roots[lab], n)


def _seams(lab: np.ndarray, zz: np.ndarray, scale: float, n: int) -> tuple[list, list]:
    """:func:`join_pieces`' seam pairs of the labels ``lab`` (0..n) over the depth ``zz`` (float64, NaN = none):
    per direction (a step s of 1 or 2 pixels along rows, then columns) the pair keys (lower label * (n + 1) +
    upper) and their ratios, the larger second difference either side over ``scale`` z^2, row by row."""
    h, w = lab.shape
    pad = 3 * _SEAM_REACH
    W = w + 2 * pad
    L = np.zeros((h + 2 * pad, W), np.int32)  # np.pad's result, without its per-call overhead
    L[pad:pad + h, pad:pad + w] = lab
    Z = np.full(L.shape, np.nan)
    Z[pad:pad + h, pad:pad + w] = zz
    Lf, Zf = L.ravel(), Z.ravel()
    inside = lab > 0
    keys, ratios = [], []
    for d in range(1, _SEAM_REACH + 1):
        for dy, dx in ((0, d), (d, 0)):
            # p and q = p + s, two objects: the few pixels of their seams, read there alone (row by row, as
            # a boolean selection reads them) from the padded labels and depths one step s apart
            b = L[pad + dy:pad + dy + h, pad + dx:pad + dx + w]
            p = np.flatnonzero(inside & (b > 0) & (b != lab))
            step = dy * W + dx
            p += pad * W + pad + 2 * pad * (p // w)  # the same pixel in the padded arrays
            la, lb = Lf[p], Lf[p + step]
            keep = (Lf[p - step] == la) & (Lf[p + 2 * step] == lb)
            if not keep.any():
                continue
            p, la, lb = p[keep], la[keep], lb[keep]
            z0, zp, zq, z1 = Zf[p - step], Zf[p], Zf[p + step], Zf[p + 2 * step]
            with np.errstate(invalid="ignore"):
                r = np.maximum(np.abs(z0 - 2 * zp + zq) / (scale * zp * zp), np.abs(zp - 2 * zq + z1) / (scale * zq * zq))
            seen = np.isfinite(r)
            lo, hi = np.minimum(la, lb)[seen], np.maximum(la, lb)[seen]
            keys.append(lo.astype(np.int64) * (n + 1) + hi)
            ratios.append(r[seen])
    return keys, ratios


def fold_inner(labels: np.ndarray, share: float = 0.25) -> np.ndarray:
    """``labels`` (0 = none) with each object whose bounding box lies wholly inside a larger object's box
    and whose area is under ``share`` of that one's given to it (a label, a rim or a highlight the network
    parted from its object); the smallest such container takes it. Renumbered 1.. in order of their first
    pixel (row by row)."""
    lab = np.asarray(labels, np.int32)
    n = int(lab.max()) if lab.size else 0
    if n < 2:
        return lab.copy()
    area = np.bincount(lab.ravel(), minlength=n + 1)
    found = [(i, sl) for i, sl in enumerate(find_boxes(lab), start=1) if sl is not None]
    ids = np.array([i for i, _ in found])
    box = np.array([(sl[0].start, sl[0].stop, sl[1].start, sl[1].stop) for _, sl in found])
    y0, y1, x0, x1 = (box[:, k] for k in range(4))
    holds = ((y0[:, None] <= y0[None]) & (y1[None] <= y1[:, None]) & (x0[:, None] <= x0[None])
             & (x1[None] <= x1[:, None]) & (area[ids][None] < share * area[ids][:, None]))  # [j, i]: j holds i
    rank = np.lexsort((ids, area[ids]))  # smallest container first, ties by label
    to = np.arange(n + 1)
    for col in np.flatnonzero(holds.any(axis=0)):
        to[ids[col]] = ids[rank[holds[rank, col]][0]]
    for _ in range(n):  # a piece of a piece goes to the outermost
        nxt = to[to]
        if np.array_equal(nxt, to):
            break
        to = nxt
    return _renumbered(to[lab], n)


def visible_area_m2(mask: np.ndarray, z: np.ndarray, K: CameraIntrinsics) -> float:
    """The surface (m^2) the pixels of ``mask`` show at their depth ``z`` (metres, NaN or <= 0 = no
    reading; the intrinsics of this size): the pixel count times one pixel's footprint (z/fx)(z/fy) at the
    median depth of its readings; 0 without readings. Resolution-free: the same object covers the same
    area at any image size."""
    zs = z[mask]
    with np.errstate(invalid="ignore"):
        zs = zs[np.isfinite(zs) & (zs > 0)]
    if not len(zs):
        return 0.0
    zm = float(_median(zs))
    return float(np.count_nonzero(mask)) * zm * zm / (float(K.fx) * float(K.fy))


def join_within(labels: np.ndarray, referee: np.ndarray, z: np.ndarray, sigmas: float,
                share: float = 0.6) -> np.ndarray:
    """``labels`` (0 = none) with the objects that lie inside one region of ``referee`` (labels of the same
    size, 0 = none; ``share`` of their pixels in it) joined where :func:`join_pieces` at ``sigmas`` would
    join them; objects of different regions are never joined. Renumbered 1.. in order of their first
    pixel (row by row). ``z`` as :func:`join_pieces`'s."""
    lab = np.asarray(labels, np.int32)
    homes = _homes(lab, referee, share)
    if homes is None:
        return lab.copy()
    n, home = homes
    to = np.arange(n + 1)
    for region in np.unique(home[home > 0]):
        ids = np.flatnonzero(home == region)
        if len(ids) < 2:
            continue
        chosen = np.zeros(n + 1, bool)
        chosen[ids] = True
        sub = chosen[lab]
        # joined within the box of these objects: every line join_pieces reads lies on their pixels, and
        # the box keeps their row-by-row order, so the same objects join
        box = nonzero_box(sub)
        crop = lab[box]
        joined = join_pieces(np.where(sub[box], crop, 0), z[box], sigmas)
        for v in range(1, int(joined.max()) + 1):
            members = np.unique(crop[joined == v])
            to[members] = members.min()
    return _renumbered(to[lab], n)


def _pair_counts(lab: np.ndarray, ref: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(pixels of each object 0..n of ``lab`` in each region of ``ref``, (n + 1, regions + 1) with the
    "no region" column zeroed; pixels of each object)."""
    m = int(ref.max()) + 1
    pair = np.bincount(lab.ravel().astype(np.int64) * m + ref.ravel(), minlength=(n + 1) * m).reshape(n + 1, m)
    pair[:, 0] = 0
    return pair, np.bincount(lab.ravel(), minlength=n + 1)


def _region_counts(lab: np.ndarray, referee: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_pair_counts` of the objects ``lab`` (0..n) in the regions of ``referee``; None without a region."""
    ref = np.asarray(referee, np.int32)
    return _pair_counts(lab, ref, n) if n > 0 and ref.any() else None


def _homes(lab: np.ndarray, referee: np.ndarray, share: float,
           counts: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[int, np.ndarray] | None:
    """(n, per object of ``lab`` (1..n) the region of ``referee`` holding ``share`` of its pixels, 0 = none);
    None when there is nothing to referee (under two objects, or no region). ``counts``: the pair counts
    (:func:`_region_counts`) of these labels when the caller has them."""
    ref = np.asarray(referee, np.int32)
    n = int(lab.max()) if lab.size else 0
    if n < 2 or not ref.any():
        return None
    pair, px = _pair_counts(lab, ref, n) if counts is None else counts
    home = np.where(pair.max(axis=1) >= share * np.maximum(px, 1), pair.argmax(axis=1), 0)
    home[0] = 0
    return n, home


def join_hanging(labels: np.ndarray, referee: np.ndarray, height: np.ndarray, floor: np.ndarray,
                 feet: np.ndarray | Callable[[], np.ndarray] | None = None, share: float = 0.6) -> np.ndarray:
    """``labels`` (0 = none) with each object that does not reach down to the support joined to the object
    below it in the same region of ``referee`` (labels of the same size, 0 = none; ``share`` of their
    pixels in it). Objects stand on the support: a piece none of whose inside readings lies at the support's
    level (``height`` above the support plane at most ``floor``, the per-pixel height the depth noise
    alone can give; NaN = no reading) cannot stand alone, so it is part of the piece it touches (within
    one pixel) whose lowest reading is lower, the one it shares the longest border with. With ``feet``
    (int array (2, H, W): row and column of the point on the support straight below each reading, -1 where
    none; or a function giving it, called only when a piece needs it) it must also rest on that piece:
    more of its readings have their foot on it than on the piece itself (a low object seen from above, a
    domino, has its feet on itself: it stands, its sides hidden).
    Two pieces that each reach the support stay apart. Renumbered 1.. in order of their first pixel."""
    lab = np.asarray(labels, np.int32)
    homes = _homes(lab, referee, share)
    if homes is None:
        return lab.copy()
    n, home = homes
    # judged on each object's inside (its pixels whose 8 neighbours are its own): the network's border
    # pixels often read the surface beside or behind an object, which says nothing of where it stands
    pad = np.pad(lab, 1)
    inner = np.ones(lab.shape, bool)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            inner &= pad[1 + dy:1 + dy + lab.shape[0], 1 + dx:1 + dx + lab.shape[1]] == lab
    with np.errstate(invalid="ignore"):
        read = inner & (lab > 0) & np.isfinite(height)
        level = read & (height <= floor)
    low = np.full(n + 1, np.inf)
    _lowest(low, lab[read], height[read])
    stands = np.bincount(lab[level], minlength=n + 1) > 0
    # border lengths between touching objects (4-neighbours, and one pixel apart)
    keys = [np.zeros(0, np.int64)]
    for step in (1, 2):
        for a, b in ((lab[:, :-step], lab[:, step:]), (lab[:-step, :], lab[step:, :])):
            pair = (a != b) & (a > 0) & (b > 0)
            keys.append(a[pair].astype(np.int64) * (n + 1) + b[pair])
    contact = np.bincount(np.concatenate(keys), minlength=(n + 1) ** 2).reshape(n + 1, n + 1)
    contact += contact.T
    to = np.arange(n + 1)
    for i in range(1, n + 1):
        if stands[i] or home[i] == 0 or not np.isfinite(low[i]):
            continue
        mates = np.flatnonzero((home == home[i]) & (contact[i] > 0) & (low < low[i]))
        if len(mates) and feet is not None:  # only those it rests on: more of its feet on them than on itself
            if callable(feet):
                feet = feet()
            fy, fx = feet[0][read & (lab == i)], feet[1][read & (lab == i)]
            ok = fy >= 0
            on = np.bincount(lab[fy[ok], fx[ok]], minlength=n + 1)
            mates = mates[on[mates] > on[i]]
        if len(mates):
            to[i] = int(mates[np.lexsort((mates, -contact[i, mates]))[0]])
    for _ in range(n):  # a hanging piece on a hanging piece: lowest readings fall, so this ends
        nxt = to[to]
        if np.array_equal(nxt, to):
            break
        to = nxt
    return _renumbered(to[lab], n)


def _lowest(low: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
    """``np.minimum.at(low, ids, values)`` for values without NaN (the smallest of each id's values, where
    lower than ``low`` already): sorted by id and reduced per run, several times faster than ``ufunc.at``."""
    if not len(ids):
        return
    order = np.argsort(ids, kind="stable")
    ids, values = ids[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    low[ids[starts]] = np.minimum(low[ids[starts]], np.minimum.reduceat(values, starts))


def drop_small(labels: np.ndarray, z: np.ndarray, K: CameraIntrinsics, min_face: float,
               keep_lone: bool = True, referee: np.ndarray | None = None, confirm: float | None = None,
               share: float = 0.6, absorb: bool = False) -> np.ndarray:
    """``labels`` (0 = none) without the objects that show the camera less surface than a square of side
    ``min_face`` metres (:func:`visible_area_m2` at depth ``z``, intrinsics ``K`` of this size): pieces of
    an object the network parted from it (a label, a rim, a highlight, a face). With ``keep_lone`` only
    those beside a larger object (one not this small, within ``_GROW_PX`` pixels) go: a small object with
    nothing beside it is an object. With ``referee`` (labels of the same size, 0 = none: the geometry's
    proposals) and ``confirm``, a small object with ``share`` of its pixels in one region that covers at
    least ``confirm`` of that region stays: the depth bounds it there as a whole object on the support
    (a domino, a coin-sized box lying flat), where a piece the network parted from a larger object would
    cover only part of that object's region. With ``referee`` and ``absorb``, a small object with ``share``
    of its pixels in a region that holds a larger one the same way is given to the largest of those
    instead of dropped: the geometry says which object it is a piece of (a toy's ears parted from its
    head), and dropping it would clip that object. Renumbered 1.. in order of their first pixel (row by
    row)."""
    lab = np.asarray(labels, np.int32)
    n = int(lab.max()) if lab.size else 0
    if n == 0:
        return lab.copy()
    found = find_boxes(lab)
    small = np.zeros(n + 1, bool)
    for i, sl in enumerate(found, start=1):
        if sl is not None:
            small[i] = visible_area_m2(lab[sl] == i, z[sl], K) < float(min_face) ** 2
    counts = None  # the objects' pixels per region: counted once for both uses below
    if referee is not None and confirm is not None and small.any():
        counts = _region_counts(lab, referee, n)
        small &= ~confirmed(lab, referee, confirm, share, counts)
    to = np.arange(n + 1)
    h, w = lab.shape
    if referee is not None and absorb and counts is None:
        counts = _region_counts(lab, referee, n)
    homes = _homes(lab, referee, share, counts) if referee is not None and absorb else None
    px = np.bincount(lab.ravel(), minlength=n + 1)
    for i in np.flatnonzero(small):
        sl = found[i - 1]
        if homes is not None and homes[1][i] > 0:  # a piece of the largest object of its geometry region
            mates = np.flatnonzero((homes[1] == homes[1][i]) & ~small)
            if len(mates):
                to[i] = int(mates[np.lexsort((mates, -px[mates]))[0]])
                continue
        if keep_lone:  # is a larger object beside it?
            y0, y1 = max(sl[0].start - _GROW_PX, 0), min(sl[0].stop + _GROW_PX, h)
            x0, x1 = max(sl[1].start - _GROW_PX, 0), min(sl[1].stop + _GROW_PX, w)
            win = lab[y0:y1, x0:x1]
            ring = ndimage.binary_dilation(win == i, iterations=_GROW_PX) & (win > 0) & (win != i)
            if not (~small[win[ring]]).any():
                continue
        to[i] = 0
    return _renumbered(to[lab], n)


def confirmed(labels: np.ndarray, referee: np.ndarray, cover: float, share: float = 0.6,
              counts: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Per object of ``labels`` (bool array, index 0..n; 0 = none) whether one region of ``referee`` (labels
    of the same size, 0 = none) holds ``share`` of its pixels and the object covers at least ``cover`` of
    that region's pixels: the two labelings bound the same object there. ``counts``: the pair counts
    (:func:`_region_counts`) of these labels when the caller has them."""
    lab = np.asarray(labels, np.int32)
    ref = np.asarray(referee, np.int32)
    n = int(lab.max()) if lab.size else 0
    out = np.zeros(n + 1, bool)
    if n == 0 or not ref.any():
        return out
    pair, px = _pair_counts(lab, ref, n) if counts is None else counts
    region_px = np.bincount(ref.ravel(), minlength=pair.shape[1])
    home = pair.argmax(axis=1)
    inside = pair[np.arange(n + 1), home]
    out = (inside >= share * np.maximum(px, 1)) & (inside >= float(cover) * np.maximum(region_px[home], 1)) & (inside > 0)
    out[0] = False
    return out


def trim_outline(proposals: list[Proposal], depth: np.ndarray, K: CameraIntrinsics, plane: _Plane,
                 floor: tuple[float, float], band: int) -> list[Proposal]:
    """``proposals`` whose masks lose the pixels of their outer ``band`` pixels (full size) that read the
    support's level: height above ``plane`` at most max(floor[0], floor[1] z^2) at their depth ``depth``
    (metres, NaN = none; intrinsics ``K`` of this size). Masks made at a coarser work size are blocks at
    full size, and an outline block often holds the table beside the object too: its colour then rings
    the object's masked crop (a dark object on a light table looks like another object). Only the mask
    changes: the box stays the object's extent (an object's own lowest rows read the support's level
    too), and a mask that would lose every pixel stays whole. Order kept."""
    out = []
    h, w = depth.shape
    nx, ny, nz = (float(v) for v in plane.normal)
    for p in proposals:
        x0, y0, x1, y1 = p.box
        x0, y0, x1, y1 = max(x0 - 1, 0), max(y0 - 1, 0), min(x1 + 1, w), min(y1 + 1, h)
        m = p.mask[y0:y1, x0:x1].view(np.uint8)
        if m.size == 0:  # a box outside the frame: no outline to trim
            out.append(p)
            continue
        # the erosion lies within the mask, so the outline band (mask and not eroded) is their difference;
        # its pixels row by row, as np.nonzero lists them
        edge = cv2.subtract(m, cv2.erode(m, _CROSS, iterations=int(band), borderType=cv2.BORDER_CONSTANT, borderValue=0))
        at = cv2.findNonZero(edge)
        if at is None:
            out.append(p)
            continue
        at = at.reshape(-1, 2)
        xs, ys = at[:, 0], at[:, 1]
        z = depth[y0:y1, x0:x1][ys, xs]
        with np.errstate(invalid="ignore"):
            height = (nx * (xs + x0 - K.cx) / K.fx + ny * (ys + y0 - K.cy) / K.fy + nz) * z + plane.offset
            level = np.isfinite(z) & (z > 0) & (height <= np.maximum(floor[0], floor[1] * z * z))
        if not level.any():
            out.append(p)
            continue
        mask = p.mask.copy()
        mask[ys[level] + y0, xs[level] + x0] = False
        # pixels stay where the window held more than those taken (each taken pixel is one of its own)
        left = np.count_nonzero(level) < np.count_nonzero(m) or mask.any()
        out.append(dataclasses.replace(p, mask=mask) if left else p)
    return out


def _feet(P: np.ndarray, height: np.ndarray, valid: np.ndarray, plane, K: CameraIntrinsics) -> np.ndarray:
    """Row and column (int array (2, H, W), -1 = none) where the point straight below each reading meets the
    support plane, seen by the camera ``K``."""
    q = P - np.where(valid, height, 0.0)[..., None] * plane.normal.astype(np.float32)
    h, w = height.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.round(K.fx * q[..., 0] / q[..., 2] + K.cx)
        v = np.round(K.fy * q[..., 1] / q[..., 2] + K.cy)
        ok = valid & (q[..., 2] > 0.02) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
    return np.stack([np.where(ok, v, -1), np.where(ok, u, -1)]).astype(np.int64)


def _geometry(labels: np.ndarray, z: np.ndarray, K: CameraIntrinsics, prob: np.ndarray, config: ProposalConfig,
              use_plane: bool = True, join: float | None = None, inner: bool = False,
              min_face: float | None = None, keep_lone: bool = True, referee: np.ndarray | None = None,
              referee_join: float | None = None, stand: bool = False, confirm: float | None = None,
              support: _Plane | None = None, absorb: bool = False) -> tuple[np.ndarray, list] | None:
    """Per object (centroid, size, score: one minus its mean background probability in ``prob``, the
    network's class probabilities), with the geometry method's support plane when there is one:
    objects not standing on it, too small or too large for ``config`` are dropped (labels renumbered).
    With ``join``, objects the depth shows to be one surface are joined first (:func:`join_pieces` at
    ``join`` noise sigmas); with ``inner``
    small objects inside another's box are given to it (:func:`fold_inner`); with ``min_face`` (metres)
    objects showing less surface than a square of that side are dropped (:func:`drop_small`); with
    ``referee`` (labels of this size) pieces inside one of its regions are joined at ``referee_join``
    sigmas (:func:`join_within`); with ``referee`` and ``stand`` a piece inside one of its regions that does
    not reach down to the support plane is joined to the piece below it (:func:`join_hanging`); with
    ``referee`` and ``confirm`` a small object covering that share of one of its regions stays, with
    ``absorb`` a small one inside a larger one's region joins it (:func:`drop_small`). ``support``: the
    support plane already estimated for this frame (refined), used as it is instead of estimating it
    again. None when the camera's pose (``config.up_axis``) leaves no level support: the pose and
    the view disagree."""
    h, w = z.shape
    valid = np.isfinite(z) & (z > 0.02) & (z < 20.0)
    zf = np.where(valid, z, 0.0).astype(np.float32, copy=False)
    xs = ((np.arange(w, dtype=np.float32) - K.cx) / K.fx)[None, :] * zf
    ys = ((np.arange(h, dtype=np.float32) - K.cy) / K.fy)[:, None] * zf
    P = np.stack([xs, ys, zf], axis=-1)
    if not use_plane or np.count_nonzero(valid) < 100:
        plane = None
    elif support is not None:
        plane = support
    else:
        plane = choose_support(support_planes(P[valid], config), config, P, valid)
        if plane is not None:
            plane = refine_plane(plane, P[valid], config.rules.plane_tolerance_m, config.rules.support_refits)
    if plane is None and use_plane and config.up_axis is not None:
        return None  # the camera's pose says no surface in view is level: a position from it would be wrong
    out = np.zeros_like(labels)
    geo = []
    if plane is not None:
        height = np.where(valid, P @ plane.normal.astype(np.float32) + np.float32(plane.offset), np.nan).astype(np.float32, copy=False)
        sigma = _noise_sigma(height, zf, valid, config)
        with np.errstate(invalid="ignore"):
            fg = valid & (height > np.maximum(config.min_height_m, config.height_sigmas * sigma)) & (height < config.max_size_m)
        surface = (_support_region(valid & (np.abs(height) < 2 * config.rules.plane_tolerance_m), config.rules.support_patch_share)
                   if config.on_support_only else None)
    zn = np.where(valid, zf, np.nan)  # the readings, NaN where none: read by the joins and drop_small
    if join is not None:
        labels = join_pieces(labels, zn, join)
    if referee is not None and referee_join is not None:
        labels = join_within(labels, referee, zn, referee_join)
    if referee is not None and stand and plane is not None:
        labels = join_hanging(labels, referee, np.where(valid, height, np.nan),
                              np.maximum(config.min_height_m, config.height_sigmas * sigma),
                              lambda: _feet(P, height, valid, plane, K))
    if inner:
        labels = fold_inner(labels)
    if min_face is not None:
        labels = drop_small(labels, zn, K, min_face, keep_lone, referee, confirm,
                            absorb=absorb)
    for lab, sl in enumerate(find_boxes(labels), start=1):
        if sl is None:
            continue
        m = labels[sl] == lab
        score = float(1.0 - prob[0][sl][m].mean())
        if plane is not None:
            g = plane_geometry(m, sl, fg, P, height, plane, surface, K, config)
            if g is None:
                continue
            g = (g[0], g[1], score)
        else:
            pts = _rows(P[sl], m & valid[sl])
            if len(pts) < 10:
                continue
            lo, hi = np.quantile(pts, [0.02, 0.98], axis=0)
            if not config.min_size_m <= float((hi - lo).max()) <= config.max_size_m:
                continue
            g = ((lo + hi) / 2, hi - lo, score)
        out[sl][m] = len(geo) + 1
        geo.append(g)
    return out, geo


def propose_learned(segmenter: Segmenter, rgb: np.ndarray, depth: np.ndarray, intrinsics: CameraIntrinsics,
                    config: ProposalConfig | None = None, *, plane: bool = True, colour: bool = True, inside_p: float = 0.5,
                    core: float | None = None, peaks: bool = False, join: float | None = 2.0,
                    inner: bool = True, min_face: float | None = MIN_FACE_M, keep_lone: bool = False,
                    referee: np.ndarray | None = None, referee_join: float | None = None, stand: bool = False,
                    confirm: float | None = None, support: _Plane | None = None, absorb: bool = False,
                    width: int = WORK_WIDTH) -> list[Proposal] | None:
    """Object proposals of one frame by the network, completed by the support plane (as ``propose`` returns
    them: highest score first, masks and boxes at full size); None when the depth is unusable (under 5 % of
    readings, another aspect ratio) or the camera's pose leaves no level support, for the caller's fallback. ``config`` is a ``ProposalConfig``.
    ``plane=False`` keeps every object the network finds (3D from its own points), ``colour=False`` shows the
    network depth alone, ``core``, ``peaks`` and ``inside_p`` are :func:`instances`' choices, ``join`` joins
    objects whose seam the depth does not show (:func:`join_pieces` at that many noise sigmas), ``inner``
    gives small objects inside another's box to it (:func:`fold_inner`), ``min_face`` drops objects that show
    less surface than a square of that side in metres (``MIN_FACE_M``; None keeps them; with ``keep_lone``
    only those beside a larger object: :func:`drop_small`), ``referee`` (labels of the frame's size, 0 = none:
    the geometry's proposals) with ``referee_join`` joins pieces inside one of its regions at that many noise
    sigmas (:func:`join_within`) and with ``stand`` a piece inside one of its regions that does not reach down to
    the support joins the piece below it (:func:`join_hanging`) and with ``confirm`` a small object covering
    that share of one of its regions is kept by ``min_face`` and with ``absorb`` a small one inside a larger
    one's region joins it (:func:`drop_small`), ``support`` the support
    plane the geometry already found for this frame (None: estimated here), ``width`` the
    work width (the network was trained at ``WORK_WIDTH``; wider shows small objects larger): what each is
    worth is measured (bench/bench_segmenter.py)."""
    config = config or ProposalConfig()
    rgb = _check_rgb(rgb)
    h, w = rgb.shape[:2]
    d = _usable_depth(depth, (h, w))
    if d is None:
        return None
    if not 32 <= int(width) <= 1024:
        raise ValueError(f"width must be in [32, 1024], got {width}")
    if core is not None and not 0.0 < float(core) <= 1.0:
        raise ValueError(f"core must be in (0, 1], got {core}")
    if join is not None and not 0.0 < float(join) <= 100.0:
        raise ValueError(f"join must be in (0, 100] noise sigmas, got {join}")
    if referee_join is not None and not 0.0 < float(referee_join) <= 100.0:
        raise ValueError(f"referee_join must be in (0, 100] noise sigmas, got {referee_join}")
    if referee is not None and np.shape(referee) != (h, w):
        raise ValueError(f"referee must be the frame's size {(h, w)}, got {np.shape(referee)}")
    if min_face is not None and not 0.0 <= float(min_face) <= 1.0:
        raise ValueError(f"min_face must be in [0, 1] metres, got {min_face}")
    if confirm is not None and not 0.0 < float(confirm) <= 1.0:
        raise ValueError(f"confirm must be in (0, 1], got {confirm}")
    scale = min(1.0, int(width) / w)
    sw, sh = max(8, int(round(w * scale))), max(8, int(round(h * scale)))
    small = cv2.resize(rgb, (sw, sh), interpolation=cv2.INTER_AREA)
    z = cv2.resize(d, (sw, sh), interpolation=cv2.INTER_NEAREST)
    K = intrinsics.scaled(sw / w, sh / h)
    feats = input_features(small, z, K)
    if feats is None:
        return None
    if not colour:
        feats[[CHANNELS.index(c) for c in ("red", "green", "blue")]] = 0.0
    out = segmenter.outputs(feats)
    if referee is not None and (referee_join is not None or stand or confirm is not None or absorb):
        referee = cv2.resize(np.asarray(referee, np.int32), (sw, sh), interpolation=cv2.INTER_NEAREST)
    else:
        referee = None
    prob = _probabilities(out[:3])  # once, for the objects and their scores
    placed = _geometry(instances(out, inside_p, core, peaks, prob=prob), z, K, prob, config, plane, join, inner, min_face,
                       keep_lone, referee, referee_join, stand, confirm, support, absorb)
    if placed is None:
        return None  # as with unusable depth: the geometry's answer, which says why and places nothing
    return _assemble(*placed, (h, w), config)


_PIECE_SHARE = 0.6  # a proposal with this share of its mask inside another is a piece of it
_NEW_IOU = 0.1  # a learned object overlapping no geometry proposal by more than this mask IoU is one it missed


def _box_px(a: Proposal) -> int:
    """Pixels of ``a``'s mask inside its box."""
    ax0, ay0, ax1, ay1 = a.box
    return int(np.count_nonzero(a.mask[ay0:ay1, ax0:ax1]))


def _inside(a: Proposal, b: Proposal, a_px: int | None = None) -> float:
    """Share of ``a``'s mask inside ``b``'s (boxes first: most pairs do not touch); ``a_px``: ``_box_px(a)``
    when the caller has it already."""
    return _common(a, b) / max(_box_px(a) if a_px is None else a_px, 1)


def _common(a: Proposal, b: Proposal) -> int:
    """Pixels of both ``a``'s and ``b``'s masks within both boxes (0 when the boxes do not touch): the same
    count either way round."""
    ax0, ay0, ax1, ay1 = a.box
    bx0, by0, bx1, by1 = b.box
    if ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0:
        return 0
    y0, y1, x0, x1 = max(ay0, by0), min(ay1, by1), max(ax0, bx0), min(ax1, bx1)
    return int(np.count_nonzero(a.mask[y0:y1, x0:x1] & b.mask[y0:y1, x0:x1]))


def combine(geometry: list[Proposal], learned: list[Proposal], max_proposals: int = 32) -> list[Proposal]:
    """The geometry's proposals corrected by the network's: a geometry proposal holding two or more learned
    objects (two touching objects joined) gives way to them; two or more geometry pieces inside one learned
    object (an object cut in pieces) give way to it; a learned object no geometry proposal overlaps is added.
    Highest score first, at most ``max_proposals``."""
    if not learned:
        return geometry[:max_proposals]
    if not geometry:
        return learned[:max_proposals]
    G, L = len(geometry), len(learned)
    g_in_l = np.array([[_inside(g, l) for l in learned] for g in geometry])  # (G, L)
    l_in_g = np.array([[_inside(l, g) for g in geometry] for l in learned])  # (L, G)
    drop_g, add_l = set(), set()
    for j in range(L):  # pieces of one learned object
        pieces = np.flatnonzero(g_in_l[:, j] >= _PIECE_SHARE)
        if len(pieces) >= 2:
            drop_g.update(int(i) for i in pieces)
            add_l.add(j)
    for i in range(G):  # one geometry proposal holding several learned objects
        held = np.flatnonzero(l_in_g[:, i] >= _PIECE_SHARE)
        if len(held) >= 2 and i not in drop_g:
            drop_g.add(i)
            add_l.update(int(j) for j in held)
    for j in range(L):  # objects the geometry missed
        overlap = max((_inside(learned[j], g) for g in geometry), default=0.0)
        if overlap < _NEW_IOU and g_in_l[:, j].max() < _NEW_IOU:
            add_l.add(j)
    out = [g for i, g in enumerate(geometry) if i not in drop_g] + [learned[j] for j in sorted(add_l)]
    out.sort(key=lambda p: (-p.score, p.box))
    return out[:max_proposals]


_PART_SHARE = 0.2  # a geometry proposal smaller than this share of a learned object is a piece of it, not an object


def part_merged(learned: list[Proposal], geometry: list[Proposal], max_proposals: int = 32,
                whole: float | None = None) -> list[Proposal]:
    """The network's proposals with the depth's geometry as referee where the two disagree:

    - learned objects that one geometry proposal holds (each with ``_PIECE_SHARE`` of its mask inside it:
      no depth step, crease or level between them) are pieces of one object: the largest stays, the
      smaller go (a label, a rim or a face the network parted; joining them instead joins the objects
      the geometry itself merged);
    - a learned object holding two or more geometry proposals (each with ``_PIECE_SHARE`` of its mask
      inside it and at least ``_PART_SHARE`` of its area: a depth step, a crease or another level between
      them) gives way to them.

    - with ``whole``: a geometry proposal holding one learned object (``_PIECE_SHARE`` of its mask inside
      it) smaller than ``whole`` of it takes its place: the network saw only part of what the depth bounds
      as one object standing on the support, its other part dropped as a small piece or never found (a
      toy's ears above its head). A geometry proposal holding two or more stays out: there the geometry
      may have merged touching objects the network parts.

    Every other learned object stays as it is; geometry proposals elsewhere are not added (on the real
    frames they added more pieces than objects). Highest score first, at most ``max_proposals``."""
    if not learned or not geometry:
        return learned[:max_proposals]
    area = [int(np.count_nonzero(p.mask)) for p in learned]
    common = [[_common(p, g) for g in geometry] for p in learned]  # read both ways below: counted once
    share = [[c / max(px, 1) for c in row] for row, px in zip(common, (_box_px(p) for p in learned))]
    home = [max(range(len(geometry)), key=lambda i, s=s: (s[i], -i)) for s in share]
    home = [h if s[h] >= _PIECE_SHARE else -1 for s, h in zip(share, home)]
    g_px = [_box_px(g) for g in geometry]
    g_area: dict[int, int] = {}  # pixels of a geometry proposal, counted where asked

    def large(i: int, k: int) -> bool:  # geometry proposal i holds _PART_SHARE of learned object k's area
        if i not in g_area:
            g_area[i] = int(np.count_nonzero(geometry[i].mask))
        return g_area[i] >= _PART_SHARE * area[k]

    out: list[Proposal] = []
    if whole is not None:
        for i, g in enumerate(geometry):
            pieces = [k for k in range(len(learned)) if home[k] == i]
            if len(pieces) == 1 and area[pieces[0]] < float(whole) * int(np.count_nonzero(g.mask)):
                out.append(g)
                for k in pieces:
                    home[k] = -2  # replaced by the geometry's whole
    for k, lp in enumerate(learned):
        if home[k] == -2:
            continue
        if home[k] >= 0 and any(home[j] == home[k] and (area[j], -j) > (area[k], -k) for j in range(len(learned))):
            continue  # a smaller piece of what the geometry sees as one object
        held = [g for i, g in enumerate(geometry) if common[k][i] / max(g_px[i], 1) >= _PIECE_SHARE and large(i, k)]
        out.extend(held if len(held) >= 2 else [lp])
    out.sort(key=lambda p: (-p.score, p.box))
    return out[:max_proposals]


def propose_hybrid(segmenter: Segmenter, rgb: np.ndarray, depth: np.ndarray, intrinsics: CameraIntrinsics,
                   config: ProposalConfig | None = None, referee_join: float | None = REFEREE_JOIN_SIGMAS,
                   stand: bool = True, confirm: float | None = REFEREE_CONFIRM, whole: float | None = REFEREE_WHOLE,
                   trim: bool = True, absorb: bool = REFEREE_ABSORB, **learned_options) -> list[Proposal] | None:
    """The learned proposals with the depth's geometry (``propose`` with method "depth") as referee: pieces
    of the network's that lie inside one geometry proposal are joined at ``referee_join`` noise sigmas
    (:func:`join_pieces`; looser than the join anywhere else, since the geometry saw no step there); with
    ``stand`` a piece inside one that does not reach down to the support is joined to the piece below it
    (:func:`join_hanging`: it cannot stand alone); a small object covering ``confirm`` of one geometry
    proposal stays and with ``absorb`` a small one inside a larger one's geometry proposal joins it
    (:func:`drop_small`); with ``trim`` outline pixels at the support's level leave the masks
    (:func:`trim_outline`; boxes stay); then :func:`part_merged` (with ``whole``). The support plane is
    the geometry's, estimated once. ``learned_options`` are :func:`propose_learned`'s. None when the depth is
    unusable, as :func:`propose_learned`."""
    config = config or ProposalConfig()
    rgb = _check_rgb(rgb)
    d = _usable_depth(depth, rgb.shape[:2])
    if d is None:
        return None  # the caller's fallback, without running the geometry for nothing
    depth = _UsableDepth(d)  # converted once for the geometry, the network and the trim
    geometry, plane = propose_on_support(rgb, depth, intrinsics, dataclasses.replace(config, method="depth"))
    return refereed(segmenter, rgb, depth, intrinsics, config, geometry, plane, referee_join=referee_join,
                    stand=stand, confirm=confirm, whole=whole, trim=trim, absorb=absorb, **learned_options)


def referee_labels(geometry: list[Proposal], shape: tuple[int, int]) -> np.ndarray | None:
    """The geometry's proposals as one label image of ``shape`` (1.. in their order, the first one where
    two overlap; 0 = none); None without proposals. A mask that lies within its box (as every proposal
    made here: counted the same inside it) is written there only."""
    referee = np.zeros(shape, np.int32)
    for i, g in enumerate(geometry, start=1):
        x0, y0, x1, y1 = (max(int(v), 0) for v in g.box)
        inner = g.mask[y0:y1, x0:x1]
        if np.count_nonzero(inner) == np.count_nonzero(g.mask):
            r = referee[y0:y1, x0:x1]
            r[inner & (r == 0)] = i
        else:
            referee[g.mask & (referee == 0)] = i
    return referee if geometry else None


def refereed(segmenter: Segmenter, rgb: np.ndarray, depth: np.ndarray, intrinsics: CameraIntrinsics,
             config: ProposalConfig, geometry: list[Proposal], support: _Plane | None, *, whole: float | None = None,
             trim: bool = False, **learned_options) -> list[Proposal] | None:
    """:func:`propose_hybrid` given the geometry's proposals of the frame and the support plane they stand
    on (None: estimated again by :func:`propose_learned`, and no outline trimmed)."""
    if whole is not None and not 0.0 < float(whole) <= 1.0:
        raise ValueError(f"whole must be in (0, 1], got {whole}")
    learned = propose_learned(segmenter, rgb, depth, intrinsics, config,
                              referee=referee_labels(geometry, rgb.shape[:2]), support=support, **learned_options)
    if learned is None:
        return None
    out = part_merged(learned, geometry, config.max_proposals, whole)
    if trim and support is not None and out:
        d = _usable_depth(depth, rgb.shape[:2])
        band = int(math.ceil(rgb.shape[1] / int(learned_options.get("width", WORK_WIDTH))))
        out = trim_outline(out, d, intrinsics, support, support_floor(d, intrinsics, support, config), band)
    return out


def support_floor(depth: np.ndarray, K: CameraIntrinsics, plane: _Plane, config: ProposalConfig,
                  step: int = 4) -> tuple[float, float]:
    """The height above ``plane`` the depth noise alone can give, as the geometry's test has it:
    max(``min_height_m``, ``height_sigmas`` sigma(z)) with sigma(z) = s z^2, ``s`` measured on the table's
    readings (every ``step``-th pixel of ``depth``, metres, NaN = none; intrinsics ``K``); as (minimum
    height, height per squared metre of depth)."""
    z = np.ascontiguousarray(np.asarray(depth, np.float32)[::step, ::step])  # the same values, read faster
    k = K.scaled(z.shape[1] / depth.shape[1], z.shape[0] / depth.shape[0])
    valid = np.isfinite(z) & (z > 0.02) & (z < 20.0)
    zf = np.where(valid, z, 0.0)
    xs = ((np.arange(z.shape[1], dtype=np.float32) - k.cx) / k.fx)[None, :] * zf
    ys = ((np.arange(z.shape[0], dtype=np.float32) - k.cy) / k.fy)[:, None] * zf
    nx, ny, nz = (float(v) for v in plane.normal)
    height = np.where(valid, nx * xs + ny * ys + nz * zf + plane.offset, np.nan).astype(np.float32, copy=False)
    return float(config.min_height_m), float(config.height_sigmas) * _noise_scale(height, zf, valid)
