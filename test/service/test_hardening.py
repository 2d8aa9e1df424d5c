"""Issue 11 without ROS: request limits, memory files confined to memory_dir, memory-file validation,
and the controller's answers to hostile or careless requests (nothing changes, nothing is lost)."""
from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest
from safetensors.numpy import save as st_save

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, MemoryFileError, state_from_bytes
from cbcl_pr_ros.core import persistence
from cbcl_pr_ros.service.controller import LearnerController
from cbcl_pr_ros.service.memory_files import MemoryAccessError, MemoryStore, memory_dir_for
from cbcl_pr_ros.settings.params import feature_dim_for, validate_parameter
from cbcl_pr_ros.request_checks import (
    MAX_LABEL_CHARS,
    RequestError,
    RequestLimits,
    check_feature_values,
    check_image_fields,
    check_label,
    check_num_frames,
    check_timeout,
)

D = 8


def _learner(dim: int = D, **cfg) -> CBCLPRLearner:
    return CBCLPRLearner(LearnerConfig(seed=0, **cfg), backbone="synthetic", feature_dim=dim)


def _controller(tmp_path, name="memory.safetensors", **kw) -> LearnerController:
    store = MemoryStore(str(tmp_path), name, **kw)
    return LearnerController(lambda d: _learner(d), "synthetic", D, store)


def _blob(seed: int, centre: float, n: int = 6) -> np.ndarray:
    return (np.random.default_rng(seed).normal(0, 0.3, (n, D)) + centre).astype(np.float32)


def _taught(tmp_path, **kw) -> LearnerController:
    c = _controller(tmp_path, **kw)
    for i, (label, centre) in enumerate([("mug", 3.0), ("box", -3.0), ("cup", 0.0)]):
        assert c.teach(label, _blob(i, centre)).success
    return c


# ------------------------------------------------------------------ request limits
def test_labels_are_printable_bounded_and_never_echoed_raw():
    assert check_label("  Tasse à café 2 ") == "Tasse à café 2"
    for bad, why in [("", "empty"), ("   ", "empty"), ("a\x00b", r"U\+0000"), ("evil\nINFO forged", r"U\+000A"),
                     ("x" * (MAX_LABEL_CHARS + 1), f"the most is {MAX_LABEL_CHARS}"), ("\u202eabc", r"U\+202E")]:
        with pytest.raises(RequestError, match=why) as err:
            check_label(bad)
        assert "\n" not in str(err.value) and len(str(err.value)) < 200
    with pytest.raises(RequestError, match="string"):
        check_label(b"bytes")


def test_timeouts_frames_images_and_values_are_capped():
    assert check_timeout(0.0, 10.0, 60.0) == 10.0 and check_timeout(0.0, 100.0, 60.0) == 60.0
    assert check_timeout(2.5, 10.0, 60.0) == 2.5
    for bad in (float("inf"), float("nan"), -1.0, 1e10, 61.0):
        with pytest.raises(RequestError):
            check_timeout(bad, 10.0, 60.0)
    assert check_num_frames(0, 10, 100) == 10 and check_num_frames(5, 10, 100) == 5
    with pytest.raises(RequestError, match="cap of 100"):
        check_num_frames(4_000_000_000, 10, 100)
    lim = RequestLimits(max_image_pixels=100, max_image_bytes=1000)
    check_image_fields(10, 10, 30, 300, lim)
    with pytest.raises(RequestError, match="pixels"):
        check_image_fields(11, 10, 33, 330, lim)
    with pytest.raises(RequestError, match="bytes of data"):
        check_image_fields(1, 1, 3, 1001, lim)
    with pytest.raises(RequestError, match="exceeds"):
        check_image_fields(10, 10, 30, 299, lim)
    check_feature_values(np.ones((2, 3)), 10.0)
    with pytest.raises(RequestError, match="most accepted"):
        check_feature_values(np.full((1, 3), 3e38, np.float32), 1e6)
    with pytest.raises(RequestError, match="NaN"):
        check_feature_values(np.array([[np.inf]]), 1e6)
    assert RequestLimits.from_params({"max_teach_frames": 7, "other": 1}).max_teach_frames == 7


