"""Class-agnostic object proposals on a table top, with or without depth.

Our classes are taught a minute before they are asked for, so no trained detector can know them:
objects are found as "what stands out from the support surface".

With depth (``method="depth"``): pixels are back-projected, candidate planes are fitted by
RANSAC (vectorised hypotheses, least-squares refit on the inliers), the support is the level one
with most standing on it near the middle of the view, and points higher above it than the camera's
depth noise allows at their depth (sigma = s z^2, s measured on the table) are object points. They
are grouped by connected components on the image grid after cutting it where neighbouring depths
jump (two objects at different distances), along creases and folds and, optionally, along colour
edges (touching objects of different colour at the same distance).
Fragments smaller than ``min_pixels`` and depth holes join a neighbouring component. Each object
gets its mask, box, and a 3D centroid and extent completed down to the plane (the camera sees only
the top and near side of an object; its foot lies on the plane).

Without depth (``method="rgb"``, or as a fallback when depth is missing, too sparse or holds no
plane): a colour model of the background is built from the image border (a Lab histogram coarse in
lightness, so shading and shadows stay background; on a table view the border is mostly table and
floor); pixels whose colour the border hardly holds are object pixels, grouped and split as above.
3D fields are NaN then.

The work is done at ``work_width`` pixels wide (masks are scaled back), which keeps one 640x480
frame at a few tens of milliseconds on one core.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from dataclasses import dataclass, field, fields

import cv2
import numpy as np
from scipy import ndimage

from .regions import BoundaryRule, find_boxes, flat_pixels, group_labels, label_areas, nonzero_box, split_layers, split_nonconvex, \
    unseen_objects
from .types import CameraIntrinsics, Proposal
from cbcl_pr_ros.plurals import counted

__all__ = ["ProposalConfig", "ProposalRules", "propose", "propose_on_support", "fit_support_plane", "support_planes", "choose_support", "refine_plane",
           "depth_problem", "without_misplaced_3d"]

log = logging.getLogger(__name__)
_NAN3 = np.full(3, np.nan)
_EDGES = ("none", "grey", "grey+chroma")


@dataclass(frozen=True)
class ProposalRules:
    """The measured constants of the proposal rules: each was set on the real tables and the rendered
    benchmark together (docs/perception.md, "Settings and rules"), and a deployment has no reason to change
    them; benches and tests change them to measure what a rule is worth. Distances in metres, pixel
    counts at the work resolution; 0 turns the rules marked "0 = off" off.

    plane_tolerance_m : RANSAC inlier band (in depth Z) of the support plane.
    min_plane_fraction : the plane's inliers must be at least this share of the valid points.
    ransac_points / ransac_trials : points sampled for the plane fit, and RANSAC iterations.
    depth_jump_m / depth_jump_rel : neighbouring pixels whose depths differ by more than
        ``depth_jump_m + depth_jump_rel * z`` belong to different objects.
    jump_vs_slope : a depth difference is a jump only when it is also this many times the smaller
        difference on either side (0 = off): slopes of obliquely seen surfaces are not cut.
    crease : with depth, also cut the grid along creases: pixels where the height map (smoothed) is
        concave by more than ``crease`` (its Laplacian, metres per work pixel squared; 0 = off).
        Two touching objects meet in a valley of the height map; print and texture on one surface
        make none, so creases split what colour edges would split without cutting printed boxes apart.
    canny_low / canny_high : the Canny thresholds of the colour edges (``ProposalConfig.depth_edges``).
    min_pixels : smaller components are fragments, merged into a neighbour within ``merge_px`` or dropped.
    overhang_share : a part that hangs joins the piece it hangs on (0 = off). A piece (component) that
        touches a piece at least 1 / ``attach_max_ratio`` times its size (neighbouring pixels whose depths
        differ by at most ``attach_gap_m``; the one it touches along most pixels) joins it when at least
        this share of its points (those ``overhang_min_height_m`` or more above the plane, where the
        camera sees what is under them) stand over space the camera sees empty: a mug's handle, cut off
        by the depth jump to the rim. Separate objects stand on the table or on each other, so a small
        object standing against a larger one stays apart.
    max_area_fraction : a component larger than this share of the image is background, not an object.
    background_border : width of the image border (share of the smaller side) the RGB method's
        background colour model is built from; ``background_quantile`` the share of border pixels
        allowed to fall below the object threshold.
    seed : seeds RANSAC's sample (a fixed seed: the same frame gives the same plane in every run).
    support_refits : the chosen support plane is fitted again to all the readings within
        ``plane_tolerance_m`` of it this many times (0 = off): the same plane, and so the same height
        threshold, whatever RANSAC's sample.
    max_planes / min_support_fraction : up to ``max_planes`` planes are found one after another (each holding
        >= ``min_support_fraction`` of the readings): the candidate supports.
    support_patch_share : the support's image region is the convex hull of the largest patch of its readings
        and of every patch at least this share of its size (objects crowding a table cut its top apart).
    max_border_share : a region with this share of its outline on the image border is mostly out of view
        (a sliver of a shelf or a far table edge) and is dropped.
    split_solidity / split_gain / split_min_part : a component less convex than ``split_solidity`` (area
        over convex hull area; 0 = off) that is no ring is split into its pieces (the parts the cut lines,
        thickened by ``region_core_dilate_px``, leave, grown back by a colour watershed) joined again unless
        their shared boundary says two objects; kept when it gives two or more parts of at least
        ``split_min_part * min_pixels`` pixels, at least ``split_gain`` more convex on average (0: not less
        convex; the boundary evidence decides, since two touching objects may together be about as convex
        as each; perception/regions.py).
    region_step_m / region_step_rel / region_crease_share / region_colour_de / region_offset_px : two pieces
        are two objects when the median depth step across their boundary (pixels ``region_offset_px``
        apart, over the mixed pixels) exceeds ``region_step_m + region_step_rel * z``, or when at least
        ``region_crease_share`` of it crosses a crease and their mean Lab colours differ by ``region_colour_de``.
    fold_turn / fold_span : with depth, also cut the grid along *folds*: pixels where the surface normals
        (of the points box-smoothed over ``fold_span`` pixels) either side turn towards each other by more
        than ``fold_turn`` (2 sin of half the angle between them; 0 = off). Objects leaning on or standing in
        another (a can in a bowl) have no level top and often one colour, but meet in a concave valley; a
        convex object's own surface has none (``_folds``; docs/perception.md "Folds of the surface normals").
    join_m / join_share / join_colour_de : with depth, two proposals whose masks touch are joined into one when
        their centroids lie within ``join_m``, their 3D extents overlap by at least ``join_share`` of the smaller
        one's volume and their mean Lab colours differ by at most ``join_colour_de`` (0 = off). A depth jump cuts
        one non-convex object where a part of it hides another (a seated teddy's legs before its belly, a duck's
        head before its back): the pieces share one body and one colour; two objects side by side share
        neither (docs/perception.md "Pieces of one object joined").
    layer_gap_m / layer_tilt / layer_min_part : a component whose level patches (tilted less than ``layer_tilt``,
        the sine, from the plane; at least ``layer_min_part * min_pixels`` pixels) lie at heights ``layer_gap_m``
        or more apart is split into one part per height layer, walls going to the layers by a colour watershed:
        an object stacked on another shows its own top (0 = off; perception/regions.py ``split_layers``).
    unseen_ring_share / unseen_edge_share : with depth, a hole in the readings enclosed by the table (at least
        ``unseen_ring_share`` of the pixels around it table readings; 0 = off), at least ``min_size_m`` wide, no
        larger than ``max_size_m``, clear of and not inside the objects found, with at least ``unseen_edge_share``
        of its pixels on a colour edge, is an object the camera reads no depth on (glass, clear plastic, black
        or shiny): a proposal without 3D (``regions.unseen_objects``). The table's own dropouts (a bright sheet)
        look like the table around them and have no edge; the shadow bands beside depth edges are narrower.
        Off by default: on the real set it finds transparent objects but did not raise every held-out figure
        (docs/perception.md, "Failures on the nine sources"); 0.6 turns it on.
    """

    plane_tolerance_m: float = 0.006
    min_plane_fraction: float = 0.2
    ransac_points: int = 1500
    ransac_trials: int = 100
    seed: int = 0
    max_planes: int = 4
    min_support_fraction: float = 0.08
    support_refits: int = 3
    support_patch_share: float = 0.2
    depth_jump_m: float = 0.005
    depth_jump_rel: float = 0.005
    jump_vs_slope: float = 2.0
    crease: float = 0.001
    canny_low: int = 80
    canny_high: int = 160
    min_pixels: int = 60
    merge_px: int = 4
    overhang_share: float = 0.35
    overhang_min_height_m: float = 0.02
    attach_gap_m: float = 0.02
    attach_max_ratio: float = 0.25
    max_area_fraction: float = 0.5
    background_border: float = 0.06
    background_quantile: float = 0.01
    max_border_share: float = 1 / 3
    split_solidity: float = 0.95
    split_gain: float = 0.0
    split_min_part: float = 4.0
    region_step_m: float = 0.02
    region_step_rel: float = 0.02
    region_crease_share: float = 0.7
    region_colour_de: float = 20.0
    region_offset_px: int = 3
    region_core_dilate_px: int = 1
    layer_gap_m: float = 0.03
    layer_tilt: float = 0.35
    layer_min_part: float = 1.0
    fold_turn: float = 0.9
    fold_span: int = 3
    join_m: float = 0.06
    join_share: float = 0.15
    join_colour_de: float = 30.0
    unseen_ring_share: float = 0.0
    unseen_edge_share: float = 0.01

    def __post_init__(self) -> None:
        for name in ("plane_tolerance_m", "depth_jump_m"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("min_plane_fraction", "max_area_fraction", "background_border", "background_quantile"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        for name in ("ransac_points", "ransac_trials", "min_pixels"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.depth_jump_rel < 0 or self.merge_px < 0 or self.crease < 0:
            raise ValueError("depth_jump_rel, merge_px and crease must be >= 0")
        if not 0 <= self.split_solidity <= 1 or self.split_gain < 0 or self.split_min_part < 1 or self.region_offset_px < 1:
            raise ValueError("need split_solidity in [0, 1], split_gain >= 0, split_min_part >= 1, region_offset_px >= 1")
        if min(self.region_step_m, self.region_step_rel, self.region_colour_de, self.region_core_dilate_px) < 0 \
                or not 0 <= self.region_crease_share <= 1:
            raise ValueError("region_step_m, region_step_rel, region_colour_de and region_core_dilate_px must be >= 0, "
                             "region_crease_share in [0, 1]")
        if not 0 <= int(self.support_refits) <= 10:
            raise ValueError(f"support_refits must be in [0, 10], got {self.support_refits}")
        if not 1 <= int(self.max_planes) <= 8:
            raise ValueError(f"max_planes must be in [1, 8], got {self.max_planes}")
        if not 0 < self.support_patch_share <= 1:
            raise ValueError(f"support_patch_share must be in (0, 1], got {self.support_patch_share}")
        if not 0 < self.max_border_share <= 1:
            raise ValueError(f"max_border_share must be in (0, 1], got {self.max_border_share}")
        if not 0 < self.min_support_fraction < 1:
            raise ValueError(f"min_support_fraction must be in (0, 1), got {self.min_support_fraction}")
        if not 0 <= self.overhang_share <= 1 or not 0 < self.attach_max_ratio < 1:
            raise ValueError("overhang_share must be in [0, 1] and attach_max_ratio in (0, 1)")
        if self.overhang_min_height_m <= 0 or self.attach_gap_m <= 0:
            raise ValueError("overhang_min_height_m and attach_gap_m must be > 0")
        if self.layer_gap_m < 0 or not 0 < self.layer_tilt < 1 or self.layer_min_part <= 0:
            raise ValueError("need layer_gap_m >= 0, layer_tilt in (0, 1) and layer_min_part > 0")
        if self.fold_turn < 0 or int(self.fold_span) < 3:
            raise ValueError(f"need fold_turn >= 0 and fold_span >= 3, got {self.fold_turn}, {self.fold_span}")
        if not 0 <= self.unseen_ring_share <= 1 or not 0 <= self.unseen_edge_share <= 1:
            raise ValueError(f"unseen_ring_share and unseen_edge_share must be in [0, 1], got {self.unseen_ring_share}, "
                             f"{self.unseen_edge_share}")
        if self.join_m < 0 or not 0 <= self.join_share <= 1 or self.join_colour_de < 0:
            raise ValueError(f"need join_m >= 0, join_share in [0, 1] and join_colour_de >= 0, got {self.join_m}, "
                             f"{self.join_share}, {self.join_colour_de}")


@dataclass
class ProposalConfig:
    """Settings of :func:`propose`: what a deployment may have a reason to set. Distances in metres.

    method : "auto" (depth when usable, else RGB), "depth" (same, but logs a warning on fallback) or "rgb":
        a camera without depth, or depth known to be bad.
    work_width : images are processed at most this wide (masks and boxes are returned at full size): the
        time a frame may take on the machine at hand against the smallest object in pixels.
    up_axis : the up direction in the camera optical frame (x right, y down, z forward) when the camera
        pose is known (e.g. from tf); None = unknown: the largest plane's normal stands in for it.
    max_tilt_deg : a support surface is within this of level: what things stand on without sliding.
    min_size_m / max_size_m : an object's largest extent must lie within these: the objects the robot
        handles (its gripper, its task).
    min_height_m : the least height above the support that counts, whatever the camera: a sheet of paper
        or a coaster is table.
    height_sigmas : a point is above the support when it is at least this many sigmas of the camera's depth
        noise high (sigma = s * z^2 at its depth z, s measured on the table's own readings): the share of
        table readings let through as objects (chosen with ``seed_sigmas`` on the real tables, leave-one-source-out).
    seed_sigmas : objects are told apart among the points at least this many sigmas high, then completed
        down to ``height_sigmas`` along their own sides: beside an object's foot a camera reads the table
        high (depth smoothed across the edge), and that halo joins neighbours below it.
    depth_edges / rgb_edges : which colour edges cut the grid, besides depth jumps, in each method:
        "none", "grey" (Canny on brightness) or "grey+chroma" (also Canny on Lab's a and b channels: hue
        boundaries between touching objects of similar brightness). Colour edges split touching objects
        at the same depth, and also split printed or textured objects: the objects at hand decide.
    on_support_only : keep only objects whose feet (points dropped onto the plane) lie on the support
        surface's image region: things beyond the table's edge (chairs, the floor, a far room) are
        background; off where objects beyond the table matter too.
    max_proposals : keep at most this many (highest score first): the work downstream per frame.
    rules : the measured constants of the rules (:class:`ProposalRules`), for measurements.
    """

    method: str = "auto"
    work_width: int = 320
    up_axis: tuple[float, float, float] | None = None
    max_tilt_deg: float = 15.0
    min_size_m: float = 0.02
    max_size_m: float = 0.45
    min_height_m: float = 0.008
    height_sigmas: float = 8.0
    seed_sigmas: float = 13.0
    depth_edges: str = "none"
    rgb_edges: str = "grey+chroma"
    on_support_only: bool = True
    max_proposals: int = 32
    rules: ProposalRules = field(default_factory=ProposalRules)

    def __post_init__(self) -> None:
        if self.method not in ("auto", "depth", "rgb"):
            raise ValueError(f"method must be 'auto', 'depth' or 'rgb', got {self.method!r}")
        for name in ("depth_edges", "rgb_edges"):
            if getattr(self, name) not in _EDGES:
                raise ValueError(f"{name} must be one of {_EDGES}, got {getattr(self, name)!r}")
        if not 32 <= int(self.work_width) <= 4096:
            raise ValueError(f"work_width must be in [32, 4096], got {self.work_width}")
        if not 0 < self.min_size_m < self.max_size_m:
            raise ValueError(f"need 0 < min_size_m < max_size_m, got {self.min_size_m}, {self.max_size_m}")
        if not self.min_height_m > 0:
            raise ValueError(f"min_height_m must be > 0, got {self.min_height_m}")
        if int(self.max_proposals) < 1:
            raise ValueError(f"max_proposals must be >= 1, got {self.max_proposals}")
        if not self.height_sigmas >= 0 or not self.seed_sigmas >= 0:
            raise ValueError(f"height_sigmas and seed_sigmas must be >= 0, got {self.height_sigmas}, {self.seed_sigmas}")
        if not 0 < self.max_tilt_deg < 90:
            raise ValueError(f"max_tilt_deg must be in (0, 90), got {self.max_tilt_deg}")
        if self.up_axis is not None:
            up = np.asarray(self.up_axis, dtype=float)
            if up.shape != (3,) or not np.all(np.isfinite(up)) or np.linalg.norm(up) < 1e-6:
                raise ValueError(f"up_axis must be a finite non-zero 3-vector, got {self.up_axis!r}")
        if not isinstance(self.rules, ProposalRules):
            raise TypeError(f"rules must be a ProposalRules, got {type(self.rules).__name__}")

    @classmethod
    def with_overrides(cls, **kw: object) -> "ProposalConfig":
        """A config from one flat set of names: those of :class:`ProposalRules` go to ``rules`` (benches)."""
        rule_names = {f.name for f in fields(ProposalRules)}
        rules = ProposalRules(**{k: v for k, v in kw.items() if k in rule_names})
        return cls(**{k: v for k, v in kw.items() if k not in rule_names}, rules=rules)


@dataclass(frozen=True)
class _Plane:
    normal: np.ndarray  # unit, pointing to the camera's side
    offset: float  # signed height of a point P is normal @ P + offset
    inlier_fraction: float


def fit_support_plane(points: np.ndarray, config: ProposalConfig, min_fraction: float | None = None) -> _Plane | None:
    """The dominant plane of (n, 3) camera-frame points by RANSAC, or None when there is none.

    All ``ransac_trials`` hypotheses (planes through 3 random points) are scored at once as one
    matrix product, and the best is refined by least squares (SVD) on its inliers. scikit-learn's
    ``RANSACRegressor`` does the same fit but validates its inputs on every trial, which cost
    about 100 ms per frame here against about 3 ms for this (docs/perception.md).
    """
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) < 50:
        return None
    rng = np.random.default_rng(config.rules.seed)
    if len(points) > config.rules.ransac_points:
        points = points[rng.choice(len(points), config.rules.ransac_points, replace=False)]
    n_pts, trials = len(points), int(config.rules.ransac_trials)
    idx = rng.integers(0, n_pts, size=(trials, 3))
    a, b, c = points[idx[:, 0]], points[idx[:, 1]], points[idx[:, 2]]
    normals = np.cross(b - a, c - a)
    norms = np.linalg.norm(normals, axis=1)
    ok = norms > 1e-12
    if not ok.any():
        return None
    normals = normals[ok] / norms[ok, None]
    offsets = -np.einsum("ij,ij->i", normals, a[ok])
    dist = points @ normals.T  # (n_pts, hypotheses); in place from here: fresh temporaries cost more than the sums
    dist += offsets
    inliers = np.abs(dist, out=dist) < config.rules.plane_tolerance_m
    # counted in int32 over bytes: the same counts (at most ransac_points), faster than the bool sum's int64
    best = int(np.argmax(inliers.view(np.uint8).sum(axis=0, dtype=np.int32)))
    sel = points[inliers[:, best]]
    if len(sel) < 3:
        return None
    centre = _mean_rows(sel)
    normal = np.linalg.svd(sel - centre, full_matrices=False)[2][-1]
    offset = -float(normal @ centre)
    frac = np.count_nonzero(np.abs(points @ normal + offset) < config.rules.plane_tolerance_m) / len(points)
    if frac < (config.rules.min_plane_fraction if min_fraction is None else min_fraction):
        return None
    if offset < 0:  # the camera (origin) gets a positive height
        normal, offset = -normal, -offset
    return _Plane(normal, offset, frac)


def refine_plane(plane: _Plane, points: np.ndarray, tolerance: float, rounds: int, max_points: int = 12000) -> _Plane:
    """``plane`` fitted again (least squares) to the ``points`` within ``tolerance`` of it, ``rounds`` times.

    RANSAC fits the plane to a random sample, so its tilt, and the spread of the table about it that
    sets the height threshold, changed with the random sample (by several millimetres on a real frame); the
    readings of the whole table (a regular subsample of at most ``max_points``, for time) give the
    same plane whatever the sample."""
    points = np.asarray(points)
    if len(points) > max_points:
        points = points[:: len(points) // max_points + 1]
    points = points.astype(np.float64)
    for _ in range(int(rounds)):
        sel = np.compress(np.abs(points @ plane.normal + plane.offset) < tolerance, points, axis=0)
        if len(sel) < 50:
            break
        centre = _mean_rows(sel)
        dev = sel - centre
        normal = np.linalg.eigh(dev.T @ dev)[1][:, 0]  # the direction of least spread
        if normal @ plane.normal < 0:
            normal = -normal
        plane = _Plane(normal, -float(normal @ centre), plane.inlier_fraction)
    return plane


def _mean_rows(x: np.ndarray) -> np.ndarray:
    """``x.mean(axis=0)`` of float rows ``x`` (n, c), the same values bit for bit: NumPy sums down the rows
    one after another there (not pairwise), as a running sum does, and the running sum takes about a third
    less time than the reduction's short steps of c values."""
    if x.shape[0] == 0:
        return x.mean(axis=0)
    return np.cumsum(x, axis=0)[-1] / x.shape[0]


def support_planes(points: np.ndarray, config: ProposalConfig) -> list[_Plane]:
    """Up to ``max_planes`` planes found one after another (each RANSAC on the points the earlier ones
    left), largest first; each holds >= ``min_support_fraction`` of the points (the first >= ``min_plane_fraction``)."""
    points = np.asarray(points, dtype=np.float64)
    planes: list[_Plane] = []
    rest, n_all = points, max(len(points), 1)
    for k in range(int(config.rules.max_planes)):
        need = config.rules.min_plane_fraction if k == 0 else config.rules.min_support_fraction
        if len(rest) < max(50, need * n_all):
            break
        plane = fit_support_plane(rest, config, min_fraction=need * n_all / len(rest))
        if plane is None:
            break
        dist = rest @ plane.normal
        dist += plane.offset
        np.abs(dist, out=dist)
        frac = np.count_nonzero(dist < config.rules.plane_tolerance_m) / n_all
        planes.append(_Plane(plane.normal, plane.offset, frac))
        rest = np.compress(dist >= 2 * config.rules.plane_tolerance_m, rest, axis=0)
    return planes


def choose_support(planes: list[_Plane], config: ProposalConfig, P: np.ndarray, valid: np.ndarray) -> _Plane | None:
    """The plane the objects in front of the camera stand on, or None when no plane is level.

    Candidates are the planes within ``max_tilt_deg`` of level (``up_axis`` when the camera pose is
    known, else the largest plane's normal). Each is scored by what the camera sees of it and on it
    near the middle of the view (``P``: the (h, w, 3) points, ``valid``: which are readings; pixels
    weighted by a Gaussian about the image centre): its own readings, and the readings standing on it
    (2 cm to ``max_size_m`` above it, over its image region, not on another candidate). A floor around a
    table holds the table's legs at most, the table the objects; a spurious plane through the floor and
    a desk's edge holds a strip of readings; a box's lid is a small surface with little on it."""
    if not planes:
        return None
    if config.up_axis is not None:
        up = np.asarray(config.up_axis, dtype=float)
        up = up / np.linalg.norm(up)
    else:
        up = planes[0].normal
    cos_tilt = math.cos(math.radians(config.max_tilt_deg))
    # with gravity known a support is seen from above (its normal, turned to the camera, points up): one
    # seen from below is a ceiling or a pose upside down, and positions placed with that pose would be wrong
    facing = (lambda c: c) if config.up_axis is not None else abs
    level = [p for p in planes if facing(float(p.normal @ up)) >= cos_tilt]
    if len(level) <= 1:
        return level[0] if level else None
    h, w = valid.shape
    gy = np.exp(-0.5 * ((np.arange(h) - (h - 1) / 2) / (_CENTRE_SIGMA * h)) ** 2)
    gx = np.exp(-0.5 * ((np.arange(w) - (w - 1) / 2) / (_CENTRE_SIGMA * w)) ** 2)
    weight = (gy[:, None] * gx[None, :]).astype(np.float32)
    with np.errstate(invalid="ignore"):
        heights = [np.where(valid, P @ p.normal.astype(np.float32) + np.float32(p.offset), np.nan) for p in level]
        on = [valid & (np.abs(hp) < 2 * config.rules.plane_tolerance_m) for hp in heights]
    scores = []
    for i, hp in enumerate(heights):
        elsewhere = np.zeros_like(valid)
        for j, o in enumerate(on):
            if j != i:
                elsewhere |= o
        region = _support_region(on[i], config.rules.support_patch_share)
        with np.errstate(invalid="ignore"):
            standing = valid & region & ~elsewhere & (hp > _STANDING_M) & (hp < config.max_size_m)
        scores.append(float(weight[standing].sum()) + _OWN_WEIGHT * float(weight[on[i]].sum()))
    return level[int(np.argmax(scores))]


_CENTRE_SIGMA = 0.25  # the view centre's weight falls to 1/e^0.5 a quarter of the image from the middle
_STANDING_M = 0.02  # readings this high or more above a candidate surface stand on it
_OWN_WEIGHT = 0.5  # a surface's own readings count half as much as what stands on it


def _steps(d: np.ndarray, axis: int, ratio: float) -> np.ndarray:
    """Which neighbour differences ``d`` (absolute, along ``axis``) are steps rather than a slope: at least
    ``ratio`` times the smaller of the differences either side (the first and last take their own side
    twice; a surface seen obliquely changes depth by about the same amount from pixel to pixel; an edge
    between two objects changes it at once). All True when ``ratio`` is 0."""
    if ratio <= 0:
        return np.ones(d.shape, bool)
    n = d.shape[axis]

    def part(start: int, stop: int) -> tuple[slice, ...]:
        return (slice(None),) * axis + (slice(start, stop),)

    # the smaller of the differences before and after each one; the first and last have one side, taken twice
    lo = np.empty_like(d)
    np.minimum(d[part(0, n - 2)], d[part(2, n)], out=lo[part(1, n - 1)])
    np.minimum(d[part(0, 1)], d[part(min(1, n - 1), min(2, n))], out=lo[part(0, 1)])
    np.minimum(d[part(n - 1, n)], d[part(max(n - 2, 0), n - 1 if n > 1 else 1)], out=lo[part(n - 1, n)])
    return d >= ratio * lo


def _edges(rgb_small: np.ndarray, z: np.ndarray | None, config: ProposalConfig, colour: str) -> np.ndarray:
    """Pixels where the grid is cut: depth jumps to a neighbour, and strong colour edges."""
    cut = np.zeros(rgb_small.shape[:2], bool)
    if z is not None:
        ok = np.isfinite(z)
        zz = np.where(ok, z, 0.0)
        thr = config.rules.depth_jump_m + config.rules.depth_jump_rel * zz
        # only pairs of readings can jump: a hole next to a reading is no edge
        ax, ay = np.abs(np.diff(zz, axis=1)), np.abs(np.diff(zz, axis=0))
        dx = _steps(ax, 1, config.rules.jump_vs_slope) & (ax > thr[:, :-1]) & ok[:, :-1] & ok[:, 1:]
        dy = _steps(ay, 0, config.rules.jump_vs_slope) & (ay > thr[:-1, :]) & ok[:-1, :] & ok[1:, :]
        cut[:, :-1] |= dx
        cut[:, 1:] |= dx
        cut[:-1, :] |= dy
        cut[1:, :] |= dy
    if colour != "none":
        grey = cv2.cvtColor(rgb_small, cv2.COLOR_RGB2GRAY)
        cut |= cv2.Canny(cv2.GaussianBlur(grey, (3, 3), 0), config.rules.canny_low, config.rules.canny_high) > 0
        if colour == "grey+chroma":  # hue boundaries between touching objects of similar brightness
            lab = cv2.cvtColor(cv2.GaussianBlur(rgb_small, (5, 5), 0), cv2.COLOR_RGB2LAB)
            for ch in (1, 2):
                cut |= cv2.Canny(lab[..., ch], config.rules.canny_low // 3, config.rules.canny_high // 3) > 0
    return cut


def _components(fg: np.ndarray, cut: np.ndarray, config: ProposalConfig, fillable: np.ndarray | None = None) -> np.ndarray:
    """Label image (0 = none): connected components of ``fg`` minus ``cut``, fragments merged back.

    Cut pixels, fragments and ``fillable`` pixels (depth holes) within ``merge_px`` of a kept
    component join it, so masks have no pinholes where the sensor had no reading."""
    n, labels, areas = label_areas((fg & ~cut).astype(np.uint8), 4)
    if n <= 1:
        return np.zeros(fg.shape, np.int32)
    keep = np.zeros(n, bool)
    keep[1:] = areas[1:] >= config.rules.min_pixels
    keep[1:] &= areas[1:] <= config.rules.max_area_fraction * fg.size
    remap = np.zeros(n, np.int32)
    remap[keep] = np.arange(1, int(keep.sum()) + 1)
    labels = remap[labels]
    if not keep.any():
        return labels
    if config.rules.merge_px > 0 and labels.max() < 65535:
        # give cut pixels and fragments to a kept component within merge_px (grey dilation of labels)
        k = 2 * int(config.rules.merge_px) + 1
        near = cv2.dilate(labels.astype(np.uint16), np.ones((k, k), np.uint8)).astype(np.int32)
        grow = fg if fillable is None else (fg | fillable)
        labels = np.where(grow & (labels == 0), near, labels)
    return labels


def _background_mask(rgb_small: np.ndarray, config: ProposalConfig) -> np.ndarray:
    """Object pixels by the RGB method: colours rare in the image border.

    The border's colour histogram (Lab, fine in chroma and coarse in lightness, so shading and
    shadows stay background) is smoothed and back-projected onto the image; pixels whose colour the border hardly holds are object pixels. A
    Gaussian mixture fitted the same way found the same objects but took ~180 ms a frame.
    """
    h, w = rgb_small.shape[:2]
    lab = cv2.cvtColor(cv2.GaussianBlur(rgb_small, (5, 5), 0), cv2.COLOR_RGB2LAB)
    b = max(2, int(round(config.rules.background_border * min(h, w))))
    border = np.full((h, w), 255, np.uint8)
    border[b:-b, b:-b] = 0
    hist = cv2.calcHist([lab], [0, 1, 2], border, [4, 32, 32], [0, 256, 0, 256, 0, 256])
    hist = ndimage.uniform_filter(hist, size=(1, 3, 3), mode="constant")  # nearby chroma is background too
    hist /= max(float(hist.sum()), 1e-9)
    # back-projection as a table lookup (cv2.calcBackProject returned zeros for 3 channels here)
    bin_index = (lab[..., 0] >> 6).astype(np.int32) * 1024 + (lab[..., 1] >> 3).astype(np.int32) * 32 + (lab[..., 2] >> 3)
    prob = hist.ravel()[bin_index]
    thr = float(np.quantile(prob[border > 0], config.rules.background_quantile))
    fg = (prob < thr).astype(np.uint8)
    fg = cv2.morphologyEx(fg, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    fg = cv2.morphologyEx(fg, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
    return fg.astype(bool)


def _rows(a: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``a[keep]`` of float32 3-vectors ``a`` (..., 3) where the bool array ``keep`` (``a``'s shape without the
    last axis) holds: the same values, byte for byte. Each vector is taken as one 12-byte item, which NumPy's
    selection copies several times faster than three values (or ``np.compress`` along the rows); other arrays
    go to NumPy's selection itself."""
    if a.dtype != np.float32 or a.ndim < 2 or a.shape[-1] != 3 or a.strides[-1] != 4:
        return a[keep]
    return a.view(_VEC3)[..., 0][keep].view(np.float32).reshape(-1, 3)


_VEC3 = np.dtype((np.void, 12))


def _check_rgb(rgb: np.ndarray) -> np.ndarray:
    if not isinstance(rgb, np.ndarray) or rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.shape[0] < 2 or rgb.shape[1] < 2:
        raise ValueError(f"rgb must be an (H, W, 3) array with H, W >= 2, got {getattr(rgb, 'shape', type(rgb).__name__)}")
    if rgb.dtype != np.uint8:
        raise TypeError(f"rgb must have dtype uint8, got {rgb.dtype}")
    return rgb


# Readings a table-top camera can give: nearer than 2 cm or farther than 20 m is a unit mistake.
_NEAREST_M, _FARTHEST_M = 0.02, 20.0


def _same_aspect(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two (h, w) sizes have the same aspect ratio (1 % slack for odd pixel counts)."""
    ra, rb = a[1] / a[0], b[1] / b[0]
    return abs(ra - rb) <= 0.01 * max(ra, rb)


def depth_problem(depth: object, image_shape: tuple[int, ...]) -> str:
    """Why a depth image (metres, 0/NaN = no reading) cannot give 3D for a colour image of
    ``image_shape``; "" when it can.

    A camera node reports this as a warning and uses the RGB method for that frame: 3D from depth
    that is not aligned to the colour image, or in the wrong unit, would be a wrong position
    reported as valid. A depth image of the colour image's aspect ratio but another size is taken
    as aligned and resized (a camera's reduced-resolution aligned stream).
    """
    try:
        d = np.asarray(depth, dtype=np.float32)
    except (TypeError, ValueError):
        return "the depth image is not numeric"
    if d.ndim == 3 and d.shape[2] == 1:
        d = d[:, :, 0]
    if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 2:
        return f"the depth image has shape {d.shape}, not a 2-D image"
    h, w = int(image_shape[0]), int(image_shape[1])
    if not _same_aspect(d.shape, (h, w)):
        return (f"the depth image is {d.shape[1]}x{d.shape[0]} but the colour image is {w}x{h} (another "
                "aspect ratio), so it is not aligned to it: use the camera driver's depth aligned to colour")
    sample = d[::4, ::4]  # the unit check needs a typical reading, not all of them (~1.5 ms a frame)
    valid = sample[np.isfinite(sample) & (sample > 0)]
    if valid.size == 0:  # sparse readings may all fall between the sampled pixels
        valid = d[np.isfinite(d) & (d > 0)]
    if valid.size == 0:
        return "the depth image holds no reading (all NaN or 0): is the camera's depth stream running?"
    median = float(np.median(valid))
    if median > _FARTHEST_M:
        return (f"depth readings are around {median:.0f} m, too far for a table: millimetres sent as 32FC1 "
                "(32FC1 must be metres, 16UC1 millimetres)?")
    if median < _NEAREST_M:
        return (f"depth readings are around {median * 1000:.1f} mm, too near for a table: metres sent as "
                "16UC1 (16UC1 must be millimetres, 32FC1 metres)?")
    return ""


@dataclass(frozen=True)
class _UsableDepth:
    """Depth :func:`_usable_depth` already made of a frame, handed on to the steps that read the same frame
    (the learned proposals and their geometry referee) so that each does not convert it again."""

    metres: np.ndarray


def _usable_depth(depth: object, shape: tuple[int, int]) -> np.ndarray | None:
    """Depth as float32 metres at ``shape`` (resized with nearest neighbour, assuming it is registered
    to the colour image), non-finite and non-positive values as NaN; None when unusable, including
    depth of another aspect ratio (it cannot be aligned to the colour image, so its 3D would be wrong)."""
    if isinstance(depth, _UsableDepth):
        if depth.metres.shape == tuple(shape):
            return depth.metres
        depth = depth.metres
    if depth is None:
        return None
    try:
        d = np.asarray(depth, dtype=np.float32)
    except (TypeError, ValueError):
        return None
    if d.ndim == 3 and d.shape[2] == 1:
        d = d[:, :, 0]
    if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 2 or not _same_aspect(d.shape, shape):
        return None
    with np.errstate(invalid="ignore"):
        bad = ~(d > 0)  # NaN compares False: a finite positive reading is above 0 and below infinity
        bad |= d == np.inf
    d = d.copy()  # np.where(bad, NaN, d), the same values, in under half the time
    np.copyto(d, np.float32(np.nan), where=bad)
    if d.shape != shape:
        d = cv2.resize(d, (shape[1], shape[0]), interpolation=cv2.INTER_NEAREST)
    return d


def propose(rgb: np.ndarray, depth: np.ndarray | None = None, intrinsics: CameraIntrinsics | None = None,
            config: ProposalConfig | None = None) -> list[Proposal]:
    """Object proposals in one frame, highest score first.

    ``depth`` is in metres (NaN or 0 = no reading), registered to ``rgb``; of another size but the
    same aspect ratio it is resized (nearest neighbour) to the colour image; unusable depth (another
    aspect ratio, wrong shape, too few readings, no plane) falls back to the RGB method, never raises
    (:func:`depth_problem` says why, for a warning). ``intrinsics`` are those of ``rgb``.
    Bad ``rgb`` (not HxWx3 uint8) is a ``ValueError``/``TypeError``. A 3D position that does not fit
    the object's place in the image is not reported (:func:`without_misplaced_3d`).
    """
    props = propose_on_support(rgb, depth, intrinsics, config)[0]
    return props if intrinsics is None else without_misplaced_3d(props, intrinsics)


#: how far outside its own box (in box widths / heights) a proposal's 3D centre may project
MISPLACED_BOXES = 1.0


def without_misplaced_3d(proposals: list[Proposal], K: CameraIntrinsics) -> list[Proposal]:
    """``proposals`` with the 3D (centroid and size) removed where the centroid is behind the camera or
    projects more than :data:`MISPLACED_BOXES` box widths or heights outside the proposal's own box.

    Why: a centroid lies inside the object's volume (its seen points and their feet on the support), and
    that volume is seen where the object is, a little beyond its visible box at most (an object on a
    stack or behind another has its feet further down). A centre a whole box away means the plane it
    was placed on is not what it stands on: a wall taken for the support without a camera pose, or a
    robot's hand hanging over the table, placed half-way down to it. Such a 3D position is wrong, and a
    wrong one reported as valid is worse than none (the object keeps its box and mask, RGB-only)."""
    out, dropped = [], 0
    for p in proposals:
        c = p.centroid
        if p.has_depth:
            x0, y0, x1, y1 = p.box
            w, h = max(x1 - x0, 1), max(y1 - y0, 1)
            inside = c[2] > 0
            if inside:
                u, v = K.fx * c[0] / c[2] + K.cx, K.fy * c[1] / c[2] + K.cy
                inside = (x0 - MISPLACED_BOXES * w <= u <= x1 + MISPLACED_BOXES * w
                          and y0 - MISPLACED_BOXES * h <= v <= y1 + MISPLACED_BOXES * h)
            if not inside:
                p = dataclasses.replace(p, centroid=_NAN3.copy(), size=_NAN3.copy())
                dropped += 1
        out.append(p)
    if dropped:
        _say("misplaced", f"{counted(dropped, 'object')} placed in 3D away from where the camera sees them (the support "
                          "plane is not what they stand on: a wall, or something hanging over the table?): "
                          "reported without 3D; a camera pose (up_axis) names the level surface")
    return out


def propose_on_support(rgb: np.ndarray, depth: np.ndarray | None = None, intrinsics: CameraIntrinsics | None = None,
                       config: ProposalConfig | None = None) -> tuple[list[Proposal], "_Plane | None"]:
    """:func:`propose`'s proposals and the support plane it found for them (camera frame, metres; None
    when the depth gave none and the RGB method answered), for a caller that places other proposals
    on the same support without estimating it again."""
    config = config or ProposalConfig()
    rgb = _check_rgb(rgb)
    h, w = rgb.shape[:2]
    scale = min(1.0, config.work_width / w)
    sw, sh = max(2, int(round(w * scale))), max(2, int(round(h * scale)))
    small = cv2.resize(rgb, (sw, sh), interpolation=cv2.INTER_AREA) if scale < 1.0 else rgb
    sx, sy = sw / w, sh / h

    result, plane = None, None
    if config.method != "rgb" and intrinsics is not None:
        d = _usable_depth(depth, (h, w))
        if d is not None:
            d_small = cv2.resize(d, (sw, sh), interpolation=cv2.INTER_NEAREST) if (sw, sh) != (w, h) else d
            result = _propose_depth(small, d_small, intrinsics.scaled(sx, sy), config)
    if result is None:
        if config.method == "depth":
            _say("depth_unusable", "depth unusable (missing, wrong shape, too sparse or no support plane): using the RGB method")
        labels = _components(_background_mask(small, config), _edges(small, None, config, config.rgb_edges), config)
        result = (labels, [(_NAN3, _NAN3, 1.0)] * int(labels.max()), None)
    labels, geo, plane = result
    return _assemble(labels, geo, (h, w), config), plane


_SAID: dict[str, float] = {}
_SAY_EVERY_S = 10.0


def _say(kind: str, message: str) -> None:
    """A warning about the frame, at most once every ``_SAY_EVERY_S`` per ``kind`` (a camera sends 30 a
    second); the repeats go to debug."""
    now = time.monotonic()
    if now - _SAID.get(kind, -math.inf) >= _SAY_EVERY_S:
        _SAID[kind] = now
        log.warning(message)
    else:
        log.debug(message)


def _propose_depth(small: np.ndarray, z: np.ndarray, K: CameraIntrinsics, config: ProposalConfig):
    sh, sw = z.shape
    valid = np.isfinite(z) & (z > _NEAREST_M) & (z < _FARTHEST_M)
    if np.count_nonzero(valid) < max(100, 0.05 * z.size):
        _say("sparse", f"depth: {100 * valid.mean():.0f} % of the pixels hold a reading (under 5 %): the RGB method, no 3D")
        return None
    zf = np.where(valid, z, 0.0).astype(np.float32, copy=False)
    xs = ((np.arange(sw, dtype=np.float32) - K.cx) / K.fx)[None, :] * zf
    ys = ((np.arange(sh, dtype=np.float32) - K.cy) / K.fy)[:, None] * zf
    P = np.stack([xs, ys, zf], axis=-1)
    readings = _rows(P.reshape(-1, 3), valid.ravel())  # P[valid]
    plane = choose_support(support_planes(readings, config), config, P, valid)
    if plane is None:
        _say("no_support", "depth: no level surface in view (a wall, a camera pose tilted or upside down, no plane in the readings): "
             "the RGB method, no 3D")
        return None
    plane = refine_plane(plane, readings, config.rules.plane_tolerance_m, config.rules.support_refits)
    nx, ny, nz = (float(v) for v in plane.normal)
    height = np.where(valid, nx * xs + ny * ys + nz * zf + plane.offset, np.nan).astype(np.float32, copy=False)
    sigma = _noise_sigma(height, zf, valid, config)
    with np.errstate(invalid="ignore"):
        low = np.maximum(config.min_height_m, config.height_sigmas * sigma)
        fg = valid & (height > low) & (height < config.max_size_m)
        seed = fg & (height > np.maximum(low, config.seed_sigmas * sigma))
    cut = _edges(small, z, config, config.depth_edges)
    creases = _creases(np.where(valid, height, 0.0).astype(np.float32, copy=False), seed, config.rules.crease) if config.rules.crease > 0 else None
    folds = _folds(P, valid, seed, config.rules.fold_turn, int(config.rules.fold_span)) if config.rules.fold_turn > 0 else None
    grid_cut = cut if creases is None else cut | creases
    if folds is not None:
        grid_cut = grid_cut | folds
    labels = _components(seed, grid_cut, config, fillable=~valid)
    if config.rules.split_solidity > 0:
        labels = _split_blobs(labels, cut, creases, small, z, config)
    growable = fg & ~grid_cut
    before_layers = _grow_down(labels, growable, config.rules.min_pixels)
    layered = _split_layers(labels, P, height, small, config) if config.rules.layer_gap_m > 0 and labels.any() else labels
    # the same labels grow the same way: grown again only where the layers split something
    labels = before_layers.copy() if np.array_equal(layered, labels) else _grow_down(layered, growable, config.rules.min_pixels)
    surface = (_support_region(valid & (np.abs(height) < 2 * config.rules.plane_tolerance_m), config.rules.support_patch_share)
               if config.on_support_only else None)
    kept = np.zeros_like(labels)
    geo = []
    if config.rules.overhang_share > 0:
        labels = _attach_overhangs(labels, fg, P, z, height, plane, K, config)
    for lab, sl in enumerate(find_boxes(labels), start=1):
        if sl is None:
            continue
        m = labels[sl] == lab
        if _border_share(m, sl, labels.shape) >= config.rules.max_border_share:
            continue  # mostly out of view: a sliver of something beyond the image (a shelf, a far table edge)
        g = _geometry(m, sl, fg, P, height, plane, surface, K, config)
        if g is not None:
            kept[sl][m] = len(geo) + 1
            geo.append(g)
    if config.rules.join_m > 0 and len(geo) > 1:
        kept, geo = _join_pieces(kept, geo, before_layers, small, fg, P, height, plane, K, config)
    if config.rules.unseen_ring_share > 0:
        kept, geo = _add_unseen(kept, geo, small, valid, height, plane, surface, K, config)
    return kept, geo, plane


def _add_unseen(kept: np.ndarray, geo: list, small: np.ndarray, valid: np.ndarray, height: np.ndarray, plane: _Plane,
                surface: np.ndarray | None, K: CameraIntrinsics, config: ProposalConfig) -> tuple[np.ndarray, list]:
    """``kept`` and ``geo`` with the objects the camera reads no depth on (:func:`regions.unseen_objects`:
    glass, black, shiny), each without 3D: the hole says where the object is, not how high it stands."""
    sh, sw = valid.shape
    # metres per pixel on the table: where each pixel's line of sight meets the plane, its depth over the
    # focal length (how wide a hole is there)
    rx = ((np.arange(sw, dtype=np.float32) - K.cx) / K.fx)[None, :]
    ry = ((np.arange(sh, dtype=np.float32) - K.cy) / K.fy)[:, None]
    nx, ny, nz = (float(v) for v in plane.normal)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = -plane.offset / (nx * rx + ny * ry + nz)
    metres_per_px = np.where((t > _NEAREST_M) & (t < _FARTHEST_M), t / K.fx, np.nan).astype(np.float32)
    with np.errstate(invalid="ignore"):
        table = valid & (np.abs(height) < 2 * config.rules.plane_tolerance_m)
    edges = cv2.Canny(cv2.cvtColor(small, cv2.COLOR_RGB2GRAY), config.rules.canny_low, config.rules.canny_high) > 0
    masks = unseen_objects(valid, kept, table, surface, edges, metres_per_px, config.min_size_m, config.max_size_m,
                           config.rules.unseen_ring_share, config.rules.unseen_edge_share, config.rules.min_pixels)
    if not masks:
        return kept, geo
    kept = kept.copy()
    geo = list(geo)
    for m in masks:
        geo.append((_NAN3, _NAN3, float("nan")))
        kept[m] = len(geo)
    return kept, geo


# Depth noise of a structured-light or stereo camera grows with the square of the distance; at 1 m such
# cameras (Kinect, Xtion, RealSense D4xx) spread 1-3 mm. The smallest scale any camera is credited with:
_SIGMA_AT_1M_FLOOR = 0.0008
_TABLE_BAND_M = 0.03  # readings this near the support plane measure its spread (the table and its noise)
_GROW_PX = 16  # how far (work pixels) an object grows down its own sides towards the table


def _noise_sigma(height: np.ndarray, z: np.ndarray, valid: np.ndarray, config: ProposalConfig) -> np.ndarray:
    """Per-pixel depth noise (metres, along the plane's normal) expected at each pixel's depth.

    sigma(z) = s * z^2 (disparity-based sensors), its scale ``s`` measured on the table itself: the
    robust spread of the readings within ``_TABLE_BAND_M`` of the plane, each divided by its depth
    squared; never below ``_SIGMA_AT_1M_FLOOR`` (a rendered table has no noise at all)."""
    scale = _noise_scale(height, z, valid)
    if z.dtype != np.float32:
        return (scale * z * z).astype(np.float32)
    sigma = z * scale  # (s * z) * z in float32, the second product in place
    sigma *= z
    return sigma


def _noise_scale(height: np.ndarray, z: np.ndarray, valid: np.ndarray) -> float:
    """The scale ``s`` of :func:`_noise_sigma`'s sigma(z) = s * z^2 (metres at 1 m), from the table's own
    readings (``height`` above the plane, depth ``z``, ``valid`` readings)."""
    with np.errstate(invalid="ignore"):
        near = valid & (np.abs(height) < _TABLE_BAND_M)
    if np.count_nonzero(near) < 50:
        return _SIGMA_AT_1M_FLOOR
    spread = height[near]  # |height| / z^2, in place where the types allow
    np.abs(spread, out=spread)
    zz = z[near]
    zz *= zz
    spread = np.divide(spread, zz, out=spread if np.result_type(spread, zz) == spread.dtype else None)
    return max(1.4826 * float(_median(spread)), _SIGMA_AT_1M_FLOOR)


def _grow_down(labels: np.ndarray, fg: np.ndarray, min_pixels: int) -> np.ndarray:
    """``labels`` (objects found among the points well above the noise) grown over the rest of ``fg``
    (points above the lower, noise-level threshold) connected to them, each pixel to the nearest
    object; parts of ``fg`` no object reaches become objects of their own (``min_pixels`` or more).

    A threshold high enough to keep the halo beside objects (a camera reads the table a few millimetres
    high next to an edge) from joining neighbours cuts the bottoms off objects and loses low ones
    (a bowl); one at the noise level keeps them but joins neighbours through the halo. Objects are
    parted at the high threshold and completed at the low one."""
    out = labels.astype(np.int32).copy()
    rest = fg & (out == 0)
    if rest.any() and out.any():
        # only the box around the pixels to fill (one pixel wider: the labels they take) can change; the
        # labels fit 16 bits there, which OpenCV dilates without conversions
        box = nonzero_box(rest, 1)
        wide = out.max() >= 65535
        grow, todo = out[box].astype(np.float32 if wide else np.uint16), rest[box]
        k = np.ones((3, 3), np.uint8)
        for _ in range(_GROW_PX):
            grown = cv2.dilate(grow, k)
            add = todo & (grown > 0)
            if not add.any():
                break
            np.copyto(grow, grown, where=add)  # grow[add] = grown[add], without gathering the values first
            todo ^= add  # todo &= ~add: every added pixel was still to do
        out[box] = grow
    if rest.any():
        n, lab, areas = label_areas(rest.astype(np.uint8), 4)
        big = np.flatnonzero(areas >= min_pixels)
        big = big[big > 0]
        if len(big) and out.any():  # a part touching an object is its halo or the rest of its foot, no object
            beside = cv2.dilate((out > 0).astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
            touching = np.unique(lab[beside & (lab > 0)])
            big = big[~np.isin(big, touching)]
        if len(big):
            lut = np.zeros(n, np.int32)
            lut[big] = int(out.max()) + 1 + np.arange(len(big), dtype=np.int32)
            out = np.where(lut[lab] > 0, lut[lab], out)
    return out


def _split_blobs(labels: np.ndarray, cut: np.ndarray, creases: np.ndarray | None, small: np.ndarray, z: np.ndarray,
                 config: ProposalConfig) -> np.ndarray:
    """Non-convex components split where their pieces' boundaries say two objects (:func:`regions.split_nonconvex`)."""
    crease = np.zeros_like(cut) if creases is None else creases
    rule = BoundaryRule(config.rules.region_step_m, config.rules.region_step_rel, config.rules.region_crease_share,
                        config.rules.region_offset_px, core_dilate_px=config.rules.region_core_dilate_px,
                        colour_de=config.rules.region_colour_de)
    return split_nonconvex(labels, cut | crease, crease, small, z, rule, config.rules.split_solidity, config.rules.split_gain,
                           int(config.rules.split_min_part * config.rules.min_pixels))


def _split_layers(labels: np.ndarray, P: np.ndarray, height: np.ndarray, small: np.ndarray,
                  config: ProposalConfig) -> np.ndarray:
    """Components split by their level tops at different heights (:func:`regions.split_layers`); the level
    test runs only on the box around the components (a few pixels more), the rest of the frame is table."""
    box = nonzero_box(labels, 4)
    flat = np.zeros(labels.shape, bool)
    flat[box] = flat_pixels(P[box], height[box], config.rules.layer_tilt)
    return split_layers(labels, flat, height, small, config.rules.layer_gap_m, int(config.rules.layer_min_part * config.rules.min_pixels))


def _border_share(m: np.ndarray, sl: tuple[slice, slice], shape: tuple[int, int]) -> float:
    """Share of a region's outline that lies on the image border (``m``: its mask within the box ``sl``
    of an image of ``shape``). An object in view shows most of its outline; a region with a third of
    it on the border is mostly outside the image, a sliver no one could recognise and whose 3D is wrong."""
    ys, xs = sl
    h, w = shape
    if ys.start > 0 and xs.start > 0 and ys.stop < h and xs.stop < w:
        return 0.0
    pad = np.pad(m, 1)
    inner = pad[:-2, 1:-1] & pad[2:, 1:-1] & pad[1:-1, :-2] & pad[1:-1, 2:]
    outline = m & ~inner
    on = np.zeros_like(m)
    if ys.start == 0:
        on[0] = True
    if ys.stop == h:
        on[-1] = True
    if xs.start == 0:
        on[:, 0] = True
    if xs.stop == w:
        on[:, -1] = True
    return float((outline & on).sum()) / max(int(outline.sum()), 1)


def _creases(height: np.ndarray, fg: np.ndarray, threshold: float) -> np.ndarray:
    """Object pixels in a valley of the height map (concave: smoothed Laplacian above ``threshold``)."""
    h = cv2.GaussianBlur(np.where(fg, height, 0.0).astype(np.float32, copy=False), (5, 5), 0)
    lap = cv2.Laplacian(h, cv2.CV_32F, ksize=3)
    return fg & (lap > threshold)


def _folds(P: np.ndarray, valid: np.ndarray, fg: np.ndarray, turn: float, span: int) -> np.ndarray:
    """Object pixels in a concave fold of the surface: where the unit normals (of the points box-smoothed over
    ``span`` pixels, so the sensor's millimetre steps average out) of the pixels ``span // 2`` either side,
    along x, y or a diagonal, turn towards each other by more than ``turn``: minus their difference along the
    unit step between the two points (2 sin(a / 2) for a valley of a between the normals; 0.9: about 53 deg).
    Two convex objects touching (a can in a bowl, two balls side by side) meet in such a valley
    whether or not their colours differ, and in 3D, whichever way the surfaces face (the height map's
    Laplacian sees a valley only in height). Measured in docs/perception.md ("Folds of the surface normals")."""
    out = np.zeros(fg.shape, bool)
    s = max(1, span // 2)
    box = nonzero_box(fg, 2 * s + 2)  # the object pixels, with room for the smoothing and the differences
    if box is None:
        return out
    (y0, y1), (x0, x1) = (box[0].start, box[0].stop), (box[1].start, box[1].stop)
    v = valid[y0:y1, x0:x1].astype(np.float32)
    k = (span, span)
    cnt = cv2.blur(v, k)
    weighted = np.empty(v.shape + (3,), np.float32)  # the points times v, channel by channel (a broadcast over
    for i in range(3):  # the last axis of 3 costs several times more)
        np.multiply(P[y0:y1, x0:x1, i], v, out=weighted[..., i])
    sums = cv2.blur(weighted, k)
    inv = np.where(cnt > 0.5, 1.0 / np.maximum(cnt, 1e-6), 0.0).astype(np.float32, copy=False)  # half the window read
    X, Y, Z = (sums[..., i] * inv for i in range(3))  # channel arrays: numpy is faster on them than on (..., 3)
    hh, ww = cnt.shape
    if hh <= 4 * s or ww <= 4 * s:
        return out
    good = inv > 0
    g = good[2 * s:, s:-s] & good[:-2 * s, s:-s] & good[s:-s, 2 * s:] & good[s:-s, :-2 * s] & good[s:-s, s:-s]
    # tangents over 2 s pixels at the inner pixels (x right, y down, z forward); the unit normal towards the
    # camera is -(u x w) over its length
    ux, uy, uz = (C[s:-s, 2 * s:] - C[s:-s, :-2 * s] for C in (X, Y, Z))
    wx, wy, wz = (C[2 * s:, s:-s] - C[:-2 * s, s:-s] for C in (X, Y, Z))
    nx, ny, nz = uz * wy - uy * wz, ux * wz - uz * wx, uy * wx - ux * wy
    ln = np.sqrt(nx * nx + ny * ny + nz * nz)
    ok = g & (ln > 0)
    ln = np.where(ok, 1.0 / np.where(ok, ln, 1.0), 0.0).astype(np.float32, copy=False)
    nx, ny, nz = nx * ln, ny * ln, nz * ln
    Xi, Yi, Zi = X[s:-s, s:-s], Y[s:-s, s:-s], Z[s:-s, s:-s]
    conc = np.zeros(nx.shape, bool)
    ih, iw = nx.shape
    t2 = np.float32(turn * turn)
    for dy, dx in ((0, s), (s, 0), (s, s), (s, -s)):
        # the inner pixel c - (dy, dx) against c + (dy, dx); the result at c. A valley: the normals turn
        # towards each other, against the step between the two points: -(dn . d) > turn * |d|
        ya, yb, yc = slice(0, ih - 2 * dy), slice(2 * dy, ih), slice(dy, ih - dy)
        if dx >= 0:
            xa, xb, xc = slice(0, iw - 2 * dx), slice(2 * dx, iw), slice(dx, iw - dx)
        else:
            xa, xb, xc = slice(-2 * dx, iw), slice(0, iw + 2 * dx), slice(-dx, iw + dx)
        a, b = np.s_[ya, xa], np.s_[yb, xb]
        conc[yc, xc] |= ok[a] & ok[b] & _turn_towards((nx[a], ny[a], nz[a]), (nx[b], ny[b], nz[b]),
                                                      (Xi[a], Yi[a], Zi[a]), (Xi[b], Yi[b], Zi[b]), t2)
    inner = np.zeros((hh, ww), bool)
    inner[s:-s, s:-s] = conc
    out[y0:y1, x0:x1] = inner
    return out & fg


def _turn_towards(na: tuple, nb: tuple, pa: tuple, pb: tuple, t2: np.float32) -> np.ndarray:
    """Where the normals ``na`` and ``nb`` (channel arrays x, y, z) at the points ``pa`` and ``pb`` turn towards
    each other by more than t (``t2`` = t^2): with dn = nb - na and d = pb - pa, -(dn . d) > 0 and
    (dn . d)^2 > t^2 |d|^2. The same values as those expressions written out (the same operations in the
    same order, in float32), computed in place: five arrays instead of a score of temporaries."""
    d = [np.subtract(b, a) for a, b in zip(pa, pb)]
    turn = np.subtract(nb[0], na[0])
    turn *= d[0]
    part = np.subtract(nb[1], na[1])
    part *= d[1]
    turn += part
    np.subtract(nb[2], na[2], out=part)
    part *= d[2]
    turn += part
    np.negative(turn, out=turn)  # -((dnx dX + dny dY) + dnz dZ)
    for c in d:
        c *= c
    d[0] += d[1]
    d[0] += d[2]  # (dX^2 + dY^2) + dZ^2
    d[0] *= t2
    np.multiply(turn, turn, out=part)
    hit = turn > 0
    hit &= part > d[0]
    return hit


def _support_region(inliers: np.ndarray, patch_share: float = 1.0) -> np.ndarray:
    """The image region of the support surface: convex hull of its largest connected patch of inliers and
    of the patches at least ``patch_share`` of its size (objects crowding a table cut its visible top
    into several patches, and objects standing on a smaller one are still on the table)."""
    m = cv2.morphologyEx(inliers.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
    n, lab, areas = label_areas(m, 8)
    region = np.zeros(inliers.shape, np.uint8)
    if n <= 1:
        return region.astype(bool)
    areas = areas[1:]
    chosen = 1 + np.flatnonzero(areas >= min(patch_share, 1.0) * areas.max())
    if len(chosen) == n - 1:  # every patch: the closed inliers themselves (the same non-zero pixels)
        picked = m
    else:
        pick = np.zeros(max(n, 256), np.uint8)  # label -> chosen (a table lookup, as np.isin)
        pick[chosen] = 1
        # OpenCV's byte lookup where the labels fit a byte: the same image, several times faster
        picked = cv2.LUT(lab.astype(np.uint8), pick[:256]) if n <= 256 else pick[lab]
    contours, _ = cv2.findContours(picked, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    hull = cv2.convexHull(np.vstack(contours))  # the outline's hull: the patch's hull, without its inner pixels
    cv2.fillConvexPoly(region, hull, 1)
    return cv2.dilate(region, np.ones((7, 7), np.uint8)).astype(bool)


def _share_on(region: np.ndarray, feet: np.ndarray, K: CameraIntrinsics) -> float:
    """Share of the 3D points ``feet`` whose image projection falls inside ``region``. The common case,
    every point in front of the camera and seen inside the image, reads the columns without selecting."""
    z = feet[:, 2]
    ok = z > 1e-3
    if ok.all():
        x, y, zs = feet[:, 0], feet[:, 1], z
    elif ok.any():
        x, y, zs = feet[ok, 0], feet[ok, 1], z[ok]
    else:
        return 0.0
    u = np.round(K.fx * x / zs + K.cx).astype(np.int64)
    v = np.round(K.fy * y / zs + K.cy).astype(np.int64)
    h, w = region.shape
    inside = (u >= 0) & (u < w) & (v >= 0) & (v < h)
    on = region[v, u] if inside.all() else region[v[inside], u[inside]]
    return float(np.count_nonzero(on)) / float(len(z))


def _median(a: np.ndarray) -> np.floating:
    """``np.median`` of a 1-D float array, the same value bit for bit (the middle value, or the mean of the
    middle two in the array's precision), without its per-call overhead: the per-object and per-seam
    medians of a frame call it hundreds of times. Empty arrays and arrays with NaN go to ``np.median``."""
    n = a.shape[0]
    if n == 0 or np.isnan(a).any():
        return np.median(a)
    h = n // 2
    if n >= _SAMPLED_FROM:
        middle = _middle_between_bounds(a, h, n % 2 == 0)
        if middle is not None:
            return middle
    if n % 2:
        return np.partition(a, h)[h]
    s = np.partition(a, (h - 1, h))
    return (s[h - 1] + s[h]) / 2


_SAMPLED_FROM = 4096  # a median of this many values or more is looked for between bounds from a sample
_SAMPLE_STEP = 16


def _middle_between_bounds(a: np.ndarray, h: int, even: bool) -> np.floating | None:
    """:func:`_median`'s answer for the 1-D array ``a`` without NaN (its sorted places ``h - 1`` when ``even`` and
    ``h``) from the few values between two bounds that every ``_SAMPLE_STEP``-th value puts around the middle:
    with ``below`` values under the lower bound, the value at sorted place k of ``a`` is the one at place
    k - ``below`` of those between the bounds. None when the bounds miss the middle, or a zero lies between
    them (-0.0 and 0.0 tie: which one a partition settles there is its own), for the caller's full partition.
    A partition costs about linear time in its values: a sixteenth and a tenth or so of them cost a third."""
    sample = a[::_SAMPLE_STEP]
    m = sample.shape[0]
    margin = max(16, m // 16)
    at = min(h // _SAMPLE_STEP, m - 1)
    lo_i, hi_i = max(at - margin, 0), min(at + margin, m - 1)
    s = np.partition(sample, (lo_i, hi_i))
    lo, hi = s[lo_i], s[hi_i]
    below = int(np.count_nonzero(a < lo))
    between = a[(a >= lo) & (a <= hi)]
    first, last = h - 1 - below if even else h - below, h - below
    if first < 0 or last >= between.shape[0] or np.count_nonzero(between) != between.shape[0]:
        return None
    if not even:
        return np.partition(between, last)[last]
    s = np.partition(between, (first, last))
    return (s[first] + s[last]) / 2


def _quantile(a: np.ndarray, q: float | tuple[float, ...]) -> np.ndarray | np.floating:
    """``np.quantile(a, q, axis=0)`` (its default "linear" method), the same values bit for bit: the same
    order statistics (one partition) and the same interpolation, without the tens of microseconds of
    argument handling per call that the per-object quantiles of every frame added up to. A float ``q``
    gives one value, a tuple one row per quantile; arrays with NaN go to ``np.quantile`` itself."""
    n = a.shape[0]
    weak = isinstance(q, float)
    if n < 2 or np.isnan(a).any():
        return np.quantile(a, q if weak else list(q), axis=0)
    prev, nxt, kth, gamma, t, t_rest, upper, read = _quantile_plan(n, q, a.ndim)
    if a.all():
        # no zero: equal values are the same bits (no -0.0 beside 0.0), so the places read hold the same values
        # whichever other places the partition settles; only those read are asked for, which costs less
        kth = read
    if weak:
        s = np.partition(a, kth)
        lo, hi = s[prev[0]], s[nxt[0]]
        diff = hi - lo
        return hi - diff * (1 - gamma[0]) if gamma[0] >= 0.5 else lo + diff * gamma[0]
    s = np.partition(np.ascontiguousarray(a.T), kth, axis=-1)  # along rows: faster than down strided columns
    lo, hi = s[..., prev].T, s[..., nxt].T
    diff = hi - lo
    out = np.add(lo, diff * t)
    np.subtract(hi, diff * t_rest, out=out, where=upper, casting="unsafe", dtype=type(out.dtype))
    return out


@functools.lru_cache(maxsize=4096)
def _quantile_plan(n: int, q: float | tuple[float, ...], ndim: int) -> tuple:
    """:func:`_quantile`'s order statistics and weights for ``n`` values (numpy's "linear" method): the
    indices below and above each quantile, the partition's kth (as ``np.quantile`` has them), the
    fractions, and for rows of quantiles the fractions shaped to broadcast, one minus them and where
    they are at least one half; last the places read alone. The same for every object of a size: worked out once."""
    prev, nxt, gamma = [], [], []
    for qi in ((q,) if isinstance(q, float) else q):
        v = (n - 1) * float(qi)
        p = -1 if v >= n - 1 else math.floor(v)  # at or past the last value: the largest (numpy's index -1)
        prev.append(p)
        nxt.append(-1 if p == -1 else p + 1)
        gamma.append(v - p)
    read = tuple(sorted({i % n for i in prev + nxt}))
    kth = tuple(sorted({0, n - 1, *read}))
    if isinstance(q, float):  # one value: read as plain numbers, no arrays to make
        return prev, nxt, kth, tuple(gamma), None, None, None, read
    t = np.array(gamma).reshape((len(gamma),) + (1,) * (ndim - 1))
    rest, upper = 1 - t, t >= 0.5
    prev, nxt = np.array(prev, np.intp), np.array(nxt, np.intp)
    for arr in (prev, nxt, t, rest, upper):  # shared by every call of this size: never written
        arr.flags.writeable = False
    return prev, nxt, kth, tuple(gamma), t, rest, upper, read


def _geometry(m: np.ndarray, sl: tuple[slice, slice], fg: np.ndarray, P: np.ndarray, height: np.ndarray,
              plane: _Plane, surface: np.ndarray | None, K: CameraIntrinsics,
              config: ProposalConfig) -> tuple[np.ndarray, np.ndarray, float] | None:
    """(centroid, size, objectness) of the piece ``m`` (within the slice ``sl``), or None when it is
    no object: too few points, standing beyond the support surface, too small or too large."""
    sel = m & fg[sl]
    pts, hs = _rows(P[sl], sel), height[sl][sel]
    n = len(pts)
    if n < 10:
        return None
    # the points and their feet as the rows x, y, z (the quantiles partition rows): no concatenated copy
    both = np.empty((3, 2 * n))
    both[:, :n] = pts.T
    np.subtract(both[:, :n], plane.normal[:, None] * hs, out=both[:, n:])
    feet = both[:, n:].T
    if surface is not None and _share_on(surface, feet, K) < 0.5:
        return None  # standing beyond the support surface: background
    top = float(_quantile(hs, 0.98))
    lo, hi = _quantile(both.T, (0.02, 0.98))
    size = hi - lo
    if not config.min_size_m <= float(size.max()) <= config.max_size_m:
        return None
    # centre of the object's box: middle of the feet's extent on the plane, half its top height up
    flo, fhi = _quantile(feet, (0.02, 0.98))
    foot_mid = (flo + fhi) / 2
    foot_mid = foot_mid - (foot_mid @ plane.normal + plane.offset) * plane.normal  # back onto the plane
    centroid = foot_mid + plane.normal * (top / 2)
    fill = np.count_nonzero(m) / m.size  # share of its box the component fills (the mean of the bools)
    conf = float(np.sqrt(min(1.0, fill / 0.6) * min(1.0, top / (4 * config.min_height_m))))
    return centroid, size, conf


def _extent_share(a: tuple, b: tuple) -> float:
    """Volume of the overlap of two pieces' 3D extents (centroid +- size / 2) over the smaller one's."""
    lo = np.maximum(a[0] - a[1] / 2, b[0] - b[1] / 2)
    hi = np.minimum(a[0] + a[1] / 2, b[0] + b[1] / 2)
    small = min(float(np.prod(a[1])), float(np.prod(b[1])))
    return float(np.prod(np.clip(hi - lo, 0.0, None)) / small) if small > 0 else 0.0


_INSIDE = 0.9  # a piece this much inside another's extent stands in or on it (a can in a bowl): not joined
_CONTACT_M = 0.01  # pieces of one object meet in 3D where they are cut apart; a piece hiding another does not


def _contact_m(a: int, b: int, kept: np.ndarray, grown: np.ndarray, shrunk: np.ndarray, P: np.ndarray,
               most: int = 300) -> float:
    """Smallest 3D distance between the pixels of pieces ``a`` and ``b`` that lie beside each other in the
    image (at most ``most`` of each, evenly spaced): about a pixel's width where one surface was cut in
    two, a centimetre or more across an occluding edge (an object before another)."""
    side = []
    for me, other in ((a, b), (b, a)):
        ys, xs = np.nonzero((kept == me) & ((grown == other) | (shrunk == other)))
        pts = P[ys, xs][:: max(1, len(ys) // most)]
        side.append(pts[pts[:, 2] > 0])
    if not len(side[0]) or not len(side[1]):
        return math.inf
    return float(np.sqrt(((side[0][:, None] - side[1][None]) ** 2).sum(-1)).min())


def _join_pieces(kept: np.ndarray, geo: list, before_layers: np.ndarray, small: np.ndarray, fg: np.ndarray,
                 P: np.ndarray, height: np.ndarray, plane: _Plane, K: CameraIntrinsics,
                 config: ProposalConfig) -> tuple[np.ndarray, list]:
    """``kept`` and ``geo`` with the touching pieces of one object joined (``ProposalRules.join_m``).

    Pieces touch when one's mask, grown by 2 work pixels, meets the other's. Two pieces of one component
    of ``before_layers`` were parted by their level tops (``layer_gap_m``): an object standing on another
    shows a top of its own, so they stay apart. Joined pieces (a chain of pairs makes one group) get their
    geometry again from the union."""
    n = len(geo)
    centroids = np.stack([g[0] for g in geo])
    near = np.linalg.norm(centroids[:, None] - centroids[None], axis=-1) <= config.rules.join_m
    if not np.triu(near, 1).any():
        return kept, geo  # no two pieces near enough: the usual case, at the cost of one distance matrix
    grown = cv2.dilate(kept.astype(np.float32), np.ones((5, 5), np.uint8)).astype(np.int64)  # max label nearby
    shrunk = -cv2.dilate(-np.where(kept > 0, kept, n + 1).astype(np.float32), np.ones((5, 5), np.uint8))
    shrunk = shrunk.astype(np.int64)  # min label nearby
    keys = []
    for a_map, b_map in ((kept, grown), (shrunk, kept)):
        sel = (a_map > 0) & (a_map <= n) & (b_map > 0) & (b_map <= n) & (a_map != b_map)
        a, b = a_map[sel].astype(np.int64), b_map[sel].astype(np.int64)
        keys.append(np.minimum(a, b) * (n + 1) + np.maximum(a, b))
    pairs = [(int(k) // (n + 1), int(k) % (n + 1)) for k in np.unique(np.concatenate(keys))]
    pairs = [(a, b) for a, b in pairs if near[a - 1, b - 1]
             and config.rules.join_share <= _extent_share(geo[a - 1], geo[b - 1]) < _INSIDE]
    if not pairs:
        return kept, geo
    # for the pieces of those pairs only: mean Lab colour, and the component each came from before the
    # layer split (its most common one)
    slices = find_boxes(kept, max_label=n)
    colour, source = {}, {}
    for piece in {x for pair in pairs for x in pair}:
        sl = slices[piece - 1]
        m = kept[sl] == piece
        colour[piece] = cv2.cvtColor(small[sl][m].reshape(-1, 1, 3), cv2.COLOR_RGB2LAB).reshape(-1, 3).mean(axis=0)
        source[piece] = int(np.bincount(before_layers[sl][m].ravel()).argmax())
    joins = []
    for a, b in pairs:
        if source[a] and source[a] == source[b]:
            continue  # parted by their level tops
        if float(np.linalg.norm(colour[a] - colour[b])) <= config.rules.join_colour_de \
                and _contact_m(a, b, kept, grown, shrunk, P) <= _CONTACT_M:
            joins.append((a, b))
    if not joins:
        return kept, geo
    lut = group_labels(n, *np.array(joins).T)  # piece label -> group label (0 stays background)
    group = lut[1:] - 1
    joined = lut[kept]
    members = np.bincount(group)
    out = np.zeros_like(kept)
    new_geo = []
    for r, sl in enumerate(find_boxes(joined), start=1):
        if sl is None:
            continue
        m = joined[sl] == r
        first = int(np.flatnonzero(group == r - 1)[0])
        # a piece alone keeps its geometry; a union too large or too small to stand, its first piece's
        g = geo[first] if members[r - 1] == 1 else (
            _geometry(m, sl, fg, P, height, plane, None, K, config) or geo[first])
        out[sl][m] = len(new_geo) + 1
        new_geo.append(g)
    return out, new_geo


def _enlarged_slices(small: np.ndarray, full: np.ndarray, n: int) -> list:
    """``ndimage.find_objects(full, max_label=n)`` of ``full``, the nearest-neighbour enlargement of the label
    image ``small``: each label is looked for only in its box in ``small`` scaled up, two pixels wider each
    way (where the enlargement can have put it), instead of over the whole full-size image."""
    sh, sw = small.shape
    h, w = full.shape
    out: list = []
    for i, sl in enumerate(find_boxes(small, max_label=n), start=1):
        if sl is None:
            out.append(None)
            continue
        y0, y1 = max(sl[0].start * h // sh - 2, 0), min(-(-sl[0].stop * h // sh) + 2, h)
        x0, x1 = max(sl[1].start * w // sw - 2, 0), min(-(-sl[1].stop * w // sw) + 2, w)
        box = nonzero_box(full[y0:y1, x0:x1] == i)
        out.append(None if box is None else (slice(y0 + box[0].start, y0 + box[0].stop),
                                             slice(x0 + box[1].start, x0 + box[1].stop)))
    return out


def _block_factor(small: tuple[int, int], full: tuple[int, int]) -> int:
    """The factor f (2, 4, 8 or 16) when ``full`` is exactly f times ``small`` both ways, else 0. At these
    factors (powers of two: 1 / f is exact) cv2's nearest-neighbour enlargement reads pixel (y // f, x // f),
    so every small pixel becomes an f x f block of full-size pixels."""
    for f in (2, 4, 8, 16):
        if (small[0] * f, small[1] * f) == tuple(full):
            return f
    return 0


def _assemble(labels: np.ndarray, geo: list, shape: tuple[int, int], config: ProposalConfig) -> list[Proposal]:
    h, w = shape
    n = len(geo)
    if n == 0:
        return []
    f = _block_factor(labels.shape, shape)
    if labels.shape == (h, w):
        full = labels
        slices = find_boxes(full, max_label=n)
    elif f:  # each label pixel is an f x f block at full size: masks made within their boxes, no full image
        full = None
        slices = find_boxes(labels, max_label=n)
    else:
        full = cv2.resize(labels.astype(np.int32), (w, h), interpolation=cv2.INTER_NEAREST)
        slices = _enlarged_slices(labels, full, n)
    out = []
    for i, sl in enumerate(slices):
        if sl is None:
            continue
        mask = np.zeros((h, w), bool)
        if full is None:
            block = labels[sl] == (i + 1)
            sl = (slice(sl[0].start * f, sl[0].stop * f), slice(sl[1].start * f, sl[1].stop * f))
            mask[sl] = block.repeat(f, axis=0).repeat(f, axis=1)
        else:
            mask[sl] = full[sl] == (i + 1)
        ys, xs = sl
        box = (int(xs.start), int(ys.start), int(xs.stop), int(ys.stop))
        centroid, size, conf = geo[i]
        if not math.isfinite(conf):
            conf = 0.0
        if np.isnan(centroid).all():  # RGB method: objectness from how filled its box is
            conf = float(min(1.0, mask[ys, xs].mean() / 0.6))
        out.append(Proposal(box, mask, np.asarray(centroid, float).copy(), np.asarray(size, float).copy(),
                            float(np.clip(conf, 0.0, 1.0))))
    out.sort(key=lambda p: (-p.score, p.box))
    return out[: config.max_proposals]


_BELOW = (0.25, 0.5, 0.75)  # where under an object point the camera looks (share of the way down to the plane)


def _support_evidence(labels: np.ndarray, ys: np.ndarray, xs: np.ndarray, P: np.ndarray, z: np.ndarray,
                      height: np.ndarray, plane: _Plane, K: CameraIntrinsics,
                      config: ProposalConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per label, how many of the pixels (``ys``, ``xs``) the camera sees standing over free space, and
    how many over their own piece.

    Below each point (at ``_BELOW`` of the way down to the plane, and ``attach_gap_m`` above it) the
    camera's reading on that line of sight either lies beyond (the space under the point is seen
    empty: it overhangs), or in front on the same piece (the piece itself is there: it stands).
    Readings on another piece say nothing (it may just hide what is below)."""
    h, w = z.shape
    mine, pts, hs = labels[ys, xs], P[ys, xs], height[ys, xs]
    free = np.zeros(len(ys), bool)
    own = np.zeros(len(ys), bool)
    low = np.minimum(config.rules.attach_gap_m, 0.5 * hs)  # just above the plane: the view passes furthest from the point
    for drop in [f * hs for f in _BELOW] + [hs - low]:
        q = pts - drop[:, None] * plane.normal
        qz = q[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.round(K.fx * q[:, 0] / qz + K.cx)
            v = np.round(K.fy * q[:, 1] / qz + K.cy)
        ok = (qz > _NEAREST_M) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
        ui, vi = u[ok].astype(np.int64), v[ok].astype(np.int64)
        seen = z[vi, ui]
        with np.errstate(invalid="ignore"):
            beyond = seen > qz[ok] + config.rules.attach_gap_m / 2 + config.rules.depth_jump_rel * qz[ok]
        free[ok] |= beyond
        own[ok] |= ~beyond & np.isfinite(seen) & (labels[vi, ui] == mine[ok])
    n = int(labels.max())
    return (np.bincount(mine, weights=free, minlength=n + 1),
            np.bincount(mine, weights=own & ~free, minlength=n + 1))


def _areas_of(labels: np.ndarray, asked: np.ndarray, n: int) -> np.ndarray:
    """Pixels of each label in ``asked`` (int64, index 0..n; 0 for the others) of the labels ``labels`` (0..n)."""
    area = np.zeros(n + 1, np.int64)
    if len(asked) > 2 and n < 65536 and labels.size < 2 ** 24:
        # OpenCV's histogram of the labels (16 bits; every count exact in float32): one pass for them all
        area[asked] = cv2.calcHist([labels.astype(np.uint16)], [0], None, [n + 1], [0, n + 1]).ravel()[asked]
    else:  # a few labels: counted one by one, cheaper than a whole-image count
        for i in asked:
            area[i] = np.count_nonzero(labels == i)
    return area


def _attach_overhangs(labels: np.ndarray, fg: np.ndarray, P: np.ndarray, z: np.ndarray, height: np.ndarray,
                      plane: _Plane, K: CameraIntrinsics, config: ProposalConfig) -> np.ndarray:
    """``labels`` with each small hanging piece joined to the piece it touches most in 3D (see
    ``ProposalRules.overhang_share``). The depth jump where a mug's handle meets the rim cuts it off
    like a separate object; but a separate object stands on something, a handle hangs in the air."""
    n = int(labels.max())
    if n < 2:
        return labels
    # 3D contacts: 4-neighbour pixel pairs of two pieces whose depths differ by at most attach_gap_m
    # (neighbouring pixels lie a few millimetres apart sideways, so depth is what parts them)
    keys = [np.zeros(0, np.int64)]
    pos = labels > 0
    for a, b, pa, pb, za, zb in ((labels[:, :-1], labels[:, 1:], pos[:, :-1], pos[:, 1:], z[:, :-1], z[:, 1:]),
                                 (labels[:-1, :], labels[1:, :], pos[:-1, :], pos[1:, :], z[:-1, :], z[1:, :])):
        pair = (a != b) & pa & pb
        with np.errstate(invalid="ignore"):
            near = np.abs(za[pair] - zb[pair]) <= config.rules.attach_gap_m
        keys.append(a[pair][near].astype(np.int64) * (n + 1) + b[pair][near])
    keys = np.concatenate(keys)
    if len(keys) == 0:
        return labels
    contact = np.bincount(keys, minlength=(n + 1) ** 2).reshape(n + 1, n + 1)
    contact += contact.T
    holder = np.argmax(contact, axis=1)
    touching = np.flatnonzero(contact[np.arange(n + 1), holder] >= 2)
    area = _areas_of(labels, np.union1d(touching, holder[touching]), n)
    small = [int(i) for i in touching if area[i] <= config.rules.attach_max_ratio * area[holder[i]]]
    if not small:
        return labels
    tall = fg & (height >= config.rules.overhang_min_height_m)
    pixels = [np.nonzero((labels == i) & tall) for i in small]
    ys, xs = np.concatenate([p[0] for p in pixels]), np.concatenate([p[1] for p in pixels])
    free, own = _support_evidence(labels, ys, xs, P, z, height, plane, K, config)
    hanging = np.zeros(n + 1, bool)
    hanging[small] = True
    hanging &= (free + own >= 10) & (free >= config.rules.overhang_share * (free + own))
    if not hanging.any():
        return labels
    parent = np.where(hanging, holder, np.arange(n + 1))
    while not np.array_equal(parent[parent], parent):  # hanging on a hanging piece: areas grow, so this ends
        parent = parent[parent]
    remap = np.zeros(n + 1, np.int32)
    keep = np.unique(parent[1:])
    remap[keep] = np.arange(1, len(keep) + 1)
    return remap[parent][labels]
