"""Issue 20: the open-set gate's negatives store (bounded, vectors only) and the one-shot confidence.

Synthetic Gaussians: a taught class with a look-alike nearby that is never taught.  Negatives of the
look-alike tighten the taught class's radius so that *new* draws of the look-alike are answered
unknown, while new draws of the taught class stay known; the store stays within its capacity, is
saved and loaded with the learner, and a one-shot teach gives confidences that are not uniform.
"""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.core.calibration import prior_temperature
from cbcl_pr_ros.core.negatives import MAX_OFFERED, NegativeStore, class_radii
from cbcl_pr_ros.core.persistence import CorruptMemoryFileError, LearnerState, state_from_bytes, state_to_bytes

DIM = 32


def _scene(seed: int = 0):
    """Centres of a taught class, a look-alike near it and a far class; a draw function."""
    rng = np.random.default_rng(seed)
    taught = rng.normal(0.0, 1.0, DIM)
    alike = taught + rng.normal(0.0, 1.0, DIM) * 3.0 / np.sqrt(DIM)  # about 3 away: inside 1.3 D
    far = rng.normal(0.0, 1.0, DIM) * 4.0

    def draw(c, n):
        return (c + rng.normal(0.0, 1.0 / np.sqrt(DIM), (n, DIM)) * 1.5).astype(np.float32)

    return rng, taught, alike, far, draw


def _learner(**cfg):
    cfg.setdefault("transform", "none")
    return CBCLPRLearner(LearnerConfig(distance_threshold=3.0, **cfg), backbone="synthetic", feature_dim=DIM)


def test_negatives_of_a_look_alike_tighten_only_its_neighbour():
    rng, taught, alike, far, draw = _scene()
    learner = _learner(negative_quantile=0.05, negative_margin=0.9)
    # six shots that spread as several views do (a radius of its own needs them: RADIUS_MIN_EXTENT)
    learner.teach_increment({"taught": draw(taught, 6), "far": draw(far, 3)})
    before = learner.predict(draw(alike, 200), top_k=1)
    assert np.mean([p.known for p in before]) > 0.5  # the global radius (1.3 * 3.0) takes the look-alike in
    version = learner.model_version_
    assert learner.add_negatives(draw(alike, 60)) == 60
    assert learner.model_version_ == version + 1
    radii = learner._served.gate.class_radii
    k_taught, k_far = learner.classes_.index("taught"), learner.classes_.index("far")
    assert radii[k_taught] < learner._served.gate.radius
    assert radii[k_far] == pytest.approx(learner._served.gate.radius)  # nothing seen near it
    after_alike = learner.predict(draw(alike, 200), top_k=1)  # new draws, not the stored ones
    after_taught = learner.predict(draw(taught, 200), top_k=1)
    assert np.mean([not p.known for p in after_alike]) >= 0.9
    assert np.mean([p.known and p.label == "taught" for p in after_taught]) >= 0.9


def test_one_negative_already_bounds_a_class_and_bad_input_is_refused():
    rng, taught, alike, far, draw = _scene(1)
    learner = _learner()
    shots = draw(taught, 2)
    learner.teach_increment({"taught": shots})
    other = draw(alike, 1)
    assert learner.predict(other)[0].known  # inside the global radius before
    assert learner.add_negatives(other) == 1
    assert not learner.predict(other)[0].known  # the very thing seen beside it is not it
    assert all(p.known and p.label == "taught" for p in learner.predict(shots))
    state = learner.negatives_
    for bad in (np.full((2, DIM), np.nan), np.zeros((2, DIM + 1)), "x", np.zeros((0, DIM)),
                np.full((1, DIM), 1e6), np.zeros((MAX_OFFERED + 1, DIM))):
        with pytest.raises((ValueError, TypeError)):
            learner.add_negatives(bad)
    assert learner.negatives_ is state


def test_copies_of_one_object_count_once():
    rng, taught, alike, far, draw = _scene(7)
    learner = _learner()
    learner.teach_increment({"taught": draw(taught, 2)})
    one = draw(alike, 1)
    copies = one + rng.normal(0.0, 1e-3, (40, DIM)).astype(np.float32)  # one still object, 40 frames
    assert learner.add_negatives(copies) == 1
    assert learner.add_negatives(copies[:5]) == 1 and learner.negatives_.offered == 1
    assert learner.add_negatives(draw(far, 3)) == 4  # other objects are kept


def test_a_crowded_frame_is_kept_within_capacity():
    rng, taught, alike, far, draw = _scene(8)
    learner = _learner(negatives_capacity=32)
    learner.teach_increment({"taught": draw(taught, 2)})
    others = rng.normal(0.0, 1.0, (50, DIM)).astype(np.float32) * 4.0  # 50 other objects
    assert learner.add_negatives(others) == 32 and learner.negatives_.offered == 50
    assert all(p.known and p.label == "taught" for p in learner.predict(draw(taught, 20)))