def test_feature_width_comes_from_the_backbone():
    assert feature_dim_for({"backbone": "efficientnet_lite0", "feature_dim": 0}) == 1280
    assert feature_dim_for({"backbone": "resnet18", "feature_dim": 0}) == 512
    assert feature_dim_for({"backbone": "mine", "feature_dim": 7}) == 7
    with pytest.raises(ValueError, match="contradicts"):
        feature_dim_for({"backbone": "resnet18", "feature_dim": 7})
    with pytest.raises(ValueError, match="set feature_dim"):
        feature_dim_for({"backbone": "mine", "feature_dim": 0})


def test_a_fresh_learner_refuses_another_width_and_nothing_is_fixed(tmp_path):
    c = _controller(tmp_path)
    out = c.teach("tiny", np.ones((3, 3), np.float32))
    assert not out.success and "does not match the backbone's 8" in out.message
    assert c.classes == [] and c.feature_dim == D
    assert c.teach("mug", _blob(0, 3.0)).success  # the backbone's width still works


def test_memory_parameters_are_never_expanded():
    assert validate_parameter("memory_dir", "") is None
    assert validate_parameter("memory_dir", "/var/lib/robot") is None
    assert "absolute" in validate_parameter("memory_dir", "~/.ros")
    assert "absolute" in validate_parameter("memory_dir", "$HOME/x")
    assert validate_parameter("memory_path", "memory.safetensors") is None
    assert validate_parameter("memory_path", "/abs/m.safetensors") is None
    for bad in ("~/m", "$HOME/m", "../m", "a/b", ".hidden"):
        assert validate_parameter("memory_path", bad), bad
    assert memory_dir_for("", "/data/mem/m.safetensors") == ("/data/mem", "m.safetensors")
    assert memory_dir_for("/data/mem", "m.safetensors") == ("/data/mem", "m.safetensors")
    with pytest.raises(ValueError, match="not inside"):
        memory_dir_for("/data/mem", "/etc/m.safetensors")


# ------------------------------------------------------------------ memory files
def test_names_outside_the_directory_are_refused_without_revealing_anything(tmp_path):
    store = MemoryStore(str(tmp_path / "mem"))
    secret = tmp_path / "secret.txt"
    secret.write_text("x" * 1234)
    for name in ("../secret.txt", "a/b", "~/.ssh/authorized_keys", "$HOME", ".hidden", "..", ".", "x\x00y",
                 str(secret), "x" * 200):
        with pytest.raises(MemoryAccessError) as err:
            store.read(name)
        msg = str(err.value)
        assert "1234" not in msg  # nothing about files outside (their size, existence)
        if name != str(secret):
            assert str(tmp_path) not in msg
        with pytest.raises(MemoryAccessError):
            store.write(name, b"data")
    assert "allow_absolute_paths" in _refusal(store, str(secret))
    assert not (tmp_path / "mem" / ".ssh").exists() and secret.read_text() == "x" * 1234


def _refusal(store, name):
    with pytest.raises(MemoryAccessError) as err:
        store.read(name)
    return str(err.value)


def test_links_fifos_devices_and_big_files_are_refused(tmp_path):
    mem = tmp_path / "mem"
    store = MemoryStore(str(mem), max_bytes=1000)
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep me")
    (mem / "link").symlink_to(outside)
    assert "symbolic link" in _refusal(store, "link")
    with pytest.raises(MemoryAccessError, match="not a regular file"):
        store.write("link", b"evil")
    assert outside.read_bytes() == b"keep me"
    os.mkfifo(mem / "fifo")
    t0 = time.monotonic()
    assert "not a regular file" in _refusal(store, "fifo")  # answered at once, not blocked
    assert time.monotonic() - t0 < 5.0
    (mem / "big").write_bytes(b"\0" * 1001)
    assert "1001 bytes" in _refusal(store, "big")
    with pytest.raises(MemoryAccessError, match="max_memory_file_bytes"):
        store.write("too_big", b"\0" * 1001)  # never a file it would refuse to read back
    assert not (mem / "too_big").exists()
    absolute = MemoryStore(str(mem), allow_absolute=True)
    assert "not a regular file" in _refusal(absolute, "/dev/zero")
    with pytest.raises(MemoryAccessError, match="not a regular file"):
        absolute.write("/dev/null", b"x")


