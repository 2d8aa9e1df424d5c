"""What one camera frame's objects are, as the extractor sends them and the learner receives them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cbcl_pr_ros.perception.types import Proposal

__all__ = ["ObjectFrame", "ObjectJoins"]


@dataclass(frozen=True)
class ObjectJoins:
    """A frame's candidate joins (:func:`cbcl_pr_ros.objects.pieces.candidate_pairs`): index pairs into
    its proposals, the proposal each pair makes together, and that union's vector (one row per pair)."""

    pairs: tuple[tuple[int, int], ...] = ()
    unions: tuple[Proposal, ...] = ()
    features: np.ndarray | None = None


@dataclass(frozen=True)
class ObjectFrame:
    """One frame of the object stream: its proposals, their (n, d) vectors, the image's (h, w) and the
    candidate joins of touching pieces (none by default)."""

    proposals: list[Proposal]
    features: np.ndarray
    shape: tuple[int, int]
    joins: ObjectJoins = ObjectJoins()
