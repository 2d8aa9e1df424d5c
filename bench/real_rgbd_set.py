"""The real RGB-D table set: assemble it from the sources' git snapshots, load it, score proposals.

The labels (``bench/real_rgbd/labels.json``) are ours and committed; the frames are not (most sources'
licences do not allow redistribution, and every source is built the same way), so :func:`assemble`
copies them out of git snapshots of the source repositories at the recorded commits and writes every
frame in one form: ``<id>-color.png`` (BGR PNG) and ``<id>-depth.png`` (16-bit, millimetres, 0 = no
reading, registered to the colour image). Sources ship colour as PNG or JPEG, or inside a pickled dict
``.npy``; depth as 16-bit PNG (millimetres or tenths; or tenths with the bits rotated left by 3, as the
APC 2016 vision toolbox writes them), ``.npy`` in metres or OpenEXR in metres. A frame may name its own
intrinsics (``K``) where its source has several cameras.

Scoring (:func:`score_proposals`) follows the usual detection rules: proposals and labelled boxes are
matched one to one, best IoU first, at IoU >= 0.5; a proposal mostly (>= 50 % of its box) inside an
``ignore`` box (a chair, a cart, a robot part off the table) counts neither way; a *merge* is an
unmatched proposal whose box holds at least half of the boxes of two or more labelled objects.
"""
from __future__ import annotations

import io
import json
import pickle
import struct
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

try:  # numpy 2
    from numpy._core import multiarray as np_multiarray
except ImportError:  # numpy 1
    from numpy.core import multiarray as np_multiarray

from cbcl_pr_ros.perception.boxes import box_iou
from cbcl_pr_ros.perception.types import CameraIntrinsics

__all__ = ["RealFrame", "ProposalScore", "MaskCheck", "load_labels", "assemble", "mask_checks", "load_frames",
           "score_proposals", "failure_kinds"]

Box = tuple[int, int, int, int]


@dataclass
class RealFrame:
    """One labelled frame: colour, depth in metres (NaN = no reading), intrinsics and boxes."""

    id: str
    source: str
    scene: str
    tags: list[str]
    rgb: np.ndarray
    depth_m: np.ndarray
    intrinsics: CameraIntrinsics
    objects: list[tuple[str, Box]]
    ignore: list[Box] = field(default_factory=list)


@dataclass
class ProposalScore:
    """Counts of one frame (or summed over frames)."""

    objects: int = 0
    hits: int = 0
    proposals: int = 0  # proposals that count (not mostly inside an ignore box)
    true_positives: int = 0
    merges: int = 0
    matched: dict[int, int] = field(default_factory=dict)  # object index -> proposal index

    def add(self, other: "ProposalScore") -> None:
        self.objects += other.objects
        self.hits += other.hits
        self.proposals += other.proposals
        self.true_positives += other.true_positives
        self.merges += other.merges

    @property
    def recall(self) -> float:
        return self.hits / self.objects if self.objects else float("nan")

    @property
    def precision(self) -> float:
        return self.true_positives / self.proposals if self.proposals else float("nan")


def load_labels(path: str | Path) -> dict:
    """The labels file as a dict (``sources`` and ``frames``); raises on a malformed one."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data.get("frames"), list) or not isinstance(data.get("sources"), dict):
        raise ValueError(f"{path}: needs 'sources' and 'frames'")
    return data


def _git_dir(snapshots: Path, repo: str) -> Path:
    """The git directory of ``owner/name`` under ``snapshots``: a fetched snapshot
    (``owner+name/repo``), a bare or plain clone (``name`` or ``owner+name``)."""
    owner, name = repo.split("/", 1)
    for cand in (snapshots / f"{owner}+{name}" / "repo", snapshots / f"{owner}+{name}", snapshots / name):
        if (cand / "HEAD").is_file():
            return cand
        if (cand / ".git").exists():
            return cand / ".git"
    raise FileNotFoundError(f"no git snapshot of {repo} under {snapshots} (tried {owner}+{name}/repo, {name})")


def _git_show(git_dir: Path, commit: str, path: str) -> bytes:
    out = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], capture_output=True, check=False)
    if out.returncode != 0 or not out.stdout:
        raise FileNotFoundError(f"{git_dir}: cannot read {commit[:10]}:{path}: {out.stderr.decode(errors='replace')[:200]}")
    return out.stdout


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays, dicts, lists and scalars only: a source's pickled ``.npy`` can run no code."""

    _MODULES = ("numpy", "numpy.core.multiarray", "numpy._core.multiarray", "numpy.core._multiarray_umath",
                "numpy._core._multiarray_umath")
    _NAMES = {"ndarray": np.ndarray, "dtype": np.dtype, "_reconstruct": np_multiarray._reconstruct,
              "scalar": np_multiarray.scalar}

    def find_class(self, module: str, name: str):
        if module not in self._MODULES or name not in self._NAMES:
            raise pickle.UnpicklingError(f"refusing {module}.{name} in a pickled array file")
        return self._NAMES[name]