def test_writes_are_atomic_private_and_stale_temp_files_go(tmp_path):
    store = MemoryStore(str(tmp_path))
    size, shown = store.write("m.safetensors", b"abc")
    assert (size, shown) == (3, "m.safetensors")
    assert (tmp_path / "m.safetensors").stat().st_mode & 0o077 == 0
    (tmp_path / ".m.safetensors.0123456789abcdef.tmp").write_bytes(b"half a save")
    (tmp_path / ".unrelated.tmp").write_bytes(b"not ours")
    assert store.remove_stale_temp() == [".m.safetensors.0123456789abcdef.tmp"]
    assert sorted(os.listdir(tmp_path)) == [".unrelated.tmp", "m.safetensors"]


# ------------------------------------------------------------------ memory-file validation
def _rewrite(blob: bytes, edit, recompute: bool = True) -> bytes:
    """The file with ``edit(tensors, meta)`` applied and (as a forger would) its checksum recomputed."""
    tensors, meta = persistence._parse(blob, "x")
    tensors = {k: v.copy() for k, v in tensors.items()}
    edit(tensors, meta)
    if recompute:
        meta["sha256"] = persistence._checksum(tensors, meta)
    return st_save(tensors, metadata={"cbcl_pr": json.dumps(meta)})


@pytest.fixture
def saved():
    lrn = _learner()
    lrn.teach_increment({"mug": _blob(0, 3.0), "box": _blob(1, -3.0)})
    return persistence.state_to_bytes(lrn.to_state())


def _set(key, value):
    return lambda t, m: m.__setitem__(key, value)


@pytest.mark.parametrize("edit, why", [
    (_set("classes", ["mug", "mug"]), "duplicate class names"),
    (_set("classes", ["mug", "bo\nx"]), "unprintable|control"),
    (_set("classes", ["mug"]), "owners must index"),
    (_set("distance_threshold", 0.0), "D must be"),
    (_set("distance_threshold", -2.0), "D must be"),
    (_set("feature_dim", D + 1), "shape"),
    (_set("feature_dim", 10**9), "feature_dim must be"),
    (lambda t, m: m["config"].__setitem__("max_clusters", 1), "smaller than the 2 classes"),
    (lambda t, m: t.__setitem__("means", t["means"][:, :-1].copy()), "means has shape"),
    # (format 3: the classes' means are in "means" or "means.f16", whichever dtype they were stored in)
    (lambda t, m: t[max(("means", "means.f16"), key=lambda k: t[k].size)].__setitem__((0, 0), np.nan), "NaN"),
    (lambda t, m: t.__setitem__("extra", np.zeros(3, np.float32)), "do not match the layout"),
    (lambda t, m: t.__setitem__("counts", t["counts"].astype(np.float32)), "dtype"),
    (lambda t, m: (t.__setitem__("head.weight", np.zeros((3, D), np.float32)),
                   t.__setitem__("head.bias", np.zeros(3, np.float32)), m.__setitem__("head_kind", "linear_sgd")),
     "head.weight has shape"),
])
def test_edited_files_are_refused_even_with_a_recomputed_checksum(saved, edit, why):
    with pytest.raises(MemoryFileError, match=why):
        state_from_bytes(_rewrite(saved, edit), "m", expected_backbone="synthetic")


def test_metadata_is_covered_by_the_checksum(saved):
    edited = _rewrite(saved, _set("classes", ["box", "mug"]), recompute=False)
    with pytest.raises(MemoryFileError, match="checksum"):
        state_from_bytes(edited, "m")
    state = state_from_bytes(saved, "m")
    assert state.memory.classes == ("mug", "box")


