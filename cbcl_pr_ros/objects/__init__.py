"""Per-object perception from a camera frame to tracked objects, without ROS.

Read in this order (docs/architecture.md, "Following one frame to ``detections``"):

* :mod:`.extract` — the extractor's side: one frame (colour, depth, intrinsics, pose) to the frame's
  vector and an :class:`ObjectFrame` in one call, :func:`extract_objects`; depth paired with colour by
  :mod:`.depth_pairing`, a still picture's proposals and vectors kept by :mod:`.reuse`.
* :mod:`.frame` — what crosses from the extractor to the learner: :class:`ObjectFrame`,
  :class:`ObjectJoins`.
* :mod:`.pieces` — what one object is: candidate joins, recognised joins, parts, and every threshold
  of them in one table, :class:`PiecePolicy`.
* :mod:`.stream` — the learner's side: :class:`ObjectStream` classifies, joins and tracks each frame.
* :mod:`.tracks` — everything kept per track, in one store: :class:`TrackStore`.
* :mod:`.taught_search` — taught classes looked for in windows of the whole frame where no proposal
  stands (:func:`~.taught_search.search_taught`); measured by ``bench/bench_taught_search.py``, not
  called by the extractor or the learner.

The proposals, crops, tracker and camera poses these build on are in :mod:`cbcl_pr_ros.perception`.
"""

from .depth_pairing import DepthPairing
from .extract import ExtractedFrame, ExtractSettings, ObjectReuse, extract_objects
from .frame import ObjectFrame, ObjectJoins
from .pieces import PIECES, PiecePolicy, nested_parts
from .stream import ObjectStream
from .tracks import TrackStore, TrackViews

__all__ = ["DepthPairing", "ExtractedFrame", "ExtractSettings", "ObjectReuse", "extract_objects", "ObjectFrame",
           "ObjectJoins", "PIECES", "PiecePolicy", "nested_parts", "ObjectStream", "TrackStore", "TrackViews"]