def test_the_taught_object_as_a_negative_never_makes_its_class_unteachable():
    """The person's hand moved the object: it shows up among the other objects of its own teach."""
    rng, taught, alike, far, draw = _scene(9)
    learner = _learner()
    shots = draw(taught, 2)
    learner.teach_increment({"taught": shots})
    itself = shots + rng.normal(0.0, 0.05, shots.shape).astype(np.float32)
    assert learner.add_negatives(itself, away_from=shots) == 0  # dropped: the object itself
    assert learner.add_negatives(itself) == 0  # near a taught centroid: dropped without away_from too
    assert np.mean([p.known for p in learner.predict(draw(taught, 100))]) >= 0.9
    # a negative just beyond the rule's reach narrows the class, it does not empty it
    beside = shots[:1] + 0.6 * 3.0 * np.eye(DIM, dtype=np.float32)[:1]
    assert learner.add_negatives(beside) == 1
    assert learner._served.gate.class_radii[0] >= 0.5 * 3.0 - 1e-9
    assert all(p.known and p.label == "taught" for p in learner.predict(shots))


def test_an_unknown_answer_is_never_sure():
    rng, taught, alike, far, draw = _scene(10)
    learner = _learner()
    learner.teach_increment({"taught": draw(taught, 2)})  # one class: its softmax is 1 everywhere
    stranger = learner.predict(draw(far, 20))
    assert not any(p.known for p in stranger)
    assert max(p.confidence for p in stranger) < 0.5
    own = learner.predict(draw(taught, 20))
    assert all(p.known for p in own) and min(p.confidence for p in own) > 0.5


def test_store_is_a_bounded_uniform_sample():
    store = NegativeStore.empty(4, capacity=50)
    for i in range(40):
        store = store.with_added(np.full((10, 4), float(i)), seed=3)
    assert len(store) == 50 and store.offered == 400 and store.vectors.dtype == np.float16
    # every batch had the same chance: early and late batches are both present
    kept = store.vectors[:, 0]
    assert kept.min() < 10 and kept.max() >= 30
    assert len(NegativeStore.empty(4, 0).with_added(np.ones((5, 4)), 0)) == 0  # capacity 0 keeps nothing


def test_teaching_drops_negatives_of_the_very_object():
    rng, taught, alike, far, draw = _scene(2)
    learner = _learner()
    learner.teach_increment({"far": draw(far, 2)})
    seen_first = draw(taught, 30)  # the object, seen (as a negative) before it is taught
    learner.add_negatives(np.concatenate([seen_first, draw(alike, 30)]))
    learner.teach_increment({"taught": seen_first[:3]})
    held = learner.negatives_.vectors.astype(np.float64)
    assert len(held) < 60
    assert np.linalg.norm(held[:, None] - seen_first[:3][None], axis=2).min() >= 0.5 * 3.0


def test_class_radii_are_a_quantile_capped_by_the_global_radius():
    store = NegativeStore(np.arange(1, 101, dtype=np.float16)[:, None], 100, 100)
    cents = (np.zeros((1, 1)), np.array([[1000.0]]))
    r = class_radii(cents, store, base=50.0, quantile=0.1, margin=0.5, min_count=20)
    assert r[0] == pytest.approx(0.5 * np.quantile(np.arange(1, 101), 0.1))
    assert r[1] == 50.0  # 0.5 * (1000 - 90) is beyond the cap


def test_negatives_survive_save_and_load_and_are_range_checked(tmp_path):
    rng, taught, alike, far, draw = _scene(3)
    learner = _learner()
    learner.teach_increment({"taught": draw(taught, 2), "far": draw(far, 2)})
    learner.add_negatives(draw(alike, 40))
    back = CBCLPRLearner.load(learner.save(tmp_path / "m.cbcl"))
    assert np.array_equal(back.negatives_.vectors, learner.negatives_.vectors)
    assert back.negatives_.offered == 40
    np.testing.assert_allclose(back._served.gate.class_radii, learner._served.gate.class_radii)
    x = draw(alike, 20)
    assert [p.known for p in back.predict(x)] == [p.known for p in learner.predict(x)]
    # a file whose store exceeds its configured capacity is refused
    state = learner.to_state()
    big = LearnerState(**{**state.__dict__, "config": {**state.config, "negatives_capacity": 10}})
    with pytest.raises(CorruptMemoryFileError, match="negatives"):
        state_from_bytes(state_to_bytes(big))
    for field, value in (("negatives_capacity", -1), ("negative_quantile", 1.5), ("negative_margin", 0.0)):
        bad = LearnerState(**{**state.__dict__, "config": {**state.config, field: value}})
        with pytest.raises(CorruptMemoryFileError, match=field):
            state_from_bytes(state_to_bytes(bad))
        with pytest.raises(ValueError):
            LearnerConfig(**{field: value})