# ------------------------------------------------------------------ controller
def test_load_checks_exercises_and_never_autosaves_a_refused_file(tmp_path):
    c = _taught(tmp_path)
    default = (tmp_path / "memory.safetensors").read_bytes()
    (tmp_path / "evil.safetensors").write_bytes(_rewrite(default, _set("classes", ["a", "a", "b"])))
    v = c.model_version
    out = c.load("evil.safetensors")
    assert not out.success and "duplicate" in out.message
    assert (out.num_classes, out.model_version) == (3, v)
    assert (tmp_path / "memory.safetensors").read_bytes() == default  # not autosaved
    assert c.classify(_blob(5, -3.0, 1)).predictions[0].label == "box"


def test_model_version_never_goes_backwards_after_a_load(tmp_path):
    c = _taught(tmp_path)
    assert c.save("old.safetensors")[0]
    for i in range(3):
        assert c.teach("mug", _blob(10 + i, 3.0)).success
    v = c.model_version
    out = c.load("old.safetensors")
    assert out.success and out.model_version > v and c.model_version == out.model_version
    assert out.num_classes == 3


def test_failed_teach_reports_the_classes_known(tmp_path):
    c = _taught(tmp_path)
    out = c.teach("", _blob(0, 1.0))
    assert not out.success and out.num_classes == 3 and out.model_version == c.model_version
    assert c.refused("x").num_classes == 3


def test_classify_reports_the_version_of_the_snapshot_that_answered(tmp_path):
    c = _taught(tmp_path)
    stop = threading.Event()

    def teach_loop():
        i = 0
        while not stop.is_set():
            c.teach("mug", _blob(100 + i, 3.0, 2))
            i += 1

    t = threading.Thread(target=teach_loop)
    t.start()
    try:
        for _ in range(50):
            lrn_before = c.learner_.model_version_
            out = c.classify(_blob(1, -3.0, 1))
            assert out.success and out.model_version >= lrn_before
    finally:
        stop.set()
        t.join()
    preds, version = c.learner_.predict_versioned(_blob(1, -3.0, 1))
    assert version == c.model_version and preds[0].label == "box"


def test_startup_removes_stale_temp_files_and_moves_a_bad_default_aside(tmp_path):
    _taught(tmp_path)
    (tmp_path / ".memory.safetensors.00000000deadbeef.tmp").write_bytes(b"torn")
    again = _controller(tmp_path)
    msg = again.load_at_startup()
    assert "loaded 3 classes" in msg and "removed 1 stale" in msg
    assert not list(tmp_path.glob("*.tmp")) and again.classes == ["mug", "box", "cup"]
    (tmp_path / "memory.safetensors").write_bytes(b"\0" * 40)
    fresh = _controller(tmp_path)
    assert "moved to" in fresh.load_at_startup() and fresh.classes == []
    assert list(tmp_path.glob("memory.safetensors.unreadable-*"))


def test_strict_startup_fails_on_a_bad_default_and_leaves_the_file(tmp_path):
    """The lifecycle node's configure: a file that cannot be served fails the start, untouched."""
    from cbcl_pr_ros.service.controller import MemoryLoadError

    bad = b"\0" * 40
    (tmp_path / "memory.safetensors").write_bytes(bad)
    c = _controller(tmp_path)
    with pytest.raises(MemoryLoadError, match="left as it is"):
        c.load_at_startup(move_aside=False)
    assert (tmp_path / "memory.safetensors").read_bytes() == bad
    assert not list(tmp_path.glob("*.unreadable-*")) and c.classes == []
    assert c.store._dir_fd == -1  # the refused start let the memory directory go
    good = tmp_path / "good"
    good.mkdir()
    _taught(good)
    assert "loaded 3 classes" in _controller(good).load_at_startup(move_aside=False)


def test_a_failed_autosave_undoes_the_change_and_nothing_is_left_unsaved(tmp_path, monkeypatch):
    c = _taught(tmp_path)
    assert c.save_if_unsaved() == (True, "its 3 classes stay saved in 'memory.safetensors'")
    real = c.store.write

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(c.store, "write", full_disk)
    out = c.teach("pot", _blob(7, 6.0))
    assert not out.success and "No space left" in out.message and "pot" not in c.classes
    assert c.last_save_ok_ and c.save_if_unsaved()[0]  # RAM holds only what is on disk
    monkeypatch.setattr(c.store, "write", real)
    assert c.teach("pot", _blob(7, 6.0)).success
    again = _controller(tmp_path)
    again.load_at_startup(move_aside=False)
    assert sorted(again.classes) == ["box", "cup", "mug", "pot"]
    ram = LearnerController(lambda d: _learner(d), "synthetic", D, None)
    assert ram.save_if_unsaved() == (True, "no classes to keep")


