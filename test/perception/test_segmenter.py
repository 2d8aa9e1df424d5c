"""The learned proposal segmenter: its weights file, its NumPy forward pass against the torch network it
was trained as, determinism, bad frames, and the rendered training scenes' determinism."""
from __future__ import annotations

import numpy as np
import pytest
from known_segmenter import protrusion_weights as _protrusion_weights
from safetensors.numpy import save_file
from synthetic import SynthObject, scene

from cbcl_pr_ros.perception import Proposal
from cbcl_pr_ros.perception.segmenter import (CHANNELS, DIST_CLIP_PX, OUTPUTS, Segmenter, input_features, instances,
                                              layer_shapes, load_segmenter, propose_learned)


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights of the right shapes, scaled so activations neither vanish nor explode; the head
    leans to "inside" so that a frame gives objects."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in layer_shapes().items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        out[name] = (rng.normal(0, np.sqrt(2.0 / fan_in), shape) if len(shape) > 1 else rng.normal(0, 0.05, shape)).astype(np.float32)
    out["head.bias"] = np.array([0.0, 0.6, -0.6, 0.5], np.float32)
    return out


@pytest.fixture()
def weights_file(tmp_path):
    path = tmp_path / "seg.safetensors"
    save_file(_weights(), str(path))
    return path


def _frame():
    return scene([SynthObject((60, 80, 110, 140), 0.06, (200, 40, 40)), SynthObject((112, 90, 160, 150), 0.05, (40, 40, 200)),
                  SynthObject((200, 60, 240, 120), 0.10, (40, 200, 40))], seed=1)


def test_weights_load_through_our_loader(weights_file):
    seg = load_segmenter(weights_file)
    assert set(seg.weights) == set(layer_shapes())
    for name, shape in layer_shapes().items():
        assert seg.weights[name].shape == shape and seg.weights[name].dtype == np.float32


@pytest.mark.parametrize("change", ["missing", "extra", "shape", "three_outputs", "nan", "garbage"])
def test_a_weights_file_that_is_not_the_segmenters_is_refused(tmp_path, change):
    w = _weights()
    if change == "missing":
        del w["head.bias"]
    elif change == "extra":
        w["spare.weight"] = np.zeros((2, 2), np.float32)
    elif change == "shape":
        w["enc1a.weight"] = np.zeros((3, 3, 3, 3), np.float32)
    elif change == "three_outputs":  # a head without the border distance
        w["head.weight"], w["head.bias"] = w["head.weight"][:3], w["head.bias"][:3]
    elif change == "nan":
        w["dec2b.bias"][0] = np.nan
    path = tmp_path / "bad.safetensors"
    if change == "garbage":
        path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a header at all")
    else:
        save_file(w, str(path))
    with pytest.raises(ValueError):
        load_segmenter(path)


def test_numpy_forward_pass_matches_the_torch_network_it_was_trained_as():
    torch = pytest.importorskip("torch")
    from train_segmenter import folded, make_net

    torch.manual_seed(0)
    net = make_net()
    with torch.no_grad():  # batch norms with statistics of their own, so that folding them matters
        for bn in net.norms.values():
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.1, 0.1)
    net.eval()
    seg = Segmenter(folded(net))
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (len(CHANNELS), 40, 56)).astype(np.float32)
    with torch.no_grad():
        ref = net(torch.from_numpy(x[None]))[0].numpy()
    assert ref.shape == (len(OUTPUTS), 40, 56)
    np.testing.assert_allclose(seg.outputs(x), ref, atol=1e-4)
    # a size that is no multiple of 8 is padded and cropped back
    assert seg.outputs(x[:, :37, :50]).shape == (len(OUTPUTS), 37, 50)


def test_the_same_frame_gives_the_same_proposals_twenty_times(weights_file):
    rgb, depth, K, _ = _frame()
    seg = load_segmenter(weights_file)
    feats = input_features(rgb, depth, K)
    ref = seg.outputs(feats)
    assert all(np.array_equal(seg.outputs(feats), ref) for _ in range(20))
    seg = Segmenter(_protrusion_weights())
    first = propose_learned(seg, rgb, depth, K, plane=False)
    assert first, "the frame should give proposals for this check to mean anything"
    assert all(isinstance(p, Proposal) and p.mask.shape == rgb.shape[:2] for p in first)
    for _ in range(20):
        again = propose_learned(seg, rgb, depth, K, plane=False)
        assert [p.box for p in again] == [p.box for p in first]
        assert [p.score for p in again] == [p.score for p in first]
        assert all(np.array_equal(a.mask, b.mask) for a, b in zip(again, first))
        assert all(np.array_equal(a.centroid, b.centroid) for a, b in zip(again, first))


def test_instances_part_insides_and_give_boundary_pixels_to_them():
    logits = np.zeros((len(OUTPUTS), 20, 30), np.float32)
    logits[0] = 1.0
    logits[1, 5:15, 3:12] = 2.0  # two insides ...
    logits[1, 5:15, 14:25] = 2.0
    logits[2, 4:16, 12:14] = 3.0  # ... with a boundary between them
    lab = instances(logits, core=None)
    assert lab.max() == 2
    assert lab[10, 5] != lab[10, 20] and lab[10, 5] > 0 and lab[10, 20] > 0
    assert (lab[4:16, 12:14] > 0).all()  # the boundary belongs to the objects
    assert lab[0, 0] == 0


