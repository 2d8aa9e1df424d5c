"""Per-object perception without ROS: class-agnostic proposals, crops, tracking and score fusion.

See docs/perception.md.
"""

from .boxes import box_iou, clip_box, crop_images, mask_for_box, nested_parts, select_teaching_proposal
from .proposals import ProposalConfig, depth_problem, fit_support_plane, propose
from .tracking import ObjectObservation, ObjectTracker, Track, fuse_scores
from .types import CameraIntrinsics, Proposal

__all__ = [
    "CameraIntrinsics", "Proposal", "ProposalConfig", "propose", "depth_problem", "fit_support_plane",
    "box_iou", "clip_box", "crop_images", "mask_for_box", "nested_parts", "select_teaching_proposal",
    "ObjectObservation", "Track", "ObjectTracker", "fuse_scores",
]
