"""The extractor's learned object proposals: the weights the package ships, one frame through a segmenter
(class-agnostic objects, the same on every run), the geometry's fallback where the depth is missing or
too sparse for the network, and the values of ``object_proposals`` refused.

Besides the shipped weights, the path is tested with a segmenter whose answer is known (the protrusion
network of test/support/known_segmenter.py, written to a file and loaded as ``segmenter_weights``), so
that what it checks does not hang on what one training run learned."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from extractor_table import MeanColourBackbone, two_objects
from known_segmenter import protrusion_weights
from safetensors.numpy import save_file

import cbcl_pr_ros.objects.extract as extract_mod
from cbcl_pr_ros.objects import ExtractSettings, ObjectReuse, extract_objects
from cbcl_pr_ros.objects.extract import PROPOSAL_METHODS, proposal_segmenter
from cbcl_pr_ros.perception.proposals import propose
from cbcl_pr_ros.perception.segmenter import SHIPPED_LOG, SHIPPED_WEIGHTS, Segmenter, layer_shapes, load_segmenter, \
    propose_hybrid, propose_learned
from cbcl_pr_ros.settings.params import PARAMS, validate_parameter

REPO = Path(__file__).resolve().parents[2]
#: the size docs/perception.md gives for the shipped weights
SHIPPED_BYTES = 308_424


@pytest.fixture(scope="module")
def shipped() -> Segmenter:
    return load_segmenter()


@pytest.fixture(scope="module")
def known(tmp_path_factory) -> Segmenter:
    """A segmenter that calls "inside" what stands out of its surroundings, loaded as the extractor would."""
    path = tmp_path_factory.mktemp("weights") / "protrusion.safetensors"
    save_file(protrusion_weights(), str(path))
    return proposal_segmenter("learned", str(path))


def _same(a: list, b: list) -> bool:
    return [p.box for p in a] == [p.box for p in b] and [p.score for p in a] == [p.score for p in b] \
        and all(np.array_equal(x.mask, y.mask) for x, y in zip(a, b)) \
        and all(np.array_equal(x.centroid, y.centroid, equal_nan=True) for x, y in zip(a, b))


def _iou(mask: np.ndarray, box: tuple[int, int, int, int]) -> float:
    x0, y0, x1, y1 = box
    inter = int(mask[y0:y1, x0:x1].sum())
    return inter / (int(mask.sum()) + (x1 - x0) * (y1 - y0) - inter)


def _box_iou(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    inter = max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_the_shipped_weights_load_through_our_loader_and_are_those_of_their_log(shipped):
    assert set(shipped.weights) == set(layer_shapes())
    assert SHIPPED_WEIGHTS.stat().st_size == SHIPPED_BYTES
    assert f"{SHIPPED_BYTES:,}" in (REPO / "docs" / "perception.md").read_text()
    log = json.loads(SHIPPED_LOG.read_text())
    assert log["weights_bytes"] == SHIPPED_BYTES
    assert log["weights_sha256"] == hashlib.sha256(SHIPPED_WEIGHTS.read_bytes()).hexdigest()
    assert log["parameters"] == sum(int(v.size) for v in shipped.weights.values())
    assert log["args"]["steps"] == len(log["loss"]) * 100  # the whole run, its loss every 100 steps
    assert proposal_segmenter("learned").weights.keys() == shipped.weights.keys()
    # and they find the objects of a rendered table
    rgb, depth, k = two_objects()
    props = propose_learned(shipped, rgb, depth, k)
    assert len(props) == 2 and all(p.has_depth for p in props)
    left, right = sorted(props, key=lambda p: p.box[0])
    assert _iou(left.mask, (100, 250, 220, 370)) > 0.7 and _iou(right.mask, (380, 260, 500, 380)) > 0.7


def test_a_frame_gives_the_networks_objects_the_same_on_every_run(known, monkeypatch):
    rgb, depth, k = two_objects()
    settings = ExtractSettings(reuse_still_crops=False, segmenter=known, referee=False)
    bb = MeanColourBackbone()
    first = extract_objects(rgb, depth, k, None, bb, ObjectReuse(), settings)
    props = first.objects.proposals
    assert _same(props, propose_learned(known, rgb, depth, k)[:settings.max_objects])
    # class-agnostic objects: one per box on the table, in 3D, each through the one backbone batch
    assert len(props) == 2 and all(p.has_depth for p in props) and bb.batches == [3]
    left, right = sorted(props, key=lambda p: p.box[0])
    assert _box_iou(left.box, (100, 250, 220, 370)) > 0.8 and _box_iou(right.box, (380, 260, 500, 380)) > 0.8
    calls = []
    monkeypatch.setattr(extract_mod, "propose", lambda *a, **kw: calls.append(a) or [])
    for _ in range(20):
        again = extract_objects(rgb, depth, k, None, bb, ObjectReuse(), settings)
        assert _same(again.objects.proposals, props)
        np.testing.assert_array_equal(again.objects.features, first.objects.features)
    assert calls == []  # the geometry was never asked


def test_hybrid_gives_the_refereed_proposals_the_same_on_every_run(known):
    rgb, depth, k = two_objects()
    settings = ExtractSettings(reuse_still_crops=False, segmenter=known, referee=True)
    first = extract_objects(rgb, depth, k, None, MeanColourBackbone(), ObjectReuse(), settings).objects.proposals
    assert len(first) == 2 and all(p.has_depth for p in first)
    assert _same(first, propose_hybrid(known, rgb, depth, k)[:settings.max_objects])
    for _ in range(20):
        again = extract_objects(rgb, depth, k, None, MeanColourBackbone(), ObjectReuse(), settings)
        assert _same(again.objects.proposals, first)


def test_a_still_picture_keeps_the_learned_proposals_and_not_the_geometrys(known):
    rgb, depth, k = two_objects()
    reuse = ObjectReuse(refresh_frames=100)
    geometry = extract_objects(rgb, depth, k, None, MeanColourBackbone(), reuse,
                               ExtractSettings(segmenter=None)).objects.proposals
    learned = extract_objects(rgb, depth, k, None, MeanColourBackbone(), reuse,
                              ExtractSettings(segmenter=known, referee=False)).objects.proposals
    assert _same(learned, propose_learned(known, rgb, depth, k))
    assert not _same(learned, geometry)


def test_without_depth_the_learned_method_gives_the_geometrys_rgb_proposals(known, monkeypatch):
    rgb, depth, k = two_objects()
    settings = ExtractSettings(reuse_still_crops=False, segmenter=known, referee=False)
    asked = []
    monkeypatch.setattr(extract_mod, "propose_learned", lambda *a, **kw: asked.append(a))
    for d, K in ((None, k), (None, None), (depth, None)):
        out = extract_objects(rgb, d, K, None, MeanColourBackbone(), ObjectReuse(), settings)
        want = extract_objects(rgb, d, K, None, MeanColourBackbone(), ObjectReuse(),
                               ExtractSettings(reuse_still_crops=False, segmenter=None))
        assert out.objects.proposals and _same(out.objects.proposals, want.objects.proposals)
        assert not any(p.has_depth for p in out.objects.proposals)
    assert asked == []


def test_depth_too_sparse_for_the_network_gets_the_geometrys_proposals_of_that_depth(known):
    rgb, depth, k = two_objects()
    read = np.random.default_rng(0).random(depth.shape) < 0.03  # 3 % of the pixels: the network needs 5 %
    sparse = np.where(read, depth, np.nan).astype(depth.dtype)
    assert propose_learned(known, rgb, sparse, k) is None
    out = extract_objects(rgb, sparse, k, None, MeanColourBackbone(), ObjectReuse(),
                          ExtractSettings(reuse_still_crops=False, segmenter=known, referee=False))
    assert out.depth_note == ""
    assert _same(out.objects.proposals, propose(rgb, sparse, k)[:16])


def test_object_proposals_takes_depth_learned_or_hybrid_and_refuses_anything_else(tmp_path):
    spec = next(p for p in PARAMS if p.name == "object_proposals")
    assert spec.default == "hybrid" and spec.choices == PROPOSAL_METHODS and spec.read_only
    assert validate_parameter("object_proposals", "learned") is None
    assert validate_parameter("object_proposals", "hybrid") is None
    assert "object_proposals" in validate_parameter("object_proposals", "geometry")
    assert proposal_segmenter("depth") is None and proposal_segmenter("depth", "/nowhere") is None
    assert proposal_segmenter("hybrid").weights.keys() == proposal_segmenter("learned").weights.keys()
    with pytest.raises(ValueError, match="object_proposals must be one of depth, learned, hybrid"):
        proposal_segmenter("network")
    garbage = tmp_path / "seg.safetensors"
    garbage.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a header at all")
    for path, why in ((tmp_path / "none.safetensors", "no such file"), (garbage, "not a safetensors file")):
        with pytest.raises(ValueError, match=why) as err:
            proposal_segmenter("learned", str(path))
        assert "\n" not in str(err.value) and str(err.value).startswith("object_proposals learned")
    with pytest.raises(TypeError):
        ExtractSettings(segmenter="learned")


def test_the_librarys_default_settings_are_the_extractors_hybrid_with_the_shipped_weights():
    from cbcl_pr_ros.objects.extract import shipped_segmenter
    from cbcl_pr_ros.settings.params import PARAMS

    assert next(p for p in PARAMS if p.name == "object_proposals").default == "hybrid"
    settings = ExtractSettings()
    assert settings.referee and settings.segmenter is shipped_segmenter() is ExtractSettings().segmenter
    assert proposal_segmenter("hybrid") is settings.segmenter  # the node's default shares the one loaded
    assert all(np.array_equal(settings.segmenter.weights[k], v) for k, v in load_segmenter().weights.items())
    rgb, depth, k = two_objects()
    props = extract_objects(rgb, depth, k, None, MeanColourBackbone(), ObjectReuse()).objects.proposals
    assert len(props) == 2 and _same(props, propose_hybrid(settings.segmenter, rgb, depth, k)[:settings.max_objects])
    geometry = extract_objects(rgb, depth, k, None, MeanColourBackbone(), ObjectReuse(),
                               ExtractSettings(segmenter=None)).objects.proposals
    assert _same(geometry, propose(rgb, depth, k)[:16])