def _touching_boxes() -> tuple[np.ndarray, np.ndarray]:
    """Outputs of a network that sees two touching boxes as object everywhere, with no boundary pixel
    between them (what it says at a one-pixel seam), and the true border distance of each box; and the
    two boxes' ids (-1 background)."""
    inst = np.full((24, 40), -1)
    inst[5:19, 4:18] = 0
    inst[5:19, 18:34] = 1
    from train_segmenter import distance_targets

    out = np.zeros((len(OUTPUTS), 24, 40), np.float32)
    out[0] = 3.0
    out[0][inst >= 0] = -3.0
    out[1][inst >= 0] = 2.0
    out[3] = distance_targets(inst)
    return out, inst


def test_border_distance_cores_part_touching_objects_the_classes_merge():
    out, inst = _touching_boxes()
    assert instances(out, core=None).max() == 1  # no boundary seen: the insides are one object
    for core in (0.25, 0.4, 0.55, 0.7):
        lab = instances(out, core=core)
        assert lab.max() == 2, core
        major = []
        for i in (0, 1):  # each box is one object, all of it
            ids, counts = np.unique(lab[inst == i], return_counts=True)
            assert len(ids) == 1 and ids[0] > 0
            major.append(ids[counts.argmax()])
        assert major[0] != major[1]
        assert (lab[inst < 0] == 0).all()


def test_an_object_too_thin_for_a_core_is_kept_and_a_cores_flood_stops_at_the_background():
    out, inst = _touching_boxes()
    out[0, 21:23, 5:30] = -3.0  # a thin strap apart from the boxes: object, but nowhere far from a border
    out[3, 21:23, 5:30] = 0.2
    lab = instances(out, core=0.4)
    assert lab.max() == 3
    strap = np.unique(lab[21:23, 5:30])
    assert len(strap) == 1 and strap[0] > 0 and strap[0] not in np.unique(lab[inst >= 0])


def test_peaks_part_a_small_object_whose_distance_never_reaches_the_core_from_its_large_neighbour():
    from train_segmenter import distance_targets

    inst = np.full((24, 40), -1)
    inst[3:21, 4:22] = 0  # large: its distance reaches 1
    inst[8:16, 22:25] = 1  # three pixels wide against it: its distance peaks at 0.4
    out = np.zeros((len(OUTPUTS), 24, 40), np.float32)
    out[0] = 3.0
    out[0][inst >= 0] = -3.0
    out[3] = distance_targets(inst)
    merged = instances(out, core=0.55)
    assert merged.max() == 1  # no core of its own: the large one's flood takes it
    lab = instances(out, core=0.55, peaks=True)
    assert lab.max() == 2
    assert len(np.unique(lab[inst == 0])) == 1 and np.unique(lab[inst == 1]).tolist() == [2 if lab[10, 10] == 1 else 1]
    assert all(np.array_equal(instances(out, core=0.55, peaks=True), lab) for _ in range(5))


def test_no_core_anywhere_gives_each_object_group_one_object():
    out = np.zeros((len(OUTPUTS), 20, 30), np.float32)
    out[0] = 3.0
    out[0, 2:6, 2:20] = -3.0  # two thin straps, distance nowhere above the core
    out[0, 10:13, 2:20] = -3.0
    out[3] = 0.1
    for peaks in (False, True):
        lab = instances(out, core=0.4, peaks=peaks)
        assert lab.max() == 2 and lab[3, 5] != lab[11, 5] and (lab[out[0] > 0] == 0).all()


def test_instances_are_the_same_twenty_times_and_bounded_by_the_frame():
    out, _ = _touching_boxes()
    rng = np.random.default_rng(0)
    out = out + rng.normal(0, 0.3, out.shape).astype(np.float32)
    first = instances(out)
    assert first.shape == out.shape[1:] and first.dtype.kind == "i"
    assert all(np.array_equal(instances(out), first) for _ in range(20))


def test_distance_targets_measure_to_the_nearest_other_pixel_but_not_to_the_frame_edge():
    from train_segmenter import IGNORE, distance_targets, targets

    inst = np.full((20, 30), -1)
    inst[2:18, 0:12] = 0  # cut by the frame's left edge
    inst[2:18, 12:28] = 1  # touching it
    inst[0, 29] = -2  # too small to learn from
    d = distance_targets(inst)
    assert d.shape == inst.shape and d.dtype == np.float32
    assert (d[inst < 0] == 0).all() and (d[inst >= 0] > 0).all() and d.max() == 1.0
    assert d[10, 11] == d[10, 12] == pytest.approx(1.0 / DIST_CLIP_PX)  # either side of the seam: one pixel
    assert d[10, 0] == 1.0  # the frame's edge is no border
    assert d[2, 5] == pytest.approx(1.0 / DIST_CLIP_PX) and d[4, 5] == pytest.approx(3.0 / DIST_CLIP_PX)
    assert targets(inst)[0, 29] == IGNORE


@pytest.mark.parametrize("bad", ["all_nan", "zeros", "holes_everywhere", "other_aspect", "none"])
def test_bad_depth_gives_no_answer_and_no_crash(weights_file, bad):
    seg = load_segmenter(weights_file)
    rgb, depth, K, _ = _frame()
    if bad == "all_nan":
        depth = np.full_like(depth, np.nan)
    elif bad == "zeros":
        depth = np.zeros_like(depth)
    elif bad == "holes_everywhere":
        depth = depth.copy()
        depth[np.random.default_rng(0).random(depth.shape) < 0.97] = np.nan
    elif bad == "other_aspect":
        depth = depth[:, :100]
    elif bad == "none":
        depth = None
    assert propose_learned(seg, rgb, depth, K) is None


