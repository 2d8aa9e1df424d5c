"""One object is in one place: of the objects seen together in one view, two that look unlike each
other are not both the same taught object.

The gate judges each vector alone, so after one teach a stranger that looks a little like the taught
object is accepted as it even while the taught object stands beside it. Seen together, the two
cannot both be it. For each cluster of a class, the objects of the view known as that class and
nearest that cluster keep the class only when they look alike (within ``TWIN`` ``D_gate`` of the
nearest of them, and never less than ``TWIN`` times the backbone's prior distance, since shots of
one view shrink ``D_gate`` but not what two of one kind look like: two equal cans may both be it);
the others are answered unknown. The rule works per cluster, not per class, so a class taught from several different objects
(a class of mugs) still names each of them. Its confidence in the class becomes its own times the
chance that the nearest one is *not* the class (``1 - inside``, with ``inside`` the gate's
probability of the kept object, above 0.5 when known): below 0.5, like every unknown answer.

The same principle judges a track's earlier views when a teach of the object in view takes them
(:func:`one_object`): where the object taught now stood elsewhere in an earlier frame, the track
was on another object there.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Sequence

import numpy as np

from cbcl_pr_ros.plurals import counted

from .negatives import sq_distances
from .open_set import DistanceGate, inside_probability

__all__ = ["TWIN", "GUARD", "GUARDS", "one_place", "one_object"]

#: two objects of one view within this many ``D_gate`` of each other may both be one class (an object
#: and its twin); ``D_gate`` is the distance within which the gate counts two vectors as one kind
TWIN = 1.0


def one_place(x: np.ndarray, predictions: Sequence, classes: Sequence[str], gate: DistanceGate,
              twin: float | None = TWIN, unit: float | None = None) -> list:
    """``predictions`` (one per row of ``x``, transformed vectors of one view) with the rule applied.

    ``classes`` are the gate's class names in its order; a prediction whose label is not among them
    (a class forgotten meanwhile) is left as it is. ``twin`` None leaves every prediction as it is.
    ``unit``: the distance ``twin`` counts in (default the gate's ``D_gate``).
    """
    out = list(predictions)
    if twin is None or len(out) < 2:
        return out
    index = {c: i for i, c in enumerate(classes)}
    groups: dict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
    for i, p in enumerate(out):
        c = index.get(p.label) if p.known else None
        if c is None:
            continue
        d2 = ((np.asarray(gate.centroids[c], np.float64) - x[i]) ** 2).sum(axis=1)
        j = int(np.argmin(d2))
        groups[(c, j)].append((float(d2[j]), i))
    bound = float(twin) * (gate.distance_threshold if unit is None else float(unit))
    for (c, _), rows in groups.items():
        if len(rows) < 2:
            continue
        rows.sort()
        keep = rows[0][1]
        kept_inside = float(inside_probability(gate.ratios(x[keep:keep + 1], np.array([c])))[0])
        for _, i in rows[1:]:
            if float(np.linalg.norm(x[i] - x[keep])) > bound:
                out[i] = _not_here(out[i], 1.0 - kept_inside)
    return out


#: which earlier views of a track are taken as views of the object picked now (:func:`one_object`)
GUARDS = ("frame", "nearest", "twin", "all")
GUARD = "frame"


def one_object(shots: np.ndarray, views: np.ndarray, others: Sequence[np.ndarray] | np.ndarray | None,
               unit: float, guard: str = GUARD, twin: float = TWIN) -> np.ndarray:
    """Which rows of ``views`` (a track's earlier views, transformed) are views of the object whose
    ``shots`` are taught now, as a boolean mask.

    A tracker may have switched objects on its way (two objects passing each other), so a track's
    earlier view is taken only where it is consistent with the object picked now. ``frame``: no other
    object of the view's own frame (``others[i]``, one array per view) lies nearer the nearest shot
    than the view: an object is in one place, so where the object picked now stood elsewhere in that
    frame the track was on another object then. ``nearest``: the view lies nearer the nearest shot
    than any of ``others`` (one array: the other objects seen at the teach); ``twin``: within ``twin``
    ``unit`` of the nearest shot (the distance within which two objects seen together may both be one
    object); ``all``: every view.
    """
    if guard not in GUARDS:
        raise ValueError(f"guard must be one of {GUARDS}, got {guard!r}")
    v = np.asarray(views, np.float64)
    if guard == "all" or not len(v):
        return np.ones(len(v), bool)
    to_shot = _distances(v, shots).min(axis=1)
    if guard == "twin":
        return to_shot <= float(twin) * float(unit)
    if guard == "nearest":
        rivals = [others] * len(v)
    else:
        if others is None or len(others) != len(v):
            raise ValueError(f"the frame guard needs the other objects of each of the {counted(len(v), 'view')}")
        rivals = list(others)
    keep = np.ones(len(v), bool)
    for i, o in enumerate(rivals):
        if o is None or not len(o):
            continue
        if guard == "frame":  # another object of the view's frame as near a shot, or nearer
            keep[i] = to_shot[i] < _distances(o, shots).min()
        else:  # another object of the teach as near the view, or nearer
            keep[i] = to_shot[i] < _distances(v[i:i + 1], o).min()
    return keep


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sqrt(sq_distances(a, b))


def _not_here(p, factor: float):
    """``p`` answered unknown, its class's score scaled by ``factor`` (< 0.5)."""
    scores = tuple(s * factor if lab == p.label else s for lab, s in zip(p.top_labels, p.top_scores))
    return dataclasses.replace(p, label="", known=False, confidence=p.confidence * factor, top_scores=scores)
