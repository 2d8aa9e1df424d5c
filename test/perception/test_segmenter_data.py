"""The varied rendered training scenes (``make_scenes(variety=True)``): see-through objects (colour from
behind, depth read through them or lost), unread blotches inside objects, the toy-print textures, and
that a changed scene generator never reuses scenes cached from the one before."""
from __future__ import annotations

import numpy as np
import pytest


def _two_objects() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rgb, depth, behind rgb, behind depth, instance ids): a red object 0 at 0.5 m and a green object 1,
    on a grey table at 0.8 m."""
    h, w = 60, 80
    inst = np.full((h, w), -1, np.int16)
    inst[10:40, 10:35] = 0
    inst[15:45, 45:70] = 1
    rgb = np.full((h, w, 3), 128, np.uint8)
    rgb[inst == 0] = (220, 20, 20)
    rgb[inst == 1] = (20, 220, 20)
    depth = np.where(inst >= 0, 0.5, 0.8).astype(np.float32)
    behind_rgb = np.full((h, w, 3), 128, np.uint8)
    behind_depth = np.full((h, w), 0.8, np.float32)
    return rgb, depth, behind_rgb, behind_depth, inst


def test_a_see_through_object_shows_what_lies_behind_and_keeps_its_surface_only_in_places():
    from segmenter_data import _see_through

    rgb, depth, behind_rgb, behind_depth, inst = _two_objects()
    glass = inst == 0
    out_rgb, out_depth = _see_through(rgb, depth, behind_rgb, behind_depth, glass, inst, np.random.default_rng(3))
    # the opaque object and the table are untouched
    np.testing.assert_array_equal(out_rgb[~glass], rgb[~glass])
    np.testing.assert_array_equal(out_depth[~glass], depth[~glass])
    # the see-through one: its red mostly gone (tinted grey), read through to the table in most of it
    assert out_rgb[glass][:, 0].astype(float).mean() < 0.6 * 220
    through = np.isclose(out_depth[glass], 0.8)
    assert 0.3 < through.mean() < 1.0  # through it, except where its surface reads
    assert np.isclose(out_depth[glass], 0.5).any()
    # the same draw, the same picture
    again = _see_through(rgb, depth, behind_rgb, behind_depth, glass, inst, np.random.default_rng(3))
    np.testing.assert_array_equal(again[0], out_rgb)
    np.testing.assert_array_equal(again[1], out_depth)


def test_unread_surfaces_lose_most_of_a_see_through_object_and_nothing_outside_objects():
    from segmenter_data import _unread_surfaces

    _, depth, _, _, inst = _two_objects()
    glass = inst == 0
    lost = []
    for seed in range(12):
        out = _unread_surfaces(depth, inst, glass, np.random.default_rng(seed))
        assert not np.isnan(out[inst < 0]).any()  # the table keeps its reading
        lost.append(np.isnan(out[glass]).mean())
        assert np.isnan(out[inst == 1]).mean() < 1.0  # an opaque object never vanishes whole
    assert np.mean(lost) > 0.3 and max(lost) > 0.5
    opaque_holes = 0
    for seed in range(40):  # no see-through object: only now and then a blotch inside an object
        out = _unread_surfaces(depth, inst, np.zeros_like(glass), np.random.default_rng(seed))
        assert not np.isnan(out[inst < 0]).any()
        opaque_holes += bool(np.isnan(out).any())
    assert 0 < opaque_holes < 30


def test_procedural_textures_include_many_coloured_prints_and_are_the_same_each_time(tmp_path):
    import cv2
    from segmenter_data import _procedural_textures

    a = _procedural_textures(tmp_path / "a")
    b = _procedural_textures(tmp_path / "b")
    assert len(a) == 25
    plain = _procedural_textures(tmp_path / "c", 12, prints=False)  # the former twelve: stripes to blocks only
    assert len(plain) == 12 and plain[4].read_bytes() != a[4].read_bytes()
    imgs = [cv2.imread(str(p)) for p in a]
    for pa, pb in zip(a, b):
        assert pa.read_bytes() == pb.read_bytes()
    colours = [len(np.unique((im // 32).reshape(-1, 3), axis=0)) for im in imgs]
    assert max(colours[4::5]) > max(colours[0::5])  # the prints hold more colours than two-colour stripes


def test_varied_scenes_include_see_through_objects_and_toy_clutter_and_are_the_same_each_time(tmp_path):
    pytest.importorskip("pybullet")
    from segmenter_data import make_scenes

    data = make_scenes(30, seed=0, texture_dir=tmp_path, variety=True)
    again = make_scenes(3, seed=0, start=27, texture_dir=tmp_path, variety=True)
    for k in ("rgb", "inst", "K"):
        np.testing.assert_array_equal(data[k][27:], again[k])
    np.testing.assert_array_equal(np.nan_to_num(data["depth"][27:], nan=-1), np.nan_to_num(again["depth"], nan=-1))
    plain = make_scenes(3, seed=0, start=27, texture_dir=tmp_path)
    assert not np.array_equal(plain["rgb"], again["rgb"])  # the variety is only where asked for
    counts = [len(np.unique(m[m >= 0])) for m in data["inst"]]
    assert max(counts) >= 8  # crowded tables
    # objects whose inside the depth camera mostly did not read (see-through or unread surfaces)
    holed = 0
    for m, d in zip(data["inst"], data["depth"]):
        for i in np.unique(m[m >= 0]):
            if (m == i).sum() >= 40 and np.isnan(d[m == i].astype(np.float32)).mean() > 0.5:
                holed += 1
    assert holed >= 1


def test_the_scene_cache_is_keyed_by_the_generator_source(tmp_path, monkeypatch):
    import train_segmenter

    digest = train_segmenter.generator_digest()
    assert len(digest) == 12 and int(digest, 16) >= 0
    fake = tmp_path / "train_segmenter.py"
    fake.write_text("")
    (tmp_path / "segmenter_data.py").write_text("# another generator\n")
    monkeypatch.setattr(train_segmenter, "__file__", str(fake))
    assert train_segmenter.generator_digest() != digest