def test_bad_colour_is_refused(weights_file):
    seg = load_segmenter(weights_file)
    rgb, depth, K, _ = _frame()
    with pytest.raises(TypeError):
        propose_learned(seg, rgb.astype(np.float32), depth, K)
    with pytest.raises(ValueError):
        propose_learned(seg, rgb[..., :2], depth, K)
    with pytest.raises(ValueError):
        propose_learned(seg, rgb, depth, K, width=8)
    for core in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError):
            propose_learned(seg, rgb, depth, K, core=core)


def test_input_features_shape_and_no_reading():
    rgb, depth, K, _ = _frame()
    f = input_features(rgb, depth, K)
    assert f.shape == (len(CHANNELS), *depth.shape) and f.dtype == np.float32 and np.isfinite(f).all()
    assert input_features(rgb, np.full_like(depth, np.nan), K) is None


def test_rendered_scenes_are_the_same_whatever_the_order_they_are_made_in(tmp_path):
    pytest.importorskip("pybullet")
    from segmenter_data import H, W, make_scenes

    a = make_scenes(3, seed=5, start=0, texture_dir=tmp_path)
    b = make_scenes(2, seed=5, start=1, texture_dir=tmp_path)
    for k in ("rgb", "inst", "K"):
        np.testing.assert_array_equal(a[k][1:], b[k])
    np.testing.assert_array_equal(np.isnan(a["depth"][1:]), np.isnan(b["depth"]))
    np.testing.assert_array_equal(np.nan_to_num(a["depth"][1:]), np.nan_to_num(b["depth"]))
    assert a["rgb"].shape == (3, H, W, 3) and a["depth"].shape == a["inst"].shape == (3, H, W)
    assert (a["inst"] >= 0).any()
    assert np.isfinite(a["depth"].astype(np.float32)).mean() > 0.3  # a depth camera's holes, not an empty frame


def _prop(shape, box, score=0.5) -> Proposal:
    m = np.zeros(shape, bool)
    x0, y0, x1, y1 = box
    m[y0:y1, x0:x1] = True
    return Proposal(box, m, np.full(3, np.nan), np.full(3, np.nan), score)


def test_combine_splits_merges_joins_pieces_and_adds_misses():
    from cbcl_pr_ros.perception.segmenter import combine

    s = (100, 100)
    merged = _prop(s, (0, 0, 40, 20))  # the geometry joined two touching objects ...
    pieces = [_prop(s, (50, 50, 60, 70)), _prop(s, (60, 50, 70, 70))]  # ... and cut another in two
    kept = _prop(s, (0, 80, 10, 90))
    learned = [_prop(s, (0, 0, 20, 20), 0.9), _prop(s, (20, 0, 40, 20), 0.8),  # the two touching objects
               _prop(s, (50, 50, 70, 70), 0.7),  # the one in pieces, whole
               _prop(s, (85, 5, 95, 15), 0.6),  # one the geometry missed
               _prop(s, (1, 81, 9, 89), 0.6)]  # one the geometry found too
    out = combine([merged, *pieces, kept], learned)
    assert sorted(p.box for p in out) == sorted([(0, 0, 20, 20), (20, 0, 40, 20), (50, 50, 70, 70), (85, 5, 95, 15),
                                                 (0, 80, 10, 90)])
    assert combine([kept], []) == [kept] and combine([], [kept]) == [kept]


