"""One camera frame to its objects' vectors, without ROS: the extractor's object path as one call.

:func:`extract_objects` takes a colour image, its depth (metres, or None), the camera's intrinsics,
its pose (or None), the backbone and the reuse state of the stream, and gives the frame's vector
and an :class:`~cbcl_pr_ros.objects.frame.ObjectFrame`:

1. the depth is checked against the image (:func:`usable_depth`): intrinsics calibrated for another
   size are scaled, of another aspect ratio dropped; depth not aligned, empty or in the wrong unit
   is dropped (RGB-only proposals and no 3D rather than a wrong one), with the reason to warn about;
2. the proposals (``perception.propose``, with gravity from the pose when it is known; or, with a
   segmenter in the settings, the learned ones of ``perception.segmenter.propose_learned``, or with
   ``referee`` those of ``propose_hybrid`` (the geometry referees them), which fall back to ``propose``
   on a frame without usable depth) and the
   candidate joins of touching pieces (``pieces.candidate_pairs``, ``pieces.union_proposal``), or
   those kept for a still picture (``reuse.ProposalReuse``);
3. the crops of every proposal and every union (``perception.crop_images``);
4. ONE backbone batch: the frame, each crop, each union's crop, less what a still picture lets the
   stream keep (``reuse.CropFeatureReuse``).

The node converts the messages, calls this and publishes; everything here is tested without rclpy.
"""
from __future__ import annotations

import functools
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from cbcl_pr_ros.perception.boxes import crop_images
from cbcl_pr_ros.perception.camera_pose import CameraPose
from cbcl_pr_ros.perception.proposals import ProposalConfig, depth_problem, propose, without_misplaced_3d
from cbcl_pr_ros.perception.segmenter import Segmenter, load_segmenter, propose_hybrid, propose_learned
from cbcl_pr_ros.perception.types import CameraIntrinsics, Proposal, intrinsics_for_image
from cbcl_pr_ros.runtime.stage_times import StageTimes

from .frame import ObjectFrame, ObjectJoins
from .pieces import PIECES, PiecePolicy, candidate_pairs, union_proposal
from .reuse import CropFeatureReuse, ProposalReuse

__all__ = ["PROPOSAL_METHODS", "ExtractSettings", "ExtractedFrame", "ObjectReuse", "extract_objects",
           "frame_proposals", "proposal_segmenter", "shipped_segmenter", "usable_depth", "up_axis"]

#: how the objects of a frame are found: the depth's geometry, the learned segmenter (its objects
#: placed by the same support plane), or the learned segmenter with the geometry as referee (pieces it
#: sees as one object joined or dropped, objects it parts parted); the geometry still serves frames
#: without usable depth
PROPOSAL_METHODS = ("depth", "learned", "hybrid")


@functools.lru_cache(maxsize=1)
def shipped_segmenter() -> Segmenter:
    """The segmenter of the weights shipped with the package, loaded once per process (its forward pass
    is stateless, so every ``ExtractSettings`` may share it)."""
    return load_segmenter()


@dataclass(frozen=True)
class ExtractSettings:
    """The extractor's per-object settings (its parameters of those names): most objects per frame,
    the crops' context margin and background fill, whether a still picture keeps its proposals and
    vectors, the piece policy (``join_candidates``: candidate joins per frame), the segmenter whose
    learned proposals replace the geometry's where the depth is usable (None: the geometry's; see
    :func:`proposal_segmenter`), and ``referee``: the geometry referees the learned proposals
    (``object_proposals`` hybrid). The defaults are the extractor's: the shipped segmenter refereed by
    the geometry (hybrid); ``segmenter=None`` gives the geometry's proposals, ``referee=False`` the
    network's alone."""

    max_objects: int = 16
    crop_margin: float = 0.1
    mask_crops: bool = True
    reuse_still_crops: bool = True
    policy: PiecePolicy = PIECES
    segmenter: Segmenter | None = field(default_factory=shipped_segmenter, compare=False, repr=False)
    referee: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_objects, bool) or not isinstance(self.max_objects, (int, np.integer)) \
                or self.max_objects < 1:
            raise ValueError(f"max_objects must be an integer >= 1, got {self.max_objects!r}")
        if not 0.0 <= float(self.crop_margin) <= 2.0:
            raise ValueError(f"crop_margin must be in [0, 2], got {self.crop_margin!r}")
        if not isinstance(self.policy, PiecePolicy):
            raise TypeError(f"policy must be a PiecePolicy, got {type(self.policy).__name__}")
        if self.segmenter is not None and not isinstance(self.segmenter, Segmenter):
            raise TypeError(f"segmenter must be a Segmenter or None, got {type(self.segmenter).__name__}")


