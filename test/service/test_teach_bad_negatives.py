"""Bad negatives with a teach, on the learner node's ROS-free path (``LearnerController.teach``): a
teaching frame with 50 other objects, negatives that are all copies of one vector, a negative that is
the taught object itself (the person's hand moved it), NaN or huge vectors. Each either is refused
clearly and changes nothing, or follows the documented rule; nothing is taught wrongly, nothing lost.
"""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.service.controller import LearnerController

D = 32


def _controller() -> LearnerController:
    return LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), backbone="synthetic", feature_dim=d),
                             "synthetic", D)


def _draws(rng, centre: np.ndarray, n: int, spread: float = 0.05) -> np.ndarray:
    return np.abs(centre + rng.normal(0.0, spread, (n, D))).astype(np.float32)


def _objects(rng, n: int) -> np.ndarray:
    """``n`` distinct objects: non-negative like pooled CNN features, far apart after the transform."""
    return np.abs(rng.normal(0.0, 1.0, (n, D))).astype(np.float32) ** 3


def test_a_frame_of_fifty_other_objects_keeps_them_all_unknown():
    rng = np.random.default_rng(0)
    c = _controller()
    mug, others = _objects(rng, 1)[0], _objects(rng, 50)
    out = c.teach("mug", _draws(rng, mug, 1), negatives=others)
    assert out.success, out.message
    assert len(c.learner_.negatives_) == 50  # within the store's capacity: every one kept
    assert not any(p.known for p in c.learner_.predict(others, top_k=1))
    views = c.learner_.predict(_draws(rng, mug, 20), top_k=1)
    assert all(p.known and p.label == "mug" for p in views)


def test_copies_of_one_vector_count_once_and_teach_nothing_wrong():
    rng = np.random.default_rng(1)
    c = _controller()
    mug, duck = _objects(rng, 2)
    copies = np.repeat(duck[None], 40, axis=0)  # one still object in 40 frames
    assert c.teach("mug", _draws(rng, mug, 2), negatives=copies).success
    assert len(c.learner_.negatives_) == 1 and c.learner_.negatives_.offered == 1
    assert not c.learner_.predict(duck[None], top_k=1)[0].known
    assert all(p.known and p.label == "mug" for p in c.learner_.predict(_draws(rng, mug, 10), top_k=1))


def test_the_taught_object_among_its_own_negatives_is_dropped():
    """The hand moved the mug: a view of it shows up among the other objects of its own teach."""
    rng = np.random.default_rng(2)
    c = _controller()
    mug, duck = _objects(rng, 2)
    shots = _draws(rng, mug, 2)
    itself = shots[[0, 1, 0]] + rng.normal(0.0, 1e-3, (3, D)).astype(np.float32)
    assert c.teach("mug", shots, negatives=np.vstack([itself, duck[None]])).success
    assert len(c.learner_.negatives_) == 1  # the duck; the mug's own views were no negatives
    assert all(p.known and p.label == "mug" for p in c.learner_.predict(_draws(rng, mug, 20), top_k=1))
    assert not c.learner_.predict(duck[None], top_k=1)[0].known


@pytest.mark.parametrize("bad", ["nan", "inf", "huge"])
def test_nan_or_huge_negatives_refuse_the_teach_and_change_nothing(bad):
    rng = np.random.default_rng(3)
    c = _controller()
    mug, duck, can = _objects(rng, 3)
    assert c.teach("mug", _draws(rng, mug, 2), negatives=duck[None]).success
    learner = c.learner_
    before = (learner.classes_, learner.negatives_, learner.model_version_)
    negatives = np.vstack([can[None], duck[None]]).astype(np.float32)
    negatives[0, 3] = {"nan": np.nan, "inf": np.inf, "huge": 1e30}[bad]
    out = c.teach("can", _draws(rng, can, 2), negatives=negatives)
    assert not out.success and "negatives" in out.message
    assert c.learner_ is learner and learner.negatives_ is before[1]
    assert (learner.classes_, learner.model_version_) == (before[0], before[2])
    assert all(p.known and p.label == "mug" for p in c.learner_.predict(_draws(rng, mug, 5), top_k=1))
    # the same teach with sound negatives is learned
    assert c.teach("can", _draws(rng, can, 2), negatives=negatives[1:]).success
    assert set(c.learner_.classes_) == {"mug", "can"}