def _npy_dict(raw: bytes) -> dict:
    """A ``.npy`` file holding one pickled dict of arrays (as some grasping demos ship their frames)."""
    f = io.BytesIO(raw)
    version = np.lib.format.read_magic(f)
    shape, _, dtype = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)(f)
    if dtype != np.dtype(object):
        raise ValueError("not a pickled dict .npy")
    obj = _ArrayUnpickler(f, encoding="latin1").load()
    obj = obj.item() if isinstance(obj, np.ndarray) and obj.shape == () else obj
    if not isinstance(obj, dict):
        raise ValueError("the pickled .npy does not hold a dict")
    return obj


def _exr_channel(raw: bytes) -> np.ndarray:
    """The first channel of a scanline OpenEXR image (no, ZIPS or ZIP compression; half or float pixels)
    as float32: OpenCV builds without OpenEXR read none, and depth renderers write it."""
    if len(raw) < 8 or struct.unpack("<I", raw[:4])[0] != 20000630:
        raise ValueError("not an OpenEXR file")
    p, hdr = 8, {}
    while raw[p] != 0:
        name_end = raw.index(b"\0", p)
        type_end = raw.index(b"\0", name_end + 1)
        size = struct.unpack("<i", raw[type_end + 1:type_end + 5])[0]
        hdr[raw[p:name_end].decode()] = raw[type_end + 5:type_end + 5 + size]
        p = type_end + 5 + size
    p += 1
    chans, c, q = [], hdr["channels"], 0
    while c[q] != 0:
        e = c.index(b"\0", q)
        chans.append(struct.unpack("<i", c[e + 1:e + 5])[0])  # 0 uint, 1 half, 2 float
        q = e + 17
    x0, y0, x1, y1 = struct.unpack("<4i", hdr["dataWindow"])
    w, h = x1 - x0 + 1, y1 - y0 + 1
    comp = hdr["compression"][0]
    if comp not in (0, 2, 3):
        raise ValueError(f"OpenEXR compression {comp} is not supported (none, ZIPS and ZIP are)")
    lines = 16 if comp == 3 else 1
    dtypes = [{0: "<u4", 1: "<f2", 2: "<f4"}[t] for t in chans]
    sizes = [np.dtype(d).itemsize for d in dtypes]
    n_blocks = (h + lines - 1) // lines
    offsets = struct.unpack(f"<{n_blocks}Q", raw[p:p + 8 * n_blocks])
    out = np.zeros((h, w), np.float32)
    for off in offsets:
        y, size = struct.unpack("<ii", raw[off:off + 8])
        data = raw[off + 8:off + 8 + size]
        n = min(lines, y1 - y + 1)
        if comp and size < n * w * sum(sizes):  # zlib, then a byte predictor and two interleaved halves
            t = np.frombuffer(zlib.decompress(data), np.uint8).astype(np.int64)
            t[1:] -= 128
            t = (np.cumsum(t) & 255).astype(np.uint8)
            half = (len(t) + 1) // 2
            r = np.empty_like(t)
            r[0::2], r[1::2] = t[:half], t[half:]
            data = r.tobytes()
        q = 0
        for li in range(n):
            for k, (dt, sz) in enumerate(zip(dtypes, sizes)):
                if k == 0:
                    out[y - y0 + li] = np.frombuffer(data[q:q + w * sz], dt)
                q += w * sz
    return out


def _metres_to_mm(d: np.ndarray) -> np.ndarray:
    d = np.asarray(d, np.float64).squeeze()
    if d.ndim != 2:
        raise ValueError(f"depth is not one channel: shape {d.shape}")
    d = np.where(np.isfinite(d) & (d > 0), d * 1000.0, 0.0)
    return np.clip(np.round(d), 0, 65535).astype(np.uint16)