def _slanted_table(seed: int = 0) -> np.ndarray:
    """A slanted surface seen from about 0.8 m with 1 mm of reading noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:60, :80]
    z = 0.8 + 0.004 * xx + 0.002 * yy + rng.normal(0, 0.001, (60, 80))
    return z


def _two_pieces(gap: bool = False) -> np.ndarray:
    lab = np.zeros((60, 80), np.int32)
    lab[10:40, 10:30] = 1
    lab[10:40, 30:50] = 2
    if gap:
        lab[:, 30] = 0  # a one-pixel seam nobody claims
    return lab


@pytest.mark.parametrize("gap", [False, True])
def test_two_pieces_of_one_surface_are_joined(gap):
    from cbcl_pr_ros.perception.segmenter import join_pieces

    z = _slanted_table()
    out = join_pieces(_two_pieces(gap), z, 3.0)
    assert np.unique(out).tolist() == [0, 1]
    assert ((out > 0) == (_two_pieces(gap) > 0)).all()  # joined, nothing grown or lost


@pytest.mark.parametrize("seam", ["step", "crease", "holes"])
def test_touching_objects_the_depth_parts_stay_apart(seam):
    from cbcl_pr_ros.perception.segmenter import join_pieces

    z = _slanted_table()
    xx = np.mgrid[:60, :80][1]
    if seam == "step":  # the right one stands 1.5 cm nearer: six times a second difference's noise
        z = np.where(xx >= 30, z - 0.015, z)
    elif seam == "crease":  # the right one turns away at the seam: no step, a bend
        z = np.where(xx >= 30, z + 0.015 * (xx - 29), z)
    else:  # no readings along the seam: a depth edge, no evidence of one surface
        z = z.copy()
        z[:, 29:32] = np.nan
    lab = _two_pieces()
    out = join_pieces(lab, z, 3.0)
    assert np.array_equal(out, lab)


def test_joins_are_transitive_deterministic_and_leave_other_objects_alone():
    from cbcl_pr_ros.perception.segmenter import join_pieces

    z = _slanted_table(1)
    lab = np.zeros((60, 80), np.int32)
    lab[5:25, 5:20], lab[5:25, 20:35], lab[5:25, 35:50] = 3, 1, 4  # three pieces in a row
    lab[40:55, 60:75] = 2  # an object of its own, apart
    first = join_pieces(lab, z, 3.0)
    assert first[10, 6] == first[10, 25] == first[10, 45] == 1 and first[45, 65] == 2 and first.max() == 2
    assert all(np.array_equal(join_pieces(lab, z, 3.0), first) for _ in range(20))
    assert np.array_equal(join_pieces(np.zeros_like(lab), z, 3.0), np.zeros_like(lab))


def test_the_same_frame_gives_the_same_joined_proposals_twenty_times():
    rgb, depth, K, _ = _frame()
    seg = Segmenter(_protrusion_weights())
    first = propose_learned(seg, rgb, depth, K, plane=False, core=None, join=3.0)
    assert first
    for _ in range(20):
        again = propose_learned(seg, rgb, depth, K, plane=False, core=None, join=3.0)
        assert [p.box for p in again] == [p.box for p in first] and [p.score for p in again] == [p.score for p in first]
        assert all(np.array_equal(a.mask, b.mask) for a, b in zip(again, first))
    for join in (0.0, -1.0, float("nan"), 1e9):
        with pytest.raises(ValueError):
            propose_learned(seg, rgb, depth, K, join=join)


def test_a_small_object_inside_a_larger_ones_box_is_given_to_it_and_others_are_not():
    from cbcl_pr_ros.perception.segmenter import fold_inner

    lab = np.zeros((60, 80), np.int32)
    lab[5:45, 5:45] = 1
    lab[20:26, 20:26] = 2  # a label printed on it, parted by the network
    lab[10:30, 50:70] = 3  # an object of its own, outside
    lab[40:44, 47:49] = 4  # small, but not inside anyone's box
    out = fold_inner(lab)
    assert out[22, 22] == out[10, 10] == 1 and out[15, 55] == 2 and out[41, 47] == 3 and out.max() == 3
    assert all(np.array_equal(fold_inner(lab), out) for _ in range(20))
    lab[20:26, 20:26] = 0
    lab[10:40, 10:40] = 2  # inside the box but too large to be a piece of it
    assert np.array_equal(fold_inner(lab), lab)


def test_the_learned_and_refereed_defaults_are_the_rules_the_bench_chose():
    """The curated bench runs chose one rule for the network alone (bench/results/segmenter_referee.json, among
    the variants no worse on the rendered tables than the rule shipped before) and one with the geometry as
    referee (bench/results/segmenter_hybrid.json, among those keeping 0.98 there); the functions' defaults
    must be those, not an older rule."""
    import inspect
    import json

    from bench_common import CURATED

    from cbcl_pr_ros.perception.segmenter import propose_hybrid

    learned_defaults = {k: p.default for k, p in inspect.signature(propose_learned).parameters.items()}
    for family, name in (("alone", "segmenter_referee.json"), ("refereed", "segmenter_hybrid.json")):
        run = json.loads((CURATED / name).read_text(encoding="utf-8"))
        variants = run["learned_leave_one_source_out"]["variants"]
        opts = {"join": None, "inner": False, "min_face": None} | variants[run[f"learned_{family}_chosen_on_all_sources"]]
        assert not opts.pop("combine", False), "a combined variant is no default of propose_learned"
        assert bool(opts.pop("refereed", False)) == (family == "refereed")
        if family == "refereed":
            hybrid = inspect.signature(propose_hybrid).parameters
            for key, off in (("referee_join", None), ("stand", False), ("confirm", None), ("whole", None),
                             ("trim", False), ("absorb", False)):
                assert hybrid[key].default == opts.pop(key, off), key
        else:
            assert not {"referee_join", "stand", "confirm", "whole", "trim", "absorb"} & set(opts)
        assert {k: learned_defaults[k] for k in opts} == opts  # propose_hybrid passes them on


def _reordered(path, tmp_path):
    """The same safetensors file with its header's keys in reverse order (as another process may write it)."""
    import json
    import struct

    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header["__metadata__"] = dict(reversed(list(header["__metadata__"].items())))
    text = json.dumps(dict(reversed(list(header.items())))).encode()
    text += b" " * (-len(text) % 8)
    out = tmp_path / "reordered.safetensors"
    out.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])
    return out


def test_the_same_weights_give_the_same_file_and_install_copies_only_weights_of_their_log(tmp_path, monkeypatch):
    import hashlib
    import json

    import train_segmenter

    path = tmp_path / "seg.safetensors"
    save_file(_weights(), str(path), metadata={"channels": ",".join(CHANNELS), "scenes": "4", "steps": "6"})
    other = _reordered(path, tmp_path)
    assert other.read_bytes() != path.read_bytes()
    assert train_segmenter.canonical_bytes(other) == train_segmenter.canonical_bytes(path)
    path.write_bytes(train_segmenter.canonical_bytes(path))
    assert train_segmenter.canonical_bytes(path) == path.read_bytes()  # already canonical: unchanged
    seg = load_segmenter(path)
    assert all(np.array_equal(seg.weights[k], v) for k, v in _weights().items())
    # install: into the package (here a temporary one), refused for a log of other weights
    shipped = tmp_path / "pkg" / "segmenter.safetensors"
    monkeypatch.setattr(train_segmenter, "SHIPPED_WEIGHTS", shipped)
    monkeypatch.setattr(train_segmenter, "SHIPPED_LOG", shipped.with_name("log.json"))
    log = tmp_path / "log.json"
    log.write_text(json.dumps({"weights_bytes": path.stat().st_size, "weights_sha256": "0" * 64}))
    with pytest.raises(ValueError, match="log of other weights"):
        train_segmenter.install(other, log)
    assert not shipped.exists()
    log.write_text(json.dumps({"weights_bytes": path.stat().st_size}))
    train_segmenter.install(other, log)
    assert shipped.read_bytes() == path.read_bytes()
    assert json.loads(shipped.with_name("log.json").read_text())["weights_sha256"] == \
        hashlib.sha256(path.read_bytes()).hexdigest()