def proposal_segmenter(method: str, weights: str = "") -> Segmenter | None:
    """The segmenter for ``ExtractSettings`` of the extractor's ``object_proposals`` method: None for
    "depth"; for "learned" and "hybrid" the network of ``weights`` ('' = the weights shipped with the package), loaded
    once. ``ValueError`` with one line saying why for another method, or weights our loader refuses."""
    if method not in PROPOSAL_METHODS:
        raise ValueError(f"object_proposals must be one of {', '.join(PROPOSAL_METHODS)}, got {method!r}")
    if method == "depth":
        return None
    try:
        return load_segmenter(weights) if weights else shipped_segmenter()
    except ValueError as exc:
        raise ValueError(f"object_proposals {method}: the segmenter's weights are unusable: {exc}") from None


class ObjectReuse:
    """A stream's reuse state: the kept proposals of a still picture and the kept crop vectors. Not
    thread-safe (one worker uses it); reset it for a new stream or another backbone."""

    def __init__(self, refresh_frames: int = 10) -> None:
        self.crops = CropFeatureReuse(refresh_frames=refresh_frames)
        self.proposals = ProposalReuse(refresh_frames=refresh_frames)

    def reset(self) -> None:
        """Forget what was kept (features of another backbone must not be reused)."""
        self.crops.reset()
        self.proposals.reset()


@dataclass(frozen=True)
class ExtractedFrame:
    """A frame's vector, its objects, and why its depth was not used ("" when it was, or none came);
    ``depth_refused``: depth came but was unusable for this image (not aligned, empty, wrong unit)."""

    frame_feature: np.ndarray
    objects: ObjectFrame
    depth_note: str = ""
    depth_refused: bool = False


def up_axis(pose: CameraPose | None) -> tuple[float, float, float] | None:
    """The fixed frame's up (+z, as a robot's base frame has it) in the camera's optical frame, or None
    without a pose: the proposer then takes the largest plane's normal for it."""
    if pose is None:
        return None
    up = pose.rotation.inv().apply(np.array([0.0, 0.0, 1.0]))
    return (float(up[0]), float(up[1]), float(up[2]))


def usable_depth(depth: np.ndarray | None, intrinsics: CameraIntrinsics | None,
                 calibrated_size: tuple[int, int] | None,
                 image_shape: Sequence[int]) -> tuple[np.ndarray | None, CameraIntrinsics | None, str, bool]:
    """(depth or None, intrinsics for the image or None, why depth is not used, whether it was refused).

    ``calibrated_size``: the (width, height) the intrinsics belong to (CameraInfo's; None = unknown).
    Depth without usable intrinsics, or one ``depth_problem`` finds wrong, is dropped: no 3D rather
    than a wrong one."""
    K, why = intrinsics_for_image(intrinsics, calibrated_size, image_shape)
    if depth is None:
        return None, K, "", False
    if K is None:
        return None, None, why, False
    problem = depth_problem(depth, tuple(image_shape))
    if problem:
        return None, K, f"depth not used, RGB-only proposals and no 3D: {problem}", True
    return depth, K, "", False