def test_absolute_paths_only_when_allowed(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    c = _taught(tmp_path / "mem")
    ok, msg, _, _ = c.save(str(other / "copy.safetensors"))
    assert not ok and "allow_absolute_paths" in msg and not list(other.iterdir())
    c2 = LearnerController(lambda d: _learner(d), "synthetic", D,
                           MemoryStore(str(tmp_path / "mem"), allow_absolute=True))
    assert c2.load("").success
    ok, _, shown, size = c2.save(str(other / "copy.safetensors"))
    assert ok and size > 0 and shown == str(other / "copy.safetensors")


def test_teach_with_bad_views_is_refused_and_changes_nothing(tmp_path):
    c = _taught(tmp_path)
    before = (c.classes, c.learner_.model_version_)
    shots = _blob(7, 6.0, n=3)
    good = np.repeat(shots[:, None, :], 2, axis=1)
    for bad, why in [(np.full_like(good, np.nan), "NaN"), (good[:2], "views must be"), (good[..., :3], "views must be"),
                     (good[:, :1], "k>=2")]:  # one view per image measures no spread: refused, not ignored
        out = c.teach("pan", shots, "images", bad)
        assert not out.success and why in out.message, out.message
        assert (c.classes, c.learner_.model_version_) == before
    out = c.teach("pan", shots, "images", good)
    assert out.success and out.num_examples == 3  # the views are the class's spread, not examples


@pytest.mark.parametrize("key, value", [("epochs", 10**9), ("epochs", 1001), ("exemplars_per_class", 10**7),
                                        ("batch_size", 0), ("lr", 1e30), ("vote_neighbours", 10**6),
                                        ("epochs_per_increment", -1), ("fit_threads", 10_000), ("shrinkage", 2.0)])
def test_a_memory_file_asking_unbounded_work_is_refused_at_once(tmp_path, key, value):
    """Issue 22: a forged config (linear_sgd with 1e9 epochs) made load_memory never answer; every
    numeric config field now has a documented range (persistence.CONFIG_RANGES)."""
    import dataclasses

    from cbcl_pr_ros.core import state_to_bytes

    lrn = _learner(classifier="linear_sgd", epochs=2)
    lrn.teach_increment({"mug": _blob(1, 0.0), "box": _blob(2, 5.0)})
    state = lrn.to_state()
    state = dataclasses.replace(state, config={**state.config, key: value})
    blob = state_to_bytes(state)  # the digest is recomputed: only the ranges can refuse it
    with pytest.raises(MemoryFileError, match=f"config {key} must be"):
        state_from_bytes(blob, "forged")
    c = _taught(tmp_path)
    (tmp_path / "forged.safetensors").write_bytes(blob)
    t0 = time.monotonic()
    out = c.load("forged.safetensors")
    assert not out.success and f"config {key}" in out.message and sorted(c.classes) == ["box", "cup", "mug"]
    assert time.monotonic() - t0 < 600  # a guard against a hang, not a timing claim


def test_config_ranges_cover_every_numeric_config_field_and_the_parameter_ranges():
    import dataclasses

    from cbcl_pr_ros.settings.params import PARAMS, core_name

    numeric = {f.name for f in dataclasses.fields(LearnerConfig)
               if f.type in ("int", "float", "int | None", "float | None")}
    assert numeric == set(persistence.CONFIG_RANGES), numeric ^ set(persistence.CONFIG_RANGES)
    for spec in PARAMS:
        key = core_name(spec) if core_name(spec) in persistence.CONFIG_RANGES else None
        if key is None or spec.min is None:
            continue
        lo, hi, _, _ = persistence.CONFIG_RANGES[key]
        assert hi >= spec.max, (spec.name, hi, spec.max)  # every value a node can be given is loadable