def test_visible_area_is_the_pixels_footprint_at_their_depth_whatever_the_image_size():
    from cbcl_pr_ros.perception import CameraIntrinsics
    from cbcl_pr_ros.perception.segmenter import visible_area_m2

    z = np.full((60, 80), 0.5)
    m = np.zeros((60, 80), bool)
    m[10:30, 20:40] = True  # 400 pixels at 0.5 m, f = 100 px: 5 mm a pixel, 10 cm a side
    K = CameraIntrinsics(100.0, 100.0, 40.0, 30.0)
    assert visible_area_m2(m, z, K) == pytest.approx(0.01)
    half = m[::2, ::2]  # the same object in an image half the size
    assert visible_area_m2(half, z[::2, ::2], K.scaled(0.5, 0.5)) == pytest.approx(0.01)
    assert visible_area_m2(m, np.full((60, 80), np.nan), K) == 0.0  # no reading: no area


def test_small_objects_beside_a_larger_one_are_dropped_and_a_lone_one_only_without_keep_lone():
    from cbcl_pr_ros.perception import CameraIntrinsics
    from cbcl_pr_ros.perception.segmenter import drop_small

    K = CameraIntrinsics(100.0, 100.0, 40.0, 30.0)  # at 0.5 m a pixel is 5 mm: a 4 cm face is 64 pixels
    z = np.full((60, 80), 0.5)
    lab = np.zeros((60, 80), np.int32)
    lab[5:35, 5:35] = 1  # 15 cm: an object
    lab[5:10, 35:40] = 2  # 2.5 cm beside it: a piece of it
    lab[45:50, 60:65] = 3  # 2.5 cm, nothing beside it
    lab[40:52, 5:17] = 4  # 6 cm, apart: an object
    out = drop_small(lab, z, K, 0.04)
    assert out[6, 36] == 0 and out[46, 61] > 0 and out[10, 10] > 0 and out[45, 10] > 0 and out.max() == 3
    out = drop_small(lab, z, K, 0.04, keep_lone=False)
    assert out[6, 36] == 0 and out[46, 61] == 0 and out.max() == 2
    assert all(np.array_equal(drop_small(lab, z, K, 0.04), drop_small(lab, z, K, 0.04)) for _ in range(20))
    kept = drop_small(lab, z, K, 0.0)  # nothing is smaller than nothing: all kept (renumbered row by row)
    assert ((kept > 0) == (lab > 0)).all() and kept.max() == 4


def test_pieces_inside_one_region_of_the_referee_are_joined_and_across_two_are_not():
    from cbcl_pr_ros.perception.segmenter import join_within

    z = _slanted_table()
    lab = _two_pieces()
    one = np.zeros_like(lab)
    one[5:45, 5:55] = 7  # the geometry saw one object around both
    out = join_within(lab, one, z, 3.0)
    assert np.unique(out).tolist() == [0, 1] and ((out > 0) == (lab > 0)).all()
    two = np.zeros_like(lab)
    two[5:45, 5:30], two[5:45, 30:55] = 1, 2  # the geometry parted them
    assert np.array_equal(join_within(lab, two, z, 3.0), lab)
    assert np.array_equal(join_within(lab, np.zeros_like(lab), z, 3.0), lab)
    assert all(np.array_equal(join_within(lab, one, z, 3.0), out) for _ in range(20))


def _standing_pieces() -> tuple[np.ndarray, np.ndarray]:
    """Labels and heights (m) of a 50 x 60 view: piece 1 stands on the table (its lower rows read 2 mm, the
    table's level), piece 2 touches it above and reads 6-12 cm everywhere inside but 0 on its own border
    (the network's border pixels reading the table behind), piece 3 stands apart on the table."""
    lab = np.zeros((50, 60), np.int32)
    height = np.zeros((50, 60))
    lab[20:40, 10:30] = 1
    height[20:40, 10:30] = np.linspace(0.06, 0.002, 20)[:, None]
    lab[8:20, 12:28] = 2
    height[8:20, 12:28] = 0.12 - 0.005 * np.arange(12)[:, None]
    height[8, 12:28] = 0.0  # its border reads the table behind it
    lab[20:40, 40:55] = 3
    height[20:40, 40:55] = np.linspace(0.08, 0.002, 20)[:, None]
    return lab, height


def _same_parts(a: np.ndarray, b: np.ndarray) -> bool:
    """The same objects, whatever their numbers."""
    pairs = np.unique(np.stack([a.ravel(), b.ravel()]), axis=1)
    return len(pairs[0]) == len(np.unique(a)) == len(np.unique(b))