def test_one_shot_confidence_is_not_uniform():
    """Before issue 20 the one-shot head used T = 1 on logits of -d^2/2, about 1/C for every answer."""
    rng, taught, alike, far, draw = _scene(4)
    learner = CBCLPRLearner(LearnerConfig(), backbone="synthetic", feature_dim=DIM)
    centres = [rng.normal(0.0, 1.0, DIM) + 2.0 for _ in range(8)]
    learner.teach_increment({f"c{i}": draw(c, 1) for i, c in enumerate(centres)})
    assert learner.temperature_ < 1.0 and learner.temperature_weight_ == 0.0
    conf = np.array([p.confidence for c in centres for p in learner.predict(draw(c, 10))])
    assert conf.mean() > 0.5  # near-uniform would be 1/8
    assert prior_temperature(np.eye(3) * 2.0, 1.0, 0.5) == pytest.approx(0.5 / (2 * 4.0))


def test_class_radii_by_rank_are_the_kth_nearest_negative():
    store = NegativeStore(np.arange(1, 101, dtype=np.float16)[:, None], 100, 100)
    cents = (np.zeros((1, 1)), np.array([[1000.0]]))
    r = class_radii(cents, store, base=50.0, quantile=0.1, margin=0.5, min_count=20, rank=4)
    assert r[0] == pytest.approx(0.5 * 4.0)  # the 4th nearest of 1..100
    assert r[1] == 50.0
    few = NegativeStore(np.arange(1, 31, dtype=np.float16)[:, None], 30, 30)
    assert class_radii(cents[:1], few, 50.0, 0.1, 1.0, min_count=20, rank=40)[0] == pytest.approx(30.0)


def test_far_negatives_loosen_a_quantile_radius_but_not_a_rank_radius():
    """A robot's store grows: negatives of other tables, far from a class, join the near ones.  The
    quantile rule then takes a farther negative as its radius; the rank rule keeps the nearest ones'."""
    rng, taught, alike, far, draw = _scene(5)
    near, distant = draw(alike, 30), draw(far, 330)
    radii = {}
    for rank in (0, 3):
        learner = _learner(negative_rank=rank, negatives_capacity=512, negative_quantile=0.1, negative_margin=0.95)
        learner.teach_increment({"taught": draw(taught, 2)})
        learner.add_negatives(near)
        before = float(learner._served.gate.class_radii[0])
        learner.add_negatives(distant)
        radii[rank] = (before, float(learner._served.gate.class_radii[0]))
    base = learner._served.gate.radius
    assert radii[0][0] < base and radii[0][1] == pytest.approx(base)  # the quantile loosened to the cap
    assert radii[3][1] == pytest.approx(radii[3][0])  # the rank rule did not move
    assert radii[3][0] < 0.9 * base


def test_negative_rank_is_saved_range_checked_and_absent_in_older_files(tmp_path):
    rng, taught, alike, far, draw = _scene(6)
    learner = _learner(negative_rank=5)
    learner.teach_increment({"taught": draw(taught, 2)})
    learner.add_negatives(draw(alike, 40))
    back = CBCLPRLearner.load(learner.save(tmp_path / "m.cbcl"))
    assert back.config.negative_rank == 5
    np.testing.assert_allclose(back._served.gate.class_radii, learner._served.gate.class_radii)
    state = learner.to_state()
    for value in (-1, 5000, 1.5):
        bad = LearnerState(**{**state.__dict__, "config": {**state.config, "negative_rank": value}})
        with pytest.raises(CorruptMemoryFileError, match="negative_rank"):
            state_from_bytes(state_to_bytes(bad))
    with pytest.raises(ValueError):
        LearnerConfig(negative_rank=-1)
    # a file written before negative_rank existed loads with the quantile rule it was saved with
    old = LearnerState(**{**state.__dict__, "config": {k: v for k, v in state.config.items() if k != "negative_rank"}})
    assert CBCLPRLearner.from_state(state_from_bytes(state_to_bytes(old))).config.negative_rank == 0