def _depth_mm(raw: bytes, kind: str, unit_mm: float = 1.0, key: str = "depth") -> np.ndarray:
    """A source's depth file as uint16 millimetres. ``unit_mm``: millimetres per PNG unit (0.1 where the
    source stores tenths of a millimetre); ``key``: the entry of a pickled dict ``.npy``. ``png_rot3``: a
    16-bit PNG whose bits were rotated left by 3 before writing (rotated back here)."""
    if kind in ("png_mm", "png_rot3"):
        d = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_UNCHANGED)
        if d is None or d.dtype != np.uint16 or d.ndim != 2:
            raise ValueError("depth PNG is not single-channel 16-bit")
        if kind == "png_rot3":
            d = (d >> np.uint16(3)) | (d << np.uint16(13))
        return d if unit_mm == 1.0 else np.clip(np.round(d * float(unit_mm)), 0, 65535).astype(np.uint16)
    if kind == "npy_m":
        return _metres_to_mm(np.load(io.BytesIO(raw), allow_pickle=False))
    if kind == "npy_dict_m":
        return _metres_to_mm(_npy_dict(raw)[key])
    if kind == "exr_m":
        return _metres_to_mm(_exr_channel(raw))
    raise ValueError(f"unknown depth kind {kind!r}")


def _colour_bgr(raw: bytes, kind: str, key: str = "image") -> np.ndarray:
    """A source's colour file as an 8-bit BGR image: an encoded image (PNG, JPEG) or the RGB entry of a
    pickled dict ``.npy``."""
    if kind == "npy_dict_rgb":
        rgb = np.asarray(_npy_dict(raw)[key])
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"colour entry is not 8-bit RGB: {rgb.shape} {rgb.dtype}")
        return np.ascontiguousarray(rgb[:, :, ::-1])
    colour = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    if colour is None:
        raise ValueError("colour image unreadable")
    return colour


def assemble(labels_path: str | Path, snapshots: str | Path, out_dir: str | Path) -> list[str]:
    """Write every labelled frame to ``out_dir`` from git snapshots of its source; the ids written."""
    labels, snapshots, out_dir = load_labels(labels_path), Path(snapshots), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fr in labels["frames"]:
        src = labels["sources"][fr["source"]]
        git_dir = _git_dir(snapshots, src["repo"])
        keys = src.get("npy_keys", {})
        try:
            colour = _colour_bgr(_git_show(git_dir, src["commit"], fr["colour"]), src.get("colour", "image"),
                                 keys.get("colour", "image"))
            depth = _depth_mm(_git_show(git_dir, src["commit"], fr["depth"]), src["depth"],
                              float(src.get("depth_unit_mm", 1.0)), keys.get("depth", "depth"))
        except (ValueError, KeyError, pickle.UnpicklingError) as exc:
            raise ValueError(f"{fr['id']}: {exc}") from exc
        if depth.shape != colour.shape[:2]:
            depth = cv2.resize(depth, (colour.shape[1], colour.shape[0]), interpolation=cv2.INTER_NEAREST)
        cv2.imwrite(str(out_dir / f"{fr['id']}-color.png"), colour)
        cv2.imwrite(str(out_dir / f"{fr['id']}-depth.png"), depth)
        written.append(fr["id"])
    return written


def _parts_box(mask: np.ndarray, keep: float = 0.1) -> Box | None:
    """The tight box of a mask's connected parts of at least ``keep`` of its largest part (stray
    pixels of a source's mask do not stretch the box)."""
    n, _, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 1:
        return None
    big = stats[1:][stats[1:, 4] >= keep * stats[1:, 4].max()]
    return (int(big[:, 0].min()), int(big[:, 1].min()), int((big[:, 0] + big[:, 2]).max()),
            int((big[:, 1] + big[:, 3]).max()))


def _mask_parts(mask: np.ndarray, keep: float = 0.01) -> list[Box]:
    """The boxes of a binary mask's connected parts (those of at least ``keep`` of the largest)."""
    n, _, stats, _ = cv2.connectedComponentsWithStats((mask > 0).astype(np.uint8), connectivity=8)
    if n <= 1:
        return []
    big = stats[1:][stats[1:, 4] >= keep * stats[1:, 4].max()]
    return [(int(x), int(y), int(x + w), int(y + h)) for x, y, w, h, _ in big]