def test_a_piece_that_does_not_reach_the_support_joins_the_piece_below_it_in_one_referee_region():
    from cbcl_pr_ros.perception.segmenter import join_hanging

    lab, height = _standing_pieces()
    floor = np.full(lab.shape, 0.008)  # what the depth noise alone can give
    one = np.zeros_like(lab)
    one[5:45, 5:58] = 4  # the geometry saw one object around all three
    out = join_hanging(lab, one, height, floor)
    assert out[10, 20] == out[30, 20] > 0  # the hanging piece is the standing one's
    assert out[30, 45] > 0 and out[30, 45] != out[30, 20]  # both reach the table: two objects
    assert out.max() == 2 and ((out > 0) == (lab > 0)).all()
    apart = one.copy()
    apart[5:20, 5:58] = 5  # the geometry parted the upper piece: never joined across regions
    assert _same_parts(join_hanging(lab, apart, height, floor), lab)
    assert np.array_equal(join_hanging(lab, np.zeros_like(lab), height, floor), lab)
    gap = lab.copy()
    gap[17:20] = 0  # three pixels between them: it touches no piece, so nothing is below it
    assert _same_parts(join_hanging(gap, one, height, floor), gap)
    unread = height.copy()
    unread[9:20, 12:28] = np.nan  # no reading inside it: not judged
    assert _same_parts(join_hanging(lab, one, unread, floor), lab)
    assert all(np.array_equal(join_hanging(lab, one, height, floor), out) for _ in range(20))
    # where the point below each reading meets the table: the upper piece rests on the lower one (its feet
    # 12 rows down), or on itself (a low flat object seen from above: its sides hidden, it stands)
    rows, cols = np.indices(lab.shape)
    rests = np.stack([np.where(lab == 2, rows + 12, rows), cols])
    assert np.array_equal(join_hanging(lab, one, height, floor, rests), out)
    flat = np.stack([rows, cols])
    assert _same_parts(join_hanging(lab, one, height, floor, flat), lab)
    off = np.full_like(flat, -1)  # no feet seen: nothing it rests on
    assert _same_parts(join_hanging(lab, one, height, floor, off), lab)
    assert all(np.array_equal(join_hanging(lab, one, height, floor, rests), out) for _ in range(20))


def test_the_geometry_referees_pieces_and_merges_of_the_learned_proposals():
    from cbcl_pr_ros.perception.segmenter import part_merged

    s = (100, 100)
    body, label = _prop(s, (10, 10, 40, 40), 0.9), _prop(s, (40, 10, 46, 20), 0.95)  # one object, two pieces
    pair = _prop(s, (50, 50, 90, 70), 0.8)  # two touching objects the network took for one
    lone = _prop(s, (5, 80, 15, 90), 0.7)  # an object the geometry missed
    geometry = [_prop(s, (8, 8, 48, 42)), _prop(s, (50, 50, 70, 70)), _prop(s, (70, 50, 90, 70))]
    out = part_merged([body, label, pair, lone], geometry)
    assert sorted(p.box for p in out) == sorted([(10, 10, 40, 40), (50, 50, 70, 70), (70, 50, 90, 70), (5, 80, 15, 90)])
    assert [p.score for p in out] == sorted((p.score for p in out), reverse=True)
    assert part_merged([body], []) == [body] and part_merged([], geometry) == []
    assert all([p.box for p in part_merged([body, label, pair, lone], geometry)] == [p.box for p in out]
               for _ in range(20))


def test_a_geometry_proposal_holding_one_clipped_learned_object_takes_its_place_with_whole():
    from cbcl_pr_ros.perception.segmenter import part_merged

    s = (100, 100)
    body = _prop(s, (20, 20, 40, 40), 0.9)  # the network's object: the lower part of what the depth bounds
    toy = _prop(s, (10, 5, 40, 40), 0.5)  # the geometry: the whole toy, ears included (400 of 1050 pixels)
    pair = [_prop(s, (60, 60, 75, 80), 0.8), _prop(s, (75, 60, 90, 80), 0.7)]  # two objects the network parts ...
    merged = _prop(s, (55, 55, 95, 85), 0.6)  # ... inside one geometry proposal (each under half of it)
    assert sorted(p.box for p in part_merged([body, *pair], [toy, merged])) == [(20, 20, 40, 40), (60, 60, 75, 80)]
    out = part_merged([body, *pair], [toy, merged], whole=0.5)
    assert sorted(p.box for p in out) == [(10, 5, 40, 40), (60, 60, 75, 80)]  # the pair's geometry stays out
    assert sorted(p.box for p in part_merged([body], [toy], whole=0.3)) == [(20, 20, 40, 40)]  # 0.38 of it: stays
    assert all([p.box for p in part_merged([body, *pair], [toy, merged], whole=0.5)] == [p.box for p in out]
               for _ in range(20))


def test_the_same_frame_gives_the_same_refereed_proposals_twenty_times():
    from cbcl_pr_ros.perception.segmenter import propose_hybrid

    rgb, depth, K, _ = _frame()
    seg = Segmenter(_protrusion_weights())
    first = propose_hybrid(seg, rgb, depth, K)
    assert first and all(p.mask.shape == rgb.shape[:2] for p in first)
    for _ in range(20):
        again = propose_hybrid(seg, rgb, depth, K)
        assert [p.box for p in again] == [p.box for p in first] and [p.score for p in again] == [p.score for p in first]
        assert all(np.array_equal(a.mask, b.mask) for a, b in zip(again, first))
    assert propose_hybrid(seg, rgb, np.full_like(depth, np.nan), K) is None
    for bad in ({"referee_join": 0.0}, {"min_face": -0.1}, {"min_face": float("nan")}, {"confirm": 1.5},
                {"confirm": float("nan")}, {"whole": 0.0}, {"whole": float("nan")}):
        with pytest.raises(ValueError):
            propose_hybrid(seg, rgb, depth, K, **bad)
    with pytest.raises(ValueError, match="referee"):
        propose_learned(seg, rgb, depth, K, referee=np.zeros((3, 3), np.int32), referee_join=3.0)


