"""Per-object perception without ROS: class-agnostic proposals, crops, tracking and score fusion.

See docs/perception.md; what one object is, and the object stream built on these, live in
:mod:`cbcl_pr_ros.objects`.
"""

from .boxes import box_iou, clip_box, crop_images, mask_for_box, select_teaching_proposal
from .proposals import ProposalConfig, depth_problem, fit_support_plane, propose
from .tracking import ObjectObservation, ObjectTracker, Track, fuse_scores
from .types import CameraIntrinsics, Proposal

__all__ = [
    "CameraIntrinsics", "Proposal", "ProposalConfig", "propose", "depth_problem", "fit_support_plane",
    "box_iou", "clip_box", "crop_images", "mask_for_box", "select_teaching_proposal",
    "ObjectObservation", "Track", "ObjectTracker", "fuse_scores",
]