def frame_proposals(rgb: np.ndarray, depth: np.ndarray | None, K: CameraIntrinsics | None,
                    pose: CameraPose | None, still: ProposalReuse | None,
                    settings: ExtractSettings) -> tuple[list[Proposal], list[tuple[int, int]], list[Proposal]]:
    """A frame's proposals and candidate joins (pairs, unions), or those kept for a still picture
    (``still``; None = computed every frame)."""
    limit, up = settings.policy.join_candidates, up_axis(pose)
    key = (depth is not None, None if K is None else (K.fx, K.fy, K.cx, K.cy), rgb.shape, settings.max_objects,
           limit, None if up is None else tuple(round(v, 3) for v in up), id(settings.segmenter))
    props, grid = still.lookup(rgb, key) if still is not None else (None, None)
    if props is not None:
        pairs, unions = still.kept_joins
        return props, list(pairs), list(unions)
    config = ProposalConfig(up_axis=up) if up is not None else None
    props = _propose(rgb, depth, K, config, settings.segmenter, settings.referee)[:settings.max_objects]
    pairs = candidate_pairs(props, depth, K, settings.policy)
    unions = [union_proposal(props[i], props[j]) for i, j in pairs]
    if still is not None:
        still.keep(grid, key, props, (pairs, unions))
    return props, pairs, unions


def _propose(rgb: np.ndarray, depth: np.ndarray | None, K: CameraIntrinsics | None, config: ProposalConfig | None,
             segmenter: Segmenter | None, referee: bool = False) -> list[Proposal]:
    """The learned proposals with a segmenter and usable depth (refereed by the geometry with ``referee``);
    otherwise (and when the segmenter finds the depth unusable) the geometry's, which then go RGB-only as
    they do without a segmenter."""
    if segmenter is not None and depth is not None and K is not None:
        learned = (propose_hybrid if referee else propose_learned)(segmenter, rgb, depth, K, config)
        if learned is not None:
            return without_misplaced_3d(learned, K)
    return propose(rgb, depth, K, config)


def extract_objects(rgb: np.ndarray, depth: np.ndarray | None, intrinsics: CameraIntrinsics | None,
                    pose: CameraPose | None, backbone: Any, reuse: ObjectReuse,
                    settings: ExtractSettings | None = None, *,
                    calibrated_size: tuple[int, int] | None = None, times: StageTimes | None = None,
                    turn: AbstractContextManager | None = None) -> ExtractedFrame:
    """The frame's vector and its objects (see the module docstring). ``backbone.extract(images)``
    gives (n, d) vectors; ``turn`` is held around that one batch (a backbone shared with a learner);
    ``times`` gets the "proposals" and "backbone_objects" stages. ``settings`` None: ``ExtractSettings()``."""
    settings = ExtractSettings() if settings is None else settings
    with _stage(times, "proposals"):
        depth, K, note, refused = usable_depth(depth, intrinsics, calibrated_size, rgb.shape)
        still = reuse.proposals if settings.reuse_still_crops else None
        props, pairs, unions = frame_proposals(rgb, depth, K, pose, still, settings)
        crops = crop_images(rgb, [*props, *unions], settings.crop_margin,
                            mask_background=settings.mask_crops) if props else []
    # the frame is one more picture whose vector a still camera keeps, but only while every cell
    # of it stays the same (ProposalReuse): one new object changes the frame's vector
    images = [rgb, *crops]
    boxes = [(0, 0, rgb.shape[1], rgb.shape[0]), *(p.box for p in [*props, *unions])]
    kept = reuse.crops if still is not None else None
    changed = [] if still is not None and still.same_picture else [0]
    known = kept.plan(boxes, images, recompute=changed) if kept is not None else [None] * len(images)
    todo = [i for i, f in enumerate(known) if f is None]
    with turn if turn is not None else nullcontext(), _stage(times, "backbone_objects"):
        computed = backbone.extract([images[i] for i in todo]) if todo else []
    for j, i in enumerate(todo):
        known[i] = computed[j]
    if kept is not None:
        kept.store(known)
    feats, n = np.stack(known), len(props)  # (1 + objects + unions, d): the frame, each crop, each union's
    joins = ObjectJoins(tuple(pairs), tuple(unions), feats[1 + n:]) if pairs else ObjectJoins()
    objects = ObjectFrame(list(props), feats[1:1 + n], (int(rgb.shape[0]), int(rgb.shape[1])), joins)
    return ExtractedFrame(feats[0], objects, note, refused)


def _stage(times: StageTimes | None, name: str) -> AbstractContextManager:
    return times.stage(name) if times is not None else nullcontext()