def _small_flat_scene():
    """A 15 cm object and, apart from it, a flat one (12 x 12 pixels at 0.6 m: a 2.6 cm face, 2 cm high)
    that shows less than a 4 cm face."""
    return scene([SynthObject((60, 80, 130, 150), 0.08, (200, 40, 40)),
                  SynthObject((200, 100, 212, 112), 0.02, (40, 40, 200))], seed=1)


def test_a_small_flat_object_the_geometry_bounds_too_is_kept_by_the_hybrid():
    from cbcl_pr_ros.perception import propose
    from cbcl_pr_ros.perception.segmenter import propose_hybrid

    rgb, depth, K, _ = _small_flat_scene()
    small = (200, 100, 212, 112)
    assert small in [p.box for p in propose(rgb, depth, K)]  # the geometry finds it
    seg = Segmenter(_protrusion_weights())
    assert small not in [p.box for p in propose_learned(seg, rgb, depth, K)]  # the face rule drops it alone
    first = propose_hybrid(seg, rgb, depth, K)
    assert small in [p.box for p in first] and len(first) == 2
    assert small not in [p.box for p in propose_hybrid(seg, rgb, depth, K, confirm=None)]  # without the rule
    for _ in range(20):
        again = propose_hybrid(seg, rgb, depth, K)
        assert [p.box for p in again] == [p.box for p in first] and [p.score for p in again] == [p.score for p in first]
        assert all(np.array_equal(a.mask, b.mask) for a, b in zip(again, first))
    with pytest.raises(ValueError, match="confirm"):
        propose_hybrid(seg, rgb, depth, K, confirm=0.0)


def test_a_small_object_covering_a_geometry_region_is_confirmed_and_a_piece_of_one_is_not():
    from cbcl_pr_ros.perception import CameraIntrinsics
    from cbcl_pr_ros.perception.segmenter import confirmed, drop_small

    K = CameraIntrinsics(100.0, 100.0, 40.0, 30.0)  # at 0.5 m a pixel is 5 mm: a 4 cm face is 64 pixels
    z = np.full((60, 80), 0.5)
    lab = np.zeros((60, 80), np.int32)
    lab[5:35, 5:35] = 1  # 15 cm: an object
    lab[5:10, 35:40] = 2  # 2.5 cm beside it: a piece the network parted
    lab[45:50, 60:65] = 3  # 2.5 cm, apart: a small object
    ref = np.zeros_like(lab)
    ref[5:35, 5:40] = 1  # the geometry: the object and its piece as one
    ref[44:51, 59:66] = 2  # the small object, a little wider
    assert confirmed(lab, ref, 0.5).tolist() == [False, True, False, True]
    assert confirmed(lab, np.zeros_like(ref), 0.5).tolist() == [False] * 4
    out = drop_small(lab, z, K, 0.04, keep_lone=False, referee=ref, confirm=0.5)
    assert out[6, 36] == 0 and out[46, 61] > 0 and out.max() == 2
    assert drop_small(lab, z, K, 0.04, keep_lone=False, referee=ref)[46, 61] == 0  # no confirm: dropped as before
    assert all(np.array_equal(drop_small(lab, z, K, 0.04, False, ref, 0.5), out) for _ in range(20))


def test_a_small_piece_inside_a_larger_objects_geometry_region_is_given_to_it_with_absorb():
    from cbcl_pr_ros.perception import CameraIntrinsics
    from cbcl_pr_ros.perception.segmenter import drop_small

    K = CameraIntrinsics(100.0, 100.0, 40.0, 30.0)  # at 0.5 m a pixel is 5 mm: a 4 cm face is 64 pixels
    z = np.full((60, 80), 0.5)
    lab = np.zeros((60, 80), np.int32)
    lab[10:35, 5:30] = 1  # a toy's body
    lab[4:10, 8:14] = 2  # its ear, parted by the network: 3 cm
    lab[40:55, 40:55] = 3  # another object
    lab[40:45, 60:65] = 4  # a piece in no object's region: dropped
    ref = np.zeros_like(lab)
    ref[3:36, 4:31] = 1  # the geometry: the toy, ear included
    ref[39:56, 39:56] = 2
    out = drop_small(lab, z, K, 0.04, keep_lone=False, referee=ref, absorb=True)
    assert out[6, 10] == out[20, 20] > 0 and out[42, 62] == 0 and out.max() == 2
    assert drop_small(lab, z, K, 0.04, keep_lone=False, referee=ref)[6, 10] == 0  # without absorb: dropped
    assert np.array_equal(drop_small(lab, z, K, 0.04, keep_lone=False, absorb=True),
                          drop_small(lab, z, K, 0.04, keep_lone=False))  # no referee: nothing to say whose
    assert all(np.array_equal(drop_small(lab, z, K, 0.04, False, ref, absorb=True), out) for _ in range(20))