def test_a_veto_that_grows_with_the_count_loosens_as_more_negatives_are_seen(monkeypatch):
    """With a growth (``VETO_GROWTH`` > 0; none is shipped, docs/core.md) the veto's ratio rises with
    the count of negatives (``veto_ratio``): a thing halfway between a class and the one negative seen
    beside it is unknown, and is the class's once the robot has seen many other things elsewhere."""
    import cbcl_pr_ros.core.negatives as negatives

    assert negatives.veto_ratio(1) == negatives.veto_ratio(500) == negatives.VETO  # shipped: no growth
    monkeypatch.setattr(negatives, "VETO", 0.97)
    monkeypatch.setattr(negatives, "VETO_GROWTH", 0.03)
    veto_ratio = negatives.veto_ratio
    assert veto_ratio(1) == pytest.approx(0.97) and veto_ratio(0) == veto_ratio(1)
    assert veto_ratio(5) < veto_ratio(30) < veto_ratio(128) < 1.2
    rng, taught, alike, far, draw = _scene(11)
    learner = _learner()
    shot = draw(taught, 1)
    learner.teach_increment({"taught": shot})
    beside = shot + 0.8 * 3.0 * np.eye(DIM, dtype=np.float32)[:1]
    halfway = (shot + beside) / 2 + 0.01 * 3.0 * np.eye(DIM, dtype=np.float32)[1:2]
    learner.add_negatives(beside)
    assert learner._served.gate.veto == pytest.approx(veto_ratio(1))
    assert not learner.predict(halfway)[0].known
    learner.add_negatives(draw(far, 40) + rng.normal(0.0, 3.0, (40, DIM)).astype(np.float32))
    assert learner._served.gate.veto == pytest.approx(veto_ratio(len(learner.negatives_)))
    assert learner.predict(halfway)[0].known and learner.predict(halfway)[0].label == "taught"
    assert not learner.predict(beside)[0].known  # the negative itself stays outside


def test_only_a_class_taught_from_several_views_gets_a_radius_of_its_own():
    """One shot, or jittered copies of one view, keep the global radius however many negatives are
    stored (a single view's other views lie as far from it as the look-alikes do); a class whose
    shots reach ``RADIUS_MIN_EXTENT`` D apart gets the negatives' quantile radius; the veto bounds
    both from the first negative."""
    from cbcl_pr_ros.core.negatives import RADIUS_MIN_EXTENT, RADIUS_MIN_NEGATIVES
    from cbcl_pr_ros.core.open_set import class_extents

    rng, taught, alike, far, draw = _scene(3)
    learner = _learner(negative_quantile=0.05, negative_margin=0.9)
    shot = draw(taught, 1)
    copies = shot + rng.normal(0.0, 0.01, (5, DIM)).astype(np.float32)  # one view, jittered
    views = draw(far, 8)
    learner.teach_increment({"one_shot": shot, "copies": copies + 6.0, "views": views})
    extents = class_extents(learner._memory) / learner._served.gate.distance_threshold
    k = {c: learner.classes_.index(c) for c in ("one_shot", "copies", "views")}
    assert extents[k["one_shot"]] == 0.0
    assert extents[k["copies"]] < RADIUS_MIN_EXTENT <= extents[k["views"]]

    def look_alikes(centre, n):  # other things about 3 (one D) from a class
        u = rng.normal(0.0, 1.0, (n, DIM))
        return (centre + 3.0 * u / np.linalg.norm(u, axis=1, keepdims=True)).astype(np.float32)

    negs = np.concatenate([look_alikes(shot[0], 20), look_alikes(copies.mean(0) + 6.0, 20),
                           look_alikes(views.mean(0), 20)])
    learner.add_negatives(negs)
    assert len(learner.negatives_) >= RADIUS_MIN_NEGATIVES
    gate = learner._served.gate
    assert gate.class_radii[k["one_shot"]] == pytest.approx(gate.radius)
    assert gate.class_radii[k["copies"]] == pytest.approx(gate.radius)
    assert gate.class_radii[k["views"]] < gate.radius
    # the veto still bounds the one-view classes: a stored negative is never given their name
    stored = learner.negatives_.vectors.astype(np.float32)
    assert not any(p.known for p in learner.predict(stored, top_k=1))


def test_two_shots_reach_half_their_distance_and_a_wrong_flag_list_is_refused():
    from cbcl_pr_ros.core.open_set import class_extents

    learner = _learner()
    a = np.zeros((2, DIM), np.float32)
    a[1, 0] = 2.0  # two shots 2 apart: each is 1 from their mean
    learner.teach_increment({"a": a, "b": np.full((1, DIM), 9.0, np.float32)})
    assert class_extents(learner._memory).tolist() == pytest.approx([1.0, 0.0], abs=1e-3)  # float16 scatters
    store = NegativeStore(np.arange(1, 41, dtype=np.float16)[:, None], 40, 40)
    cents = (np.zeros((1, 1)), np.array([[100.0]]))
    both = class_radii(cents, store, 50.0, 0.1, 1.0, min_count=20, several_views=np.array([True, True]))
    first = class_radii(cents, store, 50.0, 0.1, 1.0, min_count=20, several_views=np.array([False, True]))
    assert both[0] < 50.0 and first[0] == 50.0 and first[1] == both[1]
    for bad in (np.array([True]), np.array([1, 0]), np.array([[True, False]])):
        with pytest.raises(ValueError, match="several_views"):
            class_radii(cents, store, 50.0, 0.1, 1.0, min_count=20, several_views=bad)
