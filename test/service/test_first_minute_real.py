"""The first minute of a new user, on a real RGB-D frame sequence: one object taught from its box in
one frame, the other objects of the later frames stay unknown; a second one taught; then both named.

The sequence is the robot head camera's view of one table (the real set's ``ucn`` frames 0-3: two
arrangements of the same ten objects, two views of each). Each labelled box is cropped as the
extractor crops the proposal matching it (depth proposals, the object's mask, neutral colour
outside it: ``bench_real.MaskedCrops``), and its vector is the shipped EfficientNet-Lite0's. The
ROS-free path of the learner node drives it: ``LearnerController.teach`` with the teaching frame's
other objects as negatives (what the teach service hands it), then ``LearnerController.classify``.
The ROS version with the simulated table is ``test/nodes/test_first_minute.py``.

The frames themselves are not committed (no source licence allows it); the tests run where they
were assembled (bench/real_rgbd/assemble.py -> data/real_rgbd, ../shared/real_rgbd or
$CBCL_REAL_RGBD) and are skipped, saying so, elsewhere.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
LABELS = ROOT / "bench/real_rgbd/labels.json"
SEQUENCE = ("ucn_0", "ucn_1", "ucn_2", "ucn_3")
FIRST, SECOND = "mustard", "drill"  # the first two objects of the first frame's labels seen in every frame
# of the later frames' other objects, at least this share answers unknown (below 0.5): the issue's
# never-taught target; measured 25 of 26 after the first teach and 14 of 15 after the second
UNKNOWN_SHARE = 0.9

pytestmark = pytest.mark.slow


def _frames_dir() -> Path | None:
    for cand in (os.environ.get("CBCL_REAL_RGBD", ""), ROOT / "data/real_rgbd", ROOT.parent / "shared/real_rgbd"):
        if cand and all((Path(cand) / f"{i}-color.png").is_file() for i in SEQUENCE):
            return Path(cand)
    return None


@pytest.fixture(scope="module")
def sequence() -> list[tuple[str, list[str], np.ndarray]]:
    """(frame id, object names, (n, 1280) vectors of the objects' masked crops) per frame, in order."""
    where = _frames_dir()
    if where is None:
        pytest.skip("real frames not assembled here (bench/real_rgbd/assemble.py needs the sources' git snapshots)")
    from bench_real import MaskedCrops  # bench/ (pytest.ini)
    from real_rgbd_set import load_frames

    from cbcl_pr_ros.features import make_backbone

    backbone = make_backbone("efficientnet_lite0", runtime="onnx", threads=2)
    crops = MaskedCrops()
    frames = {f.id: f for f in load_frames(LABELS, where, SEQUENCE)}
    out = []
    for fid in SEQUENCE:
        fr = frames[fid]
        vecs = np.asarray(backbone.extract(crops(fr, [b for _, b in fr.objects])), np.float32)
        out.append((fid, [n for n, _ in fr.objects], vecs))
    return out


def _controller():
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.service.controller import LearnerController

    return LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), backbone="efficientnet_lite0",
                                                     feature_dim=d), "efficientnet_lite0", 1280)


def _teach(controller, frame: tuple[str, list[str], np.ndarray], name: str) -> None:
    """``name`` taught from its one box in ``frame``; the frame's other objects are the negatives."""
    _, names, vecs = frame
    k = names.index(name)
    out = controller.teach(name, vecs[k:k + 1], source="object crops", negatives=np.delete(vecs, k, axis=0))
    assert out.success, out.message


def _answers(controller, frames) -> tuple[dict[str, list], list]:
    """Per taught name its answers in ``frames``; and the answers to every other object."""
    taught, others = {c: [] for c in controller.learner_.classes_}, []
    for fid, names, vecs in frames:
        out = controller.classify(vecs, top_k=1)
        assert out.success, out.message
        for name, p in zip(names, out.predictions):
            (taught[name] if name in taught else others).append((fid, name, p))
    return taught, others


def _unknown_share(others: list) -> float:
    return float(np.mean([not p.known and p.label == "" and p.confidence < 0.5 for _, _, p in others]))


def test_the_first_minute_on_a_real_table(sequence) -> None:
    c = _controller()
    _teach(c, sequence[0], FIRST)
    taught, others = _answers(c, sequence[1:])
    assert len(taught[FIRST]) == 3 and len(others) >= 20
    assert all(p.known and p.label == FIRST for _, _, p in taught[FIRST]), taught[FIRST]
    assert _unknown_share(others) >= UNKNOWN_SHARE, [(f, n, p.label, round(p.confidence, 2)) for f, n, p in others
                                                     if p.known or p.confidence >= 0.5]
    assert all(p.confidence < 0.5 for _, _, p in others if not p.known)  # an unknown answer is never sure
    _teach(c, sequence[1], SECOND)
    taught, others = _answers(c, sequence[2:])
    for name in (FIRST, SECOND):
        assert len(taught[name]) == 2
        assert all(p.known and p.label == name for _, _, p in taught[name]), (name, taught[name])
    assert _unknown_share(others) >= UNKNOWN_SHARE, [(f, n, p.label, round(p.confidence, 2)) for f, n, p in others
                                                     if p.known or p.confidence >= 0.5]


def test_any_first_object_leaves_the_others_unknown(sequence) -> None:
    """Whichever object of the first frame seen in every frame is taught first: the rule, not one pick."""
    everywhere = sorted(set.intersection(*(set(names) for _, names, _ in sequence)))
    assert len(everywhere) >= 8
    shares = {}
    for name in everywhere:
        c = _controller()
        _teach(c, sequence[0], name)
        taught, others = _answers(c, sequence[1:])
        assert sum(p.known and p.label == name for _, _, p in taught[name]) >= 2, (name, taught[name])
        shares[name] = _unknown_share(others)
    assert min(shares.values()) >= UNKNOWN_SHARE, shares