def test_a_masks_outline_at_the_support_level_is_trimmed_and_its_box_stays():
    from cbcl_pr_ros.perception import CameraIntrinsics
    from cbcl_pr_ros.perception.proposals import _Plane
    from cbcl_pr_ros.perception.segmenter import trim_outline

    K = CameraIntrinsics(100.0, 100.0, 30.0, 20.0)
    plane = _Plane(np.array([0.0, 0.0, -1.0]), 1.0, 1.0)  # a wall-like support 1 m ahead: height = 1 - z
    depth = np.full((40, 60), 1.0)  # the support's level everywhere ...
    depth[12:28, 22:38] = 0.9  # ... but an object 10 cm in front of it
    depth[12, 22:38] = np.nan  # its top row without a reading
    m = np.zeros((40, 60), bool)
    m[8:32, 18:42] = True  # its mask four pixels too wide: the work size's blocks
    p = Proposal((18, 8, 42, 32), m, np.zeros(3), np.zeros(3), 0.7)
    out = trim_outline([p], depth, K, plane, (0.005, 0.0), 4)
    assert len(out) == 1 and out[0].box == p.box and out[0].score == 0.7  # the box: the object's extent
    assert (out[0].mask == ((depth < 0.95) | np.isnan(depth))).all()
    inner = np.zeros_like(m)
    inner[14:26, 24:36] = True  # an outline all above the level: unchanged
    q = Proposal((24, 14, 36, 26), inner, np.zeros(3), np.zeros(3), 0.5)
    assert trim_outline([q], depth, K, plane, (0.005, 0.0), 4)[0] is q
    flat = np.zeros_like(m)
    flat[30:34, 2:6] = True  # every pixel at the level (a flat object in the noise): the mask stays whole
    r = Proposal((2, 30, 6, 34), flat, np.zeros(3), np.zeros(3), 0.1)
    assert trim_outline([r], depth, K, plane, (0.005, 0.0), 4)[0] is r
    assert all(np.array_equal(trim_outline([p], depth, K, plane, (0.005, 0.0), 4)[0].mask, out[0].mask)
               for _ in range(20))


def test_the_hybrid_estimates_the_support_plane_once(monkeypatch):
    import cbcl_pr_ros.perception.proposals as proposals
    import cbcl_pr_ros.perception.segmenter as segmenter

    calls = []

    def counted(points, config):
        calls.append(len(points))
        return proposals.support_planes.__wrapped__(points, config)

    counted.__wrapped__ = proposals.support_planes
    monkeypatch.setattr(proposals, "support_planes", counted)
    monkeypatch.setattr(segmenter, "support_planes", counted)
    rgb, depth, K, _ = _small_flat_scene()
    seg = Segmenter(_protrusion_weights())
    assert segmenter.propose_hybrid(seg, rgb, depth, K)
    assert len(calls) == 1
    calls.clear()
    assert segmenter.propose_learned(seg, rgb, depth, K)  # alone it estimates its own
    assert len(calls) == 1
    props, plane = proposals.propose_on_support(rgb, depth, K)
    assert plane is not None and [p.box for p in props] == [p.box for p in proposals.propose(rgb, depth, K)]
    assert proposals.propose_on_support(rgb, None, K)[1] is None  # the RGB method: no plane


def test_the_onnx_forward_pass_matches_numpys_for_any_weights_and_size(tmp_path):
    pytest.importorskip("onnxruntime")
    for seed in (0, 1):
        fast, plain = Segmenter(_weights(seed)), Segmenter(_weights(seed), backend="numpy")
        assert fast.runs_on == "onnx" and plain.runs_on == "numpy"
        x = np.random.default_rng(seed).normal(0, 1, (len(CHANNELS), 37, 50)).astype(np.float32)
        a, b = fast.outputs(x), plain.outputs(x)
        assert a.shape == b.shape == (len(OUTPUTS), 37, 50) and a.dtype == np.float32
        np.testing.assert_allclose(a, b, atol=1e-4)
        assert not np.array_equal(fast.outputs(x + 1.0), a)  # it runs on its input, not a cached answer
    path = tmp_path / "other.safetensors"  # any file of the network's shapes loads onto the same backend
    save_file(_weights(3), str(path))
    seg = load_segmenter(path)
    assert seg.runs_on == "onnx"
    np.testing.assert_allclose(seg.outputs(x), Segmenter(_weights(3), backend="numpy").outputs(x), atol=1e-4)
    with pytest.raises(ValueError):
        Segmenter(_weights(), backend="cuda")


def test_the_onnx_and_numpy_passes_give_the_same_proposals(weights_file):
    rgb, depth, K, _ = _frame()
    a = propose_learned(Segmenter(_protrusion_weights()), rgb, depth, K, plane=False)
    b = propose_learned(Segmenter(_protrusion_weights(), backend="numpy"), rgb, depth, K, plane=False)
    assert a and [p.box for p in a] == [p.box for p in b]
    assert all(np.array_equal(p.mask, q.mask) for p, q in zip(a, b))
    np.testing.assert_allclose([p.score for p in a], [p.score for p in b], atol=1e-5)


def test_the_onnx_pass_gives_the_same_bits_in_another_process_and_after_pickling(weights_file):
    import pickle
    import subprocess
    import sys
    pytest.importorskip("onnxruntime")
    rgb, depth, K, _ = _frame()
    feats = input_features(rgb, depth, K)
    seg = load_segmenter(weights_file)
    here = seg.outputs(feats)
    again = pickle.loads(pickle.dumps(seg))  # the session is rebuilt from the weights
    assert again.runs_on == "onnx" and np.array_equal(again.outputs(feats), here)
    np.save(weights_file.with_suffix(".npy"), feats)
    code = ("import sys, numpy as np; from cbcl_pr_ros.perception.segmenter import load_segmenter; "
            "sys.stdout.buffer.write(load_segmenter(sys.argv[1]).outputs(np.load(sys.argv[2])).tobytes())")
    out = subprocess.run([sys.executable, "-c", code, str(weights_file), str(weights_file.with_suffix(".npy"))],
                         capture_output=True, check=True).stdout
    assert out == here.tobytes()