def _points_mask(points: np.ndarray, K: Sequence[float], shape: tuple[int, int]) -> np.ndarray:
    """An object's segmented point cloud (camera frame, metres) projected into the image, small gaps closed."""
    fx, fy, cx, cy = K
    pts = np.asarray(points, np.float64).reshape(-1, 3)
    pts = pts[np.isfinite(pts).all(axis=1) & (pts[:, 2] > 0)]
    u = np.round(fx * pts[:, 0] / pts[:, 2] + cx).astype(int)
    v = np.round(fy * pts[:, 1] / pts[:, 2] + cy).astype(int)
    ok = (u >= 0) & (u < shape[1]) & (v >= 0) & (v < shape[0])
    m = np.zeros(shape, np.uint8)
    m[v[ok], u[ok]] = 1
    return cv2.morphologyEx(m, cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8))


@dataclass
class MaskCheck:
    """One labelled box against what its source's mask gives."""

    frame: str
    name: str
    box: Box
    derived: Box | None  # the mask's box (exact kinds) or the mask part holding the box (split by eye)
    exact: bool  # the box must equal the mask's; otherwise lie inside the mask part it was split from

    @property
    def ok(self) -> bool:
        if self.derived is None:
            return False
        if self.exact:
            return tuple(self.box) == tuple(self.derived)
        return _inside_fraction(self.box, self.derived) >= 0.95


def mask_checks(labels_path: str | Path, snapshots: str | Path) -> list[MaskCheck]:
    """Every box labelled from a source's mask, derived again from the snapshot: the labels' boxes
    are reproducible (``png_ids``: pixel value = instance id; ``png_parts``: a binary mask's connected
    parts; ``npy_points``: the object's point cloud in a pickled-dict ``.npy``, projected)."""
    labels, snapshots = load_labels(labels_path), Path(snapshots)
    out = []
    for fr in labels["frames"]:
        src = labels["sources"][fr["source"]]
        kind, path = src.get("mask_kind"), fr.get("mask_file")
        todo = [o for o in fr["objects"] if "mask" in o]
        if not todo:
            continue
        if not kind or not path:
            raise ValueError(f"{fr['id']}: objects name a mask but the frame has no mask_file or its source no mask_kind")
        raw = _git_show(_git_dir(snapshots, src["repo"]), src["commit"], path)
        if kind == "npy_points":
            d = _npy_dict(raw)
            shape = np.asarray(d[src.get("npy_keys", {}).get("colour", "image")]).shape[:2]
            m = _points_mask(d[src.get("npy_keys", {}).get("points", "points")], src["K"], shape)
            for o in todo:
                out.append(MaskCheck(fr["id"], o["name"], tuple(o["box"]), _parts_box(m), True))
            continue
        img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_UNCHANGED)
        if img is None or img.ndim != 2:
            raise ValueError(f"{fr['id']}: {path} is not a one-channel mask image")
        if kind == "png_ids":
            for o in todo:
                boxes = [b for b in (_parts_box(img == int(i)) for i in o["mask"]) if b is not None]
                derived = (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes),
                           max(b[3] for b in boxes)) if len(boxes) == len(o["mask"]) else None
                out.append(MaskCheck(fr["id"], o["name"], tuple(o["box"]), derived, True))
        elif kind == "png_parts":
            parts = _mask_parts(img)
            for o in todo:
                exact = o["mask"] == "part"
                best = max(parts, key=lambda b: box_iou(b, o["box"]) if exact else _inside_fraction(o["box"], b),
                           default=None)
                out.append(MaskCheck(fr["id"], o["name"], tuple(o["box"]), best, exact))
        else:
            raise ValueError(f"unknown mask kind {kind!r}")
    return out


def load_frames(labels_path: str | Path, frames_dir: str | Path, ids: Sequence[str] | None = None) -> list[RealFrame]:
    """The assembled frames (all, or those of ``ids``) with their labels (a frame's own ``K`` before its
    source's); a missing file raises."""
    labels, frames_dir = load_labels(labels_path), Path(frames_dir)
    out = []
    for fr in labels["frames"]:
        if ids is not None and fr["id"] not in ids:
            continue
        bgr = cv2.imread(str(frames_dir / f"{fr['id']}-color.png"), cv2.IMREAD_COLOR)
        mm = cv2.imread(str(frames_dir / f"{fr['id']}-depth.png"), cv2.IMREAD_UNCHANGED)
        if bgr is None or mm is None:
            raise FileNotFoundError(f"frame {fr['id']} not found in {frames_dir}: run bench/real_rgbd/assemble.py")
        depth = np.where(mm > 0, mm.astype(np.float32) / 1000.0, np.nan).astype(np.float32)
        fx, fy, cx, cy = fr.get("K", labels["sources"][fr["source"]]["K"])
        out.append(RealFrame(fr["id"], fr["source"], fr["scene"], list(fr["tags"]),
                             cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), depth, CameraIntrinsics(fx, fy, cx, cy),
                             [(o["name"], tuple(o["box"])) for o in fr["objects"]],
                             [tuple(b) for b in fr["ignore"]]))
    return out


def _inside_fraction(inner: Sequence[float], outer: Sequence[float]) -> float:
    """Share of ``inner``'s box area that lies inside ``outer``."""
    iw = min(inner[2], outer[2]) - max(inner[0], outer[0])
    ih = min(inner[3], outer[3]) - max(inner[1], outer[1])
    area = max(inner[2] - inner[0], 0) * max(inner[3] - inner[1], 0)
    return float(max(iw, 0) * max(ih, 0) / area) if area > 0 else 0.0


def score_proposals(boxes: Sequence[Box], objects: Sequence[Box], ignore: Sequence[Box] = (),
                    thr: float = 0.5) -> ProposalScore:
    """Recall/precision/merge counts of one frame's proposal ``boxes`` against labelled ``objects``."""
    pairs = sorted(((box_iou(p, o), i, j) for i, p in enumerate(boxes) for j, o in enumerate(objects)), reverse=True)
    used_p: set[int] = set()
    matched: dict[int, int] = {}
    for iou, i, j in pairs:
        if iou < thr:
            break
        if i in used_p or j in matched:
            continue
        used_p.add(i)
        matched[j] = i
    counted = merges = 0
    for i, p in enumerate(boxes):
        if i not in used_p and any(_inside_fraction(p, g) >= 0.5 for g in ignore):
            continue
        counted += 1
        if i not in used_p and sum(_inside_fraction(o, p) >= 0.5 for o in objects) >= 2:
            merges += 1
    return ProposalScore(len(objects), len(matched), counted, len(matched), merges, matched)


OBJECT_KINDS = ("found", "merged", "split", "piece", "loose", "missed")
PROPOSAL_KINDS = ("merge", "piece", "loose", "background")


def failure_kinds(boxes: Sequence[Box], objects: Sequence[Box], ignore: Sequence[Box] = (),
                  score: ProposalScore | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """What went wrong in one frame, to know what to attack: (per object, per unmatched proposal) counts.

    An object not matched at IoU 0.5 is *merged* when a proposal holds half of its box and half of another
    object's, *split* when two or more proposals lie (70 %) inside it, a *piece* when one does, *loose*
    when the best proposal reaches IoU 0.2, else *missed*. An unmatched counted proposal is a *merge*
    (holds two objects), a *piece* (70 % inside one object), *loose* (IoU > 0.1 with one) or *background*.
    """
    score = score or score_proposals(boxes, objects, ignore)
    used = set(score.matched.values())
    per_object = dict.fromkeys(OBJECT_KINDS, 0)
    for j, o in enumerate(objects):
        if j in score.matched:
            kind = "found"
        elif any(_inside_fraction(o, b) >= 0.5 and sum(_inside_fraction(o2, b) >= 0.5 for o2 in objects) >= 2
                 for b in boxes):
            kind = "merged"
        else:
            inside = sum(_inside_fraction(b, o) >= 0.7 for b in boxes)
            best = max((box_iou(b, o) for b in boxes), default=0.0)
            kind = "split" if inside >= 2 else "loose" if best >= 0.2 else "piece" if inside == 1 else "missed"
        per_object[kind] += 1
    per_proposal = dict.fromkeys(PROPOSAL_KINDS, 0)
    for i, b in enumerate(boxes):
        if i in used or any(_inside_fraction(b, g) >= 0.5 for g in ignore):
            continue
        if sum(_inside_fraction(o, b) >= 0.5 for o in objects) >= 2:
            kind = "merge"
        elif any(_inside_fraction(b, o) >= 0.7 for o in objects):
            kind = "piece"
        elif max((box_iou(b, o) for o in objects), default=0.0) > 0.1:
            kind = "loose"
        else:
            kind = "background"
        per_proposal[kind] += 1
    return per_object, per_proposal
